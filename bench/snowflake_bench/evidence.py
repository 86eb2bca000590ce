"""Evidence about the hot path: strace of a backend issuing IDs, pg_stat_activity wait events,
perf profiles and callgrind instruction counts; the collectors and their (pure) parsers."""

import re
import select
import shutil
import signal
import subprocess
import time
from collections import defaultdict
from pathlib import Path

from .benchmarks import EXPR, count_sql, pgbench_script, snowflake_stats, stats_delta
from .cluster import as_postgres, run

# --------------------------------------------------------------------------------------------
# strace

STRACE_KEYS = {"snowflake": "default", "snowflake_wide": "wide"}
STRACE_LINE = re.compile(r"(?:\d+ +)?(\d+:\d+:\d+\.\d+) (\w+)\(")
# The backend touches no file while it issues IDs except the reservation.
RESERVATION_CALLS = ("openat", "open", "write", "fsync", "fdatasync", "close",
                     "rename", "renameat", "renameat2")
SLEEP_CALLS = ("pselect6", "select", "nanosleep", "clock_nanosleep")


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


def clock_seconds(stamp):
    """Seconds since midnight of an `strace -tt` time stamp (HH:MM:SS.micro)."""
    hours, minutes, secs = stamp.split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(secs)


def parse_strace_trace(text):
    """System calls by name, reservation-file and sleep lines, and the seconds between
    reservation-file renames of an `strace -f -tt` output."""
    syscalls = defaultdict(int)
    reservation_lines = []
    sleep_lines = []
    for line in text.splitlines():
        match = STRACE_LINE.match(line)
        if not match:
            continue
        syscalls[match.group(2)] += 1
        if match.group(2) in RESERVATION_CALLS:
            reservation_lines.append(line)
        elif match.group(2) in SLEEP_CALLS:
            sleep_lines.append(line)
    renames = [re.search(r"\d+:\d+:\d+\.\d+", line).group(0) for line in reservation_lines
               if "rename" in line.split("(")[0]]
    return {
        "syscalls": dict(syscalls),
        "reservation_lines": reservation_lines,
        "sleep_lines": sleep_lines,
        "renames": len(renames),
        "intervals": [round(clock_seconds(b) - clock_seconds(a), 3)
                      for a, b in zip(renames, renames[1:])],
    }


def strace_trace_report(sql, statements, ids, seconds, trace):
    """strace-trace-*.txt: the call counts, the reservation-file lines and the first sleeps."""
    return (
        f"# strace -f -tt -p <backend> during {statements} x '{sql}' "
        f"({ids} IDs in {seconds:.2f} s).\n"
        "# Every system call of the backend in that time, by name:\n"
        + "".join(f"#   {call}: {count}\n" for call, count in sorted(
            trace["syscalls"].items(), key=lambda item: -item[1]))
        + "# Reservation-file lines (temp file, write, fsync, rename, directory fsync):\n"
        + "\n".join(trace["reservation_lines"])
        + "\n# First sleeps (pg_usleep = pselect6: snowflake_id.max_lead reached), if any:\n"
        + "\n".join(trace["sleep_lines"][:10]) + "\n")


def evidence_strace(cluster, results_dir, n, trace_seconds=4.0):
    """Per sequence: strace -c during n snowflake_nextval() calls, then a full strace -tt
    over ~trace_seconds of back-to-back calls (reservation writes, throttle sleeps)."""
    evidence = {}
    for key, name in STRACE_KEYS.items():
        found = {}
        with cluster.connect() as conn:
            pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            sql = count_sql(key, n)
            conn.execute(sql).fetchone()  # warm: worker id taken, catalog read
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

        trace = parse_strace_trace(trace_file.read_text())
        (results_dir / f"strace-trace-{name}.txt").write_text(
            strace_trace_report(sql, statements, statements * n, traced, trace))
        found.update({
            "sql": sql,
            "ids": n,
            "trace_statements": statements,
            "trace_ids": statements * n,
            "trace_seconds": traced,
            "trace_syscalls": trace["syscalls"],
            "reservation_renames": trace["renames"],
            "reservation_intervals": trace["intervals"],
            "stats_delta": stats_delta(before, after),
        })
        evidence[key] = found
    return evidence


