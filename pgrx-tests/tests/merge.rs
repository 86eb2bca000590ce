//! Merging the rows of several nodes, each with its own `snowflake_id.node_id` and the same layout:
//! three nodes inserting at once, then copied into one primary key; two game servers used apart
//! (with a restart), then one's `pg_dump --data-only` loaded into the other. Zero key conflicts,
//! no ID rewritten, every ID decodes to the node that made it; the same merge of `bigserial`
//! keys fails with 23505. The SQL is that of docs/sharding.md; each test prints what it measured
//! (`--nocapture`).

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use snowflake_id_cluster_tests::fixtures::{
    capacity, fingerprint, rate, start_clusters, start_nodes_with_events_table,
};
use snowflake_id_cluster_tests::{error_parts, postgres_bin_dir, Client, Cluster, PgError};

/// Copies rows with `COPY ... TO STDOUT` on one connection and `COPY ... FROM STDIN` on another;
/// returns the rows written, or the error of the receiving side (e.g. 23505 on a duplicate key).
fn copy_between(
    from: &mut Client,
    copy_out: &str,
    to: &mut Client,
    copy_in: &str,
) -> Result<u64, PgError> {
    let mut data = Vec::new();
    from.copy_out(copy_out)?
        .read_to_end(&mut data)
        .expect("read COPY data");
    let mut writer = to.copy_in(copy_in)?;
    let written = writer.write_all(&data);
    match (written, writer.finish()) {
        (_, Err(error)) => Err(error),
        (Err(error), Ok(_)) => panic!("COPY FROM STDIN: write failed: {error}"),
        (Ok(()), Ok(rows)) => Ok(rows),
    }
}

/// libpq arguments for a command-line client (pg_dump, psql) connecting to `cluster`.
fn client_args(cluster: &Cluster) -> Vec<String> {
    vec![
        "--host".into(),
        cluster.socket_dir().display().to_string(),
        "--port".into(),
        cluster.port().to_string(),
        "--username".into(),
        "postgres".into(),
        "--dbname".into(),
        "postgres".into(),
    ]
}

// ---------------------------------------------------------------------------------------------
// Three nodes, merged into one primary key
// ---------------------------------------------------------------------------------------------

const MERGE_NODES: [i32; 3] = [1, 2, 3];
const SESSIONS_PER_NODE: i32 = 2;
const ROWS_PER_SESSION: i64 = 20_000;

