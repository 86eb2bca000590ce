"""latest.md: the targets (docs/benchmarks.md) evaluated on the results, and every table of the run.

Pure: takes the results dictionary that bench/run.py saves as latest.json, reads nothing else.
render_markdown() is the concatenation of one function per section, in the report's order.
"""

from .benchmarks import (FUNCTIONS, ID_FUNCTIONS, INSERT_VARIANTS, LABEL, LAST_HOUR_QUERIES,
                         count_sql)
from .evidence import PERF_KEYS

# The targets (docs/benchmarks.md; ratios of medians in the same run).
TARGET_VS_RANDOM = 1.25
TARGET_VS_NEXTVAL_CACHE1 = 0.5
TARGET_INSERT_VS_BIGSERIAL = 1.05
TARGET_TWO_SESSIONS = 1.6
TARGET_INSERT_VS_UUIDV7 = 0.75
TARGET_WIDE_NET_NS = 30
TARGET_WIDE_VS_NEXTVAL_NET = 0.2
# Against pgEdge's snowflake.nextval(), our closest peer (issue 25).
TARGET_VS_PGEDGE_NET = 0.5
TARGET_VS_PGEDGE_EIGHT_SESSIONS = 2.0
TARGET_INSERT_VS_PGEDGE = 1.0
TARGET_P999_VS_PGEDGE = 1.0


def ratio(a, b):
    return a / b if b else float("nan")


def targets(results):
    """Each target with what it wants, the measured ratio and whether it is met (a ratio whose
    denominator is 0 is NaN, never met)."""
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
    n = results["count"]["n"]
    wide_net_ns = (count["snowflake_wide"]["median"] - count["empty"]["median"]) * 1e9 / n
    nextval_net_ns = (count["nextval_c1"]["median"] - count["empty"]["median"]) * 1e9 / n
    rows += [
        ("snowflake_nextval('wide') (not capped): cost per ID above the loop",
         f"≤ {TARGET_WIDE_NET_NS} ns", wide_net_ns, lambda v: v <= TARGET_WIDE_NET_NS, " ns"),
        ("snowflake_nextval('wide') vs nextval() CACHE 1, cost per ID above the loop",
         f"≤ {TARGET_WIDE_VS_NEXTVAL_NET}×", ratio(wide_net_ns, nextval_net_ns),
         lambda v: v <= TARGET_WIDE_VS_NEXTVAL_NET),
    ]
    if "uuidv7" in ins:
        rows.append(("INSERT 1M rows: snowflake vs uuidv7(), time",
                     f"≤ {TARGET_INSERT_VS_UUIDV7}×",
                     ratio(ins["snowflake"]["seconds"]["median"],
                           ins["uuidv7"]["seconds"]["median"]),
                     lambda v: v <= TARGET_INSERT_VS_UUIDV7))
    rows += tail_latency_targets(results)
    rows += pgedge_targets(results)
    return [{"what": what, "target": target, "measured": value, "met": bool(check(value)),
             "unit": unit}
            for what, target, value, check, unit in
            (row if len(row) == 5 else (*row, "×") for row in rows)]


def reservation_write_ms(tail, mode):
    """What one reservation write costs on this disk: three syncs (the WAL flush, the file and
    its directory), each as long as pg_test_fsync's fdatasync, plus the injected delay."""
    fsync_ms = tail.get("fdatasync_ms") or 0.0
    delay_ms = tail["slow_fsync_us"] / 1e3 if mode == "slow_fsync" else 0.0
    return 3 * (fsync_ms + delay_ms)


