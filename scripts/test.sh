#!/usr/bin/env bash
# Command 2 of the README: run every test (lint, pure unit and property tests of the core and of
# the benchmark package, #[pg_test]s on a preloaded server, whole-cluster tests). Exits non-zero
# on any failure; the last line is the total, "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install-deps.sh
source scripts/install-client-deps.sh
# pg_auto_failover (pg_autoctl), the failover manager the failover tests run.
apt_install_missing postgresql-$PG_MAJOR-auto-failover
LOGS=/tmp/snowflake-test-logs
mkdir -p "$LOGS"

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy"
cargo clippy --workspace --all-targets -- -D warnings

step "pure core: unit and property tests (cargo test -p snowflake_id_core, no PostgreSQL)"
cargo test -p snowflake_id_core 2>&1 | tee "$LOGS/core.log"

step "benchmark package: unit tests (python3 -m unittest)"
python3 -m unittest discover --start-directory bench/tests --top-level-directory bench 2>&1 \
    | tee "$LOGS/bench.log"

step "#[pg_test] tests (cargo pgrx test)"
PGTEST_DIR=/var/tmp/snowflake-pgtest
install -d -o postgres -g postgres "$PGTEST_DIR"
cargo pgrx test pg15 --runas postgres --pgdata "$PGTEST_DIR/data" 2>&1 | tee "$LOGS/pg-test.log"

# The whole-cluster tests run against the packaged artifact: the release build in the Debian
# package, installed with dpkg (tests/package.rs checks the files are the package's, unchanged).
bash scripts/build-deb.sh | tee "$LOGS/build-deb.log"
deb=$(tail -n 1 "$LOGS/build-deb.log")
step "dpkg -i $deb"
dpkg -i "$deb"

step "whole-cluster tests (pgrx-tests/)"
cargo test -p snowflake_id_cluster_tests --no-fail-fast 2>&1 | tee "$LOGS/cluster-test.log"

# "passed failed" of a cargo test log (its "test result:" lines) ...
count_cargo() { grep -E '^test result:' "$1" | awk '{p+=$4; f+=$6} END {print p+0, f+0}'; }
# ... and of a unittest log ("Ran N tests", then "OK" or "FAILED (failures=F, errors=E)").
count_unittest() {
    awk '/^Ran [0-9]+ test/ {ran=$2}
         /^FAILED/ {n=split($0, parts, /[^0-9]+/); for (i=1; i<=n; i++) bad+=parts[i]}
         END {print ran-bad, bad+0}' "$1"
}
read -r core_passed core_failed < <(count_cargo "$LOGS/core.log")
read -r bench_passed bench_failed < <(count_unittest "$LOGS/bench.log")
read -r pg_passed pg_failed < <(count_cargo "$LOGS/pg-test.log")
read -r cluster_passed cluster_failed < <(count_cargo "$LOGS/cluster-test.log")

step "summary"
echo "package:          $deb (installed)"
echo "core unit:        $core_passed passed, $core_failed failed"
echo "bench unit:       $bench_passed passed, $bench_failed failed"
echo "pg_test:          $pg_passed passed, $pg_failed failed"
echo "cluster tests:    $cluster_passed passed, $cluster_failed failed"
echo "total: $((core_passed + bench_passed + pg_passed + cluster_passed)) passed, $((core_failed + bench_failed + pg_failed + cluster_failed)) failed"
