"""This nczfs's version (``nczfs.__version__``; pyproject.toml says the same), here for modules
below the package's API: ``import nczfs`` from one would close an import cycle through it."""

VERSION = "0.1.0"
