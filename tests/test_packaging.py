"""What installing nczfs gives: a wheel and sdist carrying the man page, completions, docs and
systemd units; a man page and completions that match the parser; install.sh's /usr/local links."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from gen_share import OUTPUTS, generate  # noqa: E402

DATA = {
    "share/man/man1/nczfs.1", "share/bash-completion/completions/nczfs", "share/zsh/site-functions/_nczfs",
    "share/doc/nczfs/README.md", "share/doc/nczfs/docs/OPERATIONS.md", "share/doc/nczfs/docs/SEMANTICS.md",
    "share/doc/nczfs/docs/API.md", "share/nczfs/systemd/nczfs@.service", "share/nczfs/systemd/mnt-ocean.mount",
}


def test_man_page_and_completions_match_the_parser():
    for kind, text in generate().items():
        assert (ROOT / OUTPUTS[kind]).read_text() == text, f"run: python scripts/gen_share.py ({OUTPUTS[kind]})"
    man = (ROOT / OUTPUTS["man"]).read_text()
    assert ".SH MOUNT OPTIONS" in man and "use_path_request_style" in man and "log\\-level" in man
    assert _bash_completes("nczfs", "mount", "--log-f") == ["--log-format", "--log-file"]
    assert _bash_completes("nczfs", "lo") == ["log-level"]
    # -o completes the keys of every option row, the mount's and each backend's
    assert _bash_completes("nczfs", "mount", "-o", "ro,endpoint_u") == ["ro,endpoint_url"]
    assert _bash_completes("nczfs", "mount", "-o", "zip_l") == ["zip_layout"]
    zsh = (ROOT / OUTPUTS["zsh"]).read_text()
    assert zsh.startswith("#compdef nczfs") and "--allow-root" in zsh


def _bash_completes(*words: str) -> list[str]:
    """What bash offers for the last word, with the installed completion loaded."""
    line = " ".join(words)
    script = (f'source {ROOT / OUTPUTS["bash"]}; COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; '
              f'COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}; _shtab_nczfs nczfs {words[-1]} {words[-2]}; '
              'printf "%s\\n" "${COMPREPLY[@]}"')
    res = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    return res.stdout.split()


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    """``python -m build``: the sdist, then the wheel built from that sdist."""
    out = tmp_path_factory.mktemp("dist")
    res = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "-o", str(out), str(ROOT)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out


def test_wheel_and_sdist_carry_the_man_page_completions_docs_and_units(dist):
    (wheel,) = dist.glob("nczfs-*.whl")
    (sdist,) = dist.glob("nczfs-*.tar.gz")
    names = zipfile.ZipFile(wheel).namelist()
    data = {n.split(".data/data/", 1)[1] for n in names if ".data/data/" in n}
    assert DATA <= data, DATA - data
    assert "nczfs/cli/__init__.py" in names and "nczfs/samples/ocean.file/.zgroup" in names
    with tarfile.open(sdist) as t:
        members = {m.split("/", 1)[1] for m in t.getnames() if "/" in m}
    for path in ("share/man/man1/nczfs.1", "docs/OPERATIONS.md", "systemd/nczfs@.service", "Containerfile",
                 "scripts/gen_share.py", "pyproject.toml"):
        assert path in members, path


def test_the_wheel_installs_man_page_where_man_finds_it_and_is_no_namespace_package(dist, tmp_path):
    (wheel,) = dist.glob("nczfs-*.whl")
    prefix = tmp_path / "prefix"  # as a virtualenv or /usr/local holds it
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # conftest points it at the checkout
    res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed", "--prefix", str(prefix),
                          str(wheel)], capture_output=True, text=True, timeout=120, env=clean)
    assert res.returncode == 0, res.stderr
    for path in DATA:
        assert (prefix / path).is_file(), path
    assert (prefix / "bin" / "nczfs").is_file()
    # man-db maps each PATH entry's bin/ to its share/man
    res = subprocess.run(["man", "-w", "nczfs"], capture_output=True, text=True,
                         env={"PATH": f"{prefix}/bin:/usr/bin:/bin", "HOME": str(tmp_path)})
    assert res.returncode == 0 and res.stdout.strip() == str(prefix / "share/man/man1/nczfs.1"), res.stdout + res.stderr
    # Python started in the folder holding a checkout named nczfs imports the installed package
    (site,) = prefix.glob("lib/python3*/site-packages")
    (tmp_path / "nczfs" / "docs").mkdir(parents=True)
    res = subprocess.run([sys.executable, "-c", "import nczfs; print(nczfs.__version__, nczfs.__file__)"],
                         cwd=tmp_path, capture_output=True, text=True, env={**clean, "PYTHONPATH": str(site)})
    assert res.returncode == 0 and res.stdout.startswith("0.1.0 " + str(site)), res.stdout + res.stderr


def _fake_venv(root: Path) -> Path:
    """A virtualenv as another checkout's install.sh leaves it, as far as the links go."""
    (root / "bin").mkdir(parents=True)
    (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (root / "bin" / "nczfs").write_text("#!/x/bin/python\nfrom nczfs.cli import main\n")
    return root


def _link_only(prefix: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "scripts" / "install.sh"), "--link-only"], capture_output=True, text=True,
                          env={**os.environ, "NCZFS_LINK_PREFIX": str(prefix), **env}, timeout=60)


