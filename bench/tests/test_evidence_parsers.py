"""The parsers of the evidence: perf report, callgrind output files, strace traces."""

import json
import os
import tempfile
import unittest
from pathlib import Path

from snowflake_bench.benchmarks import count_sql
from snowflake_bench.evidence import (clock_seconds, calls_to, function_costs,
                                      hot_path_breakdown, inclusive, parse_callgrind,
                                      parse_perf_report, parse_strace_trace, per_statement_script,
                                      perf_report_text, share_by_dso, strace_trace_report)

RESULTS = Path(__file__).resolve().parent.parent / "results"  # recorded runs, read only (18)
LATEST = json.loads((RESULTS / "pg18" / "latest.json").read_text())

PERF_REPORT = """\
# To display the perf.data header info, please use --header/--header-only options.
#
# Total Lost Samples: 0
#
# Samples: 3K of event 'cpu-clock'
# Event count (approx.): 750000000
#
# Overhead  Shared Object                  Symbol
# ........  .............................  ...................................
#
    40.00%  postgres                       [.] ExecInterpExpr
    25.50%  snowflake_id.so (deleted)      [.] snowflake_id::backend::issue
    15.00%  [kernel.kallsyms]              [k] do_syscall_64
    10.00%  postgres                       [.] heap_form_minimal_tuple
     9.50%  [vdso]                         [.] __vdso_clock_gettime


#
# (Tip: For a higher level overview, try: perf report --sort comm,dso)
#
"""


class PerfReportTest(unittest.TestCase):
    def test_rows_in_report_order_without_deleted_suffix(self):
        rows, _ = parse_perf_report(PERF_REPORT)
        self.assertEqual([(row["dso"], row["symbol"]) for row in rows], [
            ("postgres", "ExecInterpExpr"),
            ("snowflake_id.so", "snowflake_id::backend::issue"),
            ("[kernel.kallsyms]", "do_syscall_64"),
            ("postgres", "heap_form_minimal_tuple"),
            ("[vdso]", "__vdso_clock_gettime"),
        ])
        self.assertAlmostEqual(rows[1]["share"], 0.255)

    def test_event_count(self):
        self.assertEqual(parse_perf_report(PERF_REPORT)[1], 750_000_000)
        rows, event_count = parse_perf_report(PERF_REPORT.replace("# Event count", "# Events"))
        self.assertIsNone(event_count)
        self.assertEqual(len(rows), 5)

    def test_report_without_samples_has_no_rows(self):
        self.assertEqual(parse_perf_report("# Samples: 0\n#\n"), ([], None))

    def test_share_by_dso_sums_per_object_largest_first(self):
        by_dso = share_by_dso(parse_perf_report(PERF_REPORT)[0])
        self.assertEqual(list(by_dso), ["postgres", "snowflake_id.so", "[kernel.kallsyms]",
                                        "[vdso]"])
        self.assertAlmostEqual(by_dso["postgres"], 0.5)

    def test_text_reproduces_the_recorded_perf_files(self):
        # latest.json keeps the top 25 rows of each profile, the file the top 60.
        for key, profile in LATEST["evidence"]["perf"].items():
            with self.subTest(key=key):
                text = perf_report_text(count_sql(key, LATEST["count"]["n"]), 5,
                                        profile["ns_per_id"], profile["wall_ns_per_id"],
                                        profile["top"])
                recorded = (RESULTS / "pg18" / f"perf-{key}.txt").read_text().splitlines()
                self.assertEqual(text.splitlines(), recorded[:2 + len(profile["top"])])


class PerStatementScriptTest(unittest.TestCase):
    def test_a_warm_up_call_then_the_measured_calls_between_two_dumps(self):
        lines = per_statement_script("snowflake", 3).splitlines()
        self.assertEqual(lines[:2], ["SELECT snowflake_nextval()", "SELECT pg_backend_pid()"])
        self.assertEqual(lines[2:4], ["SELECT pg_sleep(0.002)", "SELECT snowflake_nextval()"])
        self.assertEqual(lines.count("SELECT snowflake_nextval()"), 4)
        self.assertEqual(lines.count("SELECT pg_backend_pid()"), 2)
        self.assertEqual(lines[-1], "SELECT pg_backend_pid()")


# Uncompressed callgrind output (--compress-strings=no --compress-pos=no): the wrapper of
# snowflake_id.so calls LWLockAcquire twice and clock_gettime once per ID; postgres's executor
# calls the wrapper and drandom 100 times; LWLockAcquire calls itself (recursion is not a call
# into it from outside).
CALLGRIND = """\
version: 1
creator: callgrind-3.19.0
events: Ir
ob=/usr/lib/postgresql/15/bin/postgres
fn=ExecInterpExpr
0 5000
+1 100
cfn=drandom
calls=100 0
0 3000
cfn=snowflake_nextval_wrapper
calls=100 0
0 9000
ob=/usr/lib/postgresql/15/lib/snowflake_id.so
fn=snowflake_nextval_wrapper
0 4000
cob=/usr/lib/postgresql/15/bin/postgres
cfn=LWLockAcquire
calls=200 0
0 2000
cob=/usr/lib/x86_64-linux-gnu/libc.so.6
cfn=clock_gettime
calls=100 0
0 3000
fn=snowflake_id::tiny
0 3
ob=/usr/lib/postgresql/15/bin/postgres
fn=LWLockAcquire
0 1900
cfn=LWLockAcquire
calls=7 0
0 100
fn=drandom
0 3000
ob=/usr/lib/x86_64-linux-gnu/libc.so.6
fn=clock_gettime
0 3000
"""


