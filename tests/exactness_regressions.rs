//! Issue 34's regressions, each on a real Prometheus against a truth computed by hand from series written here:
//! time-slicing under dcgm-exporter before 4.8.2 once a card has been idle for more than a day (its series gone,
//! GFD still counting it), across batches; a whole card on a node running MIG's mixed strategy; utilization
//! scraped on another phase than kube-state-metrics (the intersection rule); MPS; a node nothing counts.

use crate::common;

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use common::om::Om;
use common::{TestDb, TestPrometheus, rfc3339, run_cardhour_ok, sim_end};
use serde_json::Value;

const STEP: i64 = 60_000;
const H: i64 = 3_600_000;

/// A window of `hours` whole hours ending at least 4 h before now (never into Prometheus' head block).
fn window(hours: i64) -> (DateTime<Utc>, i64, i64) {
    let end = sim_end();
    let start = end - TimeDelta::hours(hours);
    (start, start.timestamp_millis(), end.timestamp_millis())
}

/// A pod's container holding `q` units of each resource on `node` while Running, per kube-state-metrics (a
/// sample every minute in `[from, to)`), in namespace `ns`.
fn pod(om: &mut Om, ns: &str, name: &str, node: &str, requests: &[(&str, f64)], (from, to): (i64, i64)) {
    let uid = format!("uid-{name}");
    for (resource, q) in requests {
        let labels = [
            ("namespace", ns),
            ("pod", name),
            ("uid", uid.as_str()),
            ("container", "main"),
            ("node", node),
            ("resource", resource),
            ("unit", "integer"),
        ];
        om.every("kube_pod_container_resource_requests", &labels, (from, to), 0, STEP, *q);
    }
    let phase = [("namespace", ns), ("pod", name), ("uid", uid.as_str()), ("phase", "Running")];
    om.every("kube_pod_status_phase", &phase, (from, to), 0, STEP, 1.0);
}

fn node_capacity(om: &mut Om, node: &str, resource: &str, units: f64, span: (i64, i64)) {
    for name in ["kube_node_status_capacity", "kube_node_status_allocatable"] {
        om.every(name, &[("node", node), ("resource", resource), ("unit", "integer")], span, 0, STEP, units);
    }
}

fn namespace(om: &mut Om, ns: &str, span: (i64, i64)) {
    om.every("kube_namespace_labels", &[("namespace", ns), ("label_team", ns)], span, 0, STEP, 1.0);
}

/// Backfills `om` into a fresh Prometheus and ingests `[start, start + hours)` with `extra` arguments.
fn ingest(om: &Om, start: DateTime<Utc>, hours: i64, extra: &[&str]) -> (TestDb, Value, TestPrometheus) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metrics.om");
    om.write(&path);
    let prom = TestPrometheus::from_openmetrics(&path).unwrap();
    let db = TestDb::migrated().unwrap();
    let summary = ingest_into(&prom, &db, start, hours, extra);
    (db, summary, prom)
}

fn ingest_into(prom: &TestPrometheus, db: &TestDb, start: DateTime<Utc>, hours: i64, extra: &[&str]) -> Value {
    let (from, to) = (rfc3339(start), rfc3339(start + TimeDelta::hours(hours)));
    let mut args = vec!["ingest", "--cluster", "c", "--prometheus", &prom.url, "--format", "json"];
    args.extend(["--from", &from, "--to", &to]);
    args.extend(extra);
    serde_json::from_str(&run_cardhour_ok(args, &db.env())).expect("ingest --format json")
}

/// Per pod: (kind, fraction(s), GPU-hours, effective, unmetered).
fn stored(db: &TestDb) -> BTreeMap<String, (String, String, f64, f64, f64)> {
    db.psql(
        "SELECT pod, string_agg(DISTINCT kind, ','), string_agg(DISTINCT fraction::text, ','),
                sum(gpu_seconds)/3600, sum(effective_gpu_seconds)/3600, sum(unmetered_gpu_seconds)/3600
         FROM gpu_usage_hourly GROUP BY pod",
    )
    .unwrap()
    .lines()
    .map(|l| {
        let c: Vec<&str> = l.split('|').collect();
        let f = |i: usize| c[i].parse::<f64>().unwrap();
        (c[0].to_string(), (c[1].to_string(), c[2].to_string(), f(3), f(4), f(5)))
    })
    .collect()
}

