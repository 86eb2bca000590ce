"""The callgrind cost script's scripts, arithmetic and table (bench/costs.py)."""

import tempfile
import unittest
from pathlib import Path

from snowflake_bench.costs import (DDL_MARKER_RUNS, DDL_PAIRS, DDL_TABLES, DDL_WITH,
                                   DDL_WITHOUT, HOOKED_STATEMENTS, MARKER, SETTINGS,
                                   ddl_figures, ddl_script, ddl_tables_sql, first_id_figures,
                                   hooked_figures, hooked_script, keyed_database_sql,
                                   numbered_dumps, per_id_figures, per_id_script, per_unit,
                                   render, rows)


def first_id_totals(select_1, **functions):
    return {"select_1": select_1, **functions}


def results(major=15):
    """A run's figures: first IDs in thousands, DDL per pair, per ID (the loop at 950)."""
    first_ids = {
        database: first_id_totals([55_000_000, 55_000_400, 54_999_000],
                                  snowflake=[55_500_000, 55_600_000, 55_550_000],
                                  snowflake_wide=[55_600_000] * 3,
                                  nextval_c1=[55_250_000, 55_250_000, 55_300_000],
                                  uuid=[55_100_000] * 3)
        for database in ("keyed_0", "keyed_500")}
    # Each pair's dump holds a marker (30,000); one pair in three splits an index page (+50,000).
    ddl = {kind: {DDL_WITH: {"markers": [30_000, 30_000, 30_100],
                             "pairs": [30_000 + with_pair, 80_000 + with_pair,
                                       30_000 + with_pair],
                             "trigger": {"calls": [calls] * 3, "ir": [6_400 * calls] * 3}},
                  DDL_WITHOUT: {"markers": [30_000] * 3,
                                "pairs": [30_000 + without_pair] * 2 + [80_000 + without_pair],
                                "trigger": {"calls": [0] * 3, "ir": [0] * 3}}}
           for kind, with_pair, without_pair, calls in (("column", 1_200_000, 1_000_000, 2),
                                                         ("index", 1_600_000, 1_000_000, 1))}
    # Each statement's dump holds a marker (30,000); the library adds 600 to an UPDATE.
    hooked = {kind: {"with": {"markers": [30_000] * 3,
                              "statements": [30_000 + with_statement] * 3},
                     "without": {"markers": [30_000] * 3,
                                 "statements": [30_000 + without_statement] * 3}}
              for kind, with_statement, without_statement in (("update", 150_600, 150_000),
                                                               ("create_table", 900_000,
                                                                897_000))}
    per_id = {key: {"once": 10_000_000 + per_row * 100_000,
                    "twice": 10_000_000 + per_row * 200_000}
              for key, per_row in (("empty", 950), ("snowflake", 1200), ("snowflake_wide", 1201),
                                   ("random", 1060), ("nextval_c1", 3450))}
    found = {"server_version": f"{major}.6", "major": major, "extension_version": "0.11.0",
             "trigger_symbol": "plpgsql_call_handler",
             "library_sha256": "0123456789abcdef", "quick": False, "notes": [],
             "settings": {"first_id_reps": 3, "ddl_pairs": 20, "per_id_n": 100_000},
             "first_id_figures": first_id_figures(first_ids),
             "ddl_figures": ddl_figures(ddl),
             "hooked_figures": hooked_figures(hooked),
             "per_id_figures": per_id_figures(per_id, 100_000)}
    found["rows"] = rows(found)
    return found


