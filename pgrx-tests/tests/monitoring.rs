//! Monitoring with the tools operators run (docs/monitoring.md): the alerting rules in
//! `monitoring/` pass `promtool check rules` and their unit tests (`promtool test rules`: each
//! rule fires on its fault and no rule on the look-alikes). A real postgres_exporter with
//! `monitoring/postgres_exporter-queries.yaml` exports `snowflake_stats()`, the worker ids and
//! the sequences of a cluster: a wall-clock step back (libfaketime) moves its counters as the
//! server counts it, and the IDs issued do not fall when sessions end. query-exporter with
//! `monitoring/query-exporter.yaml` exports the same metrics, with the extension in a schema of
//! its own. And the rules run on what the real exporter scraped from real servers: silent
//! through a burst then quiet and a restart, firing when the reservation worker cannot start.
//! Prints what it scraped (`--nocapture`).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use snowflake_id_cluster_tests::alert_rules::{
    annotations, promtool, promtool_head, promtool_series, promtool_test, run_promtool_test,
};
use snowflake_id_cluster_tests::exporters::{self, Exporter, POSTGRES_EXPORTER, QUERY_EXPORTER};
use snowflake_id_cluster_tests::fixtures::{
    assert_server_clock_offset, doc_code_blocks, doc_sql_block, workspace_root,
};
use snowflake_id_cluster_tests::{wait_until, Cluster};

