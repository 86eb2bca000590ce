"""What the extension costs, counted in instructions by callgrind (exact where timings on a
2-core VM are not): a new backend's first ID, DDL on a keyed table (where the extension's event
trigger runs), statements under the library's hooks with and without it, and the cost per ID
above the bare loop. One markdown table per PostgreSQL major,
written by bench/costs.py. Standard library only: the server is driven through psql."""

import argparse
import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from . import log
from .benchmarks import EXPR, SHORT, available, count_sql, rotated
from .cluster import PORT, Cluster, run, sha256
from .evidence import calls_to, inclusive, parse_callgrind

KEYED_TABLE_COUNTS = [0, 500]
FIRST_ID_KEYS = ["snowflake", "snowflake_wide", "nextval_c1", "pgedge", "uuid", "uuidv7"]
PER_ID_KEYS = ["snowflake", "snowflake_wide", "random", "nextval_c1", "pgedge", "uuidv7"]
OURS = ("snowflake", "snowflake_wide")
BASELINE = "nextval_c1"  # what the first-ID and per-ID figures are compared with
DDL_WITH = "ddl_with_extension"
DDL_WITHOUT = "ddl_without_extension"
# kind: (label, one pair of statements on {table}). Each pair runs on a table of its own: a
# dropped column stays in its table's descriptor, so on one table every pair would cost more than
# the one before it (about 13,000 instructions more on 15).
DDL_PAIRS = {
    "column": ("ALTER TABLE ADD COLUMN + DROP COLUMN",
               "ALTER TABLE {table} ADD COLUMN x int;\nALTER TABLE {table} DROP COLUMN x;\n"),
    "index": ("CREATE INDEX + DROP INDEX",
              "CREATE INDEX {table}_id ON {table} (id);\nDROP INDEX {table}_id;\n"),
}
DDL_WARMUP_PAIRS = 3
# kind: (label, one statement on {table}): statements under the library's hooks, in a database
# without the extension, with the library preloaded and without it (the hooks run in every
# database of the server). Each CREATE TABLE makes a table of its own.
# Each run updates a one-row table of its own ({probe}): a run on the table the other updated
# would find its dead row versions.
HOOKED_STATEMENTS = {
    "update": ("single-row UPDATE (ExecutorStart hook)",
               "UPDATE {probe} SET v = v + 1 WHERE id = 1;\n"),
    "create_table": ("CREATE TABLE (ProcessUtility hook)", "CREATE TABLE {table} (a int);\n"),
}
HOOKED_SETUP = ("CREATE TABLE {probe} (id int PRIMARY KEY, v int);\n"
                "INSERT INTO {probe} VALUES (1, 0);\n")
# The server's settings without the library: the command line's shared_preload_libraries wins
# over the cluster's configuration.
WITHOUT_LIBRARY = ("-c", "shared_preload_libraries=")
# Runs of a marker alone: what a marker adds to each pair's dump, taken off.
DDL_MARKER_RUNS = 3
SETTINGS = {
    "full": {"first_id_reps": 3, "ddl_pairs": 20, "per_id_n": 100_000},
    "quick": {"first_id_reps": 1, "ddl_pairs": 5, "per_id_n": 10_000},
}
# One table per pair of the full run, also for --quick: what the event trigger does at each
# firing can grow with the keyed tables of the database (0.11.0's PL/pgSQL one reads each one's
# dependency on snowflake_nextval), so both measure the same database.
DDL_TABLES = DDL_WARMUP_PAIRS + SETTINGS["full"]["ddl_pairs"]
# The targets. Information only: a missed target never fails the script.
TARGET_FIRST_ID_RATIO = 1.0  # our first ID against a first nextval() CACHE 1
TARGET_DDL_RATIO = {"column": 1.2, "index": 1.5}  # with the extension against without
TARGET_PER_ID = 250  # instructions per ID above the loop, set for PostgreSQL 15 only
TARGET_PER_ID_MAJOR = 15

