#!/usr/bin/env bash
# Installing next to running servers: a server maps snowflake_id.so into every backend, and a
# copy that rewrites the file in place (cp, install without rename, tar --overwrite) changes
# the bytes under them; they crash with SIGILL/SIGSEGV/SIGBUS. Every install in this project
# therefore puts a new file in place instead: written beside the target and renamed over it
# (these functions), unpacked with `tar --unlink-first`, or by dpkg (which renames).
# Sourced by scripts/test.sh, scripts/install-citus.sh, scripts/pgrx-sudo/sudo and
# bench/compare_builds.sh.

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
# do: a .deb with dpkg, a tarball with the one-line `tar --unlink-first` of the README.
install_package() {
    case $1 in
        *.deb) dpkg -i "$1" ;;
        *.tar.gz) tar --extract --unlink-first --gzip --no-same-owner --file "$1" --directory / ;;
        *) echo "not a package of build-package.sh: $1" >&2; return 1 ;;
    esac
}
