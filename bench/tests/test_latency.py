"""The latency benchmark's helpers, figures and report (bench/latency.py)."""

import importlib.util
import tempfile
import unittest
from pathlib import Path

from snowflake_bench.cluster import Cluster
from snowflake_bench.latency import (CLIENTS, COLUMNS, FEW_SAMPLES, KEYS, RATES, SYNC, TARGET_RATIO,
                                     cell, quiet_spell_lines, tally,
                                     figures, idle_phase, jobs_for, parse_clients, parse_log,
                                     parse_rates, parse_sync, pgbench_command, planned_runs,
                                     planned_seconds, rate_kept, rate_label, render, renewals,
                                     reserve_ahead_seconds, rows, run_seconds, script_text,
                                     settle, split_by_key)
from snowflake_bench.standalone import knob_default
from snowflake_bench.tick_cost import PAUSES as TICK_PAUSES
from snowflake_bench.tick_cost import parse_pauses


def figure(p50, p99, samples=1000, largest=None):
    return {"p50": p50, "p99": p99, "p99.9": p99, "max": largest or p99, "samples": samples}


def run(setting="on", clients=1, rate=10.0, snowflake=(1.0, 2.0), bigserial=(1.0, 2.0),
        uuidv7=None, control=None, samples=1000, writes=10, worker_writes=8, quiet=True):
    keyed = {"bigserial": figure(*bigserial, samples), "snowflake": figure(*snowflake, samples),
             "uuid": figure(1.0, 2.0, samples)}
    if control:
        keyed["control"] = figure(*control, samples)
    if uuidv7:
        keyed["uuidv7"] = figure(*uuidv7, samples)
    delta = {"reservation_writes": writes, "reservation_worker_writes": worker_writes,
             "reservation_write_failures": 0, "ids_issued": 500}
    return {"synchronous_commit": setting, "clients": clients, "jobs": min(clients, 2),
            "rate": rate, "seconds": 30, "elapsed": 30.0,
            "settled": {"seconds": 1.5, "quiet": quiet},
            "tps": 9.9 if rate else 1234.5,
            "schedule_lag": {"mean_ms": 0.25, "max_ms": 3.0} if rate else None,
            "rate_kept": True if rate else None, "warmups_left_out": clients, "keys": keyed,
            "counters": delta, "renewals": renewals(delta, 30), "wal_flushes_per_second": 12.0,
            "foreign_cpu": {"seconds": 0.5, "elapsed": 31.0, "top": []}}


def results(runs, keys=("bigserial", "snowflake", "uuid")):
    idle_delta = {"reservation_writes": 4, "reservation_worker_writes": 4,
                  "reservation_write_failures": 0, "ids_issued": 0}
    state = {"loadavg": [0.2, 0.3, 0.4], "busy_processes": [], "other_postmasters": []}
    return {
        "settings": {"seconds": 10, "max_seconds": 80, "samples": 10,
                     "rates": sorted({r["rate"] for r in runs}, key=lambda r: r or 1e9),
                     "clients": sorted({r["clients"] for r in runs}),
                     "sync": sorted({r["synchronous_commit"] for r in runs}, reverse=True),
                     "spells": 0, "spell_seconds": 3, "idle_seconds": 120},
        "keys": list(keys), "reserve_ahead": 1.0, "server_version": "15.20",
        "library_sha256": "0123456789abcdef",
        "machine": {"cpus": 2, "cpu": "AMD EPYC", "commit": "abc1234"},
        "machine_before": {**state, "quiet": True}, "machine_after": state, "runs": runs,
        "idle": {"seconds": 120, "counters": idle_delta, "renewals": renewals(idle_delta, 120),
                 "last_renewal_after": 1.0, "foreign_cpu": {"seconds": 0.0, "top": []}},
    }