def test_install_links_replace_only_links_into_nczfs_virtualenvs(tmp_path):
    ours = ROOT / ".venv" / "bin" / "nczfs"
    prefix = tmp_path / "usr-local"
    link = prefix / "bin" / "nczfs"
    # missing: made, with the man page and completions
    assert _link_only(prefix).returncode == 0
    assert os.readlink(link) == str(ours)
    assert os.readlink(prefix / "share/man/man1/nczfs.1") == str(ROOT / ".venv/share/man/man1/nczfs.1")
    # another checkout's virtualenv (the team's clones each link it), or one since deleted: replaced
    other = _fake_venv(tmp_path / "other-clone" / ".venv")
    for target in (other / "bin" / "nczfs", tmp_path / "gone" / ".venv" / "bin" / "nczfs"):
        link.unlink()
        link.symlink_to(target)
        res = _link_only(prefix)
        assert res.returncode == 0 and os.readlink(link) == str(ours), res.stderr
    # a program of another origin: left alone, with a warning naming it
    link.unlink()
    link.write_text("#!/bin/sh\necho distro nczfs\n")
    res = _link_only(prefix)
    assert res.returncode == 0 and not link.is_symlink() and "distro nczfs" in link.read_text()
    assert f"install.sh: {link} is not an nczfs virtualenv's; left alone" in res.stderr
    link.unlink()
    link.symlink_to("/usr/bin/true")
    res = _link_only(prefix)
    assert os.readlink(link) == "/usr/bin/true" and "(it points to /usr/bin/true)" in res.stderr
    res = _link_only(prefix, NCZFS_FORCE_LINK="1")
    assert os.readlink(link) == str(ours)


def test_the_containerfile_builds_from_the_debian_packages_install_sh_names():
    """The image's build stage installs what install.sh installs for the runtime (it cannot be
    built here: no container registry), and the README says how to run it."""
    import re

    install = (ROOT / "scripts" / "install.sh").read_text()
    runtime = set(re.search(r"apt_pkgs=\(([^)]*)\)", install).group(1).split())
    container = (ROOT / "Containerfile").read_text()
    stages = container.split("\nFROM ")[1:]
    assert len(stages) == 2 and all(s.startswith("docker.io/library/debian:bookworm") for s in stages)
    build_pkgs = set(re.search(r"--no-install-recommends \\\n\s+([^\\]+)\\", stages[0]).group(1).split())
    assert runtime <= build_pkgs, runtime - build_pkgs
    assert "pip install --no-cache-dir /src" in stages[0] and "fuse3" in stages[1]
    readme = (ROOT / "README.md").read_text()
    assert "--device /dev/fuse --cap-add SYS_ADMIN" in readme and "-f Containerfile" in readme
