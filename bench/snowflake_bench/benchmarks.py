"""The measured workloads: cost per ID (count), concurrent sessions (pgbench), INSERT through the
column default and the "last hour" query. Every comparison alternates inside each repetition."""

import re
import statistics
import time
from collections import defaultdict

from . import ROOT, log
from .cluster import run

# (key, label, SQL expression or None for the empty loop). The order is the table's order.
FUNCTIONS = [
    ("empty", "count(*) (no function: the loop itself)", None),
    ("random", "random()", "random()"),
    ("snowflake", "snowflake_nextval()", "snowflake_nextval()"),
    ("snowflake_named", "snowflake_nextval('named')", "snowflake_nextval('named')"),
    ("snowflake_wide", "snowflake_nextval('wide'): 16 sequence bits (not capped)",
     "snowflake_nextval('wide')"),
    ("nextval_c1", "nextval() CACHE 1", "nextval('bench_seq_cache1')"),
    ("nextval_c100", "nextval() CACHE 100", "nextval('bench_seq_cache100')"),
    ("uuid", "gen_random_uuid()", "gen_random_uuid()"),
    ("instagram", "Instagram PL/pgSQL (insta5.next_id())", "insta5.next_id()"),
]
LABEL = {key: label for key, label, _ in FUNCTIONS}
# Labels of the chart, where the table's long labels do not fit.
SHORT = {
    "empty": "count(*) only (the loop)",
    "random": "random()",
    "snowflake": "snowflake_nextval()",
    "snowflake_named": "snowflake_nextval('named')",
    "snowflake_wide": "snowflake_nextval('wide')",
    "nextval_c1": "nextval() CACHE 1",
    "nextval_c100": "nextval() CACHE 100",
    "uuid": "gen_random_uuid()",
    "instagram": "Instagram PL/pgSQL",
}
EXPR = {key: expr for key, _, expr in FUNCTIONS}
ID_FUNCTIONS = [key for key, _, expr in FUNCTIONS if expr is not None]

INSERT_VARIANTS = [
    ("snowflake", "bigint DEFAULT snowflake_nextval()",
     "id bigint PRIMARY KEY DEFAULT snowflake_nextval()"),
    ("bigserial", "bigserial", "id bigserial PRIMARY KEY"),
    ("uuid", "uuid DEFAULT gen_random_uuid()", "id uuid PRIMARY KEY DEFAULT gen_random_uuid()"),
]

LAST_HOUR_QUERIES = [
    ("snowflake_pk", "id >= snowflake_min_id(now() - interval '1 hour') (primary key)",
     "SELECT count(*), sum(payload) FROM events "
     "WHERE id >= snowflake_min_id(now() - interval '1 hour')"),
    ("created_at", "created_at >= now() - interval '1 hour' (created_at index)",
     "SELECT count(*), sum(payload) FROM events "
     "WHERE created_at >= now() - interval '1 hour'"),
]


def summary(values):
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "samples": list(values),
    }


def rotated(items, shift):
    shift %= len(items)
    return items[shift:] + items[:shift]


def count_sql(key, n):
    expr = EXPR[key]
    return f"SELECT count({expr or '*'}) FROM generate_series(1, {n})"


def pgbench_script(cluster, key):
    """The pgbench script of a function, written by bench_pgbench()."""
    return cluster.dir / "pgbench" / f"{key}.sql"


def setup_database(cluster):
    with cluster.connect() as conn:
        conn.execute("CREATE EXTENSION snowflake_id")
        conn.execute("SELECT snowflake_create_sequence('named', preset => 'classic')")
        # Same cost per call, but 65,536 IDs per ms per session instead of 4,096: shows the
        # CPU cost where the classic layout's per-session cap would throttle.
        conn.execute("SELECT snowflake_create_sequence('wide', preset => 'classic', "
                     "worker_bits => 6, sequence_bits => 16)")
        conn.execute("CREATE SEQUENCE bench_seq_cache1 CACHE 1")
        conn.execute("CREATE SEQUENCE bench_seq_cache100 CACHE 100")
        conn.execute((ROOT / "bench" / "instagram.sql").read_text())
        version = conn.execute("SHOW server_version").fetchone()[0]
    return version


