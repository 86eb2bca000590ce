#!/usr/bin/env bash
# Citus, the distributed engine the Citus tests run (pgrx-tests/tests/citus/), built from
# source into one PostgreSQL installation. Sourced by test.sh (after install-deps.sh); also runs
# on its own for users:
#   bash scripts/install-citus.sh [MAJOR]     (default 18; 15 is Debian's, 16 to 18 the ones
#                                              install-deps.sh installed)
# Citus 14.0.1 for PostgreSQL 17 and 18, 13.2.2 for 15 (Citus 14 dropped 15) and 16 (Citus 14
# needs 16.5's in-place update functions, and the 16 here is 16.2). The source is a
# release tarball checked against the SHA-256 recorded here: the copy in $CITUS_TARBALL_DIR
# (default vendor/citus/) when there is one, else the release tag's archive from the Citus
# project. A version may need a patch of ours from vendor/citus/ (13.2.2: one for PostgreSQL
# 15.20's headers). Skipped when that PostgreSQL already has that Citus version.

# citus_version_of MAJOR: the Citus release built for PostgreSQL MAJOR.
citus_version_of() {
    case $1 in
        15 | 16) echo 13.2.2 ;;
        *) echo 14.0.1 ;;
    esac
}

# citus_sha256_of VERSION: the SHA-256 of that release's tarball (as in vendor/citus/SHA256SUMS).
citus_sha256_of() {
    case $1 in
        13.2.2) echo c8fc76dc8294636a52b1a0dd75a20d8b4a36937df6443e30ca84d8d0464a6bb9 ;;
        14.0.1) echo 26ddb8ec9de07c5fa8426e435d10936e5cd6bed01a5ad94aab92e818081e5ec9 ;;
        *) echo "no SHA-256 recorded for Citus $1" >&2; return 1 ;;
    esac
}

CITUS_VENDOR_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../vendor/citus" && pwd)

# citus_tarball VERSION DIR: puts the checked tarball of Citus VERSION in DIR and prints its path.
citus_tarball() {
    local version=$1 dir=$2 local_copy sha256 tarball
    sha256=$(citus_sha256_of "$version")
    local_copy=${CITUS_TARBALL_DIR:-$CITUS_VENDOR_DIR}/citus-$version.tar.gz
    tarball=$dir/citus-$version.tar.gz
    if [ -f "$local_copy" ]; then
        cp "$local_copy" "$tarball"
    else
        local url=https://github.com/citusdata/citus/archive/refs/tags/v$version.tar.gz
        echo "no local copy of Citus $version ($local_copy); downloading $url" >&2
        curl --fail --silent --show-error --location --output "$tarball" "$url"
    fi
    if ! echo "$sha256  $tarball" | sha256sum --check --quiet; then
        echo "the Citus $version tarball does not have the SHA-256 recorded in install-citus.sh; not building it" >&2
        return 1
    fi
    echo "$tarball"
}

# install_citus MAJOR: builds Citus into PostgreSQL MAJOR's installation unless it is there.
# Installs by rename (safe-install.sh), so a running server keeps the library it mapped.
install_citus() {
    local pg_config version build tarball patch
    pg_config=$(pg_config_of "$1")
    version=$(citus_version_of "$1")
    if grep -qs "^default_version = '${version%.*}" "$("$pg_config" --sharedir)/extension/citus.control" \
            && [ -f "$("$pg_config" --pkglibdir)/citus.so" ]; then
        return 0
    fi
    apt_install_missing liblz4-dev libzstd-dev libcurl4-openssl-dev libkrb5-dev curl patch
    step "Citus $version from source -> PostgreSQL $1 ($pg_config)"
    build="$SOURCE_BUILD_DIR/citus-$1"
    rm -rf "$build"
    mkdir -p "$build/staging"
    tarball=$(citus_tarball "$version" "$build")
    tar --extract --gzip --file "$tarball" --directory "$build" --strip-components=1
    for patch in "$CITUS_VENDOR_DIR"/citus-"$version"-*.patch; do
        [ -f "$patch" ] || continue
        patch --directory="$build" --strip=1 --forward --quiet <"$patch"
    done
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
    require_root
    install_base_packages
    install_postgres_major "${1:-18}"
    install_citus "${1:-18}"
fi
