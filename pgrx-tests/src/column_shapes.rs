//! The ways an ID reaches a column besides a plain `bigint` default (issue: "the floor misses IDs
//! it claims to cover"): a default calling a wrapper function, IDs the application fetched and
//! inserted itself, IDs set by a trigger, `numeric` and `text` columns, a composite primary key
//! `(tenant_id, id)`, a column of a domain over `bigint`, and a table range-partitioned on the
//! ID by UTC day (docs/partitioning.md), with a default partition. Tests fill them in a database of an
//! old cluster and check that the cluster that gets the database (pg_upgrade, a dump) continues
//! above every ID stored in any of them.

use postgres::Client;

use crate::{error_parts, Cluster};

/// The database that holds the shapes (the sequence `'default'` is used in `postgres` too).
pub const DATABASE: &str = "second";

/// Creates database [`DATABASE`] in `cluster`, with the extension and one table per shape.
pub fn create(cluster: &Cluster) {
    cluster
        .connect()
        .batch_execute(&format!("CREATE DATABASE {DATABASE}"))
        .unwrap();
    cluster.connect_to(DATABASE).batch_execute(SHAPES).unwrap();
}

/// The extension and one table per shape.
const SHAPES: &str = "
    CREATE EXTENSION snowflake_id;
    CREATE FUNCTION next_order_id() RETURNS bigint LANGUAGE sql AS 'SELECT snowflake_nextval()';
    CREATE TABLE wrapped (id bigint PRIMARY KEY DEFAULT next_order_id(), n int);
    CREATE TABLE fetched (id bigint PRIMARY KEY, n int);
    CREATE TABLE triggered (id bigint PRIMARY KEY, n int);
    CREATE FUNCTION set_id() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN NEW.id := snowflake_nextval(); RETURN NEW; END $$;
    CREATE TRIGGER set_id BEFORE INSERT ON triggered FOR EACH ROW EXECUTE FUNCTION set_id();
    CREATE TABLE as_numeric (id numeric PRIMARY KEY DEFAULT snowflake_nextval(), n int);
    CREATE TABLE as_text (id text PRIMARY KEY DEFAULT snowflake_nextval()::text, n int);
    CREATE TABLE tenant_keyed (tenant_id int, id bigint DEFAULT snowflake_nextval(), n int,
                               PRIMARY KEY (tenant_id, id));
    CREATE DOMAIN order_id AS bigint CHECK (VALUE > 0);
    CREATE TABLE domained (id order_id PRIMARY KEY DEFAULT snowflake_nextval(), n int);
    CREATE TABLE partitioned (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), n int)
        PARTITION BY RANGE (id);
    CREATE TABLE partitioned_default PARTITION OF partitioned DEFAULT;
    DO $$
    DECLARE today date := (now() AT TIME ZONE 'UTC')::date; day date; b record;
    BEGIN
        FOR day IN SELECT generate_series(today - 1, today + 1, '1 day')::date LOOP
            SELECT * INTO b
            FROM snowflake_partition_bounds(day::timestamp AT TIME ZONE 'UTC', '1 day');
            EXECUTE format('CREATE TABLE %I PARTITION OF partitioned FOR VALUES FROM (%s) TO (%s)',
                           'partitioned_' || to_char(day, 'YYYYMMDD'), b.lower, b.upper);
        END LOOP;
    END $$;";

/// Inserts `rows` rows into every shape's table, in one statement each (the fetched IDs come
/// from `SELECT snowflake_nextval()` first, as an application would take them).
pub fn fill(client: &mut Client, rows: i64) {
    let statements = [
        "INSERT INTO wrapped (n) SELECT g FROM generate_series(1, $1::bigint) g",
        "INSERT INTO triggered (n) SELECT g FROM generate_series(1, $1::bigint) g",
        "INSERT INTO as_numeric (n) SELECT g FROM generate_series(1, $1::bigint) g",
        "INSERT INTO as_text (n) SELECT g FROM generate_series(1, $1::bigint) g",
        "INSERT INTO tenant_keyed (tenant_id, n) SELECT g % 7, g FROM generate_series(1, $1::bigint) g",
        "INSERT INTO domained (n) SELECT g FROM generate_series(1, $1::bigint) g",
        "INSERT INTO partitioned (n) SELECT g FROM generate_series(1, $1::bigint) g",
    ];
    for statement in statements {
        client
            .execute(statement, &[&rows])
            .unwrap_or_else(|error| panic!("{statement}: {:?}", error_parts(&error)));
    }
    let fetched: Vec<i64> = client
        .query(
            "SELECT snowflake_nextval() FROM generate_series(1, $1::bigint)",
            &[&rows],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    client
        .execute(
            "INSERT INTO fetched (id, n) SELECT id, 0 FROM unnest($1::bigint[]) id",
            &[&fetched],
        )
        .unwrap();
}

/// Every ID stored in the shapes' tables, as `bigint`.
pub fn stored(client: &mut Client) -> Vec<i64> {
    client
        .query(
            "SELECT id FROM wrapped UNION ALL SELECT id FROM fetched
             UNION ALL SELECT id FROM triggered UNION ALL SELECT id::bigint FROM as_numeric
             UNION ALL SELECT id::bigint FROM as_text UNION ALL SELECT id FROM tenant_keyed
             UNION ALL SELECT id FROM domained UNION ALL SELECT id FROM partitioned",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// Takes `count` new IDs in `client`'s database (in statements of 1,000, so they span ticks)
/// and returns how many are at or below `newest_stored`, and how many equal a stored ID.
pub fn new_ids_against(client: &mut Client, stored: &[i64], count: i64) -> (usize, usize) {
    let newest_stored = stored.iter().copied().max().unwrap_or(i64::MIN);
    let stored: std::collections::HashSet<i64> = stored.iter().copied().collect();
    let (mut below, mut equal) = (0, 0);
    let mut made = 0;
    while made < count {
        let batch = 1_000.min(count - made);
        let ids: Vec<i64> = client
            .query(
                "INSERT INTO tenant_keyed (tenant_id, n)
                 SELECT 99, g FROM generate_series(1, $1::bigint) g RETURNING id",
                &[&batch],
            )
            .unwrap_or_else(|error| panic!("new IDs: {:?}", error_parts(&error)))
            .iter()
            .map(|row| row.get(0))
            .collect();
        below += ids.iter().filter(|&&id| id <= newest_stored).count();
        equal += ids.iter().filter(|id| stored.contains(id)).count();
        made += batch;
    }
    (below, equal)
}
