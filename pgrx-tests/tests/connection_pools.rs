//! Every session gets IDs (docs/design.md §4): pools of hundreds of connections on sequences
//! with few worker bits, sessions of other widths that stay connected, a thousand connections,
//! sessions forced to share a handful of worker ids, and PgBouncer in transaction pooling mode.
//! In each: no session refused, no ID twice, each session's IDs increasing, and every ID decodes
//! to a time within the test's window. The tests print what they measured (`--nocapture`).

use std::thread;
use std::time::{Duration, Instant};

use snowflake_id_cluster_tests::fixtures::count;
use snowflake_id_cluster_tests::pgbouncer::{PgBouncer, Pooling};
use snowflake_id_cluster_tests::{wait_until, Client, Cluster};

/// The writers' table: one row per ID, with the writing session and its row number.
fn create_table(client: &mut Client, sequence: &str) {
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS writes_{sequence} (
                 id bigint PRIMARY KEY DEFAULT snowflake_nextval('{sequence}'),
                 session int NOT NULL,
                 n int NOT NULL
             );"
        ))
        .unwrap();
}

/// `clients.len()` sessions write `rows` rows each into `writes_<sequence>`, one row per
/// transaction, spread over `threads` threads that take turns among their sessions. Returns the
/// errors, with the session that got each.
fn write_rows(
    clients: &mut [Client],
    first_session: usize,
    sequence: &str,
    rows: usize,
    threads: usize,
) -> Vec<String> {
    let per_thread = clients.len().div_ceil(threads);
    thread::scope(|scope| {
        let handles: Vec<_> = clients
            .chunks_mut(per_thread)
            .enumerate()
            .map(|(chunk, group)| {
                scope.spawn(move || {
                    let mut errors = Vec::new();
                    for n in 0..rows {
                        for (offset, client) in group.iter_mut().enumerate() {
                            let session = first_session + chunk * per_thread + offset;
                            // The simple protocol: a transaction pooler cannot keep a named
                            // prepared statement on one server connection.
                            let insert = format!(
                                "INSERT INTO writes_{sequence} (session, n) VALUES ({session}, {n})"
                            );
                            if let Err(error) = client.batch_execute(&insert) {
                                errors.push(format!("session {session}: {error:?}"));
                            }
                        }
                    }
                    errors
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| handle.join().unwrap())
            .collect()
    })
}

/// How the writers reached the server.
#[derive(Clone, Copy, PartialEq)]
enum Writers {
    /// Each writer is one server session: its IDs must increase in the order it wrote them.
    Sessions,
    /// Through a transaction pooler: a writer's transactions run in whichever server session
    /// the pooler lends, and IDs of different sessions are not ordered within a tick.
    Pooled,
}

/// Checks `writes_<sequence>`: `expected` rows, all IDs distinct, each session's IDs in the
/// order it wrote them (for `Writers::Sessions`), and every ID's time between `window_start`
/// and the server's clock now (plus the lead IDs may take). Returns the number of distinct
/// worker ids in the IDs.
fn check_writes(
    client: &mut Client,
    sequence: &str,
    expected: i64,
    window_start: &str,
    writers: Writers,
) -> i64 {
    let table = format!("writes_{sequence}");
    let row = client
        .query_one(
            &format!(
                "SELECT count(*), count(DISTINCT id),
                        count(*) FILTER (WHERE (snowflake_decode(id, '{sequence}')).ts
                                         NOT BETWEEN '{window_start}'::timestamptz - interval '1 ms'
                                             AND clock_timestamp() + interval '1 s'),
                        count(DISTINCT (snowflake_decode(id, '{sequence}')).worker)
                 FROM {table}"
            ),
            &[],
        )
        .unwrap();
    let (rows, distinct, outside, workers): (i64, i64, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(rows, expected, "rows in {table}");
    assert_eq!(distinct, rows, "duplicate IDs in {table}");
    assert_eq!(outside, 0, "IDs of {table} outside the test's time window");
    if writers == Writers::Pooled {
        return workers;
    }
    let out_of_order = count(
        client,
        &format!(
            "SELECT count(*) FROM (SELECT id, lag(id) OVER (PARTITION BY session ORDER BY n) AS previous
                                   FROM {table}) ordered
             WHERE id <= previous"
        ),
    );
    assert_eq!(
        out_of_order, 0,
        "a session's IDs in {table} did not increase"
    );
    workers
}

/// Opens `sessions` connections that each take a worker id of `sequence` (one ID).
fn connect_holders(cluster: &Cluster, sessions: usize, sequence: &str) -> Vec<Client> {
    (0..sessions)
        .map(|_| {
            let mut client = cluster.connect();
            client
                .batch_execute(&format!("SELECT snowflake_nextval('{sequence}')"))
                .unwrap_or_else(|error| panic!("the first ID of {sequence}: {error:?}"));
            client
        })
        .collect()
}

fn server_clock(client: &mut Client) -> String {
    client
        .query_one("SELECT clock_timestamp()::text", &[])
        .unwrap()
        .get(0)
}

/// (sessions sharing a worker id, ticks found owned by another) from `snowflake_stats()`.
fn sharing(client: &mut Client) -> (i32, i64) {
    let row = client
        .query_one(
            "SELECT sharing_sessions, tick_conflicts FROM snowflake_stats()",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

/// A pool of `sessions` connections on `sequence` (whose worker field has `worker_bits` bits):
/// all connect and take a worker id, then write 5 rows each. Returns the distinct worker ids.
fn pool_on(cluster: &Cluster, sequence: &str, worker_bits: u32, sessions: usize) -> i64 {
    let mut admin = cluster.connect();
    // The sessions of an earlier pool have let go of their worker ids.
    assert!(wait_until(Duration::from_secs(30), || count(
        &mut admin,
        "SELECT count(*) FROM snowflake_workers"
    ) == 0));
    create_table(&mut admin, sequence);
    let start = server_clock(&mut admin);
    let began = Instant::now();
    let mut clients = connect_holders(cluster, sessions, sequence);
    let space = 1usize << worker_bits;
    let shared = if sessions > space {
        2 * (sessions - space)
    } else {
        0
    };
    assert_eq!(
        sharing(&mut admin).0 as usize,
        shared,
        "{sessions} sessions on {space} worker ids share as evenly as possible"
    );
    let errors = write_rows(&mut clients, 0, sequence, 5, 8);
    assert!(
        errors.is_empty(),
        "{} refused: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    let workers = check_writes(
        &mut admin,
        sequence,
        5 * sessions as i64,
        &start,
        Writers::Sessions,
    );
    assert_eq!(workers as usize, sessions.min(space));
    println!(
        "{sessions} sessions on '{sequence}' ({worker_bits} worker bits): 0 refused, {} IDs, \
         0 duplicates, {workers} worker ids, {shared} sessions sharing one, {:.1} s",
        5 * sessions,
        began.elapsed().as_secs_f64()
    );
    workers
}

/// A cluster with `settings`, the extension, and sequence `name` of `preset`.
fn cluster_with_sequence(settings: &[&str], name: &str, preset: &str) -> Cluster {
    let cluster = settings
        .iter()
        .fold(Cluster::builder(), |builder, line| builder.setting(line))
        .start();
    cluster
        .connect()
        .batch_execute(&format!(
            "CREATE EXTENSION snowflake_id;
             SELECT snowflake_create_sequence('{name}', preset => '{preset}');"
        ))
        .unwrap();
    cluster
}

#[test]
fn two_hundred_clients_on_js53() {
    let cluster = cluster_with_sequence(&["max_connections = 420"], "web", "js53");
    pool_on(&cluster, "web", 7, 200);
}

#[test]
fn three_hundred_clients_on_the_sharded_preset() {
    // The preset's node bits need a node id (which a layout without node bits would refuse).
    let settings = ["max_connections = 420", "snowflake_id.node_id = 5"];
    let cluster = cluster_with_sequence(&settings, "shards", "sharded");
    pool_on(&cluster, "shards", 8, 300);
}

#[test]
fn sessions_of_other_widths_leave_a_space_alone() {
    let cluster = cluster_with_sequence(&["max_connections = 420"], "web", "js53");
    let mut admin = cluster.connect();
    create_table(&mut admin, "default");
    create_table(&mut admin, "web");
    let start = server_clock(&mut admin);
    // A pool keeps its connections: 180 sessions on 'default' stay connected.
    let mut holders = connect_holders(&cluster, 180, "default");
    let errors = write_rows(&mut holders, 0, "default", 2, 8);
    assert!(errors.is_empty(), "{errors:?}");
    // 20 other sessions write the js53 table: the first 20 worker ids of its space, alone.
    let mut writers: Vec<Client> = (0..20).map(|_| cluster.connect()).collect();
    let errors = write_rows(&mut writers, 1_000, "web", 10, 4);
    assert!(
        errors.is_empty(),
        "{} of 20 refused: {errors:?}",
        errors.len()
    );
    let web_ids: Vec<i32> = admin
        .query(
            "SELECT worker FROM snowflake_workers WHERE worker_bits = 7 ORDER BY worker",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(web_ids, (0..20).collect::<Vec<i32>>());
    assert_eq!(sharing(&mut admin).0, 0);
    assert_eq!(
        check_writes(&mut admin, "web", 200, &start, Writers::Sessions),
        20
    );
    let holders_ids = check_writes(&mut admin, "default", 180 * 2, &start, Writers::Sessions);
    assert_eq!(holders_ids, 180);
    println!(
        "180 'default' holders, then 20 js53 writers: 0 refused, worker ids 0..19, none shared"
    );
}

#[test]
fn a_thousand_connections_on_default() {
    let cluster = Cluster::builder().setting("max_connections = 1100").start();
    let mut admin = cluster.connect();
    admin
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    pool_on(&cluster, "default", 10, 1_000);
}

#[test]
fn sixteen_busy_sessions_share_four_worker_ids() {
    const SESSIONS: usize = 16;
    const ROWS: i64 = 20_000;
    let cluster = Cluster::builder()
        .setting("snowflake_id.max_workers = 4")
        .start();
    let mut admin = cluster.connect();
    admin
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    create_table(&mut admin, "default");
    let start = server_clock(&mut admin);
    let mut clients = connect_holders(&cluster, SESSIONS, "default");
    assert_eq!(sharing(&mut admin).0 as usize, SESSIONS);
    let sessions_per_id: Vec<i32> = admin
        .query(
            "SELECT sessions FROM snowflake_workers ORDER BY worker",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    // The admin session took none: it made no ID.
    assert_eq!(sessions_per_id, [4, 4, 4, 4]);
    let began = Instant::now();
    // All at once, each in a multi-row statement, so the sharers of an id contend for ticks.
    let errors: Vec<String> = thread::scope(|scope| {
        let handles: Vec<_> = clients
            .iter_mut()
            .enumerate()
            .map(|(session, client)| {
                scope.spawn(move || {
                    client
                        .batch_execute(&format!(
                            "INSERT INTO writes_default (session, n)
                             SELECT {session}, n FROM generate_series(1, {ROWS}) n"
                        ))
                        .err()
                        .map(|error| format!("session {session}: {error}"))
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().unwrap())
            .collect()
    });
    let elapsed = began.elapsed();
    assert!(errors.is_empty(), "{errors:?}");
    let workers = check_writes(
        &mut admin,
        "default",
        SESSIONS as i64 * ROWS,
        &start,
        Writers::Sessions,
    );
    assert_eq!(workers, 4);
    let (sharing_sessions, conflicts) = sharing(&mut admin);
    assert_eq!(sharing_sessions as usize, SESSIONS);
    assert!(
        conflicts > 0,
        "sharers of a worker id never met over a tick"
    );
    println!(
        "{SESSIONS} sessions on 4 worker ids: {} IDs in {:.1} s, 0 duplicates, {conflicts} ticks \
         found taken",
        SESSIONS as i64 * ROWS,
        elapsed.as_secs_f64()
    );
}

#[test]
fn pgbouncer_in_transaction_mode_five_hundred_clients_on_forty_server_connections() {
    const CLIENTS: usize = 500;
    const ROWS: usize = 4;
    let cluster = cluster_with_sequence(&["max_connections = 100"], "web", "js53");
    let mut admin = cluster.connect();
    create_table(&mut admin, "web");
    let bouncer = PgBouncer::start(
        &cluster,
        &Pooling {
            database: "postgres",
            mode: "transaction",
            server_connections: 40,
            client_connections: 600,
        },
    );
    let start = server_clock(&mut admin);
    let began = Instant::now();
    let mut clients: Vec<Client> = (0..CLIENTS)
        .map(|client| {
            bouncer
                .try_connect_to("postgres")
                .unwrap_or_else(|error| panic!("client {client}: {error}\n{}", bouncer.log()))
        })
        .collect();
    let errors = write_rows(&mut clients, 0, "web", ROWS, 16);
    assert!(
        errors.is_empty(),
        "{} errors: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    let workers = check_writes(
        &mut admin,
        "web",
        (CLIENTS * ROWS) as i64,
        &start,
        Writers::Pooled,
    );
    // Behind the pooler only its server connections make IDs: at most 40 worker ids, alone.
    assert!(
        workers <= 40,
        "{workers} worker ids behind 40 server connections"
    );
    assert_eq!(sharing(&mut admin).0, 0);
    let server_sessions = count(
        &mut admin,
        "SELECT count(*) FROM snowflake_workers WHERE worker_bits = 7",
    );
    assert!(server_sessions <= 40, "{server_sessions}");
    println!(
        "PgBouncer (transaction pooling): {CLIENTS} clients on 40 server connections, {} IDs, \
         0 errors, 0 duplicates, {workers} worker ids, {:.1} s",
        CLIENTS * ROWS,
        began.elapsed().as_secs_f64()
    );
    drop(clients);
    drop(bouncer);
}
