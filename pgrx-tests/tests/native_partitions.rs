//! Native range partitions on the snowflake key kept by the guide's two daily blocks
//! (docs/partitioning.md, "Native declarative partitioning": one that makes the partitions from
//! three days ago to tomorrow, one that detaches and drops those older than 30 days), as they
//! stand there, run twice a day for a simulated month and a half: libfaketime moves the server's
//! clock 12 hours at a time (`snowflake_id.max_clock_jump` lets the cluster clock follow at
//! once), rows arrive through the column default after each move. Running a block twice changes
//! nothing, no row lands in the default partition, every row is in its UTC day's partition, and
//! no partition older than 30 days is left.

use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{count, doc_sql_block};
use snowflake_id_cluster_tests::Cluster;

/// The block of the guide's native section that contains `marker`.
fn guide_block(marker: &str) -> String {
    doc_sql_block(
        "docs/partitioning.md",
        "Native declarative partitioning",
        marker,
    )
}

#[test]
fn the_guides_daily_blocks_keep_every_row_in_its_day_for_a_month_and_a_half() {
    let cluster = Cluster::builder()
        .faketime()
        .setting("snowflake_id.max_clock_jump = '2d'")
        .start();
    let mut client = cluster.connect();
    client
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    client
        .batch_execute(&guide_block("PARTITION BY RANGE (id)"))
        .unwrap();
    let create = guide_block("-- One partition per UTC day");
    let retention = guide_block("DECLARE old regclass;");
    let partitions = "SELECT count(*) FROM pg_inherits WHERE inhparent = 'messages'::regclass";
    for half_day in 0..90 {
        cluster.set_fake_time(&format!("+{}h", 12 * half_day));
        std::thread::sleep(Duration::from_millis(20));
        for block in [&create, &retention] {
            client
                .batch_execute(block)
                .unwrap_or_else(|error| panic!("after {half_day} half days: {error}"));
        }
        let before = count(&mut client, partitions);
        for block in [&create, &retention] {
            client.batch_execute(block).unwrap();
        }
        assert_eq!(
            count(&mut client, partitions),
            before,
            "a second run changed the partitions"
        );
        client
            .batch_execute("INSERT INTO messages (body) SELECT 'day' FROM generate_series(1, 20)")
            .unwrap();
        assert_eq!(
            count(&mut client, "SELECT count(*) FROM messages_default"),
            0,
            "rows in the default partition after {half_day} half days"
        );
    }
    let misplaced = count(
        &mut client,
        "SELECT count(*) FROM messages
         WHERE to_char(snowflake_timestamp(id) AT TIME ZONE 'UTC', 'YYYYMMDD')
               <> substr(tableoid::regclass::text, length('messages_') + 1)",
    );
    let kept = count(&mut client, partitions);
    let rows = count(&mut client, "SELECT count(*) FROM messages");
    println!(
        "45 days of the guide's blocks twice a day: {kept} partitions (the default included), \
         {rows} rows kept, {misplaced} outside their day"
    );
    assert_eq!(misplaced, 0);
    // 30 days kept (their partitions' upper bounds above 30 days ago), tomorrow, the default.
    assert!((31..=35).contains(&kept), "{kept} partitions");
    assert!(
        (29 * 40..=33 * 40).contains(&rows),
        "{rows} rows: about 30 days' kept"
    );
}
