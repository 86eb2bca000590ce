"""The connection benchmark's figures and its report."""

import unittest

from snowflake_bench.connections import TARGET_EXTRA_MS, render, rows


def results(select_1, first_id):
    """Medians of connections per second, per table count."""
    per_second = {}
    for count in (0, 500):
        per_second[f"select_1/{count}"] = {"median": select_1[count], "samples": [select_1[count]]}
        per_second[f"first_id/{count}"] = {"median": first_id[count], "samples": [first_id[count]]}
    return {"counts": [0, 500], "seconds": 5, "reps": 1, "rows_per_table": 100,
            "per_second": per_second}


class ConnectionsTest(unittest.TestCase):
    def test_extra_cost_per_connection_and_target(self):
        table = rows(results({0: 250.0, 500: 250.0}, {0: 200.0, 500: 100.0}))
        self.assertAlmostEqual(table[0]["select_1_ms"], 4.0)
        self.assertAlmostEqual(table[0]["extra_ms"], 1.0)
        self.assertAlmostEqual(table[1]["ratio"], 2.5)
        self.assertEqual([row["met"] for row in table], [False, False])

    def test_target_is_inclusive(self):
        # 4 ms and 4.5 ms per connection: exactly the allowed half millisecond more.
        table = rows(results({0: 250.0, 500: 250.0}, {0: 1000 / 4.5, 500: 250.0}))
        self.assertAlmostEqual(table[0]["extra_ms"], TARGET_EXTRA_MS)
        self.assertEqual([row["met"] for row in table], [True, True])

    def test_report_has_a_row_per_table_count(self):
        text = render(results({0: 250.0, 500: 250.0}, {0: 240.0, 500: 240.0}), "18.6")
        self.assertIn("PostgreSQL 18.6", text)
        self.assertIn("| 0 | 4.00 | 4.17 | +0.17 ms | 1.04× | yes |", text)
        self.assertIn("| 500 |", text)


if __name__ == "__main__":
    unittest.main()