class ScriptsTest(unittest.TestCase):
    def test_ddl_script_gives_markers_alone_then_each_pair_a_dump_on_a_table_of_its_own(self):
        script = ddl_script(DDL_PAIRS["column"][1], 5)
        self.assertTrue(script.startswith("SELECT pg_backend_pid();\n"))
        parts = script.split(MARKER)
        # dump 1 (the warm-up), 3 markers alone, 5 pairs, nothing after the last marker
        self.assertEqual(len(parts), 1 + 3 + 5 + 1)
        self.assertEqual([part.count("ADD COLUMN x int;") for part in parts],
                         [3, 0, 0, 0, 1, 1, 1, 1, 1, 0])
        self.assertEqual(parts[4], "ALTER TABLE t4 ADD COLUMN x int;\n"
                                   "ALTER TABLE t4 DROP COLUMN x;\n")
        self.assertEqual(parts[8], "ALTER TABLE t8 ADD COLUMN x int;\n"
                                   "ALTER TABLE t8 DROP COLUMN x;\n")
        index = ddl_script(DDL_PAIRS["index"][1], 5)
        self.assertIn("CREATE INDEX t1_id ON t1 (id);\nDROP INDEX t1_id;\n", index)

    def test_hooked_script_gives_markers_alone_then_each_statement_a_dump(self):
        script = hooked_script(HOOKED_STATEMENTS["create_table"][1], 4, "create_table_with")
        self.assertTrue(script.startswith("SELECT pg_backend_pid();\n"))
        parts = script.split(MARKER)
        self.assertEqual(len(parts), 1 + DDL_MARKER_RUNS + 4 + 1)
        self.assertEqual(parts[1 + DDL_MARKER_RUNS], "CREATE TABLE create_table_with_0 (a int);\n")
        self.assertIn("CREATE TABLE create_table_with_warm_2 (a int);\n", parts[0])
        update = hooked_script(HOOKED_STATEMENTS["update"][1], 2, "update_without")
        self.assertEqual(
            update.count("UPDATE update_without_probe SET v = v + 1 WHERE id = 1;"), 3 + 2)

    def test_the_full_run_uses_every_ddl_table_and_no_more(self):
        script = ddl_script(DDL_PAIRS["index"][1], SETTINGS["full"]["ddl_pairs"])
        self.assertIn(f"ON t{DDL_TABLES} (id)", script)
        self.assertNotIn(f"ON t{DDL_TABLES + 1} (id)", script)

    def test_ddl_tables_differ_only_in_the_default(self):
        with_default = ddl_tables_sql(" DEFAULT snowflake_nextval()")
        self.assertIn("FOR i IN 1..23 LOOP", with_default)
        self.assertIn("(id bigint PRIMARY KEY DEFAULT snowflake_nextval(), v int)", with_default)
        self.assertEqual(with_default.replace(" DEFAULT snowflake_nextval()", ""),
                         ddl_tables_sql(""))

    def test_per_id_script_gives_each_function_two_dumps_after_a_warm_up(self):
        script = per_id_script(["empty", "snowflake"], 1000)
        parts = script.split(MARKER)
        self.assertEqual(len(parts), 1 + 2 * 2 + 1)
        self.assertEqual(parts[0], "SELECT count(*) FROM generate_series(1, 1000);\n"
                                   "SELECT count(snowflake_nextval()) FROM generate_series(1, 1000);\n")
        self.assertEqual(parts[1:5], [
            "SELECT count(*) FROM generate_series(1, 1000);\n",
            "SELECT count(*) FROM generate_series(1, 2000);\n",
            "SELECT count(snowflake_nextval()) FROM generate_series(1, 1000);\n",
            "SELECT count(snowflake_nextval()) FROM generate_series(1, 2000);\n"])

    def test_keyed_tables_only_where_asked(self):
        self.assertNotIn("CREATE TABLE", keyed_database_sql(0))
        self.assertIn("FOR i IN 1..500 LOOP", keyed_database_sql(500))
        self.assertIn("DEFAULT snowflake_nextval()", keyed_database_sql(500))
        self.assertIn("CREATE SEQUENCE bench_seq_cache1 CACHE 1;", keyed_database_sql(0))

    def test_numbered_dumps_in_the_order_callgrind_wrote_them(self):
        with tempfile.TemporaryDirectory() as directory:
            out_file = Path(directory) / "server.42"
            for name in ("server.42", "server.42.10", "server.42.2", "server.42.1",
                         "server.421.1"):
                (Path(directory) / name).write_text("")
            self.assertEqual([path.name for path in numbered_dumps(out_file)],
                             ["server.42.1", "server.42.2", "server.42.10"])


