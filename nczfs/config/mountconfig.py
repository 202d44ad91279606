"""Mount options: one frozen dataclass, built from CLI flags and ``-o key[=value],...``.

What each option's value may be: optionvalues.py."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Iterable, Mapping

from nczfs.toolbox.budgets import DEFAULT_CACHE_DIR_SIZE
from nczfs.toolbox.errors import BadValue, option_error
from nczfs.toolbox.optionvalues import (
    count,
    integer,
    log_format,
    log_level,
    metrics_address,
    nc_files,
    non_negative,
    parse_size,
    present_view,
    transcode_mode,
    validate_mode,
)
from nczfs.config.source import Source
from nczfs.store.options import Applies, Flag, OptionRow, Rule, abspath, any_, const, flag, nonempty, to, valued
from nczfs.store.capabilities import LONG_TTL, SHORT_TTL, Capabilities
from nczfs.store.registry import BACKENDS, Backend, Opening

#: options mount(8) and fstab add that mean nothing to nczfs
IGNORED_OPTIONS = frozenset(
    {"rw", "dev", "nodev", "suid", "nosuid", "exec", "noexec", "auto", "noauto", "nofail",
     "_netdev", "user", "nouser", "users", "defaults", "atime", "noatime", "relatime", "async",
     "diratime", "nodiratime", "strictatime", "lazytime", "nolazytime", "comment"}
)


#: what -o metadata_ttl= and --metadata-ttl say of their default: the opened store's own
#: (Capabilities.metadata_ttl; a read-only mount's LONG_TTL, effective_metadata_ttl)
TTL_DEFAULT = (f"default: the store's, {SHORT_TTL:g} for a writable mount of a store others write to, such as "
               f"a bucket or a repository; else {LONG_TTL:g}")


def _row(form: str, text: str, **rules: Rule) -> OptionRow:
    return OptionRow(form, text, rules)


def _allow_other(out: dict, key: str, value: str) -> None:
    out["allow_other"] = True


def _nc_files(out: dict, key: str, value: str) -> None:
    out.update(zip(("nc_files", "nc4_files"), nc_files(value)))


#: the mount's own -o rows, as ``nczfs mount --help`` and the man page list them (each backend's
#: follow: its options dataclass's ``rows``, nczfs.store.registry)
MOUNT_ROWS = (
    _row("ro, read_only", "refuse every write with EROFS (--read-only)",
         ro=(any_, const("read_only", True)), read_only=(any_, const("read_only", True))),
    _row("allow_other", "let other users in; what they create is theirs (non-root: user_allow_other in "
                        "/etc/fuse.conf)", allow_other=(any_, _allow_other)),
    _row("nonempty", "mount over a directory that is not empty (refused otherwise)",
         nonempty=(flag, const("nonempty", True))),
    _row("uid=N, gid=N", "owner and group where the store keeps none (default: who mounted)",
         uid=(valued, to(None, integer)), gid=(valued, to(None, integer))),
    _row("umask=OCTAL", "where the store keeps no mode: files 0666 & ~umask, directories 0777 & ~umask (default 022)",
         umask=(valued, to("umask", lambda key, value: integer(key, value, 8)))),
    _row("metadata_ttl=SECONDS", f"reuse attributes, listings, missing names ({TTL_DEFAULT})",
         metadata_ttl=(valued, to("metadata_ttl", non_negative))),
    _row("cache_size=BYTES", "memory for cached object data, e.g. 512M (default 1/8 of RAM, 64M-1G)",
         cache_size=(valued, to("cache_size", parse_size))),
    _row("cache_dir=DIR", "keep remote sources' fetched data and made chunks' sizes in DIR across mounts (default off)",
         cache_dir=(nonempty, to("cache_dir", abspath))),
    _row("cache_dir_size=BYTES", "bytes cache_dir may hold (default 10G)",
         cache_dir_size=(valued, to("cache_dir_size", parse_size))),
    _row("write_memory=BYTES", "memory for pending writes of all files (default 1/8 of RAM, 64M-1G)",
         write_memory=(valued, to("write_memory", parse_size))),
    _row("prefetch_siblings=N", "remote sources: objects of a directory fetched ahead (default 16; 0 off)",
         prefetch_siblings=(valued, to("prefetch_siblings", count))),
    _row("list_tree_keys=N", "list a dataset's tree in one request up to N keys, where the store can (default 1000; "
                             "0 off)",
         list_tree_keys=(valued, to("list_tree_keys", count))),
    _row("direct_io", "skip the kernel's page cache (shared mmap then fails with ENODEV)",
         direct_io=(flag, const("direct_io", True))),
    _row("read_ahead_kb=KIB", "kernel readahead of the mount (default 4096)",
         read_ahead_kb=(valued, to("read_ahead_kb", integer))),
    _row("decode_threads=N", "chunks decoded at once: views' recoded chunks, NAME.nc, NAME.nc4 (default 0: the cores)",
         decode_threads=(valued, to("decode_threads", count))),
    _row("log_file=FILE", "log to FILE (--log-file)", log_file=(nonempty, to("log_file", abspath))),
    _row("log_level=LEVEL", "error, warning, info (default), debug, trace (--log-level)",
         log_level=(valued, to("log_level", lambda key, value: log_level(value)))),
    _row("log_format=text|json", "log lines as text or JSON objects (--log-format)",
         log_format=(valued, to("log_format", lambda key, value: log_format(value)))),
    _row("debug", "log every request (log_level=trace)", debug=(flag, const("log_level", "trace"))),
    _row("metrics=ADDR:PORT", "serve Prometheus metrics there (--metrics)",
         metrics=(valued, to("metrics", lambda key, value: metrics_address(value)))),
    _row("validate=strict|warn|off", "check metadata written through the mount (--validate)",
         validate=(valued, to("validate", lambda key, value: validate_mode(value)))),
    _row("present=VIEW", "show datasets as as-stored, netcdf-4.10, netcdf-4.9, netcdf-4.9.1, xarray",
         present=(valued, to("present", lambda key, value: present_view(value)))),
    _row("transcode=auto|none|zlib|off", "views: chunks the reader cannot decode shown decoded (auto), all "
                                         "decoded, re-encoded with zlib, or their arrays hidden; NAME.nc4: chunks "
                                         "HDF5 cannot read as stored deflated (auto, zlib), unfiltered (none) or left "
                                         "out (off)",
         transcode=(valued, to("transcode", lambda key, value: transcode_mode(value)))),
    _row("nc_files, nc_files=KIND", "every dataset NAME also shows read-only netCDF files: KIND classic (the default) "
                                    "NAME.nc, NAME.GROUP.nc; netcdf4 one netCDF-4 (HDF5) NAME.nc4 (groups, NC_STRING, "
                                    "chunks as stored or deflated); both (--nc-files[=KIND])",
         nc_files=(any_, _nc_files)),
    _row("nc4_plugins", "NAME.nc4 passes blosc and zstd chunks through as HDF5 filters 32001 and 32015 (readers need "
                        "their plugins) instead of re-encoding them as deflate",
         nc4_plugins=(flag, const("nc4_plugins", True))),
)
IGNORED_ROW = OptionRow("rw, nofail, _netdev, x-*, ...", "mount(8)'s generic options: ignored", {})


@dataclass(frozen=True)
class MountConfig:
    source: Source
    mountpoint: str
    read_only: bool = False
    foreground: bool = False
    #: error, warning, info, debug or trace (every request): nczfs.toolbox.logs.LEVELS
    log_level: str = "info"
    #: "text" or "json" (one object a line)
    log_format: str = "text"
    allow_other: bool = False
    #: mount over a directory that is not empty (refused otherwise, as s3fs does)
    nonempty: bool = False
    uid: int = dataclasses.field(default_factory=os.getuid)
    gid: int = dataclasses.field(default_factory=os.getgid)
    umask: int = 0o022
    #: seconds the kernel and nczfs may reuse attributes and entries (None: the opened store's
    #: default, see effective_metadata_ttl)
    metadata_ttl: float | None = None
    #: bytes of object data the read cache may hold (None: budgets.default_cache_size())
    cache_size: int | None = None
    #: directory keeping fetched object blocks across mounts (S3 and reference mounts; None: off)
    cache_dir: str | None = None
    #: bytes the cache directory may hold
    cache_dir_size: int = DEFAULT_CACHE_DIR_SIZE
    #: objects of a directory fetched ahead of a reader walking it (cache.prefetch.SIBLINGS_AHEAD; 0: off)
    prefetch_siblings: int = 16
    #: a directory's parent tree listed in one request if it has at most this many keys (cache.trees.TREE_KEYS; 0: off)
    list_tree_keys: int = 1000
    #: files are opened with the kernel's direct I/O: reads and writes bypass its page cache
    #: (one copy fewer; MAP_SHARED mmap is refused with ENODEV; -o direct_io, as in s3fs-fuse)
    direct_io: bool = False
    #: bytes of a file's pending writes kept in memory before spilling to a temp file (None:
    #: see filesystem.MIN_SPILL_THRESHOLD)
    spill_threshold: int | None = None
    #: bytes of pending writes all files together keep in memory (None: an eighth of RAM,
    #: between 64 MiB and 1 GiB); a file growing past it spills to a temp file
    write_memory: int | None = None
    log_file: str | None = None
    #: serve Prometheus metrics on this ADDR:PORT (metrics.py; None: off)
    metrics: str | None = None
    #: kernel readahead for the mount, in KiB (see mount.set_read_ahead)
    read_ahead_kb: int = 4096
    #: chunks decoded at once (views' recoded chunks, .nc and .nc4 files; 0: the cores): nczarr/decoding.py
    decode_threads: int = 0
    #: metadata writes: "strict" (invalid -> EINVAL), "warn" (log, store anyway) or "off"
    validate: str = "strict"
    #: metadata flavor shown: "as-stored", "netcdf-4.10", "netcdf-4.9", "netcdf-4.9.1" or "xarray"
    present: str = "as-stored"
    #: views: chunks whose codecs the reader lacks are shown "auto" decoded, "none" every
    #: compressed chunk decoded, "zlib" re-encoded with zlib, "off" never (hidden)
    transcode: str = "auto"
    #: every dataset also shows as read-only netCDF classic files (NAME.nc, NAME.GROUP.nc)
    nc_files: bool = False
    #: every dataset also shows as a read-only netCDF-4 (HDF5) file (NAME.nc4)
    nc4_files: bool = False
    #: NAME.nc4 passes blosc and zstd chunks through as HDF5's registered filters (not decoded)
    nc4_plugins: bool = False
    #: the values of the -o rows its backend declares (and of the flags alike: --endpoint-url, ...),
    #: by name, read by the backend's options dataclass (nczfs.store.registry)
    backend_options: Mapping[str, object] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, source: Source, mountpoint: str, **values: object) -> MountConfig:
        """The config of these values: MountConfig fields, and a backend's options (-o values).
        Every entry point (mount, inspect, validate, the API) builds its config here: read-only
        where the backend's options make it so (an Icechunk tag); a metadata TTL not given is the
        opened store's (:meth:`effective_metadata_ttl`)."""
        fields, backend_options = split_values(values)
        found = BACKENDS.get(source.backend)
        if found is not None and found.read_only_if is not None and found.read_only_if(values):
            fields["read_only"] = True
        return cls(source=source, mountpoint=mountpoint, backend_options=backend_options, **fields)  # type: ignore[arg-type]  # values: MountConfig fields, checked by the option table

    def opening(self) -> Opening:
        """What the backend is opened with."""
        return Opening(self.source, self.mountpoint, self.read_only, self.backend_options)

    def effective_metadata_ttl(self, capabilities: Capabilities) -> float:
        """Seconds attributes, listings and missing names are reused, over a store opened with this
        config (``capabilities``: its own): ``-o metadata_ttl=``'s, else LONG_TTL for a read-only
        mount, else the store's default (short where other clients write while it is mounted)."""
        if self.metadata_ttl is not None:
            return self.metadata_ttl
        return LONG_TTL if self.read_only else capabilities.metadata_ttl


