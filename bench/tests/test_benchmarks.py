"""The helpers and the alternation of the measured workloads, with a stand-in connection."""

import contextlib
import io
import unittest
from pathlib import Path

from snowflake_bench.benchmarks import (FUNCTIONS, ID_FUNCTIONS, available, bench_count, count_sql,
                                        parse_pgbench_log, quantiles, rotated,
                                        stats_delta, summary)
from snowflake_bench.cluster import Cluster


class HelpersTest(unittest.TestCase):
    def test_summary(self):
        self.assertEqual(summary([3, 1, 2, 10]),
                         {"median": 2.5, "min": 1, "max": 10, "samples": [3, 1, 2, 10]})

    def test_rotated_puts_every_item_first_once(self):
        items = ["a", "b", "c"]
        self.assertEqual([rotated(items, rep) for rep in range(4)],
                         [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]])

    def test_count_sql(self):
        self.assertEqual(count_sql("empty", 10), "SELECT count(*) FROM generate_series(1, 10)")
        self.assertEqual(count_sql("nextval_c1", 5),
                         "SELECT count(nextval('bench_seq_cache1')) FROM generate_series(1, 5)")

    def test_id_functions_are_all_but_the_empty_loop(self):
        self.assertEqual(ID_FUNCTIONS, [key for key, _, _ in FUNCTIONS][1:])

    def test_stats_delta(self):
        self.assertEqual(stats_delta({"throttle_sleeps": 2, "borrowed_ticks": 5},
                                     {"throttle_sleeps": 7, "borrowed_ticks": 5}),
                         {"throttle_sleeps": 5, "borrowed_ticks": 0})

    def test_pgbench_command(self):
        cluster = Cluster("/usr/lib/postgresql/15/bin", "/var/tmp/bench")
        self.assertEqual(cluster.pgbench_command(4, 3, Path("/var/tmp/bench/pgbench/uuid.sql")), [
            "/usr/lib/postgresql/15/bin/pgbench", "--no-vacuum", "--host", "/var/tmp/bench",
            "--port", "54339", "--username", "postgres", "--client", "4", "--jobs", "4",
            "--time", "3", "--file", "/var/tmp/bench/pgbench/uuid.sql", "postgres"])


class FakeConnection:
    """Answers count(f()) statements with N, snowflake_stats() with growing counters, and the
    WAL position queries with 1,000 bytes per run."""

    def __init__(self):
        self.statements = []
        self.stats_reads = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql, params=None):
        self.statements.append(sql)
        if "pg_wal_lsn_diff" in sql:
            row = (1000,)
        elif "pg_current_wal_insert_lsn" in sql:
            row = ("0/0",)
        elif "FROM snowflake_stats()" in sql:
            self.stats_reads += 1
            row = (self.stats_reads, 2 * self.stats_reads, 0)
        else:
            row = (int(sql.rsplit(", ", 1)[1].rstrip(")")),)
        return type("Cursor", (), {"fetchone": lambda self: row})()


class BenchCountTest(unittest.TestCase):
    def test_alternates_functions_and_counts_snowflake_stats(self):
        connection = FakeConnection()
        cluster = type("FakeCluster", (), {"connect": lambda self: connection})()
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            result = bench_count(cluster, 20, 2, 17)
        self.assertIn("count() repetition 2/2: empty ", output.getvalue())
        keys = [key for key, _, _ in FUNCTIONS if key != "uuidv7"]  # uuidv7() is 18's
        measured = [sql for sql in connection.statements if sql.endswith("(1, 20)")]
        # A warm-up at N/10 of each function, then repetition r starts at the r-th function.
        self.assertEqual(connection.statements[:len(keys)], [count_sql(key, 2) for key in keys])
        self.assertEqual(measured, [count_sql(key, 20) for key in keys + keys[1:] + keys[:1]])
        self.assertEqual(sorted(result["seconds"]), sorted(keys))
        self.assertEqual(len(result["seconds"]["random"]["samples"]), 2)
        self.assertEqual(result["wal_bytes"]["pgedge"]["samples"], [1000, 1000])
        # Each run of a snowflake function: one reading before, one after (1 and 2 apart).
        self.assertEqual(sorted(result["snowflake_stats_per_run"]),
                         ["snowflake", "snowflake_named", "snowflake_wide"])
        self.assertEqual(result["snowflake_stats_per_run"]["snowflake"],
                         [{"borrowed_ticks": 1, "throttle_sleeps": 2, "reservation_writes": 0}] * 2)


if __name__ == "__main__":
    unittest.main()


class PerMajorTest(unittest.TestCase):
    def test_uuidv7_only_from_postgresql_18(self):
        keys = [key for key, _, _ in FUNCTIONS]
        self.assertNotIn("uuidv7", available(keys, 17))
        self.assertEqual(available(keys, 18), keys)
        self.assertEqual(available(["uuidv7_pk", "created_at"], 15), ["created_at"])


class TailLatencyTest(unittest.TestCase):
    def test_parse_pgbench_log(self):
        text = "0 1 812 0 1700000000 123456\n1 1 1999 0 1700000000 123999\n\n"
        self.assertEqual(parse_pgbench_log(text), [812, 1999])

    def test_quantiles_nearest_rank(self):
        q = quantiles(list(range(1, 1001)))  # 1 µs … 1000 µs
        self.assertEqual(q, {"p50": 0.501, "p99": 0.991, "p99.9": 1.0, "max": 1.0})
        self.assertEqual(quantiles([5000]), {"p50": 5.0, "p99": 5.0, "p99.9": 5.0, "max": 5.0})
