//! The node id fails closed (docs/sharding.md, "Node ids"): a sequence refuses to make IDs
//! while `snowflake_id.node_id` is unset but its layout has node bits (55000) or while the node id
//! does not fit its node bits (22023), and writes nothing; a session cannot change its node id;
//! a valid one is in every ID the sequence makes.

use snowflake_id_cluster_tests::fixtures::doc_examples::psql;
use snowflake_id_cluster_tests::fixtures::{count, doc_sql_block, failure};
use snowflake_id_cluster_tests::{error_parts, Cluster};

#[test]
fn node_id_that_does_not_fit_is_refused_and_not_user_settable() {
    let cluster = Cluster::builder()
        .setting("snowflake_id.node_id = 5")
        .start();
    let mut client = cluster.connect();
    client
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let error = client.query("SELECT snowflake_nextval()", &[]).unwrap_err();
    let (code, message, hint) = error_parts(&error);
    assert_eq!(code, "22023", "{message}");
    assert_eq!(
        message,
        "snowflake_id.node_id = 5 does not fit the 0 node bits of snowflake sequence \"default\""
    );
    assert!(
        hint.contains("preset => 'sharded'") && hint.contains("snowflake_convert_column"),
        "the hint names the way to node bits: {hint}"
    );

    // A session cannot change its node id (it would forge another node's IDs).
    let error = client
        .batch_execute("SET snowflake_id.node_id = 0")
        .unwrap_err();
    assert_eq!(error_parts(&error).0, "55P02", "{error}");
    let error = client
        .batch_execute("ALTER SYSTEM SET snowflake_id.node_id = 0; SELECT 1")
        .err();
    // ALTER SYSTEM works for a superuser but takes effect only at restart; the running value holds.
    drop(error);
    let node: String = client
        .query_one("SHOW snowflake_id.node_id", &[])
        .unwrap()
        .get(0);
    assert_eq!(node, "5");
}

/// The README's "From one cluster to many" ("Choose a layout"), run as a reader runs it: its
/// first block through psql (a sequence with node bits, `ALTER SYSTEM SET
/// snowflake_id.node_id`), the restart its `sh` block makes, then the block that switches the
/// column.
fn readme_block(marker: &str) -> String {
    doc_sql_block("README.md", "Choose a layout", marker)
}

/// Runs `sql` through psql in the database postgres, as the docs test does.
fn run_as_reader(cluster: &Cluster, sql: &str) {
    let printed = psql(cluster, "postgres", sql, "readme-block.sql");
    assert!(printed.success, "{sql}\n{}", printed.text);
}

