"""bench/run.py loads every module and parses its arguments without psycopg or matplotlib."""

import subprocess
import sys
import unittest
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent

# A None entry in sys.modules makes `import name` raise ImportError, as if not installed.
WITHOUT_PSYCOPG_AND_MATPLOTLIB = f"""
import runpy, sys
sys.modules.update(psycopg=None, matplotlib=None)
sys.path.insert(0, {str(BENCH)!r})
sys.argv = ["run.py", "--help"]
runpy.run_path({str(BENCH / "run.py")!r}, run_name="__main__")
"""


class EntryPointTest(unittest.TestCase):
    def test_help_without_psycopg_and_matplotlib(self):
        completed = subprocess.run([sys.executable, "-c", WITHOUT_PSYCOPG_AND_MATPLOTLIB],
                                   capture_output=True, text=True, timeout=60)
        self.assertEqual(completed.returncode, 0, completed.stderr)
        for option in ("--bindir", "--dir", "--library", "--results", "--n", "--reps",
                       "--pgbench-reps", "--pgbench-seconds", "--insert-rows", "--wait-quiet",
                       "--skip-callgrind", "--report-only"):
            self.assertIn(option, completed.stdout)
        self.assertIn("Benchmarks of snowflake_id", completed.stdout)


if __name__ == "__main__":
    unittest.main()