#[test]
fn the_alerting_rules_pass_promtool_check_and_their_unit_tests() {
    let checked = promtool(&["check", "rules", "snowflake_id-alerts.yaml"]);
    assert!(checked.contains("SUCCESS: 9 rules found"), "{checked}");
    let tested = promtool(&["test", "rules", "snowflake_id-alerts.test.yaml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

/// The samples of the `snowflake_id*` metrics in an exposition text, by name and labels.
fn samples(exposition: &str) -> BTreeMap<String, f64> {
    exposition
        .lines()
        .filter(|line| line.starts_with("snowflake_id"))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            // The exporters label every series with the server (postgres_exporter) or the
            // configured database (query-exporter) it scraped; leave it out.
            let series = series
                .split_once('{')
                .map_or(series.to_owned(), |(name, labels)| {
                    let labels: Vec<&str> = labels
                        .trim_end_matches('}')
                        .split(',')
                        .filter(|label| {
                            !label.starts_with("server=") && !label.starts_with("database=")
                        })
                        .collect();
                    if labels.is_empty() {
                        name.to_owned()
                    } else {
                        format!("{name}{{{}}}", labels.join(","))
                    }
                });
            Some((series, value.parse().ok()?))
        })
        .collect()
}

#[test]
fn the_exporter_exports_the_counters_and_a_clock_step_back_moves_them() {
    let cluster = Cluster::builder().faketime().start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE EXTENSION snowflake_id;
             SELECT snowflake_create_sequence('web', 'js53');
             SELECT snowflake_nextval() FROM generate_series(1, 1000);
             SELECT snowflake_nextval('web');",
        )
        .unwrap();
    let exporter = Exporter::postgres_exporter(&cluster, "postgres");
    // The reservation worker renews once the sessions' IDs have used an eighth of the window.
    // Waited for here: after the step back below, the cluster clock stands still until the
    // wall clock catches up, so the worker has nothing to renew.
    let mut before_text = String::new();
    let mut before = BTreeMap::new();
    let mut issued = 1001.0;
    // IDs at each poll: the worker renews only after a tick used within its window, which a
    // one-off burst leaves behind if the worker wakes late on a busy machine.
    assert!(
        wait_until(Duration::from_secs(60), || {
            client
                .batch_execute("SELECT snowflake_nextval() FROM generate_series(1, 100)")
                .unwrap();
            issued += 100.0;
            before_text = exporter.scrape();
            before = samples(&before_text);
            before.get("snowflake_id_reservation_worker_writes_total") >= Some(&1.0)
        }),
        "the reservation worker did not renew: {before:?}"
    );
    println!("before the step: {before:?}");
    for (name, kind) in [
        ("snowflake_id_backward_steps_total", "counter"),
        ("snowflake_id_reservation_writes_total", "counter"),
        ("snowflake_id_reservation_worker_writes_total", "counter"),
        ("snowflake_id_reservation_write_failures_total", "counter"),
        ("snowflake_id_ids_issued_total", "counter"),
        ("snowflake_id_node_id", "gauge"),
        ("snowflake_id_sequence_runs_out_timestamp_seconds", "gauge"),
        ("snowflake_id_reservation_lead_seconds", "gauge"),
        ("snowflake_id_slots_in_use", "gauge"),
        ("snowflake_id_workers_ids_in_use", "gauge"),
    ] {
        assert!(
            before_text.contains(&format!("# TYPE {name} {kind}"))
                && before_text.contains(&format!("# HELP {name} ")),
            "no HELP and TYPE {kind} for {name}:\n{before_text}"
        );
    }
    assert_eq!(before["snowflake_id_backward_steps_total"], 0.0);
    assert_eq!(before["snowflake_id_max_workers"], 1024.0);
    assert_eq!(before["snowflake_id_reserve_ahead_seconds"], 1.0);
    assert!(before["snowflake_id_reservation_writes_total"] >= 1.0);
    assert_eq!(before["snowflake_id_ids_issued_total"], issued);
    // This session holds a worker id of each width it used: 10 bits ('default'), 7 ('web').
    assert_eq!(
        before["snowflake_id_workers_ids_in_use{worker_bits=\"10\"}"],
        1.0
    );
    assert_eq!(
        before["snowflake_id_workers_ids{worker_bits=\"10\"}"],
        1024.0
    );
    assert_eq!(
        before["snowflake_id_workers_ids_in_use{worker_bits=\"7\"}"],
        1.0
    );
    assert_eq!(before["snowflake_id_workers_ids{worker_bits=\"7\"}"], 128.0);

    // The wall clock steps back 10 s; the next ID a session makes sees it.
    cluster.set_fake_time("-10s");
    assert_server_clock_offset(&mut client, -10_000_000);
    client
        .batch_execute("SELECT snowflake_nextval() FROM generate_series(1, 10)")
        .unwrap();
    let mut after = BTreeMap::new();
    assert!(
        wait_until(Duration::from_secs(60), || {
            after = samples(&exporter.scrape());
            after.get("snowflake_id_backward_steps_total") == Some(&1.0)
        }),
        "the step back did not reach the exporter: {after:?}"
    );
    println!("after a step back of 10 s: {after:?}");
    let largest = after["snowflake_id_largest_backward_step_seconds"];
    assert!((9.0..11.0).contains(&largest), "largest step {largest} s");
    let lead = after["snowflake_id_cluster_clock_lead_seconds"];
    assert!(
        (8.0..11.0).contains(&lead),
        "cluster clock {lead} s ahead of the wall clock"
    );
    assert!(
        after["snowflake_id_reservation_writes_total"]
            >= before["snowflake_id_reservation_writes_total"]
    );
    assert_eq!(after["snowflake_id_ids_issued_total"], issued + 10.0);

    // The IDs issued are counted since the server started: the session's end takes none away,
    // and the next session's count adds to them (it takes the worker ids this one had).
    drop(client);
    let mut next = cluster.connect();
    next.batch_execute("SELECT snowflake_nextval() FROM generate_series(1, 5)")
        .unwrap();
    let later = samples(&exporter.scrape());
    assert_eq!(later["snowflake_id_ids_issued_total"], issued + 15.0);
    assert_eq!(later["snowflake_id_reservation_write_failures_total"], 0.0);
    assert!(
        later["snowflake_id_reservation_worker_writes_total"]
            >= before["snowflake_id_reservation_worker_writes_total"]
    );
    assert_eq!(later["snowflake_id_node_id"], -1.0, "no node id set");
    assert_eq!(later["snowflake_id_in_recovery"], 0.0);
    assert_eq!(
        later["snowflake_id_sequence_runs_out_timestamp_seconds{sequence=\"web\"}"],
        runs_out(&mut next, "web")
    );
}

