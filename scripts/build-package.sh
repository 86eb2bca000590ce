#!/usr/bin/env bash
# Builds the Debian package of snowflake_id for one PostgreSQL major (default
# $SNOWFLAKE_PG_MAJOR, else 15) from a release build (`cargo pgrx package`):
#   target/package/postgresql-<major>-snowflake-id_<package version>_<arch>.deb
# (the package version: common.sh's debian_package_version; the extension's is Cargo.toml's)
# for Debian's and PGDG's layout (/usr/lib/postgresql/<major>/lib,
# /usr/share/postgresql/<major>/extension), depending on postgresql-<major> and the C libraries
# the library links (dpkg-shlibdeps), with a copyright file and a changelog, its library
# stripped: lintian finds no error in it. Installed with `dpkg -i` (or `apt-get install ./…deb`),
# which puts each file in place by rename, so running servers keep the library they mapped.
# Idempotent: every run rebuilds the package from scratch (the cargo build itself is
# incremental). Prints the path of the package on its last line.
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
PACKAGE_VERSION=$(debian_package_version)
ARCH=$(dpkg --print-architecture)
TARGET_DIR=${CARGO_TARGET_DIR:-target}
PGRX_OUT=$TARGET_DIR/release/snowflake_id-pg$PG_MAJOR
mkdir -p "$TARGET_DIR/package"
if [ -z "$VERSION" ]; then
    echo "no version found in the [package] section of Cargo.toml" >&2
    exit 1
fi

# The package holds the files at their real paths, not at the symbolic links through which an
# installation may reach them (the PostgreSQL 16 here finds Debian's directories so:
# scripts/install-postgres.sh), so that dpkg records where they are.
PKGLIBDIR=$(realpath "$("$PG_CONFIG" --pkglibdir)")
SHAREDIR=$(realpath "$("$PG_CONFIG" --sharedir)")

# move_into_real_path LINKED REAL: moves what cargo pgrx put under $PGRX_OUT/LINKED to
# $PGRX_OUT/REAL (nothing when they are the same).
move_into_real_path() {
    [ "$1" = "$2" ] && return 0
    mkdir -p "$PGRX_OUT$2"
    cp -a "$PGRX_OUT$1/." "$PGRX_OUT$2/"
    rm -rf "${PGRX_OUT:?}$1"
}

step "cargo pgrx package (release, PostgreSQL $PG_MAJOR) -> $PGRX_OUT"
rm -rf "$PGRX_OUT"   # no files left over from an older version
cargo pgrx package --pg-config "$PG_CONFIG" --out-dir "$PGRX_OUT" \
    --no-default-features --features "pg$PG_MAJOR"
move_into_real_path "$("$PG_CONFIG" --pkglibdir)" "$PKGLIBDIR"
move_into_real_path "$("$PG_CONFIG" --sharedir)" "$SHAREDIR"
find "$PGRX_OUT" -depth -type d -empty -delete
for file in "$PKGLIBDIR/snowflake_id.so" \
            "$SHAREDIR/extension/snowflake_id.control" \
            "$SHAREDIR/extension/snowflake_id--$VERSION.sql"; do
    if [ ! -f "$PGRX_OUT$file" ]; then
        echo "cargo pgrx package did not produce $file" >&2
        exit 1
    fi
done
# The 0.1.0 release's install script beside the generated one: with the update scripts (which
# cargo pgrx copies) it creates the extension at any released version, the first step of
# restoring a dump of that release (docs/reference.md "Upgrading").
install -m 0644 sql/snowflake_id--0.1.0.sql \
    "$PGRX_OUT$SHAREDIR/extension/snowflake_id--0.1.0.sql"
