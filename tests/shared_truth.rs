//! Shared cards as clusters really run them (issue 16), end to end against the simulator's independent truth:
//! time-slicing under the device plugin's default names and renamed (4 and 10 replicas, pods of 1 and 2
//! replicas), dcgm-exporter before 4.8.2 dropping idle cards and 4.8.2's per-pod series, MPS without virtual
//! GPUs, HAMi with whole-card requests, MIG's single strategy known by DCGM and by GFD labels alone, and a node
//! nothing counts — taken at face value and unverified until configured.

use crate::common;

use std::collections::BTreeMap;
use std::ffi::OsString;

use chrono::TimeDelta;
use common::{Simulation, TestDb, TestPrometheus, rfc3339, run_cardhour_ok, sim_end};
use serde_json::Value;

const GPUS: u32 = 72; // one node of each of the shared profile's nine types
const HOURS: u32 = 24;
const INTERVAL: u32 = 60;
const UNCOUNTED: &str = "gpu-l40s-uncounted-07";

fn num(v: &Value, field: &str) -> f64 {
    v[field].as_f64().unwrap_or_else(|| panic!("{field} missing in {v}"))
}

/// Relative error of `got` against `want` (absolute below 1e-6 GPU-hours).
fn rel(got: f64, want: f64) -> f64 {
    (got - want).abs() / want.abs().max(1e-6)
}

fn simulate_shared(dir: &std::path::Path) -> Simulation {
    let end = sim_end();
    let start = end - TimeDelta::hours(i64::from(HOURS));
    let args: Vec<OsString> = [
        "simulate",
        "--profile",
        "shared",
        "--gpus",
        &GPUS.to_string(),
        "--hours",
        &HOURS.to_string(),
        "--scrape-interval",
        &INTERVAL.to_string(),
        "--seed",
        "16",
        "--end",
        &rfc3339(end),
        "--out",
    ]
    .into_iter()
    .map(OsString::from)
    .chain([dir.as_os_str().to_owned()])
    .collect();
    run_cardhour_ok(args, &[]);
    Simulation { dir: dir.into(), metrics: dir.join("metrics.om"), truth: dir.join("truth.json"), start, end }
}

fn ingest(sim: &Simulation, prom: &TestPrometheus, db: &TestDb, source: &str) -> Value {
    let (from, to) = (sim.start_arg(), sim.end_arg());
    let args = ["ingest", "--cluster", "sim", "--prometheus", &prom.url, "--format", "json", "--source", source];
    let args = [&args[..], &["--from", &from, "--to", &to]].concat();
    serde_json::from_str(&run_cardhour_ok(args, &db.env())).expect("ingest --format json")
}

/// Stored per pod: (kind, model, gpu-hours, effective, unmetered, util sources).
type Stored = BTreeMap<(String, String), (String, String, f64, f64, f64, String)>;

fn stored_pods(db: &TestDb) -> Stored {
    let out = db
        .psql(
            "SELECT namespace, pod, string_agg(DISTINCT kind, ','), string_agg(DISTINCT gpu_model, ','),
                    sum(gpu_seconds)/3600, sum(effective_gpu_seconds)/3600, sum(unmetered_gpu_seconds)/3600,
                    string_agg(DISTINCT util_source, ',')
             FROM gpu_usage_hourly GROUP BY namespace, pod",
        )
        .unwrap();
    out.lines()
        .map(|l| {
            let c: Vec<&str> = l.split('|').collect();
            let f = |i: usize| c[i].parse::<f64>().unwrap();
            ((c[0].into(), c[1].into()), (c[2].into(), c[3].into(), f(4), f(5), f(6), c[7].into()))
        })
        .collect()
}

fn capacity(db: &TestDb) -> BTreeMap<String, (f64, String)> {
    db.psql("SELECT node, sum(card_seconds)/3600, string_agg(DISTINCT gpu_model, ',') FROM node_capacity_hourly GROUP BY node")
        .unwrap()
        .lines()
        .map(|l| {
            let c: Vec<&str> = l.split('|').collect();
            (c[0].to_string(), (c[1].parse().unwrap(), c[2].to_string()))
        })
        .collect()
}