class KnobsTest(unittest.TestCase):
    def test_rates_clients_and_sync(self):
        self.assertEqual(parse_rates(RATES), [0.2, 1.0, 10.0, 100.0, 1000.0, None])
        self.assertEqual(parse_rates("0.5, unthrottled"), [0.5, None])
        self.assertRaises(ValueError, parse_rates, "0")
        self.assertEqual(parse_clients(CLIENTS), [1, 8])
        self.assertEqual(parse_sync(SYNC), ["on", "off"])
        self.assertRaises(ValueError, parse_sync, "on local")

    def test_knob_from_the_environment_or_the_default(self):
        self.assertEqual(knob_default("BENCH_LATENCY_TEST_UNSET", "1 max", parse_rates),
                         [1.0, None])
        self.assertEqual(knob_default("BENCH_LATENCY_TEST_UNSET", 10, int), 10)

    def test_rate_label_and_jobs(self):
        self.assertEqual([rate_label(r) for r in (0.2, 1.0, 1000.0, None)],
                         ["0.2", "1", "1,000", "max"])
        self.assertEqual([jobs_for(c, 2) for c in (1, 8)], [1, 2])
        self.assertEqual(jobs_for(8, None), 1)


class DurationTest(unittest.TestCase):
    def test_low_rates_run_longer_up_to_the_cap(self):
        # 10 samples for each of 3 keys and the session's warm-up, at 1/s: 31 s.
        self.assertEqual(run_seconds(1.0, 3, 1, 10, 10, 80), 31)
        self.assertEqual(run_seconds(1.0, 4, 8, 10, 10, 80), 48)
        self.assertEqual(run_seconds(0.2, 4, 1, 10, 10, 80), 80)
        self.assertEqual(run_seconds(100.0, 4, 8, 10, 10, 80), 10)
        self.assertEqual(run_seconds(None, 4, 8, 10, 10, 80), 10)
        self.assertEqual(run_seconds(0.2, 4, 1, 10, 10, 5), 10)  # the cap never shortens

    def test_default_plan(self):
        settings = {"seconds": 10, "max_seconds": 80, "samples": 10,
                    "rates": parse_rates(RATES), "clients": [1, 8], "sync": ["on", "off"],
                    "spells": 20, "spell_seconds": 3, "tick_pauses": parse_pauses(TICK_PAUSES),
                    "tick_calls": 900, "idle_seconds": 120}
        self.assertEqual(len(planned_runs(settings["sync"], settings["clients"],
                                          settings["rates"])), 24)
        # 2 × (80 + 41 + 4 × 10 + 80 + 48 + 4 × 10) + 2 × 20 × 3 + 900 × 11.5 ms + 120 with
        # 4 keys (15, 17); 1 and 8 s more at 1/s with 5 (18).
        self.assertAlmostEqual(planned_seconds(settings, 4), 908.35)
        self.assertAlmostEqual(planned_seconds(settings, 5), 948.35)


class ScriptTest(unittest.TestCase):
    def test_script_warms_every_table_in_a_sessions_first_transaction(self):
        self.assertEqual(script_text("snowflake", ["bigserial", "snowflake"]), (
            "\\if :warm\n"
            "INSERT INTO latency_snowflake (payload) VALUES (1) RETURNING id;\n"
            "\\else\n"
            "INSERT INTO latency_bigserial (payload) VALUES (1) RETURNING id;\n"
            "INSERT INTO latency_snowflake (payload) VALUES (1) RETURNING id;\n"
            "\\set warm 1\n\\endif\n"))

    def test_pgbench_command(self):
        cluster = Cluster("/usr/lib/postgresql/15/bin", "/var/tmp/bench")
        scripts = [Path("/var/tmp/bench/latency/a.sql"), Path("/var/tmp/bench/latency/b.sql")]
        command = pgbench_command(cluster, 8, 2, 30, scripts, 0.2, "/var/tmp/bench/latency/x")
        self.assertEqual(command, [
            "/usr/lib/postgresql/15/bin/pgbench", "--no-vacuum", "--host", "/var/tmp/bench",
            "--port", "54339", "--username", "postgres", "--client", "8", "--jobs", "2",
            "--time", "30", "--protocol=prepared", "--define=warm=0", "--log",
            "--log-prefix=/var/tmp/bench/latency/x", "--rate=0.2",
            "--file=/var/tmp/bench/latency/a.sql@1", "--file=/var/tmp/bench/latency/b.sql@1",
            "postgres"])
        unthrottled = pgbench_command(cluster, 1, 1, 10, scripts, None, "x")
        self.assertFalse(any(part.startswith("--rate") for part in unthrottled))


