#!/usr/bin/env python3
"""Callgrind instruction counts of snowflake_id on a throwaway cluster of its own: a new
backend's first ID (0 and 500 keyed tables), DDL on a keyed table with and without the
extension, and the cost per ID above the bare loop, against nextval(), pgEdge's snowflake and
the UUID functions. Started by bash bench/run.sh costs (which installs the extension first) or
directly as root; standard library only. Writes costs.md and costs.json into --results. Not a
test: a missed target fails nothing, only a broken setup does."""

from snowflake_bench.costs import main

if __name__ == "__main__":
    main(__doc__)