/// An operator's floor steps have counters of their own, and the exporters' queries read them
/// from a database whose extension predates them (0.14.0, before `ALTER EXTENSION … UPDATE`) as
/// 0 instead of failing: the monitoring files can be replaced before the update.
#[test]
fn floor_steps_are_counted_apart_and_read_before_the_update() {
    let cluster = Cluster::builder().start();
    let mut client = cluster.connect();
    client
        .batch_execute(
            "CREATE EXTENSION snowflake_id VERSION '0.14.0';
             SELECT snowflake_nextval();
             SELECT snowflake_raise_floor(clock_timestamp() + interval '1 s');",
        )
        .unwrap();
    let exporter = Exporter::postgres_exporter(&cluster, "postgres");
    let old = samples(&exporter.scrape());
    println!("at 0.14.0: {old:?}");
    assert_eq!(old.get("snowflake_id_floor_raises_total"), Some(&0.0));
    assert_eq!(old.get("snowflake_id_floor_accepts_total"), Some(&0.0));
    assert_eq!(old.get("snowflake_id_ids_issued_total"), Some(&1.0));

    client
        .batch_execute(
            "ALTER EXTENSION snowflake_id UPDATE;
             SELECT snowflake_raise_floor(clock_timestamp() + interval '1 s');
             SELECT snowflake_accept_floor();
             SELECT snowflake_nextval();",
        )
        .unwrap();
    let updated = samples(&exporter.scrape());
    println!("updated: {updated:?}");
    // The raise before the update counted too: the counters are the server's.
    assert_eq!(updated["snowflake_id_floor_raises_total"], 2.0);
    assert_eq!(updated["snowflake_id_floor_accepts_total"], 1.0);
    assert_eq!(updated["snowflake_id_backward_steps_total"], 0.0);
    assert!(updated["snowflake_id_wall_clock_behind_seconds"] > 0.0);
}

/// When `sequence` runs out, as `snowflake_sequences` says (Unix seconds).
fn runs_out(client: &mut postgres::Client, sequence: &str) -> f64 {
    client
        .query_one(
            "SELECT extract(epoch FROM runs_out_at)::float8 FROM snowflake_sequences
             WHERE name = $1",
            &[&sequence],
        )
        .unwrap()
        .get(0)
}

/// The exporter command at the end of `block`, a ```sh block of docs/monitoring.md's "Running
/// an exporter", as its reader runs it from the repository's root: its environment assignments
/// and arguments as written, with this test's places put in (the cluster's socket and port for
/// the guide's /var/run/postgresql, where the test command installed the program, and a port on
/// 127.0.0.1 to listen on).
fn guide_command(block: &str, cluster: &Cluster, port: u16) -> Command {
    let last = block
        .replace("\\\n", " ")
        .lines()
        .last()
        .expect("an empty block")
        .to_owned();
    // The shell's words: split at blanks, except inside single quotes (which go).
    let mut words = Vec::new();
    let (mut word, mut quoted) = (String::new(), false);
    for character in last.chars() {
        match character {
            '\'' => quoted = !quoted,
            ' ' if !quoted => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            _ => word.push(character),
        }
    }
    words.extend(Some(word).filter(|word| !word.is_empty()));
    let mut words = words.into_iter().peekable();
    let mut environment = Vec::new();
    while let Some((name, value)) = words.peek().and_then(|word| word.split_once('=')) {
        if !name.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
            break;
        }
        environment.push((name.to_owned(), value.to_owned()));
        words.next();
    }
    let program = words.next().expect("no program");
    let program = program.as_str();
    let socket = cluster.socket_dir().display().to_string();
    let (path, listen) = match program {
        "prometheus-postgres-exporter" => (
            POSTGRES_EXPORTER,
            vec![format!("--web.listen-address=127.0.0.1:{port}")],
        ),
        "/opt/query-exporter/bin/query-exporter" => (
            QUERY_EXPORTER,
            vec![
                "-H".to_owned(),
                "127.0.0.1".to_owned(),
                "-p".to_owned(),
                port.to_string(),
            ],
        ),
        other => panic!("the guide runs {other}, which this test does not know"),
    };
    let mut command = exporters::program(path, program);
    command
        .args(words)
        .args(listen)
        .current_dir(workspace_root());
    for (name, value) in environment {
        let value = value
            .replace(
                "host=/var/run/postgresql ",
                &format!("host={socket} port={} ", cluster.port()),
            )
            .replace(
                "?host=/var/run/postgresql",
                &format!("?host={socket}&port={}", cluster.port()),
            );
        assert!(!value.contains("/var/run/postgresql"), "{value}");
        command.env(name, value);
    }
    command
}