# The first-ID server's reservation window (measure_first_ids).
FIRST_ID_RESERVE_AHEAD = "1min"
# callgrind --dump-before=pg_sleep writes the counts so far each time a statement calls it.
MARKER = "SELECT pg_sleep(0);\n"
SERVER_ERROR = re.compile(r"\b(ERROR|FATAL|PANIC): ")
EVENT_TRIGGER = "snowflake_id_warn_of_stored_ids_ahead"
# The C symbol that runs when the event trigger fires: its function's own for a C function,
# else its language's call handler (plpgsql_call_handler for the PL/pgSQL one of 0.10.0–0.11.0).
EVENT_TRIGGER_SYMBOL_SQL = f"""
SELECT CASE WHEN l.lanname = 'c' THEN p.prosrc ELSE h.prosrc END
  FROM pg_event_trigger e JOIN pg_proc p ON p.oid = e.evtfoid
  JOIN pg_language l ON l.oid = p.prolang LEFT JOIN pg_proc h ON h.oid = l.lanplcallfoid
 WHERE e.evtname = '{EVENT_TRIGGER}';
"""


def keyed_database(count):
    return f"keyed_{count}"


# --------------------------------------------------------------------------------------------
# The scripts and the arithmetic (pure)


def keyed_database_sql(count):
    """The extension, the sequences the figures use (named as bench/run.py's, with the same
    'wide' layout) and `count` tables keyed by the default sequence."""
    tables = (f"DO $$ BEGIN FOR i IN 1..{count} LOOP EXECUTE format('CREATE TABLE k%s "
              "(id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v int)', i); END LOOP; END $$;\n"
              if count else "")
    return ("CREATE EXTENSION snowflake_id;\n"
            "SELECT snowflake_create_sequence('wide', preset => 'classic', worker_bits => 6, "
            "sequence_bits => 16);\n"
            "CREATE SEQUENCE bench_seq_cache1 CACHE 1;\n" + tables)


def ddl_tables_sql(default):
    """DDL_TABLES tables t1, t2, … alike, each with the same three rows."""
    return (f"DO $$ BEGIN FOR i IN 1..{DDL_TABLES} LOOP "
            f"EXECUTE format('CREATE TABLE t%s (id bigint PRIMARY KEY{default}, v int)', i); "
            "EXECUTE format('INSERT INTO t%s VALUES (1, 1), (2, 2), (3, 3)', i); "
            "END LOOP; END $$;\n")


def ddl_script(pair, pairs):
    """The backend's pid and the warm-up pairs (dump 1), markers alone (the next
    DDL_MARKER_RUNS dumps), then `pairs` pairs, each on the next table and closed by a marker
    (a dump each)."""
    tables = [f"t{number}" for number in range(1, DDL_WARMUP_PAIRS + pairs + 1)]
    warm_up = "".join(pair.format(table=table) for table in tables[:DDL_WARMUP_PAIRS])
    measured = "".join(pair.format(table=table) + MARKER for table in tables[DDL_WARMUP_PAIRS:])
    return "SELECT pg_backend_pid();\n" + warm_up + MARKER * (1 + DDL_MARKER_RUNS) + measured


def hooked_script(statement, count, prefix):
    """The backend's pid and warm-up statements (dump 1), markers alone (the next
    DDL_MARKER_RUNS dumps), then `count` statements, each closed by a marker (a dump each);
    tables named from `prefix`, so that runs in one database use tables of their own."""
    probe = f"{prefix}_probe"
    warm_up = "".join(statement.format(table=f"{prefix}_warm_{number}", probe=probe)
                      for number in range(DDL_WARMUP_PAIRS))
    measured = "".join(statement.format(table=f"{prefix}_{number}", probe=probe) + MARKER
                       for number in range(count))
    return "SELECT pg_backend_pid();\n" + warm_up + MARKER * (1 + DDL_MARKER_RUNS) + measured


