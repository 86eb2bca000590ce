#!/usr/bin/env python3
"""The tail of single-row INSERTs through `DEFAULT snowflake_nextval()` against `bigserial` with
1, 10 and 40 databases in one cluster, one rate-limited session per database. Started by
bench/run.sh databases, which installs the extension; writes databases.md and databases.json
into --results. Not a test: no timing fails it."""

from snowflake_bench.databases import bench_databases, render, rows, setup
from snowflake_bench.standalone import run_standalone

if __name__ == "__main__":
    run_standalone(
        __doc__, "databases",
        {"seconds": ("BENCH_DATABASES_SECONDS", 15), "reps": ("BENCH_DATABASES_REPS", 2)},
        setup, bench_databases, rows, render,
        lambda row: (f"{row['databases']} databases: p99 {row['ratios']['p99']:.2f}×, p99.9 "
                     f"{row['ratios']['p99.9']:.2f}×, max {row['ratios']['max']:.2f}× "
                     f"bigserial's"))
