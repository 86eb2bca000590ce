#!/usr/bin/env python3
"""Benchmarks of snowflake_id (issue #6). Started by bench/run.sh, which installs the extension.

One run: starts a throwaway cluster, measures every comparison with alternating repetitions,
collects evidence (strace, pg_stat_activity wait events, callgrind of a single-user backend),
always stops the cluster, and writes results/latest.{md,png,json} plus the evidence files.
Benchmarks are not tests: no timing makes this script fail.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import psycopg  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PORT = 54339

# Targets of issue #6 (ratios of medians in the same run).
TARGET_VS_RANDOM = 1.25
TARGET_VS_NEXTVAL_CACHE1 = 0.5
TARGET_INSERT_VS_BIGSERIAL = 1.05
TARGET_TWO_SESSIONS = 1.6

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


def log(message):
    print(f"    {datetime.datetime.now():%H:%M:%S} {message}", flush=True)


def as_postgres(command):
    return ["runuser", "-u", "postgres", "--"] + [str(part) for part in command]


def run(command, **kwargs):
    return subprocess.run([str(part) for part in command], check=True, **kwargs)


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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


# --------------------------------------------------------------------------------------------
# Cluster


class Cluster:
    def __init__(self, bindir, directory):
        self.bindir = Path(bindir)
        self.dir = Path(directory)
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"

    def running(self):
        return (self.data / "postmaster.pid").exists()

    def stop(self, mode="fast"):
        if self.running():
            subprocess.run(as_postgres([self.bindir / "pg_ctl", "--pgdata", self.data,
                                        "--mode", mode, "--wait", "stop"]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)

    def create(self):
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
        run(["install", "-d", "-o", "postgres", "-g", "postgres", self.dir])
        run(as_postgres([self.bindir / "initdb", "--pgdata", self.data, "--auth=trust",
                         "--username=postgres", "--encoding=UTF8", "--locale=C"]),
            stdout=subprocess.DEVNULL)
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(CLUSTER_CONF.format(port=PORT, dir=self.dir))

    def start(self):
        run(as_postgres([self.bindir / "pg_ctl", "--pgdata", self.data, "--log", self.log,
                         "--wait", "start"]), stdout=subprocess.DEVNULL)

    def postmaster_pid(self):
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def connect(self):
        return psycopg.connect(host=str(self.dir), port=PORT, user="postgres", dbname="postgres",
                               autocommit=True)

    def mapped_library_sha256(self):
        """sha256 of the snowflake_id.so that the running postmaster has mapped."""
        pid = self.postmaster_pid()
        with open(f"/proc/{pid}/maps") as maps:
            for line in maps:
                if "snowflake_id.so" in line:
                    address = line.split()[0]
                    return sha256(f"/proc/{pid}/map_files/{address}")
        return None


CLUSTER_CONF = """
# snowflake_id benchmark cluster (bench/run.py): Unix socket only.
listen_addresses = ''
port = {port}
unix_socket_directories = '{dir}'
shared_preload_libraries = 'snowflake_id'
max_connections = 20
shared_buffers = 512MB
work_mem = 256MB
maintenance_work_mem = 256MB
max_wal_size = 8GB
checkpoint_timeout = 30min
autovacuum = off
jit = off
"""


# --------------------------------------------------------------------------------------------
# Machine state


def read_proc_stat(pid):
    """(comm, fields after the comm) of /proc/<pid>/stat, or None if the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
    except OSError:
        return None
    return text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()