def per_id_script(keys, n):
    """A warm-up of every function, then per key `n` and 2n IDs in one statement each, each
    closed by a marker: dump 1 is the start and the warm-up, dumps 2k + 2 and 2k + 3 key k's."""
    lines = [count_sql(key, 1000) + ";\n" for key in keys] + [MARKER]
    for key in keys:
        lines += [count_sql(key, n) + ";\n", MARKER, count_sql(key, 2 * n) + ";\n", MARKER]
    return "".join(lines)


def per_unit(total_once, total_twice, units):
    """What one unit adds: the counts of a run of 2 × `units` less those of a run of `units`,
    so that what both runs share (the statement, the marker) cancels out."""
    return (total_twice - total_once) / units


def numbered_dumps(out_file):
    """The dumps callgrind wrote before `out_file`'s markers, in order (out_file.1, .2, …)."""
    return sorted(out_file.parent.glob(f"{out_file.name}.*"),
                  key=lambda path: int(path.name.rsplit(".", 1)[1]))


def first_id_figures(totals):
    """Per database: what each function's first call adds to a backend (median of its runs'
    totals less the median of `SELECT 1`'s), and that against a first nextval() CACHE 1's."""
    figures = {}
    for database, samples in totals.items():
        select_1 = statistics.median(samples["select_1"])
        extra = {key: statistics.median(values) - select_1
                 for key, values in samples.items() if key != "select_1"}
        figures[database] = {key: {"extra": value, "ratio": value / extra[BASELINE]}
                             for key, value in extra.items()}
    return figures


def ddl_figures(segments):
    """Per kind: the median pair's instructions with and without the extension (each pair's
    dump less a marker's), their ratio, and per pair (median) how often the event trigger's
    function ran with it and its instructions (inclusive). Medians, not means: a pair that
    splits a catalog index page or prunes a catalog heap page costs tens of thousands more, and
    which pairs do differs between the databases."""
    figures = {}
    for kind, by_database in segments.items():
        per_pair = {database: statistics.median(found["pairs"])
                    - statistics.median(found["markers"])
                    for database, found in by_database.items()}
        trigger = by_database[DDL_WITH]["trigger"]
        figures[kind] = {"with": per_pair[DDL_WITH], "without": per_pair[DDL_WITHOUT],
                         "ratio": per_pair[DDL_WITH] / per_pair[DDL_WITHOUT],
                         "trigger_calls_per_pair": statistics.median(trigger["calls"]),
                         "trigger_ir_per_pair": statistics.median(trigger["ir"])}
    return figures


def hooked_figures(segments):
    """Per kind: the median statement's instructions with the library preloaded and without it
    (each statement's dump less a marker's), what the library adds, and the ratio."""
    figures = {}
    for kind, by_preload in segments.items():
        per_statement = {preload: statistics.median(found["statements"])
                         - statistics.median(found["markers"])
                         for preload, found in by_preload.items()}
        figures[kind] = {"with": per_statement["with"], "without": per_statement["without"],
                         "added": per_statement["with"] - per_statement["without"],
                         "ratio": per_statement["with"] / per_statement["without"]}
    return figures


def per_id_figures(segments, n):
    """Instructions per ID of each function above the bare loop's per row, and the loop's."""
    per_id = {key: per_unit(found["once"], found["twice"], n) for key, found in segments.items()}
    loop = per_id["empty"]
    return {"loop": loop,
            "above_loop": {key: value - loop for key, value in per_id.items() if key != "empty"}}


def met(value, target):
    return "yes" if value <= target else "no"


