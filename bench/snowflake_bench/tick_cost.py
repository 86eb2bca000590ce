"""The first ID of a tick as the server times it (issue 64): one session, each statement its own
transaction, `SELECT snowflake_nextval()` and `SELECT nextval(…)` of the `bigserial` table's
sequence and of the control's, in turn, each after a pause, timed by the server itself
(`log_min_duration_statement = 0`, whose durations are in µs, commit included). Back to back
most of snowflake's calls share a tick; after a pause of a few ms every call is the first of a
tick, with caches warm (1.5 ms) or cold (10 ms). The client's round trip, which dwarfs these
figures, is left out."""

import re
import time

from .benchmarks import figures

# The statements in the order they take turns; the tables are the latency benchmark's.
STATEMENTS = {"bigserial": "SELECT nextval('latency_bigserial_id_seq')",
              "control": "SELECT nextval('latency_control_id_seq')",
              "snowflake": "SELECT snowflake_nextval()"}
# BENCH_LATENCY_TICK_PAUSES: seconds before each statement, one series per pause.
PAUSES = "0 0.0015 0.01"
DURATION = re.compile(r"duration: ([0-9.]+) ms  statement: (.*)$")


def parse_pauses(text):
    """`0 0.0015 0.01` (spaces or commas) → [0.0, 0.0015, 0.01]; empty: no series."""
    pauses = [float(word) for word in text.replace(",", " ").split()]
    if any(pause < 0 for pause in pauses):
        raise ValueError(f"a pause cannot be negative: {text}")
    return pauses


def parse_durations(text):
    """{key: [µs]} of the server log's duration lines of the statements above."""
    keys = {statement: key for key, statement in STATEMENTS.items()}
    durations = {key: [] for key in STATEMENTS}
    for line in text.splitlines():
        found = DURATION.search(line)
        key = found and keys.get(found.group(2).strip())
        if key:
            durations[key].append(round(float(found.group(1)) * 1e3))
    return durations


def series_seconds(pauses, calls):
    """Seconds the series sleep (their statements not counted)."""
    return sum(pause * calls for pause in pauses)


def tick_costs(cluster, pauses, calls):
    """Per pause, `calls` statements taking turns (a third each), each `pause` s after the last
    one ended, with `synchronous_commit = off`: the server's durations per key."""
    series = []
    with cluster.connect() as conn:
        conn.execute("SET synchronous_commit = off")
        for statement in STATEMENTS.values():
            conn.execute(statement)
        order = list(STATEMENTS)
        for pause in pauses:
            start = cluster.log.stat().st_size
            conn.execute("SET log_min_duration_statement = 0")
            for call in range(calls):
                time.sleep(pause)
                # Never prepared (psycopg prepares a query run five times): a prepared one is
                # logged as its protocol steps, without its text on the duration's line.
                conn.execute(STATEMENTS[order[call % len(order)]], prepare=False)
            conn.execute("RESET log_min_duration_statement")
            # The logging collector is off: the server appends to the log as it goes.
            with open(cluster.log, encoding="utf-8", errors="replace") as server_log:
                server_log.seek(start)
                durations = parse_durations(server_log.read())
            series.append({"pause_ms": pause * 1e3,
                           "keys": {key: figures(values) for key, values in durations.items()}})
    return series


def microseconds(figure, name):
    return f"{figure[name] * 1e3:.0f}" if figure["samples"] else "—"


def p50_above_bigserial(keyed, key):
    """`key`'s p50 minus bigserial's, in µs with its sign; — without samples of both."""
    if not keyed[key]["samples"] or not keyed["bigserial"]["samples"]:
        return "—"
    return f"{(keyed[key]['p50'] - keyed['bigserial']['p50']) * 1e3:+.0f}"


def tick_cost_lines(series):
    """The section of the report: p50 / p99 per key and pause, and snowflake's and the
    control's p50 above bigserial's, in µs."""
    if not series:
        return []
    lines = ["", "## The first ID of a tick, as the server times it: p50 / p99, µs (samples)", "",
             "One session, each statement its own transaction (`synchronous_commit = off`), "
             "taking turns: " + ", ".join(f"`{statement}`" for statement in STATEMENTS.values())
             + ", each after the pause; durations from the server's log "
             "(`log_min_duration_statement = 0`: parse to commit, no round trip). Back to back "
             "most of snowflake's calls share a tick; after a pause of a few ms each is the "
             "first of a tick.", "",
             "| pause, ms | " + " | ".join(STATEMENTS) + " | snowflake − bigserial, p50 µs "
             "| control − bigserial, p50 µs |",
             "|---|" + "---|" * len(STATEMENTS) + "---|---|"]
    for entry in series:
        keyed = entry["keys"]
        cells = [f"{microseconds(keyed[key], 'p50')} / {microseconds(keyed[key], 'p99')} "
                 f"({keyed[key]['samples']})" for key in STATEMENTS]
        lines.append(f"| {entry['pause_ms']:g} | " + " | ".join(cells)
                     + f" | {p50_above_bigserial(keyed, 'snowflake')} | "
                     f"{p50_above_bigserial(keyed, 'control')} |")
    return lines
