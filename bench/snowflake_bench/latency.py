"""INSERT latency as users feel it, at every rate (issue 64): pgbench with 1 and 8 sessions at
0.2 to 1,000 transactions per second in all (`--rate`) and unthrottled, each transaction one
prepared single-row `INSERT … RETURNING id` into a table keyed by `bigserial`,
`snowflake_nextval()`, `gen_random_uuid()` and, on 18, `uuidv7()`: the keys' scripts mixed in one
pgbench run with equal weights, so the machine's noise hits them alike, the log's script number
splitting the latencies per key; `synchronous_commit` on and off. Around each run
`snowflake_stats()` gives the reservation's renewals, all and the worker's: the others were made
inside a session's statement (a WAL flush and two fsyncs each), which costs an INSERT latency.
Then quiet spells: each key's first INSERT after some seconds without any INSERT, timed from
the client, which is what an application that inserts now and then sees (the rate runs' few
samples at low rates cannot tell it). Then an idle phase without any ID counts the renewals of
an idle server."""

import math
import os
import subprocess
import time
from collections import defaultdict

from . import log
from .benchmarks import (INSERT_VARIANTS, available, figures, pgbench_tps, rotated,
                         stats_delta)
from .cluster import PORT
from .databases import wal_flushes
from .machine import ForeignCpu, machine_info, machine_state, wait_for_quiet
from .tick_cost import series_seconds, tick_cost_lines, tick_costs

# The keys in the order of the report and of the pgbench scripts (script number = index).
# "control" is a second bigserial table: its ratio to bigserial is what the machine's noise alone
# makes of a ratio in the same run, the yardstick for snowflake's.
KEYS = ["bigserial", "control", "snowflake", "uuid", "uuidv7"]
COLUMNS = {key: column for key, _, column in INSERT_VARIANTS if key in KEYS}
COLUMNS["control"] = COLUMNS["bigserial"]
LABELS = {"bigserial": "bigserial", "control": "bigserial (control)",
          "snowflake": "snowflake_nextval()", "uuid": "gen_random_uuid()", "uuidv7": "uuidv7()"}
# BENCH_LATENCY_RATES: transactions per second in all; "max" is a run without --rate.
RATES = "0.2 1 10 100 1000 max"
CLIENTS = "1 8"
SYNC = "on off"
# snowflake's p50 and p99 at most this many times bigserial's, in every run (issue 64).
TARGET_RATIO = 1.1
# A nearest-rank p99 of this many samples or fewer is the largest sample.
FEW_SAMPLES = 100
# Rows inserted into each table before each run, outside it (after its TRUNCATE).
WARMUP_ROWS = 5
# Before each run, the wait for the reservation worker to finish with the warm-up's IDs: no
# renewal for snowflake_id.reserve_ahead plus this margin, or twice that at most (a worker that
# renews while idle never goes quiet).
SETTLE_MARGIN = 0.5
# What preparing a run takes besides its pgbench (TRUNCATE, CHECKPOINT, warm-up rows, the wait
# for the reservation to go quiet, reading the log), for the estimate of the whole mode.
RUN_OVERHEAD_SECONDS = 3.5
# A run whose mean schedule lag exceeds this did not keep its rate: its latencies include the
# wait for a server that fell behind the schedule.
RATE_KEPT_LAG_MS = 100
MET = {True: "yes", False: "no", None: "— (no samples)"}
COUNTERS = ("reservation_writes", "reservation_worker_writes", "reservation_write_failures",
            "ids_issued")


def parse_rates(text):
    """`0.2 1 max` (spaces or commas) → [0.2, 1.0, None]; None runs without --rate."""
    rates = []
    for word in text.replace(",", " ").split():
        if word in ("max", "unthrottled"):
            rates.append(None)
        elif float(word) > 0:
            rates.append(float(word))
        else:
            raise ValueError(f"a rate must be positive or 'max': {word}")
    return rates


def parse_clients(text):
    return [int(word) for word in text.replace(",", " ").split()]


