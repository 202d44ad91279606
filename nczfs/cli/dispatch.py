"""``nczfs COMMAND ...``: the arguments parsed, the command run, its errors turned into exit codes."""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from nczfs.cli.daemon import cmd_mount
from nczfs.cli.parser import build_parser
from nczfs.cli.running import cmd_log_level, cmd_stats, cmd_sync, cmd_umount
from nczfs.cli.usage import UsageError


def cmd_help(args: argparse.Namespace) -> int:
    """``nczfs help [COMMAND]``: what ``nczfs [COMMAND] --help`` prints."""
    parser = build_parser()
    if args.topic is None:
        parser.print_help()
        return 0
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    if args.topic not in sub.choices:
        raise UsageError(f"help {args.topic}: no such command (commands: {', '.join(sub.choices)})")
    sub.choices[args.topic].print_help()
    return 0


def _demo(args: argparse.Namespace) -> int:
    from nczfs.cli.demo import main as demo

    return demo()


def _nczarr_command(args: argparse.Namespace) -> int:
    """``inspect`` and ``validate`` (cli/inspecting.py)."""
    from nczfs.cli.inspecting import run

    return run(args)


#: every command, by the name the parser gives it
COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "mount": cmd_mount, "umount": cmd_umount, "sync": cmd_sync, "stats": cmd_stats, "log-level": cmd_log_level,
    "demo": _demo, "inspect": _nczarr_command, "validate": _nczarr_command, "help": cmd_help,
}


def _helper_form(argv: list[str]) -> list[str]:
    """mount(8) runs ``nczfs SOURCE MOUNTPOINT -o OPTS`` (through mount.fuse3): that is ``nczfs mount``."""
    if len(argv) >= 2 and argv[0] not in COMMANDS and not argv[0].startswith("-"):
        return ["mount", *argv]
    return argv


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(_helper_form(sys.argv[1:] if argv is None else list(argv)))
    try:
        return COMMANDS[args.command](args)
    except UsageError as exc:
        print(f"nczfs: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
