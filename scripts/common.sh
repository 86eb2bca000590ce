#!/usr/bin/env bash
# What every script of this project shares; it installs nothing. Sourced by install-deps.sh
# (and through it by demo.sh, test.sh, build-package.sh, bench/run.sh and
# bench/compare_builds.sh), and by install-client-deps.sh.
#   step MESSAGE…            a progress line
#   require_root             stops unless run as root
#   require_cargo            puts rustup's cargo on PATH, or stops when there is none
#   apt_install_missing PKG… installs the Debian packages among PKG… not installed yet
#   cargo_package_version    the extension's version (Cargo.toml's [package] version)
#   debian_package_version   the version of the Debian packages built from this tree
#   PG_MAJOR, PG_CONFIG      the major the scripts' own clusters run on ($SNOWFLAKE_PG_MAJOR,
#                            default 15) and its pg_config
# and, from install-postgres.sh, the supported majors and where each comes from.
set -euo pipefail

PGRX_VERSION=0.18.1
# The whole-cluster tests run under cargo-nextest: one that selects tests by their group
# (0.9.133) will do; where there is none, this version is installed.
NEXTEST_VERSION=0.9.143
NEXTEST_OLDEST=0.9.133
export DEBIAN_FRONTEND=noninteractive

step() { printf '\n==> %s\n' "$*"; }

require_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "run this as root (it installs packages and runs PostgreSQL as the postgres user)" >&2
        exit 1
    fi
}

require_cargo() {
    if ! command -v cargo >/dev/null 2>&1; then
        for dir in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
            [ -x "$dir/cargo" ] && export PATH="$dir:$PATH"
        done
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        echo "cargo is missing: install the Rust toolchain (rustup) first" >&2
        exit 1
    fi
}

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

# apt_install_missing_services PACKAGE…: apt_install_missing for packages that ship a service
# (Prometheus, postgres_exporter): a policy-rc.d for the length of the install keeps it from
# starting them, and their units are disabled, so nothing listens but what the tests start.
apt_install_missing_services() {
    local policy=/usr/sbin/policy-rc.d
    if [ -e "$policy" ]; then
        apt_install_missing "$@"
    else
        (
            trap 'rm -f "$policy"' EXIT
            printf '#!/bin/sh\nexit 101\n' > "$policy"
            chmod 755 "$policy"
            apt_install_missing "$@"
        )
    fi
    systemctl disable --now "$@" >/dev/null 2>&1 || true
}

# (Also the extension's default_version: cargo-pgrx and install_extension_files fill it in.)
# cargo_package_version [TREE]: of TREE's Cargo.toml (default: this repository's).
cargo_package_version() {
    package_version_in_manifest < "${1:-$(dirname "${BASH_SOURCE[0]}")/..}/Cargo.toml"
}

# package_version_in_manifest: the [package] version of the Cargo.toml read from stdin.
package_version_in_manifest() {
    awk -F'"' '/^\[/ { section = $0 } section == "[package]" && /^version *=/ { print $2; exit }'
}

# debian_package_version [TREE]: the version of the Debian packages built from TREE (default:
# this repository), by Debian's convention for snapshots: the release's version for a clean
# checkout of its tag v<version> (or a tree outside git, such as the PGXN archive); otherwise
# <version>+git<UTC time of HEAD's commit>.<HEAD's short hash>, and for a tree whose files differ
# from HEAD <version>+git<UTC build time, after HEAD's>.dirty. That sorts above the release it
# follows (0.10.0) and below the next (0.10.1, 0.11.0), and a later commit, or a later build of
# changed files, above an earlier one: installing a rebuild replaces the installed package.
# (Short: lintian wants package file names of at most 80 characters, counted with the longest
# architecture name.)
debian_package_version() {
    local tree=${1:-$(dirname "${BASH_SOURCE[0]}")/..} version head_time build_time
    version=$(cargo_package_version "$tree")
    if [ ! -e "$tree/.git" ]; then
        echo "$version"
        return
    fi
    head_time=$(git -C "$tree" log -1 --format=%ct HEAD)
    if [ -n "$(git -C "$tree" status --porcelain)" ]; then
        build_time=$(date -u +%s)
        [ "$build_time" -gt "$head_time" ] || build_time=$((head_time + 1))
        echo "$version+git$(date -u -d "@$build_time" +%Y%m%d%H%M%S).dirty"
    elif [ -n "$(git -C "$tree" tag --points-at HEAD --list "v$version")" ]; then
        echo "$version"
    else
        echo "$version+git$(date -u -d "@$head_time" +%Y%m%d%H%M%S).$(git -C "$tree" rev-parse --short=7 HEAD)"
    fi
}

source "$(dirname "${BASH_SOURCE[0]}")/install-postgres.sh"
# The major the scripts' own clusters (demo, benchmarks, packages) use unless told otherwise;
# test.sh runs its tests on every supported major.
PG_MAJOR=${SNOWFLAKE_PG_MAJOR:-15}
export PG_CONFIG
PG_CONFIG=$(pg_config_of "$PG_MAJOR")
