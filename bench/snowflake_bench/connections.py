"""The cost of a new connection's first ID: pgbench --connect (a new connection per transaction,
as PHP and serverless applications connect) running `SELECT snowflake_nextval()` against
`SELECT 1`, in databases with 0, 500 and 5,000 tables keyed by the default sequence (100 rows
each), alternating inside each repetition. Until 0.4.0 a connection's first ID looked up every
keyed table; since 0.5.0 it reads the catalog and the floor relation through their indexes."""

import re
from collections import defaultdict

from . import log
from .benchmarks import rotated, spread_note, summary
from .cluster import run

TABLE_COUNTS = [0, 500, 5000]
ROWS_PER_TABLE = 100
TABLES_PER_TRANSACTION = 200
SCRIPTS = {"select_1": "SELECT 1;\n", "first_id": "SELECT snowflake_nextval();\n"}
# A connection's first ID may cost at most this much more than `SELECT 1` on a new connection.
TARGET_EXTRA_MS = 0.5


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
    """Per table count: ms per connection of `SELECT 1` and of the first ID, the difference,
    the ratio, and whether the difference meets the target (medians of the same run)."""
    table = []
    for count in results["counts"]:
        select_1 = 1000 / results["per_second"][f"select_1/{count}"]["median"]
        first_id = 1000 / results["per_second"][f"first_id/{count}"]["median"]
        extra = first_id - select_1
        table.append({"tables": count, "select_1_ms": select_1, "first_id_ms": first_id,
                      "extra_ms": extra, "ratio": first_id / select_1,
                      "met": extra <= TARGET_EXTRA_MS})
    return table


def render(results, server_version):
    lines = [
        f"# A new connection's first ID (PostgreSQL {server_version})",
        "",
        f"`pgbench --connect`, one client, {results['seconds']} s per run, {results['reps']} "
        "alternating repetitions (medians): every transaction opens a new connection, as PHP "
        "and serverless applications do. Databases with the given number of tables keyed by "
        f"`snowflake_nextval()`, {results['rows_per_table']} rows each. Target: the first ID "
        f"costs at most {TARGET_EXTRA_MS} ms more than `SELECT 1` on a new connection, whatever "
        "the number of tables. Command: `bash bench/run.sh connections`.",
        "",
        "| keyed tables | `SELECT 1`, ms per connection | `SELECT snowflake_nextval()`, ms per "
        "connection | first ID costs | ratio | target met |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows(results):
        lines.append(f"| {row['tables']:,} | {row['select_1_ms']:.2f} | {row['first_id_ms']:.2f} "
                     f"| {row['extra_ms']:+.2f} ms | {row['ratio']:.2f}× | "
                     f"{'yes' if row['met'] else 'no'} |")
    lines += ["", spread_note(results["per_second"]), ""]
    return "\n".join(lines)
