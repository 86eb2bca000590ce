"""The sharing benchmark's figures and its report."""

import unittest

from snowflake_bench.sharing import TARGET_RATIO_AT_2, render, rows


def results(alone, shared, conflicts=0):
    """Medians of IDs per second per number of sessions, and the shared runs' counters."""
    per_second, counted = {}, {}
    for sessions in (2, 4):
        per_second[f"alone/{sessions}"] = {"median": alone[sessions], "samples": [alone[sessions]]}
        per_second[f"shared/{sessions}"] = {"median": shared[sessions],
                                            "samples": [shared[sessions]]}
        per_second[f"shared_classic/{sessions}"] = {"median": 4.096e6, "samples": [4.096e6]}
        counted[f"shared/{sessions}"] = {"tick_conflicts": conflicts, "throttle_sleeps": 0,
                                         "borrowed_ticks": 0, "ids": 2_000_000}
    return {"sessions": [2, 4], "seconds": 5, "reps": 1, "ids_per_transaction": 10_000,
            "per_second": per_second, "counters": counted}


class SharingTest(unittest.TestCase):
    def test_ratio_cost_per_session_and_target_at_two(self):
        table = rows(results({2: 4e6, 4: 4e6}, {2: 2e6, 4: 1e6}, conflicts=500))
        self.assertAlmostEqual(table[0]["ratio"], TARGET_RATIO_AT_2)
        self.assertAlmostEqual(table[0]["alone_ns"], 500.0)
        self.assertAlmostEqual(table[0]["shared_ns"], 1000.0)
        self.assertEqual(table[0]["met"], True)
        self.assertIsNone(table[1]["met"])
        self.assertAlmostEqual(table[1]["ratio"], 4.0)
        self.assertAlmostEqual(table[0]["conflicts_per_million"], 250.0)

    def test_target_missed_above_the_ratio(self):
        table = rows(results({2: 4e6, 4: 4e6}, {2: 1.9e6, 4: 4e6}))
        self.assertEqual(table[0]["met"], False)

    def test_report_has_a_row_per_number_of_sessions(self):
        text = render(results({2: 4e6, 4: 4e6}, {2: 3e6, 4: 2e6}), "17.9")
        self.assertIn("PostgreSQL 17.9", text)
        self.assertIn("| 2 | 4.00 | 3.00 | 500 | 667 | 1.33× | 0 | 0 | yes | 4.10 |", text)
        self.assertIn("| 4 | 4.00 | 2.00 |", text)


if __name__ == "__main__":
    unittest.main()
