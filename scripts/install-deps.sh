#!/usr/bin/env bash
# Installs what building snowflake_id and running PostgreSQL clusters need on Debian 12, as
# root. Idempotent: each step is skipped when its result is already there. Sourced by every
# script (demo.sh, test.sh, build-deb.sh, bench/run.sh); the client libraries that only the
# client tests use are installed by install-client-deps.sh, which test.sh sources.
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
