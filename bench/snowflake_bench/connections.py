"""The cost of a new connection's first ID: pgbench --connect (a new connection per transaction,
as PHP and serverless applications connect) running `SELECT snowflake_nextval()` against
`SELECT 1` and against a first `nextval()` of a sequence, in databases with 0, 500 and 5,000
tables keyed by the default sequence (100 rows each), alternating inside each repetition. Until 0.4.0 a connection's first ID looked up every
keyed table; since 0.5.0 it reads the catalog and the floor relation through their indexes."""

import re
from collections import defaultdict

from . import log
from .benchmarks import rotated, spread_note, summary
from .cluster import run

TABLE_COUNTS = [0, 500, 5000]
ROWS_PER_TABLE = 100
TABLES_PER_TRANSACTION = 200
SCRIPTS = {
    "select_1": "SELECT 1;\n",
    "first_id": "SELECT snowflake_nextval();\n",
    "nextval": "SELECT nextval('connect_sequence');\n",
}
# A connection's first ID may cost at most this many times what a first nextval() costs over
# `SELECT 1`, and a connection that makes one at least this share of `SELECT 1`'s rate.
TARGET_EXTRA_RATIO = 1.0
TARGET_RATE_SHARE = 0.95


def database(count):
    return f"keyed_{count}"


def setup(cluster, counts):
    """One database per table count, each with the extension and `count` keyed tables."""
    with cluster.connect() as conn:
        for count in counts:
            conn.execute(f"DROP DATABASE IF EXISTS {database(count)}")
            conn.execute(f"CREATE DATABASE {database(count)}")
    for count in counts:
        log(f"{count} keyed tables of {ROWS_PER_TABLE} rows")
        with cluster.connect(database(count)) as conn:
            conn.execute("CREATE EXTENSION snowflake_id")
            conn.execute("CREATE SEQUENCE connect_sequence")
            for first in range(1, count + 1, TABLES_PER_TRANSACTION):
                last = min(first + TABLES_PER_TRANSACTION - 1, count)
                conn.execute(f"""DO $$ BEGIN FOR i IN {first}..{last} LOOP
                    EXECUTE format('CREATE TABLE t%s (id bigint PRIMARY KEY
                                    DEFAULT snowflake_nextval(), n int)', i);
                    EXECUTE format('INSERT INTO t%s (n) SELECT g
                                    FROM generate_series(1, {ROWS_PER_TABLE}) g', i);
                END LOOP; END $$""")


def bench_connections(cluster, counts, seconds, reps):
    """Connections per second of each script in each database, one client, alternating."""
    directory = cluster.dir / "connections"
    directory.mkdir(exist_ok=True)
    for key, text in SCRIPTS.items():
        (directory / f"{key}.sql").write_text(text)
    runs = [(count, key) for count in counts for key in SCRIPTS]
    per_second = defaultdict(list)
    for rep in range(reps):
        for count, key in rotated(runs, rep):
            output = run(cluster.pgbench_command(1, seconds, directory / f"{key}.sql",
                                                 database(count), reconnect=True),
                         capture_output=True, text=True).stdout
            per_second[f"{key}/{count}"].append(float(re.search(r"tps = ([0-9.]+)",
                                                                output).group(1)))
        log(f"connections repetition {rep + 1}/{reps}: " + ", ".join(
            f"{key}/{count} {per_second[f'{key}/{count}'][-1]:.0f}/s" for count, key in runs))
    return {"seconds": seconds, "reps": reps, "counts": counts,
            "rows_per_table": ROWS_PER_TABLE,
            "per_second": {key: summary(values) for key, values in per_second.items()}}


def rows(results):
    """Per table count: ms per connection of `SELECT 1`, of the first ID and of a first
    `nextval()`; what the first ID and `nextval()` add to a connection, their ratio, the first
    ID's rate against `SELECT 1`'s, and whether both targets are met (medians of one run)."""
    table = []
    for count in results["counts"]:
        ms = {key: 1000 / results["per_second"][f"{key}/{count}"]["median"] for key in SCRIPTS}
        extra = ms["first_id"] - ms["select_1"]
        nextval_extra = ms["nextval"] - ms["select_1"]
        # nextval()'s own extra cost can be within the noise (≤ 0): then only ≤ 0 meets it.
        extra_ratio = extra / nextval_extra if nextval_extra > 0 else float("inf")
        rate_share = ms["select_1"] / ms["first_id"]
        table.append({"tables": count, "select_1_ms": ms["select_1"],
                      "first_id_ms": ms["first_id"], "nextval_ms": ms["nextval"],
                      "extra_ms": extra, "nextval_extra_ms": nextval_extra,
                      "extra_ratio": extra_ratio, "rate_share": rate_share,
                      "met": (extra <= 0 or extra_ratio <= TARGET_EXTRA_RATIO)
                      and rate_share >= TARGET_RATE_SHARE})
    return table


def render(results, server_version):
    lines = [
        f"# A new connection's first ID (PostgreSQL {server_version})",
        "",
        f"`pgbench --connect`, one client, {results['seconds']} s per run, {results['reps']} "
        "alternating repetitions (medians): every transaction opens a new connection, as PHP "
        "and serverless applications do. Databases with the given number of tables keyed by "
        f"`snowflake_nextval()`, {results['rows_per_table']} rows each. Targets: what the first "
        f"ID adds to a connection at most {TARGET_EXTRA_RATIO}× what a first `nextval()` adds, "
        f"and connections at {TARGET_RATE_SHARE:.0%} or more of `SELECT 1`'s rate. Command: "
        "`bash bench/run.sh connections`.",
        "",
        "| keyed tables | `SELECT 1`, ms per connection | `SELECT snowflake_nextval()` | "
        "`SELECT nextval()` | first ID adds | `nextval()` adds | ratio | rate vs `SELECT 1` | "
        "targets met |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows(results):
        lines.append(f"| {row['tables']:,} | {row['select_1_ms']:.2f} | {row['first_id_ms']:.2f} "
                     f"| {row['nextval_ms']:.2f} | {row['extra_ms']:+.2f} ms | "
                     f"{row['nextval_extra_ms']:+.2f} ms | {row['extra_ratio']:.2f}× | "
                     f"{row['rate_share']:.2f}× | {'yes' if row['met'] else 'no'} |")
    lines += ["", spread_note(results["per_second"]), ""]
    return "\n".join(lines)
