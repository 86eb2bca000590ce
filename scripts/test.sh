#!/usr/bin/env bash
# Command 2 of the README: run every test (lint, pure unit and property tests of the core and of
# the benchmark package, #[pg_test]s on a preloaded server, whole-cluster tests). Exits non-zero
# on any failure; the last line is the total, "N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
suite_started=$SECONDS
source scripts/install-deps.sh
source scripts/install-client-deps.sh
source scripts/safe-install.sh
source scripts/install-citus.sh
source scripts/install-pgedge-snowflake.sh
install_everything
install_client_deps
install_cargo_nextest
VERSION=$(cargo_package_version)
LOGS=/tmp/snowflake-test-logs
rm -rf "$LOGS"
mkdir -p "$LOGS"
failed_steps=()
# "SECONDS NAME" of every timed part, printed at the end (where the time went).
step_times=()

# run_step NAME LOG COMMAND…: runs COMMAND, its output shown and kept in LOG; a failure is
# recorded (and counted in the summary) and the suite goes on with the next step.
run_step() {
    local name=$1 log=$2
    shift 2
    step "$name"
    local started=$SECONDS
    if ! "$@" 2>&1 | tee "$log"; then
        failed_steps+=("$name (log: $log)")
    fi
    step_times+=("$((SECONDS - started)) $name")
}

# same_install_script COMMITTED GENERATED: whether the committed install script is the one
# cargo-pgrx generated, leaving out the comments that give the Rust source line of each item
# (they move with every edit and change nothing). Prints "… are identical" or the difference
# and how to regenerate.
same_install_script() {
    local source_lines='^-- [A-Za-z0-9_./-]+\.rs:[0-9]+$'
    if diff --unified <(grep -Ev "$source_lines" "$1") <(grep -Ev "$source_lines" "$2"); then
        echo "$1 and $2 are identical"
    else
        echo "regenerate it: cp $2 $1"
        return 1
    fi
}

# The failover manager the auto_failover tests run: Debian's package for 15, built from
# Debian's source package for the source-built majors.
apt_install_missing postgresql-15-auto-failover
for major in "${SUPPORTED_PG_MAJORS[@]}"; do
    [ "$(auto_failover_major_of "$major")" = 15 ] \
        || install_pg_auto_failover_from_source "$(auto_failover_major_of "$major")"
done

# PgBouncer for the connection-pool tests (pgrx-tests/tests/connection_pools.rs).
apt_install_missing pgbouncer

# Citus for the Citus tests (every major), from the tarballs in vendor/citus/ (checked against
# their SHA-256).
for major in "${SUPPORTED_PG_MAJORS[@]}"; do
    install_citus "$major"
done

# pgEdge's snowflake extension for the tests beside it (pgrx-tests/tests/beside_pgedge.rs), from
# the tarball in vendor/pgedge-snowflake/ (checked against its SHA-256).
for major in "${SUPPORTED_PG_MAJORS[@]}"; do
    install_pgedge_snowflake "$major"
done

# postgres_exporter and promtool (Debian's prometheus) for the monitoring tests
# (pgrx-tests/tests/monitoring.rs); their services are not started. query-exporter (PyPI), the
# other exporter monitoring/ configures, likewise.
apt_install_missing_services prometheus-postgres-exporter prometheus
install_query_exporter

# lintian, Debian's package checker, for the package test (pgrx-tests/tests/package.rs).
apt_install_missing lintian

# pgBackRest for the backup test (pgrx-tests/tests/pgbackrest.rs): trixie's, since Debian 12's
# predates PostgreSQL 17 and 18.
install_pgbackrest_from_trixie

# pg_partman 5.x for the partitioning tests (pgrx-tests/tests/pg_partman.rs), from Debian's
# source package pg-partman (trixie), checked against its signed source index.
for major in "${SUPPORTED_PG_MAJORS[@]}"; do
    install_pg_partman_from_source "$major"
done

step_times+=("$((SECONDS - suite_started)) installs (everything above)")
lint_started=$SECONDS
step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (PostgreSQL ${SUPPORTED_PG_MAJORS[*]})"
cargo clippy --workspace --all-targets --features snowflake_id_cluster_tests/citus -- -D warnings
for major in "${SUPPORTED_PG_MAJORS[@]}"; do
    [ "$major" = 15 ] || cargo clippy --all-targets --no-default-features --features "pg$major" \
        -- -D warnings