def tail_latency_targets(results):
    """Per fsync setting: snowflake's p99.9 against bigserial's, and the gap between their
    maxima against one reservation write."""
    tail = results.get("tail_latency") or {}
    rows = []
    for mode, title in TAIL_MODES:
        variants = (tail.get(mode) or {}).get("variants")
        if not variants:
            continue
        snow, big = variants["snowflake"], variants["bigserial"]
        allowed = reservation_write_ms(tail, mode)
        rows.append((f"single-row INSERT, 8 sessions{title}: p99.9 latency, snowflake vs "
                     "bigserial", "≤ 1.00×", ratio(snow["p99.9"], big["p99.9"]),
                     lambda v: v <= 1.0))
        rows.append((f"single-row INSERT, 8 sessions{title}: max latency, snowflake − bigserial",
                     f"≤ one reservation write ({allowed:.1f} ms)", snow["max"] - big["max"],
                     lambda v, allowed=allowed: v <= allowed, " ms"))
    return rows


def pgedge_targets(results):
    """Ours against pgEdge's snowflake.nextval(), when the run measured it: net cost per ID, 8
    sessions on one sequence, the 1M-row INSERT and the p99.9 of single-row INSERTs."""
    count = results["count"]["seconds"]
    if "pgedge" not in count:
        return []
    n = results["count"]["n"]
    empty = count["empty"]["median"]
    net = {key: (count[key]["median"] - empty) * 1e9 / n for key in ("snowflake", "pgedge")}
    rows = [("snowflake_nextval() vs pgEdge snowflake.nextval(), cost per ID above the loop",
             f"≤ {TARGET_VS_PGEDGE_NET}×", ratio(net["snowflake"], net["pgedge"]),
             lambda v: v <= TARGET_VS_PGEDGE_NET)]
    ips = (results.get("sequences") or {}).get("ids_per_second", {})
    if "snowflake/one/8" in ips and "pgedge/one/8" in ips:
        rows.append(("8 sessions on one sequence: ours vs pgEdge's, IDs/s",
                     f"≥ {TARGET_VS_PGEDGE_EIGHT_SESSIONS}×",
                     ratio(ips["snowflake/one/8"]["median"], ips["pgedge/one/8"]["median"]),
                     lambda v: v >= TARGET_VS_PGEDGE_EIGHT_SESSIONS))
    ins = results["insert"]["variants"]
    rows.append(("INSERT 1M rows: snowflake vs pgEdge, time", f"≤ {TARGET_INSERT_VS_PGEDGE}×",
                 ratio(ins["snowflake"]["seconds"]["median"],
                       ins["pgedge"]["seconds"]["median"]),
                 lambda v: v <= TARGET_INSERT_VS_PGEDGE))
    tail = results.get("tail_latency") or {}
    for mode, title in TAIL_MODES:
        variants = (tail.get(mode) or {}).get("variants") or {}
        if "pgedge" in variants:
            rows.append((f"single-row INSERT, 8 sessions{title}: p99.9 latency, snowflake vs "
                         "pgEdge", f"≤ {TARGET_P999_VS_PGEDGE:.2f}×",
                         ratio(variants["snowflake"]["p99.9"], variants["pgedge"]["p99.9"]),
                         lambda v: v <= TARGET_P999_VS_PGEDGE))
    return rows


def fmt_range(s, scale, digits):
    """(median, "min–max") of a summary, scaled and rounded alike."""
    return (f"{s['median'] * scale:.{digits}f}",
            f"{s['min'] * scale:.{digits}f}–{s['max'] * scale:.{digits}f}")


def sessions(clients):
    return f"{clients} session{'s' if clients > 1 else ''}"


