"""The tail of single-row INSERTs with many databases: 1, 10 and 40 databases of one cluster, one
session per database inserting 25 rows a second (`pgbench --rate`, prepared `INSERT … RETURNING
id`), through `DEFAULT snowflake_nextval()` and, alternating, through `bigserial`, every
transaction's latency logged; p99, p99.9 and max over all the databases' sessions, and the WAL
flushes per second the cluster made meanwhile (pg_stat_wal, pg_stat_io from 18 on). Each
database's floor relation is written by its own sessions (docs/design.md §5.3): this is what
that costs a cluster with many databases."""

import subprocess
from collections import defaultdict

from . import log
from .benchmarks import parse_pgbench_log, quantiles, rotated

DATABASE_COUNTS = [1, 10, 40]
ROWS_PER_SECOND = 25
COLUMNS = {
    "snowflake": "id bigint PRIMARY KEY DEFAULT snowflake_nextval()",
    "bigserial": "id bigserial PRIMARY KEY",
}
# With the most databases, each of p99, p99.9 and max may be at most this many times bigserial's.
TARGET_RATIO = 1.1
FIGURES = ("p99", "p99.9", "max")


def database(index):
    return f"tail_{index}"


def setup(cluster, counts=DATABASE_COUNTS):
    """The databases, each with the extension and one table per id column, and room for a
    session per database."""
    most = max(counts)
    with cluster.connect() as conn:
        conn.execute(f"ALTER SYSTEM SET max_connections = {most + 20}")
    cluster.stop()
    cluster.start()
    log(f"{most} databases")
    with cluster.connect() as conn:
        for index in range(most):
            conn.execute(f"DROP DATABASE IF EXISTS {database(index)}")
            conn.execute(f"CREATE DATABASE {database(index)}")
    for index in range(most):
        with cluster.connect(database(index)) as conn:
            conn.execute("CREATE EXTENSION snowflake_id")
            for key, column in COLUMNS.items():
                conn.execute(f"CREATE TABLE rows_{key} ({column}, payload integer NOT NULL)")


def wal_flushes(conn):
    """The cluster's WAL flushes so far (pg_stat_io's WAL fsyncs from 18 on, where pg_stat_wal
    no longer counts them)."""
    version = int(conn.execute("SHOW server_version_num").fetchone()[0])
    query = ("SELECT sum(fsyncs) FROM pg_stat_io WHERE object = 'wal'" if version >= 180000
             else "SELECT wal_sync FROM pg_stat_wal")
    return int(conn.execute(query).fetchone()[0] or 0)


def run_sessions(cluster, count, script, seconds, log_prefix=None):
    """One rate-limited pgbench session in each of the first `count` databases, all at once."""
    processes = []
    for index in range(count):
        command = cluster.pgbench_command(1, seconds, script, database(index))
        command[-1:-1] = ["--protocol=prepared", f"--rate={ROWS_PER_SECOND}"]
        if log_prefix:
            command[-1:-1] = ["--log", f"--log-prefix={log_prefix}-{index}"]
        processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.PIPE, text=True))
    for process in processes:
        error = process.communicate()[1]
        if process.returncode != 0:
            raise RuntimeError(f"pgbench failed: {error[-2000:]}")


def bench_databases(cluster, seconds, reps, counts=DATABASE_COUNTS):
    """Per database count and id column: latencies of every session's inserts and the WAL
    flushes per second, `reps` alternating runs of `seconds` each."""
    directory = cluster.dir / "databases"
    directory.mkdir(exist_ok=True)
    keys = list(COLUMNS)
    for key in keys:
        (directory / f"{key}.sql").write_text(
            f"INSERT INTO rows_{key} (payload) VALUES (1) RETURNING id;\n")
    latencies = defaultdict(list)
    flushes = defaultdict(float)
    monitor = cluster.connect()
    for rep in range(reps):
        for count in counts:
            for key in rotated(keys, rep):
                script = directory / f"{key}.sql"
                for old in directory.glob(f"{key}-{count}-*"):
                    old.unlink()
                # One unmeasured second first: after the other column's run the reservation
                # of an idle cluster lapsed, and the runs measure the steady state.
                run_sessions(cluster, count, script, 1)
                before = wal_flushes(monitor)
                run_sessions(cluster, count, script, seconds, directory / f"{key}-{count}")
                # The statistics of the sessions that just ended are in by the next read
                # (backends report at exit).
                flushes[f"{key}/{count}"] += (wal_flushes(monitor) - before) / seconds / reps
                for log_file in directory.glob(f"{key}-{count}-*"):
                    latencies[f"{key}/{count}"].extend(parse_pgbench_log(log_file.read_text()))
            log(f"databases repetition {rep + 1}/{reps}, {count} databases: " + ", ".join(
                f"{key} p99 {quantiles(latencies[f'{key}/{count}'])['p99']:.2f} ms"
                for key in keys))
    monitor.close()
    return {
        "seconds": seconds, "reps": reps, "counts": counts, "rows_per_second": ROWS_PER_SECOND,
        "variants": {name: {**quantiles(values), "transactions": len(values),
                            "wal_flushes_per_second": flushes[name]}
                     for name, values in latencies.items()},
    }


def rows(results):
    """Per database count: each figure of ours and of bigserial, their ratio, and whether every
    ratio meets the target (the target is set at the largest count)."""
    table = []
    for count in results["counts"]:
        ours = results["variants"][f"snowflake/{count}"]
        theirs = results["variants"][f"bigserial/{count}"]
        ratios = {figure: ours[figure] / theirs[figure] for figure in FIGURES}
        table.append({
            "databases": count, "snowflake": ours, "bigserial": theirs, "ratios": ratios,
            "met": all(ratio <= TARGET_RATIO for ratio in ratios.values()),
        })
    return table


def render(results, server_version):
    lines = [
        f"# Single-row INSERTs in many databases (PostgreSQL {server_version})",
        "",
        f"One session per database inserting {results['rows_per_second']} rows a second "
        "(`pgbench --rate`, prepared `INSERT … RETURNING id`), all databases at once, "
        f"{results['seconds']} s per run, {results['reps']} alternating repetitions; latencies "
        "of every transaction of every session (ms, from its scheduled start), and the "
        "cluster's WAL flushes per second. Target: with the most databases, p99, p99.9 and "
        f"max at most {TARGET_RATIO}× bigserial's. Command: `bash bench/run.sh databases`.",
        "",
        "| databases | id column | p99 | p99.9 | max | WAL flushes/s | transactions |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows(results):
        for key in COLUMNS:
            figures = row[key]
            lines.append(f"| {row['databases']} | {key} | {figures['p99']:.2f} | "
                         f"{figures['p99.9']:.2f} | {figures['max']:.2f} | "
                         f"{figures['wal_flushes_per_second']:.1f} | "
                         f"{figures['transactions']:,} |")
    lines += ["", "| databases | p99 ratio | p99.9 ratio | max ratio | target met |",
              "|---|---|---|---|---|"]
    for row in rows(results):
        ratios = row["ratios"]
        lines.append(f"| {row['databases']} | {ratios['p99']:.2f}× | {ratios['p99.9']:.2f}× | "
                     f"{ratios['max']:.2f}× | {'yes' if row['met'] else 'no'} |")
    lines.append("")
    return "\n".join(lines)
