"""The targets and the rendering of latest.md."""

import copy
import json
import math
import tempfile
import unittest
from pathlib import Path

from snowflake_bench.report import (fmt_range, pgedge_section, pgedge_targets, ratio,
                                    render_markdown, tail_latency_targets, targets,
                                    write_markdown)

# Recorded runs, read only: one directory per PostgreSQL major; the tests that need one run use
# PostgreSQL 18's, which has every benchmark (uuidv7() included).
RESULTS = Path(__file__).resolve().parent.parent / "results"
RUNS = {path.parent.name: json.loads(path.read_text())
        for path in sorted(RESULTS.glob("pg*/latest.json"))}
LATEST = RUNS["pg18"]


def medians(snowflake=100.0, random=100.0, nextval_c1=250.0, insert_snowflake=1.0,
            insert_bigserial=1.0, index_snowflake=2**20, index_bigserial=2**20,
            one_session=1e6, two_sessions=2e6, wide=20.0):
    """The least results that targets() reads, every value a median (with N = 10^9, the count
    seconds read as ns per ID; the loop itself costs 0)."""
    def median(value):
        return {"median": value}

    return {
        "count": {"n": 10**9,
                  "seconds": {"snowflake": median(snowflake), "random": median(random),
                              "nextval_c1": median(nextval_c1), "empty": median(0.0),
                              "snowflake_wide": median(wide)}},
        "pgbench": {"ids_per_second": {"snowflake/1": median(one_session),
                                       "snowflake/2": median(two_sessions)}},
        "insert": {"variants": {
            "snowflake": {"seconds": median(insert_snowflake),
                          "index_bytes": median(index_snowflake)},
            "bigserial": {"seconds": median(insert_bigserial),
                          "index_bytes": median(index_bigserial)},
        }},
    }


class TargetsTest(unittest.TestCase):
    def test_all_met(self):
        rows = targets(medians())
        self.assertEqual([row["met"] for row in rows], [True] * 7)
        self.assertEqual([row["measured"] for row in rows], [1.0, 0.4, 1.0, 1.0, 2.0, 20.0, 0.08])
        self.assertEqual(rows[0]["target"], "≤ 1.25×")
        self.assertEqual(rows[4]["target"], "≥ 1.6×")
        self.assertEqual((rows[5]["target"], rows[5]["unit"]), ("≤ 30 ns", " ns"))
        self.assertEqual(rows[6]["target"], "≤ 0.2×")

    def test_bounds_are_inclusive(self):
        rows = targets(medians(snowflake=125.0, nextval_c1=250.0, insert_snowflake=1.05,
                               index_snowflake=1.01, index_bigserial=1.0, two_sessions=1.6e6,
                               wide=30.0))
        self.assertEqual([row["met"] for row in rows], [True] * 7)

    def test_not_met(self):
        rows = targets(medians(snowflake=126.0, nextval_c1=200.0, insert_snowflake=1.2,
                               index_snowflake=2 * 2**20, two_sessions=1.5e6, wide=41.0))
        self.assertEqual([row["met"] for row in rows], [False] * 7)
        self.assertAlmostEqual(rows[0]["measured"], 1.26)

    def test_zero_denominator_is_nan_and_not_met(self):
        rows = targets(medians(random=0.0, one_session=0.0))
        self.assertTrue(math.isnan(rows[0]["measured"]))
        self.assertTrue(math.isnan(rows[4]["measured"]))
        self.assertEqual([row["met"] for row in rows],
                         [False, True, True, True, False, True, True])

    def test_missing_benchmark_raises(self):
        results = medians()
        del results["pgbench"]
        with self.assertRaises(KeyError):
            targets(results)

    def test_recorded_runs(self):
        for major, run in RUNS.items():
            with self.subTest(major=major):
                self.assertEqual(targets(run), run["targets"])

def with_pgedge(results, pgedge=200.0, eight_ours=8e6, eight_pgedge=2e6, insert_pgedge=1.5,
                p999_ours=1.0, p999_pgedge=2.0):
    """`results` (from medians()) with pgEdge's figures added, every value a median."""
    def median(value):
        return {"median": value, "min": value, "max": value}

    results["count"]["seconds"]["pgedge"] = median(pgedge)
    results["count"]["wal_bytes"] = {"snowflake": median(0), "pgedge": median(2**20)}
    results["sequences"] = {
        "batch": 10_000, "seconds": 3, "reps": 3, "clients": [1, 8],
        "ids_per_second": {f"{key}/{mode}/{clients}": median(rate)
                           for key, rate in (("snowflake", eight_ours), ("pgedge", eight_pgedge))
                           for mode in ("one", "separate") for clients in (1, 8)}}
    results["insert"]["variants"]["pgedge"] = {"seconds": median(insert_pgedge),
                                               "wal_bytes": median(100 * 2**20)}
    results["insert"]["rows"] = 10**6
    variants = {"snowflake": {"p99.9": p999_ours}, "pgedge": {"p99.9": p999_pgedge}}
    results["tail_latency"] = {"normal": {"variants": variants}}
    return results


