//! kube-state-metrics scrape gaps end to end: a simulated cluster with KSM outages (short ones inside an hour and
//! across an hour's end, long ones likewise) backfilled into a real Prometheus, ingested into a real Postgres
//! through the `cardhour` binary, and compared with the simulator's truth: the GPU-hours stored and bridged, per
//! pod and namespace, the capacity, the gaps recorded per hour and shown in health — and with `--ksm-gap-bridge 0`,
//! the missing time equal to the truth's gap time.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::{Simulation, TestDb, TestPrometheus, run_cardhour_ok, simulate_profile};
use serde_json::Value;

const GPUS: u32 = 56; // one node of every type
const HOURS: u32 = 6; // one outage in each of hours 1..=4
const INTERVAL: u32 = 60;

fn num(v: &Value, field: &str) -> f64 {
    v[field].as_f64().unwrap_or_else(|| panic!("{field} missing in {v}"))
}

fn assert_rel(what: &str, got: f64, want: f64) {
    let tol = 1e-6 * want.abs().max(1e-3);
    assert!((got - want).abs() <= tol, "{what}: stored {got} vs truth {want}");
}

fn ingest(sim: &Simulation, prom: &TestPrometheus, db: &TestDb, extra: &[&str]) -> Value {
    let (from, to) = (sim.start_arg(), sim.end_arg());
    let mut args =
        vec!["ingest", "--cluster", "sim", "--prometheus", &prom.url, "--format", "json", "--from", &from, "--to", &to];
    args.extend(extra);
    serde_json::from_str(&run_cardhour_ok(args, &db.env())).expect("ingest --format json")
}

/// `key|gpu_hours|bridged_gpu_hours` per `key` (an SQL expression over gpu_usage_hourly).
fn stored_by(db: &TestDb, key: &str) -> BTreeMap<String, (f64, f64)> {
    db.psql(&format!(
        "SELECT {key}, sum(gpu_seconds)/3600, sum(bridged_gpu_seconds)/3600 FROM gpu_usage_hourly GROUP BY 1"
    ))
    .unwrap()
    .lines()
    .map(|l| {
        let c: Vec<&str> = l.split('|').collect();
        (c[0].to_string(), (c[1].parse().unwrap(), c[2].parse().unwrap()))
    })
    .collect()
}

/// The KSM gaps recorded: (hour, kind, subject, count).
fn recorded_gaps(db: &TestDb) -> BTreeSet<(String, String, String, u64)> {
    db.psql(
        "SELECT to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), kind, subject, count
         FROM ingest_anomalies WHERE kind IN ('ksm_gap', 'ksm_gap_bridged')",
    )
    .unwrap()
    .lines()
    .map(|l| {
        let c: Vec<&str> = l.split('|').collect();
        (c[0].to_string(), c[1].to_string(), c[2].to_string(), c[3].parse().unwrap())
    })
    .collect()
}

/// The gaps the truth says each hour records: every outage in each hour its missing scrapes fall in, with the pods
/// Running across it; `bridge` false: every one of them as not billed.
fn truth_gaps(truth: &Value, bridge: bool) -> BTreeSet<(String, String, String, u64)> {
    let mut out = BTreeSet::new();
    for g in truth["ksm_gaps"].as_array().unwrap() {
        let kind = if bridge { g["anomaly"].as_str().unwrap() } else { "ksm_gap" };
        let subject = format!("{}..{}", g["from"].as_str().unwrap(), g["to"].as_str().unwrap());
        for h in g["hours"].as_array().unwrap() {
            out.insert((h["hour"].as_str().unwrap().into(), kind.into(), subject.clone(), h["pods"].as_u64().unwrap()));
        }
    }
    out
}

fn digest(db: &TestDb) -> String {
    db.psql(
        "SELECT md5(coalesce(string_agg(u::text, '|' ORDER BY u::text), '')) FROM gpu_usage_hourly u
         UNION ALL SELECT md5(coalesce(string_agg(c::text, '|' ORDER BY c::text), '')) FROM node_capacity_hourly c
         UNION ALL SELECT md5(coalesce(string_agg(a::text, '|' ORDER BY a::text), '')) FROM ingest_anomalies a",
    )
    .unwrap()
}

