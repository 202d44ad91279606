"""Staged changes moved onto an archive another program rewrote meanwhile, without losing its changes.

The journal's records were made on one version of the archive; another program (``zip``,
zarr-python's ZipStore, a copy) then replaced or rewrote it. Records of objects that program did
not change apply as they are (writers of different members never conflict). A record that would
replace or remove an object it changed (another version, or made or removed: ``changed``) does
not: the mount's object is kept beside it as ``NAME.nczfs-conflict-<UTC time>`` (every later
record of that name follows it there), a removal or a change of attributes of it is dropped
(the other program's version stays), and a rename or copy of a version that is gone is dropped.
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


def rebased(records: list[dict], changed: set[str], now: float | None = None) -> Rebased:
    """``records`` as they apply to an archive whose objects ``changed`` are not what they were."""
    out = Rebased()
    moved: dict[str, str] = {}  # key -> the conflict name the mount's object of it went to

    def target(key: str) -> str:
        if key in changed and key not in moved:
            moved[key] = conflict_name(key, now)
            out.kept.append((key, moved[key]))
        return moved.get(key, key)

    for rec in records:
        rec = dict(rec)
        op = rec["op"]
        if op in ("mv", "cp"):
            if rec["src"] in moved:
                rec["src"] = moved[rec["src"]]
            elif rec["src"] in changed:  # the version it names is gone: another program's stays
                out.dropped.append((rec["src"], op))
                continue
            rec["dst"] = target(rec["dst"])
        elif op == "set":
            rec["key"] = target(rec["key"])
        elif op in ("del", "meta") and not rec.get("dir"):
            if rec["key"] in moved:
                rec["key"] = moved[rec["key"]]
            elif rec["key"] in changed:
                out.dropped.append((rec["key"], op))
                continue
        out.records.append(rec)
    return out
