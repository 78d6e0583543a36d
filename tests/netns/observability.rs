//! The Prometheus rules and the Grafana dashboard that ship in `configs/`,
//! checked with the real tools: `promtool check rules` and `promtool test
//! rules` (Debian's `prometheus`), the dashboard's structure as Grafana
//! imports it and each of its queries through promtool's parser. That
//! every series they name is one the daemon exports is checked against a
//! running daemon (`telemetry`'s test).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn configs(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../configs")
        .join(path)
}

const RULES: &str = "prometheus/fabriclb-rules.yml";
const RULES_TESTS: &str = "prometheus/fabriclb-rules-test.yml";
const DASHBOARD: &str = "grafana/fabriclb-dashboard.json";

/// `promtool ARGS` in `dir`: its output, or the failure with its output.
fn promtool(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("promtool")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("promtool (Debian's prometheus, installed by cargo xtask setup)");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "promtool {args:?}:\n{text}");
    text
}

/// The fabriclb series (`fabriclb_...`) a text names, recording rules'
/// names (`fabriclb:...`) apart.
pub fn series_named(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("fabriclb_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        names.insert(name);
    }
    names
}

/// Every series the shipped rules and dashboard name.
pub fn series_the_dashboards_use() -> BTreeSet<String> {
    let mut names = series_named(&std::fs::read_to_string(configs(RULES)).expect("rules"));
    names.extend(series_named(
        &std::fs::read_to_string(configs(DASHBOARD)).expect("dashboard"),
    ));
    names
}

#[test]
fn the_rules_pass_promtool_and_their_alerts_fire_as_their_tests_say() {
    let dir = configs("prometheus");
    let checked = promtool(&dir, &["check", "rules", "fabriclb-rules.yml"]);
    assert!(checked.contains("SUCCESS: 11 rules found"), "{checked}");
    let tested = promtool(&dir, &["test", "rules", "fabriclb-rules-test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
    // Every alert has a test that fires it.
    let rules = std::fs::read_to_string(configs(RULES)).expect("rules");
    let tests = std::fs::read_to_string(configs(RULES_TESTS)).expect("rule tests");
    for alert in rules
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
    {
        assert!(
            tests.contains(&format!(
                "alertname: {alert}\n        exp_alerts:\n          - "
            )),
            "no test fires {alert}"
        );
    }
}

/// What Grafana's import needs of a dashboard: a uid, a title, a schema
/// version it migrates from, panels with unique ids on its 24-column grid
/// without overlapping, each with a type it ships and queries against the
/// dashboard's data source variable; and each query valid PromQL (checked
/// by promtool, Grafana's variables given values) naming only recording
/// rules the rules file defines.
#[test]
fn the_dashboard_is_what_grafana_imports_and_its_queries_parse() {
    let text = std::fs::read_to_string(configs(DASHBOARD)).expect("dashboard");
    let dashboard: Value = serde_json::from_str(&text).expect("dashboard JSON");
    assert_eq!(dashboard["uid"], "fabriclb");
    assert!(dashboard["title"].is_string());
    assert!(dashboard["schemaVersion"].as_u64().is_some_and(|v| v >= 36));
    let variables = dashboard["templating"]["list"]
        .as_array()
        .expect("variables");
    let variable = |name: &str| variables.iter().find(|v| v["name"] == name);
    assert_eq!(
        variable("datasource").map(|v| (&v["type"], &v["query"])),
        Some((&Value::from("datasource"), &Value::from("prometheus")))
    );
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    let mut cells = BTreeSet::new();
    let mut queries = Vec::new();
    for panel in panels {
        let title = panel["title"].as_str().expect("a title");
        assert!(
            ids.insert(panel["id"].as_u64().expect("an id")),
            "{title}: id"
        );
        let kind = panel["type"].as_str().expect("a type");
        assert!(
            ["timeseries", "stat", "gauge", "table"].contains(&kind),
            "{title}: {kind}"
        );
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        let at = |k: &str| panel["gridPos"][k].as_u64().expect("gridPos");
        let (x, y, w, h) = (at("x"), at("y"), at("w"), at("h"));
        assert!(x + w <= 24 && w > 0 && h > 0, "{title}: off the grid");
        for cell in (x..x + w).flat_map(|cx| (y..y + h).map(move |cy| (cx, cy))) {
            assert!(cells.insert(cell), "{title} overlaps another panel");
        }
        for target in panel["targets"].as_array().expect("targets") {
            assert!(target["refId"].is_string(), "{title}: refId");
            queries.push(target["expr"].as_str().expect("expr").to_owned());
        }
    }
    let rules = std::fs::read_to_string(configs(RULES)).expect("rules");
    let mut check = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, query) in queries.iter().enumerate() {
        for record in query.split(|c: char| !(c.is_alphanumeric() || "_:".contains(c))) {
            if record.starts_with("fabriclb:") {
                assert!(rules.contains(&format!("record: {record}\n")), "{query}");
            }
        }
        let query = query
            .replace("$__rate_interval", "1m")
            .replace("$instance", ".*")
            .replace("$group", ".*");
        check.push_str(&format!(
            "      - record: dashboard:query_{i}\n        expr: {}\n",
            serde_json::to_string(&query).expect("quoted")
        ));
    }
    let dir = std::env::temp_dir().join(format!("fabriclb-dashboard-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    std::fs::write(dir.join("queries.yml"), check).expect("queries");
    let checked = promtool(&dir, &["check", "rules", "queries.yml"]);
    std::fs::remove_dir_all(&dir).expect("cleanup");
    assert!(
        checked.contains(&format!("SUCCESS: {} rules found", queries.len())),
        "{checked}"
    );
    assert!(queries.len() >= 12, "{} queries", queries.len());
}