def header_section(results):
    info = results["machine"]
    out = [
        "# snowflake_id benchmarks — latest run\n",
        "Written by `bash bench/run.sh` (as root on Debian 12; see bench/README.md). "
        "All numbers come from one run, in which the benchmarks alternate between the compared "
        "functions in every repetition. Benchmarks are not tests: nothing fails on a timing.\n",
        f"- Date: {results['started']} (UTC); runner wall time {results['runtime_seconds']:.0f} s",
        f"- Machine: {info['cpu']}, {info['cpus']} CPUs, {info['memory_gb']} GB RAM, Linux "
        f"{info['kernel']}, clocksource `{info['clocksource']}`",
        f"- PostgreSQL {results['server_version']}; snowflake_id at commit {info['commit']}, "
        f"release build (`cargo pgrx install --release`), library sha256 "
        f"`{results['library_sha256'][:16]}…` (checked against the postmaster's mapping)",
        "- Cluster: throwaway, Unix socket only; shared_buffers 512MB, work_mem 256MB "
        "(generate_series stays in memory), jit off, autovacuum off, max_wal_size 8GB, "
        "fsync and synchronous_commit on (defaults)",
    ]
    phases = results.get("foreign_cpu")
    if phases:
        parts = []
        for name, phase in phases.items():
            top = ", ".join(f"{p['comm']} {p['seconds']} s" for p in phase["top"])
            share = phase["seconds"] / max(phase["elapsed"], 1e-9)
            parts.append(f"{name} {phase['seconds']} s in {phase['elapsed']:.0f} s"
                         + (f" ({top})" if top else "")
                         + (" — **disturbed**" if share > 0.05 else ""))
        out.append("- CPU used by anything but this run while it measured (growth of the CPU "
                   "time of every other process, including the children each reaped), per "
                   "phase: " + "; ".join(parts))
    for label, state in (("start", results["machine_before"]), ("end", results["machine_after"])):
        busy = ", ".join(f"{p['comm']} ({p['cpu']:.0%})" for p in state["busy_processes"])
        own = " (includes this run's own load)" if label == "end" else ""
        out.append(
            f"- Load at {label}{own}: {' / '.join(str(v) for v in state['loadavg'])} "
            f"(1/5/15 min); other busy processes: {busy or 'none'}; other PostgreSQL clusters "
            f"running: {len(state['other_postmasters'])}"
            + ("" if label == "end" or state.get("quiet") else " — **machine was not quiet**"))
    out.append("")
    return out


def targets_section(results):
    out = ["## Targets (ratios of medians in this run)\n",
           "| target | wanted | measured | met |",
           "|---|---|---|---|"]
    for row in results["targets"]:
        out.append(f"| {row['what']} | {row['target']} | {row['measured']:.2f}"
                   f"{row.get('unit', '×')} | {'yes' if row['met'] else '**no**'} |")
    out.append("")
    return out


def bounds_section(results):
    """What caps snowflake_nextval() besides CPU, and the ns per ID the targets allow."""
    count = results["count"]
    n = count["n"]
    cap = 4096 * 1000
    burst_floor_ms = n / 4096 - 100
    out = [
        "What bounds `snowflake_nextval()` besides CPU: the classic layout gives a session 4,096 "
        f"IDs per 1 ms tick, i.e. at most {cap / 1e6:.3f} M IDs/s per session sustained "
        f"({1e9 / cap:.0f} ns/ID); past `snowflake_id.max_lead` (100 ms) of borrowed ticks the "
        f"session sleeps. So {n:,} IDs in one statement cannot take less than "
        f"{max(burst_floor_ms, 0):.0f} ms ({max(burst_floor_ms, 0) * 1e6 / n:.0f} ns/ID) "
        "whatever the code costs, and one pgbench session is capped near "
        f"{cap / 1e6:.1f} M IDs/s. The `'wide'` sequence (16 sequence bits) runs the same code "
        "without that cap.\n",
    ]
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
                 f"reads{reads_text}, {lib:.0f} ns in snowflake_id.so, the rest in PostgreSQL "
                 "and the C library (the call, the error guard's sigsetjmp).")
    out.append(text + "\n")
    return out


