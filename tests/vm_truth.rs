//! VictoriaMetrics as a backend (issue 9): a simulated cluster copied with vmctl into a real VictoriaMetrics and
//! read by its export and by its query API meets the simulator's truth and stores exactly the rows Prometheus'
//! remote read stores; hours tile by the samples' own timestamps on both backends, whichever ends their range
//! selectors include; `auto` chooses the export, and remote read, which VictoriaMetrics does not serve, is a clear
//! error that writes nothing.

use crate::common;

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::Duration;

use chrono::TimeDelta;
use common::truth::{assert_same_rows, check_standard_truth, ingest};
use common::{
    TestDb, TestPrometheus, TestVictoria, promtool_backfill, rfc3339, run_cardhour, run_cardhour_ok, sim_end,
    simulate_profile, simulate_run,
};
use serde_json::Value;

use cardhour::ingest::{FetchSpec, Fetched, SampleSource, SourceKind};
use cardhour::metering::SeenDevice;
use cardhour::prom::{PromClient, RangeEnds, RetryPolicy};

// the main simulation of tests/ingest_truth.rs
const GPUS: u32 = 56;
const HOURS: u32 = 24;
const INTERVAL: u32 = 60;
const HOUR_MS: i64 = 3_600_000;

/// A Prometheus and a VictoriaMetrics serving one promtool backfill of `metrics`, started side by side.
fn both(metrics: &std::path::Path) -> (TestPrometheus, TestVictoria) {
    let blocks = tempfile::tempdir().unwrap();
    promtool_backfill(metrics, blocks.path()).unwrap();
    std::thread::scope(|s| {
        let prom = s.spawn(|| TestPrometheus::from_blocks(blocks.path()).unwrap());
        let vm = TestVictoria::from_blocks(blocks.path()).unwrap();
        (prom.join().unwrap(), vm)
    })
}

fn u(v: &Value, field: &str) -> u64 {
    v[field].as_u64().unwrap_or_else(|| panic!("{field} missing in {v}"))
}

#[test]
fn victoria_metrics_by_export_and_by_query_stores_the_rows_of_prometheus_remote_read() {
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate_run(dir.path(), GPUS, HOURS, INTERVAL, 11);
    let truth = sim.truth_json();
    let nan = u(&truth, "non_finite_samples");
    assert!(nan > 0, "the simulation has NaN samples");
    let (prom, vm) = both(&sim.metrics);
    // vmctl sent every sample; VictoriaMetrics holds every one but the NaNs: it drops them on ingestion
    let om = std::fs::read_to_string(&sim.metrics).unwrap();
    let lines = om.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).count() as u64;
    assert_eq!((vm.sent, vm.stored), (lines, lines - nan));

    let rr_db = TestDb::migrated().unwrap();
    let rr = ingest(&sim, &prom.url, "sim", &rr_db, &["--source", "remote-read"]);
    assert_eq!(u(&rr, "non_finite_samples"), nan);

    for source in ["vm-export", "query"] {
        let db = TestDb::migrated().unwrap();
        let s = ingest(&sim, &vm.url, "sim", &db, &["--source", source]);
        assert_eq!(s["source"], source);
        check_standard_truth(&sim, &db, &s, INTERVAL, 0);
        assert_eq!(s["samples_read"], rr["samples_read"], "{source}: the finite samples Prometheus has");
        assert_eq!(s["usage_rows"], rr["usage_rows"], "{source}");
        assert_same_rows(&db, &rr_db, &format!("{source} (the rows of Prometheus' remote read)"));
    }

    // an hour of another cluster: `auto` probes remote read (refused), then the export, and says so
    let (from, to) = (sim.start_arg(), rfc3339(sim.start + TimeDelta::hours(1)));
    let db = TestDb::migrated().unwrap();
    let args =
        ["ingest", "--cluster", "vm-auto", "--prometheus", &vm.url, "--from", &from, "--to", &to, "--format", "json"];
    let auto: Value = serde_json::from_str(&run_cardhour_ok(args, &db.env())).unwrap();
    assert_eq!(auto["source"], "vm-export", "{auto}");
    let health: Value = serde_json::from_str(&run_cardhour_ok(["health", "--format", "json"], &db.env())).unwrap();
    let c = &health["clusters"][0];
    assert_eq!((&c["cluster"], &c["sample_source"]), (&Value::from("vm-auto"), &Value::from("vm-export")), "{c}");
    let reason = c["sample_source_reason"].as_str().unwrap();
    assert!(reason.contains("endpoint absent (HTTP 400)") && reason.contains("export answered the probe"), "{reason}");

    // remote read asked of VictoriaMetrics (its answer: 400 `unsupported path requested`): an error naming the
    // source, nothing written
    let args = [
        "ingest",
        "--cluster",
        "vm-rr",
        "--prometheus",
        &vm.url,
        "--from",
        &from,
        "--to",
        &to,
        "--source",
        "remote-read",
    ];
    let out = run_cardhour(args, &db.env());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let needle = format!("remote read at {}/api/v1/read: endpoint absent (HTTP 400)", vm.url);
    assert!(err.contains(&needle), "expected {needle:?} in {err}");
    assert!(!err.contains("panicked"), "{err}");
    let written = db
        .psql("SELECT (SELECT count(*) FROM clusters WHERE name = 'vm-rr') + (SELECT count(*) FROM ingested_hours WHERE cluster = 'vm-rr')")
        .unwrap();
    assert_eq!(written, "0");
}

