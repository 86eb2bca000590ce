"""The measured workloads: cost per ID (count), concurrent sessions (pgbench), INSERT through the
column default and the "last hour" query. Every comparison alternates inside each repetition."""

import re
import subprocess
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
    ("pgedge", "pgEdge snowflake.nextval() 2.6.0", "snowflake.nextval('pgedge_seq')"),
    ("nextval_c1", "nextval() CACHE 1", "nextval('bench_seq_cache1')"),
    ("nextval_c100", "nextval() CACHE 100", "nextval('bench_seq_cache100')"),
    ("uuid", "gen_random_uuid()", "gen_random_uuid()"),
    ("uuidv7", "uuidv7() (PostgreSQL 18)", "uuidv7()"),
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
    "pgedge": "pgEdge snowflake.nextval()",
    "nextval_c1": "nextval() CACHE 1",
    "nextval_c100": "nextval() CACHE 100",
    "uuid": "gen_random_uuid()",
    "uuidv7": "uuidv7()",
    "instagram": "Instagram PL/pgSQL",
}
EXPR = {key: expr for key, _, expr in FUNCTIONS}
ID_FUNCTIONS = [key for key, _, expr in FUNCTIONS if expr is not None]

INSERT_VARIANTS = [
    ("snowflake", "bigint DEFAULT snowflake_nextval()",
     "id bigint PRIMARY KEY DEFAULT snowflake_nextval()"),
    ("pgedge", "bigint DEFAULT snowflake.nextval() (pgEdge)",
     "id bigint PRIMARY KEY DEFAULT snowflake.nextval('pgedge_seq')"),
    ("bigserial", "bigserial", "id bigserial PRIMARY KEY"),
    ("uuid", "uuid DEFAULT gen_random_uuid()", "id uuid PRIMARY KEY DEFAULT gen_random_uuid()"),
    ("uuidv7", "uuid DEFAULT uuidv7()", "id uuid PRIMARY KEY DEFAULT uuidv7()"),
]
# What exists only from some PostgreSQL major on (key: major); everything else runs on every major.
FIRST_MAJOR = {"uuidv7": 18, "uuidv7_pk": 18}


def available(keys, major):
    """The keys that the server's major can run, in their order."""
    return [key for key in keys if FIRST_MAJOR.get(key, 0) <= major]

LAST_HOUR_QUERIES = [
    ("snowflake_pk", "id >= snowflake_min_id(now() - interval '1 hour') (primary key)",
     "SELECT count(*), sum(payload) FROM events "
     "WHERE id >= snowflake_min_id(now() - interval '1 hour')"),
    ("created_at", "created_at >= now() - interval '1 hour' (created_at index)",
     "SELECT count(*), sum(payload) FROM events "
     "WHERE created_at >= now() - interval '1 hour'"),
    # The smallest UUIDv7 of the millisecond an hour ago: its 48-bit Unix-ms timestamp, version
    # 7, then the lowest variant and random bits.
    ("uuidv7_pk", "id >= the smallest uuidv7 of now() - 1 hour (primary key, uuid table)",
     "SELECT count(*), sum(payload) FROM events_v7 WHERE id >= (lpad(to_hex((extract(epoch FROM "
     "now() - interval '1 hour') * 1000)::int8), 12, '0') || '70008000000000000000')::uuid"),
]


def summary(values):
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "samples": list(values),
    }


def spread_note(per_second):
    """The report's line on how far a median rate lies above its slowest repetition, the largest
    over `per_second` ({key: summary(rates)})."""
    spread = [statistics.median(v["samples"]) / min(v["samples"]) - 1
              for v in per_second.values()]
    return f"Largest spread of a median over its slowest repetition: {max(spread):.0%}."


def rotated(items, shift):
    shift %= len(items)
    return items[shift:] + items[:shift]


def pgbench_tps(output):
    """The transactions per second a pgbench run reports (without connection time)."""
    return float(re.search(r"tps = ([0-9.]+) \(without initial connection time\)",
                           output).group(1))


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
        # pgEdge's snowflake (node number `snowflake.node` from the cluster's configuration):
        # one sequence all sessions share, and one per pgbench client (bench_sequences).
        conn.execute("CREATE EXTENSION snowflake")
        conn.execute("CREATE SEQUENCE pgedge_seq")
        for client in range(SEQUENCE_CLIENTS[-1]):
            conn.execute(f"CREATE SEQUENCE pgedge_seq_{client}")
            conn.execute(f"SELECT snowflake_create_sequence('own_{client}', preset => 'classic')")
        conn.execute("CREATE SEQUENCE bench_seq_cache1 CACHE 1")
        conn.execute("CREATE SEQUENCE bench_seq_cache100 CACHE 100")
        conn.execute((ROOT / "bench" / "instagram.sql").read_text())
        version = conn.execute("SHOW server_version").fetchone()[0]
    return version


