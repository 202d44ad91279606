"""Mount options: one frozen dataclass, built from CLI flags and ``-o key[=value],...``.

What each option's value may be: optionvalues.py."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Callable

from nczfs.budgets import DEFAULT_CACHE_DIR_SIZE
from nczfs.errors import SourceError
from nczfs.optionvalues import (
    count,
    integer,
    log_format,
    log_level,
    metrics_address,
    nc_files,
    non_negative,
    overwrite_mode,
    parse_size,
    positive,
    present_view,
    sse_mode,
    storage_class,
    transcode_mode,
    validate_mode,
)
from nczfs.source import Source
from nczfs.store.registry import BACKENDS

#: options mount(8) and fstab add that mean nothing to nczfs
IGNORED_OPTIONS = frozenset(
    {"rw", "dev", "nodev", "suid", "nosuid", "exec", "noexec", "auto", "noauto", "nofail",
     "_netdev", "user", "nouser", "users", "defaults", "atime", "noatime", "relatime", "async",
     "diratime", "nodiratime", "strictatime", "lazytime", "nolazytime", "comment"}
)


#: every -o option, as ``nczfs mount --help`` and the man page list them
OPTION_HELP = (
    ("ro, read_only", "refuse every write with EROFS (--read-only)"),
    ("allow_other", "let other users in; what they create is theirs (non-root: user_allow_other in /etc/fuse.conf)"),
    ("nonempty", "mount over a directory that is not empty (refused otherwise)"),
    ("uid=N, gid=N", "owner and group where the store keeps none (default: who mounted)"),
    ("umask=OCTAL", "where the store keeps no mode: files 0666 & ~umask, directories 0777 & ~umask (default 022)"),
    ("metadata_ttl=SECONDS", "reuse attributes, listings, missing names (default 1 writable S3, else 60)"),
    ("cache_size=BYTES", "memory for cached object data, e.g. 512M (default 1/8 of RAM, 64M-1G)"),
    ("cache_dir=DIR", "keep fetched data (S3/reference) and made chunks' sizes in DIR across mounts (default off)"),
    ("cache_dir_size=BYTES", "bytes cache_dir may hold (default 10G)"),
    ("write_memory=BYTES", "memory for pending writes of all files (default 1/8 of RAM, 64M-1G)"),
    ("prefetch_siblings=N", "S3/reference: objects of a directory fetched ahead (default 16; 0 off)"),
    ("list_tree_keys=N", "S3: list a dataset's tree in one request up to N keys (default 1000; 0 off)"),
    ("direct_io", "skip the kernel's page cache (shared mmap then fails with ENODEV)"),
    ("read_ahead_kb=KIB", "kernel readahead of the mount (default 4096)"),
    ("decode_threads=N", "chunks decoded at once: views' recoded chunks, NAME.nc, NAME.nc4 (default 0: the cores)"),
    ("log_file=FILE", "log to FILE (--log-file)"),
    ("log_level=LEVEL", "error, warning, info (default), debug, trace (--log-level)"),
    ("log_format=text|json", "log lines as text or JSON objects (--log-format)"),
    ("debug", "log every request (log_level=trace)"),
    ("metrics=ADDR:PORT", "serve Prometheus metrics there (--metrics)"),
    ("endpoint_url=URL, url=URL", "S3, GCS, Azure: the server's endpoint (--endpoint-url; url= as in s3fs)"),
    ("profile=NAME", "S3: the AWS profile (--profile)"),
    ("region=NAME", "S3: the bucket's region (--region)"),
    ("no_sign_request", "S3: anonymous requests (--no-sign-request)"),
    ("use_path_request_style", "S3: path-style addressing (as in s3fs; custom endpoints always)"),
    ("anon", "S3, GCS, Azure: anonymous requests (GCS and Azure: read-only)"),
    ("retries=N", "object stores: attempts after the first before EIO (default 2)"),
    ("connect_timeout=SECONDS", "object stores: seconds to connect (default 5)"),
    ("read_timeout=SECONDS", "object stores: seconds without a byte of an answer (default 15)"),
    ("requester_pays", "S3: requests say the requester pays"),
    ("sse=AES256|aws:kms|aws:kms:dsse", "S3: server-side encryption of what the mount writes"),
    ("sse_kms_key_id=KEY", "S3: the KMS key (implies sse=aws:kms)"),
    ("storage_class=CLASS", "S3: the storage class of what the mount writes"),
    ("overwrite=checked|last_writer_wins", "S3, GCS, Azure, directory, zip: a close replaces only the version its file "
                                           "was opened at, else ESTALE and the data kept beside (checked, default); or "
                                           "the last close wins"),
    ("posix_meta", "S3: HEAD each object looked up or listed for the modes, owners, times, links in its metadata"),
    ("google_application_credentials=FILE", "GCS: the credentials file"),
    ("azure_storage_account=NAME", "Azure: the storage account"),
    ("zip_layout=netcdf|flat", "zip: the layout of a new archive (default netcdf)"),
    ("validate=strict|warn|off", "check metadata written through the mount (--validate)"),
    ("present=VIEW", "show datasets as as-stored, netcdf-4.10, netcdf-4.9, netcdf-4.9.1, xarray"),
    ("transcode=auto|none|zlib|off", "views: chunks the reader cannot decode shown decoded (auto), all "
                                     "decoded, re-encoded with zlib, or their arrays hidden; NAME.nc4: chunks "
                                     "HDF5 cannot read as stored deflated (auto, zlib), unfiltered (none) or left out (off)"),
    ("allow_root=DIR", "reference sets: local targets may lie below DIR (--allow-root)"),
    ("branch=NAME, tag=NAME, snapshot=ID", "Icechunk: what the root shows (default branch main; a tag or snapshot: read-only)"),
    ("commit_message=TEXT", "Icechunk: the message of the mount's commits (default: host and time)"),
    ("virtual_chunk_container=PREFIX[=URL]", "Icechunk: read virtual chunks below PREFIX (file://, s3://, https://; repeatable)"),
    ("nc_files, nc_files=KIND", "every dataset NAME also shows read-only netCDF files: KIND classic (the default) NAME.nc, NAME.GROUP.nc; netcdf4 one netCDF-4 (HDF5) NAME.nc4 (groups, NC_STRING, chunks as stored or deflated); both (--nc-files[=KIND])"),
    ("nc4_plugins", "NAME.nc4 passes blosc and zstd chunks through as HDF5 filters 32001 and 32015 (readers need their plugins) instead of re-encoding them as deflate"),
    ("rw, nofail, _netdev, x-*, ...", "mount(8)'s generic options: ignored"),
)


@dataclass(frozen=True)
class MountConfig:
    source: Source
    mountpoint: str
    read_only: bool = False
    foreground: bool = False
    #: error, warning, info, debug or trace (every request): nczfs.logs.LEVELS
    log_level: str = "info"
    #: "text" or "json" (one object a line)
    log_format: str = "text"
    allow_other: bool = False
    #: mount over a directory that is not empty (refused otherwise, as s3fs does)
    nonempty: bool = False
    uid: int = dataclasses.field(default_factory=os.getuid)
    gid: int = dataclasses.field(default_factory=os.getgid)
    umask: int = 0o022
    #: seconds the kernel and nczfs may reuse attributes and entries (the CLI picks a default
    #: per backend when none is given: see default_metadata_ttl)
    metadata_ttl: float = 1.0
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
    #: S3: endpoint URL (else the URL's host, AWS_ENDPOINT_URL or AWS), AWS profile and region
    endpoint_url: str | None = None
    profile: str | None = None
    region: str | None = None
    #: S3, GCS, Azure: send unsigned (anonymous) requests (-o anon, --no-sign-request)
    no_sign_request: bool = False
    #: S3: address buckets path style (``host/bucket/key``) even on AWS (s3fs's use_path_request_style);
    #: a custom endpoint is always addressed so
    path_style: bool = False
    #: object stores: attempts after the first (None: 2, three in all), seconds to connect, and
    #: seconds without a byte before an attempt is given up (None: 5 and 60)
    retries: int | None = None
    connect_timeout: float | None = None
    read_timeout: float | None = None
    #: S3: requests say the requester pays (x-amz-request-payer), as for requester-pays buckets
    requester_pays: bool = False
    #: S3: server-side encryption of what the mount writes ("AES256", "aws:kms", "aws:kms:dsse")
    #: and the KMS key (its id, alias or ARN; implies aws:kms)
    sse: str | None = None
    sse_kms_key_id: str | None = None
    #: S3: the storage class of what the mount writes (STANDARD_IA, INTELLIGENT_TIERING, ...)
    storage_class: str | None = None
    #: GCS: the credentials file (service-account key or gcloud's application-default credentials)
    google_application_credentials: str | None = None
    #: Azure: the storage account (else the URL's, or AZURE_STORAGE_ACCOUNT_NAME)
    azure_storage_account: str | None = None
    #: S3: every object looked up or listed is asked (HEAD) for the modes, owners, times and
    #: types kept in its metadata (as s3fs-fuse does); else only what the mount wrote shows them
    posix_meta: bool = False
    #: S3, directory, zip: "checked": a write replaces only the object version it started from (or makes one only
    #: where none is), conditional PUTs; "last_writer_wins": every close replaces what is there
    overwrite: str = "checked"
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
    #: layout of a zip archive the mount creates: "netcdf" (default) or "flat" (zarr-python's)
    zip_layout: str | None = None
    #: directories local reference targets may lie in (reference backend; default: the JSON's directory)
    allow_roots: tuple[str, ...] = ()
    #: Icechunk: what the mount root shows (a branch, default main; a tag or snapshot mounts
    #: read-only), the message of the commits it makes, and the virtual chunk containers
    #: (``PREFIX[=URL]``) whose chunks it may read
    branch: str | None = None
    tag: str | None = None
    snapshot: str | None = None
    commit_message: str | None = None
    virtual_chunk_containers: tuple[str, ...] = ()


def parse_options(opts: list[str]) -> dict[str, object]:
    """``-o`` strings (each a comma list) to MountConfig field values; unknown keys are an error."""
    out: dict[str, object] = {}
    for chunk in opts:
        for item in chunk.split(","):
            item = item.strip()
            if item:
                _option(out, item)
    return out


def _option(out: dict[str, object], item: str) -> None:
    """One ``key[=value]`` item into ``out`` (OPTIONS says how), or a clear error."""
    key, eq, value = item.partition("=")
    key = key.strip().replace("-", "_")
    # and userspace options (x-systemd.*, x-gvfs-*: libmount's "x-" convention)
    if key in IGNORED_OPTIONS or key.startswith("x_"):
        return
    rule = OPTIONS.get(key)
    if rule is not None and rule[0](bool(eq), value):
        rule[1](out, key, value)
    elif _is_option_key(key):
        raise SourceError(f"-o {item}: not a valid value for {key}" if eq else f"-o {key}: needs a value")
    else:
        raise SourceError(f"-o {item}: unknown mount option")


Applies = Callable[[bool, str], bool]
Apply = Callable[[dict, str, str], None]


def _any(eq: bool, value: str) -> bool:
    return True


def _flag(eq: bool, value: str) -> bool:
    return not eq


def _valued(eq: bool, value: str) -> bool:
    return eq


def _nonempty(eq: bool, value: str) -> bool:
    return eq and bool(value)


def _const(field: str, v: object) -> Apply:
    def apply(out: dict, key: str, value: str) -> None:
        out[field] = v
    return apply


def _to(field: str | None, convert: Callable[[str, str], object] = lambda key, value: value) -> Apply:
    """Set ``field`` (None: the key's own) to ``convert(key, value)``."""
    def apply(out: dict, key: str, value: str) -> None:
        out[field or key] = convert(key, value)
    return apply


def _abspath(key: str, value: str) -> str:
    return os.path.abspath(value)


def _allow_root(out: dict, key: str, value: str) -> None:
    out["allow_roots"] = (*out.get("allow_roots", ()), os.path.abspath(value))


def _kms_key(out: dict, key: str, value: str) -> None:
    out["sse_kms_key_id"] = value
    out.setdefault("sse", "aws:kms")


def _icechunk_option(out: dict[str, object], key: str, value: str) -> None:
    if key == "virtual_chunk_container":
        out["virtual_chunk_containers"] = (*out.get("virtual_chunk_containers", ()), value)  # type: ignore[misc]  # out holds objects: this one a tuple
        return
    if key in ("branch", "tag", "snapshot") and any(k in out for k in ("branch", "tag", "snapshot") if k != key):
        raise SourceError(f"-o {key}={value}: choose one of branch=, tag= and snapshot=")
    out[key] = value


ICECHUNK_OPTIONS = frozenset({"branch", "tag", "snapshot", "commit_message", "virtual_chunk_container"})

#: every -o key: (whether it applies, given whether it has ``=`` and its value; what it sets).
#: A key that does not apply is an error naming the key (OPTION_HELP documents them)
OPTIONS: dict[str, tuple[Applies, Apply]] = {
    "ro": (_any, _const("read_only", True)),
    "read_only": (_any, _const("read_only", True)),
    "allow_other": (_any, _const("allow_other", True)),
    "nonempty": (_flag, _const("nonempty", True)),
    "debug": (_flag, _const("log_level", "trace")),
    "log_level": (_valued, _to("log_level", lambda key, value: log_level(value))),
    "log_format": (_valued, _to("log_format", lambda key, value: log_format(value))),
    "direct_io": (_flag, _const("direct_io", True)),
    "uid": (_valued, _to(None, integer)),
    "gid": (_valued, _to(None, integer)),
    "umask": (_valued, _to("umask", lambda key, value: integer(key, value, 8))),
    "metadata_ttl": (_valued, _to("metadata_ttl", non_negative)),
    "cache_size": (_valued, _to("cache_size", parse_size)),
    "write_memory": (_valued, _to("write_memory", parse_size)),
    "cache_dir": (_nonempty, _to("cache_dir", _abspath)),
    "cache_dir_size": (_valued, _to("cache_dir_size", parse_size)),
    "read_ahead_kb": (_valued, _to("read_ahead_kb", integer)),
    "decode_threads": (_valued, _to("decode_threads", count)),
    "prefetch_siblings": (_valued, _to("prefetch_siblings", count)),
    "list_tree_keys": (_valued, _to("list_tree_keys", count)),
    "allow_root": (_nonempty, _allow_root),
    "endpoint_url": (_nonempty, _to("endpoint_url")),
    "url": (_nonempty, _to("endpoint_url")),  # s3fs's name
    "profile": (_nonempty, _to("profile")),
    "region": (_nonempty, _to("region")),
    "use_path_request_style": (_flag, _const("path_style", True)),  # s3fs's name
    "nc_files": (_any, lambda out, key, value: out.update(zip(("nc_files", "nc4_files"), nc_files(value)))),
    "nc4_plugins": (_flag, _const("nc4_plugins", True)),
    "no_sign_request": (_flag, _const("no_sign_request", True)),
    "anon": (_flag, _const("no_sign_request", True)),
    "retries": (_valued, _to("retries", count)),
    "connect_timeout": (_valued, _to(None, positive)),
    "read_timeout": (_valued, _to(None, positive)),
    "requester_pays": (_flag, _const("requester_pays", True)),
    "sse": (_valued, _to("sse", lambda key, value: sse_mode(value))),
    "sse_kms_key_id": (_nonempty, _kms_key),
    "storage_class": (_valued, _to("storage_class", lambda key, value: storage_class(value))),
    "google_application_credentials": (_nonempty, _to(None, _abspath)),
    "azure_storage_account": (_nonempty, _to(None)),
    "posix_meta": (_flag, _const("posix_meta", True)),
    "overwrite": (_valued, _to("overwrite", lambda key, value: overwrite_mode(value))),
    "zip_layout": (lambda eq, value: value in ("flat", "netcdf"), _to("zip_layout")),
    "validate": (_valued, _to("validate", lambda key, value: validate_mode(value))),
    "present": (_valued, _to("present", lambda key, value: present_view(value))),
    "transcode": (_valued, _to("transcode", lambda key, value: transcode_mode(value))),
    "metrics": (_valued, _to("metrics", lambda key, value: metrics_address(value))),
    **{k: (_nonempty, _icechunk_option) for k in sorted(ICECHUNK_OPTIONS)},
    "log_file": (_valued, _to("log_file", _abspath)),
}


def _is_option_key(key: str) -> bool:
    """A key that names a mount option (a MountConfig field, or one item of a tuple field)."""
    fields = {f.name for f in dataclasses.fields(MountConfig)} - {"source", "mountpoint", "foreground", "spill_threshold"}
    return key in fields or key + "s" in fields


#: metadata TTL when none is given: other clients may change a writable S3 prefix at any
#: time; a read-only mount, a local directory or an archive is taken to change rarely
SHORT_TTL, LONG_TTL = 1.0, 60.0


def default_metadata_ttl(backend: str, read_only: bool) -> float:
    """SHORT_TTL for a writable mount of a backend the registry says is ``shared``, else LONG_TTL."""
    found = BACKENDS.get(backend)
    return SHORT_TTL if found is not None and found.shared and not read_only else LONG_TTL


def source_values(args) -> dict[str, object]:
    """The -o options and source flags of mount, inspect and validate, as MountConfig values."""
    values = parse_options(getattr(args, "options", []))
    for key in ("endpoint_url", "profile", "region"):
        if getattr(args, key, None):
            values[key] = getattr(args, key)
    if getattr(args, "no_sign_request", False):
        values["no_sign_request"] = True
    if args.allow_roots:
        values["allow_roots"] = (*values.get("allow_roots", ()), *map(os.path.abspath, args.allow_roots))  # type: ignore[misc]  # values hold objects: this one a tuple
    return values
