//! The metering core end to end: a simulated cluster backfilled into a real Prometheus, ingested into a real
//! Postgres through the `cardhour` binary, and compared with the simulator's independent ground truth — read by
//! remote read and by the query API, which must store identical rows.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::truth::{self, assert_rel, check_standard_truth, compare_groups, digest, num, usage};
use common::{Simulation, TestDb, TestPrometheus, cardhour_bin, run_cardhour, run_cardhour_ok, simulate_run};
use serde_json::Value;

const GPUS: u32 = 56; // one node of every type
const HOURS: u32 = 24;
const INTERVAL: u32 = 60;

fn ingest(sim: &Simulation, prom: &TestPrometheus, db: &TestDb, extra: &[&str]) -> Value {
    truth::ingest(sim, &prom.url, "sim", db, extra)
}

#[test]
fn simulated_cluster_is_metered_exactly_and_idempotently() {
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate_run(dir.path(), GPUS, HOURS, INTERVAL, 11);
    let truth = sim.truth_json();
    let prom = TestPrometheus::from_openmetrics(&sim.metrics).unwrap();
    let db = TestDb::migrated().unwrap();

    let summary = ingest(&sim, &prom, &db, &["--source", "remote-read"]);
    assert_eq!(summary["source"], "remote-read");
    check_standard_truth(&sim, &db, &summary, INTERVAL, truth["non_finite_samples"].as_u64().unwrap());

    // idempotent, and the same from either source: the hours again by the query API leave identical rows
    let before = digest(&db);
    let again = ingest(&sim, &prom, &db, &["--chunk-hours", "5", "--source", "query"]);
    assert_eq!(again["source"], "query");
    assert_eq!(again["usage_rows"], summary["usage_rows"]);
    assert_eq!(again["samples_read"], summary["samples_read"], "both sources read the same samples");
    assert_eq!(again["hours_changed"], 0);
    assert_eq!(digest(&db), before);
    let query_db = TestDb::migrated().unwrap();
    let by_query = ingest(&sim, &prom, &query_db, &["--source", "query"]);
    assert_eq!(by_query["non_finite_samples"], summary["non_finite_samples"]);
    assert_eq!(digest(&query_db), before, "the query API alone stores the rows remote read stored");

    // a second cluster in the same database: each is reported on its own, and together they add up
    let mut args = vec!["ingest", "--cluster", "sim-b", "--prometheus", &prom.url, "--format", "json"];
    let (from, to) = (sim.start_arg(), sim.end_arg());
    args.extend(["--from", from.as_str(), "--to", to.as_str()]);
    run_cardhour_ok(args, &db.env());
    let only_b = run_cardhour_ok(
        ["usage", "--from", &from, "--to", &to, "--group-by", "team", "--format", "json", "--cluster", "sim-b"],
        &db.env(),
    );
    compare_groups("cluster sim-b", &serde_json::from_str::<Vec<Value>>(&only_b).unwrap(), &truth["by_team"], "team");
    // sim-b was read with the default `auto`: its probe found remote read, and health says so
    let health: Value = serde_json::from_str(&run_cardhour_ok(["health", "--format", "json"], &db.env())).unwrap();
    let b = health["clusters"].as_array().unwrap().iter().find(|c| c["cluster"] == "sim-b").expect("sim-b in health");
    assert_eq!(b["sample_source"], "remote-read", "{b}");
    assert!(b["sample_source_reason"].as_str().unwrap().contains("probe"), "{b}");
    let both: f64 = usage(&sim, &db, "team").iter().map(|t| num(t, "gpu_hours")).sum();
    assert_rel("two clusters", both, 2.0 * num(&truth["totals"], "gpu_hours"));

    // a query_range past Prometheus' 11,000-point limit is split, not refused
    let (start_ms, end_ms) = (sim.start.timestamp_millis(), sim.start.timestamp_millis() + 4 * 3_600_000);
    let refused = prom.get(&format!(
        "/api/v1/query_range?query=count(kube_node_status_capacity)&start={}&end={}&step=1",
        start_ms / 1000,
        end_ms / 1000
    ));
    assert!(refused.unwrap().1.contains("11,000"), "Prometheus itself refuses 14,401 points");
    let client = cardhour::prom::PromClient::new(&prom.url, std::time::Duration::from_secs(60)).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let series = rt.block_on(client.query_range("count(kube_node_status_capacity)", start_ms, end_ms, 1000)).unwrap();
    assert_eq!(series.len(), 1);
    assert_eq!(series[0].samples.len(), 4 * 3600 + 1);
    assert!(series[0].samples.windows(2).all(|w| w[1].t_ms - w[0].t_ms == 1000));

    // the worker reaches the same numbers on its own (its span covers the simulation)
    let worker_db = TestDb::migrated().unwrap();
    let hours_back = ((chrono::Utc::now() - sim.start).num_hours() + 1).to_string();
    run_cardhour_ok(
        ["worker", "--once", "--cluster", "sim", "--prometheus", &prom.url, "--initial-hours", &hours_back],
        &worker_db.env(),
    );
    compare_groups("worker team", &usage(&sim, &worker_db, "team"), &truth["by_team"], "team");
}