def snowflake_stats(conn):
    row = conn.execute("SELECT borrowed_ticks, throttle_sleeps, reservation_writes "
                       "FROM snowflake_stats()").fetchone()
    return {"borrowed_ticks": row[0], "throttle_sleeps": row[1], "reservation_writes": row[2]}


def stats_delta(before, after):
    """How much each snowflake_stats() counter grew between two readings."""
    return {name: after[name] - before[name] for name in after}


def bench_count(cluster, n, reps):
    """Cost per ID: SELECT count(f()) FROM generate_series(1, n), alternating functions."""
    keys = [key for key, _, _ in FUNCTIONS]
    seconds = defaultdict(list)
    stats = defaultdict(list)
    with cluster.connect() as conn:
        for key in keys:  # warm-up: plan caches, PL/pgSQL compilation, worker slot
            conn.execute(count_sql(key, max(n // 10, 1))).fetchone()
        for rep in range(reps):
            for key in rotated(keys, rep):
                before = snowflake_stats(conn) if key.startswith("snowflake") else None
                start = time.perf_counter()
                result = conn.execute(count_sql(key, n)).fetchone()[0]
                elapsed = time.perf_counter() - start
                assert result == n, (key, result)
                seconds[key].append(elapsed)
                if before is not None:
                    stats[key].append(stats_delta(before, snowflake_stats(conn)))
            log(f"count() repetition {rep + 1}/{reps}: " + ", ".join(
                f"{key} {seconds[key][-1] * 1e9 / n:.0f} ns" for key in keys))
    return {
        "n": n,
        "reps": reps,
        "seconds": {key: summary(values) for key, values in seconds.items()},
        "snowflake_stats_per_run": dict(stats),
    }


def bench_pgbench(cluster, batch, seconds, reps, clients_list):
    """IDs per second with 1, 2, 4 sessions: pgbench running count(f()) over `batch` rows."""
    (cluster.dir / "pgbench").mkdir(exist_ok=True)
    for key in ID_FUNCTIONS:
        pgbench_script(cluster, key).write_text(count_sql(key, batch) + ";\n")
    runs = [(clients, key) for clients in clients_list for key in ID_FUNCTIONS]
    ids_per_second = defaultdict(list)
    stats = defaultdict(list)
    monitor = cluster.connect()
    for rep in range(reps):
        for clients, key in rotated(runs, rep * (len(ID_FUNCTIONS) + 1)):
            before = snowflake_stats(monitor) if key.startswith("snowflake") else None
            output = run(cluster.pgbench_command(clients, seconds, pgbench_script(cluster, key)),
                         capture_output=True, text=True).stdout
            tps = float(re.search(r"tps = ([0-9.]+) \(without initial connection time\)",
                                  output).group(1))
            ids_per_second[f"{key}/{clients}"].append(tps * batch)
            if before is not None:
                stats[f"{key}/{clients}"].append(stats_delta(before, snowflake_stats(monitor)))
        log(f"pgbench repetition {rep + 1}/{reps}: snowflake " + ", ".join(
            f"{clients} sessions {ids_per_second[f'snowflake/{clients}'][-1] / 1e6:.2f} M/s"
            for clients in clients_list))
    monitor.close()
    return {
        "batch": batch,
        "seconds": seconds,
        "reps": reps,
        "clients": clients_list,
        "ids_per_second": {key: summary(values) for key, values in ids_per_second.items()},
        "snowflake_stats_per_run": dict(stats),
    }


def bench_insert(cluster, rows, reps):
    """INSERT of `rows` rows through the column default: time, heap, index and WAL size."""
    results = defaultdict(lambda: defaultdict(list))
    keys = [key for key, _, _ in INSERT_VARIANTS]
    columns = {key: column for key, _, column in INSERT_VARIANTS}
    with cluster.connect() as conn:
        for rep in range(reps):
            for key in rotated(keys, rep):
                table = f"insert_{key}"
                conn.execute(f"DROP TABLE IF EXISTS {table}")
                conn.execute(f"CREATE TABLE {table} ({columns[key]}, payload integer NOT NULL)")
                conn.execute("CHECKPOINT")
                lsn_before = conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
                start = time.perf_counter()
                conn.execute(f"INSERT INTO {table} (payload) "
                             f"SELECT g FROM generate_series(1, {rows}) AS g")
                elapsed = time.perf_counter() - start
                heap, index, wal, count = conn.execute(
                    f"SELECT pg_relation_size('{table}'), pg_relation_size('{table}_pkey'), "
                    f"pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s), "
                    f"(SELECT count(*) FROM {table})", (lsn_before,)).fetchone()
                assert count == rows, (key, count)
                results[key]["seconds"].append(elapsed)
                results[key]["heap_bytes"].append(heap)
                results[key]["index_bytes"].append(index)
                results[key]["wal_bytes"].append(int(wal))
            log(f"insert repetition {rep + 1}/{reps}: " + ", ".join(
                f"{key} {results[key]['seconds'][-1]:.2f} s" for key in keys))
        for key in keys:
            conn.execute(f"DROP TABLE IF EXISTS insert_{key}")
    return {
        "rows": rows,
        "reps": reps,
        "variants": {key: {metric: summary(values) for metric, values in metrics.items()}
                     for key, metrics in results.items()},
    }


def bench_last_hour(cluster, rows, reps, queries_per_rep):
    """'Last hour' by snowflake_min_id() on the primary key vs a created_at index."""
    with cluster.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS events")
        conn.execute("CREATE TABLE events (id bigint PRIMARY KEY, "
                     "created_at timestamptz NOT NULL, payload integer NOT NULL)")
        # `rows` events evenly over the last 30 days; each id is exactly what snowflake_nextval()
        # makes at that time: the tick's smallest ID plus worker (g % 8) and sequence bits.
        conn.execute(f"""
            INSERT INTO events
            SELECT snowflake_min_id(t) | ((g % 8) << 12) | (g % 4096), t, g
            FROM generate_series(1, {rows}) AS g,
                 LATERAL (SELECT date_trunc('milliseconds',
                                 now() - interval '30 days' * (1 - g::float8 / {rows})) AS t) AS x
            ORDER BY g""")
        conn.execute("CREATE INDEX events_created_at ON events (created_at)")
        conn.execute("VACUUM ANALYZE events")
        sizes = conn.execute(
            "SELECT pg_relation_size('events'), pg_relation_size('events_pkey'), "
            "pg_relation_size('events_created_at')").fetchone()
        check = conn.execute(
            "SELECT count(*) FILTER (WHERE snowflake_timestamp(id) <> created_at) FROM events"
        ).fetchone()[0]
        plans = {}
        counts = {}
        for key, _, sql in LAST_HOUR_QUERIES:
            conn.execute(sql).fetchone()
            plans[key] = "\n".join(row[0] for row in conn.execute(
                "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, SUMMARY OFF) " + sql))
            counts[key] = conn.execute(sql).fetchone()[0]
        latencies = defaultdict(list)
        keys = [key for key, _, _ in LAST_HOUR_QUERIES]
        sql_of = {key: sql for key, _, sql in LAST_HOUR_QUERIES}
        for rep in range(reps):
            for key in rotated(keys, rep):
                one = []
                for _ in range(queries_per_rep):
                    start = time.perf_counter()
                    conn.execute(sql_of[key]).fetchone()
                    one.append(time.perf_counter() - start)
                latencies[key].append(statistics.median(one))
        conn.execute("DROP TABLE events")
    return {
        "rows": rows,
        "reps": reps,
        "queries_per_rep": queries_per_rep,
        "heap_bytes": sizes[0],
        "pkey_bytes": sizes[1],
        "created_at_index_bytes": sizes[2],
        "ids_not_matching_created_at": check,
        "rows_found": counts,
        "plans": plans,
        "latency_seconds": {key: summary(values) for key, values in latencies.items()},
    }
