//! The client guide (docs/clients.md), run for real: the example programs under `clients/` (Python with
//! psycopg 3, Django and SQLAlchemy; Node.js with node-postgres and Drizzle ORM), each against a
//! fresh cluster, with the client libraries that `scripts/install-client-deps.sh` installs from
//! PyPI and npm. Each program asserts its own checks and exits non-zero on a failed one; the
//! tests then check the rows it left.

use std::process::Command;

use snowflake_id_cluster_tests::fixtures::{column, count, workspace_root};
use snowflake_id_cluster_tests::{Client, Cluster};

/// Runs `program args...` from the workspace root with libpq's environment variables pointing
/// at `cluster` (PGHOST is the socket directory), prints its output, asserts it succeeded.
fn run_client(cluster: &Cluster, program: &str, args: &[&str]) -> String {
    let root = workspace_root();
    let output = Command::new(program)
        .args(args)
        .current_dir(&root)
        .env("PGHOST", cluster.socket_dir())
        .env("PGPORT", cluster.port().to_string())
        .env("PGUSER", "postgres")
        .env("PGDATABASE", "postgres")
        .output()
        .unwrap_or_else(|error| panic!("run {program}: {error} (is it installed?)"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("$ {program} {}\n{stdout}{stderr}", args.join(" "));
    assert!(
        output.status.success(),
        "{program} {args:?} failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}\n\
         (client libraries missing? run: bash scripts/install-client-deps.sh)\n{}",
        output.status,
        cluster.log_tail()
    );
    stdout
}

fn cluster_with(sql: &str) -> (Cluster, Client) {
    let cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client.batch_execute(sql).unwrap();
    (cluster, client)
}

const ORDERS: &str = "CREATE EXTENSION snowflake_id;
     CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);";

#[test]
fn python_psycopg_inserts_with_the_server_default_and_decodes() {
    let (cluster, mut client) = cluster_with(ORDERS);
    let conninfo = cluster.conninfo("postgres");
    let stdout = run_client(
        &cluster,
        "python3",
        &["clients/python/orders.py", &conninfo],
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");

    // The program committed four rows whose IDs came from the column default.
    let row = client
        .query_one(
            "SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE item = 'book'),
                    bool_and((snowflake_decode(id)).ts > now() - interval '1 minute')
             FROM orders",
            &[],
        )
        .unwrap();
    let (rows, distinct, books, recent): (i64, i64, i64, bool) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!((rows, distinct, books, recent), (4, 4, 1, true));
}

#[test]
fn node_pg_keeps_classic_ids_exact_as_strings() {
    let (cluster, mut client) = cluster_with(ORDERS);
    let stdout = run_client(&cluster, "node", &["clients/node/classic_ids.js"]);
    assert!(stdout.contains("precision lost"), "{stdout}");
    assert!(stdout.contains("all checks passed"), "{stdout}");

    // The id the program printed as a string is a real row; rounded through Number() it is not.
    let id = stdout
        .lines()
        .find_map(|line| line.strip_prefix("id as pg returns it: '"))
        .and_then(|rest| rest.split('\'').next())
        .expect("the program prints the id it read");
    let id: i64 = id.parse().unwrap();
    let found: i64 = client
        .query_one("SELECT count(*) FROM orders WHERE id = $1", &[&id])
        .unwrap()
        .get(0);
    assert_eq!(found, 1, "id {id} printed by the program is not in orders");
    assert_eq!(count(&mut client, "SELECT count(*) FROM orders"), 100);
}

#[test]
fn node_pg_reads_js53_ids_as_exact_numbers() {
    let (cluster, mut client) = cluster_with(
        "CREATE EXTENSION snowflake_id;
         SELECT snowflake_create_sequence('web_ids', preset => 'js53');
         CREATE TABLE posts (id bigint PRIMARY KEY DEFAULT snowflake_nextval('web_ids'),
                             title text);",
    );
    let stdout = run_client(&cluster, "node", &["clients/node/js53_ids.js"]);
    assert!(stdout.contains("all checks passed"), "{stdout}");

    let row = client
        .query_one(
            "SELECT count(*), max(id) < (1::bigint << 53) FROM posts",
            &[],
        )
        .unwrap();
    let (rows, below): (i64, bool) = (row.get(0), row.get(1));
    assert_eq!((rows, below), (100, true));
}

/// The tables of the ORM examples: orders and their lines, both keyed by the column default.
const ORM_TABLES: &str = include_str!("../../clients/orm_tables.sql");

/// Runs the ORM example `script` with `program` against a fresh cluster holding [`ORM_TABLES`]
/// (a Python example gets the libpq connection string as its argument, a Node.js one reads
/// libpq's environment variables), then checks the rows it left: the orders of `customers`, in
/// the order they were created, and a line for the first order ('book') and for each of the next
/// three ('pen'); every ID in both tables distinct, decodable and made by the column default
/// while the program ran; and the order ID in the program's JSON response (a string) the first
/// order's.
fn check_orm_example(program: &str, script: &str, customers: &[&str]) {
    let (cluster, mut client) = cluster_with(ORM_TABLES);
    let conninfo = cluster.conninfo("postgres");
    let args = match program {
        "python3" => vec![script, conninfo.as_str()],
        _ => vec![script],
    };
    let first: i64 = client
        .query_one("SELECT snowflake_min_id(clock_timestamp())", &[])
        .unwrap()
        .get(0);
    let stdout = run_client(&cluster, program, &args);
    assert!(stdout.contains("all checks passed"), "{stdout}");
    // IDs may run ahead of the clock by up to snowflake_id.max_lead (100 ms).
    let last: i64 = client
        .query_one(
            "SELECT snowflake_max_id(clock_timestamp() + interval '1 second')",
            &[],
        )
        .unwrap()
        .get(0);

    let row = client
        .query_one(
            "WITH ids AS (SELECT id FROM orders UNION ALL SELECT id FROM order_lines)
             SELECT count(*), count(DISTINCT id), count(*) FILTER (WHERE id BETWEEN $1 AND $2),
                    count(*) FILTER (WHERE (snowflake_decode(id)).node = 0)
             FROM ids",
            &[&first, &last],
        )
        .unwrap();
    let (ids, distinct, made_meanwhile, decoded): (i64, i64, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    let expected = customers.len() as i64 + 4;
    assert_eq!(
        (ids, distinct, made_meanwhile, decoded),
        (expected, expected, expected, expected),
        "IDs: all, distinct, made while {program} ran, decodable"
    );

    let made: Vec<String> = column(&mut client, "SELECT customer FROM orders ORDER BY id");
    assert_eq!(made, customers, "orders, by ID");
    let lines: Vec<(String, String)> = client
        .query(
            "SELECT l.item, o.customer FROM order_lines l JOIN orders o ON o.id = l.order_id
             ORDER BY l.id",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    let expected_lines: Vec<(String, String)> = [("book", 0), ("pen", 1), ("pen", 2), ("pen", 3)]
        .iter()
        .map(|(item, order)| (item.to_string(), customers[*order].to_string()))
        .collect();
    assert_eq!(
        lines, expected_lines,
        "lines (item, customer of their order), by ID"
    );

    // The JSON response carries the first order's ID exactly, as a string.
    let json = stdout
        .lines()
        .find_map(|line| line.strip_prefix("json: "))
        .expect("the program prints its JSON response");
    let id = json
        .split_once("\"id\":")
        .and_then(|(_, rest)| rest.trim_start().strip_prefix('"'))
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no string \"id\" in {json}"));
    let first_order: i64 = client
        .query_one("SELECT id FROM orders ORDER BY id LIMIT 1", &[])
        .unwrap()
        .get(0);
    assert_eq!(id, first_order.to_string(), "{json}");
}

#[test]
fn django_reads_back_ids_from_the_column_default() {
    // Four orders through SnowflakeAutoField, then two through a db_default key.
    check_orm_example(
        "python3",
        "clients/python/django_orders.py",
        &["ada", "bob", "cy", "dee", "eve", "fay"],
    );
}

#[test]
fn sqlalchemy_reads_back_ids_from_the_column_default() {
    check_orm_example(
        "python3",
        "clients/python/sqlalchemy_orders.py",
        &["ada", "bob", "cy", "dee"],
    );
}

#[test]
fn drizzle_reads_back_ids_from_the_column_default_as_strings() {
    check_orm_example(
        "node",
        "clients/node/drizzle_orders.js",
        &["ada", "bob", "cy", "dee"],
    );
}

/// The client guide (docs/clients.md) quotes the programs these tests run: every `python` or
/// `js` code block that follows a link to a file under `clients/` (within the same subsection)
/// is an exact excerpt of that file.
#[test]
fn client_guide_excerpts_are_exact_copies_of_the_tested_programs() {
    let root = workspace_root();
    let guide = std::fs::read_to_string(root.join("docs/clients.md")).unwrap();

    let mut file: Option<String> = None;
    let mut block: Option<(String, Vec<&str>)> = None;
    let mut checked = Vec::new();
    for line in guide.lines() {
        if let Some((language, lines)) = &mut block {
            if line.trim_start() == "```" {
                if let (Some(path), true) = (&file, ["python", "js"].contains(&language.as_str())) {
                    let source = std::fs::read_to_string(root.join(path))
                        .unwrap_or_else(|error| panic!("docs/clients.md quotes {path}: {error}"));
                    let excerpt = lines.join("\n");
                    assert!(
                        source.contains(&excerpt),
                        "docs/clients.md's excerpt of {path} is not in the file:\n{excerpt}"
                    );
                    checked.push(path.clone());
                }
                block = None;
            } else {
                lines.push(line);
            }
        } else if let Some(language) = line.trim_start().strip_prefix("```") {
            block = Some((language.to_owned(), Vec::new()));
        } else if line.starts_with('#') {
            file = None;
        } else if let Some(at) = line.find("[`clients/") {
            let path = &line[at + 2..];
            let path = &path[..path.find('`').unwrap()];
            if path.ends_with(".py") || path.ends_with(".js") {
                file = Some(path.to_owned());
            }
        }
    }
    println!("docs/clients.md excerpts checked: {checked:?}");
    for path in [
        "clients/python/orders.py",
        "clients/python/django_orders.py",
        "clients/python/sqlalchemy_orders.py",
        "clients/node/classic_ids.js",
        "clients/node/js53_ids.js",
        "clients/node/drizzle_orders.js",
    ] {
        assert!(
            checked.iter().any(|c| c == path),
            "docs/clients.md quotes nothing of {path}"
        );
    }
}