def parse_sync(text):
    settings = text.replace(",", " ").split()
    if not set(settings) <= {"on", "off"}:
        raise ValueError(f"synchronous_commit settings are 'on' and 'off': {text}")
    return settings


def rate_label(rate):
    return "max" if rate is None else f"{rate:,g}"


def jobs_for(clients, cpus):
    """pgbench threads: one per client, at most one per CPU."""
    return max(1, min(clients, cpus or 1))


def run_seconds(rate, keys, clients, seconds, samples, max_seconds):
    """How long a run lasts: `seconds`, or, at a rate too low for that, long enough for
    `samples` transactions per key besides each session's first (a warm-up, left out), at most
    `max_seconds`."""
    if rate is None:
        return seconds
    needed = math.ceil((samples * keys + clients) / rate)
    return min(max(seconds, needed), max(max_seconds, seconds))


def planned_runs(sync, clients, rates):
    return [(setting, count, rate) for setting in sync for count in clients for rate in rates]


def planned_seconds(settings, keys):
    """Seconds of pgbench runs, quiet spells, the tick series' pauses and the idle phase that
    `settings` make (the preparation of each run, the setup, the series' statements and the
    wait for a quiet machine not counted)."""
    spells = settings["spells"] * settings["spell_seconds"] * len(settings["sync"])
    ticks = series_seconds(settings["tick_pauses"], settings["tick_calls"])
    return settings["idle_seconds"] + spells + ticks + sum(
        run_seconds(rate, keys, count, settings["seconds"], settings["samples"],
                    settings["max_seconds"])
        for _, count, rate in planned_runs(settings["sync"], settings["clients"],
                                           settings["rates"]))


def table(key):
    return f"latency_{key}"


def script_text(key, keys):
    """The pgbench script of `key`: its INSERT; in a session's first transaction (`warm` is
    0, from --define) instead one row into every table, which warms the session (its first ID,
    the tables' relation cache entries) and which the figures leave out."""
    warm = "".join(f"INSERT INTO {table(other)} (payload) VALUES (1) RETURNING id;\n"
                   for other in keys)
    return (f"\\if :warm\nINSERT INTO {table(key)} (payload) VALUES (1) RETURNING id;\n"
            f"\\else\n{warm}\\set warm 1\n\\endif\n")


def pgbench_command(cluster, clients, jobs, seconds, scripts, rate, log_prefix):
    """pgbench running `scripts` with equal weights, prepared, every transaction logged."""
    command = [cluster.bindir / "pgbench", "--no-vacuum", "--host", cluster.dir, "--port", PORT,
               "--username", "postgres", "--client", clients, "--jobs", jobs, "--time", seconds,
               "--protocol=prepared", "--define=warm=0", "--log", f"--log-prefix={log_prefix}"]
    if rate is not None:
        command.append(f"--rate={rate:g}")
    command += [f"--file={script}@1" for script in scripts]
    return [str(part) for part in command + ["postgres"]]


def parse_log(text):
    """(client, transaction number, latency µs, script number, schedule lag µs or None) of each
    line of a pgbench --log file: `client_id transaction_no time script_no time_epoch time_us
    [schedule_lag]`, the lag only with --rate; lines of failed or skipped transactions left
    out."""
    records = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[2].isdigit():
            lag = int(fields[6]) if len(fields) > 6 else None
            records.append((int(fields[0]), int(fields[1]), int(fields[2]), int(fields[3]), lag))
    return records


def split_by_key(records, keys):
    """({key: [latency µs]}, [schedule lag µs], warm-ups left out): each session's first
    transaction is its warm-up (script_text) and is left out. With --rate pgbench counts a
    transaction's time from its scheduled start, so it holds the client's own lag in starting
    it (its wake-up, a slot taken by the session's transaction before): the latency kept is net
    of that lag, the statement's time as the server and the connection make it."""
    first = {}
    for client, number, _, _, _ in records:
        first[client] = min(number, first.get(client, number))
    latencies = {key: [] for key in keys}
    lags = []
    for client, number, latency, script, lag in records:
        if number == first[client]:
            continue
        latencies[keys[script]].append(latency - (lag or 0))
        if lag is not None:
            lags.append(lag)
    return latencies, lags, len(first)