class PgedgeTargetsTest(unittest.TestCase):
    def test_absent_when_pgedge_was_not_measured(self):
        self.assertEqual(pgedge_targets(medians()), [])
        self.assertEqual(pgedge_section(medians()), [])

    def test_met(self):
        rows = pgedge_targets(with_pgedge(medians()))
        self.assertEqual([row[2] for row in rows], [0.5, 4.0, 1.0 / 1.5, 0.5])
        self.assertEqual([row[3](row[2]) for row in rows], [True] * 4)
        self.assertEqual([row[1] for row in rows], ["≤ 0.5×", "≥ 2.0×", "≤ 1.0×", "≤ 1.00×"])

    def test_not_met(self):
        rows = pgedge_targets(with_pgedge(medians(), pgedge=150.0, eight_pgedge=5e6,
                                          insert_pgedge=0.9, p999_pgedge=0.5))
        self.assertEqual([row[3](row[2]) for row in rows], [False] * 4)

    def test_section(self):
        text = "\n".join(pgedge_section(with_pgedge(medians())))
        self.assertIn("| snowflake_nextval() | one | 8.00 (8.00–8.00) | 8.00 (8.00–8.00) |", text)
        self.assertIn("| pgEdge snowflake.nextval() | one per session | 2.00 (2.00–2.00) |", text)
        # WAL: 1 MiB over 10^9 IDs is 1 KB per million; 100 MiB over 10^6 rows, 100 MB.
        self.assertIn("| pgEdge snowflake.nextval() | 1.0 KB | 100.0 MB |", text)
        self.assertIn("| snowflake_nextval() | 0.0 KB | – |", text)


class TailLatencyTargetsTest(unittest.TestCase):
    def results(self, snowflake, bigserial, fdatasync_ms=0.1):
        def run(p999, maximum):
            return {"p99.9": p999, "max": maximum}

        variants = {"snowflake": run(*snowflake), "bigserial": run(*bigserial)}
        return {"tail_latency": {"slow_fsync_us": 20000, "fdatasync_ms": fdatasync_ms,
                                 "normal": {"variants": variants},
                                 "slow_fsync": {"variants": variants}}}

    @staticmethod
    def evaluated(rows):
        """The rows as targets() reports them."""
        return [{"target": row[1], "measured": row[2], "met": row[3](row[2]),
                 "unit": row[4] if len(row) == 5 else "×"} for row in rows]

    def test_met_within_one_reservation_write(self):
        # One reservation write: 3 × (0.1 ms) normally, 3 × (0.1 + 20) ms with the slow fsync.
        rows = self.evaluated(tail_latency_targets(self.results((2.0, 5.2), (2.0, 5.0))))
        self.assertEqual([row["met"] for row in rows], [True, True, True, True])
        self.assertEqual(rows[1]["target"], "≤ one reservation write (0.3 ms)")
        self.assertEqual(rows[3]["target"], "≤ one reservation write (60.3 ms)")
        self.assertEqual(rows[1]["unit"], " ms")
        self.assertAlmostEqual(rows[1]["measured"], 0.2)

    def test_not_met(self):
        rows = self.evaluated(tail_latency_targets(self.results((3.0, 70.0), (2.0, 5.0))))
        self.assertEqual([row["met"] for row in rows], [False, False, False, False])
        self.assertEqual(rows[0]["measured"], 1.5)

    def test_absent_without_tail_latency(self):
        self.assertEqual(tail_latency_targets({}), [])


class HelpersTest(unittest.TestCase):
    def test_ratio(self):
        self.assertEqual(ratio(3, 2), 1.5)
        self.assertTrue(math.isnan(ratio(3, 0)))

    def test_fmt_range(self):
        summary = {"median": 1.5e-7, "min": 1.2e-7, "max": 2.0e-7}
        self.assertEqual(fmt_range(summary, 1e9, 0), ("150", "120–200"))
        self.assertEqual(fmt_range(summary, 1e9, 2), ("150.00", "120.00–200.00"))