done

step_times+=("$((SECONDS - lint_started)) cargo fmt and clippy")
# Optimised: the model check of the protocol (tests/protocol_model.rs) explores every state its
# small cluster can reach in its depth bound: about 40 s so, many minutes unoptimised.
run_step "pure core: unit, property and model-check tests (cargo test -p snowflake_id_core --release, no PostgreSQL)" \
    "$LOGS/core.log" cargo test -p snowflake_id_core --release
# The model check of a worker id going from one session to shared (loom explores every
# interleaving); its own target directory, as --cfg loom rebuilds the core.
RUSTFLAGS="--cfg loom" run_step "pure core: loom model check of worker-id sharing" \
    "$LOGS/loom.log" cargo test -p snowflake_id_core --release --target-dir target/loom \
    --test worker_id_sharing_model
run_step "benchmark package: unit tests (python3 -m unittest)" "$LOGS/bench.log" \
    python3 -m unittest discover --start-directory bench/tests --top-level-directory bench

# The whole-cluster tests' servers live in a directory of this run's, on the memory file system
# when there is room there: initdb, base backups and restores make a third of the system time
# they make on disk. Removed at the end, with anything a test left behind.
cluster_tmp_parent=/var/tmp
if [ "$(df --output=avail -k /dev/shm 2>/dev/null | tail -n 1)" -gt $((8 * 1024 * 1024)) ] 2>/dev/null; then
    cluster_tmp_parent=/dev/shm
fi
cluster_tmp=$(mktemp -d "$cluster_tmp_parent/snowflake-tests.XXXXXX")
chmod 1777 "$cluster_tmp" # the servers run as postgres
trap 'rm -rf "$cluster_tmp"' EXIT

# Every PostgreSQL-facing test runs on every supported major: the #[pg_test]s, then the package
# is built and installed, then the whole-cluster tests (and the Citus tests) run against that
# installed package under cargo-nextest (.config/nextest.toml): first, one at a time, those
# that must run alone (they time calls, or change the installation), then the others, eight at
# once, since they mostly wait on servers. Each nextest run leaves a JUnit report of every
# result and duration, which the summary reads.
for major in "${SUPPORTED_PG_MAJORS[@]}"; do
    pgdata=/var/tmp/snowflake-pgtest/pg$major
    install -d -o postgres -g postgres "$(dirname "$pgdata")" "$pgdata"
    # cargo-pgrx installs the test build through `sudo cp`; scripts/pgrx-sudo makes that an
    # install by rename, so servers running on this machine keep their library. Without its
    # link argument for the library (a workaround for linkers that drop pgrx's schema section,
    # which this one keeps), the library's build shares the test build's dependencies instead
    # of compiling them all again.
    PATH="$PWD/scripts/pgrx-sudo:$PATH" CARGO_PGRX_DISABLE_GC_SECTIONS_WORKAROUND=1 \
        run_step "PostgreSQL $major: #[pg_test] tests (cargo pgrx test pg$major)" \
        "$LOGS/pg$major-pg-test.log" cargo pgrx test "pg$major" --runas postgres --pgdata "$pgdata/data"

    run_step "PostgreSQL $major: package" "$LOGS/pg$major-package.log" \
        bash scripts/build-package.sh "$major"
    package=$(tail -n 1 "$LOGS/pg$major-package.log")
    if [ ! -f "$package" ]; then
        continue
    fi
    # The demo installs the committed install script instead of generating it (no cargo-pgrx):
    # it must be the one cargo-pgrx generates for this major.
    run_step "PostgreSQL $major: sql/snowflake_id--$VERSION.sql is the generated install script" \
        "$LOGS/pg$major-install-script.log" same_install_script "sql/snowflake_id--$VERSION.sql" \
        "target/release/snowflake_id-pg$major$("$(pg_config_of "$major")" --sharedir)/extension/snowflake_id--$VERSION.sql"
    run_step "PostgreSQL $major: install $package" "$LOGS/pg$major-install.log" \
        install_package "$package"
    for group in alone others; do
        if [ "$group" = alone ]; then
            label="whole-cluster tests that run alone" filter='group(alone)'
        else
            label="whole-cluster and Citus $(citus_version_of "$major") tests" filter='not group(alone)'
        fi
        rm -f target/nextest/default/junit.xml
        PG_CONFIG=$(pg_config_of "$major") SNOWFLAKE_ID_PACKAGE=$PWD/$package \
            AUTO_FAILOVER_PG_CONFIG=$(pg_config_of "$(auto_failover_major_of "$major")") \
            UPGRADE_FROM_PG_CONFIG=$(pg_config_of "$(upgrade_source_major_of "$major")") \
            DUMP_FROM_PG_CONFIG=$(pg_config_of 15) TMPDIR=$cluster_tmp \
            run_step "PostgreSQL $major: $label (pgrx-tests/, cargo nextest)" \
            "$LOGS/pg$major-$group-test.log" cargo nextest run -p snowflake_id_cluster_tests \
            --features citus --no-fail-fast -E "$filter"
        mv target/nextest/default/junit.xml "$LOGS/pg$major-$group-junit.xml" 2>/dev/null || true
    done
    # Released install scripts, which the update tests put beside the package's files
    # (fixtures::install_release_script): no package owns them, so they go when they are done.
    for release in 0.1.0 0.10.0; do
        rm -f "$("$(pg_config_of "$major")" --sharedir)/extension/snowflake_id--$release.sql"
    done