def rate_kept(rate, lag_mean_ms):
    """None without --rate; else whether the server kept up with the schedule."""
    if rate is None or lag_mean_ms is None:
        return None
    return lag_mean_ms <= RATE_KEPT_LAG_MS


def renewals(counters_delta, seconds):
    """Renewals per minute of a run or of the idle phase, all and those made inside a
    session's statement (all but the reservation worker's)."""
    writes = counters_delta["reservation_writes"]
    in_statements = writes - counters_delta["reservation_worker_writes"]
    return {"per_minute": writes * 60 / seconds, "in_statements": in_statements,
            "in_statements_per_minute": in_statements * 60 / seconds}


def counters(conn):
    row = conn.execute(f"SELECT {', '.join(COUNTERS)} FROM snowflake_stats()").fetchone()
    return dict(zip(COUNTERS, (int(value) for value in row)))


def setup(cluster):
    """The extension and one table per key (uuidv7 from PostgreSQL 18 on)."""
    with cluster.connect() as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS snowflake_id")
        major = int(conn.execute("SHOW server_version_num").fetchone()[0]) // 10000
        for key in available(KEYS, major):
            conn.execute(f"DROP TABLE IF EXISTS {table(key)}")
            conn.execute(f"CREATE TABLE {table(key)} ({COLUMNS[key]}, payload integer NOT NULL)")


def prepare_tables(conn, keys):
    """Empty tables, each warmed by a few rows, then a checkpoint (outside the measured run)."""
    conn.execute(f"TRUNCATE {', '.join(table(key) for key in keys)}")
    for key in keys:
        for _ in range(WARMUP_ROWS):
            conn.execute(f"INSERT INTO {table(key)} (payload) VALUES (1)")
    conn.execute("CHECKPOINT")


def reserve_ahead_seconds(conn):
    """snowflake_id.reserve_ahead in seconds (1 if the server has no such setting)."""
    row = conn.execute("SELECT setting::float8 * CASE unit WHEN 's' THEN 1 WHEN 'min' THEN 60 "
                       "ELSE 0.001 END FROM pg_settings "
                       "WHERE name = 'snowflake_id.reserve_ahead'").fetchone()
    return row[0] if row else 1.0


def settle(monitor, quiet_seconds, limit_seconds):
    """Waits until `quiet_seconds` pass without a renewal of the reservation, at most
    `limit_seconds`; the seconds waited and whether it got quiet."""
    began = quiet_since = time.monotonic()
    last = counters(monitor)["reservation_writes"]
    while True:
        now = time.monotonic()
        if now - quiet_since >= quiet_seconds or now - began >= limit_seconds:
            quiet = now - quiet_since >= quiet_seconds
            return {"seconds": round(now - began, 1), "quiet": quiet}
        time.sleep(0.1)
        writes = counters(monitor)["reservation_writes"]
        if writes != last:
            last, quiet_since = writes, time.monotonic()


