//! Stored usage checked against the simulator's truth, and digests of the stored rows — shared by every truth
//! test, whatever backend and source the rows were read from.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Simulation, TestDb, run_cardhour_ok};

pub fn num(v: &Value, field: &str) -> f64 {
    v[field].as_f64().unwrap_or_else(|| panic!("{field} missing in {v}"))
}

pub fn assert_rel(what: &str, got: f64, want: f64) {
    let tol = 1e-6 * want.abs().max(1e-3);
    assert!((got - want).abs() <= tol, "{what}: stored {got} vs truth {want}");
}

/// `cardhour ingest` of the whole simulation as cluster `cluster` from `url`, with `extra` arguments; its JSON
/// summary.
pub fn ingest(sim: &Simulation, url: &str, cluster: &str, db: &TestDb, extra: &[&str]) -> Value {
    let mut args = vec!["ingest", "--cluster", cluster, "--prometheus", url, "--format", "json"];
    let (from, to) = (sim.start_arg(), sim.end_arg());
    args.extend(["--from", &from, "--to", &to]);
    args.extend(extra);
    serde_json::from_str(&run_cardhour_ok(args, &db.env())).expect("ingest --format json")
}

/// `cardhour usage` over the simulation, grouped by `group_by`.
pub fn usage(sim: &Simulation, db: &TestDb, group_by: &str) -> Vec<Value> {
    let (from, to) = (sim.start_arg(), sim.end_arg());
    let out =
        run_cardhour_ok(["usage", "--from", &from, "--to", &to, "--group-by", group_by, "--format", "json"], &db.env());
    serde_json::from_str::<Vec<Value>>(&out).expect("usage --format json")
}

/// A digest of every stored usage, capacity, serving, quota (and its models') and wait row: equal digests, identical rows.
pub fn digest(db: &TestDb) -> String {
    db.psql(
        "SELECT md5(coalesce(string_agg(u::text, '|' ORDER BY u::text), '')) FROM gpu_usage_hourly u
         UNION ALL SELECT md5(coalesce(string_agg(c::text, '|' ORDER BY c::text), '')) FROM node_capacity_hourly c
         UNION ALL SELECT md5(coalesce(string_agg(s::text, '|' ORDER BY s::text), '')) FROM serving_hourly s
         UNION ALL SELECT md5(coalesce(string_agg(q::text, '|' ORDER BY q::text), '')) FROM quota_hourly q
         UNION ALL SELECT md5(coalesce(string_agg(m::text, '|' ORDER BY m::text), '')) FROM quota_model_hourly m
         UNION ALL SELECT md5(coalesce(string_agg(w::text, '|' ORDER BY w::text), '')) FROM pod_wait_hourly w",
    )
    .unwrap()
}

/// The stored usage and capacity rows of `db` identical to those of `want` (by [`digest`]); where they are not,
/// the first rows that differ are shown.
pub fn assert_same_rows(db: &TestDb, want: &TestDb, what: &str) {
    if digest(db) == digest(want) {
        return;
    }
    for table in [
        "gpu_usage_hourly",
        "node_capacity_hourly",
        "serving_hourly",
        "quota_hourly",
        "quota_model_hourly",
        "pod_wait_hourly",
    ] {
        let rows = |d: &TestDb| -> std::collections::BTreeSet<String> {
            d.psql(&format!("SELECT r::text FROM {table} r")).unwrap().lines().map(str::to_string).collect()
        };
        let (got, expected) = (rows(db), rows(want));
        let extra: Vec<_> = got.difference(&expected).take(5).collect();
        let missing: Vec<_> = expected.difference(&got).take(5).collect();
        if !extra.is_empty() || !missing.is_empty() {
            panic!("{what}: {table} differs; rows only here:\n{extra:#?}\nrows only in the reference:\n{missing:#?}");
        }
    }
    panic!("{what}: the digests differ, the rows do not (duplicates?)");
}

/// GPU-hours, effective and unmetered GPU-hours of every group equal to the truth's, with the same groups.
pub fn compare_groups(what: &str, stored: &[Value], truth: &Value, key: &str) {
    let truth: BTreeMap<String, &Value> =
        truth.as_array().unwrap().iter().map(|t| (t[key].as_str().unwrap().to_string(), t)).collect();
    let stored: BTreeMap<String, &Value> = stored.iter().map(|s| (s[key].as_str().unwrap().to_string(), s)).collect();
    assert!(!truth.is_empty(), "{what}: the truth has groups");
    assert_eq!(stored.keys().collect::<Vec<_>>(), truth.keys().collect::<Vec<_>>(), "{what} keys");
    for (k, t) in &truth {
        let s = stored[k];
        for f in ["gpu_hours", "effective_gpu_hours", "unmetered_gpu_hours"] {
            assert_rel(&format!("{what} {k} {f}"), num(s, f), num(t, f));
        }
    }
}

