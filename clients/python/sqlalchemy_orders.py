"""snowflake_id with SQLAlchemy 2 (ORM) and psycopg 3: primary keys that the database fills in
from DEFAULT snowflake_nextval(). SQLAlchemy leaves them out of every INSERT and reads them back
with RETURNING; many new objects go in one INSERT.

Usage: python3 clients/python/sqlalchemy_orders.py [CONNINFO]
CONNINFO is a libpq connection string ("host=/tmp/sock port=5432 user=postgres dbname=app") or
URL; what it leaves out comes from libpq's environment variables (PGHOST, PGPORT, PGUSER, ...).
Expects: the tables of clients/orm_tables.sql (orders, order_lines).
Exits non-zero when a check fails. Run by pgrx-tests/tests/clients.rs.
"""

import json
import re
from typing import Annotated

from sqlalchemy import BigInteger, ForeignKey, Text, create_engine, event, func, insert, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship
from sqlalchemy.schema import CreateTable

from orm_checks import check_ids, check_json, connection_params

# The database fills the id in: SQLAlchemy leaves it out of the INSERT and reads it back with
# RETURNING. monotonic=True (SQLAlchemy 2.1): the IDs one INSERT makes increase row by row, so
# SQLAlchemy may insert many objects in one statement and match the IDs to them by order.
SnowflakeId = Annotated[
    int,
    mapped_column(
        BigInteger, primary_key=True, server_default=func.snowflake_nextval(monotonic=True)
    ),
]


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[SnowflakeId]
    customer: Mapped[str] = mapped_column(Text)
    lines: Mapped[list["OrderLine"]] = relationship(back_populates="order")


class OrderLine(Base):
    __tablename__ = "order_lines"
    id: Mapped[SnowflakeId]
    order_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("orders.id"))
    item: Mapped[str] = mapped_column(Text)
    order: Mapped[Order] = relationship(back_populates="lines")


engine = create_engine("postgresql+psycopg://", connect_args=connection_params())
statements = []
event.listen(engine, "before_cursor_execute", lambda *args: statements.append(args[2]))

with Session(engine, expire_on_commit=False) as session, session.begin():
    # One row: INSERT INTO orders (customer) VALUES (...) RETURNING orders.id
    order = Order(customer="ada")
    session.add(order)
    session.flush()

    # Many objects, one flush: one INSERT ... RETURNING for all of them.
    more = [Order(customer=name) for name in ("bob", "cy", "dee")]
    session.add_all(more)
    session.flush()

    # Children that reference the new rows: through the relationship, and as an ORM bulk INSERT
    # of plain dicts that returns one ID per dict, in order.
    line = OrderLine(order=order, item="book")
    session.add(line)
    session.flush()
    more_line_ids = session.scalars(
        insert(OrderLine).returning(OrderLine.id, sort_by_parameter_order=True),
        [{"order_id": o.id, "item": "pen"} for o in more],
    ).all()

    # JSON: json.dumps writes a Python int exactly ...
    assert json.loads(json.dumps({"id": order.id})) == {"id": order.id}
    # ... but JavaScript's JSON.parse would round it to a double: send JavaScript clients strings.
    body = json.dumps({
        "id": str(order.id),
        "customer": order.customer,
        "lines": [
            {"id": str(ln.id), "order_id": str(ln.order_id), "item": ln.item}
            for ln in order.lines
        ],
    })

    # Look a row up by ID, here the string a JavaScript client sends back, as an int.
    request = json.loads(body)
    found = session.scalars(select(Order).where(Order.id == int(request["id"]))).one()
    assert found is order and found.lines == [line]

    # Decode the IDs in SQL.
    order_ids = [order.id] + [o.id for o in more]
    line_ids = [line.id] + more_line_ids
    decoded = session.execute(
        select(Order.id, func.snowflake_timestamp(Order.id)).where(Order.id.in_(order_ids))
        .union_all(select(OrderLine.id, func.snowflake_timestamp(OrderLine.id))
                   .where(OrderLine.id.in_(line_ids)))
    ).all()
    line_orders = session.scalars(
        select(OrderLine.order_id).where(OrderLine.id.in_(more_line_ids)).order_by(OrderLine.id)
    ).all()

ddl = str(CreateTable(Order.__table__).compile(engine)).strip()
inserts = [s for s in statements if s.startswith("INSERT")]
print("DDL of metadata.create_all():\n  " + "\n  ".join(ddl.splitlines()))
print(f"order {order.id} ({order.customer}), in bulk {[o.id for o in more]}")
print(f"lines {line_ids} reference orders {[order.id] + line_orders}")
print(f"json: {body}")
for sql in inserts[:2]:
    print(f"  {sql}")

# Checks.
assert "id BIGINT DEFAULT snowflake_nextval() NOT NULL" in ddl, ddl
assert len(inserts) == 4, f"one INSERT per flush and per bulk insert: {inserts}"
columns = [re.match(r"INSERT INTO \w+ \(([^)]*)\)", sql).group(1) for sql in inserts]
assert columns == ["customer"] * 2 + ["order_id, item"] * 2, f"SQLAlchemy sent an id: {inserts}"
assert all(re.search(r"RETURNING (\w+)\.id(, \1\.id AS id__1)?$", sql) for sql in inserts), inserts
assert all("ORDER BY sen_counter" in sql for sql in inserts[1::2]), "batched: rows in order"
check_ids(order_ids + line_ids, decoded)
assert line_orders == [o.id for o in more], (line_orders, more)
check_json(order_ids + line_ids, body, order.id, [line.id])
print("python sqlalchemy example: all checks passed")
