#!/usr/bin/env python3
"""The cost per ID of sessions sharing a worker id against sessions alone on theirs, at 2, 4
and 8 sessions. Started by bench/run.sh sharing, which installs the extension; writes
sharing.md and sharing.json into --results. Not a test: no timing fails it."""

import argparse
import json
import os
from pathlib import Path

from snowflake_bench import log
from snowflake_bench.cluster import Cluster
from snowflake_bench.sharing import bench_sharing, render, rows, setup


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bindir", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--results", required=True)
    env = os.environ.get
    parser.add_argument("--seconds", type=int, default=int(env("BENCH_SHARING_SECONDS", 5)))
    parser.add_argument("--reps", type=int, default=int(env("BENCH_SHARING_REPS", 3)))
    args = parser.parse_args()
    results_dir = Path(args.results).resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(args.bindir, args.dir)
    try:
        cluster.create()
        cluster.start()
        with cluster.connect() as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
        setup(cluster)
        results = bench_sharing(cluster, args.seconds, args.reps)
    finally:
        cluster.stop()
    results["server_version"] = version
    results["rows"] = rows(results)
    (results_dir / "sharing.json").write_text(json.dumps(results, indent=1) + "\n")
    (results_dir / "sharing.md").write_text(render(results, version))
    for row in results["rows"]:
        log(f"{row['sessions']} sessions per worker id: {row['ratio']:.2f}× the cost alone, "
            f"{row['conflicts_per_million']:.0f} ticks found taken per million IDs")


if __name__ == "__main__":
    main()