/// The whole truth of a standard-profile simulation against one ingest of it into a fresh `db`: its summary (hours,
/// scrape interval, non-finite samples, unknown resources reported, total), per team, namespace, kind and pod
/// (exactly on the grid, within one scrape interval of the continuous truth), and capacity per node with what of
/// it was offered. `non_finite`: the NaN samples the backend kept (the truth's count, or none where it drops them
/// on ingestion).
pub fn check_standard_truth(sim: &Simulation, db: &TestDb, summary: &Value, interval_s: u32, non_finite: u64) {
    let truth = sim.truth_json();
    let hours = (sim.end - sim.start).num_hours();
    assert_eq!(summary["hours"], hours, "{summary}");
    assert_eq!(summary["scrape_intervals_s"][interval_s.to_string()], hours, "{summary}");
    // NaN samples are skipped and counted; the unknown GPU resource is reported, not dropped silently
    assert_eq!(summary["non_finite_samples"].as_u64(), Some(non_finite), "{summary}");
    let unknown = truth["unknown_resources"].as_array().unwrap();
    assert!(!unknown.is_empty(), "the truth has unknown resources");
    for u in unknown {
        let reported = summary["anomalies"]["unknown_resource"].as_object().expect("unknown resources reported");
        let needle = format!("{}/{}/", u["namespace"].as_str().unwrap(), u["pod"].as_str().unwrap());
        assert!(reported.keys().any(|k| k.starts_with(&needle) && k.ends_with(u["resource"].as_str().unwrap())));
    }
    assert_rel("total", num(summary, "gpu_hours"), num(&truth["totals"], "gpu_hours"));

    compare_groups("team", &usage(sim, db, "team"), &truth["by_team"], "team");
    compare_groups("namespace", &usage(sim, db, "namespace"), &truth["by_namespace"], "namespace");

    // per kind: MIG and HAMi are fractions, time-slicing copies are not double counted
    let kinds = db
        .psql("SELECT kind, sum(gpu_seconds)/3600, sum(effective_gpu_seconds)/3600, sum(unmetered_gpu_seconds)/3600 FROM gpu_usage_hourly GROUP BY kind")
        .unwrap();
    let kinds: BTreeMap<&str, Vec<f64>> = kinds
        .lines()
        .map(|l| {
            let mut c = l.split('|');
            (c.next().unwrap(), c.map(|x| x.parse().unwrap()).collect())
        })
        .collect();
    let truth_kinds = truth["by_kind"].as_array().unwrap();
    assert!(!truth_kinds.is_empty());
    for t in truth_kinds {
        let k = t["kind"].as_str().unwrap();
        if num(t, "gpu_hours") == 0.0 {
            continue;
        }
        let s = &kinds[k];
        assert_rel(&format!("kind {k} gpu"), s[0], num(t, "gpu_hours"));
        assert_rel(&format!("kind {k} effective"), s[1], num(t, "effective_gpu_hours"));
        assert_rel(&format!("kind {k} unmetered"), s[2], num(t, "unmetered_gpu_hours"));
    }

    // per pod: on the grid exactly, and within one scrape interval per run segment of the continuous truth
    let pods = usage(sim, db, "pod");
    let stored: BTreeMap<(String, String), f64> = pods
        .iter()
        .map(|p| ((p["namespace"].as_str().unwrap().into(), p["pod"].as_str().unwrap().into()), num(p, "gpu_hours")))
        .collect();
    let mut truth_pods: BTreeMap<(String, String), (f64, f64, f64)> = BTreeMap::new();
    for p in truth["by_pod"].as_array().unwrap() {
        let e =
            truth_pods.entry((p["namespace"].as_str().unwrap().into(), p["pod"].as_str().unwrap().into())).or_default();
        e.0 += num(p, "gpu_hours");
        e.1 += num(p, "continuous_gpu_hours");
        e.2 += num(p, "segments") * num(p, "units") * num(p, "fraction") * f64::from(interval_s) / 3600.0;
    }
    assert!(!truth_pods.is_empty());
    for (pod, (grid, continuous, tolerance)) in &truth_pods {
        let got = stored.get(pod).copied().unwrap_or(0.0);
        assert_rel(&format!("pod {pod:?}"), got, *grid);
        assert!((got - continuous).abs() <= tolerance + 1e-9, "pod {pod:?}: {got} vs continuous {continuous}");
    }
    assert!(stored.keys().all(|k| truth_pods.contains_key(k)), "a pod the truth does not know was billed");

    // capacity per node, and what of it was offered (all of it: the simulated cluster has no cordon, no sick card)
    let cap = db
        .psql(
            "SELECT node, sum(card_seconds)/3600, sum(offered_card_seconds)/3600, string_agg(DISTINCT offered_source, ',')
             FROM node_capacity_hourly GROUP BY node",
        )
        .unwrap();
    let cap: BTreeMap<&str, (f64, f64, &str)> = cap
        .lines()
        .map(|l| l.split('|').collect::<Vec<_>>())
        .map(|v| (v[0], (v[1].parse().unwrap(), v[2].parse().unwrap(), v[3])))
        .collect();
    let truth_capacity = truth["capacity"].as_array().unwrap();
    assert!(!truth_capacity.is_empty());
    for c in truth_capacity {
        let (card_hours, offered, source) = cap[c["node"].as_str().unwrap()];
        assert_rel(&format!("capacity {}", c["node"]), card_hours, num(c, "card_hours"));
        assert_rel(&format!("offered {}", c["node"]), offered, num(c, "offered_card_hours"));
        assert_eq!(source, "allocatable", "{}: offered from the allocatable series", c["node"]);
    }
    assert_eq!(
        db.psql("SELECT count(*) FROM node_capacity_hourly WHERE offered_card_seconds <> card_seconds").unwrap(),
        "0",
        "a node offering every card stores exactly its capacity as offered"
    );
}