class LogTest(unittest.TestCase):
    def test_parse_log_with_and_without_the_schedule_lag(self):
        text = ("0 1 12675 0 1796226273 594908 646\n0 2 6156 2 1796226275 328124 1838\n"
                "1 1 812 1 1700000000 123456\n1 2 failed 1 1700000000 123457\n\n")
        self.assertEqual(parse_log(text), [(0, 1, 12675, 0, 646), (0, 2, 6156, 2, 1838),
                                           (1, 1, 812, 1, None)])

    def test_split_by_key_leaves_out_each_sessions_first_transaction(self):
        records = [(0, 1, 9000, 0, 10), (0, 2, 500, 1, 20), (0, 3, 400, 0, 30),
                   (1, 1, 8000, 1, 40), (1, 2, 600, 2, 50)]
        latencies, lags, warmups = split_by_key(records, ["bigserial", "snowflake", "uuid"])
        # Net of each transaction's schedule lag.
        self.assertEqual(latencies, {"bigserial": [370], "snowflake": [480], "uuid": [550]})
        self.assertEqual(lags, [20, 30, 50])
        self.assertEqual(warmups, 2)

    def test_figures(self):
        self.assertEqual(figures([]), {"samples": 0})
        self.assertEqual(figures([1000, 2000, 3000]),
                         {"p50": 2.0, "p99": 3.0, "p99.9": 3.0, "max": 3.0, "samples": 3})

    def test_rate_kept_and_renewals(self):
        self.assertIsNone(rate_kept(None, None))
        self.assertTrue(rate_kept(10.0, 0.4))
        self.assertFalse(rate_kept(1000.0, 2500.0))
        self.assertIsNone(rate_kept(1.0, None))  # only warm-ups: no lag to judge by
        self.assertEqual(renewals({"reservation_writes": 12, "reservation_worker_writes": 9}, 30),
                         {"per_minute": 24.0, "in_statements": 3,
                          "in_statements_per_minute": 6.0})


class FakeMonitor:
    """Answers snowflake_stats() with the next of `writes` (then the last one, forever), and the
    reserve_ahead query with `reserve_ahead`."""

    def __init__(self, writes, reserve_ahead=(1000.0 / 1000,)):
        self.writes = list(writes)
        self.reserve_ahead = reserve_ahead

    def execute(self, sql, params=None):
        if "pg_settings" in sql:
            row = self.reserve_ahead
        else:
            value = self.writes.pop(0) if len(self.writes) > 1 else self.writes[0]
            row = (value, value, 0, 0)
        return type("Cursor", (), {"fetchone": lambda self: row})()


class MonitorTest(unittest.TestCase):
    def test_settle_waits_for_a_quiet_reservation(self):
        settled = settle(FakeMonitor([1, 2, 3, 3]), 0.2, 5)
        self.assertTrue(settled["quiet"])
        self.assertGreaterEqual(settled["seconds"], 0.2)
        busy = settle(FakeMonitor(list(range(1000))), 0.3, 0.25)
        self.assertFalse(busy["quiet"])

    def test_idle_phase_counts_renewals(self):
        idle = idle_phase(FakeMonitor([5, 7]), 0.2)
        self.assertEqual(idle["counters"]["reservation_writes"], 2)
        self.assertEqual(idle["renewals"]["in_statements"], 0)
        self.assertEqual(idle["renewals"]["per_minute"], 600.0)
        self.assertIsNotNone(idle["last_renewal_after"])

    def test_reserve_ahead(self):
        self.assertEqual(reserve_ahead_seconds(FakeMonitor([0], (1.0,))), 1.0)
        self.assertEqual(reserve_ahead_seconds(FakeMonitor([0], None)), 1.0)