fn rel(got: f64, want: f64) -> f64 {
    (got - want).abs() / want.abs().max(1e-9)
}

/// KSM samples of `[from, to)` at `STEP`: the Running time they bill, in hours.
fn running_hours((from, to): (i64, i64)) -> f64 {
    ((to - from + STEP - 1) / STEP * STEP) as f64 / H as f64
}

/// Defect 1. Two L40S time-sliced 4 ways under the default names (`nvidia_com_gpu` = 8), dcgm-exporter before
/// 4.8.2: both cards keep their series while the node is idle (its first ten minutes), then card 1 stays idle
/// and has no series while card 0 is busy — for the 36 hours ingested. GFD labels count 2 cards. Over the
/// trailing day the node's DCGM devices shrink to card 0 from hour 24 on: main counted one card there (8
/// replicas, fraction 1/8 instead of 1/4, −50 %), whether each 6-hour batch read its trailing day or carried it.
#[test]
fn time_sliced_cards_vanished_for_a_day_are_counted_by_gfd() {
    let hours = 36;
    let (start, s, e) = window(hours);
    let mut om = Om::default();
    let node = "ts-a";
    node_capacity(&mut om, node, "nvidia_com_gpu", 8.0, (s, e));
    namespace(&mut om, "nlp", (s, e));
    let gfd = [
        ("node", node),
        ("label_nvidia_com_gpu_product", "NVIDIA-L40S"),
        ("label_nvidia_com_gpu_count", "2"),
        ("label_nvidia_com_gpu_replicas", "4"),
        ("label_nvidia_com_gpu_sharing_strategy", "time-slicing"),
    ];
    om.every("kube_node_labels", &gfd, (s, e), 0, STEP, 1.0);
    let busy_from = s + 10 * STEP;
    for (card, uuid) in [("0", "GPU-ts-0"), ("1", "GPU-ts-1")] {
        let l = [("gpu", card), ("UUID", uuid), ("modelName", "NVIDIA L40S"), ("Hostname", node)];
        om.every("DCGM_FI_DEV_GPU_UTIL", &l, (s, busy_from), 0, STEP, 0.0);
    }
    // the pod's copy of card 0 (one replica): the whole card's value, 40 %
    pod(&mut om, "nlp", "ts-pod", node, &[("nvidia_com_gpu", 1.0)], (busy_from, e));
    let copy = [
        ("gpu", "0"),
        ("UUID", "GPU-ts-0"),
        ("modelName", "NVIDIA L40S"),
        ("Hostname", node),
        ("vgpu", "0-0"),
        ("namespace", "nlp"),
        ("pod", "ts-pod"),
        ("container", "main"),
    ];
    om.every("DCGM_FI_DEV_GPU_UTIL", &copy, (busy_from, e), 0, STEP, 40.0);
    let want_gpu = running_hours((busy_from, e)) / 4.0;
    for batch in ["6", "36"] {
        let (db, summary, _prom) = ingest(&om, start, hours, &["--chunk-hours", batch, "--source", "query"]);
        let rows = stored(&db);
        let (kind, fraction, gpu, eff, unmetered) = &rows["ts-pod"];
        println!("batch {batch} h: {kind} fraction {fraction}, {gpu} GPU-hours (truth {want_gpu}), effective {eff}");
        assert_eq!((kind.as_str(), fraction.as_str()), ("timeslice", "0.25"), "batch {batch} h: {summary}");
        assert!(rel(*gpu, want_gpu) <= 1e-12, "batch {batch} h: {gpu} vs {want_gpu}");
        // 40 % of the card on one copy, clamped to the quarter held: all of it is used
        assert!(rel(*eff, want_gpu) <= 1e-12 && *unmetered == 0.0, "batch {batch} h: {eff} / {unmetered}");
        // the decision and its evidence, per node-hour: GFD's count, DCGM's one device of the later hours beside it
        let facts = db
            .psql(&format!(
                "SELECT count(*), min(cards), max(cards), string_agg(DISTINCT strategy, ','),
                        string_agg(DISTINCT cards_source, ','), bool_or(evidence LIKE 'dcgm=1,%')
                 FROM node_facts_hourly WHERE node = '{node}'"
            ))
            .unwrap();
        assert_eq!(facts, format!("{hours}|2|2|time-slicing|gfd_count|t"), "batch {batch} h");
        // the capacity stays two cards every hour
        let cards = db.psql("SELECT min(cards), max(cards) FROM node_capacity_hourly").unwrap();
        assert_eq!(cards, "2|2");
    }
}