/// The README's "From one cluster to many", its blocks as they stand there, in their order: a
/// sequence with node bits and the node id set, the server restarted (`'default'` then refuses
/// IDs, 22023), the column switched; new IDs carry the node and continue above every stored
/// one. (The docs test walks the same blocks after the README's others.)
#[test]
fn one_cluster_to_many_as_the_readme_says() {
    let before_restart = readme_block("ALTER SYSTEM SET snowflake_id.node_id = 1;");
    let after_restart = readme_block("snowflake_convert_column('purchases', 'id', 'purchases')");
    let mut cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             CREATE TABLE purchases (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
             INSERT INTO purchases (item) SELECT 'before' FROM generate_series(1, 1000);",
        )
        .unwrap();
    run_as_reader(&cluster, &before_restart);
    drop(client);
    cluster.stop("fast");
    cluster.start();
    let mut client = cluster.connect();
    let (code, ..) = failure(
        &mut client,
        "INSERT INTO purchases (item) VALUES ('in between')",
    );
    assert_eq!(
        code, "22023",
        "'default' refuses IDs once the node id is set"
    );
    run_as_reader(&cluster, &after_restart);
    client
        .batch_execute("INSERT INTO purchases (item) SELECT 'after' FROM generate_series(1, 1000)")
        .unwrap();
    let above = count(
        &mut client,
        "SELECT count(*) FROM purchases WHERE item = 'after'
           AND id > (SELECT max(id) FROM purchases WHERE item = 'before')
           AND (snowflake_decode(id, 'purchases')).node = 1",
    );
    assert_eq!(
        above, 1000,
        "every new ID carries node 1 above the stored IDs"
    );
    assert_eq!(
        count(&mut client, "SELECT count(DISTINCT id) FROM purchases"),
        2000
    );

    // The README's patterns without the sequence read 'default', whose layout is not the new
    // IDs': each says so in a WARNING (once per statement) naming the way out; with the
    // sequence, none does, and the answers are right.
    let warnings = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let heard = warnings.clone();
    let mut watched = postgres::Config::new()
        .host_path(cluster.socket_dir())
        .port(cluster.port())
        .user("postgres")
        .dbname("postgres")
        .notice_callback(move |notice| {
            heard.lock().unwrap().push(format!(
                "{} {} | {}",
                notice.code().code(),
                notice.message(),
                notice.hint().unwrap_or("")
            ))
        })
        .connect(postgres::NoTls)
        .unwrap();
    let mut warned = |sql: &str| -> Vec<String> {
        watched.batch_execute(sql).unwrap();
        std::mem::take(&mut *warnings.lock().unwrap())
    };
    for sql in [
        "SELECT (snowflake_decode(id)).ts FROM purchases WHERE item = 'after'",
        "SELECT count(*) FROM purchases WHERE id >= snowflake_min_id(now() - interval '1 hour')",
    ] {
        let heard = warned(sql);
        println!("[without the sequence] {sql}: {heard:?}");
        assert_eq!(heard.len(), 1, "one warning per statement: {heard:?}");
        assert!(
            heard[0].starts_with("01000 ") && heard[0].contains("'<that sequence>'"),
            "{heard:?}"
        );
    }
    for sql in [
        "SELECT (snowflake_decode(id, 'purchases')).ts FROM purchases WHERE item = 'after'",
        "SELECT count(*) FROM purchases WHERE id >= snowflake_min_id(now() - interval '1 hour', 'purchases')",
    ] {
        assert_eq!(warned(sql), Vec::<String>::new(), "{sql}");
    }
    let recent = count(
        &mut client,
        "SELECT count(*) FROM purchases WHERE id >= snowflake_min_id(now() - interval '1 hour', 'purchases')",
    );
    assert_eq!(
        recent, 1000,
        "the IDs made since the switch, by the new sequence's range"
    );
}

#[test]
fn node_id_unset_fails_closed_then_out_of_range_then_works() {
    let mut cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             SELECT snowflake_create_sequence('events', preset => 'sharded');
             CREATE TABLE events (
                 id bigint PRIMARY KEY DEFAULT snowflake_nextval('events'),
                 n  int NOT NULL
             );",
        )
        .unwrap();

    // Unset: refused, and the insert through the DEFAULT writes nothing.
    let error = client
        .query_one("SELECT snowflake_nextval('events')", &[])
        .unwrap_err();
    let (code, message, hint) = error_parts(&error);
    assert_eq!(code, "55000", "{message}");
    assert_eq!(
        message,
        "snowflake sequence \"events\" needs snowflake_id.node_id, which is not set"
    );
    assert!(
        hint.contains("snowflake_id.node_id") && hint.contains("0 to 63"),
        "{hint}"
    );
    let error = client
        .execute("INSERT INTO events (n) VALUES (1)", &[])
        .unwrap_err();
    assert_eq!(error_parts(&error).0, "55000", "{error}");
    assert_eq!(count(&mut client, "SELECT count(*) FROM events"), 0);
    // The single-node 'default' sequence has no node bits and needs no node id.
    client.query_one("SELECT snowflake_nextval()", &[]).unwrap();
    println!("node id unset: {code} {message} (hint: {hint})");
    drop(client);

    // A node id too large for 6 node bits.
    cluster.stop("fast");
    cluster.append_config("snowflake_id.node_id = 64");
    cluster.start();
    let mut client = cluster.connect();
    let error = client
        .execute("INSERT INTO events (n) VALUES (1)", &[])
        .unwrap_err();
    let (code, message, hint) = error_parts(&error);
    assert_eq!(code, "22023", "{message}");
    assert_eq!(
        message,
        "snowflake_id.node_id = 64 does not fit the 6 node bits of snowflake sequence \"events\""
    );
    println!("node id 64: {code} {message} (hint: {hint})");
    drop(client);

    // A valid node id: IDs carry it.
    cluster.stop("fast");
    cluster.append_config("snowflake_id.node_id = 7");
    cluster.start();
    let mut client = cluster.connect();
    client
        .execute("INSERT INTO events (n) VALUES (1)", &[])
        .unwrap();
    let node: i32 = client
        .query_one(
            "SELECT (snowflake_decode(id, 'events')).node FROM events",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(node, 7);
}
