#!/usr/bin/env bash
# The benchmark command of the README. As root on Debian 12:
#
#     bash bench/run.sh
#
# Installs what it needs; then for each PostgreSQL major (BENCH_MAJORS, default "15 17 18"):
# builds and installs snowflake_id in release mode for it, starts a throwaway cluster (Unix
# socket only, in /var/tmp/snowflake-bench), runs every benchmark in one run with alternating
# repetitions, collects the strace / callgrind / wait-event evidence, and writes
# bench/results/pg<major>/ (latest.md, latest.png, latest.json and the evidence files). The
# cluster is always stopped at the end. Idempotent: a second run replaces the cluster and the
# results.
#
# Knobs (environment): BENCH_N (IDs per count() run, default 1000000), BENCH_REPS (default 5),
# BENCH_PGBENCH_REPS (3), BENCH_PGBENCH_SECONDS (3), BENCH_INSERT_ROWS (1000000),
# BENCH_WAIT_QUIET (seconds to wait for a quiet machine first, default 60), BENCH_TAIL_SECONDS
# (single-row inserts per id column and fsync setting, default 60), BENCH_SLOW_FSYNC_US (20000).
#
#     bash bench/run.sh connections
#
# runs only the cost of a new connection's first ID (bench/connections.py: pgbench --connect,
# SELECT snowflake_nextval() against SELECT 1, with 0, 500 and 5,000 keyed tables; knobs
# BENCH_CONNECT_SECONDS, 5, and BENCH_CONNECT_REPS, 3) and writes connections.{md,json}.
#
#     bash bench/run.sh databases
#
# runs only single-row INSERTs with 1, 10 and 40 databases, one session each inserting 25 rows a
# second through snowflake_nextval() and bigserial (bench/databases.py: p99, p99.9, max, WAL
# flushes per second; knobs BENCH_DATABASES_SECONDS, 15, and BENCH_DATABASES_REPS, 2) and
# writes databases.{md,json}.
#
#     bash bench/run.sh sharing
#
# runs only the cost per ID of sessions sharing a worker id against sessions alone on theirs, at
# 2, 4 and 8 sessions (bench/sharing.py; knobs BENCH_SHARING_SECONDS, 5, and BENCH_SHARING_REPS,
# 3) and writes sharing.{md,json}.
#
#     bash bench/run.sh latency
#
# runs only single-row INSERT latency at every rate (bench/latency.py: 1 and 8 sessions at 0.2,
# 1, 10, 100 and 1,000 transactions per second and unthrottled, bigserial, snowflake_nextval(),
# gen_random_uuid() and on 18 uuidv7() mixed in each pgbench run, synchronous_commit on and off,
# reservation renewals per run and while idle; about 14 minutes per major; knobs
# BENCH_LATENCY_SECONDS, 10, BENCH_LATENCY_MAX_SECONDS, 80, BENCH_LATENCY_SAMPLES, 10,
# BENCH_LATENCY_RATES, BENCH_LATENCY_CLIENTS, BENCH_LATENCY_SYNC and BENCH_LATENCY_IDLE_SECONDS,
# 120) and writes latency.{md,json,png}.
#
#     bash bench/run.sh costs
#
# runs only the callgrind instruction counts (bench/costs.py, standard library only: a new
# backend's first ID with 0 and 500 keyed tables, ADD/DROP COLUMN and CREATE/DROP INDEX with and
# without the extension, the cost per ID above the bare loop; about a minute per major) and
# writes costs.{md,json}.
# Benchmarks are not tests: nothing here fails on a timing, only on a broken setup.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install-deps.sh
source scripts/safe-install.sh
source scripts/install-pgedge-snowflake.sh
install_everything

BENCH_DIR=/var/tmp/snowflake-bench
VENV=/var/tmp/snowflake-bench-venv
# Not 16 by default: the 16 here (PyPI's wheel, scripts/install-postgres.sh) is built without
# OpenSSL, so its gen_random_uuid() reads /dev/urandom on every call and the ratios against it
# would not be those of a distribution's build.
BENCH_MAJORS=${BENCH_MAJORS:-15 17 18}
BIN=

stop_cluster() {
    if [ -n "$BIN" ] && [ -f "$BENCH_DIR/data/postmaster.pid" ]; then
        runuser -u postgres -- "$BIN/pg_ctl" --pgdata "$BENCH_DIR/data" --mode immediate \
            --wait stop >/dev/null 2>&1 || true
    fi
}
trap stop_cluster EXIT

# strace, valgrind and perf for the evidence; python3-venv for the runner's own environment.
apt_install_missing strace valgrind linux-perf python3-venv

if [ ! -x "$VENV/bin/python" ]; then
    step "python3 -m venv $VENV"
    python3 -m venv "$VENV"
fi
step "pip install -r bench/requirements.txt"
"$VENV/bin/pip" install --quiet --disable-pip-version-check -r bench/requirements.txt

for major in $BENCH_MAJORS; do
    pg_config=$(pg_config_of "$major")
    BIN=$("$pg_config" --bindir)
    # pgEdge's snowflake, the peer every benchmark compares with (vendor/pgedge-snowflake/).
    install_pgedge_snowflake "$major"
    # (cargo pgrx install replaces the library by unlinking it first: running servers keep theirs.)
    step "PostgreSQL $major: cargo pgrx install --release"
    cargo pgrx install --release --pg-config "$pg_config" --no-default-features \
        --features "pg$major" >/dev/null

    if [ "${1:-}" = connections ]; then
        step "PostgreSQL $major: a new connection's first ID (bench/connections.py)"
        "$VENV/bin/python" bench/connections.py --bindir "$BIN" --dir "$BENCH_DIR" \
            --results "bench/results/pg$major"
    elif [ "${1:-}" = databases ]; then
        step "PostgreSQL $major: many databases (bench/databases.py)"
        "$VENV/bin/python" bench/databases.py --bindir "$BIN" --dir "$BENCH_DIR" \
            --results "bench/results/pg$major"
    elif [ "${1:-}" = latency ]; then
        step "PostgreSQL $major: INSERT latency at every rate (bench/latency.py)"
        "$VENV/bin/python" bench/latency.py --bindir "$BIN" --dir "$BENCH_DIR" \
            --results "bench/results/pg$major"
    elif [ "${1:-}" = costs ]; then
        step "PostgreSQL $major: callgrind costs (bench/costs.py)"
        python3 bench/costs.py --bindir "$BIN" --dir "$BENCH_DIR" --results "bench/results/pg$major"
    elif [ "${1:-}" = sharing ]; then
        step "PostgreSQL $major: shared worker ids (bench/sharing.py)"
        "$VENV/bin/python" bench/sharing.py --bindir "$BIN" --dir "$BENCH_DIR" \
            --results "bench/results/pg$major"
    else
        step "PostgreSQL $major: benchmarks (bench/run.py)"
        "$VENV/bin/python" bench/run.py --bindir "$BIN" --dir "$BENCH_DIR" \
            --library target/release/libsnowflake_id.so --results "bench/results/pg$major" "$@"
    fi
    stop_cluster
done