def one_run(cluster, monitor, keys, scripts, setting, clients, rate, seconds, quiet_seconds):
    """One pgbench run of every key's script: the figures per key and what the run did. Starts
    after the warm-up's renewals are over, so that they do not count as the run's."""
    prefix = cluster.dir / "latency" / f"{setting}-{clients}-{rate_label(rate)}"
    for old in prefix.parent.glob(f"{prefix.name}.*"):
        old.unlink()
    prepare_tables(monitor, keys)
    settled = settle(monitor, quiet_seconds, 2 * quiet_seconds)
    environment = dict(os.environ)
    if setting == "off":
        environment["PGOPTIONS"] = "-c synchronous_commit=off"
    jobs = jobs_for(clients, os.cpu_count())
    command = pgbench_command(cluster, clients, jobs, seconds, scripts, rate, prefix)
    before, flushes = counters(monitor), wal_flushes(monitor)
    began = time.monotonic()
    completed = subprocess.run(command, capture_output=True, text=True, env=environment)
    # pgbench ends early when no session has a transaction scheduled before the end.
    elapsed = time.monotonic() - began
    if completed.returncode != 0:
        raise RuntimeError(f"pgbench failed: {completed.stderr[-2000:]}")
    # The sessions report their WAL statistics at exit, by the next read.
    delta = stats_delta(before, counters(monitor))
    flushes = wal_flushes(monitor) - flushes
    records = []
    for log_file in prefix.parent.glob(f"{prefix.name}.*"):
        records.extend(parse_log(log_file.read_text()))
    latencies, lags, warmups = split_by_key(records, keys)
    lag = ({"mean_ms": sum(lags) / len(lags) / 1e3, "max_ms": max(lags) / 1e3}
           if lags else None)
    return {
        "synchronous_commit": setting, "clients": clients, "jobs": jobs, "rate": rate,
        "seconds": seconds, "elapsed": round(elapsed, 1), "settled": settled,
        "tps": pgbench_tps(completed.stdout), "schedule_lag": lag,
        "rate_kept": rate_kept(rate, lag and lag["mean_ms"]), "warmups_left_out": warmups,
        "keys": {key: figures(values) for key, values in latencies.items()},
        "counters": delta, "renewals": renewals(delta, elapsed),
        "wal_flushes_per_second": flushes / elapsed,
    }


def insert_sql(key):
    return f"INSERT INTO {table(key)} (payload) VALUES (1) RETURNING id"


def quiet_spells(cluster, monitor, keys, setting, rounds, spell_seconds):
    """`rounds` times: `spell_seconds` without any INSERT, then one INSERT per key (in an order
    rotated each round), each in a warm session of its own with `synchronous_commit` =
    `setting`, timed from the client: each key's first INSERT after a quiet spell. Also the
    renewals made meanwhile, in statements and by the worker."""
    sessions = {key: cluster.connect() for key in keys}
    try:
        for key, session in sessions.items():
            session.execute(f"SET synchronous_commit = {setting}")
            session.execute(insert_sql(key)).fetchone()
        latencies = {key: [] for key in keys}
        before = counters(monitor)
        for spell in range(rounds):
            time.sleep(spell_seconds)
            for key in rotated(keys, spell):
                began = time.perf_counter()
                sessions[key].execute(insert_sql(key)).fetchone()
                latencies[key].append(round((time.perf_counter() - began) * 1e6))
        delta = stats_delta(before, counters(monitor))
    finally:
        for session in sessions.values():
            session.close()
    return {"synchronous_commit": setting, "rounds": rounds, "spell_seconds": spell_seconds,
            "keys": {key: figures(values) for key, values in latencies.items()},
            "counters": delta,
            "in_statements": renewals(delta, rounds * spell_seconds)["in_statements"]}


def idle_phase(monitor, seconds):
    """`seconds` without any ID: the counters' growth, and when the last renewal came (read
    every second)."""
    start = previous = counters(monitor)
    began = time.monotonic()
    last_renewal = None
    while (elapsed := time.monotonic() - began) < seconds:
        time.sleep(min(1.0, seconds - elapsed))
        now = counters(monitor)
        if now["reservation_writes"] != previous["reservation_writes"]:
            last_renewal = round(time.monotonic() - began, 1)
        previous = now
    delta = stats_delta(start, previous)
    return {"seconds": seconds, "counters": delta, "renewals": renewals(delta, seconds),
            "last_renewal_after": last_renewal}


