//! The alerting rules of `monitoring/snowflake_id-alerts.yaml` under `promtool` (Debian's
//! package prometheus): running it, the rules' names and annotations, and `promtool test rules`
//! files made of scrapes of real servers, which the monitoring tests feed it.

use std::collections::BTreeMap;
use std::process::Command;

use crate::fixtures::workspace_root;

/// Runs `promtool ARGS…` in `monitoring/`; its output, asserting it succeeded.
pub fn promtool(args: &[&str]) -> String {
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

/// `monitoring/snowflake_id-alerts.yaml`, the rules file.
fn rules_file() -> std::path::PathBuf {
    workspace_root().join("monitoring/snowflake_id-alerts.yaml")
}

/// The rules of `monitoring/snowflake_id-alerts.yaml`: their names.
fn alert_names() -> Vec<String> {
    let rules = std::fs::read_to_string(rules_file()).unwrap();
    rules
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- alert: "))
        .map(str::to_owned)
        .collect()
}

/// The annotations alert `alert` has, from the rules file, with each template of `values`
/// (e.g. `{{ $labels.instance }}`) replaced: its summary and its description (a folded block).
pub fn annotations(alert: &str, values: &[(&str, &str)]) -> (String, String) {
    let rules = std::fs::read_to_string(rules_file()).unwrap();
    let rule = rules
        .split("- alert: ")
        .find(|rule| rule.starts_with(&format!("{alert}\n")))
        .unwrap_or_else(|| panic!("no rule {alert}"));
    let filled = |text: &str| {
        values
            .iter()
            .fold(text.to_owned(), |text, (template, value)| {
                text.replace(template, value)
            })
    };
    let summary = filled(
        rule.lines()
            .find_map(|line| line.trim().strip_prefix("summary: "))
            .unwrap()
            .trim_matches('"'),
    );
    let description_lines: Vec<&str> = rule
        .split("description: >-\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect();
    let description = filled(&description_lines.join(" "));
    assert!(
        !summary.contains("{{") && !description.contains("{{"),
        "{alert}"
    );
    (summary, description)
}

/// The `input_series` lines of `scrapes` as series of instance `instance`, 15 s apart.
pub fn promtool_series(instance: &str, scrapes: &[BTreeMap<String, f64>]) -> String {
    let mut names: Vec<&String> = scrapes.iter().flat_map(BTreeMap::keys).collect();
    names.sort();
    names.dedup();
    let mut series = String::new();
    for name in names {
        let values: Vec<String> = scrapes
            .iter()
            .map(|scrape| {
                scrape
                    .get(name)
                    .map_or("_".to_owned(), |value| value.to_string())
            })
            .collect();
        let (metric, labels) = name.split_once('{').unwrap_or((name, "}"));
        let labels = labels.trim_end_matches('}');
        let separator = if labels.is_empty() { "" } else { ", " };
        series += &format!(
            "      - series: '{metric}{{instance=\"{instance}\"{separator}{labels}}}'\n        values: '{}'\n",
            values.join(" ")
        );
    }
    series
}

/// The head of a `promtool test rules` file over the rules file, one test at 15 s intervals.
pub fn promtool_head() -> String {
    format!(
        "rule_files:\n  - {}\nevaluation_interval: 15s\ntests:\n  - interval: 15s\n    input_series:\n",
        rules_file().display()
    )
}

/// A `promtool test rules` file: `scrapes` of the metrics the rules read, as series of instance
/// `instance` 15 s apart, and at every minute, the alerts expected (`firing`: the names that
/// fire then, with the annotations the rules give them; None: not checked then).
pub fn promtool_test(
    instance: &str,
    scrapes: &[BTreeMap<String, f64>],
    firing: impl Fn(usize) -> Option<Vec<String>>,
) -> String {
    let mut test = promtool_head() + &promtool_series(instance, scrapes);
    test += "    alert_rule_test:\n";
    let minutes = scrapes.len() / 4;
    for minute in 1..minutes {
        let Some(fired) = firing(minute) else {
            continue;
        };
        for alert in alert_names() {
            test += &format!("      - eval_time: {minute}m\n        alertname: {alert}\n");
            if fired.contains(&alert) {
                let (summary, description) =
                    annotations(&alert, &[("{{ $labels.instance }}", instance)]);
                test += &format!(
                    "        exp_alerts:\n          - exp_labels: {{severity: critical, instance: {instance}}}\n            exp_annotations:\n              summary: {summary:?}\n              description: {description:?}\n"
                );
            } else {
                test += "        exp_alerts: []\n";
            }
        }
    }
    test
}

/// Runs `promtool test rules` on `test`; its output, asserting it succeeded.
pub fn run_promtool_test(name: &str, test: &str) -> String {
    let path = std::env::temp_dir().join(format!("snowflake-{name}-{}.yaml", std::process::id()));
    std::fs::write(&path, test).unwrap();
    let output = promtool(&["test", "rules", path.to_str().unwrap()]);
    let _ = std::fs::remove_file(&path);
    output
}