/// The worst relative errors of GPU-hours (per pod and per namespace) and of effective GPU-hours per pod, and
/// the largest effective difference in scrape intervals; asserts kinds, models and sources pod by pod. Pods of
/// the unverified node are expected at face value (a replica billed as a card) unless `configured`.
fn compare(truth: &Value, stored: &Stored, configured: bool) -> (f64, f64, f64, f64) {
    let pods = truth["by_pod"].as_array().unwrap();
    assert!(pods.len() > 100, "the simulation has pods: {}", pods.len());
    let (mut pod_err, mut eff_err, mut eff_intervals) = (0.0f64, 0.0f64, 0.0f64);
    let mut namespaces: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    let interval_h = f64::from(INTERVAL) / 3600.0;
    for p in pods {
        let key = (p["namespace"].as_str().unwrap().to_string(), p["pod"].as_str().unwrap().to_string());
        let face = p["unverified"] == true && !configured;
        let factor = if face { 1.0 / num(p, "fraction") } else { 1.0 };
        let want = num(p, "gpu_hours") * factor;
        let Some(s) = stored.get(&key) else {
            assert!(want == 0.0, "pod {key:?} of the truth ({want} GPU-hours) is not stored");
            continue;
        };
        let kind = if face { "whole" } else { p["kind"].as_str().unwrap() };
        assert_eq!(s.0, kind, "{key:?} kind ({})", p["node"]);
        let model = p["gpu_model"].as_str().unwrap_or("unknown");
        let model = if configured && p["unverified"] == true { "NVIDIA L40S" } else { model };
        assert_eq!(s.1, model, "{key:?} model ({})", p["node"]);
        // hours of a pod without any utilization sample store `none` beside the source of its other hours
        let sources: Vec<&str> = s.5.split(',').filter(|x| *x != "none").collect();
        let sources = if sources.is_empty() { "none".to_string() } else { sources.join(",") };
        assert_eq!(sources, p["util_source"].as_str().unwrap(), "{key:?} utilization source ({})", p["node"]);
        pod_err = pod_err.max(rel(s.2, want));
        let eff = num(p, "effective_gpu_hours") * factor;
        eff_err = eff_err.max(rel(s.3, eff));
        eff_intervals = eff_intervals.max((s.3 - eff).abs() / (interval_h * num(p, "units") * num(p, "fraction")));
        assert!(rel(s.4, num(p, "unmetered_gpu_hours") * factor) <= 1e-9, "{key:?} unmetered");
        let e = namespaces.entry(p["namespace"].as_str().unwrap()).or_default();
        e.0 += want;
        e.1 += s.2;
    }
    assert!(stored.keys().all(|k| pods.iter().any(|p| p["namespace"] == k.0 && p["pod"] == k.1)), "unknown pod");
    let ns_err = namespaces.values().map(|(want, got)| rel(*got, *want)).fold(0.0, f64::max);
    (pod_err, ns_err, eff_err, eff_intervals)
}

