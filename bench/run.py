#!/usr/bin/env python3
"""Benchmarks of snowflake_id. Started by bench/run.sh, which installs the extension.

One run: starts a throwaway cluster, measures every comparison with alternating repetitions,
collects evidence (strace, pg_stat_activity wait events, callgrind of a single-user backend),
always stops the cluster, and writes results/latest.{md,png,json} plus the evidence files.
Benchmarks are not tests: no timing makes this script fail.
"""

import argparse
import datetime
import json
import os
import signal
import sys
import time
from pathlib import Path

from snowflake_bench import ROOT, log
from snowflake_bench.benchmarks import (bench_count, bench_insert, bench_last_hour,
                                        bench_pgbench, bench_sequences, bench_tail_latency,
                                        setup_database)
from snowflake_bench.chart import write_chart
from snowflake_bench.cluster import Cluster, ensure_release_library, fdatasync_ms
from snowflake_bench.evidence import (evidence_callgrind, evidence_perf, evidence_strace,
                                      evidence_wait_events)
from snowflake_bench.machine import ForeignCpu, machine_info, machine_state, wait_for_quiet
from snowflake_bench.report import targets, write_markdown


def parse_arguments():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bindir", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--library", required=True)
    parser.add_argument("--results", required=True)
    env = os.environ.get
    parser.add_argument("--n", type=int, default=int(env("BENCH_N", 1_000_000)))
    parser.add_argument("--reps", type=int, default=int(env("BENCH_REPS", 5)))
    parser.add_argument("--pgbench-reps", type=int, default=int(env("BENCH_PGBENCH_REPS", 3)))
    parser.add_argument("--pgbench-seconds", type=int,
                        default=int(env("BENCH_PGBENCH_SECONDS", 3)))
    parser.add_argument("--insert-rows", type=int,
                        default=int(env("BENCH_INSERT_ROWS", 1_000_000)))
    parser.add_argument("--wait-quiet", type=int, default=int(env("BENCH_WAIT_QUIET", 60)))
    parser.add_argument("--tail-seconds", type=int, default=int(env("BENCH_TAIL_SECONDS", 60)),
                        help="seconds of single-row inserts per id column, per fsync setting")
    parser.add_argument("--slow-fsync-us", type=int,
                        default=int(env("BENCH_SLOW_FSYNC_US", 20000)))
    parser.add_argument("--skip-callgrind", action="store_true")
    parser.add_argument("--report-only", action="store_true",
                        help="re-evaluate the targets in latest.json and rewrite latest.md and "
                             "latest.png from it, run nothing")
    return parser.parse_args()


