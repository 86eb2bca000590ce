"""The many-databases benchmark's figures and its report."""

import unittest

from snowflake_bench.databases import TARGET_RATIO, render, rows


def variant(p99, p999, largest, flushes=10.0):
    return {"p50": 0.5, "p99": p99, "p99.9": p999, "max": largest, "transactions": 1000,
            "wal_flushes_per_second": flushes}


def results(ours, theirs):
    """Quantiles (ms) of both id columns with 1 and 40 databases."""
    return {"counts": [1, 40], "seconds": 15, "reps": 2, "rows_per_second": 25,
            "variants": {"snowflake/1": variant(*ours[1]), "bigserial/1": variant(*theirs[1]),
                         "snowflake/40": variant(*ours[40]),
                         "bigserial/40": variant(*theirs[40])}}


class DatabasesTest(unittest.TestCase):
    def test_ratios_per_figure_and_target(self):
        table = rows(results({1: (1.0, 2.0, 4.0), 40: (2.0, 3.0, 30.0)},
                             {1: (1.0, 2.0, 5.0), 40: (1.0, 3.0, 10.0)}))
        self.assertEqual([row["databases"] for row in table], [1, 40])
        self.assertAlmostEqual(table[0]["ratios"]["max"], 0.8)
        self.assertAlmostEqual(table[1]["ratios"]["p99"], 2.0)
        self.assertAlmostEqual(table[1]["ratios"]["max"], 3.0)
        self.assertEqual([row["met"] for row in table], [True, False])

    def test_target_is_inclusive_and_needs_every_figure(self):
        at_target = (TARGET_RATIO, TARGET_RATIO, TARGET_RATIO)
        table = rows(results({1: at_target, 40: (1.0, 1.0, 1.2)},
                             {1: (1.0, 1.0, 1.0), 40: (1.0, 1.0, 1.0)}))
        self.assertEqual([row["met"] for row in table], [True, False])

    def test_report_has_both_columns_and_the_ratios(self):
        text = render(results({1: (1.0, 2.0, 4.0), 40: (2.0, 3.0, 30.0)},
                              {1: (1.0, 2.0, 5.0), 40: (1.0, 3.0, 10.0)}), "17.7")
        self.assertIn("PostgreSQL 17.7", text)
        self.assertIn("| 40 | snowflake | 2.00 | 3.00 | 30.00 | 10.0 | 1,000 |", text)
        self.assertIn("| 40 | bigserial | 1.00 | 3.00 | 10.00 | 10.0 | 1,000 |", text)
        self.assertIn("| 40 | 2.00× | 1.00× | 3.00× | no |", text)


if __name__ == "__main__":
    unittest.main()
