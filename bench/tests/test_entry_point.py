"""bench/run.py, bench/costs.py and bench/latency.py load every module and parse their arguments
without psycopg or matplotlib."""

import subprocess
import sys
import unittest
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent

def help_without_psycopg_and_matplotlib(script):
    """What `python3 bench/<script> --help` prints and how it ends, with psycopg and matplotlib
    not installed (a None entry in sys.modules makes `import name` raise ImportError)."""
    code = f"""
import runpy, sys
sys.modules.update(psycopg=None, matplotlib=None)
sys.path.insert(0, {str(BENCH)!r})
sys.argv = [{script!r}, "--help"]
runpy.run_path({str(BENCH / script)!r}, run_name="__main__")
"""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)


class EntryPointTest(unittest.TestCase):
    def test_help_without_psycopg_and_matplotlib(self):
        completed = help_without_psycopg_and_matplotlib("run.py")
        self.assertEqual(completed.returncode, 0, completed.stderr)
        for option in ("--bindir", "--dir", "--library", "--results", "--n", "--reps",
                       "--pgbench-reps", "--pgbench-seconds", "--insert-rows", "--wait-quiet",
                       "--skip-callgrind", "--report-only"):
            self.assertIn(option, completed.stdout)
        self.assertIn("Benchmarks of snowflake_id", completed.stdout)

    def test_the_cost_script_loads_and_parses_its_arguments_without_psycopg_and_matplotlib(self):
        completed = help_without_psycopg_and_matplotlib("costs.py")
        self.assertEqual(completed.returncode, 0, completed.stderr)
        for option in ("--bindir", "--dir", "--results", "--quick"):
            self.assertIn(option, completed.stdout)

    def test_the_latency_script_loads_and_parses_its_arguments_without_psycopg_and_matplotlib(
            self):
        completed = help_without_psycopg_and_matplotlib("latency.py")
        self.assertEqual(completed.returncode, 0, completed.stderr)
        for option in ("--bindir", "--dir", "--results", "--seconds", "--max-seconds",
                       "--samples", "--rates", "--clients", "--sync", "--idle-seconds",
                       "--wait-quiet", "BENCH_LATENCY_RATES"):
            self.assertIn(option, completed.stdout)


if __name__ == "__main__":
    unittest.main()
