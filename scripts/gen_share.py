"""Write the man page and the bash/zsh completions from nczfs's argparse parser, and the README's
table of -o options from the option rows (the mount's own and each registered backend's).

    .venv/bin/python scripts/gen_share.py      # after changing a command or option

They are committed under share/ and installed with the package (pyproject's data-files);
tests/test_packaging.py checks they match the parser.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: each generated file, relative to the repository, as pyproject installs it below the prefix
OUTPUTS = {
    "man": Path("share/man/man1/nczfs.1"),
    "bash": Path("share/bash-completion/completions/nczfs"),
    "zsh": Path("share/zsh/site-functions/_nczfs"),
    "readme": Path("README.md"),
}
#: the README's option table: this line, the |---| line, a row per -o row, then a blank line
TABLE = "| `-o` option | meaning |\n|---|---|\n"


def readme_with_options(readme: str) -> str:
    """README.md with its table of -o options made from the option rows."""
    from nczfs.config.mountconfig import option_help

    before, rest = readme.split(TABLE, 1)
    after = rest.split("\n\n", 1)[1]
    rows = "".join(f"| `{form.replace(', ', '`, `').replace('|', chr(92) + '|')}` | {text.replace('|', '/')} |\n"
                   for form, text in option_help())
    return before + TABLE + rows + "\n" + after

EXTRA = """[EXAMPLES]
.nf
nczfs mount s3://climate/runs/ocean.zarr /mnt/ocean \\-o ro,endpoint_url=https://s3.example.org
nczfs mount /srv/data/ocean.zarr.zip /mnt/ocean \\-\\-present netcdf\\-4.9
mount \\-t fuse.nczfs /srv/data/run42.file /mnt/run42 \\-o allow_other,umask=002
nczfs stats /mnt/ocean; nczfs log\\-level /mnt/ocean debug; nczfs umount /mnt/ocean
.fi

[FILES]
.TP
.B /var/log/nczfs/MOUNTPOINT.log, $XDG_STATE_HOME/nczfs/MOUNTPOINT.log
where a daemon logs when given no \\-\\-log\\-file and nothing listens on /dev/log (root, other users;
$NCZFS_LOG_DIR chooses another folder)
.TP
.B MOUNTPOINT/.nczfs
the daemon's pid, log and counters as JSON (what nczfs stats \\-\\-json prints)

[SEE ALSO]
.BR fusermount3 (1),
.BR mount.fuse3 (8),
.BR fstab (5),
.BR ncdump (1).
The documents installed in PREFIX/share/doc/nczfs/ (README.md, docs/OPERATIONS.md,
docs/SEMANTICS.md, docs/API.md); the systemd units in PREFIX/share/nczfs/systemd/.
"""


def generate() -> dict[str, str]:
    import shtab
    from argparse_manpage.manpage import Manpage

    import nczfs
    from nczfs.cli.parser import build_parser

    from nczfs.config.mountconfig import option_help

    options = "[MOUNT OPTIONS]\nGiven as -o OPT[,OPT...] to nczfs mount, mount(8) or in fstab.\n" + "".join(
        f".TP\n.B {form}\n{text}\n" for form, text in option_help())
    include = ROOT / "build" / "nczfs-man-include.txt"
    include.parent.mkdir(exist_ok=True)
    include.write_text(options.replace("-", "\\-") + "\n" + EXTRA)
    man = Manpage(build_parser(), _data={
        "project_name": "nczfs", "version": nczfs.__version__, "date": f"nczfs {nczfs.__version__}",
        "manual_title": "nczfs manual", "manual_section": 1, "include": str(include),
        "description": "mount NCZarr and Zarr stores as a directory tree",
    })
    return {
        "man": str(man).rstrip("\n") + "\n",
        "bash": shtab.complete(build_parser(), shell="bash"),
        "zsh": shtab.complete(build_parser(), shell="zsh"),
        "readme": readme_with_options((ROOT / OUTPUTS["readme"]).read_text()),
    }


def main() -> None:
    for kind, text in generate().items():
        path = ROOT / OUTPUTS[kind]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {OUTPUTS[kind]}")


if __name__ == "__main__":
    main()