/// Defect 2. An A100 node running MIG's mixed strategy whose kube-state-metrics exports its capacity as
/// `nvidia_com_gpu` only: card 0 partitioned into two 3g.40gb (DCGM's series carry `GPU_I_PROFILE`), card 1 whole.
/// A pod asks for `nvidia_com_mig_3g_40gb`, another for `nvidia_com_gpu`: the whole card is a whole card (main
/// took the node for the single strategy and billed it as a 3g.40gb slice, 3/7: −57 %).
#[test]
fn a_whole_card_on_a_mixed_mig_node_is_a_whole_card() {
    let hours = 3;
    let (start, s, e) = window(hours);
    let mut om = Om::default();
    let node = "mig-a";
    node_capacity(&mut om, node, "nvidia_com_gpu", 1.0, (s, e));
    namespace(&mut om, "cv", (s, e));
    let span = (s + 5 * STEP, e - 7 * STEP);
    pod(&mut om, "cv", "slice-pod", node, &[("nvidia_com_mig_3g_40gb", 1.0)], span);
    pod(&mut om, "cv", "whole-pod", node, &[("nvidia_com_gpu", 1.0)], span);
    let a100 = "NVIDIA A100-SXM4-80GB";
    for gi in ["1", "2"] {
        let mut l = vec![
            ("gpu", "0"),
            ("UUID", "GPU-mig-0"),
            ("modelName", a100),
            ("Hostname", node),
            ("GPU_I_PROFILE", "3g.40gb"),
            ("GPU_I_ID", gi),
        ];
        if gi == "1" {
            l.extend([("namespace", "cv"), ("pod", "slice-pod"), ("container", "main")]);
        }
        om.every("DCGM_FI_PROF_GR_ENGINE_ACTIVE", &l, (s, e), 0, STEP, 0.5);
    }
    let whole = [
        ("gpu", "1"),
        ("UUID", "GPU-mig-1"),
        ("modelName", a100),
        ("Hostname", node),
        ("namespace", "cv"),
        ("pod", "whole-pod"),
        ("container", "main"),
    ];
    om.every("DCGM_FI_PROF_GR_ENGINE_ACTIVE", &whole, (s, e), 0, STEP, 0.8);
    let (db, summary, _prom) = ingest(&om, start, hours, &["--source", "remote-read"]);
    let rows = stored(&db);
    let held = running_hours(span);
    let (kind, fraction, gpu, eff, _) = &rows["whole-pod"];
    println!("whole card: {kind} fraction {fraction}, {gpu} GPU-hours (truth {held}), effective {eff}");
    assert_eq!((kind.as_str(), fraction.as_str()), ("whole", "1"), "{summary}");
    assert!(rel(*gpu, held) <= 1e-12 && rel(*eff, 0.8 * held) <= 1e-12, "{gpu} / {eff} vs {held}");
    let (kind, fraction, gpu, eff, _) = &rows["slice-pod"];
    assert_eq!((kind.as_str(), fraction.as_str()), ("mig", &*(3.0f64 / 7.0).to_string()));
    assert!(rel(*gpu, held * 3.0 / 7.0) <= 1e-12 && rel(*eff, 0.5 * held * 3.0 / 7.0) <= 1e-12, "{gpu} / {eff}");
    let facts = db.psql("SELECT DISTINCT strategy, evidence LIKE '%mig=mixed%' FROM node_facts_hourly").unwrap();
    assert_eq!(facts, "mig-mixed|t");
}

