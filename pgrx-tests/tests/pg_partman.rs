//! pg_partman 5.x (built from Debian's source package by scripts/install-postgres.sh) keeping a
//! table partitioned by UTC day on its snowflake key (docs/partitioning.md, "pg_partman"):
//! `create_parent` on the ID column with a day's width from `snowflake_partition_width` and a
//! start from `snowflake_partition_bounds`, premade partitions, `run_maintenance()` making new
//! ones as rows of later days arrive (rows placed in past days by `snowflake_min_id`), a
//! partition made ahead by time with `create_partition_id`, and retention dropping the days
//! older than two. Every partition starts at a UTC midnight, every row lies in the partition of
//! its day, the default partition stays empty, and a query on the last day prunes the older
//! partitions at run time. The test prints the partition lists (`--nocapture`). A second test
//! upgrades a cluster with a pg_partman table whose clock ran 30 s fast and was corrected
//! (`pg_upgrade`, from `UPGRADE_FROM_PG_CONFIG` as pg_upgrade.rs does): the upgraded cluster's
//! IDs continue above every stored one, and maintenance goes on.

use snowflake_id_cluster_tests::fixtures::{column, count, text, CLOCK_FAST};
use snowflake_id_cluster_tests::{pg_config_program, Client, Cluster};

/// pg_partman in its schema, and table `events` partitioned by UTC day on its snowflake key
/// from `days_back` days ago, `premake` days ahead of the newest row.
fn partman_events(days_back: i32, premake: i32) -> String {
    format!(
        "CREATE EXTENSION snowflake_id;
         CREATE SCHEMA partman;
         CREATE EXTENSION pg_partman SCHEMA partman;
         CREATE TABLE events (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), body text)
             PARTITION BY RANGE (id);
         SELECT partman.create_parent(
             p_parent_table := 'public.events',
             p_control := 'id',
             p_interval := snowflake_partition_width('1 day')::text,
             p_premake := {premake},
             p_start_partition := (SELECT lower
                                   FROM snowflake_partition_bounds(now() - interval '{days_back} days',
                                                                   '1 day'))::text);"
    )
}

/// Each partition of `events` as "<UTC day of its first ID> <rows>", oldest first.
fn partitions(client: &mut Client) -> Vec<String> {
    column(
        client,
        "SELECT format('%s %s', to_char(snowflake_timestamp(substring(partition_tablename
                                                                      FROM 'p(\\d+)$')::bigint)
                                        AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'),
                       (SELECT count(*) FROM events e
                        WHERE e.tableoid = format('%I.%I', partition_schemaname,
                                                  partition_tablename)::regclass))
         FROM partman.show_partitions('public.events')",
    )
}

/// The UTC days `from..=to` days from today, as `partitions` starts them, with `rows` each.
fn days(client: &mut Client, from: i32, to: i32, rows: &dyn Fn(i32) -> i64) -> Vec<String> {
    (from..=to)
        .map(|day| {
            let date = text(
                client,
                &format!("SELECT to_char((now() AT TIME ZONE 'UTC')::date + {day}, 'YYYY-MM-DD')"),
            );
            format!("{date} 00:00:00.000000 {}", rows(day))
        })
        .collect()
}