#[test]
fn shared_cards_read_from_victoria_metrics_store_the_rows_of_prometheus() {
    // the shared profile (tests/shared_truth.rs) at its smallest, read in windows of 2 h: its idle cards without
    // series are counted from the trailing hours' devices, PromQL evaluated on each backend's range ends
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate_profile(dir.path(), "shared", 72, 6, INTERVAL, 16, &[]);
    let (prom, vm) = both(&sim.metrics);
    let rr_db = TestDb::migrated().unwrap();
    let rr = ingest(&sim, &prom.url, "sim", &rr_db, &["--source", "remote-read", "--chunk-hours", "2"]);
    let unverified = rr["anomalies"]["unverified_node"].as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
    assert_eq!(unverified, Some(vec!["gpu-l40s-uncounted-07".to_string()]), "{rr}");
    let nodes = rr_db.psql("SELECT count(DISTINCT node) FROM node_capacity_hourly").unwrap();
    assert_eq!(nodes, "9");
    for source in ["vm-export", "query"] {
        let db = TestDb::migrated().unwrap();
        let s = ingest(&sim, &vm.url, "sim", &db, &["--source", source, "--chunk-hours", "2"]);
        // the same anomalies, but the NaN samples VictoriaMetrics never stored
        let mut anomalies = rr["anomalies"].clone();
        assert!(anomalies.as_object_mut().unwrap().remove("non_finite_sample").is_some(), "{rr}");
        assert_eq!((&s["hours"], &s["anomalies"]), (&rr["hours"], &anomalies), "{source}");
        assert_same_rows(&db, &rr_db, &format!("{source} (the rows of Prometheus' remote read)"));
    }
}

/// A hand-written cluster whose samples sit on and next to hour boundaries.
struct Edges {
    /// The window read: `[w, w + 1 h)`.
    w: i64,
    metrics: String,
}

fn edges() -> Edges {
    let w = (sim_end() - TimeDelta::hours(2)).timestamp_millis();
    let t = |ms: i64| format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
    let mut om = String::from("# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n");
    // devices seen once each in the trailing day: on its first hour's first millisecond, on an hour inside it and
    // on its last millisecond are in; a millisecond before the day is not
    for (uuid, at) in [
        ("GPU-before", w - 23 * HOUR_MS - 1),
        ("GPU-first", w - 23 * HOUR_MS),
        ("GPU-mid", w - 12 * HOUR_MS),
        ("GPU-last", w - 1),
    ] {
        writeln!(om, "DCGM_FI_DEV_GPU_UTIL{{Hostname=\"n1\",UUID=\"{uuid}\",gpu=\"0\"}} 50 {}", t(at)).unwrap();
    }
    // a series with samples on both edges of the window and beside them, and non-finite ones inside
    om.push_str("# TYPE edge_samples gauge\n");
    for (v, at) in [("1", w - 1), ("2", w), ("3", w + 60_000), ("NaN", w + 120_000), ("+Inf", w + 180_000)] {
        writeln!(om, "edge_samples{{k=\"a\"}} {v} {}", t(at)).unwrap();
    }
    for (v, at) in [("4", w + HOUR_MS - 1), ("5", w + HOUR_MS)] {
        writeln!(om, "edge_samples{{k=\"a\"}} {v} {}", t(at)).unwrap();
    }
    om.push_str("# EOF\n");
    Edges { w, metrics: om }
}

#[test]
fn hours_tile_by_the_samples_own_timestamps_on_either_backend() {
    let e = edges();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edges.om");
    std::fs::write(&path, &e.metrics).unwrap();
    let (prom, vm) = both(&path);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = |url: &str| PromClient::new(url, Duration::from_secs(30)).unwrap();
    let spec = FetchSpec { matchers: None, team_label: "label_team".into() };
    let policy = RetryPolicy { attempts: Some(1), first_delay: Duration::ZERO, max_delay: Duration::ZERO };
    // (backend and source, its range ends, the non-finite samples it holds: VictoriaMetrics drops NaN)
    let sources = [
        (&prom.url, SourceKind::RemoteRead, RangeEnds::Closed, 2),
        (&prom.url, SourceKind::Query, RangeEnds::Closed, 2),
        (&vm.url, SourceKind::VmExport, RangeEnds::LeftOpen, 1),
        (&vm.url, SourceKind::Query, RangeEnds::LeftOpen, 1),
    ];
    for (url, kind, ends, non_finite) in sources {
        let what = format!("{} of {url}", kind.as_str());
        let source = SampleSource::new(client(url), kind, "test", false);
        assert_eq!(rt.block_on(source.range_ends()).unwrap(), ends, "{what}");

        // raw samples: the window's first millisecond in, its end out, whatever ends the backend includes
        let series = rt.block_on(source.raw_samples("edge_samples{}", e.w, e.w + HOUR_MS)).unwrap();
        assert_eq!(series.len(), 1, "{what}");
        let got: Vec<(i64, f64)> = series[0].samples.iter().map(|p| (p.t_ms - e.w, p.v)).collect();
        assert_eq!(got, vec![(0, 2.0), (60_000, 3.0), (HOUR_MS - 1, 4.0)], "{what}");
        assert_eq!(series[0].non_finite.len(), non_finite, "{what}: {:?}", series[0].non_finite);

        // the devices each trailing hour saw: the first and last milliseconds of the day in, the one before out
        let seen = rt.block_on(Fetched::trailing_seen(&source, &spec, e.w, policy)).unwrap();
        let mut fetched = Fetched::default();
        fetched.absorb_seen(seen);
        let hours = fetched.into_hours(&[e.w]);
        let devices: BTreeSet<&str> =
            hours[0].0.trailing_devices.iter().map(|d: &SeenDevice| d.uuid.as_str()).collect();
        assert_eq!(devices, BTreeSet::from(["GPU-first", "GPU-mid", "GPU-last"]), "{what}");
    }
}
