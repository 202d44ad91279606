"""The ``-o`` rows a backend declares: what each key accepts and sets, and its line of help.

A backend's options dataclass lists its rows (``rows``, a class attribute); the scheme registry
(:mod:`nczfs.store.registry`) gathers them, and ``nczfs mount``'s parser, ``--help``, the man
page and the README's option table are built from them (nczfs/config/mountconfig.py adds the mount's own).
A row may also declare command-line flags (:class:`Flag`) that spell one of its keys: mount,
inspect and validate take them (nczfs/cli/parser.py adds each once, however many backends share
its row).
Each rule is ``(applies, apply)``: whether the key applies, given whether it has ``=`` and its
value; and what it sets in the flat ``{name: value}`` the options are parsed into.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from nczfs.toolbox.optionvalues import overwrite_mode

Applies = Callable[[bool, str], bool]
Apply = Callable[[dict, str, str], None]
Rule = tuple[Applies, Apply]


#: how a :class:`Flag` is given: ``--flag VALUE``; ``--flag`` alone; ``--flag VALUE`` again for each value
FLAG_KINDS = ("value", "switch", "repeat")


@dataclass(frozen=True)
class Flag:
    """A command-line flag of mount, inspect and validate that reaches a source: a spelling of
    the ``-o`` key its name says (``--endpoint-url``: ``endpoint_url``), read by that key's rule
    (so a bad value gives the -o key's error, and the flag wins over -o)."""

    #: ``--endpoint-url``
    spelling: str
    help: str
    #: one of :data:`FLAG_KINDS`
    kind: str = "value"
    #: the value's name in the help (None: argparse's, the key in capitals)
    metavar: str | None = None

    def __post_init__(self) -> None:
        if not self.spelling.startswith("--") or self.kind not in FLAG_KINDS:
            raise ValueError(f"{self.spelling}: a flag is --NAME, of kind {', '.join(FLAG_KINDS)}")

    @property
    def key(self) -> str:
        """The -o key it spells (and its argparse name)."""
        return self.spelling[2:].replace("-", "_")


@dataclass(frozen=True)
class OptionRow:
    """One line of ``nczfs mount --help``'s option list and the ``-o`` keys it documents."""

    #: as the help shows it: ``endpoint_url=URL, url=URL``
    form: str
    help: str
    #: each ``-o`` key it reads, and its rule
    rules: Mapping[str, Rule]
    #: refused (UsageError) on a source of any backend that does not declare it
    own: bool = False
    #: the command-line flags spelling its keys
    flags: tuple[Flag, ...] = ()

    def __post_init__(self) -> None:
        for f in self.flags:
            if f.key not in self.rules:
                raise ValueError(f"{f.spelling}: its key {f.key} is not one of the row's ({', '.join(self.rules)})")


def any_(eq: bool, value: str) -> bool:
    return True


def flag(eq: bool, value: str) -> bool:
    return not eq


def valued(eq: bool, value: str) -> bool:
    return eq


def nonempty(eq: bool, value: str) -> bool:
    return eq and bool(value)


def const(name: str, v: object) -> Apply:
    def apply(out: dict, key: str, value: str) -> None:
        out[name] = v
    return apply


def to(name: str | None, convert: Callable[[str, str], object] = lambda key, value: value) -> Apply:
    """Set ``name`` (None: the key's own) to ``convert(key, value)``."""
    def apply(out: dict, key: str, value: str) -> None:
        out[name or key] = convert(key, value)
    return apply


def abspath(key: str, value: str) -> str:
    return os.path.abspath(value)


def given(cls: type, values: Mapping[str, object], **more: Any) -> Any:
    """``cls`` (a dataclass) from the ``values`` named as its fields, and ``more`` (which wins: the
    fields it computes)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{**{k: v for k, v in values.items() if k in names}, **more})


#: a write replaces only the version it started from, or the last close wins: a row the backends
#: that check versions share (each lists it in its options' rows), so its help names none of them
OVERWRITE = OptionRow(
    "overwrite=checked|last_writer_wins",
    "a close replaces only the version its file was opened at, else ESTALE and the data kept beside "
    "(checked, default); or the last close wins",
    {"overwrite": (valued, to("overwrite", lambda key, value: overwrite_mode(value)))})
