#!/usr/bin/env bash
# Citus, the distributed engine the Citus tests run (pgrx-tests/tests/citus.rs), built from
# source into one PostgreSQL installation. Sourced by test.sh (after install-deps.sh); also runs
# on its own for users:
#   bash scripts/install-citus.sh [MAJOR]     (default 18; the PostgreSQL install-deps.sh built)
# The source is a release tarball checked against the SHA-256 recorded here: the copy in
# $CITUS_TARBALL or vendor/citus/ when there is one, else the release tag's archive from the
# Citus project. Skipped when that PostgreSQL already has this Citus version.

CITUS_VERSION=14.0.1
CITUS_SHA256=26ddb8ec9de07c5fa8426e435d10936e5cd6bed01a5ad94aab92e818081e5ec9
CITUS_URL=https://github.com/citusdata/citus/archive/refs/tags/v$CITUS_VERSION.tar.gz
# The majors the Citus tests run on (Citus 14 supports PostgreSQL 16 to 18).
CITUS_PG_MAJORS=(18)

# citus_tarball DIR: puts the checked Citus tarball in DIR and prints its path.
citus_tarball() {
    local dir=$1 local_copy
    local_copy=${CITUS_TARBALL:-$(dirname "${BASH_SOURCE[0]}")/../vendor/citus/citus-$CITUS_VERSION.tar.gz}
    if [ -f "$local_copy" ]; then
        cp "$local_copy" "$dir/citus-$CITUS_VERSION.tar.gz"
    else
        echo "no local copy of Citus $CITUS_VERSION ($local_copy); downloading $CITUS_URL" >&2
        curl --fail --silent --show-error --location --output "$dir/citus-$CITUS_VERSION.tar.gz" "$CITUS_URL"
    fi
    if ! echo "$CITUS_SHA256  $dir/citus-$CITUS_VERSION.tar.gz" | sha256sum --check --quiet; then
        echo "the Citus $CITUS_VERSION tarball does not have the SHA-256 recorded in $0; not building it" >&2
        return 1
    fi
    echo "$dir/citus-$CITUS_VERSION.tar.gz"
}

# install_citus MAJOR: builds Citus into PostgreSQL MAJOR's installation unless it is there.
# Installs by rename (safe-install.sh), so a running server keeps the library it mapped.
install_citus() {
    local pg_config build tarball
    pg_config=$(pg_config_of "$1")
    if grep -qs "^default_version = '${CITUS_VERSION%.*}" "$("$pg_config" --sharedir)/extension/citus.control" \
            && [ -f "$("$pg_config" --pkglibdir)/citus.so" ]; then
        return 0
    fi
    apt_install_missing liblz4-dev libzstd-dev libcurl4-openssl-dev libkrb5-dev curl
    step "Citus $CITUS_VERSION from source -> PostgreSQL $1 ($pg_config)"
    build="$SOURCE_BUILD_DIR/citus-$1"
    rm -rf "$build"
    mkdir -p "$build/staging"
    tarball=$(citus_tarball "$build")
    tar --extract --gzip --file "$tarball" --directory "$build" --strip-components=1
    (
        cd "$build"
        ./configure PG_CONFIG="$pg_config" >configure.log 2>&1 || { tail -n 40 configure.log >&2; exit 1; }
        make -j"$(nproc)" >make.log 2>&1 || { tail -n 40 make.log >&2; exit 1; }
        make install DESTDIR="$build/staging" >install.log 2>&1 || { tail -n 40 install.log >&2; exit 1; }
    )
    install_tree_by_rename "$build/staging"
    rm -rf "$build"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    cd "$(dirname "$0")/.."
    source scripts/install-deps.sh
    source scripts/safe-install.sh
    install_citus "${1:-18}"
fi
