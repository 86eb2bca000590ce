#!/usr/bin/env python3
"""A new connection's first ID against SELECT 1 (pgbench --connect), in databases with 0, 500
and 5,000 keyed tables. Started by bench/run.sh connections, which installs the extension; writes
connections.md and connections.json into --results. Not a test: no timing fails it."""

import argparse
import json
import os
from pathlib import Path

from snowflake_bench import log
from snowflake_bench.cluster import Cluster
from snowflake_bench.connections import TABLE_COUNTS, bench_connections, render, rows, setup


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bindir", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--results", required=True)
    env = os.environ.get
    parser.add_argument("--seconds", type=int, default=int(env("BENCH_CONNECT_SECONDS", 5)))
    parser.add_argument("--reps", type=int, default=int(env("BENCH_CONNECT_REPS", 3)))
    args = parser.parse_args()
    results_dir = Path(args.results).resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(args.bindir, args.dir)
    try:
        cluster.create()
        cluster.start()
        with cluster.connect() as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
        setup(cluster, TABLE_COUNTS)
        results = bench_connections(cluster, TABLE_COUNTS, args.seconds, args.reps)
    finally:
        cluster.stop()
    results["server_version"] = version
    results["rows"] = rows(results)
    (results_dir / "connections.json").write_text(json.dumps(results, indent=1) + "\n")
    (results_dir / "connections.md").write_text(render(results, version))
    for row in results["rows"]:
        log(f"{row['tables']} tables: first ID {row['extra_ms']:+.2f} ms over SELECT 1 "
            f"({'met' if row['met'] else 'NOT met'})")


if __name__ == "__main__":
    main()