def rows(results):
    """The table's rows: label, instructions, what they are compared with, the ratio, the target
    and whether it is met (None where a column does not apply)."""
    table = []
    for count in KEYED_TABLE_COUNTS:
        figures = results["first_id_figures"][keyed_database(count)]
        baseline = figures[BASELINE]["extra"]
        for key, figure in figures.items():
            ours = key in OURS
            table.append({
                "label": f"first ID, {count} keyed tables: {SHORT[key]}",
                "value": f"{figure['extra'] / 1000:,.1f}k",
                "against": f"{SHORT[BASELINE]}: {baseline / 1000:,.1f}k",
                "ratio": f"{figure['ratio']:.2f}×",
                "target": f"≤ {TARGET_FIRST_ID_RATIO:.1f}×" if ours else None,
                "met": met(figure["ratio"], TARGET_FIRST_ID_RATIO) if ours else None})
    for kind, (label, _) in DDL_PAIRS.items():
        figure = results["ddl_figures"][kind]
        table.append({
            "label": f"DDL per pair: {label}",
            "value": f"{figure['with'] / 1000:,.1f}k",
            "against": f"without the extension: {figure['without'] / 1000:,.1f}k",
            "ratio": f"{figure['ratio']:.2f}×",
            "target": f"≤ {TARGET_DDL_RATIO[kind]:.1f}×",
            "met": met(figure["ratio"], TARGET_DDL_RATIO[kind])})
    for kind, (label, _) in HOOKED_STATEMENTS.items():
        figure = results["hooked_figures"][kind]
        table.append({
            "label": f"per statement: {label}",
            "value": f"{figure['with'] / 1000:,.1f}k",
            "against": f"without the library: {figure['without'] / 1000:,.1f}k",
            "ratio": f"{figure['ratio']:.3f}×",
            "target": None, "met": None})
    per_id = results["per_id_figures"]
    baseline = per_id["above_loop"][BASELINE]
    for key, value in per_id["above_loop"].items():
        targeted = key in OURS and results["major"] == TARGET_PER_ID_MAJOR
        table.append({
            "label": f"per ID above the loop: {SHORT[key]}",
            "value": f"{value:,.1f}",
            "against": f"{SHORT[BASELINE]}: {baseline:,.1f}",
            "ratio": f"{value / baseline:.2f}×",
            "target": f"≤ {TARGET_PER_ID}" if targeted else None,
            "met": met(value, TARGET_PER_ID) if targeted else None})
    table.append({"label": f"per ID: {SHORT['empty']}", "value": f"{per_id['loop']:,.1f}",
                  "against": None, "ratio": None, "target": None, "met": None})
    return table


def render(results):
    settings = results["settings"]
    lines = [
        f"# Callgrind costs: PostgreSQL {results['server_version']}, snowflake_id "
        f"{results['extension_version']} (library sha256 {results['library_sha256'][:12]})",
        "",
        "Instructions executed (callgrind's Ir; `k`: thousands). First ID: a new connection's "
        "backend (the postmaster under callgrind, after one connection that ran each function) "
        "running `SELECT f()` less one running `SELECT 1`, whole processes, median of "
        f"{settings['first_id_reps']}, with `snowflake_id.reserve_ahead = "
        f"{FIRST_ID_RESERVE_AHEAD}` (the floor the first connection raised covers the others, "
        "as nextval()'s WAL record covers 32 values). DDL: one server backend per database (the postmaster "
        "under callgrind: event triggers fire), instructions of the median pair of statements "
        f"of {settings['ddl_pairs']}, each pair on a table of its own, `(id bigint PRIMARY KEY "
        "DEFAULT snowflake_nextval(), v int)` with the extension and `(id bigint PRIMARY KEY, "
        "v int)` in a database without it, 3 rows each. Per statement: the same, in the "
        "database without the extension, on a server with the library preloaded and on one "
        "without it (the hooks run in every database). Per ID: "
        "`SELECT count(f()) FROM generate_series(1, n)` in `postgres --single`, n = "
        f"{settings['per_id_n']:,} against {2 * settings['per_id_n']:,}, less the bare loop "
        "`count(*)`. Targets are information: nothing fails on them. Command: `python3 "
        f"bench/costs.py{' --quick' if results['quick'] else ''}` (docs/benchmarks.md).",
        "",
        "| figure | instructions | against | ratio | target | met |",
        "|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        cells = [row[column] or "–"
                 for column in ("label", "value", "against", "ratio", "target", "met")]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"Note: {note}" for note in results["notes"]]
    lines.append(f"The event trigger per DDL pair with the extension ({results['trigger_symbol']}"
                 ", inclusive): " + "; ".join(
                     f"{DDL_PAIRS[kind][0]}: fired {figure['trigger_calls_per_pair']:g}×, "
                     f"{figure['trigger_ir_per_pair'] / 1000:,.1f}k instructions"
                     for kind, figure in results["ddl_figures"].items()) + ".")
    lines.append("What the library adds per statement: " + "; ".join(
        f"{HOOKED_STATEMENTS[kind][0]}: {figure['added']:,.0f} instructions"
        for kind, figure in results["hooked_figures"].items()) + ".")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------
