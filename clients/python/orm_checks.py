"""What the ORM examples (django_orders.py, sqlalchemy_orders.py) share: the connection settings
from the command line, and the checks of the IDs they read back. Not an example itself.
"""

import datetime
import json
import sys

from psycopg.conninfo import conninfo_to_dict


def connection_params():
    """The libpq connection string (or URL) given as the first argument, as keyword parameters
    for psycopg.connect(); what it leaves out, libpq takes from PGHOST, PGPORT, PGUSER, ..."""
    return conninfo_to_dict(sys.argv[1] if len(sys.argv) > 1 else "")


def check_ids(created, decoded):
    """`created`: the IDs the ORM read back, in the order the rows were created (by one session).
    `decoded`: (id, snowflake_timestamp(id)) of the same IDs, as the database decodes them."""
    assert all(type(id_) is int for id_ in created), created
    assert len(set(created)) == len(created), f"duplicate IDs: {created}"
    assert created == sorted(created), f"IDs of one session must increase: {created}"
    assert all(id_ > 2**53 for id_ in created), "classic IDs are above 2^53"
    assert sorted(id_ for id_, _ in decoded) == created, (created, decoded)
    now = datetime.datetime.now(datetime.timezone.utc)
    for id_, ts in decoded:
        assert abs((now - ts).total_seconds()) < 60, f"{id_} decodes to {ts}, not about {now}"


def check_json(ids, response_body, order_id, line_ids):
    """json.dumps keeps Python ints exact; JavaScript clients get strings (`response_body`)."""
    assert json.loads(json.dumps({"ids": ids})) == {"ids": ids}
    assert all(json.dumps(id_) == str(id_) for id_ in ids)
    # What JSON.parse in JavaScript would make of the same numbers: doubles, most of them rounded.
    assert any(int(float(id_)) != id_ for id_ in ids), "expected a double to round some IDs"
    body = json.loads(response_body)
    assert body["id"] == str(order_id), body
    assert [line["id"] for line in body["lines"]] == [str(id_) for id_ in line_ids], body
    assert all(line["order_id"] == str(order_id) for line in body["lines"]), body
