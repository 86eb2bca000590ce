//! A move to a new cluster by logical replication (the usual major-version move besides
//! pg_upgrade): the new cluster subscribes to the old one, catches up, and takes over the
//! writes with the same node id. Logical replication carries rows, not the old cluster's WAL or
//! its floor relation, so the cut-over has one documented step (docs/reference.md, "Moving to a
//! new cluster", its block as it stands there): `snowflake_raise_floor(<the old cluster's
//! snowflake_stats().reserved_until>)` on the new one, after the old one stopped issuing IDs. It covers every session of the new
//! cluster, also one that took an ID before the data came (a pooled connection's health check).
//!
//! The old cluster's IDs ran 30 s ahead of real time (its clock was 30 s fast, then stepped
//! back), so a new cluster that started from its wall clock would repeat them within the test.

use std::collections::HashSet;
use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{
    clock_fast_then_corrected, count, doc_sql_block, insert_with_default, CLOCK_FAST,
    DEFAULT_IDS_TABLE,
};
use snowflake_id_cluster_tests::{error_parts, wait_until, Client, Cluster};

/// The one value `sql` returns, as text (the simple protocol's form, as psql shows it).
fn simple_value(client: &mut Client, sql: &str) -> String {
    client
        .simple_query(sql)
        .unwrap_or_else(|error| panic!("{sql}: {error}"))
        .into_iter()
        .find_map(|message| match message {
            postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{sql} returned no value"))
}

const ROWS: i64 = 5_000;

#[test]
fn after_the_cut_over_step_no_session_repeats_a_replicated_id() {
    let old = Cluster::builder()
        .faketime_at(CLOCK_FAST)
        .setting("wal_level = logical")
        .start();
    old.connect()
        .batch_execute(&format!(
            "{DEFAULT_IDS_TABLE} CREATE PUBLICATION move FOR TABLE ids;"
        ))
        .unwrap();

    let new = Cluster::builder().start();
    let mut admin = new.connect();
    admin.batch_execute(DEFAULT_IDS_TABLE).unwrap();
    // A pooled connection that checked its health with an ID before the data came.
    let mut pooled = new.connect();
    pooled.query_one("SELECT snowflake_nextval()", &[]).unwrap();

    let (fast, corrected) =
        clock_fast_then_corrected(&old, |offset| old.set_fake_time(offset), "old", 0, ROWS);
    let replicated: HashSet<i64> = fast.ids.iter().chain(&corrected.ids).copied().collect();
    admin
        .batch_execute(&format!(
            "CREATE SUBSCRIPTION move CONNECTION '{}' PUBLICATION move",
            old.conninfo("postgres")
        ))
        .unwrap();
    let caught_up = wait_until(Duration::from_secs(120), || {
        count(&mut admin, "SELECT count(*) FROM ids") == replicated.len() as i64
    });
    assert!(caught_up, "the subscription did not catch up");

    // Cut-over: the old cluster stops issuing IDs; its last reservation goes to the new one,
    // by the reference's block: its first query on the old cluster, its second on the new one
    // with '<that time>' filled in.
    // ("Moving to a new cluster" is a subsection of "Guarantees".)
    let block = doc_sql_block(
        "docs/reference.md",
        "Guarantees",
        "snowflake_raise_floor('<that time>')",
    );
    let statement = |marker: &str| -> String {
        block
            .lines()
            .find(|line| line.contains(marker))
            .unwrap_or_else(|| panic!("no {marker} in the reference's block:\n{block}"))
            .to_owned()
    };
    let reserved = simple_value(&mut old.connect(), &statement("FROM snowflake_stats()"));
    let raise = statement("snowflake_raise_floor('<that time>')").replace("<that time>", &reserved);
    admin.batch_execute("DROP SUBSCRIPTION move").unwrap();
    // An application role may not take this step.
    admin
        .batch_execute("CREATE ROLE app LOGIN; GRANT INSERT ON ids TO app")
        .unwrap();
    let refused = admin
        .batch_execute(&format!(
            "SET ROLE app; SELECT snowflake_raise_floor('{reserved}')"
        ))
        .unwrap_err();
    assert_eq!(error_parts(&refused).0, "42501", "{refused}");
    admin.batch_execute("RESET ROLE").unwrap();
    let floor = simple_value(&mut admin, &raise);
    println!("old cluster reserved until {reserved}; new cluster's floor now {floor}");

    let mut fresh = new.connect();
    let newest_replicated = replicated.iter().copied().max().unwrap();
    let mut reissued = Vec::new();
    let mut below = 0;
    let mut refused_rows = 0;
    for (session, client) in [(20, &mut pooled), (21, &mut fresh)] {
        let (ids, refused) = insert_with_default(client, session, 0, ROWS)
            .unwrap_or_else(|error| panic!("session {session}: {:?}", error_parts(&error)));
        refused_rows += refused;
        below += ids.iter().filter(|&&id| id <= newest_replicated).count();
        reissued.extend(ids.into_iter().filter(|id| replicated.contains(id)));
    }
    println!(
        "{} IDs replicated; after the cut-over 2 sessions (one from before the data) made {} \
         rows: {} equal to a replicated ID, {below} below the newest replicated one, \
         {refused_rows} refused by the primary key",
        replicated.len(),
        2 * ROWS,
        reissued.len()
    );
    // Above every replicated ID, not only different from them: the old IDs' ticks lie ahead of
    // the new cluster's wall clock, so a session that started below them would meet them.
    assert_eq!(below, 0, "IDs at or below the newest replicated one");
    assert!(reissued.is_empty(), "IDs issued again: {reissued:?}");
    assert_eq!(refused_rows, 0);
}