def measure(args, cluster, library, results_dir):
    """Every benchmark and every piece of evidence, in one run on `cluster`; its results."""
    results = {"started": datetime.datetime.now(datetime.timezone.utc)
               .strftime("%Y-%m-%d %H:%M"), "machine": machine_info()}
    try:
        log("creating the cluster")
        cluster.create()
        results["library_sha256"] = ensure_release_library(
            cluster, library, Path(args.bindir) / "pg_config")
        results["server_version"] = setup_database(cluster)
        major = int(results["server_version"].split(".")[0])
        log(f"waiting up to {args.wait_quiet} s for a quiet machine")
        results["machine_before"] = wait_for_quiet(args.wait_quiet, cluster.data)
        watch = ForeignCpu(cluster)
        results["foreign_cpu"] = watch.phases
        log(f"load {results['machine_before']['loadavg']}; cost per ID "
            f"(N = {args.n:,}, {args.reps} repetitions)")
        results["count"] = watch.measure(
            "cost per ID", lambda: bench_count(cluster, args.n, args.reps, major))
        log("concurrent sessions (pgbench)")
        results["pgbench"] = watch.measure("pgbench", lambda: bench_pgbench(
            cluster, 10_000, args.pgbench_seconds, args.pgbench_reps, [1, 2, 4], major))
        log("ours and pgEdge's: every session on one sequence, or each on its own (pgbench)")
        results["sequences"] = watch.measure("sequences", lambda: bench_sequences(
            cluster, 10_000, args.pgbench_seconds, args.pgbench_reps))
        log(f"INSERT of {args.insert_rows:,} rows")
        results["insert"] = watch.measure(
            "INSERT", lambda: bench_insert(cluster, args.insert_rows, args.reps, major))
        log("'last hour' query")
        results["last_hour"] = watch.measure(
            "last hour", lambda: bench_last_hour(cluster, 1_000_000, args.reps, 200, major))
        log(f"tail latency: 8 sessions, single-row INSERT, {args.tail_seconds} s per id column")
        tail = results["tail_latency"] = {"slow_fsync_us": args.slow_fsync_us,
                                          "fdatasync_ms": fdatasync_ms(cluster)}
        tail["normal"] = watch.measure("tail latency", lambda: bench_tail_latency(
            cluster, 8, args.tail_seconds, 2, major))
        results["machine_after"] = machine_state(cluster.data)
        with cluster.connect() as conn:
            cursor = conn.execute("SELECT * FROM snowflake_stats()")
            names = [column.name for column in cursor.description]
            results["final_stats"] = dict(zip(names, (str(v) for v in cursor.fetchone())))
        evidence = results["evidence"] = {}

        def attempt(name, collect):
            # Evidence needs ptrace, perf events and valgrind; a machine without one of them
            # still gets the benchmark results, and the report says what is missing.
            log(f"evidence: {name}")
            try:
                evidence[name] = collect()
            except Exception as error:  # noqa: BLE001
                log(f"evidence: {name} failed: {error}")
                evidence[name] = None
                evidence.setdefault("errors", {})[name] = str(error)[-2000:]

        attempt("strace", lambda: evidence_strace(cluster, results_dir, args.n))
        attempt("perf", lambda: evidence_perf(cluster, results_dir, args.n, library))
        attempt("wait_events", lambda: evidence_wait_events(
            cluster, ["snowflake", "snowflake_wide", "pgedge", "nextval_c1", "instagram"], 4, 3,
            10_000))
        cluster.stop()
        log(f"tail latency with every fsync slowed by {args.slow_fsync_us} µs")
        cluster.start(cluster.slow_fsync_environment(args.slow_fsync_us))
        tail["slow_fsync"] = watch.measure("tail latency, slow fsync", lambda: bench_tail_latency(
            cluster, 8, args.tail_seconds, 2, major))
        cluster.stop()
        if not args.skip_callgrind:
            attempt("callgrind", lambda: evidence_callgrind(cluster, results_dir))
    finally:
        cluster.stop()
    return results


def main():
    args = parse_arguments()
    results_dir = Path(args.results).resolve()
    if args.report_only:
        results = json.loads((results_dir / "latest.json").read_text())
        results["targets"] = targets(results)
        (results_dir / "latest.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
        write_chart(results, results_dir / "latest.png")
        write_markdown(results, results_dir / "latest.md")
        return

    results_dir.mkdir(parents=True, exist_ok=True)
    library = (ROOT / args.library).resolve()
    cluster = Cluster(args.bindir, args.dir)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    begun = time.monotonic()
    results = measure(args, cluster, library, results_dir)
    results["runtime_seconds"] = time.monotonic() - begun
    results["targets"] = targets(results)
    (results_dir / "latest.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    write_chart(results, results_dir / "latest.png")
    write_markdown(results, results_dir / "latest.md")
    print()
    for row in results["targets"]:
        print(f"    {'met    ' if row['met'] else 'NOT met'}  {row['what']}: "
              f"{row['measured']:.2f}{row.get('unit', '×')} (wanted {row['target']})")
    print(f"\n    results: {results_dir}/latest.md, latest.png")


if __name__ == "__main__":
    main()