def parse_options(opts: Iterable[str], backend: str | None = None) -> dict[str, object]:
    """``-o`` strings (each a comma list) to MountConfig field values; unknown keys are an error,
    and so are, on a source of ``backend``, the keys only other backends take."""
    return parse_items((item for chunk in opts for item in chunk.split(",")), backend)


def parse_items(items: Iterable[str], backend: str | None = None) -> dict[str, object]:
    """``key[=value]`` items (each one, commas and all) to MountConfig field values, as
    :func:`parse_options`."""
    out: dict[str, object] = {}
    rules, foreign = option_rules(), foreign_keys(backend) if backend is not None else {}
    for item in items:
        item = item.strip()
        if item:
            _option(out, item, rules, foreign)
    return out


def _option(out: dict[str, object], item: str, rules: Mapping[str, Rule], foreign: Mapping[str, str]) -> None:
    """One ``key[=value]`` item into ``out`` (its row's rule says how), or an error in the one
    form of them all (:func:`~nczfs.toolbox.optionvalues.option_error`: the key, the value, the reason)."""
    key, eq, value = item.partition("=")
    key = key.strip().replace("-", "_")
    given = value if eq else None
    # and userspace options (x-systemd.*, x-gvfs-*: libmount's "x-" convention)
    if key in IGNORED_OPTIONS or key.startswith("x_"):
        return
    if key in foreign:
        raise option_error(key, given, foreign[key])
    rule = rules.get(key)
    if rule is None:
        raise option_error(key, given, "unknown mount option")
    applies, apply = rule
    if not applies(bool(eq), value):
        raise option_error(key, given, _refusal(applies, bool(eq), value))
    try:
        apply(out, key, value)
    except BadValue as exc:
        raise option_error(key, given, str(exc)) from None


