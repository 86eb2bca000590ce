#!/usr/bin/env bash
# Builds the installable package of snowflake_id for one PostgreSQL major (default
# $SNOWFLAKE_PG_MAJOR, else 15) from a release build (`cargo pgrx package`):
#   15      a Debian package for Debian's PostgreSQL 15:
#           target/package/postgresql-15-snowflake-id_<version>_<arch>.deb
#           installed with `dpkg -i` (or `apt-get install ./…deb`);
#   17, 18  a tarball for the PostgreSQL that install-deps.sh builds under $SOURCE_PG_ROOT:
#           target/package/snowflake_id-<version>-pg<major>-<arch>.tar.gz
#           installed with `tar --extract --unlink-first --gzip --file … --directory /`.
# Both install each file as a new file (dpkg renames; tar --unlink-first removes the old file
# first), so running servers keep the library they mapped. Idempotent: every run rebuilds the
# package from scratch (the cargo build itself is incremental). Prints the path of the package
# on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${1:-}" ]; then
    export SNOWFLAKE_PG_MAJOR=$1
fi
source scripts/install-deps.sh
require_root
install_base_packages
install_postgres_major "$PG_MAJOR"
install_cargo_pgrx

VERSION=$(cargo_package_version)
ARCH=$(dpkg --print-architecture)
TARGET_DIR=${CARGO_TARGET_DIR:-target}
PGRX_OUT=$TARGET_DIR/release/snowflake_id-pg$PG_MAJOR
mkdir -p "$TARGET_DIR/package"
if [ -z "$VERSION" ]; then
    echo "no version found in the [package] section of Cargo.toml" >&2
    exit 1
fi

step "cargo pgrx package (release, PostgreSQL $PG_MAJOR) -> $PGRX_OUT"
rm -rf "$PGRX_OUT"   # no files left over from an older version
cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$PGRX_OUT" \
    --no-default-features --features "pg$PG_MAJOR"
for file in "$($PG_CONFIG --pkglibdir)/snowflake_id.so" \
            "$($PG_CONFIG --sharedir)/extension/snowflake_id.control" \
            "$($PG_CONFIG --sharedir)/extension/snowflake_id--$VERSION.sql"; do
    if [ ! -f "$PGRX_OUT$file" ]; then
        echo "cargo pgrx package did not produce $file" >&2
        exit 1
    fi
done
find "$PGRX_OUT" -type d -exec chmod 0755 {} +
find "$PGRX_OUT" -type f -exec chmod 0644 {} +

if [ "$PG_MAJOR" != 15 ]; then
    TARBALL=$TARGET_DIR/package/snowflake_id-$VERSION-pg$PG_MAJOR-$ARCH.tar.gz
    step "tar -> $TARBALL"
    # Files only, no directory entries: unpacking must not change the modes of /opt and such.
    (cd "$PGRX_OUT" && find . -type f -printf '%P\n' | LC_ALL=C sort) > "$PGRX_OUT.files"
    tar --create --gzip --owner=0 --group=0 --numeric-owner --file "$TARBALL" \
        --directory "$PGRX_OUT" --files-from "$PGRX_OUT.files"
    tar --list --gzip --file "$TARBALL"
    echo "$TARBALL"
    exit 0
fi

PACKAGE=postgresql-$PG_MAJOR-snowflake-id
STAGING=$TARGET_DIR/package/${PACKAGE}_${VERSION}_$ARCH
DEB=$TARGET_DIR/package/${PACKAGE}_${VERSION}_$ARCH.deb
step "dpkg-deb --build -> $DEB"
rm -rf "$STAGING" "$DEB"
mkdir -p "$STAGING/DEBIAN"
cp -a "$PGRX_OUT/." "$STAGING/"
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
