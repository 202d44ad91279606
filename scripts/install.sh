#!/usr/bin/env bash
# Install nczfs on Debian or Ubuntu, as root: the system packages it needs, then a wheel built
# from this checkout into ./.venv (not editable: run this again after changing the code; the
# test command does), then links in /usr/local for mount(8), man and shell completion.
#   bash scripts/install.sh              runtime + the demo's netCDF4 wheel
#   bash scripts/install.sh --test       runtime + everything the test suite needs
#   bash scripts/install.sh --link-only  only the /usr/local links
# Other systems: README.md (Dependencies) lists the packages; then `pip install .` in a venv.
#
# The /usr/local links are replaced only when missing or pointing into an nczfs virtualenv (this
# checkout's, or another checkout's on the same machine, or one whose checkout is gone); a
# program of another origin there (a distribution's package, a hand-made script) is left alone
# with a warning, unless NCZFS_FORCE_LINK=1. NCZFS_LINK_PREFIX changes /usr/local (tests).
set -euo pipefail
cd "$(dirname "$0")/.."

extra=demo,icechunk
link_only=false
case "${1:-}" in
    --test) extra=test ;;
    --link-only) link_only=true ;;
    "") ;;
    *) echo "usage: bash scripts/install.sh [--test|--link-only]" >&2; exit 2 ;;
esac
venv=$(pwd)/.venv
prefix=${NCZFS_LINK_PREFIX:-/usr/local}

# is LINK a symlink into an nczfs virtualenv (VENV/bin/nczfs, VENV/share/...)? dangling counts
nczfs_venv_link() {
    local link=$1 target root
    [ -L "$link" ] || return 1
    target=$(readlink "$link")
    case "$target" in /*) ;; *) target=$(dirname "$link")/$target ;; esac
    case "$target" in
        */bin/nczfs) root=${target%/bin/nczfs} ;;
        */share/man/man1/nczfs.1) root=${target%/share/man/man1/nczfs.1} ;;
        */share/bash-completion/completions/nczfs) root=${target%/share/bash-completion/completions/nczfs} ;;
        */share/zsh/site-functions/_nczfs) root=${target%/share/zsh/site-functions/_nczfs} ;;
        *) return 1 ;;
    esac
    [ -e "$target" ] || return 0  # that virtualenv is gone
    [ -f "$root/pyvenv.cfg" ] && [ -f "$root/bin/nczfs" ] && grep -q "nczfs.cli" "$root/bin/nczfs"
}

# link_into LINK TARGET: make LINK point at TARGET if it is ours to replace; else say why not
link_into() {
    local link=$1 target=$2
    if [ -e "$link" ] || [ -L "$link" ]; then
        if ! nczfs_venv_link "$link" && [ "${NCZFS_FORCE_LINK:-}" != 1 ]; then
            local what
            what=$(readlink "$link" 2>/dev/null || true)
            echo "install.sh: $link is not an nczfs virtualenv's${what:+ (it points to $what)}; left alone:" \
                 "mount -t fuse.nczfs and the systemd units run it, not this install." \
                 "Remove it, or run again with NCZFS_FORCE_LINK=1" >&2
            return 1
        fi
    fi
    mkdir -p "$(dirname "$link")"
    ln -sfn "$target" "$link"
}

make_links() {
    # mount(8) / fstab / systemd find the program as `nczfs` on the system PATH (via mount.fuse3)
    if link_into "$prefix/bin/nczfs" "$venv/bin/nczfs"; then
        link_into "$prefix/share/man/man1/nczfs.1" "$venv/share/man/man1/nczfs.1" || true
        link_into "$prefix/share/bash-completion/completions/nczfs" "$venv/share/bash-completion/completions/nczfs" || true
        link_into "$prefix/share/zsh/site-functions/_nczfs" "$venv/share/zsh/site-functions/_nczfs" || true
    fi
}

if $link_only; then
    make_links
    exit 0
fi

apt_pkgs=(fuse3 libfuse3-dev pkg-config gcc python3 python3-venv python3-dev)
if [ "$extra" = test ]; then
    apt_pkgs+=(rsync netcdf-bin tar diffutils findutils zip unzip man-db)
    apt_pkgs+=(gdal-bin cdo nco hdf5-tools)  # readers of the .nc/.nc4 files (-o nc_files)
    apt_pkgs+=(systemd mount util-linux passwd)  # systemd-analyze verify; mount -T; setpriv; useradd
    apt_pkgs+=(openssl iproute2 nginx-core)  # test certificates; a sealed network namespace; a web server
    command -v npm >/dev/null || apt_pkgs+=(nodejs npm)  # Azurite, the Azure Blob emulator (npm)
    # pjdfstest, fsx and fsstress built from ../shared/posix-suites (tests/posix_suites.py), and the
    # tools pjdfstest's scripts call; s3fs-fuse is the peer of the POSIX benchmark and interop test
    apt_pkgs+=(autoconf automake make perl xfslibs-dev s3fs)
    # the peers and jobs of bench/bench_s3.py: rclone mount, and fio (jobs modelled on mountpoint-s3's)
    apt_pkgs+=(rclone fio)
fi

missing=()
for p in "${apt_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing Debian packages: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
pip() { .venv/bin/python -m pip --disable-pip-version-check "$@" >>.venv/pip.log 2>&1; }
: >.venv/pip.log
rm -rf build/wheel
# the wheel this checkout makes (pyproject.toml: the package, the man page, completions, docs,
# systemd units), installed as a user's `pip install` would; the old install goes first
# (same version number, and an editable one would shadow it)
if ! pip wheel --no-deps -w build/wheel . || ! pip uninstall -y nczfs || ! pip install "$(ls build/wheel/nczfs-*.whl)[$extra]"; then
    cat .venv/pip.log
    echo "pip install failed" >&2
    exit 1
fi
(cd / && "$venv/bin/python" -c "import nczfs.cli, pyfuse3, trio, google.cloud.storage, azure.storage.blob")
if [ "$extra" = test ] && [ ! -x .venv/azurite/node_modules/.bin/azurite-blob ]; then
    # 3.35 is the last Azurite that runs on Debian 12's nodejs 18
    npm install --silent --no-audit --no-fund --prefix .venv/azurite azurite@3.35.0 >.venv/npm.log 2>&1 \
        || { cat .venv/npm.log; echo "npm install azurite failed" >&2; exit 1; }
fi
make_links || true
echo "nczfs installed in $venv ($(.venv/bin/nczfs --version))"