def _refusal(applies: Applies, eq: bool, value: str) -> str:
    """Why ``applies`` refuses the item: its key takes a value it was not given, or takes none."""
    if applies(False, ""):
        return "takes no value"
    if not eq or (not value and applies(True, "?")):
        return "needs a value"
    return "not a valid value"


def option_rows() -> list[OptionRow]:
    """Every -o row: the mount's own, then those of every registered backend (each once), then
    mount(8)'s generic options (``nczfs mount --help``, the man page and the README list these)."""
    # backends share row objects (ENDPOINT, BOUNDS, OVERWRITE, ...): each is listed once
    rows = {id(row): row for row in MOUNT_ROWS}
    for backend in BACKENDS.values():
        rows.update((id(row), row) for row in backend.rows if id(row) not in rows)
    return [*rows.values(), IGNORED_ROW]


def option_help() -> list[tuple[str, str]]:
    """``(form, help)`` of every -o row."""
    return [(row.form, row.help) for row in option_rows()]


def option_rules() -> dict[str, Rule]:
    """Every -o key and its rule."""
    return {key: rule for row in option_rows() for key, rule in row.rules.items()}


def foreign_keys(backend: str) -> dict[str, str]:
    """The -o keys only backends other than ``backend`` take (their rows declared ``own``), each
    with why it is refused on a source of ``backend``."""
    mine = {key for row in BACKENDS[backend].rows for key in row.rules} if backend in BACKENDS else set()
    owners: dict[str, list[Backend]] = {}
    for b in BACKENDS.values():
        for key in (key for row in b.rows if row.own for key in row.rules if key not in mine):
            owners.setdefault(key, []).append(b)
    return {key: _owned_by(found) for key, found in owners.items()}


