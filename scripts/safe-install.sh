#!/usr/bin/env bash
# Installing next to running servers: a server maps snowflake_id.so into every backend, and a
# copy that rewrites the file in place (cp, install without rename, tar --overwrite) changes
# the bytes under them; they crash with SIGILL/SIGSEGV/SIGBUS. Every install in this project
# therefore puts a new file in place instead: written beside the target and renamed over it
# (these functions), unpacked with `tar --unlink-first`, or by dpkg (which renames).
# Sourced by scripts/test.sh, scripts/demo.sh, scripts/install-citus.sh, scripts/pgrx-sudo/sudo
# and bench/compare_builds.sh.

# install_file_by_rename SOURCE TARGET: TARGET gets SOURCE's bytes and mode as a new file.
install_file_by_rename() {
    local temporary
    temporary="$(dirname "$2")/.$(basename "$2").new.$$"
    cp "$1" "$temporary" || { rm -f "$temporary"; return 1; }
    mv -f "$temporary" "$2"
}

# install_tree_by_rename ROOT: installs every file under ROOT at the same path under /.
install_tree_by_rename() {
    local file
    while IFS= read -r -d '' file; do
        mkdir -p "$(dirname "/$file")"
        install_file_by_rename "$1/$file" "/$file"
    done < <(cd "$1" && find . -type f -printf '%P\0')
}

# install_package PACKAGE: installs a package from scripts/build-package.sh the way its users
# do: with dpkg, which puts each file in place by rename.
install_package() {
    case $1 in
        *.deb) dpkg -i "$1" ;;
        *) echo "not a package of build-package.sh: $1" >&2; return 1 ;;
    esac
}

# install_extension_files PG_CONFIG LIBRARY: installs a release build of snowflake_id the way
# `cargo pgrx install` lays it out, each file by rename: LIBRARY as snowflake_id.so, the control
# file with its version filled in, the committed install script sql/snowflake_id--<version>.sql,
# the update scripts and the 0.1.0 release's install script, as the package has them. (The
# demo's install; it needs no cargo-pgrx. Needs common.sh.)
install_extension_files() {
    local pg_config=$1 library=$2 version extension_dir library_dir control script
    version=$(cargo_package_version)
    extension_dir="$("$pg_config" --sharedir)/extension"
    library_dir=$("$pg_config" --pkglibdir)
    mkdir -p "$extension_dir" "$library_dir"
    install_file_by_rename "$library" "$library_dir/snowflake_id.so"
    control=$(mktemp)
    sed "s/@CARGO_VERSION@/$version/" snowflake_id.control > "$control"
    chmod 0644 "$control"
    install_file_by_rename "$control" "$extension_dir/snowflake_id.control"
    rm -f "$control"
    for script in "sql/snowflake_id--$version.sql" sql/snowflake_id--0.1.0.sql \
                  sql/snowflake_id--*--*.sql; do
        install_file_by_rename "$script" "$extension_dir/$(basename "$script")"
    done
}