/// Defect 3. A whole card whose DCGM exporter scrapes every minute 20 s after kube-state-metrics (its own phase),
/// and a HAMi container whose monitor scrapes every 45 s: each utilization sample covers `[u, u + interval)`
/// intersected with the Running span (SPEC §3); Running time no sample covers is unmetered. Main paired each KSM
/// sample with the nearest utilization sample instead.
#[test]
fn utilization_on_its_own_grid_counts_where_its_interval_meets_running_time() {
    let hours = 3;
    let (start, s, e) = window(hours);
    let mut om = Om::default();
    namespace(&mut om, "ml", (s, e));
    // the whole card: Running per KSM for 120 samples from t0, [t0, t0 + 120 min)
    let node = "w-a";
    node_capacity(&mut om, node, "nvidia_com_gpu", 1.0, (s, e));
    let t0 = s + 5 * STEP;
    let span = (t0, t0 + 120 * STEP);
    pod(&mut om, "ml", "dcgm-pod", node, &[("nvidia_com_gpu", 1.0)], span);
    let labels = [
        ("gpu", "0"),
        ("UUID", "GPU-w-0"),
        ("modelName", "NVIDIA A100-SXM4-80GB"),
        ("Hostname", node),
        ("namespace", "ml"),
        ("pod", "dcgm-pod"),
        ("container", "main"),
    ];
    let util = |j: i64| (10 * (j.rem_euclid(7)) + 5) as f64;
    // from t0 + 20 s while the pod holds the card, and one sample past its end
    let dcgm: Vec<(i64, f64)> = (0..121).map(|j| (t0 + 20_000 + j * STEP, util(j))).collect();
    om.series("DCGM_FI_DEV_GPU_UTIL", &labels).extend(&dcgm);
    let mut want_eff_ms = 0.0;
    for (u, v) in &dcgm {
        let overlap = ((u + STEP).min(span.1) - (*u).max(span.0)).max(0);
        want_eff_ms += v / 100.0 * overlap as f64;
    }
    let want_dcgm = (want_eff_ms / H as f64, 20_000.0 / H as f64);
    // what pairing each KSM sample with the nearest DCGM sample said
    let nearest: f64 = (0..120).map(|k| util(k) / 100.0 * STEP as f64).sum::<f64>() / H as f64;

    // HAMi: a vGPU with 30 % of the cores on an A100 node split 10 ways; its monitor every 45 s from t0 + 7 s
    let hami_node = "hami-a";
    node_capacity(&mut om, hami_node, "nvidia_com_gpu", 10.0, (s, e));
    let hspan = (t0, t0 + 90 * STEP);
    pod(&mut om, "ml", "hami-pod", hami_node, &[("nvidia_com_gpu", 1.0), ("nvidia_com_gpucores", 30.0)], hspan);
    let hami_util = |j: i64| (5 * (j.rem_euclid(9))) as f64;
    let hami: Vec<(i64, f64)> = (0..121).map(|j| (t0 + 7_000 + j * 45_000, hami_util(j))).collect();
    let hl = [
        ("namespace", "ml"),
        ("pod", "hami-pod"),
        ("container", "main"),
        ("vdeviceid", "0"),
        ("deviceuuid", "GPU-h-0"),
    ];
    om.series("hami_container_device_utilization_ratio", &hl).extend(&hami);
    let (mut want_hami_eff, mut covered) = (0.0, 0.0);
    for (u, v) in &hami {
        let overlap = ((u + 45_000).min(hspan.1) - (*u).max(hspan.0)).max(0) as f64;
        want_hami_eff += (v / 100.0).min(0.3) * overlap;
        covered += overlap;
    }
    let hami_held = 0.3 * running_hours(hspan);
    let want_hami = (want_hami_eff / H as f64, 0.3 * ((hspan.1 - hspan.0) as f64 - covered) / H as f64);

    let (db, summary, _prom) = ingest(&om, start, hours, &["--source", "remote-read"]);
    let rows = stored(&db);
    let (_, _, gpu, eff, unmetered) = &rows["dcgm-pod"];
    println!(
        "DCGM: effective {eff} (truth {}, nearest sample {nearest}: {:.2e} off), unmetered {unmetered} (truth {})",
        want_dcgm.0,
        rel(nearest, want_dcgm.0),
        want_dcgm.1
    );
    assert!(rel(*gpu, 2.0) <= 1e-12, "{gpu} {summary}");
    assert!(rel(*eff, want_dcgm.0) <= 1e-12, "effective {eff} vs {}", want_dcgm.0);
    assert!(rel(*unmetered, want_dcgm.1) <= 1e-12, "unmetered {unmetered} vs {}", want_dcgm.1);
    assert!(rel(nearest, want_dcgm.0) > 1e-4, "the case tells the rules apart");
    let (kind, _, gpu, eff, unmetered) = &rows["hami-pod"];
    println!("HAMi: effective {eff} (truth {}), unmetered {unmetered} (truth {})", want_hami.0, want_hami.1);
    assert_eq!(kind, "hami");
    assert!(rel(*gpu, hami_held) <= 1e-12, "{gpu} vs {hami_held}");
    assert!(rel(*eff, want_hami.0) <= 1e-12, "effective {eff} vs {}", want_hami.0);
    assert!(rel(*unmetered, want_hami.1) <= 1e-9, "unmetered {unmetered} vs {}", want_hami.1);
}

