//! A change of a sequence made in a prepared transaction (as Citus prepares its workers' part of
//! every distributed DDL) reaches every connection once it commits, also when the server
//! restarted, crashed or was promoted between its `PREPARE TRANSACTION` and its `COMMIT
//! PREPARED`: shared memory, where the extension directory follows writers, is new then, and
//! the directory follows the prepared transactions it finds (design §6;
//! crates/snowflake_id_core/tests/directory_model.rs). A new connection and a connection that
//! was open across the commit both take the committed layout at once, a dropped sequence gives
//! 42704, a rolled-back change leaves the old layout, and sessions of two layouts that share
//! their low bits never issue the same ID. On 229c10d (0.12.0 and the first, unreleased
//! directory) the directory kept serving the layout the prepared transaction replaced, after
//! each of these faults (issue 61's measurements).

use std::collections::HashSet;
use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{first_id, is_js53, next_id};
use snowflake_id_cluster_tests::{backend_pid, wait_until, Client, Cluster};

/// How the server loses its shared memory between the prepare and the commit.
#[derive(Clone, Copy, Debug)]
enum Fault {
    CleanRestart,
    Crash,
    Promotion,
}

/// A server after `fault`, and the standby that replaced it (kept so its directory lives on).
struct Setup {
    server: Cluster,
    _old_primary: Option<Cluster>,
}

/// A new server with prepared transactions allowed, the extension, and sequence "x" of the js53
/// layout, used once by a new connection (which fills the directory).
fn server_with_js53() -> Cluster {
    let server = Cluster::builder()
        .setting("max_prepared_transactions = 4")
        .start();
    server
        .connect()
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             SELECT snowflake_create_sequence('x', preset => 'js53');",
        )
        .unwrap();
    assert!(is_js53(first_id(&server, "x").unwrap()));
    server
}

/// Prepares `change` (a transaction's statements) as 'change', then loses shared memory by
/// `fault`; returns the server that holds the prepared transaction now.
fn prepare_then(server: Cluster, change: &str, fault: Fault) -> Setup {
    let standby = matches!(fault, Fault::Promotion).then(|| {
        let standby = server.start_replica();
        server.wait_for_standby(&standby, Duration::from_secs(60));
        standby
    });
    let mut admin = server.connect();
    admin
        .batch_execute(&format!("BEGIN; {change}; PREPARE TRANSACTION 'change'"))
        .unwrap();
    // Not committed: everybody still finds the old row.
    assert!(is_js53(first_id(&server, "x").unwrap()));
    let mut server = server;
    match fault {
        Fault::CleanRestart => {
            server.stop("fast");
            server.start();
            Setup {
                server,
                _old_primary: None,
            }
        }
        Fault::Crash => {
            let mut witness = server.connect();
            let pid = backend_pid(&mut admin);
            server.kill_backend(pid);
            // The postmaster ends every other session once it saw the crash, then resets
            // shared memory and recovers.
            let reset = wait_until(Duration::from_secs(60), || {
                witness.simple_query("SELECT 1").is_err()
            });
            assert!(reset, "the crash of backend {pid} was never noticed");
            drop(server.wait_for_connection(Duration::from_secs(60)));
            Setup {
                server,
                _old_primary: None,
            }
        }
        Fault::Promotion => {
            let standby = standby.expect("made above");
            server.wait_for_standby(&standby, Duration::from_secs(60));
            server.stop("fast");
            standby.promote();
            standby.wait_until_primary(Duration::from_secs(60));
            Setup {
                server: standby,
                _old_primary: Some(server),
            }
        }
    }
}

/// After `fault`, a new connection and a pooled one find the old "x" (filling the directory
/// again), then `ending` ('COMMIT PREPARED' or 'ROLLBACK PREPARED') runs in a third session;
/// returns what new connections and the pooled one take then.
fn after_fault_and_end(
    change: &str,
    fault: Fault,
    ending: &str,
) -> (Vec<Result<i64, String>>, Result<i64, String>) {
    let setup = prepare_then(server_with_js53(), change, fault);
    let server = &setup.server;
    assert!(
        is_js53(first_id(server, "x").unwrap()),
        "{fault:?}: the old row is still the committed one"
    );
    let mut pooled = server.connect();
    assert!(is_js53(next_id(&mut pooled, "x").unwrap()));
    assert!(is_js53(first_id(server, "x").unwrap()));
    assert_eq!(
        directory(server),
        (Some("writer pending".into()), false),
        "{fault:?}: the prepared transaction the server found is followed"
    );
    server
        .connect()
        .batch_execute(&format!("{ending} 'change'"))
        .unwrap();
    let new_connections: Vec<_> = (0..5).map(|_| first_id(server, "x")).collect();
    // On again once it ended; where the sequence is still there, its entry answers the next
    // connections' lookups.
    let issued = new_connections.iter().all(Result::is_ok);
    assert_eq!(
        directory(server),
        (None, issued),
        "{fault:?}, {ending}: {new_connections:?}"
    );
    (new_connections, next_id(&mut pooled, "x"))
}