# --------------------------------------------------------------------------------------------
# Wait events


def evidence_wait_events(cluster, keys, clients, seconds, batch):
    """pg_stat_activity wait events of pgbench sessions, sampled every 10 ms."""
    found = {}
    with cluster.connect() as conn:
        for key in keys:
            process = subprocess.Popen(
                cluster.pgbench_command(clients, seconds, pgbench_script(cluster, key)),
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


# --------------------------------------------------------------------------------------------
# perf

PERF_KEYS = ("snowflake", "snowflake_wide", "pgedge", "random")
PERF_LINE = re.compile(r"^\s+([\d.]+)%\s+(.+?)\s+\[([.k])\]\s+(.*?)\s*$")


def parse_perf_report(report):
    """The rows (share of samples, object, symbol) of `perf report --stdio --sort dso,sym`,
    in its order, and its event count (None if it reports none)."""
    rows = []
    for line in report.splitlines():
        match = PERF_LINE.match(line)
        if match:
            dso = match.group(2).replace(" (deleted)", "")
            rows.append({"share": float(match.group(1)) / 100, "dso": dso,
                         "symbol": match.group(4)})
    event_count = re.search(r"Event count \(approx\.\): (\d+)", report)
    return rows, int(event_count.group(1)) if event_count else None


def share_by_dso(rows):
    """{object: share of samples}, largest first."""
    by_dso = defaultdict(float)
    for row in rows:
        by_dso[row["dso"]] += row["share"]
    return dict(sorted(by_dso.items(), key=lambda item: -item[1]))


def perf_report_text(sql, reps, ns_per_id, wall_ns_per_id, rows):
    """perf-*.txt: the top 60 symbols."""
    return (
        f"# perf record -e cpu-clock -F 5000 -p <backend> during {reps} x '{sql}'\n"
        f"# ({ns_per_id:.0f} ns of CPU and {wall_ns_per_id:.0f} ns of wall time per ID "
        f"while recording); perf report --no-children "
        f"--sort dso,sym, top 60 lines\n"
        + "\n".join(f"{row['share'] * 100:6.2f}%  {row['dso']:<28} {row['symbol']}"
                    for row in rows[:60]) + "\n")


def evidence_perf(cluster, results_dir, n, library, reps=5):
    """Where the time goes: `perf record -e cpu-clock` on the backend during reps x n calls."""
    if shutil.which("perf") is None:
        return None
    subprocess.run(["perf", "buildid-cache", "--add", str(library)], capture_output=True)
    found = {}
    with cluster.connect() as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        for key in PERF_KEYS:
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
            rows, event_count = parse_perf_report(report)
            if not rows:
                return None
            # cpu-clock counts nanoseconds on CPU (sleeps are not sampled).
            cpu_ns = event_count if event_count is not None else elapsed * 1e9
            ns_per_id = cpu_ns / (reps * n)
            wall_ns_per_id = elapsed * 1e9 / (reps * n)
            (results_dir / f"perf-{key}.txt").write_text(
                perf_report_text(sql, reps, ns_per_id, wall_ns_per_id, rows))
            found[key] = {"ns_per_id": ns_per_id, "wall_ns_per_id": wall_ns_per_id,
                          "top": rows[:25], "by_dso": share_by_dso(rows)}
    return found


# --------------------------------------------------------------------------------------------
# callgrind

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


def function_costs(profile, function, n):
    """Instruction counts of one statement that made n IDs through the C function `function`."""
    calls = calls_to(profile, function)
    return {
        "function": function,
        "n": n,
        "calls": calls,
        "statement_ir_per_id": profile["total"] / n,
        "function_ir_per_call": inclusive(profile, function) / max(calls, 1),
        "lwlock_acquires_per_id": calls_to(profile, "LWLockAcquire") / n,
    }


def hot_path_breakdown(profile, n):
    """Ir per ID of the functions of snowflake_id.so and of what they call outside it."""
    ours = {fn for fn, obj in profile["objects"].items() if obj and obj.endswith("/snowflake_id.so")}
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


def callgrind_single_user(cluster, out_file, options, script, timeout):
    """Runs `script` in a `postgres --single` backend under callgrind with `options`; returns
    its dump files in the order they were written."""
    completed = subprocess.run(
        as_postgres(["valgrind", "--tool=callgrind", *options,
                     "--compress-strings=no", "--compress-pos=no",
                     f"--callgrind-out-file={out_file}",
                     cluster.bindir / "postgres", "--single", "-D", cluster.data,
                     "-c", "shared_buffers=64MB", "postgres"]),
        input=script, capture_output=True, text=True, timeout=timeout)
    if completed.returncode != 0:
        raise RuntimeError("callgrind run failed:\n" + completed.stderr[-3000:])
    return sorted(out_file.parent.glob(f"{out_file.name}.*"),
                  key=lambda path: int(path.name.split(".")[-1]))


# One ID per statement (key: C function): what a single-row INSERT's default pays. Each call is
# a statement of its own, 2 ms after the one before, so each of ours is the first ID of a tick.
PER_STATEMENT_FUNCTIONS = {
    "snowflake": "snowflake_nextval_wrapper",
    "nextval_c1": "nextval_oid",
    "uuid": "gen_random_uuid",
}
PER_STATEMENT_CALLS = 300


def per_statement_script(key, calls):
    """A warm-up call, a dump (before pg_backend_pid), `calls` calls 2 ms apart, a dump."""
    call = f"SELECT {EXPR[key]}"
    lines = [call, "SELECT pg_backend_pid()"]
    for _ in range(calls):
        lines += ["SELECT pg_sleep(0.002)", call]
    lines.append("SELECT pg_backend_pid()")
    return "\n".join(lines) + "\n"


def evidence_callgrind_per_statement(cluster, out_dir):
    """Instructions inside each C function per call when every call is a statement of its own
    (`postgres --single`, collecting only inside the function)."""
    results = {}
    for key, function in PER_STATEMENT_FUNCTIONS.items():
        dumps = callgrind_single_user(
            cluster, out_dir / f"statement-{key}.out",
            ["--collect-atstart=no", f"--toggle-collect={function}",
             "--dump-before=pg_backend_pid"],
            per_statement_script(key, PER_STATEMENT_CALLS), 600)
        # dump 1: the warm-up call; dump 2: the measured calls.
        results[key] = {"function": function, "calls": PER_STATEMENT_CALLS,
                        "ir_per_call": parse_callgrind(dumps[1])["total"] / PER_STATEMENT_CALLS}
    return results


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
    dumps = callgrind_single_user(cluster, out_dir / "callgrind.out",
                                  ["--dump-before=pg_sleep", "--dump-instr=no"], script, 1200)
    elapsed = time.monotonic() - started
    # dump 1: startup + warm-up; dump i+2: the statement of order[i].
    measured = dict(zip(order, dumps[1:1 + len(order)]))
    results = {"seconds": elapsed, "functions": {}}
    empty_profile = parse_callgrind(measured["empty"])
    empty_per_row = empty_profile["total"] / 100_000
    results["empty_loop_ir_per_row"] = empty_per_row
    for key, (function, n) in CALLGRIND_FUNCTIONS.items():
        profile = parse_callgrind(measured[key])
        results["functions"][key] = function_costs(profile, function, n)
        if key == "snowflake":
            results["snowflake_breakdown"] = hot_path_breakdown(profile, n)
            annotate = subprocess.run(
                ["callgrind_annotate", "--inclusive=yes", "--threshold=99.9", measured[key]],
                capture_output=True, text=True).stdout
            (results_dir / "callgrind-snowflake_nextval.txt").write_text(
                f"# callgrind_annotate --inclusive=yes of one postgres --single statement:\n"
                f"# {count_sql(key, n)}\n# (file paths trimmed; Ir = instructions executed)\n"
                + "\n".join(line[:200] for line in annotate.splitlines()[:80]) + "\n")
    results["per_statement"] = evidence_callgrind_per_statement(cluster, out_dir)
    return results