PACKAGE=postgresql-$PG_MAJOR-snowflake-id
STAGING=$TARGET_DIR/package/${PACKAGE}_${PACKAGE_VERSION}_$ARCH
DEB=$TARGET_DIR/package/${PACKAGE}_${PACKAGE_VERSION}_$ARCH.deb
step "dpkg-deb --build -> $DEB"
# (and the packages of earlier builds of this major)
rm -rf "$TARGET_DIR/package/${PACKAGE}"_*_"$ARCH" "$TARGET_DIR/package/${PACKAGE}"_*_"$ARCH.deb"
mkdir -p "$STAGING/DEBIAN"
cp -a "$PGRX_OUT/." "$STAGING/"
# No debugging symbols in the package (lintian: unstripped-binary-or-object).
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
    "$STAGING$PKGLIBDIR/snowflake_id.so"
MAINTAINER=${DEB_MAINTAINER:-snowflake_id developers <snowflake-id@users.noreply.github.com>}
DOC=$STAGING/usr/share/doc/$PACKAGE
mkdir -p "$DOC"
# The licence, in Debian's machine-readable copyright format.
{
    cat <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: snowflake_id

Files: *
Copyright: $(sed -n 's/^Copyright (c) //p' LICENSE | head -n 1)
License: PostgreSQL

License: PostgreSQL
COPYRIGHT
    # The licence text after its copyright lines, each line indented, blank ones as " .".
    sed -n '/^Permission to use/,$p' LICENSE | sed -e 's/^$/./' -e 's/^/ /'
} > "$DOC/copyright"
# A native package's changelog: this release, in Debian's format (the whole history is
# CHANGELOG.md, installed beside it).
release_date=$(sed -n "s/^## $VERSION (\(.*\))$/\1/p" CHANGELOG.md)
if [ -z "$release_date" ]; then
    echo "CHANGELOG.md has no section \"## $VERSION (<date>)\"" >&2
    exit 1
fi
cat > "$DOC/changelog" <<CHANGELOG
$PACKAGE ($PACKAGE_VERSION) unstable; urgency=medium

  * snowflake_id $VERSION for PostgreSQL $PG_MAJOR. What it changes, and what
    updating to it asks of an operator: CHANGELOG.md.gz beside this file.

 -- $MAINTAINER  $(LC_ALL=C date -u -d "$release_date" '+%a, %d %b %Y %H:%M:%S +0000')
CHANGELOG
cp CHANGELOG.md "$DOC/CHANGELOG.md"
gzip -9n "$DOC/changelog" "$DOC/CHANGELOG.md"
# The documentation, laid out as in the repository (README.md, docs/*.md; zless reads them), so
# that every server with the package has the reference and the guides the README points to.
mkdir -p "$DOC/docs"
cp README.md "$DOC/README.md"
cp docs/*.md "$DOC/docs/"
gzip -9n "$DOC/README.md" "$DOC"/docs/*.md
find "$STAGING/usr" -type d -exec chmod 0755 {} +
find "$STAGING/usr" -type f -exec chmod 0644 {} +
# The C libraries the library links, as dpkg-shlibdeps finds them (it reads a debian/control).
shlibs_dir=$(mktemp -d)
mkdir "$shlibs_dir/debian"
printf 'Source: snowflake-id\n\nPackage: %s\nArchitecture: any\n' "$PACKAGE" > "$shlibs_dir/debian/control"
library=$(realpath "$STAGING$PKGLIBDIR/snowflake_id.so")
library_depends=$(cd "$shlibs_dir" && dpkg-shlibdeps -O "$library" 2>/dev/null \
    | sed -n 's/^shlibs:Depends=//p')
rm -rf "$shlibs_dir"
if [ -z "$library_depends" ]; then
    echo "dpkg-shlibdeps found no dependency of $library" >&2
    exit 1
fi
(cd "$STAGING" && find usr -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum) \
    > "$STAGING/DEBIAN/md5sums"
installed_size=$(du -sk --exclude=DEBIAN "$STAGING" | cut -f1)
cat > "$STAGING/DEBIAN/control" <<CONTROL
Package: $PACKAGE
Version: $PACKAGE_VERSION
Architecture: $ARCH
Maintainer: $MAINTAINER
Installed-Size: $installed_size
Depends: postgresql-$PG_MAJOR, $library_depends
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
