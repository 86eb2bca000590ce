#!/usr/bin/env python3
"""A new connection's first ID against SELECT 1 and a first nextval() (pgbench --connect), in
databases with 0, 500 and 5,000 keyed tables. Started by bench/run.sh connections, which installs the extension; writes
connections.md and connections.json into --results. Not a test: no timing fails it."""

from snowflake_bench.connections import TABLE_COUNTS, bench_connections, render, rows, setup
from snowflake_bench.standalone import run_standalone

if __name__ == "__main__":
    run_standalone(
        __doc__, "connections",
        {"seconds": ("BENCH_CONNECT_SECONDS", 5), "reps": ("BENCH_CONNECT_REPS", 3)},
        lambda cluster: setup(cluster, TABLE_COUNTS),
        lambda cluster, seconds, reps: bench_connections(cluster, TABLE_COUNTS, seconds, reps),
        rows, render,
        lambda row: (f"{row['tables']} tables: first ID {row['extra_ms']:+.2f} ms, nextval() "
                     f"{row['nextval_extra_ms']:+.2f} ms over SELECT 1 "
                     f"({'met' if row['met'] else 'NOT met'})"))