#[test]
fn pg_partman_keeps_utc_day_partitions_of_snowflake_ids() {
    let cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client.batch_execute(&partman_events(5, 4)).unwrap();
    let version = text(
        &mut client,
        "SELECT extversion FROM pg_extension WHERE extname = 'pg_partman'",
    );
    assert!(version.starts_with("5."), "pg_partman {version}");
    let created = partitions(&mut client);
    println!("pg_partman {version}, after create_parent: {created:?}");
    assert_eq!(created, days(&mut client, -5, -1, &|_| 0));

    // Rows of three past days, then maintenance: partitions up to four days past the newest row.
    client
        .batch_execute(
            "INSERT INTO events (id, body)
             SELECT snowflake_min_id(now() - d * interval '1 day') + h, 'past'
             FROM generate_series(3, 5) d, generate_series(0, 9) h;
             SELECT partman.run_maintenance('public.events');
             INSERT INTO events (body) SELECT 'now' FROM generate_series(1, 1000);
             SELECT partman.run_maintenance('public.events');",
        )
        .unwrap();
    let rows = |day: i32| match day {
        -5..=-3 => 10,
        0 => 1000,
        _ => 0,
    };
    let maintained = partitions(&mut client);
    println!(
        "after rows of 5, 4 and 3 days ago and of today, and run_maintenance(): {maintained:?}"
    );
    assert_eq!(maintained, days(&mut client, -5, 4, &rows));

    // A partition made ahead by time rather than by data, at a day's first ID.
    client
        .batch_execute(
            "SELECT partman.create_partition_id('public.events',
                 ARRAY[(SELECT lower
                        FROM snowflake_partition_bounds(now() + interval '7 days', '1 day'))]);",
        )
        .unwrap();
    let mut expected = days(&mut client, -5, 4, &rows);
    expected.extend(days(&mut client, 7, 7, &|_| 0));
    assert_eq!(partitions(&mut client), expected);
    let misplaced = count(
        &mut client,
        "SELECT count(*) FROM events e
         WHERE (SELECT lower FROM snowflake_partition_bounds(e.id, '1 day'))
               <> substring(e.tableoid::regclass::text FROM 'p(\\d+)$')::bigint",
    );
    assert_eq!(misplaced, 0, "rows outside the partition of their day");
    assert_eq!(count(&mut client, "SELECT count(*) FROM events_default"), 0);

    // Retention: partitions whose IDs all lie more than two days below the newest are dropped.
    client
        .batch_execute(
            "UPDATE partman.part_config
             SET retention = (snowflake_partition_width('1 day') * 2)::text,
                 retention_keep_table = false
             WHERE parent_table = 'public.events';
             SELECT partman.run_maintenance('public.events');",
        )
        .unwrap();
    let kept = partitions(&mut client);
    println!("after retention of two days: {kept:?}");
    let mut expected = days(&mut client, -2, 4, &rows);
    expected.extend(days(&mut client, 7, 7, &|_| 0));
    assert_eq!(kept, expected);
    assert_eq!(count(&mut client, "SELECT count(*) FROM events"), 1000);

    // The last day's rows: the executor removes the partitions before it.
    let plan: Vec<String> = column(
        &mut client,
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
         SELECT count(*) FROM events WHERE id >= snowflake_min_id(now() - interval '1 day')",
    );
    let plan = plan.join("\n");
    println!("{plan}");
    assert!(plan.contains("Subplans Removed: 1"), "{plan}");
}

#[test]
fn a_pg_partman_table_continues_above_its_ids_after_pg_upgrade() {
    let from = std::env::var("UPGRADE_FROM_PG_CONFIG").unwrap_or_else(|_| pg_config_program());
    let mut old = Cluster::builder()
        .installation(&from)
        .faketime_at(CLOCK_FAST)
        .start();
    let mut client = old.connect();
    client.batch_execute(&partman_events(1, 2)).unwrap();
    // IDs 30 s ahead of real time, then the clock is corrected: they stay ahead for a while.
    client
        .batch_execute("INSERT INTO events (body) SELECT 'fast' FROM generate_series(1, 20000)")
        .unwrap();
    old.set_fake_time("+0");
    client
        .batch_execute(
            "INSERT INTO events (body) SELECT 'corrected' FROM generate_series(1, 20000);
             SELECT partman.run_maintenance('public.events');",
        )
        .unwrap();
    let newest_old = count(&mut client, "SELECT max(id) FROM events");
    let partitions_old = partitions(&mut client);
    drop(client);
    old.stop("fast");

    let mut new = Cluster::builder().create();
    new.upgrade_from(&old);
    new.start();
    let mut client = new.connect();
    assert_eq!(partitions(&mut client), partitions_old);
    let below = count(
        &mut client,
        &format!(
            "WITH new AS (INSERT INTO events (body) SELECT 'upgraded' FROM generate_series(1, 20000)
                          RETURNING id)
             SELECT count(*) FROM new WHERE id <= {newest_old}"
        ),
    );
    client
        .batch_execute("SELECT partman.run_maintenance('public.events')")
        .unwrap();
    let misplaced = count(
        &mut client,
        "SELECT count(*) FROM events e
         WHERE (SELECT lower FROM snowflake_partition_bounds(e.id, '1 day'))
               <> substring(e.tableoid::regclass::text FROM 'p(\\d+)$')::bigint",
    );
    println!(
        "pg_upgrade from {from}: partitions {partitions_old:?}; 20,000 new IDs, {below} at or \
         below the newest stored ID; {misplaced} rows outside their day's partition"
    );
    assert_eq!(below, 0, "new IDs at or below the newest stored one");
    assert_eq!(misplaced, 0);
    assert_eq!(count(&mut client, "SELECT count(*) FROM events"), 60_000);
    assert_eq!(count(&mut client, "SELECT count(*) FROM events_default"), 0);
}