def all_proc_stats():
    """(pid, comm, fields after the comm) of every process."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = read_proc_stat(entry)
            if stat is not None:
                yield (int(entry), *stat)


def cpu_ticks():
    """{pid: (comm, utime+stime)} of every process."""
    return {pid: (comm, int(fields[11]) + int(fields[12]))
            for pid, comm, fields in all_proc_stats()}


def busy_processes(seconds=2.0):
    """Processes that used more than 5% of a CPU during `seconds` (this runner excluded)."""
    hz = os.sysconf("SC_CLK_TCK")
    before = cpu_ticks()
    time.sleep(seconds)
    after = cpu_ticks()
    busy = []
    for pid, (comm, ticks) in after.items():
        if pid == os.getpid() or pid not in before:
            continue
        share = (ticks - before[pid][1]) / hz / seconds
        if share > 0.05:
            busy.append({"pid": pid, "comm": comm, "cpu": round(share, 2)})
    return sorted(busy, key=lambda item: -item["cpu"])


def other_postmasters(own_data_dir):
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"/postgres") and b"-D" in cmdline:
            data = cmdline[cmdline.index(b"-D") + 1].decode(errors="replace")
            if Path(data).resolve() != Path(own_data_dir).resolve():
                found.append(data)
    return found


def process_cpu():
    """{pid: (comm, parent pid, CPU ticks of the process and of the children it reaped)}."""
    return {pid: (comm, int(fields[1]), sum(int(value) for value in fields[11:15]))
            for pid, comm, fields in all_proc_stats()}


class ForeignCpu:
    """CPU time that anything but this run used while a benchmark phase ran: the growth of
    utime+stime+cutime+cstime of every process alive before and after the phase, except this
    run's own (the runner, its ancestors and descendants, the cluster), plus the whole CPU time
    of processes started during the phase. Processes that started and ended within it (a
    compiler, a test) show up in the parent that reaps them. (Machine busy time
    from /proc/stat is no use here: a session that sleeps in 1 ms steps, as a throttled
    snowflake_nextval() does, makes the tick-sampled counters report the CPU as busy.)"""

    def __init__(self, cluster):
        self.cluster = cluster
        self.phases = {}

    def own_pids(self, processes):
        children = defaultdict(list)
        for pid, (_, parent, _) in processes.items():
            children[parent].append(pid)
        own, todo = set(), [os.getpid(), self.cluster.postmaster_pid()]
        while todo:
            pid = todo.pop()
            if pid not in own:
                own.add(pid)
                todo.extend(children.get(pid, []))
        pid = os.getpid()
        while pid in processes and pid > 1:  # ancestors: run.sh, the shell that started it
            own.add(pid)
            pid = processes[pid][1]
        return own

    def measure(self, name, run_phase):
        before, start = process_cpu(), time.monotonic()
        value = run_phase()
        elapsed = time.monotonic() - start
        after = process_cpu()
        own = self.own_pids(before) | self.own_pids(after)
        hz = os.sysconf("SC_CLK_TCK")
        # Processes started during the phase count whole.
        others = sorted(
            ((after[pid][2] - (before[pid][2] if pid in before else 0)) / hz, after[pid][0])
            for pid in after if pid not in own)
        self.phases[name] = {
            "seconds": round(sum(secs for secs, _ in others), 1),
            "elapsed": round(elapsed, 1),
            "top": [{"comm": comm, "seconds": round(secs, 1)}
                    for secs, comm in reversed(others[-3:]) if secs >= 0.3],
        }
        return value


def machine_state(own_data_dir):
    return {
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "loadavg": [round(value, 2) for value in os.getloadavg()],
        "busy_processes": busy_processes(),
        "other_postmasters": other_postmasters(own_data_dir),
    }


def wait_for_quiet(max_seconds, own_data_dir):
    deadline = time.monotonic() + max_seconds
    while True:
        state = machine_state(own_data_dir)
        quiet = state["loadavg"][0] < 0.5 and not state["busy_processes"]
        if quiet or time.monotonic() >= deadline:
            state["quiet"] = quiet
            return state
        log(f"machine busy (load {state['loadavg'][0]}, "
            f"{', '.join(p['comm'] for p in state['busy_processes']) or 'no busy process'}); "
            "waiting")
        time.sleep(10)


def machine_info():
    cpu = "unknown"
    with open("/proc/cpuinfo") as cpuinfo:
        for line in cpuinfo:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    try:
        clocksource = Path(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource").read_text().strip()
    except OSError:
        clocksource = "unknown"
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "src", "sql",
                            "Cargo.toml", "Cargo.lock"],
                           capture_output=True, text=True).stdout.strip()
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "kernel": platform.release(),
        "clocksource": clocksource,
        "commit": commit + (" (with uncommitted changes in src/sql)" if dirty else ""),
    }


# --------------------------------------------------------------------------------------------
# Benchmarks


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


def count_sql(key, n):
    expr = EXPR[key]
    return f"SELECT count({expr or '*'}) FROM generate_series(1, {n})"


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
                    after = snowflake_stats(conn)
                    stats[key].append({name: after[name] - before[name] for name in after})
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
    scripts = cluster.dir / "pgbench"
    scripts.mkdir(exist_ok=True)
    for key in ID_FUNCTIONS:
        (scripts / f"{key}.sql").write_text(count_sql(key, batch) + ";\n")
    runs = [(clients, key) for clients in clients_list for key in ID_FUNCTIONS]
    ids_per_second = defaultdict(list)
    stats = defaultdict(list)
    monitor = cluster.connect()
    for rep in range(reps):
        for clients, key in rotated(runs, rep * (len(ID_FUNCTIONS) + 1)):
            before = snowflake_stats(monitor) if key.startswith("snowflake") else None
            output = run(
                [cluster.bindir / "pgbench", "--no-vacuum", "--host", cluster.dir, "--port", PORT,
                 "--username", "postgres", "--client", clients, "--jobs", clients,
                 "--time", seconds, "--file", scripts / f"{key}.sql", "postgres"],
                capture_output=True, text=True).stdout
            tps = float(re.search(r"tps = ([0-9.]+) \(without initial connection time\)",
                                  output).group(1))
            ids_per_second[f"{key}/{clients}"].append(tps * batch)
            if before is not None:
                after = snowflake_stats(monitor)
                stats[f"{key}/{clients}"].append(
                    {name: after[name] - before[name] for name in after})
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


# --------------------------------------------------------------------------------------------
# Evidence


def start_strace(arguments, pid):
    process = subprocess.Popen(["strace"] + arguments + ["-p", str(pid)],
                               stderr=subprocess.PIPE, text=True)
    # strace reports "Process N attached" once it traces the backend.
    ready, _, _ = select.select([process.stderr], [], [], 10)
    if ready:
        process.stderr.readline()
    time.sleep(0.2)
    return process


def stop_strace(process):
    process.send_signal(signal.SIGINT)
    process.wait(timeout=30)


STRACE_KEYS = {"snowflake": "default", "snowflake_wide": "wide"}


def evidence_strace(cluster, results_dir, n, trace_seconds=4.0):
    """Per sequence: strace -c during n snowflake_nextval() calls, then a full strace -tt
    over ~trace_seconds of back-to-back calls (reservation writes, throttle sleeps)."""
    evidence = {}
    for key, name in STRACE_KEYS.items():
        found = {}
        with cluster.connect() as conn:
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            sql = count_sql(key, n)
            conn.execute(sql).fetchone()  # warm: slot claimed, catalog read
            time.sleep(0.3)  # the clock catches up with any lead left by the warm-up
            before = snowflake_stats(conn)
            start = time.perf_counter()
            conn.execute(sql).fetchone()
            found["seconds_without_strace"] = time.perf_counter() - start
            time.sleep(0.3)

            count_file = results_dir / f"strace-count-{name}.txt"
            tracer = start_strace(["-c", "-f", "-o", str(count_file)], pid)
            start = time.perf_counter()
            conn.execute(sql).fetchone()
            found["seconds_under_strace"] = time.perf_counter() - start
            stop_strace(tracer)
            found["count_summary"] = count_file.read_text()

            trace_file = cluster.dir / f"strace-trace-{name}.txt"
            tracer = start_strace(["-f", "-tt", "-o", str(trace_file)], pid)
            statements = 0
            start = time.perf_counter()
            while time.perf_counter() - start < trace_seconds:
                conn.execute(sql).fetchone()
                statements += 1
            traced = time.perf_counter() - start
            stop_strace(tracer)
            after = snowflake_stats(conn)

        syscalls = defaultdict(int)
        reservation_lines = []
        sleep_lines = []
        for line in trace_file.read_text().splitlines():
            match = re.match(r"(?:\d+ +)?(\d+:\d+:\d+\.\d+) (\w+)\(", line)
            if not match:
                continue
            syscalls[match.group(2)] += 1
            # The backend touches no file while it issues IDs except the reservation.
            if match.group(2) in ("openat", "open", "write", "fsync", "fdatasync", "close",
                                  "rename", "renameat", "renameat2"):
                reservation_lines.append(line)
            elif match.group(2) in ("pselect6", "select", "nanosleep", "clock_nanosleep"):
                sleep_lines.append(line)
        renames = [re.search(r"\d+:\d+:\d+\.\d+", line).group(0) for line in reservation_lines
                   if "rename" in line.split("(")[0]]

        def seconds_of(stamp):
            hours, minutes, secs = stamp.split(":")
            return int(hours) * 3600 + int(minutes) * 60 + float(secs)

        intervals = [round(seconds_of(b) - seconds_of(a), 3)
                     for a, b in zip(renames, renames[1:])]
        (results_dir / f"strace-trace-{name}.txt").write_text(
            f"# strace -f -tt -p <backend> during {statements} x '{sql}' "
            f"({statements * n} IDs in {traced:.2f} s).\n"
            "# Every system call of the backend in that time, by name:\n"
            + "".join(f"#   {call}: {count}\n" for call, count in sorted(
                syscalls.items(), key=lambda item: -item[1]))
            + "# Reservation-file lines (temp file, write, fsync, rename, directory fsync):\n"
            + "\n".join(reservation_lines)
            + "\n# First sleeps (pg_usleep = pselect6: snowflake.max_lead reached), if any:\n"
            + "\n".join(sleep_lines[:10]) + "\n")
        found.update({
            "sql": sql,
            "ids": n,
            "trace_statements": statements,
            "trace_ids": statements * n,
            "trace_seconds": traced,
            "trace_syscalls": dict(syscalls),
            "reservation_renames": len(renames),
            "reservation_intervals": intervals,
            "stats_delta": {field: after[field] - before[field] for field in after},
        })
        evidence[key] = found
    return evidence


def evidence_wait_events(cluster, keys, clients, seconds, batch):
    """pg_stat_activity wait events of pgbench sessions, sampled every 10 ms."""
    found = {}
    scripts = cluster.dir / "pgbench"
    with cluster.connect() as conn:
        for key in keys:
            process = subprocess.Popen(
                [str(part) for part in
                 [cluster.bindir / "pgbench", "--no-vacuum", "--host", cluster.dir, "--port",
                  PORT, "--username", "postgres", "--client", clients, "--jobs", clients,
                  "--time", seconds, "--file", scripts / f"{key}.sql", "postgres"]],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.3)
            samples = defaultdict(int)
            while process.poll() is None:
                for (event,) in conn.execute(
                        "SELECT coalesce(wait_event_type || ':' || wait_event, 'no wait event') "
                        "FROM pg_stat_activity WHERE application_name = 'pgbench' "
                        "AND state = 'active'"):
                    samples[event] += 1
                time.sleep(0.01)
            found[key] = dict(samples)
    return {"clients": clients, "seconds": seconds, "samples": found}


PERF_LINE = re.compile(r"^\s+([\d.]+)%\s+(.+?)\s+\[([.k])\]\s+(.*?)\s*$")


def evidence_perf(cluster, results_dir, n, library, reps=5):
    """Where the time goes: `perf record -e cpu-clock` on the backend during reps x n calls."""
    if shutil.which("perf") is None:
        return None
    subprocess.run(["perf", "buildid-cache", "--add", str(library)], capture_output=True)
    found = {}
    with cluster.connect() as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        for key in ("snowflake", "snowflake_wide", "random"):
            sql = count_sql(key, n)
            conn.execute(sql).fetchone()
            time.sleep(0.3)
            data = cluster.dir / f"perf-{key}.data"
            recorder = subprocess.Popen(
                ["perf", "record", "--quiet", "-e", "cpu-clock", "-F", "5000", "-o", str(data),
                 "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
            start = time.perf_counter()
            for _ in range(reps):
                conn.execute(sql).fetchone()
            elapsed = time.perf_counter() - start
            time.sleep(0.1)
            recorder.send_signal(signal.SIGINT)
            recorder.wait(timeout=60)
            report = subprocess.run(
                ["perf", "report", "-i", str(data), "--no-children", "--sort", "dso,sym",
                 "--stdio"], capture_output=True, text=True).stdout
            rows = []
            event_count = re.search(r"Event count \(approx\.\): (\d+)", report)
            for line in report.splitlines():
                match = PERF_LINE.match(line)
                if match:
                    dso = match.group(2).replace(" (deleted)", "")
                    rows.append({"share": float(match.group(1)) / 100, "dso": dso,
                                 "symbol": match.group(4)})
            if not rows:
                return None
            # cpu-clock counts nanoseconds on CPU (sleeps are not sampled).
            ns_per_id = (int(event_count.group(1)) if event_count else elapsed * 1e9) / (reps * n)
            wall_ns_per_id = elapsed * 1e9 / (reps * n)
            by_dso = defaultdict(float)
            for row in rows:
                by_dso[row["dso"]] += row["share"]
            (results_dir / f"perf-{key}.txt").write_text(
                f"# perf record -e cpu-clock -F 5000 -p <backend> during {reps} x '{sql}'\n"
                f"# ({ns_per_id:.0f} ns of CPU and {wall_ns_per_id:.0f} ns of wall time per ID "
                f"while recording); perf report --no-children "
                f"--sort dso,sym, top 60 lines\n"
                + "\n".join(f"{row['share'] * 100:6.2f}%  {row['dso']:<28} {row['symbol']}"
                            for row in rows[:60]) + "\n")
            found[key] = {"ns_per_id": ns_per_id, "wall_ns_per_id": wall_ns_per_id,
                          "top": rows[:25],
                          "by_dso": dict(sorted(by_dso.items(), key=lambda item: -item[1]))}
    return found


def parse_callgrind(path):
    """Self cost, call edges and objects from an uncompressed callgrind output file."""
    self_cost = defaultdict(int)
    edges = defaultdict(lambda: [0, 0])  # (caller, callee) -> [calls, inclusive Ir]
    objects = {}
    total = 0
    obj = fn = cfn = None
    pending = None
    with open(path) as file:
        for line in file:
            if line.startswith("ob="):
                obj = line[3:].strip()
            elif line.startswith("fn="):
                fn = line[3:].strip()
                objects.setdefault(fn, obj)
            elif line.startswith("cob="):
                pass
            elif line.startswith("cfn="):
                cfn = line[4:].strip()
            elif line.startswith("calls="):
                pending = (cfn, int(line[6:].split()[0]))
            elif line[:1].isdigit() or line[:1] in "+-*":
                parts = line.split()
                cost = int(parts[1]) if len(parts) > 1 else 0
                if pending:
                    edge = edges[(fn, pending[0])]
                    edge[0] += pending[1]
                    edge[1] += cost
                    pending = None
                else:
                    self_cost[fn] += cost
            elif line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
    if not total:
        total = sum(self_cost.values())
    return {"self": self_cost, "edges": edges, "objects": objects, "total": total}


def calls_to(profile, function):
    return sum(count for (caller, callee), (count, _) in profile["edges"].items()
               if callee == function and caller != function)


def inclusive(profile, function):
    return profile["self"].get(function, 0) + sum(
        cost for (caller, callee), (_, cost) in profile["edges"].items()
        if caller == function and callee != function)


CALLGRIND_FUNCTIONS = {
    # key: (C function that implements it, IDs per statement under callgrind)
    "random": ("drandom", 100_000),
    "snowflake": ("snowflake_nextval_wrapper", 100_000),
    "snowflake_named": ("snowflake_nextval_wrapper", 100_000),
    "nextval_c1": ("nextval_oid", 100_000),
    "nextval_c100": ("nextval_oid", 100_000),
    "uuid": ("gen_random_uuid", 100_000),
    "instagram": ("plpgsql_call_handler", 20_000),
}


def evidence_callgrind(cluster, results_dir):
    """Instruction counts per ID of each function in a `postgres --single` backend."""
    out_dir = cluster.dir / "callgrind"
    shutil.rmtree(out_dir, ignore_errors=True)
    run(["install", "-d", "-o", "postgres", "-g", "postgres", out_dir])
    order = ["empty"] + list(CALLGRIND_FUNCTIONS)
    lines = [count_sql(key, 1000) for key in order]  # warm-up of every function
    lines.append("SELECT pg_sleep(0)")
    for key in order:
        n = CALLGRIND_FUNCTIONS.get(key, ("", 100_000))[1]
        lines.append(count_sql(key, n))
        lines.append("SELECT pg_sleep(0)")  # --dump-before=pg_sleep: one dump per statement
    script = "\n".join(lines) + "\n"
    started = time.monotonic()
    completed = subprocess.run(
        as_postgres(["valgrind", "--tool=callgrind", "--dump-before=pg_sleep",
                     "--compress-strings=no", "--compress-pos=no", "--dump-instr=no",
                     f"--callgrind-out-file={out_dir}/callgrind.out",
                     cluster.bindir / "postgres", "--single", "-D", cluster.data,
                     "-c", "shared_buffers=64MB", "postgres"]),
        input=script, capture_output=True, text=True, timeout=1200)
    elapsed = time.monotonic() - started
    if completed.returncode != 0:
        raise RuntimeError("callgrind run failed:\n" + completed.stderr[-3000:])
    dumps = sorted(out_dir.glob("callgrind.out.*"), key=lambda path: int(path.name.split(".")[-1]))
    # dump 1: startup + warm-up; dump i+2: the statement of order[i].
    measured = dict(zip(order, dumps[1:1 + len(order)]))
    results = {"seconds": elapsed, "functions": {}}
    empty_profile = parse_callgrind(measured["empty"])
    empty_per_row = empty_profile["total"] / 100_000
    results["empty_loop_ir_per_row"] = empty_per_row
    for key, (function, n) in CALLGRIND_FUNCTIONS.items():
        profile = parse_callgrind(measured[key])
        calls = calls_to(profile, function)
        results["functions"][key] = {
            "function": function,
            "n": n,
            "calls": calls,
            "statement_ir_per_id": profile["total"] / n,
            "function_ir_per_call": inclusive(profile, function) / max(calls, 1),
            "lwlock_acquires_per_id": calls_to(profile, "LWLockAcquire") / n,
        }
        if key == "snowflake":
            results["snowflake_breakdown"] = hot_path_breakdown(profile, n)
            annotate = subprocess.run(
                ["callgrind_annotate", "--inclusive=yes", "--threshold=99.9", measured[key]],
                capture_output=True, text=True).stdout
            (results_dir / "callgrind-snowflake_nextval.txt").write_text(
                f"# callgrind_annotate --inclusive=yes of one postgres --single statement:\n"
                f"# {count_sql(key, n)}\n# (file paths trimmed; Ir = instructions executed)\n"
                + "\n".join(line[:200] for line in annotate.splitlines()[:80]) + "\n")
    return results


def hot_path_breakdown(profile, n):
    """Ir per ID of the functions of snowflake_id.so and of what they call outside it."""
    ours = {fn for fn, obj in profile["objects"].items() if obj and "snowflake_id" in obj}
    rows = []
    for fn in ours:
        cost = profile["self"].get(fn, 0)
        if cost / n >= 0.05:
            rows.append({"function": fn, "where": "snowflake_id.so (self)",
                         "calls_per_id": calls_to(profile, fn) / n, "ir_per_id": cost / n})
    outside = defaultdict(lambda: [0, 0])
    for (caller, callee), (count, cost) in profile["edges"].items():
        if caller in ours and callee not in ours:
            outside[callee][0] += count
            outside[callee][1] += cost
    for fn, (count, cost) in outside.items():
        if cost / n >= 0.05 or fn == "LWLockAcquire":
            obj = profile["objects"].get(fn) or "?"
            rows.append({"function": fn, "where": f"{Path(obj).name} (inclusive)",
                         "calls_per_id": count / n, "ir_per_id": cost / n})
    return sorted(rows, key=lambda row: -row["ir_per_id"])


# --------------------------------------------------------------------------------------------
# Report


def ratio(a, b):
    return a / b if b else float("nan")


def targets(results):
    count = results["count"]["seconds"]
    snow = count["snowflake"]["median"]
    pgb = results["pgbench"]["ids_per_second"]
    ins = results["insert"]["variants"]
    index_ratio = ratio(ins["snowflake"]["index_bytes"]["median"],
                        ins["bigserial"]["index_bytes"]["median"])
    rows = [
        ("snowflake_nextval() vs random(), cost per ID", f"≤ {TARGET_VS_RANDOM}×",
         ratio(snow, count["random"]["median"]), lambda v: v <= TARGET_VS_RANDOM),
        ("snowflake_nextval() vs nextval() CACHE 1, cost per ID",
         f"≤ {TARGET_VS_NEXTVAL_CACHE1}×", ratio(snow, count["nextval_c1"]["median"]),
         lambda v: v <= TARGET_VS_NEXTVAL_CACHE1),
        ("INSERT 1M rows: snowflake vs bigserial, time", f"≤ {TARGET_INSERT_VS_BIGSERIAL}×",
         ratio(ins["snowflake"]["seconds"]["median"], ins["bigserial"]["seconds"]["median"]),
         lambda v: v <= TARGET_INSERT_VS_BIGSERIAL),
        ("INSERT 1M rows: snowflake vs bigserial, primary-key index size", "same size (≤ 1.01×)",
         index_ratio, lambda v: v <= 1.01),
        ("snowflake_nextval(): 2 sessions vs 1 session, IDs/s", f"≥ {TARGET_TWO_SESSIONS}×",
         ratio(pgb["snowflake/2"]["median"], pgb["snowflake/1"]["median"]),
         lambda v: v >= TARGET_TWO_SESSIONS),
    ]
    return [{"what": what, "target": target, "measured": value, "met": bool(check(value))}
            for what, target, value, check in rows]


def fmt_range(s, scale, digits):
    return (f"{s['median'] * scale:.{digits}f}",
            f"{s['min'] * scale:.{digits}f}–{s['max'] * scale:.{digits}f}")


def write_markdown(results, path):
    info = results["machine"]
    count = results["count"]
    n = count["n"]
    out = []
    w = out.append
    w("# snowflake_id benchmarks — latest run\n")
    w("Written by `bash bench/run.sh` (as root on Debian 12; see bench/README.md). "
      "All numbers come from one run, in which the benchmarks alternate between the compared "
      "functions in every repetition. Benchmarks are not tests: nothing fails on a timing.\n")
    w(f"- Date: {results['started']} (UTC); runner wall time {results['runtime_seconds']:.0f} s")
    w(f"- Machine: {info['cpu']}, {info['cpus']} CPUs, {info['memory_gb']} GB RAM, Linux "
      f"{info['kernel']}, clocksource `{info['clocksource']}`")
    w(f"- PostgreSQL {results['server_version']}; snowflake_id at commit {info['commit']}, "
      f"release build (`cargo pgrx install --release`), library sha256 "
      f"`{results['library_sha256'][:16]}…` (checked against the postmaster's mapping)")
    w("- Cluster: throwaway, Unix socket only; shared_buffers 512MB, work_mem 256MB "
      "(generate_series stays in memory), jit off, autovacuum off, max_wal_size 8GB, "
      "fsync and synchronous_commit on (defaults)")
    phases = results.get("foreign_cpu")
    if phases:
        parts = []
        for name, phase in phases.items():
            top = ", ".join(f"{p['comm']} {p['seconds']} s" for p in phase["top"])
            share = phase["seconds"] / max(phase["elapsed"], 1e-9)
            parts.append(f"{name} {phase['seconds']} s in {phase['elapsed']:.0f} s"
                         + (f" ({top})" if top else "")
                         + (" — **disturbed**" if share > 0.05 else ""))
        w("- CPU used by anything but this run while it measured (growth of the CPU time of "
          "every other process, including the children each reaped), per phase: "
          + "; ".join(parts))
    for label, state in (("start", results["machine_before"]), ("end", results["machine_after"])):
        busy = ", ".join(f"{p['comm']} ({p['cpu']:.0%})" for p in state["busy_processes"])
        own = " (includes this run's own load)" if label == "end" else ""
        w(f"- Load at {label}{own}: {' / '.join(str(v) for v in state['loadavg'])} (1/5/15 min); "
          f"other busy processes: {busy or 'none'}; other PostgreSQL clusters running: "
          f"{len(state['other_postmasters'])}"
          + ("" if label == "end" or state.get("quiet") else " — **machine was not quiet**"))
    w("")

    w("## Targets (issue #6; ratios of medians in this run)\n")
    w("| target | wanted | measured | met |")
    w("|---|---|---|---|")
    for row in results["targets"]:
        w(f"| {row['what']} | {row['target']} | {row['measured']:.2f}× | "
          f"{'yes' if row['met'] else '**no**'} |")
    w("")

    cap = 4096 * 1000
    burst_floor_ms = n / 4096 - 100
    w("What bounds `snowflake_nextval()` besides CPU: the classic layout gives a session 4,096 "
      f"IDs per 1 ms tick, i.e. at most {cap / 1e6:.3f} M IDs/s per session sustained "
      f"({1e9 / cap:.0f} ns/ID); past `snowflake.max_lead` (100 ms) of borrowed ticks the "
      f"session sleeps. So {n:,} IDs in one statement cannot take less than "
      f"{max(burst_floor_ms, 0):.0f} ms ({max(burst_floor_ms, 0) * 1e6 / n:.0f} ns/ID) whatever "
      "the code costs, and one pgbench session is capped near "
      f"{cap / 1e6:.1f} M IDs/s. The `'wide'` sequence (16 sequence bits) runs the same code "
      "without that cap.\n")
    random_ns = count["seconds"]["random"]["median"] * 1e9 / n
    nextval_ns = count["seconds"]["nextval_c1"]["median"] * 1e9 / n
    empty_ns = count["seconds"]["empty"]["median"] * 1e9 / n
    budget1 = TARGET_VS_RANDOM * random_ns
    budget2 = TARGET_VS_NEXTVAL_CACHE1 * nextval_ns
    text = (f"Budgets: target 1 allows {budget1:.0f} ns/ID gross, {budget1 - empty_ns:.0f} ns "
            f"above the bare loop; target 2 allows {budget2:.0f} ns/ID, "
            f"{budget2 - empty_ns:.0f} ns above the loop.")
    perf = results.get("evidence", {}).get("perf") or {}
    if "snowflake_wide" in perf and "random" in perf:
        wide = perf["snowflake_wide"]
        added = wide["ns_per_id"] - perf["random"]["ns_per_id"]
        vdso = wide["by_dso"].get("[vdso]", 0) * wide["ns_per_id"]
        lib = wide["by_dso"].get("snowflake_id.so", 0) * wide["ns_per_id"]
        cg = (results.get("evidence", {}).get("callgrind") or {}).get("snowflake_breakdown", [])
        reads = sum(row["calls_per_id"] for row in cg
                    if row["function"].startswith("clock_gettime"))
        reads_text = f" ({reads:.2f} clock_gettime calls per ID, callgrind)" if reads else ""
        text += (f" The CPU that snowflake_nextval() adds over random() is {added:.0f} ns/ID "
                 f"(perf, 'wide' sequence, never throttled): {vdso:.0f} ns in vDSO clock "
                 f"reads{reads_text}, {lib:.0f} ns in snowflake_id.so, the rest in libc and "
                 "the dynamic loader (memcmp, TLS look-ups, sigsetjmp).")
    w(text + "\n")
    w(f"## Cost per ID: `SELECT count(f()) FROM generate_series(1, {n:,})`\n")
    w(f"{count['reps']} alternating repetitions in one session (after a warm-up run of each). "
      "ns/ID = statement time / N, so it includes the loop (first row); "
      "'net' subtracts the loop's median.\n")
    w("| function | ns/ID median | min–max | net ns/ID | × random() | × snowflake_nextval() |")
    w("|---|---|---|---|---|---|")
    empty = count["seconds"]["empty"]["median"]
    for key, label, _ in FUNCTIONS:
        s = count["seconds"][key]
        med, rng = fmt_range(s, 1e9 / n, 0)
        net = (s["median"] - empty) * 1e9 / n
        w(f"| {label} | {med} | {rng} | {net:.0f} | "
          f"{ratio(s['median'], count['seconds']['random']['median']):.2f} | "
          f"{ratio(s['median'], count['seconds']['snowflake']['median']):.2f} |")
    w("")
    for key in ("snowflake", "snowflake_named"):
        runs = count["snowflake_stats_per_run"].get(key, [])
        if runs:
            borrowed = [r["borrowed_ticks"] for r in runs]
            sleeps = [r["throttle_sleeps"] for r in runs]
            w(f"- `{LABEL[key]}` runs, from `snowflake_stats()`: borrowed ticks per run "
              f"{min(borrowed)}–{max(borrowed)}, throttle sleeps per run "
              f"{min(sleeps)}–{max(sleeps)}.")
    w("")

    pgb = results["pgbench"]
    w(f"## Concurrent sessions (pgbench, {pgb['seconds']} s per run, "
      f"{pgb['reps']} alternating repetitions)\n")
    w(f"Each transaction is `SELECT count(f()) FROM generate_series(1, {pgb['batch']:,})`; "
      "IDs/s = tps × batch, over all sessions. Medians (min–max) in millions of IDs per "
      "second.\n")
    header = " | ".join(f"{c} session{'s' if c > 1 else ''}" for c in pgb["clients"])
    w(f"| function | {header} | 2 vs 1 | 4 vs 1 |")
    w("|---" * (len(pgb["clients"]) + 3) + "|")
    for key in ID_FUNCTIONS:
        cells = []
        for clients in pgb["clients"]:
            med, rng = fmt_range(pgb["ids_per_second"][f"{key}/{clients}"], 1e-6, 2)
            cells.append(f"{med} ({rng})")
        one = pgb["ids_per_second"][f"{key}/1"]["median"]
        w(f"| {LABEL[key]} | {' | '.join(cells)} | "
          f"{ratio(pgb['ids_per_second'][f'{key}/2']['median'], one):.2f}× | "
          f"{ratio(pgb['ids_per_second'][f'{key}/4']['median'], one):.2f}× |")
    w("")
    for key in ID_FUNCTIONS:
        if not key.startswith("snowflake"):
            continue
        parts = []
        for clients in pgb["clients"]:
            runs = pgb.get("snowflake_stats_per_run", {}).get(f"{key}/{clients}", [])
            if runs:
                sleeps = [r["throttle_sleeps"] for r in runs]
                parts.append(f"{clients} session{'s' if clients > 1 else ''} "
                             f"{min(sleeps)}–{max(sleeps)}")
        if parts:
            w(f"- `{LABEL[key]}`: throttle sleeps per run (snowflake_stats()): "
              + ", ".join(parts) + ".")
    w("")

    ins = results["insert"]
    w(f"## INSERT of {ins['rows']:,} rows through the column default "
      f"({ins['reps']} alternating repetitions)\n")
    w("`INSERT INTO t (payload) SELECT g FROM generate_series(1, N) g` into a fresh table "
      "`(id <type> PRIMARY KEY DEFAULT ..., payload integer)` after a CHECKPOINT; one "
      "autocommit statement. Sizes after the insert (pg_relation_size).\n")
    w("| id column | time s median | min–max | × bigserial | table MB | PK index MB | WAL MB |")
    w("|---|---|---|---|---|---|---|")
    for key, label, _ in INSERT_VARIANTS:
        v = ins["variants"][key]
        med, rng = fmt_range(v["seconds"], 1, 2)
        w(f"| {label} | {med} | {rng} | "
          f"{ratio(v['seconds']['median'], ins['variants']['bigserial']['seconds']['median']):.2f}"
          f" | {v['heap_bytes']['median'] / 2**20:.1f} | {v['index_bytes']['median'] / 2**20:.1f}"
          f" | {v['wal_bytes']['median'] / 2**20:.0f} |")
    w("")

    lh = results["last_hour"]
    w(f"## \"Last hour\" query ({lh['rows']:,} events over 30 days)\n")
    w("`events (id bigint PRIMARY KEY, created_at timestamptz, payload integer)` plus an index "
      "on created_at; each id is what snowflake_nextval() makes at created_at "
      f"(checked: {lh['ids_not_matching_created_at']} ids whose snowflake_timestamp differs). "
      f"Latency = median of {lh['queries_per_rep']} executions per repetition, "
      f"{lh['reps']} alternating repetitions.\n")
    w("| predicate | rows | latency µs median | min–max | index it needs |")
    w("|---|---|---|---|---|")
    index_size = {"snowflake_pk": f"primary key, {lh['pkey_bytes'] / 2**20:.1f} MB (exists anyway)",
                  "created_at": f"extra index, {lh['created_at_index_bytes'] / 2**20:.1f} MB"}
    for key, label, _ in LAST_HOUR_QUERIES:
        med, rng = fmt_range(lh["latency_seconds"][key], 1e6, 0)
        w(f"| `{label}` | {lh['rows_found'][key]} | {med} | {rng} | {index_size[key]} |")
    w("")
    for key, label, sql in LAST_HOUR_QUERIES:
        w(f"<details><summary>plan: {label}</summary>\n\n```\n{sql}\n\n{lh['plans'][key]}\n```\n"
          "</details>\n")

    ev = results["evidence"]
    w("## Evidence: the hot path\n")
    cg = ev.get("callgrind")
    if cg:
        w("### Instructions per ID (callgrind, `postgres --single` with the extension "
          "preloaded)\n")
        w("Each statement `SELECT count(f()) FROM generate_series(1, N)` ran once under "
          "`valgrind --tool=callgrind` after a warm-up, one dump per statement. 'in function' "
          "is the inclusive count of the C function behind f() per call; 'statement' is the "
          f"whole statement per ID (the loop alone: {cg['empty_loop_ir_per_row']:.0f} per row). "
          "LWLockAcquire calls per ID count every lightweight lock taken in the statement.\n")
        w("| function | C function | N | Ir in function per call | Ir per ID, statement | "
          "LWLockAcquire per ID |")
        w("|---|---|---|---|---|---|")
        for key, row in cg["functions"].items():
            w(f"| {LABEL[key]} | `{row['function']}` | {row['n']:,} | "
              f"{row['function_ir_per_call']:.0f} | {row['statement_ir_per_id']:.0f} | "
              f"{row['lwlock_acquires_per_id']:.5f} |")
        w("")
        w("Breakdown of `snowflake_nextval()` per ID: self cost of every function of "
          "snowflake_id.so, and inclusive cost of each function outside it that those call "
          "(callgrind-snowflake_nextval.txt has the annotated profile).\n")
        w("| function | where | calls per ID | Ir per ID |")
        w("|---|---|---|---|")
        for row in cg["snowflake_breakdown"][:25]:
            name = row["function"]
            if len(name) > 90:
                name = name[:87] + "..."
            w(f"| `{name}` | {row['where']} | {row['calls_per_id']:.3f} | "
              f"{row['ir_per_id']:.1f} |")
        w("")
    perf = ev.get("perf")
    if perf:
        w("### Where the time goes (perf record -e cpu-clock on the backend)\n")
        w(f"5 × `{count_sql('snowflake', n)}`, the same with 'wide' and with random(), sampled "
          "at 5 kHz (perf-*.txt have the top symbols). Share of the backend's CPU time by "
          "object, and the ns of CPU per ID it stands for (cpu-clock does not count sleeps; "
          "wall time per ID: " + ", ".join(
              f"{LABEL[key].split(':')[0]} {perf[key]['wall_ns_per_id']:.0f} ns"
              for key in ("snowflake", "snowflake_wide", "random") if key in perf) + "):\n")
        keys = [key for key in ("snowflake", "snowflake_wide", "random") if key in perf]
        dsos = []
        for key in keys:
            for dso in perf[key]["by_dso"]:
                if dso not in dsos:
                    dsos.append(dso)
        w("| object | " + " | ".join(LABEL[key].split(":")[0] for key in keys) + " |")
        w("|---" * (len(keys) + 1) + "|")
        for dso in dsos:
            cells = []
            for key in keys:
                share = perf[key]["by_dso"].get(dso, 0.0)
                cells.append(f"{share:.1%} ({share * perf[key]['ns_per_id']:.0f} ns)")
            w(f"| {dso} | " + " | ".join(cells) + " |")
        w("| **all (CPU)** | " + " | ".join(f"100% ({perf[key]['ns_per_id']:.0f} ns)"
                                     for key in keys) + " |")
        w("")
        w("Top symbols of `snowflake_nextval()` (share of CPU time, ns per ID):\n")
        w("| share | ns/ID | object | symbol |")
        w("|---|---|---|---|")
        for row in perf["snowflake"]["top"][:15]:
            w(f"| {row['share']:.1%} | {row['share'] * perf['snowflake']['ns_per_id']:.1f} | "
              f"{row['dso']} | `{row['symbol'][:80]}` |")
        w("")
    w("### System calls (strace)\n")
    w("Per sequence, in a warm session: `strace -c -f -p <backend pid>` during one statement, "
      "then `strace -f -tt` over a few seconds of back-to-back statements "
      "(strace-count-*.txt, strace-trace-*.txt). pselect6 is `pg_usleep`: a throttle sleep "
      "after `snowflake.max_lead` of borrowed ticks; brk, recvfrom/sendto and epoll_wait are "
      "the executor's memory for generate_series and the client protocol, once per statement.\n")
    for key, st in (ev.get("strace") or {}).items():
        w(f"**`{st['sql']}`** ({LABEL[key]}): {st['seconds_under_strace'] * 1e3:.0f} ms under "
          f"strace, {st['seconds_without_strace'] * 1e3:.0f} ms without.\n")
        w("```\n" + st["count_summary"].strip() + "\n```\n")
        delta = st["stats_delta"]
        w(f"Full trace over {st['trace_seconds']:.1f} s: {st['trace_statements']} statements, "
          f"{st['trace_ids']:,} IDs "
          f"({st['trace_ids'] / st['trace_seconds'] / 1e6:.2f} M IDs/s), "
          f"{sum(st['trace_syscalls'].values())} system calls: "
          + ", ".join(f"{call} {count}" for call, count in sorted(
              st["trace_syscalls"].items(), key=lambda item: -item[1]))
          + f". Reservation file replaced {st['reservation_renames']} times, at intervals of "
          f"{', '.join(f'{v:.2f}' for v in st['reservation_intervals']) or '–'} s. "
          f"snowflake_stats() over the whole test: {delta['throttle_sleeps']} throttle sleeps, "
          f"{delta['borrowed_ticks']} borrowed ticks, {delta['reservation_writes']} "
          "reservation writes.\n")
    if ev.get("strace"):
        clock_calls = sum(st["trace_syscalls"].get("clock_gettime", 0)
                          for st in ev["strace"].values())
        if clock_calls == 0:
            w("No clock_gettime system call appears anywhere: the clocks are read through the "
              f"vDSO (clocksource `{info['clocksource']}`), without entering the kernel.\n")
        else:
            w(f"**{clock_calls} clock_gettime system calls** appear: this machine's clocksource "
              f"(`{info['clocksource']}`) has no vDSO fast path, so every clock read enters the "
              "kernel.\n")
    we = ev.get("wait_events") or {"clients": 4, "seconds": 3, "samples": {}}
    w(f"### Wait events (pg_stat_activity sampled every 10 ms, pgbench "
      f"{we['clients']} sessions, {we['seconds']} s)\n")
    w("'no wait event' means running on CPU, or sleeping in pg_usleep (the throttle sleep "
      "reports no wait event).\n")
    w("| function | samples by wait event of the active pgbench sessions |")
    w("|---|---|")
    for key, samples in we["samples"].items():
        w(f"| {LABEL[key]} | " + ", ".join(
            f"{event}: {count}" for event, count in sorted(samples.items(),
                                                          key=lambda item: -item[1])) + " |")
    w("")
    for name, error in (ev.get("errors") or {}).items():
        w(f"- Evidence `{name}` could not be collected on this machine: `{error[-300:]}`")
    final = results.get("final_stats")
    if final:
        w("### Counters at the end of the benchmarks (`snowflake_stats()`)\n")
        w(", ".join(f"{name} = {value}" for name, value in final.items()) + "\n")
    w("![chart](latest.png)\n")
    path.write_text("\n".join(out))


def write_chart(results, path):
    fig, axes = plt.subplots(2, 2, figsize=(15, 10))
    count = results["count"]
    n = count["n"]

    def bars(ax, labels, stats, scale, title, xlabel, colors=None):
        med = [s["median"] * scale for s in stats]
        low = [(s["median"] - s["min"]) * scale for s in stats]
        high = [(s["max"] - s["median"]) * scale for s in stats]
        positions = range(len(labels))
        ax.barh(positions, med, xerr=[low, high], capsize=3,
                color=colors or ["#4c72b0"] * len(labels))
        ax.set_yticks(list(positions), labels)
        ax.invert_yaxis()
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        for y, value, stat in zip(positions, med, stats):
            ax.text(stat["max"] * scale, y, f"  {value:,.0f}", va="center", fontsize=8)

    keys = [key for key, _, _ in FUNCTIONS]
    colors = ["#999999" if key == "empty" else "#dd8452" if key.startswith("snowflake")
              else "#4c72b0" for key in keys]
    bars(axes[0][0], [SHORT[k] for k in keys], [count["seconds"][k] for k in keys], 1e9 / n,
         f"Cost per ID: count(f()) over {n:,} rows (median, min–max)", "ns per ID (log)",
         colors)
    ax = axes[0][0]
    ax.set_xscale("log")
    target_random = TARGET_VS_RANDOM * count["seconds"]["random"]["median"] * 1e9 / n
    target_nextval = TARGET_VS_NEXTVAL_CACHE1 * count["seconds"]["nextval_c1"]["median"] * 1e9 / n
    ax.axvline(target_random, color="#c44e52", linestyle="--", linewidth=1,
               label=f"target {TARGET_VS_RANDOM}× random(): {target_random:.0f} ns")
    ax.axvline(target_nextval, color="#8172b2", linestyle=":", linewidth=1.5,
               label=f"target {TARGET_VS_NEXTVAL_CACHE1}× nextval() CACHE 1: "
                     f"{target_nextval:.0f} ns")
    ax.legend(loc="upper right", fontsize=8)

    pgb = results["pgbench"]
    ax = axes[0][1]
    width = 0.8 / len(pgb["clients"])
    for i, clients in enumerate(pgb["clients"]):
        stats = [pgb["ids_per_second"][f"{key}/{clients}"] for key in ID_FUNCTIONS]
        med = [s["median"] / 1e6 for s in stats]
        err = [[(s["median"] - s["min"]) / 1e6 for s in stats],
               [(s["max"] - s["median"]) / 1e6 for s in stats]]
        ax.bar([x + i * width for x in range(len(ID_FUNCTIONS))], med, width, yerr=err,
               capsize=2, label=f"{clients} session{'s' if clients > 1 else ''}")
    ax.set_xticks([x + width for x in range(len(ID_FUNCTIONS))],
                  [SHORT[k] for k in ID_FUNCTIONS], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("million IDs per second (all sessions)")
    ax.set_title("Concurrent sessions (pgbench)")
    ax.legend()

    ins = results["insert"]
    ax = axes[1][0]
    variants = [key for key, _, _ in INSERT_VARIANTS]
    stats = [ins["variants"][key]["seconds"] for key in variants]
    ax.bar(variants, [s["median"] for s in stats],
           yerr=[[s["median"] - s["min"] for s in stats], [s["max"] - s["median"] for s in stats]],
           capsize=3, color=["#dd8452", "#4c72b0", "#55a868"])
    ax.set_ylabel("seconds (median, min–max)")
    ax.set_title(f"INSERT {ins['rows']:,} rows via column default; labels: table / index MB")
    for x, key in enumerate(variants):
        v = ins["variants"][key]
        ax.text(x, v["seconds"]["median"] / 2,
                f"{v['heap_bytes']['median'] / 2**20:.0f} / "
                f"{v['index_bytes']['median'] / 2**20:.0f} MB", ha="center", color="white",
                fontweight="bold")

    lh = results["last_hour"]
    keys = [key for key, _, _ in LAST_HOUR_QUERIES]
    bars(axes[1][1], [f"id >= snowflake_min_id(...)\nprimary key "
                      f"({lh['pkey_bytes'] / 2**20:.0f} MB)",
                      f"created_at >= ...\nextra index "
                      f"({lh['created_at_index_bytes'] / 2**20:.0f} MB)"],
         [lh["latency_seconds"][k] for k in keys], 1e6,
         f"'Last hour' query over {lh['rows']:,} events", "µs per query (median, min–max)",
         ["#dd8452", "#4c72b0"])
    fig.suptitle(f"snowflake_id benchmarks — {results['started']} — "
                 f"{results['machine']['cpus']} CPUs, load at start "
                 f"{results['machine_before']['loadavg'][0]}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------------------------


def ensure_release_library(cluster, library, pg_config):
    """Starts the cluster on exactly target/release's library (another `cargo pgrx install`
    may have replaced the installed one); reinstalls it up to twice."""
    wanted = sha256(library)
    for attempt in range(3):
        cluster.start()
        mapped = cluster.mapped_library_sha256()
        if mapped == wanted:
            return wanted
        log(f"the postmaster mapped another snowflake_id.so ({str(mapped)[:12]}), "
            "reinstalling the release build")
        cluster.stop()
        run(["cargo", "pgrx", "install", "--release", "--pg-config", pg_config], cwd=ROOT,
            stdout=subprocess.DEVNULL)
        wanted = sha256(library)
    raise RuntimeError("could not start the cluster on the release build of snowflake_id")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bindir", required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--library", required=True)
    parser.add_argument("--results", required=True)
    env = os.environ.get
    parser.add_argument("--n", type=int, default=int(env("BENCH_N", 1_000_000)))
    parser.add_argument("--reps", type=int, default=int(env("BENCH_REPS", 5)))
    parser.add_argument("--pgbench-reps", type=int, default=int(env("BENCH_PGBENCH_REPS", 3)))
    parser.add_argument("--pgbench-seconds", type=int,
                        default=int(env("BENCH_PGBENCH_SECONDS", 3)))
    parser.add_argument("--insert-rows", type=int,
                        default=int(env("BENCH_INSERT_ROWS", 1_000_000)))
    parser.add_argument("--wait-quiet", type=int, default=int(env("BENCH_WAIT_QUIET", 60)))
    parser.add_argument("--skip-callgrind", action="store_true")
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite latest.md and latest.png from latest.json, run nothing")
    args = parser.parse_args()
    if args.report_only:
        results_dir = Path(args.results).resolve()
        results = json.loads((results_dir / "latest.json").read_text())
        results["targets"] = targets(results)
        write_chart(results, results_dir / "latest.png")
        write_markdown(results, results_dir / "latest.md")
        return

    results_dir = Path(args.results).resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    library = (ROOT / args.library).resolve()
    cluster = Cluster(args.bindir, args.dir)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    begun = time.monotonic()
    results = {"started": datetime.datetime.now(datetime.timezone.utc)
               .strftime("%Y-%m-%d %H:%M"), "machine": machine_info()}
    try:
        log("creating the cluster")
        cluster.create()
        results["library_sha256"] = ensure_release_library(
            cluster, library, Path(args.bindir) / "pg_config")
        results["server_version"] = setup_database(cluster)
        log(f"waiting up to {args.wait_quiet} s for a quiet machine")
        results["machine_before"] = wait_for_quiet(args.wait_quiet, cluster.data)
        watch = ForeignCpu(cluster)
        results["foreign_cpu"] = watch.phases
        log(f"load {results['machine_before']['loadavg']}; cost per ID "
            f"(N = {args.n:,}, {args.reps} repetitions)")
        results["count"] = watch.measure(
            "cost per ID", lambda: bench_count(cluster, args.n, args.reps))
        log("concurrent sessions (pgbench)")
        results["pgbench"] = watch.measure("pgbench", lambda: bench_pgbench(
            cluster, 10_000, args.pgbench_seconds, args.pgbench_reps, [1, 2, 4]))
        log(f"INSERT of {args.insert_rows:,} rows")
        results["insert"] = watch.measure(
            "INSERT", lambda: bench_insert(cluster, args.insert_rows, args.reps))
        log("'last hour' query")
        results["last_hour"] = watch.measure(
            "last hour", lambda: bench_last_hour(cluster, 1_000_000, args.reps, 200))
        results["machine_after"] = machine_state(cluster.data)
        with cluster.connect() as conn:
            cursor = conn.execute("SELECT * FROM snowflake_stats()")
            names = [column.name for column in cursor.description]
            results["final_stats"] = dict(zip(names, (str(v) for v in cursor.fetchone())))
        evidence = results["evidence"] = {}

        def attempt(name, collect):
            # Evidence needs ptrace, perf events and valgrind; a machine without one of them
            # still gets the benchmark results, and the report says what is missing.
            log(f"evidence: {name}")
            try:
                evidence[name] = collect()
            except Exception as error:  # noqa: BLE001
                log(f"evidence: {name} failed: {error}")
                evidence[name] = None
                evidence.setdefault("errors", {})[name] = str(error)[-2000:]

        attempt("strace", lambda: evidence_strace(cluster, results_dir, args.n))
        attempt("perf", lambda: evidence_perf(cluster, results_dir, args.n, library))
        attempt("wait_events", lambda: evidence_wait_events(
            cluster, ["snowflake", "snowflake_wide", "nextval_c1", "instagram"], 4, 3, 10_000))
        cluster.stop()
        if not args.skip_callgrind:
            attempt("callgrind", lambda: evidence_callgrind(cluster, results_dir))
    finally:
        cluster.stop()
    results["runtime_seconds"] = time.monotonic() - begun
    results["targets"] = targets(results)
    (results_dir / "latest.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    write_chart(results, results_dir / "latest.png")
    write_markdown(results, results_dir / "latest.md")
    print()
    for row in results["targets"]:
        print(f"    {'met    ' if row['met'] else 'NOT met'}  {row['what']}: "
              f"{row['measured']:.2f}× (wanted {row['target']})")
    print(f"\n    results: {results_dir}/latest.md, latest.png")


if __name__ == "__main__":
    main()
