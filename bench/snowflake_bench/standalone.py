"""The entry point of a benchmark that runs alone on a throwaway cluster of its own (started by
bench/run.sh connections or sharing, which install the extension): arguments and knobs, the
cluster always stopped, results written as <name>.json and <name>.md into --results."""

import argparse
import json
import os
from pathlib import Path

from . import log
from .cluster import Cluster


def run_standalone(description, name, knobs, setup, bench, rows, render, row_summary):
    """`knobs`: {argument: (environment variable, default)} of integer knobs, passed to
    `bench(cluster, **knobs)` after `setup(cluster)`. `rows(results)` and
    `render(results, server_version)` make the report; `row_summary(row)` logs each row."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bindir", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--results", required=True)
    for knob, (variable, default) in knobs.items():
        parser.add_argument(f"--{knob}", type=int, default=int(os.environ.get(variable, default)))
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
        results = bench(cluster, **{knob: getattr(args, knob) for knob in knobs})
    finally:
        cluster.stop()
    results["server_version"] = version
    results["rows"] = rows(results)
    (results_dir / f"{name}.json").write_text(json.dumps(results, indent=1) + "\n")
    (results_dir / f"{name}.md").write_text(render(results, version))
    for row in results["rows"]:
        log(row_summary(row))
