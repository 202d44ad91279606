"""Loopback ports for the tests' servers: each handed out to one test process at a time, and a
server counted as up only when the listener on its port is its own.

Test processes run side by side (pytest-xdist's workers, benches). A port that was free when one
of them looked can be taken by another's server before the first one's binds it, or while the
first one's server is down for a restart; the late server then fails to bind and exits, and a
readiness probe that only connects finds the other process's server answering: the tests talk to
a server they did not start (freezing or killing theirs changes nothing). So ports handed out are
recorded in a file every test process shares, and a server is ready only once each of its ports
is listened on by a process of its own session.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import subprocess
from pathlib import Path

#: ports handed out, a line ``PORT PID`` each, read and written under an flock of itself
REGISTRY = Path(os.environ.get("NCZFS_TEST_PORTS", "/tmp/nczfs-test-ports"))
#: ports are taken from [LOW, HIGH), with their +10000 twins (SeaweedFS's gRPC ports) below 65000
LOW, HIGH = 20000, 55000


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def free_ports(n: int, taken: set[int] | None = None) -> list[int]:
    """``n`` ports in [LOW, HIGH) that are free, each with its +10000 twin free as well, and not
    handed out to another live process by this function (the registry); recorded as this
    process's until it exits."""
    avoid = set(taken or ())
    REGISTRY.touch(exist_ok=True)
    with open(REGISTRY, "r+") as reg:
        fcntl.flock(reg, fcntl.LOCK_EX)
        held: dict[int, int] = {}
        for line in reg.read().split("\n"):
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit() and _alive(int(parts[1])):
                held[int(parts[0])] = int(parts[1])
        avoid |= set(held)
        out: list[int] = []
        for _ in range(100 * (HIGH - LOW)):
            if len(out) == n:
                break
            port = random.randrange(LOW, HIGH)
            if port in avoid or port + 10000 in avoid or not (_bindable(port) and _bindable(port + 10000)):
                continue
            avoid |= {port, port + 10000}
            out.append(port)
            held[port] = held[port + 10000] = os.getpid()
        if len(out) < n:
            raise RuntimeError(f"no {n} free ports in [{LOW}, {HIGH}) with free twins ({REGISTRY})")
        reg.seek(0)
        reg.truncate()
        reg.write("".join(f"{p} {pid}\n" for p, pid in sorted(held.items())))
    return out


def _listening_sockets() -> dict[int, set[int]]:
    """Port -> inodes of the TCP sockets listening on it (IPv4 and IPv6), from /proc/net."""
    out: dict[int, set[int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A":  # LISTEN
                out.setdefault(int(fields[1].rsplit(":", 1)[1], 16), set()).add(int(fields[9]))
    return out


def _session_sockets(sid: int) -> set[int]:
    """Inodes of the sockets held by the processes of session ``sid``."""
    out: set[int] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            if int(stat[stat.rindex(")") + 2 :].split()[3]) != sid:
                continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    out.add(int(link[8:-1]))
        except (OSError, ValueError):
            continue  # gone meanwhile
    return out


def listened_by_others(proc: subprocess.Popen, ports: list[int]) -> list[int]:
    """Those of ``ports`` that a process outside ``proc``'s session listens on."""
    listening = _listening_sockets()
    mine = _session_sockets(proc.pid)
    return [p for p in ports if listening.get(p, set()) - mine]


def serves(proc: subprocess.Popen, ports: list[int]) -> bool:
    """Does ``proc`` (started in a session of its own) listen on each of ``ports``, and nobody else?"""
    listening = _listening_sockets()
    mine = _session_sockets(proc.pid)
    return all(listening.get(p) and listening[p] <= mine for p in ports)
