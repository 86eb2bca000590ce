#!/usr/bin/env bash
# Builds the Debian package of snowflake_id for PostgreSQL 15:
#   target/debian/postgresql-15-snowflake-id_<version>_<arch>.deb
# from a release build (`cargo pgrx package`). Idempotent: every run rebuilds the package from
# scratch (the cargo build itself is incremental). Prints the path of the .deb on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install-deps.sh

PACKAGE=postgresql-$PG_MAJOR-snowflake-id
# The version of the [package] section of Cargo.toml (the extension's default_version too).
VERSION=$(awk -F'"' '/^\[/ { section = $0 } section == "[package]" && /^version *=/ { print $2; exit }' Cargo.toml)
ARCH=$(dpkg --print-architecture)
TARGET_DIR=${CARGO_TARGET_DIR:-target}
PGRX_OUT=$TARGET_DIR/release/snowflake_id-pg$PG_MAJOR
STAGING=$TARGET_DIR/debian/${PACKAGE}_${VERSION}_$ARCH
DEB=$TARGET_DIR/debian/${PACKAGE}_${VERSION}_$ARCH.deb
if [ -z "$VERSION" ]; then
    echo "no version found in the [package] section of Cargo.toml" >&2
    exit 1
fi

step "cargo pgrx package (release) -> $PGRX_OUT"
rm -rf "$PGRX_OUT"   # no files left over from an older version
cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$PGRX_OUT"

step "dpkg-deb --build -> $DEB"
rm -rf "$STAGING" "$DEB"
mkdir -p "$STAGING/DEBIAN"
cp -a "$PGRX_OUT/." "$STAGING/"
for file in "$($PG_CONFIG --pkglibdir)/snowflake_id.so" \
            "$($PG_CONFIG --sharedir)/extension/snowflake_id.control" \
            "$($PG_CONFIG --sharedir)/extension/snowflake_id--$VERSION.sql"; do
    if [ ! -f "$STAGING$file" ]; then
        echo "cargo pgrx package did not produce $file" >&2
        exit 1
    fi
done
find "$STAGING" -type d -exec chmod 0755 {} +
find "$STAGING" -type f -exec chmod 0644 {} +
(cd "$STAGING" && find usr -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum) \
    > "$STAGING/DEBIAN/md5sums"
installed_size=$(du -sk --exclude=DEBIAN "$STAGING" | cut -f1)
cat > "$STAGING/DEBIAN/control" <<CONTROL
Package: $PACKAGE
Version: $VERSION
Architecture: $ARCH
Maintainer: ${DEB_MAINTAINER:-snowflake_id developers <snowflake-id@invalid>}
Installed-Size: $installed_size
Depends: postgresql-$PG_MAJOR
Section: database
Priority: optional
Description: Snowflake-style 64-bit IDs generated inside PostgreSQL $PG_MAJOR
 snowflake_id is a PostgreSQL extension that generates 64-bit IDs which are
 unique across backends, restarts, clock faults and shards, roughly
 time-ordered and decodable in SQL, usable as a column default:
 DEFAULT snowflake_nextval().
 .
 The server must preload the library: add
 shared_preload_libraries = 'snowflake_id' to postgresql.conf, restart, then
 run CREATE EXTENSION snowflake_id in each database that uses it.
CONTROL
dpkg-deb --root-owner-group --build "$STAGING" "$DEB" >/dev/null
dpkg-deb --field "$DEB" Package Version Architecture Depends
echo "$DEB"