class CallgrindTest(unittest.TestCase):
    def setUp(self):
        handle, name = tempfile.mkstemp(suffix=".callgrind")
        os.close(handle)
        self.path = Path(name)
        self.addCleanup(self.path.unlink)
        self.path.write_text(CALLGRIND)
        self.profile = parse_callgrind(self.path)

    def test_self_cost_edges_and_objects(self):
        profile = self.profile
        self.assertEqual(profile["self"]["ExecInterpExpr"], 5100)  # "+1 100" is a cost line too
        self.assertEqual(profile["self"]["snowflake_nextval_wrapper"], 4000)
        self.assertEqual(profile["edges"][("snowflake_nextval_wrapper", "LWLockAcquire")],
                         [200, 2000])
        self.assertEqual(profile["edges"][("ExecInterpExpr", "drandom")], [100, 3000])
        self.assertEqual(profile["objects"]["snowflake_nextval_wrapper"],
                         "/usr/lib/postgresql/15/lib/snowflake_id.so")
        self.assertEqual(profile["objects"]["clock_gettime"],
                         "/usr/lib/x86_64-linux-gnu/libc.so.6")

    def test_total_is_the_totals_line_else_the_sum_of_self_costs(self):
        self.assertEqual(self.profile["total"], 5100 + 4000 + 3 + 1900 + 3000 + 3000)
        self.path.write_text(CALLGRIND + "totals: 123456\n")
        self.assertEqual(parse_callgrind(self.path)["total"], 123456)

    def test_calls_and_inclusive_cost_leave_out_recursion(self):
        self.assertEqual(calls_to(self.profile, "LWLockAcquire"), 200)
        self.assertEqual(inclusive(self.profile, "LWLockAcquire"), 1900)
        self.assertEqual(inclusive(self.profile, "snowflake_nextval_wrapper"), 4000 + 2000 + 3000)

    def test_function_costs_per_id(self):
        self.assertEqual(function_costs(self.profile, "snowflake_nextval_wrapper", 100), {
            "function": "snowflake_nextval_wrapper",
            "n": 100,
            "calls": 100,
            "statement_ir_per_id": self.profile["total"] / 100,
            "function_ir_per_call": 90.0,
            "lwlock_acquires_per_id": 2.0,
        })
        # A function never called: cost divided by one call, not by zero.
        self.assertEqual(function_costs(self.profile, "nextval_oid", 100)["calls"], 0)

    def test_hot_path_breakdown(self):
        rows = hot_path_breakdown(self.profile, 100)
        # snowflake_id::tiny (0.03 Ir per ID) is below the 0.05 threshold.
        self.assertEqual(rows, [
            {"function": "snowflake_nextval_wrapper", "where": "snowflake_id.so (self)",
             "calls_per_id": 1.0, "ir_per_id": 40.0},
            {"function": "clock_gettime", "where": "libc.so.6 (inclusive)",
             "calls_per_id": 1.0, "ir_per_id": 30.0},
            {"function": "LWLockAcquire", "where": "postgres (inclusive)",
             "calls_per_id": 2.0, "ir_per_id": 20.0},
        ])


class StraceTest(unittest.TestCase):
    RECORDED = (RESULTS / "pg18" / "strace-trace-default.txt").read_text()
    # The trace lines the recorded file kept: every reservation-file line and the first sleeps.
    TRACE_LINES = [line for line in RECORDED.splitlines() if line[:1].isdigit()]

    def test_clock_seconds(self):
        self.assertAlmostEqual(clock_seconds("05:00:23.795227"), 5 * 3600 + 23.795227)

    def test_classifies_calls_and_ignores_other_lines(self):
        text = "\n".join([
            "15000 05:00:23.344009 pselect6(0, NULL, NULL, NULL, {tv_sec=0}, NULL) = 0",
            "05:00:23.400000 brk(NULL) = 0x55",  # without -f: no pid column
            "15000 05:00:23.500000 --- SIGINT {si_signo=SIGINT} ---",
            "15000 05:00:23.600000 +++ exited with 0 +++",
            "15000 05:00:23.795435 write(23, \"x\", 1) = 1",
            "15000 05:00:23.796441 rename(\"a.tmp\", \"a\") = 0",
            "15000 05:00:24.796791 rename(\"a.tmp\", \"a\") = 0",
        ])
        trace = parse_strace_trace(text)
        self.assertEqual(trace["syscalls"], {"pselect6": 1, "brk": 1, "write": 1, "rename": 2})
        self.assertEqual(len(trace["reservation_lines"]), 3)
        self.assertEqual(len(trace["sleep_lines"]), 1)
        self.assertEqual(trace["renames"], 2)
        self.assertEqual(trace["intervals"], [1.0])

    def test_recorded_trace_gives_the_recorded_renames(self):
        trace = parse_strace_trace("\n".join(self.TRACE_LINES))
        recorded = LATEST["evidence"]["strace"]["snowflake"]
        self.assertEqual(trace["renames"], recorded["reservation_renames"])
        self.assertEqual(trace["intervals"], recorded["reservation_intervals"])
        self.assertEqual(len(trace["sleep_lines"]), 10)

    def test_report_reproduces_the_recorded_file(self):
        for key, name in (("snowflake", "default"), ("snowflake_wide", "wide")):
            with self.subTest(key=key):
                recorded_text = (RESULTS / "pg18" / f"strace-trace-{name}.txt").read_text()
                lines = [line for line in recorded_text.splitlines() if line[:1].isdigit()]
                # The call counts of the whole trace are in latest.json, not in the kept lines.
                st = LATEST["evidence"]["strace"][key]
                trace = dict(parse_strace_trace("\n".join(lines)), syscalls=st["trace_syscalls"])
                self.assertEqual(
                    strace_trace_report(st["sql"], st["trace_statements"], st["trace_ids"],
                                        st["trace_seconds"], trace),
                    recorded_text)


if __name__ == "__main__":
    unittest.main()