# Running PostgreSQL


def as_server_user():
    """subprocess arguments that run a program as the postgres user itself, with runuser's
    environment. Not through runuser: when this script is stopped, subprocess kills the program
    it started, and runuser's child would live on."""
    account = pwd.getpwnam("postgres")
    return {"user": account.pw_uid, "group": account.pw_gid, "extra_groups": [],
            "env": {**os.environ, "HOME": account.pw_dir, "USER": "postgres",
                    "LOGNAME": "postgres"}}


def psql(cluster, database, sql):
    """Runs `sql` through psql, one statement after another in autocommit; unaligned output."""
    completed = subprocess.run(
        [str(part) for part in [cluster.bindir / "psql", "-X", "-q", "-A", "-t", "-v",
                                "ON_ERROR_STOP=1", "-h", cluster.dir, "-p", PORT,
                                "-U", "postgres", "-d", database]],
        input=sql, capture_output=True, text=True, timeout=600, **as_server_user())
    if completed.returncode != 0:
        raise RuntimeError(f"psql in {database} failed:\n{completed.stderr[-3000:]}")
    return completed.stdout


def single_user(cluster, database, script, out_file=None, options=(), timeout=1800):
    """Runs `script` in a `postgres --single` backend of `database`, under callgrind when
    `out_file` is given. A statement's ERROR leaves --single's exit status 0: it is looked for
    in the server's messages."""
    command = [cluster.bindir / "postgres", "--single", "-D", cluster.data,
               "-c", "shared_buffers=64MB", database]
    if out_file:
        command = ["valgrind", "--tool=callgrind", *options, "--compress-strings=no",
                   "--compress-pos=no", f"--callgrind-out-file={out_file}", *command]
    completed = subprocess.run([str(part) for part in command], input=script,
                               capture_output=True, text=True, timeout=timeout,
                               **as_server_user())
    if completed.returncode != 0 or SERVER_ERROR.search(completed.stderr):
        raise RuntimeError(f"postgres --single in {database} failed:\n{completed.stderr[-3000:]}")


@contextlib.contextmanager
def callgrind_server(cluster, out_dir, settings=()):
    """The postmaster under callgrind, with every backend it forks (fork, no exec: they stay
    under it), each counting from its start (a forked child would inherit the postmaster's
    counts so far); each process writes out_dir/server.<pid> at exit and a numbered dump at
    every marker it runs; `settings`: more `-c name=value` arguments. Stopped (fast, then
    immediate) whatever happens."""
    log_path = cluster.dir / "callgrind-server.log"
    with open(log_path, "w") as server_log:
        process = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--dump-before=pg_sleep",
             "--zero-before=InitPostmasterChild", "--compress-strings=no",
             "--compress-pos=no", f"--callgrind-out-file={out_dir}/server.%p",
             str(cluster.bindir / "postgres"), "-D", str(cluster.data),
             "-c", "shared_buffers=64MB", *settings],
            stdout=server_log, stderr=subprocess.STDOUT, **as_server_user())
    try:
        deadline = time.monotonic() + 180
        while subprocess.run([str(cluster.bindir / "pg_isready"), "-q", "-h", str(cluster.dir),
                              "-p", str(PORT)]).returncode != 0:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the postmaster under callgrind did not start:\n"
                                   + log_path.read_text()[-3000:])
            time.sleep(0.3)
        yield
    finally:
        for stop in (signal.SIGINT, signal.SIGQUIT, signal.SIGKILL):  # fast, immediate, kill
            if process.poll() is None:
                process.send_signal(stop)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=120)


