#!/usr/bin/env bash
# pgEdge's snowflake extension, the peer the benchmark and fault comparisons measure against and
# the tests that move a table over from pgEdge start from, built from source into one PostgreSQL
# installation. Sourced (after install-deps.sh and safe-install.sh); also runs on its own:
#   bash scripts/install-pgedge-snowflake.sh [MAJOR]     (default 15; 15 is Debian's, 17 and
#                                                         18 the ones install-deps.sh built)
# Version 2.6.0 (commit ebbdae8) for every major, from the tarball in vendor/pgedge-snowflake/,
# checked against the SHA-256 in its SHA256SUMS (also recorded here) and built with PGXS.
# Skipped when that PostgreSQL already has this version. Installed by rename (safe-install.sh),
# so a running server keeps the library it mapped.

PGEDGE_SNOWFLAKE_VERSION=2.6.0
PGEDGE_SNOWFLAKE_TARBALL=pgedge-snowflake-2.6.0-ebbdae8.tar.gz
PGEDGE_SNOWFLAKE_SHA256=ffd9e17d03709826dfa16b5e3474726c6ab5a1d43738c311a04bcf6eac981fac
PGEDGE_SNOWFLAKE_VENDOR_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../vendor/pgedge-snowflake" && pwd)

# pgedge_snowflake_installed PG_CONFIG: whether that installation has this version of pgEdge's
# snowflake (its control file's default_version, exactly, and its library).
pgedge_snowflake_installed() {
    grep -qsx "default_version = '$PGEDGE_SNOWFLAKE_VERSION'" \
            "$("$1" --sharedir)/extension/snowflake.control" \
        && [ -f "$("$1" --pkglibdir)/snowflake.so" ]
}

# pgedge_snowflake_logged LOG COMMAND…: runs COMMAND with its output in LOG; on failure prints
# the end of LOG.
pgedge_snowflake_logged() {
    local log=$1
    shift
    "$@" >"$log" 2>&1 || { tail -n 40 "$log" >&2; return 1; }
}

# pgedge_snowflake_build PG_CONFIG DIR: unpacks the checked tarball into DIR/source, builds it
# for PG_CONFIG and installs it under DIR/staging. (Each step checked: callers run it under ||.)
pgedge_snowflake_build() {
    local pg_config=$1 dir=$2 tarball recorded
    tarball=$dir/$PGEDGE_SNOWFLAKE_TARBALL
    recorded=$(awk -v file="$PGEDGE_SNOWFLAKE_TARBALL" '$2 == file { print $1 }' \
        "$PGEDGE_SNOWFLAKE_VENDOR_DIR/SHA256SUMS")
    if [ "$recorded" != "$PGEDGE_SNOWFLAKE_SHA256" ]; then
        echo "vendor/pgedge-snowflake/SHA256SUMS does not hold the SHA-256 recorded in install-pgedge-snowflake.sh for $PGEDGE_SNOWFLAKE_TARBALL" >&2
        return 1
    fi
    cp "$PGEDGE_SNOWFLAKE_VENDOR_DIR/$PGEDGE_SNOWFLAKE_TARBALL" "$tarball" || return 1
    if ! echo "$PGEDGE_SNOWFLAKE_SHA256  $tarball" | sha256sum --check --quiet; then
        echo "$PGEDGE_SNOWFLAKE_TARBALL does not have the SHA-256 in vendor/pgedge-snowflake/SHA256SUMS; not building it" >&2
        return 1
    fi
    tar --extract --gzip --file "$tarball" --directory "$dir/source" --strip-components=1 \
        || return 1
    pgedge_snowflake_logged "$dir/make.log" \
        make -C "$dir/source" -j"$(nproc)" USE_PGXS=1 PG_CONFIG="$pg_config" || return 1
    pgedge_snowflake_logged "$dir/install.log" \
        make -C "$dir/source" USE_PGXS=1 PG_CONFIG="$pg_config" install DESTDIR="$dir/staging" \
        || return 1
    if [ ! -f "$dir/staging$("$pg_config" --pkglibdir)/snowflake.so" ]; then
        echo "the build of pgEdge snowflake put no snowflake.so under $dir/staging" >&2
        return 1
    fi
}

# pgedge_snowflake_install_staged DIR: puts every file under DIR/staging in place by rename,
# then checks that each installed file has the staged bytes.
pgedge_snowflake_install_staged() {
    local file
    install_tree_by_rename "$1/staging" || return 1
    while IFS= read -r -d '' file; do
        cmp -s "$1/staging/$file" "/$file" || { echo "/$file was not installed" >&2; return 1; }
    done < <(cd "$1/staging" && find . -type f -printf '%P\0')
}

# install_pgedge_snowflake MAJOR: builds pgEdge's snowflake into PostgreSQL MAJOR's
# installation unless this version is there. The scratch directory goes away either way.
install_pgedge_snowflake() {
    local major=$1 pg_config build status=0
    pg_config=$(pg_config_of "$major")
    if [ ! -x "$pg_config" ]; then
        echo "PostgreSQL $major is not installed ($pg_config is missing)" >&2
        return 1
    fi
    if pgedge_snowflake_installed "$pg_config"; then
        return 0
    fi
    step "pgEdge snowflake $PGEDGE_SNOWFLAKE_VERSION from vendor/pgedge-snowflake/ -> PostgreSQL $major ($pg_config)"
    build="$SOURCE_BUILD_DIR/pgedge-snowflake-$major"
    rm -rf "$build"
    mkdir -p "$build/source" "$build/staging"
    pgedge_snowflake_build "$pg_config" "$build" \
        && pgedge_snowflake_install_staged "$build" \
        || status=1
    rm -rf "$build"
    return "$status"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    cd "$(dirname "$0")/.."
    source scripts/install-deps.sh
    source scripts/safe-install.sh
    require_root
    install_base_packages
    install_postgres_major "${1:-15}"
    install_pgedge_snowflake "${1:-15}"
fi
