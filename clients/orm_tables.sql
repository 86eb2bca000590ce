-- The tables of the ORM examples (clients/python/django_orders.py,
-- clients/python/sqlalchemy_orders.py, clients/node/drizzle_orders.js): orders and their lines,
-- both keyed by the column default. pgrx-tests/tests/clients.rs creates them on each test's
-- cluster; against your own server, in a database of their own:
--   createdb shop && psql --dbname shop --file clients/orm_tables.sql
CREATE EXTENSION snowflake_id;
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                     customer text NOT NULL);
CREATE TABLE order_lines (id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
                          order_id bigint NOT NULL REFERENCES orders, item text NOT NULL);
