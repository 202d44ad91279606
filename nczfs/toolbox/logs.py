"""Where a mount logs, at which level, in which format; the level changed while it runs.

Destinations, first that applies: ``--log-file``; stderr (``-f``; ``--systemd`` with journal
priority prefixes); the journal/syslog through ``/dev/log`` when a daemon finds it listening;
else a default file, ``/var/log/nczfs/MOUNT.log`` for root or
``$XDG_STATE_HOME/nczfs/MOUNT.log`` (``~/.local/state``) for other users, or in
``$NCZFS_LOG_DIR``. Never nowhere.

Levels: error, warning, info (default), debug (``-v``), trace (``-vv``, ``--debug``: also
every FUSE request, and pyfuse3's and trio's own debug lines). A running daemon changes level
on SIGUSR2 (between its start level and trace, as rclone toggles debug logging) and on
``SIGRTMIN + n`` for the n-th level of :data:`LEVELS` (``nczfs log-level MNT LEVEL`` sends it).
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import signal
import socket
import stat
import sys
import time
from dataclasses import dataclass

TRACE = 5
logging.addLevelName(TRACE, "TRACE")

#: level names, quietest first (the order gives each its SIGRTMIN offset)
LEVELS = {"error": logging.ERROR, "warning": logging.WARNING, "info": logging.INFO,
          "debug": logging.DEBUG, "trace": TRACE}

#: where a daemon logs when journald or a syslog daemon listens here
SYSLOG_ADDRESS = "/dev/log"

#: a default log file is rotated at this size, keeping this many old ones
ROTATE_BYTES, ROTATE_KEEP = 10 * 1024**2, 3

#: what the running process logs to and at which level (shown by ``nczfs stats``)
STATE: dict[str, str] = {}

TEXT_FORMAT = "%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"


def level_signal(name: str) -> int:
    """The real-time signal that sets a daemon's level to ``name``."""
    return signal.SIGRTMIN + list(LEVELS).index(name)


def default_log_file(mountpoint: str) -> str:
    """The log file of a daemon given no --log-file where /dev/log does not listen
    (``$NCZFS_LOG_DIR`` chooses its folder, as mountpoint-s3's --log-directory)."""
    if os.environ.get("NCZFS_LOG_DIR"):
        base = os.environ["NCZFS_LOG_DIR"]
    elif os.geteuid() == 0:
        base = "/var/log/nczfs"
    else:
        base = os.path.join(os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "nczfs")
    name = mountpoint.strip("/").replace("/", "-") or "root"
    return os.path.join(base, f"{name}.log")


def syslog_listening(address: str | None = None) -> bool:
    """A socket at /dev/log that takes a datagram (a stale socket file would drop every line)."""
    address = address or SYSLOG_ADDRESS
    try:
        if not stat.S_ISSOCK(os.stat(address).st_mode):
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.connect(address)
        return True
    except OSError:
        return False


@dataclass(frozen=True)
class Destination:
    kind: str  # "file", "syslog", "stderr", "journal" (stderr with priority prefixes)
    path: str | None = None

    def __str__(self) -> str:
        return self.path if self.kind == "file" else {"syslog": f"syslog ({SYSLOG_ADDRESS})",  # type: ignore[return-value]  # a "file" target has its path
                                                       "journal": "stderr (journal priorities)"}.get(self.kind, self.kind)


def choose(log_file: str | None, mountpoint: str, daemon: bool, journal: bool = False) -> Destination:
    """Where a mount's lines go; a default file's folder is made here (OSError if it cannot be)."""
    if log_file:
        return Destination("file", log_file)
    if journal:
        return Destination("journal")
    if not daemon:
        return Destination("stderr")
    if syslog_listening():
        return Destination("syslog")
    path = default_log_file(mountpoint)
    os.makedirs(os.path.dirname(path), mode=0o750, exist_ok=True)
    with open(path, "a"):
        pass
    return Destination("file", path)


class JournalFormatter(logging.Formatter):
    """``<N>`` syslog priority prefixes, which journald reads from a service's stderr."""

    PRIORITY = {TRACE: 7, logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2}

    def __init__(self, inner: logging.Formatter):
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        prio = self.PRIORITY.get(record.levelno, 6)
        return "\n".join(f"<{prio}>{line}" for line in self.inner.format(record).splitlines())


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (ISO 8601, UTC), level, logger, pid, message, exception."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