class RowsTest(unittest.TestCase):
    def test_ratios_and_target(self):
        table = rows(results([run(snowflake=(1.1, 2.2)), run(rate=None, snowflake=(1.2, 2.0)),
                              run(clients=8, snowflake=(1.0, 2.3))]))
        self.assertAlmostEqual(table[0]["ratios"]["p50"], TARGET_RATIO)
        self.assertEqual([row["met"] for row in table], [True, False, False])
        self.assertIsNone(table[0]["versus_uuidv7"])
        self.assertFalse(table[0]["few_samples"])

    def test_no_samples_and_few_samples(self):
        empty = run(rate=0.2)
        empty["keys"]["bigserial"] = {"samples": 0}
        few = run(rate=1.0, samples=FEW_SAMPLES)
        table = rows(results([empty, few]))
        self.assertIsNone(table[0]["met"])
        self.assertIsNone(table[0]["ratios"]["p50"])
        self.assertTrue(table[1]["few_samples"])

    def test_the_control_is_judged_like_snowflake(self):
        keys = ("bigserial", "control", "snowflake", "uuid")
        table = rows(results([run(control=(1.0, 2.4)), run(control=(1.05, 2.1)),
                              run(snowflake=(1.5, 2.0), control=(1.0, 2.0))], keys=keys))
        self.assertEqual(table[0]["control"], {"p50": 1.0, "p99": 1.2})
        self.assertEqual([row["control_met"] for row in table], [False, True, True])
        self.assertEqual([row["met"] for row in table], [True, True, False])
        self.assertEqual(tally(table), (3, 2, 2))
        self.assertIsNone(rows(results([run()]))[0]["control"])

    def test_the_control_is_a_second_bigserial_table(self):
        self.assertEqual(KEYS[:3], ["bigserial", "control", "snowflake"])
        self.assertEqual(COLUMNS["control"], COLUMNS["bigserial"])
        self.assertIn("INSERT INTO latency_control ", script_text("control", KEYS))

    def test_against_uuidv7_on_18(self):
        table = rows(results([run(snowflake=(1.0, 3.0), uuidv7=(2.0, 2.0))],
                             keys=("bigserial", "snowflake", "uuid", "uuidv7")))
        self.assertEqual(table[0]["versus_uuidv7"], {"p50": 0.5, "p99": 1.5})


class RenderTest(unittest.TestCase):
    def test_cell_marks_a_p99_of_few_samples(self):
        self.assertEqual(cell(figure(0.41, 1.06, 2512, 3.2)), "0.41 / 1.06 / 3.20 (2,512)")
        self.assertEqual(cell(figure(0.5, 0.9, 12)), "0.50 / 0.90† / 0.90 (12)")
        self.assertEqual(cell({"samples": 0}), "— (0)")

    def test_report(self):
        slow = run(setting="off", clients=8, rate=None, snowflake=(2.0, 4.0), quiet=False)
        text = render(results([run(rate=0.2, samples=12), run(rate=None), slow]), "15.20")
        self.assertIn("# INSERT latency at every rate (PostgreSQL 15.20)", text)
        self.assertIn("## Latency, synchronous_commit = on: p50 / p99 / max, ms (samples)", text)
        self.assertIn("| 1 | 0.2 | 1.00 / 2.00† / 2.00 (12) | 1.00 / 2.00† / 2.00 (12) |", text)
        self.assertIn("| on | 1 | 0.2 | 1.00× | 1.00×† | yes |", text)
        self.assertIn("| off | 8 | max | 2.00× | 2.00× | no |", text)
        self.assertIn("| on | 1 | 1 | 0.2 | 30 (30) | 9.9 | 0.25 / 3.0 | yes | 10 (20) | 2 (4) "
                      "| 500 | 12.0 | 0.5 |", text)
        self.assertIn("| off | 8 | 2 | max | 30 (30) | 1,234.5 | — | — |", text)
        self.assertIn("1 of 3 runs started while the reservation was still being renewed, "
                      "after 3 s of waiting (synchronous_commit/clients/rate): off/8/max.", text)
        self.assertIn("Idle: 120 s without an ID after the last run: 4 renewals (2.0 per "
                      "minute), 4 of them by the reservation worker", text)
        self.assertNotIn("uuidv7", text)
        self.assertIn("snowflake_id.so sha256 0123456789ab…; load 0.2 before (quiet; busy "
                      "processes: none)", text)

    def test_report_says_so_when_no_run_found_the_reservation_quiet(self):
        text = render(results([run(quiet=False), run(rate=None, quiet=False)]), "17.7")
        self.assertIn("Every run started while the reservation was still being renewed, after "
                      "3 s of waiting.", text)

    def test_report_shows_the_controls_ratios_and_the_tally(self):
        keys = ("bigserial", "control", "snowflake", "uuid")
        text = render(results([run(control=(1.0, 2.4)), run(rate=None, control=(1.0, 2.0))],
                              keys=keys), "15.20")
        self.assertIn("| target ≤ 1.1× met | control p50 / p99 ratio | control within the "
                      "target |", text)
        self.assertIn("| on | 1 | 10 | 1.00× | 1.00× | yes | 1.00× / 1.20× | no |", text)
        self.assertIn("Of the 2 runs with samples of every key, snowflake is within 1.1× of "
                      "bigserial in 2, and bigserial's own second table (the control: the same "
                      "key, so only the machine's noise differs) in 1.", text)

    def test_report_on_18_compares_with_uuidv7(self):
        text = render(results([run(uuidv7=(0.5, 1.0))],
                              keys=("bigserial", "snowflake", "uuid", "uuidv7")), "18.1")
        self.assertIn("| p50 vs uuidv7() | p99 vs uuidv7() |", text)
        self.assertIn("| on | 1 | 10 | 1.00× | 1.00× | 2.00× | 2.00× | yes |", text)


