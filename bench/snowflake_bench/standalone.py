"""The entry point of a benchmark that runs alone on a throwaway cluster of its own (started by
bench/run.sh connections, databases, sharing or latency, which install the extension): arguments
and knobs, the cluster always stopped, results written as <name>.json and <name>.md (and
<name>.png, given a chart) into --results."""

import argparse
import json
import os
from pathlib import Path

from . import log
from .cluster import Cluster


def knob_default(variable, default, parse):
    """The knob's value from the environment, parsed, or else `default` (parsed if a string)."""
    raw = os.environ.get(variable)
    if raw is not None:
        return parse(raw)
    return parse(default) if isinstance(default, str) else default


def run_standalone(description, name, knobs, setup, bench, rows, render, row_summary,
                   chart=None):
    """`knobs`: {argument: (environment variable, default[, parse])} of knobs (integers unless
    a `parse` function of the text is given), passed to `bench(cluster, **knobs)` after
    `setup(cluster)`. `rows(results)` and `render(results, server_version)` make the report;
    `row_summary(row)` logs each row; `chart(results, path)`, if given, draws <name>.png."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bindir", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--results", required=True)
    for knob, (variable, default, *parse) in knobs.items():
        parse = parse[0] if parse else int
        parser.add_argument(f"--{knob.replace('_', '-')}", dest=knob, type=parse,
                            default=knob_default(variable, default, parse),
                            help=f"default ${variable} or {default}")
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
    if chart is not None:
        chart(results, results_dir / f"{name}.png")
    for row in results["rows"]:
        log(row_summary(row))