class AnswerNoLongerAwaited(logging.Filter):
    """pyfuse3 logs an ERROR when the kernel no longer waits for an answer (``fuse_reply_*``
    fails with ENOENT): the mount went away while a request was being served, as a RELEASE the
    kernel sends in the background after the last close can race an unmount. The work was done,
    only its answer had nowhere to go: an INFO line that says so."""

    MARK = "fuse_reply_* failed with No such file or directory"

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and self.MARK in record.getMessage():
            record.msg, record.args = f"{record.getMessage()} (the kernel no longer waited for this answer: unmounted or aborted meanwhile)", ()
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def _handler(dest: Destination, fmt: str) -> logging.Handler:
    text = logging.Formatter(TEXT_FORMAT)
    json_fmt = JsonFormatter()
    handler: logging.Handler
    if dest.kind == "file":
        assert dest.path is not None
        if STATE.get("default-file") == dest.path:
            handler = logging.handlers.RotatingFileHandler(dest.path, maxBytes=ROTATE_BYTES, backupCount=ROTATE_KEEP)
        else:  # the user's file: rotated by them (logrotate), reopened when moved
            handler = logging.handlers.WatchedFileHandler(dest.path)
        handler.setFormatter(json_fmt if fmt == "json" else text)
    elif dest.kind == "syslog":
        handler = logging.handlers.SysLogHandler(address=SYSLOG_ADDRESS)
        inner = json_fmt if fmt == "json" else logging.Formatter("%(levelname)s %(name)s: %(message)s")
        handler.setFormatter(_Prefixed(inner))
    elif dest.kind == "journal":
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JournalFormatter(json_fmt if fmt == "json" else logging.Formatter("%(levelname)s %(name)s: %(message)s")))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(json_fmt if fmt == "json" else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    return handler


class _Prefixed(logging.Formatter):
    """syslog's ``nczfs[PID]: `` before what the inner formatter makes."""

    def __init__(self, inner: logging.Formatter):
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        return f"nczfs[{record.process}]: {self.inner.format(record)}"


def setup(dest: Destination, level: str = "info", fmt: str = "text", default_file: bool = False) -> None:
    """Send every log line of this process to ``dest`` at ``level``."""
    if default_file and dest.path:
        STATE["default-file"] = dest.path
    root = logging.getLogger()
    for h in root.handlers:
        h.close()
    root.handlers.clear()
    root.addHandler(_handler(dest, fmt))
    pyfuse3_log = logging.getLogger("pyfuse3")
    if not any(isinstance(f, AnswerNoLongerAwaited) for f in pyfuse3_log.filters):
        pyfuse3_log.addFilter(AnswerNoLongerAwaited())
    STATE.update({"log": str(dest), "log-format": fmt, "log-level-at-start": level})
    set_level(level)


#: libraries whose lines below these levels only trace shows: pyfuse3's and trio's own
#: debugging, numcodecs' "Registering codec" lines, which its import (in the background after
#: the mount is ready) writes once, among the first requests' lines at debug (issue 43), and the
#: Azure SDK's request and response headers, which it logs at info (conditional deletes)
QUIET_BELOW = {"pyfuse3": logging.WARNING, "trio": logging.WARNING, "numcodecs": logging.INFO,
               "azure": logging.WARNING}


def set_level(name: str) -> None:
    """Log at ``name`` from now on (the libraries of :data:`QUIET_BELOW` say more only at trace)."""
    levelno = LEVELS[name]
    logging.getLogger().setLevel(levelno)
    for noisy, floor in QUIET_BELOW.items():
        logging.getLogger(noisy).setLevel(logging.NOTSET if levelno <= TRACE else max(levelno, floor))
    STATE["log-level"] = name


def current_level() -> str:
    return STATE.get("log-level", "info")


def on_signal(signum: int) -> str | None:
    """The level a signal asks for (SIGUSR2: toggle the start level and trace), else None."""
    if signum == signal.SIGUSR2:
        start = STATE.get("log-level-at-start", "info")
        return start if current_level() != start else ("trace" if start != "trace" else "info")
    for name in LEVELS:
        if signum == level_signal(name):
            return name
    return None


def signals() -> list[int]:
    """Every signal that changes the level (see :func:`on_signal`)."""
    return [signal.SIGUSR2, *(level_signal(n) for n in LEVELS)]
