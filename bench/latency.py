#!/usr/bin/env python3
"""INSERT latency as users feel it, at every rate: pgbench with 1 and 8 sessions at 0.2, 1, 10,
100 and 1,000 transactions per second and unthrottled, one prepared single-row INSERT per
transaction through bigserial, snowflake_nextval(), gen_random_uuid() and (18) uuidv7(), mixed
in one run, with synchronous_commit on and off; each key's first INSERT after quiet spells; the
first ID of a tick as the server times it; the reservation renewals of each run and of an idle
server. Started by bench/run.sh latency, which installs the extension; writes latency.md,
latency.json and latency.png into --results. Not a test: no timing fails it."""

from snowflake_bench.chart import write_latency_chart
from snowflake_bench.latency import (CLIENTS, RATES, SYNC, bench_latency, parse_clients,
                                     parse_rates, parse_sync, rate_label, render, rows, setup)
from snowflake_bench.standalone import run_standalone
from snowflake_bench.tick_cost import PAUSES as TICK_PAUSES
from snowflake_bench.tick_cost import parse_pauses


def summary(row):
    ratios = row["ratios"]
    shown = ", ".join(f"{name} {'—' if value is None else f'{value:.2f}×'}"
                      for name, value in ratios.items())
    met = {True: "met", False: "NOT met", None: "no samples"}[row["met"]]
    return (f"synchronous_commit={row['synchronous_commit']}, {row['clients']} clients, rate "
            f"{rate_label(row['rate'])}: snowflake / bigserial {shown} ({met})")


if __name__ == "__main__":
    run_standalone(
        __doc__, "latency",
        {"seconds": ("BENCH_LATENCY_SECONDS", 10),
         "max_seconds": ("BENCH_LATENCY_MAX_SECONDS", 80),
         "samples": ("BENCH_LATENCY_SAMPLES", 10),
         "rates": ("BENCH_LATENCY_RATES", RATES, parse_rates),
         "clients": ("BENCH_LATENCY_CLIENTS", CLIENTS, parse_clients),
         "sync": ("BENCH_LATENCY_SYNC", SYNC, parse_sync),
         "spells": ("BENCH_LATENCY_SPELLS", 20),
         "spell_seconds": ("BENCH_LATENCY_SPELL_SECONDS", 3),
         "tick_pauses": ("BENCH_LATENCY_TICK_PAUSES", TICK_PAUSES, parse_pauses),
         "tick_calls": ("BENCH_LATENCY_TICK_CALLS", 900),
         "idle_seconds": ("BENCH_LATENCY_IDLE_SECONDS", 120),
         "wait_quiet": ("BENCH_WAIT_QUIET", 60)},
        setup, bench_latency, rows, render, summary, chart=write_latency_chart)
