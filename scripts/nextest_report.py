"""What the test command's summary says of the whole-cluster tests, read from the JUnit reports
cargo-nextest writes (.config/nextest.toml): two per major (the alone group's run and the
others'), each given as MAJOR=PATH.

  counts PATH…                "cluster PASSED FAILED" and "citus PASSED FAILED" of these reports
  failed MAJOR=PATH…          the failed tests, one per line
  slowest N MAJOR=PATH…       the N slowest tests: seconds, file, test, major
  files N MAJOR=PATH…         the N test files whose tests took longest, their durations added
"""

import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict

CITUS_FILE = "citus"


def tests(path):
    """(file, test, seconds, failed) of every test in a report; none when there is no report."""
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError):
        return []
    found = []
    for suite in root.iter("testsuite"):
        # nextest names a suite by crate and test file: snowflake_id_cluster_tests::floor_writes
        file = suite.get("name").split("::")[-1]
        for case in suite.iter("testcase"):
            failed = (
                case.find("failure") is not None or case.find("error") is not None
            )
            found.append((file, case.get("name"), float(case.get("time", 0)), failed))
    return found


def by_major(arguments):
    """(major, file, test, seconds, failed) of every test in MAJOR=PATH reports."""
    for argument in arguments:
        major, path = argument.split("=", 1)
        for file, test, seconds, failed in tests(path):
            yield major, file, test, seconds, failed


def main(command, *arguments):
    if command == "counts":
        counts = {"cluster": [0, 0], "citus": [0, 0]}
        for file, _, _, failed in (row for path in arguments for row in tests(path)):
            kind = "citus" if file == CITUS_FILE else "cluster"
            counts[kind][1 if failed else 0] += 1
        for kind, (passed, failed) in counts.items():
            print(kind, passed, failed)
    elif command == "failed":
        for major, file, test, _, failed in by_major(arguments):
            if failed:
                print(f"PostgreSQL {major}: {file} {test}")
    elif command == "slowest":
        rows = sorted(by_major(arguments[1:]), key=lambda row: -row[3])
        for major, file, test, seconds, _ in rows[: int(arguments[0])]:
            print(f"{seconds:6.1f}  {file} {test} ({major})")
    elif command == "files":
        seconds_of = defaultdict(float)
        for major, file, _, seconds, _ in by_major(arguments[1:]):
            seconds_of[(file, major)] += seconds
        rows = sorted(seconds_of.items(), key=lambda item: -item[1])
        for (file, major), seconds in rows[: int(arguments[0])]:
            print(f"{seconds:6.1f}  {file} ({major})")
    else:
        sys.exit(f"unknown command {command}; see {__file__}")


if __name__ == "__main__":
    main(*sys.argv[1:])
