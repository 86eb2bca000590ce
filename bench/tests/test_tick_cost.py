"""The first ID of a tick as the server times it (snowflake_bench/tick_cost.py)."""

import unittest

from snowflake_bench.tick_cost import (PAUSES, STATEMENTS, parse_durations, parse_pauses,
                                       series_seconds, tick_cost_lines)

LOG = """2026-12-08 00:31:02.123 UTC [4242] LOG:  duration: 0.043 ms  statement: SELECT nextval('latency_bigserial_id_seq')
2026-12-08 00:31:02.133 UTC [4242] LOG:  duration: 0.046 ms  statement: SELECT nextval('latency_control_id_seq')
2026-12-08 00:31:02.143 UTC [4242] LOG:  duration: 0.060 ms  statement: SELECT snowflake_nextval()
2026-12-08 00:31:02.150 UTC [4242] LOG:  duration: 0.120 ms  statement: SELECT 1
2026-12-08 00:31:02.153 UTC [4242] LOG:  duration: 0.041 ms  statement: SELECT nextval('latency_bigserial_id_seq')
2026-12-08 00:31:02.160 UTC [4243] LOG:  checkpoint starting: time
"""


class TickCostTest(unittest.TestCase):
    def test_pauses(self):
        self.assertEqual(parse_pauses(PAUSES), [0.0, 0.0015, 0.01])
        self.assertEqual(parse_pauses(""), [])
        with self.assertRaises(ValueError):
            parse_pauses("-1")
        self.assertAlmostEqual(series_seconds([0.0, 0.0015, 0.01], 900), 10.35)

    def test_durations_of_the_three_statements_only(self):
        self.assertEqual(parse_durations(LOG),
                         {"bigserial": [43, 41], "control": [46], "snowflake": [60]})
        self.assertEqual(list(STATEMENTS), ["bigserial", "control", "snowflake"])

    def test_section(self):
        def key(p50_ms):
            return {"p50": p50_ms, "p99": p50_ms * 2, "p99.9": p50_ms * 2, "max": p50_ms * 3,
                    "samples": 300}
        series = [{"pause_ms": 10.0, "keys": {"bigserial": key(0.043), "control": key(0.046),
                                               "snowflake": key(0.057)}},
                  {"pause_ms": 0.0, "keys": {"bigserial": key(0.015), "control": {"samples": 0},
                                              "snowflake": key(0.016)}}]
        lines = tick_cost_lines(series)
        self.assertEqual(lines[1], "## The first ID of a tick, as the server times it: p50 / p99, "
                                   "µs (samples)")
        self.assertEqual(lines[-2], "| 10 | 43 / 86 (300) | 46 / 92 (300) | 57 / 114 (300) | +14 "
                                    "| +3 |")
        self.assertEqual(lines[-1], "| 0 | 15 / 30 (300) | — / — (0) | 16 / 32 (300) | +1 | — |")
        self.assertEqual(tick_cost_lines([]), [])


if __name__ == "__main__":
    unittest.main()