/// This database's row of `snowflake_directory()`: why the directory is off for it (None: it
/// is on), and whether its entry answered a lookup.
fn directory(cluster: &Cluster) -> (Option<String>, bool) {
    let row = cluster
        .connect()
        .query_one(
            "SELECT off, answered > 0 FROM snowflake_directory()
             WHERE database = current_database()",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

const REPLACE_WITH_CLASSIC: &str = "SELECT snowflake_drop_sequence('x');
     SELECT snowflake_create_sequence('x', preset => 'classic')";
const DROP: &str = "SELECT snowflake_drop_sequence('x')";

fn a_prepared_replacement_reaches_every_connection_after(fault: Fault) {
    let (new_connections, pooled) =
        after_fault_and_end(REPLACE_WITH_CLASSIC, fault, "COMMIT PREPARED");
    for id in new_connections {
        assert!(!is_js53(id.clone().unwrap()), "{fault:?}: {id:?} is js53");
    }
    assert!(
        !is_js53(pooled.clone().unwrap()),
        "{fault:?}: pooled {pooled:?}"
    );
}

fn a_prepared_drop_reaches_every_connection_after(fault: Fault) {
    let (new_connections, pooled) = after_fault_and_end(DROP, fault, "COMMIT PREPARED");
    for id in new_connections {
        assert_eq!(
            id,
            Err("42704".into()),
            "{fault:?}: a dropped sequence issued"
        );
    }
    assert_eq!(pooled, Err("42704".into()), "{fault:?}: pooled");
}

fn a_prepared_change_rolled_back_keeps_the_layout_after(fault: Fault) {
    let (new_connections, pooled) =
        after_fault_and_end(REPLACE_WITH_CLASSIC, fault, "ROLLBACK PREPARED");
    for id in new_connections.into_iter().chain([pooled]) {
        assert!(is_js53(id.clone().unwrap()), "{fault:?}: {id:?}");
    }
}

#[test]
fn a_prepared_replacement_reaches_every_connection_after_a_clean_restart() {
    a_prepared_replacement_reaches_every_connection_after(Fault::CleanRestart);
    a_prepared_drop_reaches_every_connection_after(Fault::CleanRestart);
    a_prepared_change_rolled_back_keeps_the_layout_after(Fault::CleanRestart);
}

#[test]
fn a_prepared_replacement_reaches_every_connection_after_a_crash() {
    a_prepared_replacement_reaches_every_connection_after(Fault::Crash);
    a_prepared_drop_reaches_every_connection_after(Fault::Crash);
    a_prepared_change_rolled_back_keeps_the_layout_after(Fault::Crash);
}

#[test]
fn a_prepared_replacement_reaches_every_connection_after_a_promotion() {
    a_prepared_replacement_reaches_every_connection_after(Fault::Promotion);
    a_prepared_drop_reaches_every_connection_after(Fault::Promotion);
    a_prepared_change_rolled_back_keeps_the_layout_after(Fault::Promotion);
}

/// Layouts of the same time unit whose worker and sequence fields share their low bits: an ID
/// of worker 0 and sequence n is the same under both, and each layout has worker ids of its
/// own. Pooled sessions that connected after the commit, then (after a change of another
/// database's catalog, which made the first directory drop its stale entry) new connections,
/// take IDs at the same time: none twice.
#[test]
fn two_layouts_that_share_their_low_bits_never_issue_an_id_twice() {
    let server = Cluster::builder()
        .setting("max_prepared_transactions = 4")
        .start();
    let mut admin = server.connect();
    admin
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             SELECT snowflake_create_sequence('d', preset => 'classic');",
        )
        .unwrap();
    admin.batch_execute("CREATE DATABASE elsewhere").unwrap();
    assert!(first_id(&server, "d").is_ok());
    admin
        .batch_execute(
            "BEGIN; SELECT snowflake_drop_sequence('d');
             SELECT snowflake_create_sequence('d', preset => 'classic', worker_bits => 3,
                                              sequence_bits => 19);
             PREPARE TRANSACTION 'narrow';",
        )
        .unwrap();
    drop(admin);
    let mut server = server;
    server.stop("fast");
    server.start();
    assert!(first_id(&server, "d").is_ok());
    server
        .connect()
        .batch_execute("COMMIT PREPARED 'narrow'")
        .unwrap();
    let mut pooled: Vec<Client> = (0..3).map(|_| server.connect()).collect();
    for client in &mut pooled {
        next_id(client, "d").unwrap();
    }
    // In another database: no invalidation reaches this one's sessions.
    let mut elsewhere = server.connect_to("elsewhere");
    elsewhere
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             SELECT snowflake_create_sequence('unrelated');
             SELECT snowflake_drop_sequence('unrelated');",
        )
        .unwrap();
    let mut sessions: Vec<Client> = (0..3).map(|_| server.connect()).collect();
    sessions.append(&mut pooled);
    let batches: Vec<Vec<i64>> = std::thread::scope(|scope| {
        let running: Vec<_> = sessions
            .iter_mut()
            .map(|client| {
                scope.spawn(move || {
                    (0..10)
                        .flat_map(|_| {
                            client
                                .query_one(
                                    "SELECT array_agg(snowflake_nextval('d'))
                                     FROM generate_series(1, 20000)",
                                    &[],
                                )
                                .unwrap()
                                .get::<_, Vec<i64>>(0)
                        })
                        .collect()
                })
            })
            .collect();
        running.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut seen = HashSet::new();
    let issued: usize = batches.iter().map(Vec::len).sum();
    let twice = batches
        .into_iter()
        .flatten()
        .filter(|&id| !seen.insert(id))
        .count();
    println!("{issued} IDs by 3 pooled sessions and 3 new connections, {twice} twice");
    assert_eq!(twice, 0, "{twice} of {issued} IDs issued twice");
}