/// docs/monitoring.md's "Running an exporter", followed: the role it creates, in a database
/// whose extension is in a schema of its own (not on the role's search_path: the queries find
/// it), scraped by both exporters as the section runs them. Both export the same metrics with
/// the same values, among them the worker ids of widths no session holds, and the node id.
#[test]
fn the_guide_s_two_exporters_export_the_same_metrics_with_the_extension_in_its_own_schema() {
    const PAGE: &str = "docs/monitoring.md";
    const SECTION: &str = "Running an exporter";
    let cluster = Cluster::builder()
        .setting("snowflake_id.node_id = 7")
        .start();
    cluster
        .connect()
        .batch_execute("CREATE DATABASE app")
        .unwrap();
    let mut client = cluster.connect_to("app");
    client
        .batch_execute(
            "CREATE SCHEMA ext;
             CREATE EXTENSION snowflake_id SCHEMA ext;
             SELECT ext.snowflake_create_sequence('orders', 'sharded');
             SELECT ext.snowflake_create_sequence('web', 'js53');
             SELECT ext.snowflake_nextval('orders') FROM generate_series(1, 100);",
        )
        .unwrap();
    client
        .batch_execute(&doc_sql_block(PAGE, SECTION, "CREATE ROLE monitor"))
        .unwrap();
    let mut monitor = cluster.connect_as("app", "monitor");
    let search_path: String = monitor.query_one("SHOW search_path", &[]).unwrap().get(0);
    assert!(!search_path.contains("ext"), "{search_path}");
    let commands = doc_code_blocks(PAGE, SECTION, "sh");
    assert_eq!(commands.len(), 2, "{commands:?}");
    let started = |block: &str| Exporter::start_with(|port| guide_command(block, &cluster, port));
    let postgres_exporter = started(&commands[0]);
    let query_exporter = started(&commands[1]);
    let exported = |exporter: &Exporter| -> BTreeMap<String, f64> {
        samples(&exporter.scrape())
            .into_iter()
            // query-exporter adds when each counter was created; postgres_exporter does not.
            .filter(|(series, _)| !series.contains("_created"))
            .collect()
    };
    let by_postgres_exporter = exported(&postgres_exporter);
    let by_query_exporter = exported(&query_exporter);
    println!("postgres_exporter: {by_postgres_exporter:?}");
    println!("query-exporter: {by_query_exporter:?}");
    assert_eq!(
        by_postgres_exporter.keys().collect::<Vec<_>>(),
        by_query_exporter.keys().collect::<Vec<_>>(),
        "the same series"
    );
    // 23 of the server, 3 of the cluster, 3 for each of the three worker widths, 1 for each of
    // three sequences.
    assert_eq!(by_postgres_exporter.len(), 23 + 3 + 3 * 3 + 3);
    let system_identifier: String = client
        .query_one(
            "SELECT system_identifier::text FROM pg_control_system()",
            &[],
        )
        .unwrap()
        .get(0);
    let cluster_series = |metric: &str| {
        format!("snowflake_id_cluster_{metric}{{system_identifier=\"{system_identifier}\"}}")
    };
    // 'orders' is 'sharded': 6 node bits, so the cluster's node id counts.
    for (metric, value) in [("node_id", 7.0), ("node_bits", 6.0), ("in_recovery", 0.0)] {
        for exported in [&by_postgres_exporter, &by_query_exporter] {
            assert_eq!(
                exported.get(&cluster_series(metric)),
                Some(&value),
                "{metric}"
            );
        }
    }
    // What does not move between the two scrapes is the same.
    for series in [
        "snowflake_id_ids_issued_total",
        "snowflake_id_node_id",
        "snowflake_id_in_recovery",
        "snowflake_id_max_workers",
        "snowflake_id_reserve_ahead_seconds",
        "snowflake_id_reservation_write_failures_total",
        "snowflake_id_floor_raises_total",
        "snowflake_id_floor_accepts_total",
        "snowflake_id_workers_ids_in_use{worker_bits=\"10\"}",
        "snowflake_id_workers_ids_in_use{worker_bits=\"8\"}",
        "snowflake_id_workers_ids_in_use{worker_bits=\"7\"}",
        "snowflake_id_workers_ids{worker_bits=\"7\"}",
        "snowflake_id_sequence_runs_out_timestamp_seconds{sequence=\"web\"}",
    ] {
        assert_eq!(
            by_postgres_exporter.get(series),
            by_query_exporter.get(series),
            "{series}"
        );
    }
    assert_eq!(by_postgres_exporter["snowflake_id_ids_issued_total"], 100.0);
    assert_eq!(by_postgres_exporter["snowflake_id_node_id"], 7.0);
    // 'orders' (8 worker bits) issued IDs; 'default' (10) and 'web' (7) did not, and their
    // widths are exported all the same.
    for (bits, in_use) in [(8, 1.0), (10, 0.0), (7, 0.0)] {
        assert_eq!(
            by_postgres_exporter
                [&format!("snowflake_id_workers_ids_in_use{{worker_bits=\"{bits}\"}}")],
            in_use,
            "{bits} worker bits"
        );
    }
    for sequence in ["default", "orders", "web"] {
        assert!(
            by_postgres_exporter.contains_key(&format!(
                "snowflake_id_sequence_runs_out_timestamp_seconds{{sequence=\"{sequence}\"}}"
            )),
            "{sequence}"
        );
    }
}

