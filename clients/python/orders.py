"""snowflake_id from Python with psycopg 3: let the server's column default make the IDs,
read them back with INSERT ... RETURNING, decode them in SQL.

Usage: python3 clients/python/orders.py [CONNINFO]
CONNINFO is a libpq connection string ("host=/tmp/sock port=5432 user=postgres dbname=app") or
URL; without it libpq's environment variables (PGHOST, PGPORT, PGUSER, PGDATABASE) apply.
Expects: CREATE EXTENSION snowflake_id;
         CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
Exits non-zero when a check fails. Run by pgrx-tests/tests/clients.rs.
"""

import datetime
import sys

import psycopg

conninfo = sys.argv[1] if len(sys.argv) > 1 else ""

with psycopg.connect(conninfo) as conn:
    # One row: the id column is left out, so its DEFAULT snowflake_nextval() fills it in.
    order_id = conn.execute(
        "INSERT INTO orders (item) VALUES (%s) RETURNING id", ("book",)
    ).fetchone()[0]

    # Many rows in one statement: RETURNING gives one ID per row.
    items = ["pen", "lamp", "desk"]
    ids = [row[0] for row in conn.execute(
        "INSERT INTO orders (item) SELECT unnest(%s::text[]) RETURNING id", (items,)
    )]

    # Decode in SQL: creation time, node and worker of each ID.
    decoded = conn.execute(
        "SELECT id, (snowflake_decode(id)).* FROM orders WHERE id = ANY(%s) ORDER BY id",
        ([order_id] + ids,),
    ).fetchall()

    # An ID is an ordinary Python int, exact at any size: use it as a parameter as it is.
    item = conn.execute("SELECT item FROM orders WHERE id = %s", (order_id,)).fetchone()[0]

print(f"inserted {order_id} (book) and {ids} ({', '.join(items)})")
for id_, ts, node, worker, sequence, gene in decoded:
    print(f"  {id_}: ts={ts.isoformat()} node={node} worker={worker} sequence={sequence}")

# Checks.
all_ids = [order_id] + ids
assert all(isinstance(i, int) for i in all_ids), all_ids
assert len(set(all_ids)) == 4, f"duplicate IDs: {all_ids}"
assert all_ids == sorted(all_ids), f"IDs of one session must increase: {all_ids}"
assert all(i > 2**53 for i in all_ids), "classic IDs are above 2^53; Python ints hold them exactly"
assert item == "book", item
assert [row[0] for row in decoded] == all_ids, decoded
now = datetime.datetime.now(datetime.timezone.utc)
for id_, ts, node, worker, sequence, gene in decoded:
    assert abs((now - ts).total_seconds()) < 60, f"{id_} decodes to {ts}, not about {now}"
    assert node == 0 and gene == 0, (id_, node, gene)
    # The classic layout: milliseconds since 2025-01-01 UTC in the bits above the lowest 22.
    epoch = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
    assert ts == epoch + datetime.timedelta(milliseconds=id_ >> 22), (id_, ts)
assert len({row[3] for row in decoded}) == 1, "one session uses one worker id"
print("python psycopg example: all checks passed")
