#!/usr/bin/env bash
# Installs what building snowflake_id and running PostgreSQL clusters need on Debian 12, as
# root. Idempotent: each step is skipped when its result is already there. Sourced by every
# script (demo.sh, test.sh, build-package.sh, bench/run.sh); the client libraries that only the
# client tests use are installed by install-client-deps.sh, which test.sh sources.
set -euo pipefail

PGRX_VERSION=0.18.1
export DEBIAN_FRONTEND=noninteractive
source "$(dirname "${BASH_SOURCE[0]}")/install-postgres.sh"
# The major the scripts' own clusters (demo, benchmarks, packages) use unless told otherwise;
# test.sh runs its tests on every supported major.
PG_MAJOR=${SNOWFLAKE_PG_MAJOR:-15}
export PG_CONFIG
PG_CONFIG=$(pg_config_of "$PG_MAJOR")

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
postgresql_15_was_installed=$(dpkg-query -W -f='${Status}' postgresql-15 2>/dev/null || true)
apt_install_missing postgresql-15 postgresql-server-dev-15 \
    clang libclang-dev pkg-config sudo faketime build-essential
# Installing Debian's package starts a default cluster; this project runs throwaway clusters of
# its own, so it stops that one, right after creating it. A cluster that ran before is left
# alone: the scripts never stop or change a server they did not start.
if [ "$postgresql_15_was_installed" != "install ok installed" ] \
        && pg_lsclusters -h 2>/dev/null | grep -q '^15 main .* online'; then
    pg_ctlcluster --force 15 main stop 2>/dev/null || true
fi
for major in "${SUPPORTED_PG_MAJORS[@]}"; do
    [ "$major" = 15 ] || install_postgres_from_source "$major"
done

if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
    step "cargo install cargo-pgrx --version $PGRX_VERSION --locked (takes ~7 minutes once)"
    cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
fi
pgrx_init_args=()
for major in "${SUPPORTED_PG_MAJORS[@]}"; do
    pgrx_init_args+=("--pg$major" "$(pg_config_of "$major")")
    grep -qs "^pg$major = \"$(pg_config_of "$major")\"" "${PGRX_HOME:-$HOME/.pgrx}/config.toml" \
        || pgrx_init_needed=1
done
if [ -n "${pgrx_init_needed:-}" ]; then
    step "cargo pgrx init ${pgrx_init_args[*]}"
    cargo pgrx init "${pgrx_init_args[@]}"
fi