def count_section(results):
    count = results["count"]
    n = count["n"]
    seconds = count["seconds"]
    out = [
        f"## Cost per ID: `SELECT count(f()) FROM generate_series(1, {n:,})`\n",
        f"{count['reps']} alternating repetitions in one session (after a warm-up run of each). "
        "ns/ID = statement time / N, so it includes the loop (first row); "
        "'net' subtracts the loop's median.\n",
        "| function | ns/ID median | min–max | net ns/ID | × random() | × snowflake_nextval() |",
        "|---|---|---|---|---|---|",
    ]
    empty = seconds["empty"]["median"]
    for key, label, _ in FUNCTIONS:
        if key not in seconds:
            continue  # not on this major
        s = seconds[key]
        med, rng = fmt_range(s, 1e9 / n, 0)
        net = (s["median"] - empty) * 1e9 / n
        out.append(f"| {label} | {med} | {rng} | {net:.0f} | "
                   f"{ratio(s['median'], seconds['random']['median']):.2f} | "
                   f"{ratio(s['median'], seconds['snowflake']['median']):.2f} |")
    out.append("")
    for key in ("snowflake", "snowflake_named"):
        runs = count["snowflake_stats_per_run"].get(key, [])
        if runs:
            borrowed = [r["borrowed_ticks"] for r in runs]
            sleeps = [r["throttle_sleeps"] for r in runs]
            out.append(f"- `{LABEL[key]}` runs, from `snowflake_stats()`: borrowed ticks per run "
                       f"{min(borrowed)}–{max(borrowed)}, throttle sleeps per run "
                       f"{min(sleeps)}–{max(sleeps)}.")
    out.append("")
    return out


def pgbench_section(results):
    pgb = results["pgbench"]
    ips = pgb["ids_per_second"]
    header = " | ".join(sessions(c) for c in pgb["clients"])
    out = [
        f"## Concurrent sessions (pgbench, {pgb['seconds']} s per run, "
        f"{pgb['reps']} alternating repetitions)\n",
        f"Each transaction is `SELECT count(f()) FROM generate_series(1, {pgb['batch']:,})`; "
        "IDs/s = tps × batch, over all sessions. Medians (min–max) in millions of IDs per "
        "second.\n",
        f"| function | {header} | 2 vs 1 | 4 vs 1 |",
        "|---" * (len(pgb["clients"]) + 3) + "|",
    ]
    functions = [key for key in ID_FUNCTIONS if f"{key}/1" in ips]
    for key in functions:
        cells = []
        for clients in pgb["clients"]:
            med, rng = fmt_range(ips[f"{key}/{clients}"], 1e-6, 2)
            cells.append(f"{med} ({rng})")
        one = ips[f"{key}/1"]["median"]
        out.append(f"| {LABEL[key]} | {' | '.join(cells)} | "
                   f"{ratio(ips[f'{key}/2']['median'], one):.2f}× | "
                   f"{ratio(ips[f'{key}/4']['median'], one):.2f}× |")
    out.append("")
    for key in functions:
        if not key.startswith("snowflake"):
            continue
        parts = []
        for clients in pgb["clients"]:
            runs = pgb.get("snowflake_stats_per_run", {}).get(f"{key}/{clients}", [])
            if runs:
                sleeps = [r["throttle_sleeps"] for r in runs]
                parts.append(f"{sessions(clients)} {min(sleeps)}–{max(sleeps)}")
        if parts:
            out.append(f"- `{LABEL[key]}`: throttle sleeps per run (snowflake_stats()): "
                       + ", ".join(parts) + ".")
    out.append("")
    return out


