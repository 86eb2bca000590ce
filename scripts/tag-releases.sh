#!/usr/bin/env bash
# Tags every release the CHANGELOG names (its "## <version> (<date>)" headings) as v<version>:
# an annotated tag on the commit that set Cargo.toml's [package] version to it, which is what
# a DBA checks out to build that release (scripts/build-package.sh then gives the package the
# plain version). Idempotent: a tag already on that commit is kept; one elsewhere is an error.
# Prints "v<version> <commit>" for each. Needs git and nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/common.sh

# The commit that first carried each version, oldest first: "<version> <commit>".
version_commits() {
    local commit version previous=""
    for commit in $(git rev-list --reverse HEAD -- Cargo.toml); do
        version=$(git show "$commit:Cargo.toml" | package_version_in_manifest)
        if [ -n "$version" ] && [ "$version" != "$previous" ]; then
            echo "$version $commit"
            previous=$version
        fi
    done
}

commits=$(version_commits)
for release in $(sed -n 's/^## \([0-9][0-9.]*\) (.*/\1/p' CHANGELOG.md); do
    commit=$(awk -v release="$release" '$1 == release { print $2; exit }' <<<"$commits")
    if [ -z "$commit" ]; then
        echo "CHANGELOG.md names $release, but no commit sets Cargo.toml's version to it" >&2
        exit 1
    fi
    if tagged=$(git rev-parse --verify --quiet "refs/tags/v$release^{commit}"); then
        if [ "$tagged" != "$commit" ]; then
            echo "v$release is on $tagged, not on $commit, which set the version" >&2
            exit 1
        fi
    else
        git tag --annotate "v$release" "$commit" \
            --message "snowflake_id $release (CHANGELOG.md: $(grep -m1 "^## $release " CHANGELOG.md | sed 's/^## //'))"
    fi
    echo "v$release $commit"
done