# bench_sequences: ours and pgEdge's, all sessions on one sequence or each on its own.
SEQUENCE_CLIENTS = [1, 2, 4, 8]
SEQUENCE_GENERATORS = {
    # (one sequence shared by every session, the session's own sequence from a FROM item
    # evaluated once per statement); :client_id is pgbench's 0-based client number.
    "snowflake": ("snowflake_nextval('named')", "snowflake_nextval(s)",
                  "(SELECT 'own_' || :client_id AS s) AS own"),
    "pgedge": ("snowflake.nextval('pgedge_seq')", "snowflake.nextval(s)",
               "(SELECT ('pgedge_seq_' || :client_id)::regclass AS s) AS own"),
}


def sequence_script(key, mode, batch):
    """The pgbench script of `key`'s generator in `mode` ("one" or "separate")."""
    shared, own, own_from = SEQUENCE_GENERATORS[key]
    if mode == "one":
        return f"SELECT count({shared}) FROM generate_series(1, {batch});\n"
    return f"SELECT count({own}) FROM generate_series(1, {batch}), {own_from};\n"


def bench_sequences(cluster, batch, seconds, reps):
    """IDs/s of ours and pgEdge's with 1, 2, 4, 8 sessions, all on one sequence or each on its
    own: pgEdge's nextval takes its sequence's buffer lock on every call."""
    directory = cluster.dir / "sequences"
    directory.mkdir(exist_ok=True)
    runs = [(key, mode, clients) for key in SEQUENCE_GENERATORS for mode in ("one", "separate")
            for clients in SEQUENCE_CLIENTS]
    for key, mode, _ in runs:
        (directory / f"{key}-{mode}.sql").write_text(sequence_script(key, mode, batch))
    ids_per_second = defaultdict(list)
    for rep in range(reps):
        for key, mode, clients in rotated(runs, rep * 3):
            output = run(cluster.pgbench_command(clients, seconds,
                                                 directory / f"{key}-{mode}.sql"),
                         capture_output=True, text=True).stdout
            tps = pgbench_tps(output)
            ids_per_second[f"{key}/{mode}/{clients}"].append(tps * batch)
        log(f"sequences repetition {rep + 1}/{reps}: 8 sessions on one sequence: " + ", ".join(
            f"{key} {ids_per_second[f'{key}/one/8'][-1] / 1e6:.2f} M/s"
            for key in SEQUENCE_GENERATORS))
    return {
        "batch": batch,
        "seconds": seconds,
        "reps": reps,
        "clients": SEQUENCE_CLIENTS,
        "ids_per_second": {key: summary(values) for key, values in ids_per_second.items()},
    }


def wal_insert_lsn(conn):
    return conn.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]


def snowflake_stats(conn):
    row = conn.execute("SELECT borrowed_ticks, throttle_sleeps, reservation_writes "
                       "FROM snowflake_stats()").fetchone()
    return {"borrowed_ticks": row[0], "throttle_sleeps": row[1], "reservation_writes": row[2]}


def stats_delta(before, after):
    """How much each snowflake_stats() counter grew between two readings."""
    return {name: after[name] - before[name] for name in after}