def setup(cluster):
    """On the normally started server: the databases, vacuumed and analyzed as autovacuum (off
    in this cluster) would have done, so that the planner sees the catalogs' real sizes; the
    versions, whether pgEdge's snowflake can be created, and the symbol the event trigger runs."""
    notes = []
    databases = [keyed_database(count) for count in KEYED_TABLE_COUNTS] + [DDL_WITH, DDL_WITHOUT]
    psql(cluster, "postgres", "".join(f"CREATE DATABASE {database};\n" for database in databases))
    for count in KEYED_TABLE_COUNTS:
        log(f"{keyed_database(count)}: the extension and {count} keyed tables")
        psql(cluster, keyed_database(count), keyed_database_sql(count))
    pgedge = psql(cluster, "postgres", "SELECT count(*) FROM pg_available_extensions "
                                       "WHERE name = 'snowflake';").strip() == "1"
    if not pgedge:
        notes.append("pgEdge's snowflake is not installed for this PostgreSQL: its rows are "
                     "left out (scripts/install-pgedge-snowflake.sh installs it).")
    else:
        try:
            for count in KEYED_TABLE_COUNTS:
                psql(cluster, keyed_database(count),
                     "CREATE EXTENSION snowflake;\nCREATE SEQUENCE pgedge_seq;\n")
        except RuntimeError as error:
            pgedge = False
            notes.append(f"pgEdge's snowflake could not be created beside snowflake_id, its rows "
                         f"are left out: {str(error).splitlines()[-1]}")
    psql(cluster, DDL_WITH, "CREATE EXTENSION snowflake_id;\n"
         + ddl_tables_sql(" DEFAULT snowflake_nextval()"))
    psql(cluster, DDL_WITHOUT, ddl_tables_sql(""))
    for database in databases:
        psql(cluster, database, "VACUUM ANALYZE;\n")
    version, version_num, extension_version, pkglibdir = psql(
        cluster, keyed_database(0),
        "SELECT current_setting('server_version'), current_setting('server_version_num'), "
        "extversion, (SELECT setting FROM pg_config() WHERE name = 'PKGLIBDIR') "
        "FROM pg_extension WHERE extname = 'snowflake_id';").strip().split("|")
    trigger_symbol = psql(cluster, DDL_WITH, EVENT_TRIGGER_SYMBOL_SQL).strip()
    if not trigger_symbol:
        raise RuntimeError(f"no event trigger {EVENT_TRIGGER} in {DDL_WITH}")
    for note in notes:
        log(note)
    return {"server_version": version, "major": int(version_num) // 10000,
            "extension_version": extension_version,
            "library": str(Path(pkglibdir) / "snowflake_id.so"), "pgedge": pgedge,
            "trigger_symbol": trigger_symbol, "notes": notes}


# --------------------------------------------------------------------------------------------
# The measurements


def measure_ddl(cluster, out_dir, pairs, trigger_symbol):
    """Per DDL kind and database, in one server backend: the counts of each marker alone and of
    each pair, and per pair how often the event trigger's function ran and its instructions."""
    segments = defaultdict(dict)
    with callgrind_server(cluster, out_dir):
        for kind, (label, pair) in DDL_PAIRS.items():
            for database in (DDL_WITH, DDL_WITHOUT):
                log(f"DDL under callgrind: {label} in {database}")
                pid = psql(cluster, database, ddl_script(pair, pairs)).split()[0]
                dumps = numbered_dumps(out_dir / f"server.{pid}")
                if len(dumps) != 1 + DDL_MARKER_RUNS + pairs:
                    raise RuntimeError(f"backend {pid} wrote {len(dumps)} dumps, not "
                                       f"{1 + DDL_MARKER_RUNS + pairs}")
                markers = [parse_callgrind(dump)["total"]
                           for dump in dumps[1:1 + DDL_MARKER_RUNS]]
                profiles = [parse_callgrind(dump) for dump in dumps[1 + DDL_MARKER_RUNS:]]
                segments[kind][database] = {
                    "markers": markers, "pairs": [profile["total"] for profile in profiles],
                    "trigger": {
                        "calls": [calls_to(profile, trigger_symbol) for profile in profiles],
                        "ir": [inclusive(profile, trigger_symbol) for profile in profiles]}}
    for kind, by_database in segments.items():
        if not any(by_database[DDL_WITH]["trigger"]["calls"]):
            raise RuntimeError(f"the event trigger ({trigger_symbol}) did not fire during "
                               f"{DDL_PAIRS[kind][0]}: the DDL figure would not include it")
    return dict(segments)