/// MPS (SPEC §3): GFD says `mps`, 2 cards, 4 replicas under the default names; a pod of one replica holds a
/// quarter of a card, kind `mps`, whichever billing policy time-slicing has (MPS caps a replica at its share).
#[test]
fn mps_replicas_are_a_fraction_of_a_card() {
    let hours = 2;
    let (start, s, e) = window(hours);
    let mut om = Om::default();
    let node = "mps-a";
    node_capacity(&mut om, node, "nvidia_com_gpu", 8.0, (s, e));
    namespace(&mut om, "nlp", (s, e));
    let gfd = [
        ("node", node),
        ("label_nvidia_com_gpu_product", "NVIDIA-L40S"),
        ("label_nvidia_com_gpu_count", "2"),
        ("label_nvidia_com_gpu_replicas", "4"),
        ("label_nvidia_com_gpu_sharing_strategy", "mps"),
    ];
    om.every("kube_node_labels", &gfd, (s, e), 0, STEP, 1.0);
    let span = (s + 3 * STEP, e - 2 * STEP);
    pod(&mut om, "nlp", "mps-pod", node, &[("nvidia_com_gpu", 2.0)], span);
    let (db, summary, _prom) = ingest(&om, start, hours, &["--source", "remote-read"]);
    let (kind, fraction, gpu, _, unmetered) = &stored(&db)["mps-pod"];
    assert_eq!((kind.as_str(), fraction.as_str()), ("mps", "0.25"), "{summary}");
    let want = 2.0 * 0.25 * running_hours(span);
    assert!(rel(*gpu, want) <= 1e-12 && rel(*unmetered, want) <= 1e-12, "{gpu} / {unmetered} vs {want}");
    assert!(summary["anomalies"].get("unverified_node").is_none(), "{summary}");
    assert_eq!(db.psql("SELECT DISTINCT strategy, cards, replicas FROM node_facts_hourly").unwrap(), "mps|2|4");
}

/// A node advertising 8 `nvidia_com_gpu` with no DCGM and no GFD: nothing counts its cards, so a unit is taken
/// as a card (face value), never silently priced as a share, and the node is listed unverified in ingest health.
#[test]
fn a_node_nothing_counts_is_taken_at_face_value_and_flagged() {
    let hours = 2;
    let (start, s, e) = window(hours);
    let mut om = Om::default();
    let node = "bare-a";
    node_capacity(&mut om, node, "nvidia_com_gpu", 8.0, (s, e));
    namespace(&mut om, "nlp", (s, e));
    let span = (s + 3 * STEP, e - 2 * STEP);
    pod(&mut om, "nlp", "bare-pod", node, &[("nvidia_com_gpu", 1.0)], span);
    let (db, summary, _prom) = ingest(&om, start, hours, &["--source", "remote-read"]);
    let (kind, fraction, gpu, _, unmetered) = &stored(&db)["bare-pod"];
    assert_eq!((kind.as_str(), fraction.as_str()), ("whole", "1"), "{summary}");
    let want = running_hours(span);
    assert!(rel(*gpu, want) <= 1e-12 && rel(*unmetered, want) <= 1e-12, "{gpu} / {unmetered} vs {want}");
    assert_eq!(summary["anomalies"]["unverified_node"][node], hours, "{summary}");
    let facts =
        db.psql("SELECT DISTINCT cards IS NULL, cards_source, strategy, evidence FROM node_facts_hourly").unwrap();
    assert_eq!(facts, "t|face_value|whole|");
    let health = run_cardhour_ok(["health", "--format", "json"], &db.env());
    assert!(health.contains(node), "ingest health lists the unverified node: {health}");
}
