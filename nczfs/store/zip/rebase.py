"""Staged changes moved onto an archive another program rewrote meanwhile, without losing its changes.

The journal's records were made on one version of the archive; another program (``zip``,
zarr-python's ZipStore, a copy) then replaced or rewrote it. Records of objects that program did
not change apply as they are (writers of different members never conflict). A record that would
replace or remove an object it changed (another version, or made or removed: ``changed``) does
not: the mount's object is kept beside it as ``NAME.nczfs-conflict-<UTC time>`` (every later
record of that name follows it there), a removal or a change of attributes of it is dropped
(the other program's version stays), and a rename or copy of a version that is gone is dropped.
A directory's rename is checked member by member the same way: a member the other program
changed under it stays where it is, with the other program's version (the record's ``keep``); a
member of the mount's that would land on one it changed under the new name goes beside it (the
record's ``beside``); a file the other program made where the directory goes sends the whole
directory beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nczfs.store.keys import conflict_name


@dataclass
class Rebased:
    #: the records to replay on the new archive
    records: list[dict] = field(default_factory=list)
    #: (key, where the mount's object went) for each object kept beside another program's
    kept: list[tuple[str, str]] = field(default_factory=list)
    #: (key, the record's op) for each record dropped
    dropped: list[tuple[str, str]] = field(default_factory=list)


def _under(key: str, prefix: str) -> bool:
    return key.startswith(prefix + "/")


class _Moving:
    """The records moved one by one; ``keys``: the objects the mount has after each (from
    ``known``, the keys of the archive it read), to tell which members a directory's rename moves."""

    def __init__(self, changed: set[str], known: set[str] | frozenset[str], now: float | None):
        self.changed, self.keys, self.now = changed, set(known), now
        self.out = Rebased()
        self.moved: dict[str, str] = {}  # key -> the conflict name the mount's object of it went to
        self.gone: set[str] = set()  # the mount's names of members a directory's rename left behind
        self.prefixes: dict[str, str] = {}  # a directory the mount renamed -> where it went instead

    def follow(self, key: str) -> str:
        for old, new in self.prefixes.items():
            if key == old or _under(key, old):
                return new + key[len(old):]
        return key

    def target(self, key: str) -> str:
        if key in self.changed and key not in self.moved:
            self.moved[key] = conflict_name(key, self.now)
            self.out.kept.append((key, self.moved[key]))
        return self.moved.get(key, key)

    def source(self, key: str, op: str) -> str | None:
        """Where the object ``key`` the record names is now; None: the version it names is gone."""
        if key in self.moved:
            return self.moved[key]
        if key in self.changed or key in self.gone:
            self.out.dropped.append((key, op))
            return None
        return key

    def add(self, rec: dict) -> None:
        rec = {k: self.follow(v) if k in ("key", "src", "dst") else v for k, v in rec.items()}
        op = rec["op"]
        if op in ("mv", "cp"):
            src = self.source(rec["src"], op)
            if src is None:
                return
            rec["src"], rec["dst"] = src, self.target(rec["dst"])
            self.keys.add(rec["dst"])
            if op == "mv":
                self.keys.discard(src)
        elif op == "set":
            rec["key"] = self.target(rec["key"])
            self.keys.add(rec["key"])
        elif op in ("del", "meta") and not rec.get("dir"):
            key = self.source(rec["key"], op)
            if key is None:
                return
            rec["key"] = key
            if op == "del":
                self.keys.discard(key)
        elif op == "mvdir":
            rec = self.directory(rec)
        self.out.records.append(rec)

    def directory(self, rec: dict) -> dict:
        """A directory's rename: ``keep`` the members the other program changed under it,
        ``beside`` the names it changed under the new one that a member of the mount's lands on."""
        src, dst = rec["src"], rec["dst"]
        if dst in self.changed:  # another program made a file of that name: the directory goes beside it
            self.prefixes[dst] = rec["dst"] = conflict_name(dst, self.now)
            self.out.kept.append((dst, rec["dst"]))
            dst = rec["dst"]
        rec["keep"] = sorted(k for k in self.changed if _under(k, src))
        rec["beside"] = {}
        for key in sorted(k for k in self.keys if _under(k, src)):
            new = dst + key[len(src):]
            self.keys.discard(key)
            if key in self.changed:
                self.out.dropped.append((key, "mvdir"))
                self.gone.add(new)
                continue
            if new in self.changed:
                rec["beside"][new] = self.moved[new] = conflict_name(new, self.now)
                self.out.kept.append((new, rec["beside"][new]))
            self.keys.add(rec["beside"].get(new, new))
        for key in [k for k in self.moved if _under(k, src)]:  # the mount's versions kept beside moved along
            self.moved[dst + key[len(src):]] = dst + self.moved.pop(key)[len(src):]
        return rec


def rebased(records: list[dict], changed: set[str], now: float | None = None, known: set[str] | frozenset[str] = frozenset()) -> Rebased:
    """``records`` as they apply to an archive whose objects ``changed`` are not what they were
    (``known``: the objects of the archive the records were made on)."""
    moving = _Moving(changed, known, now)
    for rec in records:
        moving.add(rec)
    return moving.out
