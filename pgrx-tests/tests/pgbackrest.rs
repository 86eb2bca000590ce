//! Backups with pgBackRest (Debian's `pgbackrest`; docs/sharding.md, "Backups"): a stanza on a
//! local repository, a full backup, WAL archived through `archive-push` while sessions insert
//! IDs, then `pgbackrest restore --type=time` to a time in the middle of the burst into a new
//! data directory; the restored cluster starts with its clock 10 minutes behind, promotes and
//! inserts again. No new ID equals one in the restored data, nor any ID the old cluster issued
//! before the restore point, committed or not (1,000 IDs returned in a transaction still open
//! at the restore point). Prints what it measured (`--nocapture`), and how many of the IDs
//! issued after the restore point (a discarded history, not promised) came again.

use std::collections::HashSet;

use std::thread;
use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{
    assert_no_id_reissued, count, insert_for, insert_load, load_after, real_now_us, text, Issued,
    DEFAULT_IDS_TABLE,
};
use snowflake_id_cluster_tests::pgbackrest::PgBackRest;
use snowflake_id_cluster_tests::Cluster;

#[test]
fn pgbackrest_point_in_time_restore_continues_above_every_id_issued_before_the_target() {
    let test = "pgBackRest restore --type=time to the middle of a burst";
    let backrest = PgBackRest::new();
    let [archive_mode, archive_command] = backrest.archive_settings();
    let mut cluster = Cluster::builder()
        .setting(&archive_mode)
        .setting(&archive_command)
        .start();
    backrest.configure(&cluster);
    let mut admin = cluster.connect();
    admin.batch_execute(DEFAULT_IDS_TABLE).unwrap();
    let mut before_backup = Issued::new("before the full backup, insert load");
    insert_load(&cluster, &mut before_backup, 0..2, 2_000);
    backrest.run(&cluster, &["stanza-create"]);
    backrest.run(&cluster, &["check"]);
    backrest.run(&cluster, &["backup", "--type=full"]);

    // A burst of 4 s; at 2 s a session takes 1,000 IDs in a transaction it leaves open, then
    // the server's clock is read as the restore target.
    let mut burst = Issued::new("burst of 4 s after the backup (the target at 2 s)");
    let mut open = Issued::new("1,000 IDs returned in a transaction open at the target");
    let (target, holder) = thread::scope(|scope| {
        let loading =
            scope.spawn(|| insert_for(&cluster, &mut burst, 10..12, Duration::from_secs(4)));
        thread::sleep(Duration::from_secs(2));
        let mut holder = cluster.connect();
        holder.batch_execute("BEGIN").unwrap();
        let ids: Vec<i64> = holder
            .query(
                "SELECT snowflake_nextval() FROM generate_series(1, 1000)",
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        open.add(&ids, 0, real_now_us());
        let target = text(&mut admin, "SELECT clock_timestamp()::text");
        loading.join().unwrap();
        (target, holder)
    });
    drop(holder);
    backrest.archive_current_wal(&cluster, &mut admin);
    let stored_before = count(&mut admin, "SELECT count(*) FROM ids");
    drop(admin);
    cluster.stop("fast");

    let restored = backrest
        .restore_to_time(&cluster, &target)
        .faketime_at("-10m")
        .start();
    restored.wait_until_primary(Duration::from_secs(120));
    let mut client = restored.connect();
    let restored_rows = Issued::stored(&mut client, "rows in the restored cluster");
    let burst_restored = restored_rows.ids.len() - before_backup.ids.len();
    println!(
        "[{test}] target {target}; the old cluster had {stored_before} rows; the restore brought \
         back {} ({burst_restored} of the burst's {})",
        restored_rows.ids.len(),
        burst.ids.len()
    );
    assert!(
        burst_restored > 0 && burst_restored < burst.ids.len(),
        "[{test}] the restore did not stop inside the burst"
    );

    // The burst's rows the restore brought back were committed before the target; the others
    // after it.
    let kept: HashSet<i64> = restored_rows.ids.iter().copied().collect();
    let (before_target, after_target): (Vec<i64>, Vec<i64>) =
        burst.ids.iter().partition(|id| kept.contains(id));
    let mut committed = Issued::new("burst, rows committed before the target");
    committed.add(&before_target, 0, real_now_us());
    let new = load_after(
        "the pgBackRest restore",
        "restored cluster (clock 10 min behind), insert load",
        &restored,
        &[&before_backup, &committed, &open],
    );
    let after_target: HashSet<i64> = after_target.into_iter().collect();
    let again = new
        .ids
        .iter()
        .filter(|id| after_target.contains(id))
        .count();
    println!(
        "[{test}] of the {} IDs the old cluster stored after the target (a discarded history, \
         not promised), the restored cluster issued {again} again",
        after_target.len()
    );
    assert_no_id_reissued(test, &[&before_backup, &committed, &open, &new]);
}