def measure_hooked(cluster, out_dir, count):
    """Per statement kind, in one server backend of the database without the extension, on
    the server with the library preloaded and on one without it: the counts of each marker
    alone and of each statement. Each server writes into a directory of its own (a pid of the
    second may be one of the first's)."""
    segments = defaultdict(dict)
    for preload, settings in (("with", ()), ("without", WITHOUT_LIBRARY)):
        server_dir = out_dir / f"hooks-{preload}"
        run(["install", "-d", "-o", "postgres", "-g", "postgres", server_dir])
        with callgrind_server(cluster, server_dir, settings):
            for kind, (label, statement) in HOOKED_STATEMENTS.items():
                log(f"statements under callgrind: {label}, library {preload}")
                prefix = f"{kind}_{preload}"
                psql(cluster, DDL_WITHOUT, HOOKED_SETUP.format(probe=f"{prefix}_probe"))
                pid = psql(cluster, DDL_WITHOUT,
                           hooked_script(statement, count, prefix)).split()[0]
                dumps = numbered_dumps(server_dir / f"server.{pid}")
                if len(dumps) != 1 + DDL_MARKER_RUNS + count:
                    raise RuntimeError(f"backend {pid} wrote {len(dumps)} dumps, not "
                                       f"{1 + DDL_MARKER_RUNS + count}")
                segments[kind][preload] = {
                    "markers": [parse_callgrind(dump)["total"]
                                for dump in dumps[1:1 + DDL_MARKER_RUNS]],
                    "statements": [parse_callgrind(dump)["total"]
                                   for dump in dumps[1 + DDL_MARKER_RUNS:]]}
    return dict(segments)


def measure_first_ids(cluster, out_dir, keys, reps):
    """Per keyed database: the total instructions of new backends of the running server (the
    postmaster under callgrind), one running `SELECT 1` and one per function's first call,
    `reps` runs each, alternating. A connection that ran each once comes first, as on any
    server that served a connection before: it sets hint bits, writes PostgreSQL's relcache
    init file and fills what the server keeps for later backends (the extension's directory).
    As `nextval()` writes WAL once per 32 values, the extension raises each database's floor
    relation once per half `snowflake_id.reserve_ahead`: with the default 1 s, the slow
    backends under callgrind would each make that write, which a server's connections share.
    So the server runs with FIRST_ID_RESERVE_AHEAD, and the floor the warm-up connection wrote
    covers the measured ones, as nextval()'s WAL record covers them."""
    statements = {"select_1": "SELECT 1;\n", **{key: f"SELECT {EXPR[key]};\n" for key in keys}}
    totals = {}
    settings = ["-c", f"snowflake_id.reserve_ahead={FIRST_ID_RESERVE_AHEAD}"]
    with callgrind_server(cluster, out_dir, settings):
        for count in KEYED_TABLE_COUNTS:
            database = keyed_database(count)
            psql(cluster, database, "".join(statements.values()))
            samples = defaultdict(list)
            for rep in range(reps):
                for key in rotated(list(statements), rep):
                    pid = psql(cluster, database,
                               "SELECT pg_backend_pid();\n" + statements[key]).split()[0]
                    samples[key].append(backend_total(out_dir, pid))
                log(f"first IDs in {database}, run {rep + 1}/{reps}: " + ", ".join(
                    f"{key} {values[-1]:,}" for key, values in samples.items()))
            totals[database] = dict(samples)
    return totals