def _owned_by(owners: list[Backend]) -> str:
    schemes = " or ".join(f"{s}://" for b in owners for s in b.schemes)
    return f"an option of {', '.join(b.noun or b.name + ' sources' for b in owners)} ({schemes})"


def split_values(values: Mapping[str, object]) -> tuple[dict[str, object], dict[str, object]]:
    """Parsed values as (MountConfig fields, the backend's options)."""
    fields = {f.name for f in dataclasses.fields(MountConfig)}
    return ({k: v for k, v in values.items() if k in fields},
            {k: v for k, v in values.items() if k not in fields})


def source_flags() -> dict[str, Flag]:
    """The flags of mount, inspect and validate that reach a source, by their -o key (argparse's
    name too): those the option rows of the registered backends declare, each once, in the rows'
    order. ValueError if two rows declare the same flag differently."""
    found: dict[str, Flag] = {}
    for row in option_rows():
        for f in row.flags:
            if found.setdefault(f.key, f) != f:
                raise ValueError(f"{f.spelling}: declared by two rows, differently")
    return found


def source_values(args, backend: str) -> dict[str, object]:
    """The -o options and source flags of inspect and validate on a source of ``backend``, as
    MountConfig values: a flag is read by its -o key's rule, after the -o strings."""
    return parse_items([*option_items(args), *flag_items(args, {key: key for key in source_flags()})], backend)


def option_items(args) -> list[str]:
    """The ``key[=value]`` items of the -o strings of ``args`` (none: no -o)."""
    return [item for chunk in getattr(args, "options", []) for item in chunk.split(",")]


def flag_items(args, flags: Mapping[str, str]) -> list[str]:
    """The flags of ``args`` named in ``flags`` (argparse's name: the -o key) as ``key[=value]``
    items, in the order of ``flags`` (so a later one's value wins)."""
    return [item for name, key in flags.items() for item in _flag_items(key, getattr(args, name, None))]


def _flag_items(key: str, given: object) -> list[str]:
    """A flag's value as ``key[=value]`` items: none if not given, the bare key if it takes no
    value, one each of a repeated flag's; an empty value too (its rule judges it)."""
    if given is None or given is False:
        return []
    if given is True:
        return [key]
    return [f"{key}={value}" for value in (given if isinstance(given, list) else [given])]
