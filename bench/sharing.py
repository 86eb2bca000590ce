#!/usr/bin/env python3
"""The cost per ID of sessions sharing a worker id against sessions alone on theirs, at 2, 4
and 8 sessions. Started by bench/run.sh sharing, which installs the extension; writes
sharing.md and sharing.json into --results. Not a test: no timing fails it."""

from snowflake_bench.sharing import bench_sharing, render, rows, setup
from snowflake_bench.standalone import run_standalone

if __name__ == "__main__":
    run_standalone(
        __doc__, "sharing",
        {"seconds": ("BENCH_SHARING_SECONDS", 5), "reps": ("BENCH_SHARING_REPS", 3)},
        setup, bench_sharing, rows, render,
        lambda row: (f"{row['sessions']} sessions per worker id: {row['ratio']:.2f}× the cost "
                     f"alone, {row['conflicts_per_million']:.0f} ticks found taken per million IDs"))