done

# "passed failed" of a cargo test log (its "test result:" lines) ...
count_cargo() { grep -sE '^test result:' "$1" | awk '{p+=$4; f+=$6} END {print p+0, f+0}'; }
# ... and of a unittest log ("Ran N tests", then "OK" or "FAILED (failures=F, errors=E)").
count_unittest() {
    awk '/^Ran [0-9]+ test/ {ran=$2}
         /^FAILED/ {n=split($0, parts, /[^0-9]+/); for (i=1; i<=n; i++) bad+=parts[i]}
         END {print ran-bad, bad+0}' "$1"
}

step "summary"
total_passed=0
total_failed=0
# report LABEL PASSED FAILED: one summary line, added to the totals.
report() {
    printf '%-28s %s passed, %s failed\n' "$1:" "$2" "$3"
    total_passed=$((total_passed + $2))
    total_failed=$((total_failed + $3))
}
read -r passed failed < <(count_cargo "$LOGS/core.log")
report "core unit" "$passed" "$failed"
read -r passed failed < <(count_cargo "$LOGS/loom.log")
report "core loom model" "$passed" "$failed"
read -r passed failed < <(count_unittest "$LOGS/bench.log")
report "bench unit" "$passed" "$failed"
junit_reports=()
for major in "${SUPPORTED_PG_MAJORS[@]}"; do
    junit_reports+=("$major=$LOGS/pg$major-alone-junit.xml" "$major=$LOGS/pg$major-others-junit.xml")
    read -r passed failed < <(count_cargo "$LOGS/pg$major-pg-test.log")
    report "PostgreSQL $major pg_test" "$passed" "$failed"
    while read -r kind passed failed; do
        case $kind in
            cluster) report "PostgreSQL $major cluster tests" "$passed" "$failed" ;;
            citus) report "PostgreSQL $major Citus tests" "$passed" "$failed" ;;
        esac
    done < <(python3 scripts/nextest_report.py counts "$LOGS/pg$major-alone-junit.xml" \
        "$LOGS/pg$major-others-junit.xml")
    if grep -qs ' are identical$' "$LOGS/pg$major-install-script.log"; then
        report "PostgreSQL $major install script" 1 0
    else
        report "PostgreSQL $major install script" 0 1
    fi
    echo "PostgreSQL $major package:       $(tail -n 1 "$LOGS/pg$major-package.log")"
done
python3 scripts/nextest_report.py failed "${junit_reports[@]}" | sed 's/^/failed test: /'
# A step that failed before reporting any failed test (a build error, say) counts as one.
for failure in "${failed_steps[@]}"; do
    echo "failed step: $failure"
done
if [ "${#failed_steps[@]}" -gt 0 ] && [ "$total_failed" -eq 0 ]; then
    total_failed=${#failed_steps[@]}
fi
echo
echo "where the time went (seconds):"
printf '  %s\n' "${step_times[@]}"
echo "  $((SECONDS - suite_started)) in all"
echo "the whole-cluster test files whose tests took longest (seconds, their tests' durations added):"
python3 scripts/nextest_report.py files 10 "${junit_reports[@]}" | sed 's/^/  /'
echo "the slowest whole-cluster tests (seconds):"
python3 scripts/nextest_report.py slowest 12 "${junit_reports[@]}" | sed 's/^/  /'
echo "total: $total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