@unittest.skipUnless(importlib.util.find_spec("matplotlib"), "matplotlib is not installed")
class ChartTest(unittest.TestCase):
    def test_chart_is_written(self):
        from snowflake_bench.chart import write_latency_chart

        empty = run(rate=0.2, control=(1.0, 2.0))
        empty["keys"]["uuid"] = {"samples": 0}
        measured = results([empty, run(rate=None, control=(1.0, 2.0)),
                            run(clients=8, rate=None, control=(1.0, 2.0))],
                           keys=("bigserial", "control", "snowflake", "uuid"))
        with tempfile.TemporaryDirectory() as directory:
            path = Path(directory) / "latency.png"
            write_latency_chart(measured, path)
            self.assertGreater(path.stat().st_size, 10_000)


if __name__ == "__main__":
    unittest.main()


class QuietSpellsTest(unittest.TestCase):
    def spell(self, setting, snowflake_ms, bigserial_ms):
        def key(ms):
            return {"p50": ms, "p99": ms * 2, "p99.9": ms * 2, "max": ms * 3, "samples": 20}
        return {"synchronous_commit": setting, "rounds": 20, "spell_seconds": 3,
                "keys": {"bigserial": key(bigserial_ms), "snowflake": key(snowflake_ms),
                         "uuid": key(bigserial_ms)},
                "counters": {}, "in_statements": 0, "foreign_cpu": {"seconds": 0.0, "top": []}}

    def test_no_section_without_spells(self):
        self.assertEqual(quiet_spell_lines(results([])), [])

    def test_the_controls_ratios_beside_snowflakes(self):
        spell = self.spell("on", 3.0, 1.5)
        spell["keys"]["control"] = dict(spell["keys"]["bigserial"], p50=3.0)
        measured = {**results([], keys=("bigserial", "control", "snowflake", "uuid")),
                    "quiet_spells": [spell]}
        lines = quiet_spell_lines(measured)
        self.assertIn("| control p50 / p99 vs bigserial | renewals in statements |", lines[5])
        self.assertTrue(lines[-1].endswith("| 2.00× / 2.00× | 2.00× / 1.00× | 0 |"), lines[-1])

    def test_each_setting_a_row_with_its_ratios(self):
        measured = {**results([]), "quiet_spells": [self.spell("on", 3.0, 1.5),
                                                    self.spell("off", 1.0, 1.0)]}
        lines = quiet_spell_lines(measured)
        self.assertIn("20 times: 3 s without any INSERT", lines[3])
        self.assertEqual(lines[-2], "| on | 1.50 / 3.00† / 4.50 (20) | 3.00 / 6.00† / 9.00 (20) | "
                                    "1.50 / 3.00† / 4.50 (20) | 2.00× / 2.00× | 0 |")
        self.assertTrue(lines[-1].startswith("| off |"))
        self.assertTrue(lines[-1].endswith("| 1.00× / 1.00× | 0 |"))