def backend_total(out_dir, pid, timeout=120):
    """The instructions of server backend `pid` from its fork to its exit: what callgrind wrote
    when it exited (out_dir/server.<pid>), waited for."""
    out_file = out_dir / f"server.{pid}"
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() or not out_file.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"backend {pid} did not exit and write {out_file}")
        time.sleep(0.1)
    return parse_callgrind(out_file)["total"]


def measure_per_id(cluster, out_dir, keys, n):
    """Per function (and the bare loop): the counts of the statements making n and 2n IDs."""
    keys = ["empty"] + keys
    out_file = out_dir / "per-id.out"
    log(f"per ID under callgrind: {n:,} and {2 * n:,} IDs of each of {len(keys)} functions")
    single_user(cluster, keyed_database(0), per_id_script(keys, n), out_file,
                ["--dump-before=pg_sleep"])
    dumps = numbered_dumps(out_file)
    if len(dumps) != 1 + 2 * len(keys):
        raise RuntimeError(f"postgres --single wrote {len(dumps)} dumps, not {1 + 2 * len(keys)}")
    totals = [parse_callgrind(dump)["total"] for dump in dumps[1:]]
    return {key: {"once": totals[2 * index], "twice": totals[2 * index + 1]}
            for index, key in enumerate(keys)}


def main(description):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--bindir", required=True, help="the PostgreSQL's bin directory")
    parser.add_argument("--dir", required=True,
                        help="scratch directory for the throwaway cluster (replaced, removed)")
    parser.add_argument("--results", required=True, help="where costs.md and costs.json go")
    parser.add_argument("--quick", action="store_true",
                        help="one run per first ID, 5 DDL pairs, 10,000 IDs (the test's)")
    args = parser.parse_args()
    # SIGTERM (a test runner's timeout, kill) ends the run through the cleanup below too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(f"stopped by signal {signum}"))
    settings = SETTINGS["quick" if args.quick else "full"]
    results_dir = Path(args.results).resolve()
    results_dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(args.bindir, args.dir)
    started = time.monotonic()
    try:
        cluster.create()
        cluster.start()
        found = setup(cluster)
        cluster.stop()
        library_sha256 = sha256(found["library"])
        out_dir = cluster.dir / "callgrind"
        run(["install", "-d", "-o", "postgres", "-g", "postgres", out_dir])
        present = [key for key in available(FIRST_ID_KEYS + PER_ID_KEYS, found["major"])
                   if key != "pgedge" or found["pgedge"]]
        ddl = measure_ddl(cluster, out_dir, settings["ddl_pairs"], found["trigger_symbol"])
        hooked = measure_hooked(cluster, out_dir, settings["ddl_pairs"])
        first_ids = measure_first_ids(cluster, out_dir,
                                      [key for key in FIRST_ID_KEYS if key in present],
                                      settings["first_id_reps"])
        per_id = measure_per_id(cluster, out_dir, [key for key in PER_ID_KEYS if key in present],
                                settings["per_id_n"])
        if sha256(found["library"]) != library_sha256:
            raise RuntimeError(f"{found['library']} was replaced during the run: its figures "
                               "mix two builds")
    finally:
        cluster.stop("immediate")
        shutil.rmtree(cluster.dir, ignore_errors=True)
    results = {
        **found, "library_sha256": library_sha256, "quick": args.quick, "settings": settings,
        "seconds": round(time.monotonic() - started, 1),
        "first_id_totals": first_ids, "first_id_figures": first_id_figures(first_ids),
        "ddl_segments": ddl, "ddl_figures": ddl_figures(ddl),
        "hooked_segments": hooked, "hooked_figures": hooked_figures(hooked),
        "per_id_segments": per_id, "per_id_figures": per_id_figures(per_id, settings["per_id_n"]),
    }
    results["rows"] = rows(results)
    text = render(results)
    (results_dir / "costs.json").write_text(json.dumps(results, indent=1) + "\n")
    (results_dir / "costs.md").write_text(text)
    print(text, flush=True)
    log(f"done in {results['seconds']} s; {results_dir / 'costs.md'}")
