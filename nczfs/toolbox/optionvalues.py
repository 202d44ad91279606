"""The parsers of option values: what ``-o key=value`` and the matching flags accept.

Each takes the text a user gave and returns the value MountConfig keeps, or raises
:class:`~nczfs.toolbox.errors.BadValue` saying why not; the option parser
(``nczfs.config.mountconfig``) names the option and the value in the one form every refused
option takes, :func:`~nczfs.toolbox.errors.option_error`
(``-o KEY=VALUE: reason``; at the CLI ``nczfs: `` before it, exit 2; the Python API's MountError
says the same).
"""

from __future__ import annotations

from typing import Collection

from nczfs.toolbox.errors import BadValue


def integer(key: str, value: str, base: int = 10) -> int:
    try:
        return int(value, base)
    except ValueError:
        raise BadValue({8: "not an octal number"}.get(base, "not a number")) from None


def count(key: str, value: str) -> int:
    n = integer(key, value)
    if n < 0:
        raise BadValue("must not be negative")
    return n


def non_negative(key: str, value: str) -> float:
    try:
        v = float(value)
    except ValueError:
        raise BadValue("not a number") from None
    if v < 0:
        raise BadValue("must not be negative")
    return v


def positive(key: str, value: str) -> float:
    v = non_negative(key, value)
    if v == 0:
        raise BadValue("must be more than 0")
    return v


_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(key: str, value: str) -> int:
    """A byte count: ``536870912``, ``512M``, ``512MiB``, ``2G`` (binary units)."""
    text = value.strip().lower().removesuffix("ib").removesuffix("b")
    unit = text[-1:] if text[-1:] in _UNITS else ""
    try:
        n = float(text[: len(text) - len(unit)])
    except ValueError:
        raise BadValue("not a size (bytes, or a number with K, M, G)") from None
    if not 0 <= n < 2**62:
        raise BadValue("must be a non-negative size")
    return int(n * _UNITS[unit])


def metrics_address(value: str) -> str:
    """``-o metrics=`` / ``--metrics``: ADDR:PORT (checked here, bound at mount time)."""
    from nczfs.toolbox.metrics import parse_address

    parse_address(value)
    return value


def log_level(value: str) -> str:
    """``--log-level`` / ``-o log_level=``: error, warning, info, debug, trace."""
    from nczfs.toolbox.logs import LEVELS

    return one_of(value.strip().lower(), LEVELS, f"must be one of {', '.join(LEVELS)}")


def log_format(value: str) -> str:
    """``--log-format`` / ``-o log_format=``: text or json."""
    return one_of(value, ("text", "json"), "must be text or json")


def validate_mode(value: str) -> str:
    """``-o validate=`` / ``--validate``: off, warn, strict (``on`` = strict)."""
    mode = {"on": "strict"}.get(value, value)
    return one_of(mode, ("off", "warn", "strict"), "must be off, warn or strict")


PRESENT_VIEWS = ("as-stored", "netcdf-4.10", "netcdf-4.9", "netcdf-4.9.1", "xarray")


def present_view(value: str) -> str:
    """``-o present=`` / ``--present``: which metadata flavor the mount shows."""
    return one_of(value, PRESENT_VIEWS, f"must be one of {', '.join(PRESENT_VIEWS)}")


NC_FILES = ("classic", "netcdf4", "both")


def nc_files(value: str) -> tuple[bool, bool]:
    """``-o nc_files[=]`` / ``--nc-files[=]``: (classic files NAME.nc, the netCDF-4 file NAME.nc4);
    no value means classic."""
    kind = one_of(value or "classic", NC_FILES, f"must be one of {', '.join(NC_FILES)}")
    return kind in ("classic", "both"), kind in ("netcdf4", "both")


TRANSCODE_MODES = ("auto", "off", "none", "zlib")


def transcode_mode(value: str) -> str:
    """``-o transcode=``: how views show chunks whose codecs the view's reader lacks."""
    return one_of(value, TRANSCODE_MODES, f"must be one of {', '.join(TRANSCODE_MODES)}")


OVERWRITE_MODES = ("checked", "last_writer_wins")


def overwrite_mode(value: str) -> str:
    """``-o overwrite=``: whether a write replaces only the object version it started from."""
    return one_of(value, OVERWRITE_MODES, f"must be one of {', '.join(OVERWRITE_MODES)}")


def one_of(value: str, choices: Collection[str], reason: str) -> str:
    """``value`` if it is one of ``choices``, else BadValue saying ``reason``."""
    if value not in choices:
        raise BadValue(reason)
    return value