def bench_latency(cluster, seconds, max_seconds, samples, rates, clients, sync, spells,
                  spell_seconds, tick_pauses, tick_calls, idle_seconds, wait_quiet):
    """Every run (synchronous_commit × clients × rate), the quiet spells of each
    synchronous_commit setting, the first ID of a tick after each pause (`tick_cost.py`), then
    the idle phase; the machine's state before and after, and the CPU other processes used
    during each run."""
    settings = {"seconds": seconds, "max_seconds": max_seconds, "samples": samples,
                "rates": rates, "clients": clients, "sync": sync, "spells": spells,
                "spell_seconds": spell_seconds, "tick_pauses": tick_pauses,
                "tick_calls": tick_calls, "idle_seconds": idle_seconds}
    with cluster.connect() as conn:
        major = int(conn.execute("SHOW server_version_num").fetchone()[0]) // 10000
        reserve_ahead = reserve_ahead_seconds(conn)
    keys = available(KEYS, major)
    directory = cluster.dir / "latency"
    directory.mkdir(exist_ok=True)
    scripts = []
    for key in keys:
        scripts.append(directory / f"{key}.sql")
        scripts[-1].write_text(script_text(key, keys))
    results = {"settings": settings, "keys": keys, "reserve_ahead": reserve_ahead,
               "library_sha256": cluster.mapped_library_sha256(), "machine": machine_info(),
               "runs": []}
    log(f"waiting up to {wait_quiet} s for a quiet machine")
    results["machine_before"] = wait_for_quiet(wait_quiet, cluster.data)
    planned = planned_seconds(settings, len(keys))
    runs = len(planned_runs(sync, clients, rates))
    log(f"load {results['machine_before']['loadavg']}; {runs} runs and the idle phase: "
        f"{planned} s, about {(planned + runs * RUN_OVERHEAD_SECONDS) / 60:.1f} min with "
        "their preparation")
    watch = ForeignCpu(cluster)
    began = time.monotonic()
    monitor = cluster.connect()
    try:
        for setting, count, rate in planned_runs(sync, clients, rates):
            duration = run_seconds(rate, len(keys), count, seconds, samples, max_seconds)
            name = f"synchronous_commit={setting}, {count} clients, rate {rate_label(rate)}"
            run = watch.measure(name, lambda: one_run(
                cluster, monitor, keys, scripts, setting, count, rate, duration,
                reserve_ahead + SETTLE_MARGIN))
            run["foreign_cpu"] = watch.phases[name]
            results["runs"].append(run)
            log(f"{name}, {duration} s: " + ", ".join(
                f"{key} p50 {run['keys'][key].get('p50', float('nan')):.2f} ms "
                f"({run['keys'][key]['samples']})" for key in keys)
                + f"; renewals in statements {run['renewals']['in_statements']}")
        results["quiet_spells"] = []
        for setting in sync if spells else []:
            name = f"quiet spells, synchronous_commit={setting}"
            spell = watch.measure(name, lambda: quiet_spells(
                cluster, monitor, keys, setting, spells, spell_seconds))
            spell["foreign_cpu"] = watch.phases[name]
            results["quiet_spells"].append(spell)
            log(f"{name}: " + ", ".join(
                f"{key} p50 {spell['keys'][key]['p50']:.2f} ms" for key in keys)
                + f"; renewals in statements {spell['in_statements']}")
        log(f"the first ID of a tick after pauses of {tick_pauses} s")
        results["tick_costs"] = tick_costs(cluster, tick_pauses, tick_calls)
        log(f"idle for {idle_seconds} s")
        results["idle"] = watch.measure("idle", lambda: idle_phase(monitor, idle_seconds))
        results["idle"]["foreign_cpu"] = watch.phases["idle"]
    finally:
        monitor.close()
    results["measured_seconds"] = round(time.monotonic() - began)
    results["machine_after"] = machine_state(cluster.data)
    return results


def ratio(ours, theirs, figure):
    if ours["samples"] == 0 or theirs["samples"] == 0 or theirs[figure] <= 0:
        return None
    return ours[figure] / theirs[figure]


def versus(keyed, ours, theirs):
    """`ours`' p50 and p99 over `theirs`' (None where either has no sample), or None when the
    run has no such key."""
    if ours not in keyed or theirs not in keyed:
        return None
    return {figure: ratio(keyed[ours], keyed[theirs], figure) for figure in ("p50", "p99")}


