#!/usr/bin/env bash
# Command 2 of the README: run every test (lint, pure unit and property tests, #[pg_test]s on
# a preloaded server, whole-cluster tests). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install-deps.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --all-targets -- -D warnings

step "unit, property and #[pg_test] tests (cargo pgrx test)"
PGTEST_DIR=/var/tmp/snowflake-pgtest
install -d -o postgres -g postgres "$PGTEST_DIR"
cargo pgrx test pg15 --runas postgres --pgdata "$PGTEST_DIR/data" 2>&1 | tee /tmp/snowflake-pg-test.log

# The whole-cluster tests run against the packaged artifact: the release build in the Debian
# package, installed with dpkg (tests/package.rs checks the files are the package's, unchanged).
bash scripts/build-deb.sh | tee /tmp/snowflake-build-deb.log
deb=$(tail -n 1 /tmp/snowflake-build-deb.log)
step "dpkg -i $deb"
dpkg -i "$deb"

step "whole-cluster tests (pgrx-tests/)"
cargo test -p snowflake_id_cluster_tests 2>&1 | tee /tmp/snowflake-cluster-test.log
count_results() { grep -E '^test result:' "$1" | awk '{p+=$4; f+=$6} END {print p+0, f+0}'; }
read -r cluster_passed cluster_failed < <(count_results /tmp/snowflake-cluster-test.log)
read -r unit_passed unit_failed < <(count_results /tmp/snowflake-pg-test.log)

step "summary"
echo "package:        $deb (installed)"
echo "unit + pg_test: $unit_passed passed, $unit_failed failed"
echo "cluster tests:  $cluster_passed passed, $cluster_failed failed"
echo "total: $((unit_passed + cluster_passed)) passed, $((unit_failed + cluster_failed)) failed"
