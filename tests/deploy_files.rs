//! The monitoring files in `deploy/`: the alert rules are valid and proved to fire by promtool's own unit tests
//! (every alert has a test), the scrape config is valid, and the Grafana dashboard and the rules use only metric
//! names cardhour exports (`cardhour::telemetry::CATALOGUE`), covering what an operator must see.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use yaml_rust2::{Yaml, YamlLoader};

fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy").join(file)
}

fn promtool(args: &[&str]) -> String {
    let tool = std::env::var_os("PROMTOOL").unwrap_or_else(|| "promtool".into());
    let out = Command::new(&tool)
        .args(args)
        .current_dir(deploy(""))
        .stdin(Stdio::null())
        .output()
        .expect("promtool runs (scripts/test.sh installs it)");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

/// The `cardhour_*` names in a PromQL expression.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"\bcardhour_[a-z0-9_]+").unwrap();
    re.find_iter(expr).map(|m| m.as_str().to_string()).collect()
}

fn yaml(file: &str) -> Yaml {
    let text = std::fs::read_to_string(deploy(file)).unwrap();
    YamlLoader::load_from_str(&text).unwrap().remove(0)
}

/// (alert name, expression) of every rule in prometheus-alerts.yml.
fn rules() -> Vec<(String, String)> {
    let y = yaml("prometheus-alerts.yml");
    let mut out = Vec::new();
    for g in y["groups"].as_vec().expect("groups") {
        for r in g["rules"].as_vec().expect("rules") {
            out.push((r["alert"].as_str().expect("alert").to_string(), r["expr"].as_str().expect("expr").to_string()));
        }
    }
    out
}

#[test]
fn the_alert_rules_are_valid_and_their_unit_tests_pass() {
    let checked = promtool(&["check", "rules", "prometheus-alerts.yml"]);
    assert!(checked.contains(&format!("SUCCESS: {} rules found", rules().len())), "{checked}");
    let tested = promtool(&["test", "rules", "prometheus-alerts.test.yml"]);
    assert!(tested.contains("SUCCESS"), "{tested}");
    // the example scrape config is valid and loads the rules
    let config = promtool(&["check", "config", "prometheus.yml"]);
    assert!(config.contains("1 rule files found"), "{config}");

    // every alert is shown firing by some test (a rule no test makes fire is not proved)
    let t = yaml("prometheus-alerts.test.yml");
    let mut fired = BTreeSet::new();
    for case in t["tests"].as_vec().unwrap() {
        for a in case["alert_rule_test"].as_vec().unwrap() {
            if a["exp_alerts"].as_vec().is_some_and(|v| !v.is_empty()) {
                fired.insert(a["alertname"].as_str().unwrap().to_string());
            }
        }
    }
    let alerts: BTreeSet<String> = rules().into_iter().map(|(a, _)| a).collect();
    assert_eq!(alerts.len(), 8);
    assert_eq!(fired, alerts);
    for required in [
        "CardhourIngestLagging",
        "CardhourSourceErrors",
        "CardhourIngestFailing",
        "CardhourBudgetWebhooksUndelivered",
        "CardhourNotReady",
    ] {
        assert!(alerts.contains(required), "{required}");
    }
}

#[test]
fn the_rules_and_the_dashboard_use_only_exported_metrics() {
    let mut used = BTreeSet::new();
    for (alert, expr) in rules() {
        let names = metric_names(&expr);
        assert!(!names.is_empty() || expr.contains("up{"), "{alert} uses no cardhour metric: {expr}");
        used.extend(names);
    }

    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(deploy("grafana-dashboard.json")).unwrap()).unwrap();
    let mut exprs = Vec::new();
    for p in dash["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            exprs.push(t["expr"].as_str().expect("a target's expr").to_string());
        }
    }
    for v in dash["templating"]["list"].as_array().unwrap() {
        if let Some(d) = v["definition"].as_str() {
            exprs.push(d.to_string());
        }
    }
    assert!(exprs.len() >= 20, "{} expressions", exprs.len());
    let mut in_dashboard = BTreeSet::new();
    for e in &exprs {
        let names = metric_names(e);
        assert!(!names.is_empty(), "a panel shows no cardhour metric: {e}");
        in_dashboard.extend(names);
    }
    used.extend(in_dashboard.iter().cloned());
    for name in &used {
        assert!(cardhour::telemetry::exports(name), "{name} is not exported by cardhour");
    }
    // what the dashboard must show: lag, throughput, errors, batch duration, anomalies, HTTP, the pool
    for required in [
        "cardhour_ingest_watermark_lag_seconds",
        "cardhour_ingest_hours_total",
        "cardhour_ingest_samples_total",
        "cardhour_source_errors_total",
        "cardhour_ingest_batch_duration_seconds_bucket",
        "cardhour_ingest_anomalies_total",
        "cardhour_http_request_duration_seconds_bucket",
        "cardhour_db_pool_connections",
    ] {
        assert!(in_dashboard.contains(required), "the dashboard does not show {required}");
    }
    // panels do not overlap on Grafana's 24-column grid
    let mut cells = BTreeSet::new();
    for p in dash["panels"].as_array().unwrap() {
        let g = &p["gridPos"];
        let (x, y, w, h) =
            (g["x"].as_u64().unwrap(), g["y"].as_u64().unwrap(), g["w"].as_u64().unwrap(), g["h"].as_u64().unwrap());
        assert!(x + w <= 24, "{}", p["title"]);
        for cx in x..x + w {
            for cy in y..y + h {
                assert!(cells.insert((cx, cy)), "panel {} overlaps another", p["title"]);
            }
        }
    }
}

#[test]
fn metrics_is_not_part_of_the_api_contract() {
    let spec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi/openapi.json")).unwrap(),
    )
    .unwrap();
    let paths = spec["paths"].as_object().expect("paths");
    assert!(paths.keys().any(|p| p.starts_with("/api/v1/")), "the spec has paths");
    assert!(paths.keys().all(|p| !p.contains("metrics") && !p.contains("healthz")), "{:?}", paths.keys());
}