def within_target(ratios):
    """Whether both ratios are at most the target; None when either is unknown."""
    if ratios is None or None in ratios.values():
        return None
    return all(value <= TARGET_RATIO for value in ratios.values())


def rows(results):
    """Per run: snowflake's p50 and p99 over bigserial's (and over uuidv7's, on 18), the
    control's over bigserial's (the noise of the run), and whether each is within the target
    (None when a key has no sample)."""
    table_rows = []
    for run in results["runs"]:
        keyed = run["keys"]
        ratios = versus(keyed, "snowflake", "bigserial")
        control = versus(keyed, "control", "bigserial")
        table_rows.append({
            "synchronous_commit": run["synchronous_commit"], "clients": run["clients"],
            "rate": run["rate"], "ratios": ratios,
            "versus_uuidv7": versus(keyed, "snowflake", "uuidv7"), "control": control,
            "few_samples": min(keyed["snowflake"]["samples"],
                               keyed["bigserial"]["samples"]) <= FEW_SAMPLES,
            "met": within_target(ratios), "control_met": within_target(control),
        })
    return table_rows


def tally(table_rows):
    """(runs with both verdicts, snowflake within the target, the control within it)."""
    judged = [row for row in table_rows
              if row["met"] is not None and row["control_met"] is not None]
    return (len(judged), sum(row["met"] for row in judged),
            sum(row["control_met"] for row in judged))


def cell(figure):
    """`p50 / p99 / max (samples)` in ms; p99 marked † when it is the max of few samples."""
    if figure["samples"] == 0:
        return "— (0)"
    mark = "†" if figure["samples"] <= FEW_SAMPLES else ""
    return (f"{figure['p50']:.2f} / {figure['p99']:.2f}{mark} / {figure['max']:.2f} "
            f"({figure['samples']:,})")


def times(value):
    return "—" if value is None else f"{value:.2f}×"


def pair(ratios):
    """`p50 / p99` ratios, or — for a run without the key."""
    return "—" if ratios is None else f"{times(ratios['p50'])} / {times(ratios['p99'])}"


def lag_text(lag):
    return "—" if lag is None else f"{lag['mean_ms']:.2f} / {lag['max_ms']:.1f}"


def machine_line(results):
    before, after = results["machine_before"], results["machine_after"]
    busy = ", ".join(f"{item['comm']} ({item['cpu']:.0%})" for item in before["busy_processes"])
    foreign = ([run["foreign_cpu"] for run in results["runs"]]
               + [spell["foreign_cpu"] for spell in results.get("quiet_spells", [])]
               + [results["idle"]["foreign_cpu"]])
    tops = defaultdict(float)
    for phase in foreign:
        for item in phase["top"]:
            tops[item["comm"]] += item["seconds"]
    top = ", ".join(f"{comm} {secs:.0f} s" for comm, secs in
                    sorted(tops.items(), key=lambda item: -item[1])[:3])
    library = (results.get("library_sha256") or "unknown")[:12]
    return (f"Machine: {results['machine']['cpus']} CPUs ({results['machine']['cpu']}), commit "
            f"{results['machine']['commit']}, snowflake_id.so sha256 {library}…; load "
            f"{before['loadavg'][0]} before ({'quiet' if before.get('quiet') else 'not quiet'}; "
            "busy processes: "
            f"{busy or 'none'}), {after['loadavg'][0]} after. CPU used by other processes during "
            f"the runs and the idle phase: {sum(phase['seconds'] for phase in foreign):.0f} s"
            f"{f' (most: {top})' if top else ''}.")


