//! pg_partman 5.x (built from Debian's source package by scripts/install-postgres.sh) keeping a
//! table partitioned by UTC day on its snowflake key, following the guide's blocks as they stand
//! in docs/partitioning.md ("pg_partman"): `create_parent` from today with a day's width, its
//! history block before or after today's rows, maintenance twice a day for a simulated month, a
//! partition made ahead by time, and retention. Every partition starts at a UTC midnight, every
//! row lies in the partition of its day, the default partition stays empty, and a query on the
//! last day prunes the older partitions at run time. The tests print the partition lists
//! (`--nocapture`). Another test upgrades a cluster with a pg_partman table whose clock ran 30 s
//! fast and was corrected (`pg_upgrade`, from `UPGRADE_FROM_PG_CONFIG` as pg_upgrade.rs does):
//! the upgraded cluster's IDs continue above every stored one, and maintenance goes on.

use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{column, count, doc_sql_block, text, CLOCK_FAST};
use snowflake_id_cluster_tests::{pg_config_program, Client, Cluster};

/// The block of the guide's pg_partman section that contains `marker`.
fn guide_block(marker: &str) -> String {
    doc_sql_block("docs/partitioning.md", "pg_partman", marker)
}

/// The guide's setup: pg_partman in its schema, and table `events` partitioned by UTC day on
/// its snowflake key from today, four days ahead of the newest row.
fn partman_events() -> String {
    format!(
        "CREATE EXTENSION snowflake_id;\n{}",
        guide_block("partman.create_parent")
    )
}

/// The guide's maintenance call.
fn maintenance() -> String {
    guide_block("partman.run_maintenance")
}

/// Ten rows `body = 'past'` for each of the `days` days ago, at the start of the day's IDs.
fn insert_past_rows(client: &mut postgres::Client, days: std::ops::RangeInclusive<i32>) {
    client
        .execute(
            "INSERT INTO events (id, body)
             SELECT snowflake_min_id(now() - d * interval '1 day') + h, 'past'
             FROM generate_series($1::int, $2::int) d, generate_series(0, 9) h",
            &[days.start(), days.end()],
        )
        .unwrap();
}

/// The guide's block that makes the partitions of the last `days` days (30 in the guide).
fn history(days: i32) -> String {
    guide_block("generate_series(1, 30)").replace(
        "generate_series(1, 30)",
        &format!("generate_series(1, {days})"),
    )
}