#[test]
fn a_killed_backfill_resumes_to_the_same_totals() {
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate_run(dir.path(), 16, 72, INTERVAL, 5);
    let prom = TestPrometheus::from_openmetrics(&sim.metrics).unwrap();
    let (from, to) = (sim.start_arg(), sim.end_arg());
    let args =
        ["ingest", "--cluster", "sim", "--prometheus", &prom.url, "--from", &from, "--to", &to, "--chunk-hours", "1"];

    // the clean run reads by the query API, the killed one by remote read (auto): the same rows in the end
    let clean = TestDb::migrated().unwrap();
    run_cardhour_ok([&args[..], &["--source", "query"]].concat(), &clean.env());

    let killed = TestDb::migrated().unwrap();
    let mut child = Command::new(cardhour_bin())
        .args(args)
        .env("DATABASE_URL", &killed.url)
        .env("CARDHOUR_LOG", "cardhour=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut stored = 0;
    for line in stderr.lines() {
        if line.unwrap().contains("stored hour") {
            stored += 1;
            if stored == 2 {
                child.kill().unwrap();
                break;
            }
        }
    }
    child.wait().unwrap();
    let partial: i64 = killed.psql("SELECT count(*) FROM ingested_hours").unwrap().trim().parse().unwrap();
    assert!((2..72).contains(&partial), "killed after {partial} of 72 hours");
    // every stored hour is whole: the watermark says exactly how far it got
    let mark = killed
        .psql(
            "SELECT complete_until = (SELECT max(hour) + interval '1 hour' FROM ingested_hours) FROM ingest_watermarks",
        )
        .unwrap();
    assert_eq!(mark.trim(), "t");

    run_cardhour_ok(args, &killed.env());
    assert_eq!(digest(&killed), digest(&clean));
}

#[test]
fn bad_input_gets_a_clear_error_and_writes_nothing() {
    let db = TestDb::migrated().unwrap();
    let env = db.env();
    let fail = |args: &[&str], needle: &str| {
        let out = run_cardhour(args, &env);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(needle), "{args:?}: expected {needle:?} in {err}");
        assert!(!err.contains("panicked"), "{err}");
    };
    let base = ["ingest", "--cluster", "c1", "--prometheus", "http://127.0.0.1:9"];
    fail(&[&base[..], &["--from", "2026-01-01T00:30:00Z", "--to", "2026-01-01T02:00:00Z"]].concat(), "whole hour");
    fail(&[&base[..], &["--from", "2026-01-01T02:00:00Z", "--to", "2026-01-01T01:00:00Z"]].concat(), "must be after");
    fail(&[&base[..], &["--from", "yesterday", "--to", "2026-01-01T01:00:00Z"]].concat(), "RFC 3339");
    fail(
        &[
            "ingest",
            "--cluster",
            "c1",
            "--prometheus",
            "localhost:9090",
            "--from",
            "2026-01-01T00:00:00Z",
            "--to",
            "2026-01-01T01:00:00Z",
        ],
        "invalid Prometheus URL",
    );
    fail(
        &[
            "ingest",
            "--cluster",
            "bad name!",
            "--prometheus",
            "http://127.0.0.1:9",
            "--from",
            "2026-01-01T00:00:00Z",
            "--to",
            "2026-01-01T01:00:00Z",
        ],
        "cluster name",
    );
    fail(&[&base[..], &["--from", "2026-01-01T00:00:00Z", "--to", "2026-01-01T01:00:00Z"]].concat(), "unreachable");
    fail(&["usage", "--from", "2026-01-02", "--to", "2026-01-01"], "must be after");
    fail(&["usage", "--from", "2026-01-01", "--to", "2026-01-02", "--group-by", "planet"], "invalid value");
    fail(&["simulate", "--gpus", "12", "--hours", "1", "--out", "/tmp/cardhour-never"], "multiple of 8");
    fail(
        &["simulate", "--gpus", "8", "--hours", "1", "--end", "2026-01-01T00:30:00Z", "--out", "/tmp/cardhour-never"],
        "hour",
    );
    assert_eq!(
        db.psql("SELECT (SELECT count(*) FROM clusters) + (SELECT count(*) FROM gpu_usage_hourly)").unwrap().trim(),
        "0"
    );
}
