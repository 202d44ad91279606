"""The argument parser of ``nczfs``: every command, its flags and their help (the man page and
the shell completions are made from it too: scripts/gen_share.py)."""

from __future__ import annotations

import argparse
import os
import sys

import nczfs
from nczfs.toolbox import logs
from nczfs.config.mountconfig import TTL_DEFAULT, option_help, option_rules, source_flags
from nczfs.store.registry import source_forms


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="nczfs", description="Mount NCZarr/Zarr stores as a directory tree.")
    p.add_argument("--version", action="version", version=f"nczfs {nczfs.__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    _mount_parser(sub)
    _running_mount_parsers(sub)
    sub.add_parser("demo", help="mount the bundled sample dataset, show it, unmount")
    from nczfs.cli.inspecting import add_parsers

    add_parsers(sub, source_options)  # inspect, validate
    h = sub.add_parser("help", help="show the help of nczfs or of one command")
    h.add_argument("topic", nargs="?", metavar="COMMAND", help="a command (none: every command)")
    return p


class Offered(tuple):
    """A flag's values as help and the shell completions offer them; argparse lets any value by, for
    the flag is a spelling of an -o key whose rule judges it (cli/mountargs.py: one check, one error)."""

    def __contains__(self, value: object) -> bool:
        return True


def _mount_parser(sub) -> None:
    m = sub.add_parser("mount", help="mount SOURCE on MOUNTPOINT", epilog=options_epilog(),
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Mount SOURCE on MOUNTPOINT; return once the mount answers (a daemon "
                                   "stays in the background unless -f or --systemd).")
    m.add_argument("source", help=source_forms())  # each registered backend's
    m.add_argument("mountpoint")
    m.add_argument("-f", "--foreground", action="store_true", help="stay attached; log to stderr")
    m.add_argument("--systemd", action="store_true",
                   help="for a Type=notify unit: stay attached, report readiness over $NOTIFY_SOCKET, "
                        "log to stderr with journal priority prefixes")
    m.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)  # nczfs.mounted()
    m.add_argument("-r", "--read-only", action="store_true", help="refuse every write with EROFS")
    _logging_flags(m)
    m.add_argument("-o", dest="options", action="append", default=[], metavar="OPT[,OPT...]",
                   help="mount options, comma separated (every one below)").complete = option_completion()  # shtab reads it
    _cache_flags(m)
    _output_and_view_flags(m)
    source_options(m)


def _logging_flags(m: argparse.ArgumentParser) -> None:
    m.add_argument("-v", "--verbose", action="count", default=0,
                   help="log more: -v debug, -vv trace (every request)")
    m.add_argument("-q", "--quiet", action="store_true", help="log only warnings and errors")
    m.add_argument("--log-level", default=None, metavar="LEVEL", choices=Offered(logs.LEVELS),
                   help=f"one of {', '.join(logs.LEVELS)} (default info; a running daemon: 'nczfs log-level')")
    m.add_argument("--log-format", default=None, choices=Offered(("text", "json")),
                   help="json: one JSON object a line (time, level, logger, pid, message)")
    m.add_argument("-d", "--debug", action="store_true", help="log every request (--log-level trace)")


def _cache_flags(m: argparse.ArgumentParser) -> None:
    m.add_argument("--metadata-ttl", default=None, metavar="SECONDS",
                   help=f"reuse attributes, listings and missing names this long ({TTL_DEFAULT})")
    m.add_argument("--cache-size", default=None, metavar="BYTES",
                   help="memory for cached object data, e.g. 512M (default: 1/8 of RAM, at most 1G)")
    m.add_argument("--write-memory", default=None, metavar="BYTES",
                   help="memory for pending writes of all files together; past it a file being "
                        "written goes to a temp file, e.g. 256M (default: 1/8 of RAM, at most 1G)")
    m.add_argument("--cache-dir", default=None, metavar="DIR",
                   help="remote sources: keep fetched object data in DIR across mounts (default: off)")
    m.add_argument("--cache-dir-size", default=None, metavar="BYTES",
                   help="bytes --cache-dir may hold, e.g. 50G (default 10G)")


def _output_and_view_flags(m: argparse.ArgumentParser) -> None:
    m.add_argument("--log-file", default=None, metavar="FILE",
                   help="log to FILE (default: the journal through /dev/log, else "
                        "/var/log/nczfs/MOUNT.log for root, $XDG_STATE_HOME/nczfs/MOUNT.log for others; "
                        "-f: stderr)")
    m.add_argument("--metrics", default=None, metavar="ADDR:PORT",
                   help="serve Prometheus metrics (every counter of 'nczfs stats') on ADDR:PORT")
    m.add_argument("--validate", default=None, metavar="off|warn|strict",
                   help="check metadata objects written through the mount (default strict: invalid -> EINVAL)")
    m.add_argument("--present", default=None, metavar="VIEW",
                   help="show datasets as: as-stored (default), netcdf-4.10, netcdf-4.9, netcdf-4.9.1, xarray")
    m.add_argument("--nc-files", nargs="?", const=True, default=None, metavar="classic|netcdf4|both",
                   help="every dataset NAME also shows as read-only netCDF files: classic NAME.nc (and "
                        "NAME.GROUP.nc; the default), the netCDF-4 NAME.nc4, or both")


def _running_mount_parsers(sub) -> None:
    """umount, stats, log-level and sync: the commands that act on a running mount."""
    u = sub.add_parser("umount", help="flush pending writes and unmount")
    u.add_argument("mountpoint")
    u.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the daemon to exit")
    u.add_argument("-l", "--lazy", action="store_true",
                   help="detach now even if busy (pending writes are stored first); the daemon exits "
                        "once the last file open there is closed")
    u.add_argument("--stale-only", action="store_true",
                   help="only remove a mount whose daemon has died; otherwise do nothing (exit 0)")
    st = sub.add_parser("stats", help="print a running mount's request counters, log and metrics address")
    st.add_argument("mountpoint")
    st.add_argument("--json", action="store_true", help="print the daemon's control file as it is (JSON)")
    ll = sub.add_parser("log-level", help="show or change a running mount's log level")
    ll.add_argument("mountpoint")
    ll.add_argument("level", nargs="?", type=str.lower, choices=list(logs.LEVELS),
                    help=f"one of {', '.join(logs.LEVELS)} (none: print the current level)")
    y = sub.add_parser("sync", help="store pending writes now (an archive: commit them into it)")
    y.add_argument("mountpoint")


def source_options(p: argparse.ArgumentParser) -> None:
    """What reaching SOURCE needs, the same for mount, inspect and validate: the flags the
    registered backends' option rows declare (each once), each a spelling of its -o key."""
    for flag in source_flags().values():
        if flag.kind == "switch":
            p.add_argument(flag.spelling, dest=flag.key, action="store_true", help=flag.help)
        elif flag.kind == "repeat":
            p.add_argument(flag.spelling, dest=flag.key, action="append", default=[], metavar=flag.metavar,
                           help=flag.help)
        else:
            p.add_argument(flag.spelling, dest=flag.key, default=None, metavar=flag.metavar, help=flag.help)


def option_completion() -> dict:
    """shtab's completion of ``-o``: the keys of every option row (the last of a comma list completed)."""
    keys = " ".join(sorted(option_rules()))
    return {
        "bash": "_nczfs_o_compgen",
        "zsh": "_nczfs_o_compgen",
        "preamble": {
            "bash": (f"_nczfs_o_compgen() {{\n  local head=\"\"\n  [[ \"$1\" == *,* ]] && head=\"${{1%,*}},\"\n"
                     f"  compgen -P \"$head\" -W \"{keys}\" -- \"${{1##*,}}\"\n}}\n"),
            "zsh": f"_nczfs_o_compgen() {{\n  _values -s , 'mount option' {keys}\n}}\n",
        },
    }


def options_epilog() -> str:
    width = max(len(form) for form, _ in option_help())
    lines = [f"  {form:<{width}}  {text}" for form, text in option_help()]
    return "mount options (-o):\n" + "\n".join(lines) + f"\n\nmore: man nczfs; the documents in {docs_dir()}"


def docs_dir() -> str:
    """Where the package installed README.md and docs/ (pyproject's data-files), else the checkout's."""
    installed = os.path.join(sys.prefix, "share", "doc", "nczfs")
    if os.path.isdir(installed):
        return installed + "/"
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(checkout, "docs") + "/"