/// One scrape every `SCRAPE_EVERY` stands for one of Prometheus' every 15 s: the rules see 60
/// times more time than passed.
const SCRAPE_EVERY: Duration = Duration::from_millis(250);

/// Scrapes `exporter` `count` times, one every `SCRAPE_EVERY`, into `scrapes`.
fn scrape_into(scrapes: &mut Vec<BTreeMap<String, f64>>, exporter: &Exporter, count: usize) {
    for _ in 0..count {
        let started = Instant::now();
        scrapes.push(
            exporter
                .try_scrape()
                .map(|text| samples(&text))
                .unwrap_or_default(),
        );
        std::thread::sleep(SCRAPE_EVERY.saturating_sub(started.elapsed()));
    }
}

/// Runs `during` while a session issues IDs in batches of 100, 100 a second.
fn issuing_ids<T>(cluster: &Cluster, during: impl FnOnce() -> T) -> T {
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let session = scope.spawn(|| {
            let mut client = cluster.connect();
            while !stop.load(Ordering::Relaxed) {
                client
                    .batch_execute("SELECT snowflake_nextval() FROM generate_series(1, 100)")
                    .unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let result = during();
        stop.store(true, Ordering::Relaxed);
        session.join().expect("the session issuing IDs");
        result
    })
}

#[test]
fn the_rules_on_real_scrapes_are_silent_after_a_burst_and_a_restart_and_fire_without_the_worker() {
    // The look-alikes: IDs for 10 s then quiet for 20 s (the worker renews for 5 s of it, then
    // the reservation lapses, its lead goes negative), a restart, then IDs for 10 s and quiet
    // for 10 s. As the rules see it: 10 minutes of IDs, 20 quiet, a restart, 10 of IDs and 10
    // quiet.
    let mut cluster = Cluster::builder()
        .setting("snowflake_id.idle_renewal = '5s'")
        .start();
    cluster
        .connect()
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let mut scrapes = Vec::new();
    {
        let exporter = Exporter::postgres_exporter(&cluster, "postgres");
        issuing_ids(&cluster, || scrape_into(&mut scrapes, &exporter, 40));
        scrape_into(&mut scrapes, &exporter, 80);
    }
    let before_restart = scrapes.last().unwrap().clone();
    cluster.stop("fast");
    cluster.start();
    {
        let exporter = Exporter::postgres_exporter(&cluster, "postgres");
        issuing_ids(&cluster, || scrape_into(&mut scrapes, &exporter, 40));
        scrape_into(&mut scrapes, &exporter, 40);
    }
    println!("before the restart: {before_restart:?}");
    println!("at the end: {:?}", scrapes.last().unwrap());
    assert!(before_restart["snowflake_id_reservation_worker_writes_total"] >= 10.0);
    assert!(before_restart["snowflake_id_reservation_lead_seconds"] < -5.0);
    let tested = run_promtool_test(
        "look-alikes",
        &promtool_test("db1", &scrapes, |_| Some(Vec::new())),
    );
    assert!(tested.contains("SUCCESS"), "{tested}");

    // The fault: no background worker may start (max_worker_processes = 0; the server log says
    // "too many background workers"), so sessions renew the reservation themselves. As the
    // rules see it: 20 minutes of IDs.
    let cluster = Cluster::builder()
        .setting("max_worker_processes = 0")
        .start();
    cluster
        .connect()
        .batch_execute("CREATE EXTENSION snowflake_id")
        .unwrap();
    let exporter = Exporter::postgres_exporter(&cluster, "postgres");
    let mut scrapes = Vec::new();
    issuing_ids(&cluster, || scrape_into(&mut scrapes, &exporter, 80));
    println!("without the worker: {:?}", scrapes.last().unwrap());
    assert_eq!(
        scrapes.last().unwrap()["snowflake_id_reservation_worker_writes_total"],
        0.0
    );
    assert!(scrapes.last().unwrap()["snowflake_id_reservation_writes_total"] >= 10.0);
    // Pending from the first scrapes on, firing once that held for 5 minutes: by the 7th.
    let test = promtool_test("db1", &scrapes, |minute| match minute {
        0..=4 => Some(Vec::new()),
        5 | 6 => None,
        _ => Some(vec!["SnowflakeReservationWorkerNotRenewing".to_owned()]),
    });
    let tested = run_promtool_test("worker-not-running", &test);
    assert!(tested.contains("SUCCESS"), "{tested}");
}

/// SnowflakeNodeIdShared on real scrapes: two single-node clusters at node id 0 on `'default'`
/// (no node bits), one of them scraped by two exporters, and a standby of a cluster with node
/// bits stay quiet; two clusters with node bits and node id 5 fire it.
#[test]
fn node_id_sharing_is_told_only_between_clusters_whose_ids_can_meet() {
    let scrapes_of = |node_id: i64, sharded: bool| {
        let cluster = Cluster::builder()
            .setting(&format!("snowflake_id.node_id = {node_id}"))
            .start();
        let mut client = cluster.connect();
        client
            .batch_execute("CREATE EXTENSION snowflake_id")
            .unwrap();
        if sharded {
            client
                .batch_execute("SELECT snowflake_create_sequence('orders', 'sharded')")
                .unwrap();
        }
        let exporter = Exporter::postgres_exporter(&cluster, "postgres");
        let mut scrapes = Vec::new();
        scrape_into(&mut scrapes, &exporter, 40);
        scrapes
    };
    let single_a = scrapes_of(0, false);
    let single_b = scrapes_of(0, false);
    let sharded_a = scrapes_of(5, true);
    let sharded_b = scrapes_of(5, true);
    let cluster_series = |scrapes: &[BTreeMap<String, f64>]| -> Vec<BTreeMap<String, f64>> {
        scrapes
            .iter()
            .map(|scrape| {
                scrape
                    .iter()
                    .filter(|(name, _)| name.starts_with("snowflake_id_cluster_"))
                    .map(|(name, value)| (name.clone(), *value))
                    .collect()
            })
            .collect()
    };
    println!("a sharded cluster: {:?}", cluster_series(&sharded_a).last());
    // The look-alikes: quiet for the whole 10 minutes the rules see.
    let look_alikes = promtool_head()
        + &promtool_series("single_a", &cluster_series(&single_a))
        + &promtool_series("single_a_again", &cluster_series(&single_a))
        + &promtool_series("single_b", &cluster_series(&single_b))
        + &promtool_series("sharded_a", &cluster_series(&sharded_a))
        + &promtool_series("sharded_a_again", &cluster_series(&sharded_a))
        + "    alert_rule_test:\n      - eval_time: 9m\n        alertname: SnowflakeNodeIdShared\n        exp_alerts: []\n";
    let tested = run_promtool_test("node-id-look-alikes", &look_alikes);
    assert!(tested.contains("SUCCESS"), "{tested}");
    // The fault: two clusters with node bits on node id 5, for 10 minutes.
    let (summary, description) = annotations(
        "SnowflakeNodeIdShared",
        &[("{{ $value }}", "2"), ("{{ $labels.node_id }}", "5")],
    );
    let fault = promtool_head()
        + &promtool_series("sharded_a", &cluster_series(&sharded_a))
        + &promtool_series("sharded_b", &cluster_series(&sharded_b))
        + &format!(
            "    alert_rule_test:\n      - eval_time: 9m\n        alertname: SnowflakeNodeIdShared\n        exp_alerts:\n          - exp_labels: {{severity: critical, node_id: \"5\"}}\n            exp_annotations:\n              summary: {summary:?}\n              description: {description:?}\n"
        );
    let tested = run_promtool_test("node-id-shared", &fault);
    assert!(tested.contains("SUCCESS"), "{tested}");
}
