"""Build the Containerfile's image without a container engine, and use it: each stage is a copy of
a Debian bookworm root made by debootstrap (what ``debian:bookworm-slim`` holds, give or take
documentation files), its RUN lines run in a chroot of it, its COPY lines done by ``cp``
(honouring .dockerignore's names). Then, in the final stage's chroot: ``nczfs help``, ``man
nczfs``, and a mount of the bundled sample through /dev/fuse whose listing and bytes are checked.

    python3 scripts/replay_containerfile.py [--work /var/tmp/containerfile] [--keep]

For machines with no Docker or Podman engine (this project's CI machine among them); as root, on
Debian or Ubuntu (needs ``debootstrap``: ``apt-get install debootstrap``). The chroots reach the
package registries as the host does: the host's resolv.conf, CA bundle and pip configuration are
copied in. Exit status 0 only if every step worked.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, argument) of each instruction, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        word, _, arg = pending.strip().partition(" ")
        out.append((word.upper(), arg.strip()))
        pending = ""
    return out


def run(cmd: list[str], **kw) -> None:
    print("+", shlex.join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


@contextlib.contextmanager
def chroot_mounts(root: Path):
    """/proc and /dev in the chroot, and the host's name resolution, CA bundle and pip settings."""
    done = []
    try:
        for src, opts in (("/proc", ["-t", "proc"]), ("/dev", ["--rbind"])):
            dst = root / src.lstrip("/")
            dst.mkdir(exist_ok=True)
            run(["mount", *opts, src, str(dst)])
            done.append(dst)
        for name in ("etc/resolv.conf", "etc/pip.conf"):
            if Path("/" + name).exists():
                shutil.copyfile("/" + name, root / name)
        ca = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
        (root / "etc/ssl/host-ca.crt").parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ca, root / "etc/ssl/host-ca.crt")
        yield
    finally:
        for dst in reversed(done):
            subprocess.run(["umount", "-R", "-l", str(dst)], check=False)


def chroot_sh(root: Path, script: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
           "PIP_CERT": "/etc/ssl/host-ca.crt", "REQUESTS_CA_BUNDLE": "/etc/ssl/host-ca.crt", "LANG": "C.UTF-8"}
    print("+ chroot", root, script, flush=True)
    return subprocess.run(["chroot", str(root), "/bin/sh", "-ec", script], env=env, text=True, capture_output=True)


def ignore(context: Path) -> list[str]:
    """.dockerignore's patterns."""
    f = context / ".dockerignore"
    return [p.strip().rstrip("/") for p in f.read_text().splitlines() if p.strip() and not p.startswith("#")] if f.exists() else []


def copy_tree(src: Path, dst: Path, ignore: list[str]) -> None:
    def skip(folder: str, names: list[str]) -> set[str]:
        rel = os.path.relpath(folder, src)
        return {n for n in names if any(fnmatch.fnmatch(os.path.normpath(os.path.join(rel, n)), p) for p in ignore)}

    shutil.copytree(src, dst, ignore=skip, symlinks=True, dirs_exist_ok=True)


def build(base: Path, work: Path, context: Path) -> tuple[Path, list[str]]:
    stages: dict[str, Path] = {}
    root: Path | None = None
    entry: list[str] = []
    for word, arg in instructions((context / "Containerfile").read_text()):
        if word == "FROM":
            parts = arg.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else f"stage{len(stages)}"
            if "debian:bookworm" not in parts[0]:
                raise SystemExit(f"FROM {parts[0]}: only Debian bookworm bases can be replayed")
            root = work / name
            shutil.rmtree(root, ignore_errors=True)
            run(["cp", "-a", str(base), str(root)])
            stages[name] = root
        elif word == "RUN":
            with chroot_mounts(root):
                res = chroot_sh(root, arg)
            print(res.stdout[-3000:], res.stderr[-3000:], sep="\n")
            if res.returncode:
                raise SystemExit(f"RUN failed ({res.returncode}): {arg}")
        elif word == "COPY":
            parts = arg.split()
            src_root = context
            if parts[0].startswith("--from="):
                src_root = stages[parts.pop(0).split("=", 1)[1]]
            src, dst = parts
            source = src_root / src.lstrip("/") if src != "." else src_root
            target = root / dst.lstrip("/")
            if source.is_dir():
                copy_tree(source, target, ignore(context) if src_root == context else [])
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
        elif word == "ENTRYPOINT":
            entry = __import__("json").loads(arg)
        elif word != "CMD":
            raise SystemExit(f"{word}: not replayed by this script")
    return root, entry


def use(root: Path, entry: list[str]) -> None:
    """What the Containerfile's comment shows: the image's command, its man page, and a mount of
    the sample the package carries, whose files read through the mount as stored."""
    nczfs = shlex.join(entry)
    sample = "$(echo /opt/nczfs/lib/python3*/site-packages/nczfs/samples/ocean.file)"
    checks = [
        (f"{nczfs} help", "usage"),
        ("MANPAGER=cat man nczfs | head -20", "nczfs"),
        (f"mkdir -p /mnt/ocean && {nczfs} mount {sample} /mnt/ocean --read-only && ls /mnt/ocean "
         f"&& cmp /mnt/ocean/.zgroup {sample}/.zgroup && grep ' /mnt/ocean fuse' /proc/mounts; "
         f"rc=$?; {nczfs} umount /mnt/ocean && exit $rc", "sst"),
    ]
    with chroot_mounts(root):
        for script, want in checks:
            res = chroot_sh(root, script)
            print(res.stdout[-2000:], res.stderr[-2000:], sep="\n")
            if res.returncode or want not in (res.stdout + res.stderr).lower():
                raise SystemExit(f"in the image: {script!r} failed ({res.returncode})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/var/tmp/containerfile"))
    ap.add_argument("--keep", action="store_true", help="keep the stages' roots")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("run as root (chroot, mount)")
    args.work.mkdir(parents=True, exist_ok=True)
    base = args.work / "bookworm"
    if not (base / "bin/sh").exists():
        run(["debootstrap", "--variant=minbase", "bookworm", str(base), "http://deb.debian.org/debian"])
    root, entry = build(base, args.work, ROOT)
    use(root, entry)
    if not args.keep:
        for d in args.work.iterdir():
            if d != base:
                shutil.rmtree(d, ignore_errors=True)
    print("Containerfile: built and used without a container engine: ok")


if __name__ == "__main__":
    sys.exit(main())