def bench_count(cluster, n, reps, major):
    """Cost per ID: SELECT count(f()) FROM generate_series(1, n), alternating functions."""
    keys = available([key for key, _, _ in FUNCTIONS], major)
    seconds = defaultdict(list)
    wal_bytes = defaultdict(list)
    stats = defaultdict(list)
    with cluster.connect() as conn:
        for key in keys:  # warm-up: plan caches, PL/pgSQL compilation, worker id
            conn.execute(count_sql(key, max(n // 10, 1))).fetchone()
        for rep in range(reps):
            for key in rotated(keys, rep):
                before = snowflake_stats(conn) if key.startswith("snowflake") else None
                lsn = wal_insert_lsn(conn)
                start = time.perf_counter()
                result = conn.execute(count_sql(key, n)).fetchone()[0]
                elapsed = time.perf_counter() - start
                assert result == n, (key, result)
                seconds[key].append(elapsed)
                wal_bytes[key].append(int(conn.execute(
                    "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", (lsn,)
                ).fetchone()[0]))
                if before is not None:
                    stats[key].append(stats_delta(before, snowflake_stats(conn)))
            log(f"count() repetition {rep + 1}/{reps}: " + ", ".join(
                f"{key} {seconds[key][-1] * 1e9 / n:.0f} ns" for key in keys))
    return {
        "n": n,
        "reps": reps,
        "seconds": {key: summary(values) for key, values in seconds.items()},
        "wal_bytes": {key: summary(values) for key, values in wal_bytes.items()},
        "snowflake_stats_per_run": dict(stats),
    }


def bench_pgbench(cluster, batch, seconds, reps, clients_list, major):
    """IDs per second with 1, 2, 4 sessions: pgbench running count(f()) over `batch` rows."""
    (cluster.dir / "pgbench").mkdir(exist_ok=True)
    functions = available(ID_FUNCTIONS, major)
    for key in functions:
        pgbench_script(cluster, key).write_text(count_sql(key, batch) + ";\n")
    runs = [(clients, key) for clients in clients_list for key in functions]
    ids_per_second = defaultdict(list)
    stats = defaultdict(list)
    monitor = cluster.connect()
    for rep in range(reps):
        for clients, key in rotated(runs, rep * (len(functions) + 1)):
            before = snowflake_stats(monitor) if key.startswith("snowflake") else None
            output = run(cluster.pgbench_command(clients, seconds, pgbench_script(cluster, key)),
                         capture_output=True, text=True).stdout
            tps = pgbench_tps(output)
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


def bench_insert(cluster, rows, reps, major):
    """INSERT of `rows` rows through the column default: time, heap, index and WAL size."""
    results = defaultdict(lambda: defaultdict(list))
    keys = available([key for key, _, _ in INSERT_VARIANTS], major)
    columns = {key: column for key, _, column in INSERT_VARIANTS}
    with cluster.connect() as conn:
        for rep in range(reps):
            for key in rotated(keys, rep):
                table = f"insert_{key}"
                conn.execute(f"DROP TABLE IF EXISTS {table}")
                conn.execute(f"CREATE TABLE {table} ({columns[key]}, payload integer NOT NULL)")
                conn.execute("CHECKPOINT")
                lsn_before = wal_insert_lsn(conn)
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


def bench_last_hour(cluster, rows, reps, queries_per_rep, major):
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
        keys = available([key for key, _, _ in LAST_HOUR_QUERIES], major)
        if "uuidv7_pk" in keys:
            # The same events keyed by the UUIDv7 that uuidv7() makes at created_at.
            conn.execute("CREATE TABLE events_v7 (id uuid PRIMARY KEY, "
                         "created_at timestamptz NOT NULL, payload integer NOT NULL)")
            conn.execute("INSERT INTO events_v7 SELECT uuidv7(created_at - now()), created_at, "
                         "payload FROM events ORDER BY id")
            conn.execute("VACUUM ANALYZE events_v7")
        sizes = conn.execute(
            "SELECT pg_relation_size('events'), pg_relation_size('events_pkey'), "
            "pg_relation_size('events_created_at'), "
            "coalesce(pg_relation_size(to_regclass('events_v7_pkey')), 0)").fetchone()
        check = conn.execute(
            "SELECT count(*) FILTER (WHERE snowflake_timestamp(id) <> created_at) FROM events"
        ).fetchone()[0]
        plans = {}
        counts = {}
        sql_of = {key: sql for key, _, sql in LAST_HOUR_QUERIES}
        for key in keys:
            sql = sql_of[key]
            conn.execute(sql).fetchone()
            plans[key] = "\n".join(row[0] for row in conn.execute(
                "EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, SUMMARY OFF) " + sql))
            counts[key] = conn.execute(sql).fetchone()[0]
        latencies = defaultdict(list)
        for rep in range(reps):
            for key in rotated(keys, rep):
                one = []
                for _ in range(queries_per_rep):
                    start = time.perf_counter()
                    conn.execute(sql_of[key]).fetchone()
                    one.append(time.perf_counter() - start)
                latencies[key].append(statistics.median(one))
        conn.execute("DROP TABLE events")
        conn.execute("DROP TABLE IF EXISTS events_v7")
    return {
        "rows": rows,
        "reps": reps,
        "queries_per_rep": queries_per_rep,
        "heap_bytes": sizes[0],
        "pkey_bytes": sizes[1],
        "created_at_index_bytes": sizes[2],
        "uuidv7_pkey_bytes": sizes[3],
        "ids_not_matching_created_at": check,
        "rows_found": counts,
        "plans": plans,
        "latency_seconds": {key: summary(values) for key, values in latencies.items()},
    }


# Single-row INSERT … RETURNING id through the column default: the id columns compared.
TAIL_VARIANTS = [key for key, _, _ in INSERT_VARIANTS]
TAIL_QUANTILES = (("p50", 0.50), ("p99", 0.99), ("p99.9", 0.999))
RESERVATION_LOCK_WAIT = "LWLock:snowflake_id"


def quantiles(latencies_us):
    """p50, p99, p99.9 and max (ms) of a list of latencies in µs (nearest rank)."""
    ordered = sorted(latencies_us)
    out = {name: ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e3
           for name, q in TAIL_QUANTILES}
    out["max"] = ordered[-1] / 1e3
    return out


def figures(latencies_us):
    """p50, p99, p99.9 and max (ms) and the number of samples; only the number if none."""
    if not latencies_us:
        return {"samples": 0}
    return {**quantiles(latencies_us), "samples": len(latencies_us)}


def parse_pgbench_log(text):
    """Latencies (µs) of a pgbench --log file: `client_id transaction_no time script_no
    time_epoch time_us` per transaction, `time` being its latency in µs."""
    return [int(line.split()[2]) for line in text.splitlines() if line.strip()]


def sample_reservation_waits(cluster, running, found):
    """Counts pg_stat_activity samples (every ms while `running()`) in which a session waits on
    the reservation lock; runs in a thread beside pgbench."""
    with cluster.connect() as conn:
        while running():
            waiting = conn.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE wait_event_type || ':' || wait_event = %s",
                (RESERVATION_LOCK_WAIT,)).fetchone()[0]
            found["samples"] += 1
            found["waiting"] += 1 if waiting else 0
            time.sleep(0.001)


def bench_tail_latency(cluster, clients, seconds, chunks, major):
    """pgbench, `clients` sessions, prepared `INSERT … RETURNING id` through each column default,
    `seconds` per variant in `chunks` alternating runs, every transaction's latency logged;
    pg_stat_activity sampled for reservation-lock waits meanwhile."""
    import threading

    keys = available(TAIL_VARIANTS, major)
    columns = {key: column for key, _, column in INSERT_VARIANTS}
    directory = cluster.dir / "tail"
    directory.mkdir(exist_ok=True)
    with cluster.connect() as conn:
        for key in keys:
            conn.execute(f"DROP TABLE IF EXISTS tail_{key}")
            conn.execute(f"CREATE TABLE tail_{key} ({columns[key]}, payload integer NOT NULL)")
            (directory / f"{key}.sql").write_text(
                f"INSERT INTO tail_{key} (payload) VALUES (1) RETURNING id;\n")
    latencies = defaultdict(list)
    transactions_per_second = defaultdict(list)
    waits = {key: {"samples": 0, "waiting": 0} for key in keys}
    writes = {key: 0 for key in keys}
    monitor = cluster.connect()
    for chunk in range(chunks):
        for key in rotated(keys, chunk):
            for old in directory.glob(f"{key}.log*"):
                old.unlink()
            # One unmeasured second first: the runs measure the steady state. (After the other
            # columns' runs the server was idle for snowflake_id, whose reservation then lapsed:
            # the first IDs of a burst after idleness wait for one reservation write.)
            run(cluster.pgbench_command(clients, 1, directory / f"{key}.sql"),
                capture_output=True)
            command = cluster.pgbench_command(clients, max(seconds // chunks, 1),
                                              directory / f"{key}.sql")
            command[-1:-1] = ["--protocol=prepared", "--log",
                              f"--log-prefix={directory / (key + '.log')}"]
            before = snowflake_stats(monitor)["reservation_writes"]
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       text=True)
            sampler = threading.Thread(target=sample_reservation_waits,
                                       args=(cluster, lambda: process.poll() is None, waits[key]))
            sampler.start()
            output = process.communicate()[0]
            sampler.join()
            writes[key] += snowflake_stats(monitor)["reservation_writes"] - before
            transactions_per_second[key].append(pgbench_tps(output))
            for log_file in directory.glob(f"{key}.log*"):
                latencies[key].extend(parse_pgbench_log(log_file.read_text()))
        log(f"tail latency chunk {chunk + 1}/{chunks}: " + ", ".join(
            f"{key} p99.9 {quantiles(latencies[key])['p99.9']:.2f} ms" for key in keys))
    monitor.close()
    with cluster.connect() as conn:
        for key in keys:
            conn.execute(f"DROP TABLE tail_{key}")
    return {
        "clients": clients,
        "seconds": seconds,
        "chunks": chunks,
        "variants": {key: {**quantiles(latencies[key]), "transactions": len(latencies[key]),
                           "tps": summary(transactions_per_second[key]),
                           "reservation_lock_samples": waits[key],
                           "reservation_writes": writes[key]}
                     for key in keys},
    }
