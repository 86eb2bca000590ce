#!/usr/bin/env bash
# Builds the source archive of snowflake_id for PGXN (https://pgxn.org), from the committed
# tree (HEAD): target/package/snowflake_id-<version>.zip, every file under one directory
# snowflake_id-<version>/, with META.json (PGXN's meta spec 1.0.0) at its top. Its version must
# be Cargo.toml's. Needs git and nothing else; prints the archive's path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh
VERSION=$(cargo_package_version)
if ! grep -q "\"version\": \"$VERSION\"" META.json; then
    echo "META.json does not give version $VERSION (Cargo.toml's)" >&2
    exit 1
fi
ARCHIVE=target/package/snowflake_id-$VERSION.zip
mkdir -p target/package
git archive --format=zip --prefix="snowflake_id-$VERSION/" --output="$ARCHIVE" HEAD
echo "$ARCHIVE"