#[test]
fn shared_cards_are_metered_as_the_truth_and_the_uncounted_node_restated_once_configured() {
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate_shared(dir.path());
    let truth = sim.truth_json();
    let prom = TestPrometheus::from_openmetrics(&sim.metrics).unwrap();
    let db = TestDb::migrated().unwrap();

    // every setup of the profile has pods, each kind is present
    let kinds: Vec<&str> = truth["by_pod"].as_array().unwrap().iter().map(|p| p["kind"].as_str().unwrap()).collect();
    for k in ["whole", "mig", "timeslice", "mps", "hami"] {
        assert!(kinds.contains(&k), "kind {k} simulated");
    }
    let sources: Vec<&str> =
        truth["by_pod"].as_array().unwrap().iter().map(|p| p["util_source"].as_str().unwrap()).collect();
    for s in ["dcgm_pod", "hami", "gr_engine_active", "sm_active", "none"] {
        assert!(sources.contains(&s), "source {s} simulated");
    }

    let summary = ingest(&sim, &prom, &db, "remote-read");
    assert_eq!(summary["hours"], HOURS);
    let anomalies = &summary["anomalies"];
    assert_eq!(
        anomalies["unverified_node"].as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()),
        Some(vec![UNCOUNTED.to_string()]),
        "only the node nothing counts is unverified: {anomalies}"
    );
    assert_eq!(anomalies["unverified_node"][UNCOUNTED], HOURS, "{anomalies}");
    assert_eq!(
        anomalies["unknown_gpu_model"].as_object().map(|o| o.keys().cloned().collect::<Vec<_>>()),
        Some(vec![UNCOUNTED.to_string()]),
        "the MIG node known by GFD alone has its model: {anomalies}"
    );
    assert!(anomalies.get("capacity_mismatch").is_none(), "{anomalies}");
    assert!(anomalies.get("default_replicas").is_none(), "{anomalies}");

    let (pod_err, ns_err, eff_err, eff_intervals) = compare(&truth, &stored_pods(&db), false);
    println!(
        "before configuration: GPU-hours per pod {pod_err:.2e}, per namespace {ns_err:.2e}; effective per pod \
         {eff_err:.2e} ({eff_intervals:.2e} scrape intervals)"
    );
    assert!(pod_err <= 1e-9 && ns_err <= 1e-9, "GPU-hours: pod {pod_err}, namespace {ns_err}");
    assert!(eff_intervals <= 1.0, "effective within one scrape interval per pod: {eff_intervals}");

    // capacity in physical cards, also where idle cards' series were dropped and where only GFD counts them
    let cap = capacity(&db);
    let nodes = truth["capacity"].as_array().unwrap();
    assert_eq!(nodes.len(), 9);
    for n in nodes {
        let node = n["node"].as_str().unwrap();
        let (card_hours, model) = &cap[node];
        let want = if n["unverified"] == true {
            num(n, "card_hours") / num(n, "cards") * num(n, "advertised_units")
        } else {
            num(n, "card_hours")
        };
        assert!(rel(*card_hours, want) <= 1e-9, "{node}: {card_hours} card-hours vs {want}");
        assert_eq!(model, n["gpu_model"].as_str().unwrap_or("unknown"), "{node}");
    }

    // the query API stores the same rows
    let query_db = TestDb::migrated().unwrap();
    ingest(&sim, &prom, &query_db, "query");
    let (by_query, by_remote) = (stored_pods(&query_db), stored_pods(&db));
    // (SQL sums in any order: equal to the last bits only up to rounding)
    let same = |a: &(String, String, f64, f64, f64, String), b: &(String, String, f64, f64, f64, String)| {
        (&a.0, &a.1, &a.5) == (&b.0, &b.1, &b.5)
            && [(a.2, b.2), (a.3, b.3), (a.4, b.4)].iter().all(|(x, y)| rel(*x, *y) <= 1e-12)
    };
    let differ: Vec<_> =
        by_remote.iter().filter(|(k, v)| by_query.get(*k).is_none_or(|q| !same(q, v))).take(3).collect();
    assert!(
        differ.is_empty() && by_query.len() == by_remote.len(),
        "query API differs: {differ:?} ({} vs {})",
        by_query.len(),
        by_remote.len()
    );

    // configuring the node: its replicas and model; the hours ingested again are restated
    run_cardhour_ok(
        ["nodes", "set", "--cluster", "sim", "--node", UNCOUNTED, "--replicas", "4", "--gpu-model", "NVIDIA L40S"],
        &db.env(),
    );
    let audit = db.psql("SELECT action, entity FROM audit_log WHERE action = 'node.settings'").unwrap();
    assert_eq!(audit.trim(), format!("node.settings|node:sim/{UNCOUNTED}"));
    let again = ingest(&sim, &prom, &db, "remote-read");
    assert!(again["anomalies"].get("unverified_node").is_none(), "{}", again["anomalies"]);
    assert!(again["anomalies"].get("unknown_gpu_model").is_none(), "{}", again["anomalies"]);
    let (pod_err, ns_err, eff_err, eff_intervals) = compare(&truth, &stored_pods(&db), true);
    println!(
        "configured: GPU-hours per pod {pod_err:.2e}, per namespace {ns_err:.2e}; effective per pod {eff_err:.2e} \
         ({eff_intervals:.2e} scrape intervals)"
    );
    assert!(pod_err <= 1e-9 && ns_err <= 1e-9, "GPU-hours: pod {pod_err}, namespace {ns_err}");
    let cap = capacity(&db);
    let uncounted = nodes.iter().find(|n| n["node"] == UNCOUNTED).unwrap();
    assert!(rel(cap[UNCOUNTED].0, num(uncounted, "card_hours")) <= 1e-9, "{:?}", cap[UNCOUNTED]);
    assert_eq!(cap[UNCOUNTED].1, "NVIDIA L40S");

    // oversubscription per node against the truth: a time-slicing replica promises a whole card, every other
    // unit its share; over the physical cards of the same days
    let (from, to) = (sim.start_arg(), sim.end_arg());
    let report: Value = serde_json::from_str(&run_cardhour_ok(
        ["oversubscription", "--from", &from, "--to", &to, "--cluster", "sim", "--format", "json"],
        &db.env(),
    ))
    .unwrap();
    // memory: the truth's card-memory-hours promised per pod (HAMi gpumem over the card's memory, MIG its
    // profile's over the card's, a time-slicing replica a card's, MPS 1/replicas), none of it unknown
    let mut got: BTreeMap<&str, (f64, f64, f64, f64)> = BTreeMap::new();
    for r in report["nodes"].as_array().unwrap() {
        let e = got.entry(r["node"].as_str().unwrap()).or_default();
        e.0 += num(r, "promised_card_hours");
        e.1 += num(r, "card_hours");
        e.2 += num(r, "promised_memory_card_hours");
        e.3 += num(r, "unknown_memory_card_hours");
    }
    let mut want: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for p in truth["by_pod"].as_array().unwrap() {
        let f = if p["kind"] == "timeslice" { num(p, "fraction") } else { 1.0 };
        let e = want.entry(p["node"].as_str().unwrap()).or_default();
        e.0 += num(p, "gpu_hours") / f;
        e.1 += num(p, "promised_memory_card_hours");
    }
    assert_eq!(got.len(), 9);
    let (mut figures, mut memory_err) = (Vec::new(), 0.0f64);
    for n in nodes {
        let node = n["node"].as_str().unwrap();
        let (promised, card_hours, memory, unknown) = got[node];
        let (want_promised, want_memory) = want[node];
        assert!(rel(promised, want_promised) <= 1e-9, "{node}: promised {promised} vs {want_promised}");
        assert!(rel(card_hours, num(n, "card_hours")) <= 1e-9, "{node}: {card_hours} card-hours");
        assert!(want_memory > 0.0, "{node}: the truth promises memory");
        assert!(rel(memory, want_memory) <= 1e-9, "{node}: memory promised {memory} vs {want_memory}");
        memory_err = memory_err.max(rel(memory, want_memory));
        assert_eq!(unknown, 0.0, "{node}: unknown memory");
        figures.push(format!("{node} {:.3} / memory {:.3}", promised / card_hours, memory / card_hours));
    }
    let cluster: (f64, f64, f64) = report["clusters"].as_array().unwrap().iter().fold((0.0, 0.0, 0.0), |a, r| {
        (a.0 + num(r, "promised_card_hours"), a.1 + num(r, "card_hours"), a.2 + num(r, "promised_memory_card_hours"))
    });
    let want_memory: f64 = want.values().map(|w| w.1).sum();
    assert!(rel(cluster.2, want_memory) <= 1e-9, "cluster memory promised {} vs {want_memory}", cluster.2);
    println!(
        "oversubscription (promised / physical card-hours, compute / memory): {}; cluster {:.3} / memory {:.3}; \
         memory promised per node vs the truth: {memory_err:.2e}",
        figures.join(", "),
        cluster.0 / cluster.1,
        cluster.2 / cluster.1
    );
}
