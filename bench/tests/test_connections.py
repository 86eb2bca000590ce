"""The connection benchmark's figures and its report."""

import unittest

from snowflake_bench.connections import render, rows


def results(select_1, first_id, nextval):
    """Medians of connections per second, per table count."""
    per_second = {}
    for count in (0, 500):
        for key, rates in (("select_1", select_1), ("first_id", first_id), ("nextval", nextval)):
            per_second[f"{key}/{count}"] = {"median": rates[count], "samples": [rates[count]]}
    return {"counts": [0, 500], "seconds": 5, "reps": 1, "rows_per_table": 100,
            "per_second": per_second}


class ConnectionsTest(unittest.TestCase):
    def test_extra_cost_per_connection_against_nextval(self):
        # 4 ms per connection for SELECT 1; the first ID 5 ms (0) and 10 ms (500); nextval 4.5 ms.
        table = rows(results({0: 250.0, 500: 250.0}, {0: 200.0, 500: 100.0},
                             {0: 1000 / 4.5, 500: 1000 / 4.5}))
        self.assertAlmostEqual(table[0]["select_1_ms"], 4.0)
        self.assertAlmostEqual(table[0]["extra_ms"], 1.0)
        self.assertAlmostEqual(table[0]["nextval_extra_ms"], 0.5)
        self.assertAlmostEqual(table[0]["extra_ratio"], 2.0)
        self.assertAlmostEqual(table[1]["rate_share"], 0.4)
        self.assertEqual([row["met"] for row in table], [False, False])

    def test_both_targets_are_inclusive(self):
        # SELECT 1 at 4 ms; the first ID and nextval() both at 4.2 ms: ratio 1.0, rate 0.952.
        table = rows(results({0: 250.0, 500: 250.0}, {0: 1000 / 4.2, 500: 1000 / 4.2},
                             {0: 1000 / 4.2, 500: 1000 / 4.2}))
        self.assertAlmostEqual(table[0]["extra_ratio"], 1.0)
        self.assertEqual([row["met"] for row in table], [True, True])

    def test_a_slow_rate_misses_even_beside_a_slow_nextval(self):
        table = rows(results({0: 250.0, 500: 250.0}, {0: 200.0, 500: 200.0},
                             {0: 150.0, 500: 150.0}))
        self.assertLess(table[0]["extra_ratio"], 1.0)
        self.assertEqual([row["met"] for row in table], [False, False])

    def test_no_extra_cost_meets_the_ratio_whatever_nextval_costs(self):
        table = rows(results({0: 250.0, 500: 250.0}, {0: 250.0, 500: 250.0},
                             {0: 260.0, 500: 260.0}))
        self.assertEqual([row["met"] for row in table], [True, True])

    def test_report_has_a_row_per_table_count(self):
        text = render(results({0: 250.0, 500: 250.0}, {0: 240.0, 500: 240.0},
                              {0: 245.0, 500: 245.0}), "18.6")
        self.assertIn("PostgreSQL 18.6", text)
        self.assertIn("| 0 | 4.00 | 4.17 | 4.08 | +0.17 ms | +0.08 ms | 2.04× | 0.96× | no |", text)
        self.assertIn("| 500 |", text)


if __name__ == "__main__":
    unittest.main()