class ArithmeticTest(unittest.TestCase):
    def test_per_unit_cancels_what_both_runs_share(self):
        # 1,000 of fixed cost (statement, marker) and 300 per unit
        self.assertEqual(per_unit(1_000 + 300 * 20, 1_000 + 300 * 40, 20), 300)

    def test_first_id_is_the_median_above_select_1s_median(self):
        figures = results()["first_id_figures"]["keyed_0"]
        self.assertEqual(figures["snowflake"]["extra"], 550_000)
        self.assertEqual(figures["nextval_c1"]["extra"], 250_000)
        self.assertAlmostEqual(figures["snowflake"]["ratio"], 2.2)
        self.assertEqual(figures["nextval_c1"]["ratio"], 1.0)
        self.assertNotIn("select_1", figures)

    def test_ddl_median_pair_less_a_marker_and_trigger_calls(self):
        figures = results()["ddl_figures"]
        self.assertEqual(figures["column"]["with"], 1_200_000)
        self.assertEqual(figures["column"]["without"], 1_000_000)
        self.assertAlmostEqual(figures["column"]["ratio"], 1.2)
        self.assertEqual(figures["column"]["trigger_calls_per_pair"], 2)
        self.assertEqual(figures["index"]["trigger_calls_per_pair"], 1)
        self.assertEqual(figures["index"]["trigger_ir_per_pair"], 6_400)
        self.assertEqual(figures["index"]["with"], 1_600_000)

    def test_hooked_statements_with_and_without_the_library(self):
        figures = results()["hooked_figures"]
        self.assertEqual(figures["update"]["added"], 600)
        self.assertEqual(figures["update"]["without"], 150_000)
        self.assertAlmostEqual(figures["create_table"]["ratio"], 900_000 / 897_000)

    def test_per_id_above_the_loop(self):
        figures = results()["per_id_figures"]
        self.assertEqual(figures["loop"], 950)
        self.assertEqual(figures["above_loop"]["snowflake"], 250)
        self.assertNotIn("empty", figures["above_loop"])


class TableTest(unittest.TestCase):
    def row(self, found, label):
        return next(row for row in found["rows"] if row["label"] == label)

    def test_targets_are_inclusive_and_only_where_the_issue_sets_them(self):
        found = results()
        self.assertEqual(self.row(found, "first ID, 0 keyed tables: snowflake_nextval()")["met"],
                         "no")
        self.assertIsNone(self.row(found, "first ID, 0 keyed tables: gen_random_uuid()")["target"])
        column = self.row(found, "DDL per pair: ALTER TABLE ADD COLUMN + DROP COLUMN")
        self.assertEqual((column["target"], column["met"]), ("≤ 1.2×", "yes"))
        index = self.row(found, "DDL per pair: CREATE INDEX + DROP INDEX")
        self.assertEqual((index["ratio"], index["met"]), ("1.60×", "no"))
        per_id = self.row(found, "per ID above the loop: snowflake_nextval()")
        self.assertEqual((per_id["value"], per_id["target"], per_id["met"]),
                         ("250.0", "≤ 250", "yes"))
        self.assertEqual(self.row(found, "per ID above the loop: snowflake_nextval('wide')")["met"],
                         "no")
        on_18 = self.row(results(18), "per ID above the loop: snowflake_nextval()")
        self.assertIsNone(on_18["target"])

    def test_report_names_the_versions_and_has_a_row_per_figure(self):
        text = render(results())
        self.assertTrue(text.startswith(
            "# Callgrind costs: PostgreSQL 15.6, snowflake_id 0.11.0 (library sha256 "
            "0123456789ab)\n"))
        self.assertIn("| figure | instructions | against | ratio | target | met |", text)
        self.assertIn("| first ID, 500 keyed tables: snowflake_nextval() | 550.0k | "
                      "nextval() CACHE 1: 250.0k | 2.20× | ≤ 1.0× | no |", text)
        self.assertIn("| DDL per pair: CREATE INDEX + DROP INDEX | 1,600.0k | "
                      "without the extension: 1,000.0k | 1.60× | ≤ 1.5× | no |", text)
        self.assertIn("| per ID: count(*) only (the loop) | 950.0 | – | – | – | – |", text)
        self.assertIn("| per statement: single-row UPDATE (ExecutorStart hook) | 150.6k | "
                      "without the library: 150.0k | 1.004× | – | – |", text)
        self.assertIn("What the library adds per statement: single-row UPDATE (ExecutorStart "
                      "hook): 600 instructions; CREATE TABLE (ProcessUtility hook): 3,000 "
                      "instructions.", text)
        self.assertEqual(text.count("\n| "), 2 * 4 + 2 + 2 + 4 + 1 + 1)  # + the header row
        self.assertIn("(plpgsql_call_handler, inclusive): ALTER TABLE ADD COLUMN + DROP COLUMN: "
                      "fired 2×, 12.8k instructions; CREATE INDEX + DROP INDEX: fired 1×, 6.4k "
                      "instructions.", text)


if __name__ == "__main__":
    unittest.main()
