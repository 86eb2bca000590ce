"""The benchmark runner of snowflake_id, driven by bench/run.py.

cluster: the throwaway cluster; machine: how quiet the machine is; benchmarks: the measured
workloads; evidence: strace, wait events, perf and callgrind; report and chart: latest.md and
latest.png. Only cluster.Cluster.connect() needs psycopg and only chart needs matplotlib, both
imported where used, so the parsers and the report load with the standard library alone.
"""

import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent  # the repository


def log(message):
    print(f"    {datetime.datetime.now():%H:%M:%S} {message}", flush=True)
