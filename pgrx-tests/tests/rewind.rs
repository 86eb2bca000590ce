//! Failover and back with pg_rewind: the old primary, started again by mistake as a primary
//! (a write without IDs makes its WAL diverge), rewound onto the promoted standby's timeline
//! (`pg_rewind --source-server`, which also copies the new primary's files over its own) and
//! started as its standby, is promoted again when the new primary stops. No server
//! issues an ID that any of them issued before, and after each switch IDs continue above every
//! earlier one (docs/design.md §2.3, §5).
//!
//! The old primary's IDs ran 30 s ahead of real time (its wall clock was 30 s fast and was
//! stepped back), so a server that starts from its wall clock, or from a copy of the new
//! primary's reservation, reaches them again within the test. It asserts no row refused by the
//! primary key, no ID issued twice and each switch's IDs above the earlier ones, and prints the
//! IDs, duplicates and how far IDs ran ahead of real time (`--nocapture`).

use snowflake_id_cluster_tests::fixtures::{
    assert_no_id_reissued, clock_fast_then_corrected, count, fail_over, insert_load, load_after,
    Issued, CLOCK_FAST, DEFAULT_IDS_TABLE,
};
use snowflake_id_cluster_tests::Cluster;

const ROWS: i64 = 10_000;

#[test]
fn rewound_old_primary_promoted_again_continues_above_every_server_s_ids() {
    let test = "failover, pg_rewind, switchback";
    // pg_rewind needs hint bits WAL-logged on the server it rewinds.
    let mut first = Cluster::builder()
        .faketime_at(CLOCK_FAST)
        .setting("wal_log_hints = on")
        .start();
    first.connect().batch_execute(DEFAULT_IDS_TABLE).unwrap();
    let mut second = first.start_replica();
    let (fast, corrected) = clock_fast_then_corrected(
        &first,
        |offset| first.set_fake_time(offset),
        "first primary",
        0,
        ROWS,
    );

    fail_over(&mut first, &second);
    let mut promoted = Issued::after("failover", "promoted standby, insert load");
    insert_load(&second, &mut promoted, 10..12, ROWS / 2);

    // The first primary is started again by mistake as a primary and writes (no IDs): its WAL
    // diverges from the new primary's, so pg_rewind has work to do (after a clean failover
    // alone it has none).
    first.start();
    first
        .connect()
        .batch_execute("CREATE TABLE written_after_the_failover AS SELECT 1 AS x")
        .unwrap();
    first.stop("fast");
    // The new primary's end-of-recovery checkpoint must be done before pg_rewind reads its
    // timeline.
    second.connect().batch_execute("CHECKPOINT").unwrap();
    first.rewind_from(&second);
    first.start();
    let mut following = Issued::new("promoted standby, insert load while the first follows it");
    insert_load(&second, &mut following, 20..22, ROWS / 2);

    fail_over(&mut second, &first);
    assert_eq!(
        count(
            &mut first.connect(),
            "SELECT count(*) FROM pg_class WHERE relname = 'written_after_the_failover'"
        ),
        0,
        "pg_rewind left the first primary's divergent write"
    );
    let back = load_after(
        "switchback (pg_rewind, the first primary promoted again)",
        "first primary again, insert load",
        &first,
        &[&fast, &corrected, &promoted, &following],
    );
    assert_no_id_reissued(test, &[&fast, &corrected, &promoted, &following, &back]);
}