def pgedge_section(results):
    """Ours and pgEdge's side by side: sessions on one sequence or each on its own, and the WAL
    each writes per million IDs."""
    seq = results.get("sequences")
    count = results["count"]
    if not seq or "pgedge" not in count["seconds"]:
        return []
    ips = seq["ids_per_second"]
    header = " | ".join(sessions(c) for c in seq["clients"])
    out = [
        "## Beside pgEdge's snowflake.nextval()\n",
        f"pgbench, {seq['seconds']} s per run, {seq['reps']} alternating repetitions; each "
        f"transaction is `SELECT count(f()) FROM generate_series(1, {seq['batch']:,})`, with "
        "every session on one sequence (`snowflake_nextval('named')`, "
        "`snowflake.nextval('pgedge_seq')`) or each on its own (`own_<client>`, "
        "`pgedge_seq_<client>`). Medians (min–max) in millions of IDs per second, over all "
        "sessions.\n",
        f"| generator | sequences | {header} |",
        "|---|---" + "|---" * len(seq["clients"]) + "|",
    ]
    names = {"snowflake": "snowflake_nextval()", "pgedge": "pgEdge snowflake.nextval()"}
    for key, name in names.items():
        for mode in ("one", "separate"):
            cells = ["{} ({})".format(*fmt_range(ips[f"{key}/{mode}/{c}"], 1e-6, 2))
                     for c in seq["clients"]]
            out.append(f"| {name} | {'one' if mode == 'one' else 'one per session'} | "
                       + " | ".join(cells) + " |")
    out.append("")
    wal = count.get("wal_bytes", {})
    ins = results["insert"]
    out.append("WAL written per million IDs (medians):\n")
    out.append("| generator | `count(f())` of IDs alone | INSERT through the default |")
    out.append("|---|---|---|")
    for key, name in names.items():
        alone = wal.get(key, {}).get("median")
        insert = ins["variants"].get(key, {}).get("wal_bytes", {}).get("median")
        out.append(f"| {name} | "
                   + (f"{alone * 1e6 / count['n'] / 2**10:,.1f} KB" if alone is not None else "–")
                   + " | "
                   + (f"{insert * 1e6 / ins['rows'] / 2**20:,.1f} MB" if insert is not None
                      else "–")
                   + " |")
    out.append("")
    return out


