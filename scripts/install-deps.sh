#!/usr/bin/env bash
# Installs what building and testing snowflake_id needs on Debian 12, as root. Idempotent:
# each step is skipped when its result is already there. Sourced by demo.sh and test.sh.
set -euo pipefail

PG_MAJOR=15
PGRX_VERSION=0.18.1
export PG_CONFIG=/usr/lib/postgresql/$PG_MAJOR/bin/pg_config
export DEBIAN_FRONTEND=noninteractive

step() { printf '\n==> %s\n' "$*"; }

if [ "$(id -u)" -ne 0 ]; then
    echo "run this as root (it installs packages and runs PostgreSQL as the postgres user)" >&2
    exit 1
fi
if ! command -v cargo >/dev/null 2>&1; then
    for dir in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
        [ -x "$dir/cargo" ] && export PATH="$dir:$PATH"
    done
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo is missing: install the Rust toolchain (rustup) first" >&2
    exit 1
fi

# Installs the Debian packages among "$@" that are not installed yet (also used by bench/run.sh).
apt_install_missing() {
    local package missing=()
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$package")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        step "apt-get install ${missing[*]}"
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}
apt_install_missing postgresql-$PG_MAJOR postgresql-server-dev-$PG_MAJOR \
    clang libclang-dev pkg-config sudo faketime build-essential
# Debian's package starts a default cluster; this project runs throwaway clusters of its own.
if command -v pg_lsclusters >/dev/null && pg_lsclusters -h 2>/dev/null | grep -q online; then
    pg_ctlcluster --force "$PG_MAJOR" main stop 2>/dev/null || true
fi

if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
    step "cargo install cargo-pgrx --version $PGRX_VERSION --locked (takes ~7 minutes once)"
    cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
fi
if ! grep -qs "^pg$PG_MAJOR = \"$PG_CONFIG\"" "${PGRX_HOME:-$HOME/.pgrx}/config.toml"; then
    step "cargo pgrx init --pg$PG_MAJOR $PG_CONFIG"
    cargo pgrx init --pg$PG_MAJOR "$PG_CONFIG"
fi

# Client libraries of the client guide's examples (clients/), run by pgrx-tests/tests/clients.rs.
CLIENTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../clients" && pwd)
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    step "apt-get install nodejs npm"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi
if ! python3 -m pip --version >/dev/null 2>&1; then
    step "apt-get install python3-pip"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
fi
# Is every `name[extras]==version` line of requirements.txt installed, extras included?
python_requirements_met() {
    python3 - "$1" <<'PY'
import importlib.metadata as metadata, re, sys
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    match = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[([^\]]*)\])?==(\S+)", line)
    if not match:
        sys.exit(1)
    name, extras, version = match.groups()
    try:
        if metadata.version(name) != version:
            sys.exit(1)
        for extra in filter(None, (extras or "").split(",")):
            for requirement in metadata.requires(name) or []:
                if re.search(r"extra\s*==\s*['\"]%s['\"]" % re.escape(extra.strip()), requirement):
                    metadata.version(re.match(r"[A-Za-z0-9_.-]+", requirement).group(0))
    except metadata.PackageNotFoundError:
        sys.exit(1)
PY
}
if ! python_requirements_met "$CLIENTS_DIR/python/requirements.txt"; then
    step "pip install -r clients/python/requirements.txt"
    # Debian's own python3 is "externally managed" (PEP 668): these pinned packages go in anyway.
    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet --root-user-action=ignore \
        -r "$CLIENTS_DIR/python/requirements.txt"
fi
lock_hash=$(sha256sum "$CLIENTS_DIR/node/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$CLIENTS_DIR/node/node_modules/.package-lock.sha256" 2>/dev/null)" != "$lock_hash" ]; then
    step "npm ci --prefix clients/node"
    npm ci --prefix "$CLIENTS_DIR/node" --no-audit --no-fund --loglevel=error
    echo "$lock_hash" > "$CLIENTS_DIR/node/node_modules/.package-lock.sha256"
fi
