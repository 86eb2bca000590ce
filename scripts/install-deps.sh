#!/usr/bin/env bash
# Installing what building snowflake_id and running PostgreSQL clusters need on Debian 12, as
# root, in steps that are functions; sourcing this file defines them and installs nothing.
# Each step is idempotent: it is skipped when its result is already there.
#   install_base_packages     Debian's PostgreSQL 15 with its headers, clang, faketime, …
#   install_postgres_major N  PostgreSQL N: Debian's for 15, PyPI's wheel for 16, built from
#                             source for 17 and 18
#   install_cargo_pgrx        cargo-pgrx $PGRX_VERSION, `cargo pgrx init` with every installed major
#   install_everything        all of the above for every supported major (what test.sh needs)
#   install_cargo_nextest     cargo-nextest, which test.sh runs the whole-cluster tests with
# Run on its own (bash scripts/install-deps.sh) it installs everything. The demo needs only
# the first two for its major; the client libraries of the client tests are
# install-client-deps.sh's.

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

install_base_packages() {
    local postgresql_15_was_installed
    postgresql_15_was_installed=$(dpkg-query -W -f='${Status}' postgresql-15 2>/dev/null || true)
    apt_install_missing postgresql-15 postgresql-server-dev-15 \
        clang libclang-dev pkg-config sudo faketime build-essential
    # Installing Debian's package starts a default cluster; this project runs throwaway
    # clusters of its own, so it stops that one, right after creating it. A cluster that ran
    # before is left alone: the scripts never stop or change a server they did not start.
    if [ "$postgresql_15_was_installed" != "install ok installed" ] \
            && pg_lsclusters -h 2>/dev/null | grep -q '^15 main .* online'; then
        pg_ctlcluster --force 15 main stop 2>/dev/null || true
    fi
}

install_postgres_major() {
    case $1 in
        15) ;;
        16) install_postgres_from_wheel ;;
        *) install_postgres_from_source "$1" ;;
    esac
}

install_cargo_pgrx() {
    local major init_args=() init_needed=
    require_cargo
    if ! cargo pgrx --version 2>/dev/null | grep -q " $PGRX_VERSION\$"; then
        step "cargo install cargo-pgrx --version $PGRX_VERSION --locked (takes about 4 minutes once)"
        cargo install cargo-pgrx --version "$PGRX_VERSION" --locked
    fi
    for major in "${SUPPORTED_PG_MAJORS[@]}"; do
        [ -x "$(pg_config_of "$major")" ] || continue
        init_args+=("--pg$major" "$(pg_config_of "$major")")
        grep -qs "^pg$major = \"$(pg_config_of "$major")\"" "${PGRX_HOME:-$HOME/.pgrx}/config.toml" \
            || init_needed=1
    done
    if [ -n "$init_needed" ]; then
        step "cargo pgrx init ${init_args[*]}"
        cargo pgrx init "${init_args[@]}"
    fi
}

install_cargo_nextest() {
    local installed
    require_cargo
    installed=$(cargo nextest --version 2>/dev/null | awk 'NR == 1 {print $2}')
    if [ -z "$installed" ] \
            || [ "$(printf '%s\n' "$NEXTEST_OLDEST" "$installed" | sort -V | head -n 1)" != "$NEXTEST_OLDEST" ]; then
        step "cargo install cargo-nextest --version $NEXTEST_VERSION --locked (takes a few minutes once)"
        cargo install cargo-nextest --version "$NEXTEST_VERSION" --locked
    fi
}

install_everything() {
    local major
    require_root
    require_cargo
    install_base_packages
    # The callgrind cost script's cluster test (bench/costs.py) counts with valgrind.
    apt_install_missing valgrind
    for major in "${SUPPORTED_PG_MAJORS[@]}"; do
        install_postgres_major "$major"
    done
    install_cargo_pgrx
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    install_everything
fi
