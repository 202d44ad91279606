"""``nczfs inspect SOURCE`` and ``nczfs validate SOURCE``: read a store without mounting it."""

from __future__ import annotations

import logging
import os

from nczfs.config.mountconfig import MountConfig
from nczfs.toolbox.errors import NczfsError
from nczfs.nczarr.report import inspect_store, store_problems
from nczfs.config.source import Source
from nczfs.store.registry import BACKENDS, open_store, source_forms
from nczfs.store.base import SyncStore


def open_read_only(source: Source, **options) -> SyncStore:
    """The store SOURCE names, read-only; ``options``: MountConfig fields (S3 endpoint, ...)."""
    options.pop("read_only", None)
    return open_store(MountConfig.of(source, "", read_only=True, **options))


def inspect(source: Source, **options) -> str:
    """The CDL header of the dataset, then its flavor (and problems) as CDL comments."""
    store = open_read_only(source, **options)
    try:
        return inspect_store(store, source)
    finally:
        store.close()


def validate(source: Source, notes: list[str] | None = None, **options) -> list[str]:
    store = open_read_only(source, **options)
    try:
        return store_problems(store, notes)
    finally:
        store.close()


def add_parsers(sub, source_options) -> None:
    """The ``inspect`` and ``validate`` subcommands (registered by nczfs/cli/parser.py), with mount's
    options for reaching SOURCE (``source_options``, and ``-o``)."""
    i = sub.add_parser("inspect", help="print a store's dataset as a CDL header, and its NCZarr flavor")
    v = sub.add_parser("validate", help="check every metadata object of a store; exit 1 listing each problem")
    for p in (i, v):
        p.add_argument("source", help=source_forms())  # each registered backend's
        source_options(p)
        p.add_argument("-o", dest="options", action="append", default=[], metavar="OPT[,OPT...]",
                       help="mount options that concern SOURCE (endpoint_url=, profile=, allow_root=, ...)")


class _Warnings(logging.Handler):
    """What the stores log as warnings while a command runs, each message once (a store
    reloading its index repeats them), to be shown after what the command reports."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if text not in self.messages:
            self.messages.append(text)

    def show(self, reported: str) -> None:
        """Print the warnings not already in the command's output ``reported``."""
        import sys

        for text in self.messages:
            if text not in reported:
                print(f"nczfs: warning: {text}", file=sys.stderr)


def run(args) -> int:
    """Exit status: 0 fine, 1 problems found (validate) or unreadable, 2 bad SOURCE."""
    warnings = _Warnings()
    logging.getLogger().addHandler(warnings)
    try:
        return _run(args, warnings)
    finally:
        logging.getLogger().removeHandler(warnings)


def _run(args, warnings: _Warnings) -> int:
    import sys

    from nczfs.config.mountconfig import source_values
    from nczfs.config.source import parse_source

    try:
        source = parse_source(args.source)
        options = source_values(args, source.backend)
        if BACKENDS[source.backend].directory and not os.path.isdir(source.location):
            raise NczfsError(f"{args.source}: {source.location} is not a directory")
        store = open_read_only(source, **options)
    except NczfsError as exc:
        print(f"nczfs: {exc}", file=sys.stderr)
        return 2
    # names and text netCDF-C stored as bytes that are not UTF-8 are printed as those bytes (ncdump does)
    sys.stdout.reconfigure(errors="surrogateescape")  # type: ignore[union-attr]  # sys.stdout is a TextIOWrapper here
    try:
        if args.command == "inspect":
            text = inspect_store(store, source)
            sys.stdout.write(text)
            warnings.show(text)
            return 0
        notes: list[str] = []
        problems = store_problems(store, notes)
    except NczfsError as exc:
        print(f"nczfs: {args.source}: {exc}", file=sys.stderr)
        return 1
    finally:
        store.close()
    for p in problems:
        print(p)
    for n in notes:
        print(f"note: {n}")
    warnings.show("\n".join(problems + notes))
    print(f"{len(problems)} problem(s) in {args.source}", file=sys.stderr)
    return 1 if problems else 0
