"""The systemd readiness protocol (sd_notify), done by hand: one datagram to ``$NOTIFY_SOCKET``.

systemd starts a ``Type=notify`` service with ``NOTIFY_SOCKET`` set to an ``AF_UNIX``
datagram socket (a path, or ``@name`` for the abstract namespace). The service sends
newline-separated ``KEY=value`` lines: ``READY=1`` once it serves, ``STATUS=...`` for
``systemctl status``, ``STOPPING=1`` when it begins to shut down. Without the variable
every call does nothing, so the daemon may call :func:`notify` unconditionally.
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger(__name__)

ENV = "NOTIFY_SOCKET"


def _address(value: str) -> str | bytes:
    if value.startswith("@"):
        return b"\0" + value[1:].encode()  # abstract namespace
    return value


def notify(*lines: str) -> bool:
    """Send ``lines`` as one message; True if sent, False if there is no socket or it failed."""
    value = os.environ.get(ENV)
    if not value or not lines:
        return False
    if not (value.startswith("/") or value.startswith("@")):
        log.warning("%s=%s: not an AF_UNIX socket path; readiness not reported", ENV, value)
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.sendto("\n".join(lines).encode(), _address(value))
    except OSError as exc:
        log.warning("cannot notify systemd at %s: %s", value, exc)
        return False
    return True


def status(text: str) -> str:
    """A ``STATUS=`` line: one line of text, as ``systemctl status`` shows it."""
    return "STATUS=" + " ".join(text.split())
