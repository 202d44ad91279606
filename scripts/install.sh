#!/usr/bin/env bash
# Install nczfs into ./.venv on Debian, as root. Every system and Python dependency is here.
#   bash scripts/install.sh          runtime + the demo's netCDF4 wheel
#   bash scripts/install.sh --test   runtime + everything the test suite needs
set -euo pipefail
cd "$(dirname "$0")/.."

extra=demo
apt_pkgs=(fuse3 libfuse3-dev pkg-config gcc python3 python3-venv python3-dev)
if [ "${1:-}" = "--test" ]; then
    extra=test
    apt_pkgs+=(rsync netcdf-bin tar diffutils findutils zip unzip)
    apt_pkgs+=(systemd mount util-linux passwd)  # systemd-analyze verify; mount -T; setpriv; useradd
    apt_pkgs+=(openssl iproute2 nginx-core)  # test certificates; a sealed network namespace; a web server
    command -v npm >/dev/null || apt_pkgs+=(nodejs npm)  # Azurite, the Azure Blob emulator (npm)
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
if ! .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[$extra]" >.venv/pip.log 2>&1; then
    cat .venv/pip.log
    echo "pip install failed" >&2
    exit 1
fi
.venv/bin/python -c "import nczfs, pyfuse3, trio" 
if [ "$extra" = test ] && [ ! -x .venv/azurite/node_modules/.bin/azurite-blob ]; then
    # 3.35 is the last Azurite that runs on Debian 12's nodejs 18
    npm install --silent --no-audit --no-fund --prefix .venv/azurite azurite@3.35.0 >.venv/npm.log 2>&1 \
        || { cat .venv/npm.log; echo "npm install azurite failed" >&2; exit 1; }
fi
# mount(8) / fstab / systemd find the program as `nczfs` on the system PATH (via mount.fuse3)
ln -sfn "$(pwd)/.venv/bin/nczfs" /usr/local/bin/nczfs
echo "nczfs installed in $(pwd)/.venv ($(.venv/bin/nczfs --version))"