#[test]
fn ksm_gaps_are_bridged_or_reported_exactly_as_the_truth_says() {
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate_profile(dir.path(), "standard", GPUS, HOURS, INTERVAL, 17, &["--ksm-gaps"]);
    let truth = sim.truth_json();
    let totals = &truth["totals"];
    let (truth_gpu, truth_bridged, truth_lost) =
        (num(totals, "gpu_hours"), num(totals, "bridged_gpu_hours"), num(totals, "unbilled_gap_gpu_hours"));
    let gaps = truth["ksm_gaps"].as_array().unwrap();
    let shape: Vec<(bool, usize)> =
        gaps.iter().map(|g| (g["bridged"].as_bool().unwrap(), g["hours"].as_array().unwrap().len())).collect();
    assert_eq!(shape, [(true, 1), (true, 2), (false, 1), (false, 2)], "short and long, inside and across an hour");
    assert!(truth_bridged > 0.0 && truth_lost > 0.0, "{totals}");
    let prom = TestPrometheus::from_openmetrics(&sim.metrics).unwrap();

    // the default bridge (15 min)
    let db = TestDb::migrated().unwrap();
    let summary = ingest(&sim, &prom, &db, &["--source", "remote-read"]);
    assert_eq!(summary["hours"], HOURS);
    assert_eq!(summary["scrape_intervals_s"]["60"], HOURS, "the interval inferred through the gaps");
    assert_rel("total", num(&summary, "gpu_hours"), truth_gpu);
    assert_rel("bridged", num(&summary, "bridged_gpu_hours"), truth_bridged);
    for (key, truth_rows, field) in
        [("namespace", &truth["by_namespace"], "namespace"), ("namespace || '/' || pod", &truth["by_pod"], "pod")]
    {
        let stored = stored_by(&db, key);
        let mut want: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for t in truth_rows.as_array().unwrap() {
            let k = if field == "pod" {
                format!("{}/{}", t["namespace"].as_str().unwrap(), t["pod"].as_str().unwrap())
            } else {
                t["namespace"].as_str().unwrap().to_string()
            };
            let e = want.entry(k).or_default();
            e.0 += num(t, "gpu_hours");
            e.1 += num(t, "bridged_gpu_hours");
        }
        want.retain(|_, v| v.0 > 0.0);
        assert_eq!(stored.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{key}");
        for (k, (gpu, bridged)) in &want {
            assert_rel(&format!("{k} GPU-hours"), stored[k].0, *gpu);
            assert_rel(&format!("{k} bridged"), stored[k].1, *bridged);
        }
    }
    // effective and unmetered per team: the bridged spans measured like any Running time
    let teams: Vec<Value> = serde_json::from_str(&run_cardhour_ok(
        ["usage", "--from", &sim.start_arg(), "--to", &sim.end_arg(), "--group-by", "team", "--format", "json"],
        &db.env(),
    ))
    .unwrap();
    let truth_teams = truth["by_team"].as_array().unwrap();
    assert!(!teams.is_empty());
    for t in truth_teams.iter().filter(|t| num(t, "gpu_hours") > 0.0) {
        let s = teams.iter().find(|s| s["team"] == t["team"]).unwrap_or_else(|| panic!("team {}", t["team"]));
        for f in ["gpu_hours", "effective_gpu_hours", "unmetered_gpu_hours"] {
            assert_rel(&format!("team {} {f}", t["team"]), num(s, f), num(t, f));
        }
    }
    // capacity: the short outages bridged, the long ones lost
    let cap: BTreeMap<String, f64> = db
        .psql("SELECT node, sum(card_seconds)/3600 FROM node_capacity_hourly GROUP BY node")
        .unwrap()
        .lines()
        .map(|l| l.split_once('|').map(|(n, v)| (n.to_string(), v.parse().unwrap())).unwrap())
        .collect();
    let truth_cap = truth["capacity"].as_array().unwrap();
    assert!(!truth_cap.is_empty());
    for c in truth_cap {
        assert_rel(&format!("capacity {}", c["node"]), cap[c["node"].as_str().unwrap()], num(c, "card_hours"));
    }
    // every gap in every hour it touches, with its pods; nothing else (no open-ended silence)
    let want = truth_gaps(&truth, true);
    assert_eq!(want.len(), 6);
    assert_eq!(recorded_gaps(&db), want);

    // health: the bridged GPU-hours and the gaps of the last day
    let health: Value = serde_json::from_str(&run_cardhour_ok(["health", "--format", "json"], &db.env())).unwrap();
    let c = &health["clusters"][0];
    assert_rel("health bridged", num(c, "bridged_gpu_hours_24h"), truth_bridged);
    let listed: Vec<(String, bool, i64, i64)> = c["ksm_gaps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["span"].as_str().unwrap().into(),
                g["bridged"].as_bool().unwrap(),
                g["hours"].as_i64().unwrap(),
                g["pods"].as_i64().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, bool, i64, i64)> = gaps
        .iter()
        .map(|g| {
            let hours = g["hours"].as_array().unwrap();
            let span = format!("{}..{}", g["from"].as_str().unwrap(), g["to"].as_str().unwrap());
            (span, g["bridged"].as_bool().unwrap(), hours.len() as i64, hours[0]["pods"].as_i64().unwrap())
        })
        .collect();
    assert_eq!(listed, expected);

    // idempotent and the same however the hours are chunked (a gap across a chunk's edge too), by the query API
    let before = digest(&db);
    let again = ingest(&sim, &prom, &db, &["--source", "query", "--chunk-hours", "1"]);
    assert_eq!(again["hours_changed"], 0);
    assert_eq!(digest(&db), before);

    // the bridge off: nothing bridged, every gap reported as not billed, and what is missing is the truth's gap time
    let off_db = TestDb::migrated().unwrap();
    let off = ingest(&sim, &prom, &off_db, &["--ksm-gap-bridge", "0", "--chunk-hours", "4"]);
    assert_eq!(num(&off, "bridged_gpu_hours"), 0.0);
    let without_gaps = truth_gpu + truth_lost;
    let missing = without_gaps - num(&off, "gpu_hours");
    assert_rel("missing without the bridge", missing, truth_bridged + truth_lost);
    assert_eq!(recorded_gaps(&off_db), truth_gaps(&truth, false));
    let off_cap: f64 = off_db.psql("SELECT sum(card_seconds)/3600 FROM node_capacity_hourly").unwrap().parse().unwrap();
    let bridged_cap: f64 = truth_cap.iter().map(|c| num(c, "bridged_card_hours")).sum();
    let cap_total: f64 = truth_cap.iter().map(|c| num(c, "card_hours")).sum();
    assert_rel("capacity without the bridge", off_cap, cap_total - bridged_cap);
    println!(
        "GPU-hours: {without_gaps:.4} held; stored {:.4} with the bridge ({truth_bridged:.4} bridged, \
         {truth_lost:.4} lost), {:.4} without it ({missing:.4} lost)",
        num(&summary, "gpu_hours"),
        num(&off, "gpu_hours")
    );
}