def insert_section(results):
    ins = results["insert"]
    bigserial_seconds = ins["variants"]["bigserial"]["seconds"]["median"]
    out = [
        f"## INSERT of {ins['rows']:,} rows through the column default "
        f"({ins['reps']} alternating repetitions)\n",
        "`INSERT INTO t (payload) SELECT g FROM generate_series(1, N) g` into a fresh table "
        "`(id <type> PRIMARY KEY DEFAULT ..., payload integer)` after a CHECKPOINT; one "
        "autocommit statement. Sizes after the insert (pg_relation_size).\n",
        "| id column | time s median | min–max | × bigserial | table MB | PK index MB | WAL MB |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, label, _ in INSERT_VARIANTS:
        if key not in ins["variants"]:
            continue  # not on this major
        v = ins["variants"][key]
        med, rng = fmt_range(v["seconds"], 1, 2)
        out.append(f"| {label} | {med} | {rng} | "
                   f"{ratio(v['seconds']['median'], bigserial_seconds):.2f}"
                   f" | {v['heap_bytes']['median'] / 2**20:.1f}"
                   f" | {v['index_bytes']['median'] / 2**20:.1f}"
                   f" | {v['wal_bytes']['median'] / 2**20:.0f} |")
    out.append("")
    return out


def last_hour_section(results):
    lh = results["last_hour"]
    out = [
        f"## \"Last hour\" query ({lh['rows']:,} events over 30 days)\n",
        "`events (id bigint PRIMARY KEY, created_at timestamptz, payload integer)` plus an index "
        "on created_at; each id is what snowflake_nextval() makes at created_at "
        f"(checked: {lh['ids_not_matching_created_at']} ids whose snowflake_timestamp differs). "
        f"Latency = median of {lh['queries_per_rep']} executions per repetition, "
        f"{lh['reps']} alternating repetitions.\n",
        "| predicate | rows | latency µs median | min–max | index it needs |",
        "|---|---|---|---|---|",
    ]
    index_size = {
        "snowflake_pk": f"primary key, {lh['pkey_bytes'] / 2**20:.1f} MB (exists anyway)",
        "created_at": f"extra index, {lh['created_at_index_bytes'] / 2**20:.1f} MB",
        "uuidv7_pk": f"uuid primary key, {lh.get('uuidv7_pkey_bytes', 0) / 2**20:.1f} MB "
                     "(exists anyway)",
    }
    queries = [(key, label, sql) for key, label, sql in LAST_HOUR_QUERIES
               if key in lh["rows_found"]]
    for key, label, _ in queries:
        med, rng = fmt_range(lh["latency_seconds"][key], 1e6, 0)
        out.append(f"| `{label}` | {lh['rows_found'][key]} | {med} | {rng} | {index_size[key]} |")
    out.append("")
    for key, label, sql in queries:
        out.append(f"<details><summary>plan: {label}</summary>\n\n```\n{sql}\n\n"
                   f"{lh['plans'][key]}\n```\n</details>\n")
    return out


TAIL_MODES = (("normal", ""), ("slow_fsync", ", slow fsync"))


def tail_latency_section(results):
    tail = results.get("tail_latency")
    if not tail or not tail.get("normal"):
        return []
    normal = tail["normal"]
    out = [
        f"## Tail latency: single-row INSERT … RETURNING id, {normal['clients']} sessions\n",
        f"pgbench, prepared statements, `INSERT INTO t (payload) VALUES (1) RETURNING id` into "
        f"`(id <type> PRIMARY KEY DEFAULT ..., payload integer)`, {normal['seconds']} s per id "
        f"column in {normal['chunks']} alternating runs, each after one unmeasured second of the "
        "same inserts (steady state: after the other columns' runs snowflake_id's reservation "
        "has lapsed, and a burst after idleness first waits for one reservation write), every "
        "transaction's latency logged (`--log`). Meanwhile pg_stat_activity is sampled every millisecond for sessions "
        "waiting on the reservation lock (`LWLock:snowflake_id`). 'slow fsync': the server "
        f"restarted with every fsync() and fdatasync() delayed by {tail['slow_fsync_us']} µs "
        "(pgrx-tests/fixtures/slow_fsync.c, preloaded). This disk's fdatasync: "
        f"{tail.get('fdatasync_ms') or 0:.2f} ms (pg_test_fsync).\n",
        "| fsync | id column | transactions | tps median | p50 ms | p99 ms | p99.9 ms | max ms | "
        "reservation writes | samples waiting on the reservation lock |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    labels = {key: label for key, label, _ in INSERT_VARIANTS}
    for mode, title in TAIL_MODES:
        run = tail.get(mode)
        if not run:
            continue
        for key, v in run["variants"].items():
            lock = v["reservation_lock_samples"]
            out.append(f"| {title.strip(', ') or 'normal'} | {labels[key]} | {v['transactions']:,}"
                       f" | {v['tps']['median']:.0f} | {v['p50']:.2f} | {v['p99']:.2f} | "
                       f"{v['p99.9']:.2f} | {v['max']:.2f} | {v['reservation_writes']} | "
                       f"{lock['waiting']} of {lock['samples']} |")
    out.append("")
    return out


def callgrind_section(cg):
    out = [
        "### Instructions per ID (callgrind, `postgres --single` with the extension "
        "preloaded)\n",
        "Each statement `SELECT count(f()) FROM generate_series(1, N)` ran once under "
        "`valgrind --tool=callgrind` after a warm-up, one dump per statement. 'in function' "
        "is the inclusive count of the C function behind f() per call; 'statement' is the "
        f"whole statement per ID (the loop alone: {cg['empty_loop_ir_per_row']:.0f} per row). "
        "LWLockAcquire calls per ID count every lightweight lock taken in the statement.\n",
        "| function | C function | N | Ir in function per call | Ir per ID, statement | "
        "LWLockAcquire per ID |",
        "|---|---|---|---|---|---|",
    ]
    for key, row in cg["functions"].items():
        out.append(f"| {LABEL[key]} | `{row['function']}` | {row['n']:,} | "
                   f"{row['function_ir_per_call']:.0f} | {row['statement_ir_per_id']:.0f} | "
                   f"{row['lwlock_acquires_per_id']:.5f} |")
    out += [
        "",
        "Breakdown of `snowflake_nextval()` per ID: self cost of every function of "
        "snowflake_id.so, and inclusive cost of each function outside it that those call "
        "(callgrind-snowflake_nextval.txt has the annotated profile).\n",
        "| function | where | calls per ID | Ir per ID |",
        "|---|---|---|---|",
    ]
    for row in cg["snowflake_breakdown"][:25]:
        name = row["function"]
        if len(name) > 90:
            name = name[:87] + "..."
        out.append(f"| `{name}` | {row['where']} | {row['calls_per_id']:.3f} | "
                   f"{row['ir_per_id']:.1f} |")
    out.append("")
    if cg.get("per_statement"):
        out += per_statement_section(cg["per_statement"])
    return out


def per_statement_section(rows):
    """One ID per statement: instructions inside each C function per call."""
    nextval = rows.get("nextval_c1", {}).get("ir_per_call")
    out = [
        "One ID per statement, as a single-row INSERT's default makes it: "
        f"{next(iter(rows.values()))['calls']} statements `SELECT f()`, each 2 ms after the one "
        "before (so each of ours is the first ID of a tick), after a warm-up call; instructions "
        "counted only inside the C function.\n",
        "| function | C function | Ir per call | vs `nextval()` CACHE 1 |",
        "|---|---|---|---|",
    ]
    for key, row in rows.items():
        ratio = f"{row['ir_per_call'] / nextval:.2f}×" if nextval else ""
        out.append(f"| {LABEL[key]} | `{row['function']}` | {row['ir_per_call']:,.0f} | "
                   f"{ratio} |")
    out.append("")
    return out


def perf_section(perf, n):
    keys = [key for key in PERF_KEYS if key in perf]
    out = [
        "### Where the time goes (perf record -e cpu-clock on the backend)\n",
        f"5 × `{count_sql('snowflake', n)}`, the same with 'wide', pgEdge's and random(), sampled "
        "at 5 kHz (perf-*.txt have the top symbols). Share of the backend's CPU time by "
        "object, and the ns of CPU per ID it stands for (cpu-clock does not count sleeps; "
        "wall time per ID: " + ", ".join(
            f"{LABEL[key].split(':')[0]} {perf[key]['wall_ns_per_id']:.0f} ns"
            for key in keys) + "):\n",
    ]
    dsos = []
    for key in keys:
        for dso in perf[key]["by_dso"]:
            if dso not in dsos:
                dsos.append(dso)
    out.append("| object | " + " | ".join(LABEL[key].split(":")[0] for key in keys) + " |")
    out.append("|---" * (len(keys) + 1) + "|")
    for dso in dsos:
        cells = []
        for key in keys:
            share = perf[key]["by_dso"].get(dso, 0.0)
            cells.append(f"{share:.1%} ({share * perf[key]['ns_per_id']:.0f} ns)")
        out.append(f"| {dso} | " + " | ".join(cells) + " |")
    out += [
        "| **all (CPU)** | " + " | ".join(f"100% ({perf[key]['ns_per_id']:.0f} ns)"
                                         for key in keys) + " |",
        "",
        "Top symbols of `snowflake_nextval()` (share of CPU time, ns per ID):\n",
        "| share | ns/ID | object | symbol |",
        "|---|---|---|---|",
    ]
    for row in perf["snowflake"]["top"][:15]:
        out.append(f"| {row['share']:.1%} | {row['share'] * perf['snowflake']['ns_per_id']:.1f}"
                   f" | {row['dso']} | `{row['symbol'][:80]}` |")
    out.append("")
    return out


def strace_section(strace, clocksource):
    out = [
        "### System calls (strace)\n",
        "Per sequence, in a warm session: `strace -c -f -p <backend pid>` during one statement, "
        "then `strace -f -tt` over a few seconds of back-to-back statements "
        "(strace-count-*.txt, strace-trace-*.txt). pselect6 is `pg_usleep`: a throttle sleep "
        "after `snowflake_id.max_lead` of borrowed ticks; brk, recvfrom/sendto and epoll_wait are "
        "the executor's memory for generate_series and the client protocol, once per "
        "statement.\n",
    ]
    for key, st in strace.items():
        delta = st["stats_delta"]
        out += [
            f"**`{st['sql']}`** ({LABEL[key]}): {st['seconds_under_strace'] * 1e3:.0f} ms under "
            f"strace, {st['seconds_without_strace'] * 1e3:.0f} ms without.\n",
            "```\n" + st["count_summary"].strip() + "\n```\n",
            f"Full trace over {st['trace_seconds']:.1f} s: {st['trace_statements']} statements, "
            f"{st['trace_ids']:,} IDs "
            f"({st['trace_ids'] / st['trace_seconds'] / 1e6:.2f} M IDs/s), "
            f"{sum(st['trace_syscalls'].values())} system calls: "
            + ", ".join(f"{call} {count}" for call, count in sorted(
                st["trace_syscalls"].items(), key=lambda item: -item[1]))
            + f". Reservation file replaced {st['reservation_renames']} times, at intervals of "
            f"{', '.join(f'{v:.2f}' for v in st['reservation_intervals']) or '–'} s. "
            f"snowflake_stats() over the whole test: {delta['throttle_sleeps']} throttle sleeps, "
            f"{delta['borrowed_ticks']} borrowed ticks, {delta['reservation_writes']} "
            "reservation writes.\n",
        ]
    if strace:
        clock_calls = sum(st["trace_syscalls"].get("clock_gettime", 0) for st in strace.values())
        if clock_calls == 0:
            out.append("No clock_gettime system call appears anywhere: the clocks are read "
                       f"through the vDSO (clocksource `{clocksource}`), without entering the "
                       "kernel.\n")
        else:
            out.append(f"**{clock_calls} clock_gettime system calls** appear: this machine's "
                       f"clocksource (`{clocksource}`) has no vDSO fast path, so every clock "
                       "read enters the kernel.\n")
    return out


def wait_events_section(we):
    out = [
        f"### Wait events (pg_stat_activity sampled every 10 ms, pgbench "
        f"{we['clients']} sessions, {we['seconds']} s)\n",
        "'no wait event' means running on CPU, or sleeping in pg_usleep (the throttle sleep "
        "reports no wait event).\n",
        "| function | samples by wait event of the active pgbench sessions |",
        "|---|---|",
    ]
    for key, samples in we["samples"].items():
        out.append(f"| {LABEL[key]} | " + ", ".join(
            f"{event}: {count}" for event, count in sorted(samples.items(),
                                                          key=lambda item: -item[1])) + " |")
    out.append("")
    return out


def evidence_section(results):
    ev = results["evidence"]
    out = ["## Evidence: the hot path\n"]
    if ev.get("callgrind"):
        out += callgrind_section(ev["callgrind"])
    if ev.get("perf"):
        out += perf_section(ev["perf"], results["count"]["n"])
    out += strace_section(ev.get("strace") or {}, results["machine"]["clocksource"])
    out += wait_events_section(ev.get("wait_events")
                               or {"clients": 4, "seconds": 3, "samples": {}})
    for name, error in (ev.get("errors") or {}).items():
        out.append(f"- Evidence `{name}` could not be collected on this machine: "
                   f"`{error[-300:]}`")
    return out


def footer_section(results):
    out = []
    final = results.get("final_stats")
    if final:
        out += ["### Counters at the end of the benchmarks (`snowflake_stats()`)\n",
                ", ".join(f"{name} = {value}" for name, value in final.items()) + "\n"]
    out.append("![chart](latest.png)\n")
    return out


SECTIONS = [header_section, targets_section, bounds_section, count_section, pgbench_section,
            pgedge_section, insert_section, last_hour_section, tail_latency_section, evidence_section,
            footer_section]


def render_markdown(results):
    """latest.md of `results` (with results["targets"] already evaluated)."""
    return "\n".join(line for section in SECTIONS for line in section(results))


def write_markdown(results, path):
    path.write_text(render_markdown(results))
