//! The client guide (docs/clients.md), run for real: the example programs under `clients/` (Python with
//! psycopg 3, Node.js with node-postgres), each against a fresh cluster, with the client
//! libraries that `scripts/install-deps.sh` installs from PyPI and npm. Each program asserts
//! its own checks and exits non-zero on a failed one; the tests then check the rows it left.

use std::process::Command;

use snowflake_id_cluster_tests::fixtures::{count, workspace_root};
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
         (client libraries missing? run: bash scripts/install-deps.sh)\n{}",
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
        "clients/node/classic_ids.js",
        "clients/node/js53_ids.js",
    ] {
        assert!(
            checked.iter().any(|c| c == path),
            "docs/clients.md quotes nothing of {path}"
        );
    }
}