def render(results, server_version):
    keys, settings = results["keys"], results["settings"]
    versus_v7 = "uuidv7" in keys
    lines = [
        f"# INSERT latency at every rate (PostgreSQL {server_version})",
        "",
        "pgbench, one prepared single-row `INSERT … RETURNING id` per transaction, the scripts"
        f" of all keys ({', '.join(f'`{LABELS[key]}`' for key in keys)}) mixed in each run with "
        "equal weights; rates are transactions per second in all (`--rate`, Poisson "
        "schedule; max: unthrottled), latencies in ms from each transaction's start (net of "
        "pgbench's schedule lag: the client's own delay in starting it, reported apart). "
        f"A run lasts {settings['seconds']} s, or at low rates long enough for "
        f"{settings['samples']} transactions per key, at most {settings['max_seconds']} s. Each "
        "session's first transaction inserts one row into every table (a warm-up) and is left "
        f"out; before each run the tables are emptied, given {WARMUP_ROWS} rows each and "
        "checkpointed, then the run waits until the reservation went "
        f"`snowflake_id.reserve_ahead` ({results['reserve_ahead']:g} s) + {SETTLE_MARGIN:g} s "
        "without a renewal, or twice that at most. Target: "
        f"snowflake's p50 and p99 at most {TARGET_RATIO}× bigserial's in every run. Command: "
        "`bash bench/run.sh latency`.",
        "",
        machine_line(results),
        "",
        "![p50 and p99 per rate](latency.png)",
    ]
    for setting in settings["sync"]:
        lines += ["", f"## Latency, synchronous_commit = {setting}: p50 / p99 / max, ms "
                  "(samples)", "",
                  "| clients | rate /s | " + " | ".join(LABELS[key] for key in keys) + " |",
                  "|---|---|" + "---|" * len(keys)]
        for run in results["runs"]:
            if run["synchronous_commit"] == setting:
                lines.append(f"| {run['clients']} | {rate_label(run['rate'])} | "
                             + " | ".join(cell(run["keys"][key]) for key in keys) + " |")
    with_control = "control" in keys
    lines += ["", f"† p99 of {FEW_SAMPLES} samples or fewer: by nearest rank it is the max.", "",
              "## snowflake against bigserial" + (" and uuidv7()" if versus_v7 else ""), "",
              "| synchronous_commit | clients | rate /s | p50 ratio | p99 ratio | "
              + ("p50 vs uuidv7() | p99 vs uuidv7() | " if versus_v7 else "")
              + f"target ≤ {TARGET_RATIO}× met |"
              + (" control p50 / p99 ratio | control within the target |"
                 if with_control else ""),
              "|---|---|---|---|---|---|" + ("---|---|" if versus_v7 else "")
              + ("---|---|" if with_control else "")]
    table_rows = rows(results)
    for row in table_rows:
        few = "†" if row["few_samples"] and row["ratios"]["p99"] is not None else ""
        v7 = (f"{times(row['versus_uuidv7']['p50'])} | {times(row['versus_uuidv7']['p99'])} | "
              if versus_v7 else "")
        control = (f" {pair(row['control'])} | {MET[row['control_met']]} |"
                   if with_control else "")
        lines.append(f"| {row['synchronous_commit']} | {row['clients']} | "
                     f"{rate_label(row['rate'])} | {times(row['ratios']['p50'])} | "
                     f"{times(row['ratios']['p99'])}{few} | {v7}{MET[row['met']]} |{control}")
    if with_control:
        judged, met, control_met = tally(table_rows)
        lines += ["", f"Of the {judged} runs with samples of every key, snowflake is within "
                  f"{TARGET_RATIO}× of bigserial in {met}, and bigserial's own second table "
                  f"(the control: the same key, so only the machine's noise differs) in "
                  f"{control_met}."]
    lines += ["", "## The runs: rate kept, reservation renewals", "",
              "Renewals of the durable reservation per minute, all and those made inside a "
              "session's statement (not by the reservation worker; each is one WAL record "
              "flushed and two fsyncs); snowflake IDs issued in the run (warm-ups included). "
              f"The rate is kept when the mean schedule lag is at most {RATE_KEPT_LAG_MS} ms. "
              "Seconds: planned, and (ran) until pgbench ended, earlier when no session had a "
              "transaction scheduled before the end; the rates per minute and second are over "
              "the latter.",
              "",
              "| synchronous_commit | clients | threads | rate /s | seconds (ran) | tps | "
              "schedule lag "
              "mean / max, ms | rate kept | renewals (per minute) | in statements (per minute) "
              "| snowflake IDs "
              "| WAL flushes /s | other processes' CPU, s |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in results["runs"]:
        lag = run["schedule_lag"]
        kept = {True: "yes", False: "**no**", None: "—"}[run["rate_kept"]]
        lines.append(
            f"| {run['synchronous_commit']} | {run['clients']} | {run['jobs']} | "
            f"{rate_label(run['rate'])} | {run['seconds']} ({run['elapsed']:g}) | "
            f"{run['tps']:,.1f} | "
            f"{lag_text(lag)} | {kept} | "
            f"{run['counters']['reservation_writes']:,} ({run['renewals']['per_minute']:.0f}) | "
            f"{run['renewals']['in_statements']:,} "
            f"({run['renewals']['in_statements_per_minute']:.0f}) | "
            f"{run['counters']['ids_issued']:,} | {run['wal_flushes_per_second']:,.1f} | "
            f"{run['foreign_cpu']['seconds']:.1f} |")
    unsettled = [run for run in results["runs"] if not run["settled"]["quiet"]]
    waited = f"after {2 * (results['reserve_ahead'] + SETTLE_MARGIN):g} s of waiting"
    if unsettled and len(unsettled) == len(results["runs"]):
        lines += ["", f"Every run started while the reservation was still being renewed, {waited}."]
    elif unsettled:
        lines += ["", f"{len(unsettled)} of {len(results['runs'])} runs started while the "
                  f"reservation was still being renewed, {waited} "
                  "(synchronous_commit/clients/rate): " + ", ".join(
                      f"{run['synchronous_commit']}/{run['clients']}/{rate_label(run['rate'])}"
                      for run in unsettled) + "."]
    lines += quiet_spell_lines(results)
    lines += tick_cost_lines(results.get("tick_costs", []))
    idle = results["idle"]
    last = idle["last_renewal_after"]
    lines += ["", f"Idle: {idle['seconds']} s without an ID after the last run: "
              f"{idle['counters']['reservation_writes']} renewals "
              f"({idle['renewals']['per_minute']:.1f} per minute), "
              f"{idle['counters']['reservation_worker_writes']} of them by the reservation worker"
              + (f"; the last read {last} s into the phase (read every second)"
                 if last is not None else "")
              + f"; {idle['counters']['ids_issued']} IDs issued meanwhile.", ""]
    return "\n".join(lines)


def quiet_spell_lines(results):
    """The quiet spells' section: each key's first INSERT after a spell, and the ratios."""
    spells = results.get("quiet_spells", [])
    if not spells:
        return []
    keys = results["keys"]
    lines = ["", "## The first INSERT after a quiet spell: p50 / p99 / max, ms (samples)", "",
             f"{spells[0]['rounds']} times: {spells[0]['spell_seconds']:g} s without any INSERT "
             "(longer than `snowflake_id.reserve_ahead`), then one INSERT per key in an order "
             "rotated each time, each in a warm session of its own, timed from the client (the "
             "round trip included). Renewals in statements: those of the spells' INSERTs.", "",
             "| synchronous_commit | " + " | ".join(LABELS[key] for key in keys)
             + " | snowflake p50 / p99 vs bigserial | "
             + ("control p50 / p99 vs bigserial | " if "control" in keys else "")
             + "renewals in statements |",
             "|---|" + "---|" * len(keys) + "---|" + ("---|" if "control" in keys else "")
             + "---|"]
    for spell in spells:
        keyed = spell["keys"]
        control = (f" {pair(versus(keyed, 'control', 'bigserial'))} |"
                   if "control" in keys else "")
        lines.append(f"| {spell['synchronous_commit']} | "
                     + " | ".join(cell(keyed[key]) for key in keys)
                     + f" | {pair(versus(keyed, 'snowflake', 'bigserial'))} |{control} "
                     f"{spell['in_statements']} |")
    return lines