/// Rows of `events` outside the partition of their UTC day.
fn misplaced(client: &mut Client) -> i64 {
    count(
        client,
        "SELECT count(*) FROM events e
         WHERE (SELECT lower FROM snowflake_partition_bounds(e.id, '1 day'))
               <> substring(e.tableoid::regclass::text FROM 'p(\\d+)$')::bigint",
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
    client.batch_execute(&partman_events()).unwrap();
    let version = text(
        &mut client,
        "SELECT extversion FROM pg_extension WHERE extname = 'pg_partman'",
    );
    assert!(version.starts_with("5."), "pg_partman {version}");
    let created = partitions(&mut client);
    println!("pg_partman {version}, after create_parent: {created:?}");
    assert_eq!(created, days(&mut client, 0, 4, &|_| 0));

    // History first (the guide's block, five days), rows of three past days, maintenance, then
    // today's rows and maintenance: partitions up to four days past the newest row.
    client.batch_execute(&history(5)).unwrap();
    insert_past_rows(&mut client, 3..=5);
    client.batch_execute(&maintenance()).unwrap();
    client
        .batch_execute("INSERT INTO events (body) SELECT 'now' FROM generate_series(1, 1000)")
        .unwrap();
    client.batch_execute(&maintenance()).unwrap();
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
        .batch_execute(&guide_block("now() + interval '7 days'"))
        .unwrap();
    let mut expected = days(&mut client, -5, 4, &rows);
    expected.extend(days(&mut client, 7, 7, &|_| 0));
    assert_eq!(partitions(&mut client), expected);
    assert_eq!(
        misplaced(&mut client),
        0,
        "rows outside the partition of their day"
    );
    assert_eq!(count(&mut client, "SELECT count(*) FROM events_default"), 0);

    // Retention: partitions whose IDs all lie more than two days below the newest are dropped.
    client.batch_execute(&guide_block("SET retention")).unwrap();
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
    client.batch_execute(&partman_events()).unwrap();
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
    client.batch_execute(&maintenance()).unwrap();
    let misplaced = misplaced(&mut client);
    println!(
        "pg_upgrade from {from}: partitions {partitions_old:?}; 20,000 new IDs, {below} at or \
         below the newest stored ID; {misplaced} rows outside their day's partition"
    );
    assert_eq!(below, 0, "new IDs at or below the newest stored one");
    assert_eq!(misplaced, 0);
    assert_eq!(count(&mut client, "SELECT count(*) FROM events"), 60_000);
    assert_eq!(count(&mut client, "SELECT count(*) FROM events_default"), 0);
}

/// The guide on a new, empty table, kept by maintenance twice a day for a simulated month: the
/// server's clock moves 12 hours at a time (libfaketime; `snowflake_id.max_clock_jump` lets the
/// cluster clock follow at once), rows arrive through the column default after each move, and
/// maintenance runs. Today's rows have their partition from the start, no row ever lands in the
/// default partition, and maintenance never fails.
#[test]
fn a_new_table_kept_twice_a_day_for_a_month_keeps_every_row_in_its_day() {
    let cluster = Cluster::builder()
        .faketime()
        .setting("snowflake_id.max_clock_jump = '2d'")
        .start();
    let mut client = cluster.connect();
    client.batch_execute(&partman_events()).unwrap();
    for half_day in 0..60 {
        cluster.set_fake_time(&format!("+{}h", 12 * half_day));
        std::thread::sleep(Duration::from_millis(20));
        client
            .batch_execute("INSERT INTO events (body) SELECT 'day' FROM generate_series(1, 20)")
            .unwrap();
        client
            .batch_execute(&maintenance())
            .unwrap_or_else(|error| panic!("maintenance after {half_day} half days: {error}"));
        assert_eq!(
            count(&mut client, "SELECT count(*) FROM events_default"),
            0,
            "rows in the default partition after {half_day} half days"
        );
    }
    let kept = partitions(&mut client);
    println!(
        "a month of maintenance twice a day: {} partitions",
        kept.len()
    );
    assert_eq!(count(&mut client, "SELECT count(*) FROM events"), 1200);
    assert_eq!(misplaced(&mut client), 0);
    assert!(
        kept.iter()
            .all(|partition| partition.contains(" 00:00:00.000000 ")),
        "every partition starts at a UTC midnight: {kept:?}"
    );
    assert!(kept.len() >= 34, "30 days of rows and 4 ahead: {kept:?}");
}

/// A table whose history is loaded after today's rows started to arrive: the guide's history
/// block, then the old rows, then maintenance; nothing lands in the default partition.
#[test]
fn history_loaded_after_todays_rows_lands_in_its_days() {
    let cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client.batch_execute(&partman_events()).unwrap();
    client
        .batch_execute("INSERT INTO events (body) SELECT 'now' FROM generate_series(1, 100)")
        .unwrap();
    client.batch_execute(&maintenance()).unwrap();
    client.batch_execute(&history(30)).unwrap();
    insert_past_rows(&mut client, 1..=30);
    client.batch_execute(&maintenance()).unwrap();
    assert_eq!(count(&mut client, "SELECT count(*) FROM events_default"), 0);
    assert_eq!(misplaced(&mut client), 0);
    assert_eq!(count(&mut client, "SELECT count(*) FROM events"), 400);
    assert_eq!(partitions(&mut client), {
        let rows = |day: i32| match day {
            -30..=-1 => 10,
            0 => 100,
            _ => 0,
        };
        days(&mut client, -30, 4, &rows)
    });
}
