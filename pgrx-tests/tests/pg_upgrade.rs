//! pg_upgrade (copy mode) into a new cluster of the major under test that preloads snowflake_id,
//! from the same major or, with `UPGRADE_FROM_PG_CONFIG`, an older one (scripts/test.sh runs
//! 15 → 15, 17 → 17 and 17 → 18): the
//! upgraded cluster never issues an ID already stored in the tables it brought along, and
//! continues above them (docs/design.md §5), although pg_upgrade carries no reservation and no
//! WAL: the floor comes from each database's floor relation, which pg_upgrade copies. The
//! sequence is used in two databases, the second with every column shape of
//! `column_shapes` (wrapper default, fetched IDs, trigger, numeric, text, composite key, domain).
//!
//! The old cluster's IDs ran 30 s ahead of real time (its wall clock was 30 s fast and was
//! stepped back), so a new cluster that starts from its wall clock reaches them within the test.
//! It asserts no row refused by the primary key, no ID issued twice and the new IDs above the
//! stored ones, and prints the IDs, duplicates and how far IDs ran ahead of real time
//! (`--nocapture`).
//!
//! The old cluster runs on `UPGRADE_FROM_PG_CONFIG` (default: the installation under test), which
//! must have this version of the extension installed (`scripts/test.sh` installs the 17 package
//! before the 18 tests). Not from Debian's 15 to 17 or 18: Debian's 15.20 stores a `pg_attver`
//! option on every column, which the newer majors' pg_dump copies into `ALTER COLUMN … SET` and
//! their servers reject, so pg_upgrade fails for any table, with or without this extension.

use std::time::Instant;

use snowflake_id_cluster_tests::fixtures::{
    assert_ids_rows, assert_no_id_reissued, clock_fast_then_corrected, count, load_after,
    CLOCK_FAST, DEFAULT_IDS_TABLE,
};
use snowflake_id_cluster_tests::{column_shapes, pg_config_program, pg_major, Cluster};

/// Rows per column shape in the second database, and new IDs taken there after the upgrade.
const SHAPE_ROWS: i64 = 3_000;
const NEW_IDS: i64 = 20_000;

#[test]
fn upgraded_cluster_continues_above_the_ids_in_its_tables() {
    let from = std::env::var("UPGRADE_FROM_PG_CONFIG").unwrap_or_else(|_| pg_config_program());
    let test = &format!("pg_upgrade from {from} to PostgreSQL {}", pg_major());
    let mut old = Cluster::builder()
        .installation(&from)
        .faketime_at(CLOCK_FAST)
        .start();
    old.connect().batch_execute(DEFAULT_IDS_TABLE).unwrap();
    column_shapes::create(&old);
    let (fast, corrected) = clock_fast_then_corrected(
        &old,
        |offset| old.set_fake_time(offset),
        "old cluster",
        0,
        10_000,
    );
    // Still ahead of real time: the cluster clock leads until the step back has decayed.
    column_shapes::fill(&mut old.connect_to(column_shapes::DATABASE), SHAPE_ROWS);
    let stored = count(&mut old.connect(), "SELECT count(*) FROM ids");
    let stored_shapes = column_shapes::stored(&mut old.connect_to(column_shapes::DATABASE));
    old.stop("fast");

    let mut new = Cluster::builder().create();
    let started = Instant::now();
    new.upgrade_from(&old);
    let upgrade_took = started.elapsed();
    new.start();
    assert_ids_rows(&new, stored, "rows of the old cluster");
    println!("[{test}] pg_upgrade took {upgrade_took:.1?}; {stored} rows upgraded");

    let upgraded = load_after(
        test,
        "upgraded cluster, insert load",
        &new,
        &[&fast, &corrected],
    );
    assert_no_id_reissued(test, &[&fast, &corrected, &upgraded]);

    let (below, equal) = column_shapes::new_ids_against(
        &mut new.connect_to(column_shapes::DATABASE),
        &stored_shapes,
        NEW_IDS,
    );
    println!(
        "[{test}] second database: {} IDs stored in 8 column shapes; {NEW_IDS} new IDs: {below} \
         at or below the newest stored, {equal} equal to a stored one",
        stored_shapes.len()
    );
    assert_eq!(
        (below, equal),
        (0, 0),
        "second database: new IDs among the stored ones"
    );
}
