//! Monitoring with the tools operators run (docs/monitoring.md): the alerting rules in
//! `monitoring/` pass `promtool check rules` and their unit tests (`promtool test rules`), and a
//! real postgres_exporter with `monitoring/postgres_exporter-queries.yaml` exports
//! `snowflake_stats()` and the worker ids of a cluster: a wall-clock step back (libfaketime)
//! moves its counters as the server counts it. Prints what it scraped (`--nocapture`).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use snowflake_id_cluster_tests::fixtures::{assert_server_clock_offset, workspace_root};
use snowflake_id_cluster_tests::postgres_exporter::PostgresExporter;
use snowflake_id_cluster_tests::{wait_until, Cluster};

/// Runs `promtool ARGS…` in `monitoring/`; its output, asserting it succeeded.
fn promtool(args: &[&str]) -> String {
    let output = Command::new("promtool")
        .args(args)
        .current_dir(workspace_root().join("monitoring"))
        .output()
        .expect(
            "run promtool (Debian's package prometheus; the README's test command installs it)",
        );
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "promtool {args:?}:\n{text}");
    text
}

#[test]
fn the_alerting_rules_pass_promtool_check_and_their_unit_tests() {
    let checked = promtool(&["check", "rules", "snowflake_id-alerts.yaml"]);
    assert!(checked.contains("SUCCESS: 6 rules found"), "{checked}");
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
            // The exporter labels every series with the server it scraped; leave it out.
            let series = series
                .split_once('{')
                .map_or(series.to_owned(), |(name, labels)| {
                    let labels: Vec<&str> = labels
                        .trim_end_matches('}')
                        .split(',')
                        .filter(|label| !label.starts_with("server="))
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
    let exporter = PostgresExporter::start(&cluster, "postgres");
    let before_text = exporter.scrape();
    let before = samples(&before_text);
    println!("before the step: {before:?}");
    for (name, kind) in [
        ("snowflake_id_backward_steps_total", "counter"),
        ("snowflake_id_reservation_writes_total", "counter"),
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
    assert_eq!(before["snowflake_id_ids_issued_total"], 1001.0);
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
        wait_until(Duration::from_secs(10), || {
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
    assert_eq!(after["snowflake_id_ids_issued_total"], 1011.0);
}