#[test]
fn three_nodes_merge_into_one_primary_key_without_conflicts() {
    let (nodes, mut admins) =
        start_nodes_with_events_table(&MERGE_NODES, &[], "session int NOT NULL, n int NOT NULL");

    // The same layout on every node: equal fingerprints.
    let fingerprints: Vec<String> = admins
        .iter_mut()
        .map(|admin| fingerprint(admin, "events"))
        .collect();
    assert!(
        fingerprints.iter().all(|f| *f == fingerprints[0]),
        "layouts differ across nodes: {fingerprints:?}"
    );
    let (nodes_max, sessions, per_second, runs_out) = capacity(&mut admins[0], "events");
    assert_eq!((nodes_max, sessions, per_second), (64, 256, 1_024_000));
    println!(
        "'sharded' layout, fingerprint {} on all 3 nodes: {nodes_max} nodes × {sessions} \
         sessions × {per_second} IDs/s, runs out at {runs_out}",
        fingerprints[0]
    );

    // Two sessions per node insert concurrently on all three nodes.
    let sessions = nodes.len() * SESSIONS_PER_NODE as usize;
    let start_line = Arc::new(Barrier::new(sessions));
    let started = Instant::now();
    let inserting: Vec<_> = nodes
        .iter()
        .flat_map(|node| (0..SESSIONS_PER_NODE).map(move |session| (node, session)))
        .map(|(node, session)| {
            let mut client = node.connect();
            let start_line = start_line.clone();
            thread::spawn(move || {
                start_line.wait();
                let began = Instant::now();
                let inserted = client
                    .execute(
                        "INSERT INTO events (session, n)
                         SELECT $1, n FROM generate_series(1, $2::bigint) AS n",
                        &[&session, &ROWS_PER_SESSION],
                    )
                    .unwrap();
                assert_eq!(inserted, ROWS_PER_SESSION as u64);
                began.elapsed()
            })
        })
        .collect();
    let session_times: Vec<Duration> = inserting.into_iter().map(|s| s.join().unwrap()).collect();
    let all_rows = sessions as i64 * ROWS_PER_SESSION;
    println!(
        "insert on 3 nodes × {SESSIONS_PER_NODE} sessions: {}; slowest session {:.0} ms",
        rate(all_rows, started.elapsed()),
        session_times.iter().max().unwrap().as_secs_f64() * 1e3
    );

    // Copy every node's rows into one primary-key table on node 1.
    admins[0]
        .batch_execute(
            "CREATE TABLE all_events (
                 id      bigint PRIMARY KEY,
                 origin  int NOT NULL,
                 session int NOT NULL,
                 n       int NOT NULL
             );",
        )
        .unwrap();
    let mut target = nodes[0].connect();
    let started = Instant::now();
    for (node, node_id) in nodes.iter().zip(MERGE_NODES) {
        let mut source = node.connect();
        let copied = copy_between(
            &mut source,
            &format!(
                "COPY (SELECT id, {node_id}, session, n FROM events) TO STDOUT (FORMAT binary)"
            ),
            &mut target,
            "COPY all_events (id, origin, session, n) FROM STDIN (FORMAT binary)",
        )
        .unwrap_or_else(|error| panic!("copy node {node_id}'s rows: {:?}", error_parts(&error)));
        assert_eq!(copied, SESSIONS_PER_NODE as u64 * ROWS_PER_SESSION as u64);
    }
    println!(
        "COPY into one primary key on node 1: {}",
        rate(all_rows, started.elapsed())
    );

    let row = admins[0]
        .query_one(
            "SELECT count(*),
                    count(DISTINCT id),
                    count(*) FILTER (WHERE (snowflake_decode(id, 'events')).node <> origin),
                    count(DISTINCT ((snowflake_decode(id, 'events')).node,
                                    (snowflake_decode(id, 'events')).worker))
             FROM all_events",
            &[],
        )
        .unwrap();
    let (rows, distinct, wrong_node, node_workers): (i64, i64, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(rows, all_rows);
    assert_eq!(distinct, rows, "duplicate IDs across nodes");
    assert_eq!(wrong_node, 0, "rows whose decoded node is not their origin");
    assert_eq!(node_workers, sessions as i64, "(node, worker) pairs");
    let per_node: Vec<(i32, i64)> = admins[0]
        .query(
            "SELECT (snowflake_decode(id, 'events')).node, count(*)
             FROM all_events GROUP BY 1 ORDER BY 1",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let expected: Vec<(i32, i64)> = MERGE_NODES
        .iter()
        .map(|&node| (node, SESSIONS_PER_NODE as i64 * ROWS_PER_SESSION))
        .collect();
    assert_eq!(per_node, expected);
    println!(
        "merged {rows} rows: {distinct} distinct IDs, 0 conflicts, decoded nodes {per_node:?}, \
         {node_workers} (node, worker) pairs"
    );
}

// ---------------------------------------------------------------------------------------------
// Two game servers, used apart, then merged
// ---------------------------------------------------------------------------------------------

const GAME_NODES: [i32; 2] = [1, 2];
const PLAYERS_PER_ROUND: i64 = 1_000;
const ITEMS_PER_PLAYER: i64 = 3;
const ROUNDS: usize = 2;

const GAME_SCHEMA: &str = "
    CREATE EXTENSION snowflake_id;
    SELECT snowflake_create_sequence('game', preset => 'sharded');
    CREATE TABLE players (
        id   bigint PRIMARY KEY DEFAULT snowflake_nextval('game'),
        name text NOT NULL
    );
    CREATE TABLE items (
        id        bigint PRIMARY KEY DEFAULT snowflake_nextval('game'),
        player_id bigint NOT NULL REFERENCES players,
        kind      text NOT NULL
    );
    -- For comparison: what the servers would have used without snowflake IDs.
    CREATE TABLE legacy_players (
        id   bigserial PRIMARY KEY,
        name text NOT NULL
    );";

/// One round of play on one server: new players, each with a few items.
fn play_round(client: &mut Client, server: i32, round: usize) {
    let mut transaction = client.transaction().unwrap();
    let name = format!("server {server} round {round}");
    transaction
        .execute(
            "INSERT INTO players (name) SELECT $1 || ' player ' || n
             FROM generate_series(1, $2::bigint) AS n",
            &[&name, &PLAYERS_PER_ROUND],
        )
        .unwrap();
    transaction
        .execute(
            "INSERT INTO items (player_id, kind)
             SELECT p.id, 'item ' || k FROM players p, generate_series(1, $2::bigint) AS k
             WHERE p.name LIKE $1 || ' player %'",
            &[&name, &ITEMS_PER_PLAYER],
        )
        .unwrap();
    transaction
        .execute(
            "INSERT INTO legacy_players (name) SELECT $1 || ' player ' || n
             FROM generate_series(1, $2::bigint) AS n",
            &[&name, &PLAYERS_PER_ROUND],
        )
        .unwrap();
    transaction.commit().unwrap();
}

#[test]
fn two_game_servers_used_apart_merge_without_conflicts() {
    let mut servers = start_clusters(&GAME_NODES.map(Some), &[]);
    for server in &servers {
        server.connect().batch_execute(GAME_SCHEMA).unwrap();
    }

    // The servers run separately, both at once, with a restart of each between rounds.
    for round in 1..=ROUNDS {
        if round > 1 {
            for server in &mut servers {
                server.stop("fast");
                server.start();
            }
        }
        thread::scope(|scope| {
            for (server, node) in servers.iter().zip(GAME_NODES) {
                let mut client = server.connect();
                scope.spawn(move || play_round(&mut client, node, round));
            }
        });
    }

    // Merge: pg_dump server 2's game data and load it into server 1, as an operator would.
    let bin = postgres_bin_dir();
    let dump = Command::new(bin.join("pg_dump"))
        .args(client_args(&servers[1]))
        .args(["--data-only", "--table=players", "--table=items"])
        .output()
        .expect("run pg_dump");
    assert!(
        dump.status.success(),
        "pg_dump: {}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let started = Instant::now();
    let mut psql = Command::new(bin.join("psql"))
        .args(client_args(&servers[0]))
        .args(["--no-psqlrc", "--quiet", "--set", "ON_ERROR_STOP=1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run psql");
    psql.stdin
        .take()
        .unwrap()
        .write_all(&dump.stdout)
        .expect("feed the dump to psql");
    let restore = psql.wait_with_output().expect("wait for psql");
    assert!(
        restore.status.success(),
        "loading server 2's dump into server 1 failed (conflict?): {}",
        String::from_utf8_lossy(&restore.stderr)
    );
    let merge_time = started.elapsed();

    let mut merged = servers[0].connect();
    let per_server = PLAYERS_PER_ROUND * ROUNDS as i64;
    let row = merged
        .query_one(
            "SELECT (SELECT count(*) FROM players),
                    (SELECT count(DISTINCT (snowflake_decode(id, 'game')).node) FROM players),
                    (SELECT count(*) FROM items),
                    (SELECT count(*) FROM items i JOIN players p ON p.id = i.player_id
                     WHERE (snowflake_decode(i.id, 'game')).node
                           <> (snowflake_decode(p.id, 'game')).node),
                    (SELECT count(*) FROM players
                     WHERE name LIKE 'server ' || (snowflake_decode(id, 'game')).node || ' %')",
            &[],
        )
        .unwrap();
    let (players, nodes, items, crossed, named_right): (i64, i64, i64, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
    assert_eq!(players, 2 * per_server);
    assert_eq!(nodes, 2);
    assert_eq!(items, 2 * per_server * ITEMS_PER_PLAYER);
    assert_eq!(crossed, 0, "items attached to another server's player");
    assert_eq!(
        named_right, players,
        "players whose decoded node is not their server"
    );
    println!(
        "game merge: {players} players and {items} items from 2 servers ({ROUNDS} rounds, a \
         restart between) loaded with pg_dump | psql in {:.0} ms: 0 key conflicts, no ID \
         rewritten, foreign keys intact",
        merge_time.as_secs_f64() * 1e3
    );

    // The same merge with bigserial keys collides at once.
    let mut source = servers[1].connect();
    let error = copy_between(
        &mut source,
        "COPY legacy_players TO STDOUT (FORMAT binary)",
        &mut merged,
        "COPY legacy_players FROM STDIN (FORMAT binary)",
    )
    .unwrap_err();
    assert_eq!(error_parts(&error).0, "23505", "{error}");
    println!(
        "the same merge of bigserial keys: {}",
        error_parts(&error).1
    );
}