class MarkdownTest(unittest.TestCase):
    def test_golden_latest_md(self):
        # latest.md was written by the runner from the same results as latest.json: rendering
        # the JSON again must give it byte for byte (targets as saved, or evaluated anew).
        # After a change of the report, `bench/run.py --report-only` rewrites latest.md.
        for major, run in RUNS.items():
            with self.subTest(major=major):
                recorded = (RESULTS / major / "latest.md").read_text()
                self.assertEqual(render_markdown(run), recorded)
                results = copy.deepcopy(run)
                results["targets"] = targets(results)
                self.assertEqual(render_markdown(results), recorded)

    def test_write_markdown_writes_the_rendering(self):
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "latest.md"
            write_markdown(LATEST, path)
            self.assertEqual(path.read_text(), render_markdown(LATEST))

    def test_targets_table(self):
        text = render_markdown(LATEST)
        for row in LATEST["targets"]:
            met = "yes" if row["met"] else "**no**"
            self.assertIn(f"| {row['what']} | {row['target']} | {row['measured']:.2f}"
                          f"{row['unit']} | {met} |", text)
        self.assertIn("| INSERT 1M rows: snowflake vs uuidv7(), time | ≤ 0.75× |", text)

    def test_without_evidence_and_optional_fields(self):
        results = copy.deepcopy(LATEST)
        results["evidence"] = {"strace": None, "perf": None, "wait_events": None,
                               "callgrind": None, "errors": {"perf": "perf_event_open: EACCES"}}
        del results["final_stats"], results["foreign_cpu"]
        results["machine_before"].update(quiet=False, busy_processes=[], other_postmasters=[])
        text = render_markdown(results)
        for absent in ("### Instructions per ID", "### Where the time goes",
                       "clock_gettime system call", "The CPU that snowflake_nextval() adds",
                       "### Counters at the end", "CPU used by anything but this run"):
            self.assertNotIn(absent, text)
        for present in ("## Evidence: the hot path", "### System calls (strace)",
                        "### Wait events (pg_stat_activity sampled every 10 ms, pgbench "
                        "4 sessions, 3 s)",
                        "- Evidence `perf` could not be collected on this machine: "
                        "`perf_event_open: EACCES`",
                        "(1/5/15 min); other busy processes: none; other PostgreSQL clusters "
                        "running: 0 — **machine was not quiet**",
                        "![chart](latest.png)\n"):
            self.assertIn(present, text)

    def test_clock_gettime_system_calls_are_reported(self):
        results = copy.deepcopy(LATEST)
        results["evidence"]["strace"]["snowflake"]["trace_syscalls"]["clock_gettime"] = 42
        self.assertIn("**42 clock_gettime system calls** appear: this machine's clocksource "
                      "(`tsc`) has no vDSO fast path", render_markdown(results))

    def test_busy_processes_and_long_function_names(self):
        results = copy.deepcopy(LATEST)
        results["machine_before"]["busy_processes"] = [{"pid": 7, "comm": "cc1", "cpu": 0.5}]
        results["evidence"]["callgrind"]["snowflake_breakdown"][0]["function"] = "f" * 91
        text = render_markdown(results)
        self.assertIn("(1/5/15 min); other busy processes: cc1 (50%);", text)
        self.assertIn(f"| `{'f' * 87}...` | snowflake_id.so (self) |", text)

    def test_one_id_per_statement(self):
        results = copy.deepcopy(LATEST)
        results["evidence"]["callgrind"]["per_statement"] = {
            "snowflake": {"function": "snowflake_nextval_wrapper", "calls": 300,
                          "ir_per_call": 5150.3},
            "nextval_c1": {"function": "nextval_oid", "calls": 300, "ir_per_call": 3785.7},
        }
        text = render_markdown(results)
        self.assertIn("300 statements `SELECT f()`, each 2 ms after the one before", text)
        self.assertIn("| snowflake_nextval() | `snowflake_nextval_wrapper` | 5,150 | 1.36× |", text)
        self.assertIn("| nextval() CACHE 1 | `nextval_oid` | 3,786 | 1.00× |", text)

    def test_disturbed_phase(self):
        results = copy.deepcopy(LATEST)
        results["foreign_cpu"] = {"INSERT": {"seconds": 3.0, "elapsed": 20.0,
                                             "top": [{"comm": "cc1", "seconds": 2.5}]}}
        self.assertIn("per phase: INSERT 3.0 s in 20 s (cc1 2.5 s) — **disturbed**",
                      render_markdown(results))


if __name__ == "__main__":
    unittest.main()
