//! The memory side of the oversubscription report (SPEC §7) end to end on a real Postgres, checked by hand; and
//! the replica billing policy in the Excel workbook as the CSV and PDF show it (issue 16 item 3).
//!
//! Ground truth, by hand (cluster c1, 4 hours from 2026-10-05T00:00Z, every card an A100-80GB):
//! - node `hami`, 2 cards (8 card-hours): gpumem 20480 MiB (¼) with 30 cores, gpumem 40960 (½) with 50 cores,
//!   cores alone (20: HAMi's default, the whole memory), and a 30-core vGPU stored before the memory share (NULL):
//!   memory (¼ + ½ + 1) × 4 = 7 card-memory-hours, ratio 7 / 8 = 0.875, 0.3 × 4 = 1.2 card-hours unknown;
//!   compute (0.3 + 0.5 + 0.2 + 0.3) × 4 / 8 = 0.65.
//! - node `ts`, 1 card time-sliced 4 ways, 2 replicas held: each may use the whole memory: 2 × 4 = 8 over 4 = 2
//!   (compute 2).
//! - node `mps`, 1 card, 4 MPS replicas, each capped at ¼: 1 (compute 1).
//! - node `mig`, 1 card, two 3g.40gb stored before the memory share: derived from the profile, ½ each: 1
//!   (compute 2 × 3/7 = 6/7).
//! - cluster: (7 + 8 + 4 + 4) / 20 = 1.15, 1.2 card-hours unknown.
//!
//! And against the simulator's truth on the standard profile (MIG's mixed strategy with four profiles, renamed
//! time-slicing, HAMi with gpumem, a node without DCGM): `tests/shared_truth.rs` checks the shared profile.

use crate::common;

use std::collections::BTreeMap;
use std::io::Cursor;

use calamine::{Data, Reader, Xlsx};
use cardhour::metering::{CapacityRow, ContainerKey, HourOutput, OfferedSource, UsageRow, UtilSource};
use chrono::{DateTime, Duration, Utc};
use common::api::TestApi;
use common::{TestDb, TestPrometheus, run_cardhour_ok, simulate_run};
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

const A100: &str = "NVIDIA A100-SXM4-80GB";

struct Held {
    node: &'static str,
    pod: &'static str,
    kind: &'static str,
    units: f64,
    fraction: f64,
    mig_profile: Option<&'static str>,
    memory_share: Option<f64>,
}

const fn held(node: &'static str, pod: &'static str, kind: &'static str, units: f64, fraction: f64) -> Held {
    Held { node, pod, kind, units, fraction, mig_profile: None, memory_share: Some(1.0) }
}

fn rows() -> Vec<Held> {
    vec![
        Held { memory_share: Some(0.25), ..held("hami", "h-mib", "hami", 1.0, 0.3) },
        Held { memory_share: Some(0.5), ..held("hami", "h-half", "hami", 1.0, 0.5) },
        held("hami", "h-cores", "hami", 1.0, 0.2),
        Held { memory_share: None, ..held("hami", "h-old", "hami", 1.0, 0.3) },
        held("ts", "t", "timeslice", 2.0, 0.25),
        Held { memory_share: Some(0.25), ..held("mps", "m", "mps", 4.0, 0.25) },
        Held { mig_profile: Some("3g.40gb"), memory_share: None, ..held("mig", "g", "mig", 2.0, 3.0 / 7.0) },
    ]
}

fn usage(h: &Held) -> UsageRow {
    let gpu_seconds = h.units * h.fraction * 3600.0;
    UsageRow {
        key: ContainerKey { namespace: "vision-train".into(), pod: h.pod.into(), container: "main".into() },
        resource: "nvidia_com_gpu".into(),
        kind: h.kind,
        gpu_model: A100.into(),
        mig_profile: h.mig_profile.map(str::to_string),
        node: h.node.into(),
        units: h.units,
        fraction: h.fraction,
        memory_share: h.memory_share,
        gpu_seconds,
        effective_gpu_seconds: gpu_seconds * 0.5,
        unmetered_gpu_seconds: 0.0,
        bridged_gpu_seconds: 0.0,
        util_source: UtilSource::SmActive,
        peak_fb_used_mib: Some(8192.0),
        label_team: Some("vision".into()),
    }
}

fn cap(node: &str, cards: f64) -> CapacityRow {
    CapacityRow {
        node: node.into(),
        gpu_model: A100.into(),
        cards,
        card_seconds: cards * 3600.0,
        offered_card_seconds: cards * 3600.0,
        offered_source: OfferedSource::Allocatable,
    }
}

async fn store(pool: &PgPool, out: &HourOutput, from: &str, hours: i64) {
    let from: DateTime<Utc> = from.parse().unwrap();
    for h in 0..hours {
        let hour = from + Duration::hours(h);
        let mut tx = pool.begin().await.unwrap();
        cardhour::db::clusters::upsert(&mut tx, "c1", "http://127.0.0.1:9").await.unwrap();
        cardhour::db::usage::lock_hour(&mut tx, "c1", hour).await.unwrap();
        cardhour::db::usage::replace_hour(&mut tx, "c1", hour, out).await.unwrap();
        tx.commit().await.unwrap();
    }
}

fn num(v: &Value, field: &str) -> f64 {
    v[field].as_f64().unwrap_or_else(|| panic!("{field} missing in {v}"))
}

fn close(got: f64, want: f64, what: &str) {
    assert!((got - want).abs() <= 1e-9 * want.abs().max(1.0), "{what}: {got} vs {want}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_promised_per_node_and_cluster_by_hand() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    let out = HourOutput {
        interval_ms: Some(60_000),
        rows: rows().iter().map(usage).collect(),
        capacity: vec![cap("hami", 2.0), cap("ts", 1.0), cap("mps", 1.0), cap("mig", 1.0)],
        anomalies: Vec::new(),
        serving: Vec::new(),
        pending: Vec::new(),
        quota: Vec::new(),
    };
    store(&pool, &out, "2026-10-05T00:00:00Z", 4).await;
    let stored: Vec<(String, Option<f64>)> = sqlx::query_as(
        "SELECT pod, memory_share FROM gpu_usage_hourly WHERE hour = '2026-10-05T00:00:00Z' ORDER BY pod",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(stored.len(), 7);
    assert!(stored.contains(&("h-old".into(), None)) && stored.contains(&("h-mib".into(), Some(0.25))), "{stored:?}");

    let path = "/api/v1/reports/oversubscription?from=2026-10-04&to=2026-10-07&cluster=c1";
    let (status, report) = api.call(Method::GET, path, Some(&api.finance), None).await;
    assert_eq!(status, 200, "{report}");
    // (card-hours, memory promised, unknown, compute promised) per node, summed over the report's days
    let mut nodes: BTreeMap<String, [f64; 4]> = BTreeMap::new();
    for r in report["nodes"].as_array().unwrap() {
        let e = nodes.entry(r["node"].as_str().unwrap().to_string()).or_default();
        for (i, f) in ["card_hours", "promised_memory_card_hours", "unknown_memory_card_hours", "promised_card_hours"]
            .iter()
            .enumerate()
        {
            e[i] += num(r, f);
        }
        if r["card_hours"].as_f64().unwrap() > 0.0 {
            close(num(r, "memory_ratio"), num(r, "promised_memory_card_hours") / num(r, "card_hours"), "ratio");
        }
    }
    let want = [
        ("hami", [8.0, 7.0, 1.2, 5.2]),
        ("mig", [4.0, 4.0, 0.0, 4.0 * 6.0 / 7.0]),
        ("mps", [4.0, 4.0, 0.0, 4.0]),
        ("ts", [4.0, 8.0, 0.0, 8.0]),
    ];
    assert_eq!(nodes.keys().collect::<Vec<_>>(), want.iter().map(|w| w.0).collect::<Vec<_>>());
    for (node, w) in want {
        for i in 0..4 {
            close(nodes[node][i], w[i], &format!("{node} [{i}]"));
        }
    }
    let clusters = report["clusters"].as_array().unwrap();
    let sum = |f: &str| clusters.iter().map(|r| num(r, f)).sum::<f64>();
    close(sum("promised_memory_card_hours") / sum("card_hours"), 1.15, "cluster memory ratio");
    close(sum("unknown_memory_card_hours"), 1.2, "cluster unknown memory");
    let models = report["gpu_models"].as_array().unwrap();
    assert!(!models.is_empty() && models.iter().all(|r| r["gpu_model"] == A100), "{models:?}");

    // the CLI prints the same figures
    let text = run_cardhour_ok(
        ["oversubscription", "--from", "2026-10-04", "--to", "2026-10-07", "--cluster", "c1"],
        &[("DATABASE_URL", db.url.as_str())],
    );
    let hami = text.lines().find(|l| l.contains(" hami (")).unwrap_or_else(|| panic!("{text}"));
    assert!(hami.contains("memory     7.000 h  ratio   0.88") && hami.contains("memory unknown for 1.200 h"), "{hami}");
    let ts = text.lines().find(|l| l.contains(" ts (")).unwrap();
    assert!(ts.contains("memory     8.000 h  ratio   2.00") && !ts.contains("unknown"), "{ts}");
}

/// Every cell of every sheet, from A1.
fn sheets(bytes: &[u8]) -> BTreeMap<String, Vec<Vec<Data>>> {
    let mut wb: Xlsx<_> = calamine::open_workbook_from_rs(Cursor::new(bytes.to_vec())).unwrap();
    let names = wb.sheet_names().to_vec();
    names
        .iter()
        .map(|n| {
            let range = wb.worksheet_range(n).unwrap();
            let (h, w) = range.end().map_or((0, 0), |(r, c)| (r as usize + 1, c as usize + 1));
            let rows = (0..h)
                .map(|r| {
                    (0..w).map(|c| range.get_value((r as u32, c as u32)).cloned().unwrap_or(Data::Empty)).collect()
                })
                .collect();
            (n.clone(), rows)
        })
        .collect()
}

/// The value beside the first cell equal to `label` in column A.
fn beside<'a>(rows: &'a [Vec<Data>], label: &str) -> Option<&'a Data> {
    rows.iter().find(|r| matches!(&r[0], Data::String(s) if s == label)).map(|r| &r[1])
}

async fn xlsx(api: &TestApi, query: &str) -> Vec<u8> {
    let url = format!("{}/api/v1/exports/2026-10/bills.xlsx{query}", api.base);
    let resp = api.client.get(url).bearer_auth(&api.finance).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    resp.bytes().await.unwrap().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workbook_shows_the_replica_policy_like_the_csv() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    let r = json!({"gpu_model": "A100-80GB", "effective_from": "2026-09-01", "rate": "12.5"});
    assert_eq!(api.call(Method::POST, "/api/v1/rates", fin, Some(r)).await.0, 201);
    let m = json!({"namespace": "vision-train", "team_id": "vision", "valid_from": "2026-09-01"});
    assert_eq!(api.call(Method::POST, "/api/v1/mappings", fin, Some(m)).await.0, 201);
    // 1 card time-sliced 4 ways, vision holds 2 replicas (½ card) for 4 h: 2 card-hours, 25.00 by fraction; as whole
    // cards 8 replica-hours, 100.00: 100.00 − 25.00 = 75.00 recovered above the share (capacity 4 × 12.5 = 50.00)
    let out = HourOutput {
        interval_ms: Some(60_000),
        rows: vec![usage(&held("ts", "t", "timeslice", 2.0, 0.25))],
        capacity: vec![cap("ts", 1.0)],
        anomalies: Vec::new(),
        serving: Vec::new(),
        pending: Vec::new(),
        quota: Vec::new(),
    };
    store(&pool, &out, "2026-10-05T00:00:00Z", 4).await;

    // by fraction: the (default) setting is shown, the whole-card column empty, no over-recovery
    // (layout 4: the workbook in the glossary's words, zh-CN by default)
    let summary_sheet = cardhour::export::xlsx::summary_sheet(cardhour::glossary::Lang::Zh);
    let book = sheets(&xlsx(&api, "").await);
    let summary = &book[summary_sheet];
    assert_eq!(beside(summary, "时间片副本"), Some(&Data::String("按份额计费".into())));
    assert_eq!(beside(summary, "超额回收（副本按整卡计费）"), None);
    let team = &book["vision"];
    let header: Vec<String> = team[1].iter().map(|c| c.to_string()).collect();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("{name} in {header:?}"));
    let (whole, unverified, amount) = (col("whole_card_hours"), col("unverified_node"), col("amount"));
    assert_eq!(team[0][whole], Data::String("整卡计费副本卡时".into()));
    assert_eq!((&team[2][whole], &team[2][unverified]), (&Data::Empty, &Data::String("否".into())));
    assert_eq!(team[2][amount], Data::Float(25.0));

    // as whole cards from October: the setting, the replica-hours billed and the platform over-recovery
    run_cardhour_ok(
        ["policy", "set", "--cluster", "c1", "--from", "2026-10-01", "--replicas", "whole-card"],
        &[("DATABASE_URL", db.url.as_str())],
    );
    let book = sheets(&xlsx(&api, "").await);
    let summary = &book[summary_sheet];
    assert_eq!(beside(summary, "时间片副本"), Some(&Data::String("c1 自 2026-10-01 每个副本按整卡计费".into())));
    let over =
        summary.iter().find(|r| r[0] == Data::String("超额回收（副本按整卡计费）".into())).expect("over_recovery row");
    assert_eq!(over[2], Data::Float(75.0));
    let team = &book["vision"];
    assert_eq!((&team[2][whole], &team[2][amount]), (&Data::Float(8.0), &Data::Float(100.0)));
    // the CSV says the same
    let csv_url = format!("{}/api/v1/exports/2026-10/bills.csv", api.base);
    let csv = api.client.get(csv_url).bearer_auth(&api.finance).send().await.unwrap().text().await.unwrap();
    assert!(csv.contains("/replicas:c1:whole_card@2026-10-01") && csv.contains("over_recovery"), "{csv}");
}

#[test]
fn memory_promised_on_the_standard_simulation_equals_the_truth() {
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate_run(dir.path(), 56, 12, 60, 7);
    let truth = sim.truth_json();
    let prom = TestPrometheus::from_openmetrics(&sim.metrics).unwrap();
    let db = TestDb::migrated().unwrap();
    let (from, to) = (sim.start_arg(), sim.end_arg());
    run_cardhour_ok(
        ["ingest", "--cluster", "sim", "--prometheus", &prom.url, "--format", "json", "--from", &from, "--to", &to],
        &db.env(),
    );
    let report: Value = serde_json::from_str(&run_cardhour_ok(
        ["oversubscription", "--from", &from, "--to", &to, "--cluster", "sim", "--format", "json"],
        &db.env(),
    ))
    .unwrap();
    let mut got: BTreeMap<String, (f64, f64, f64)> = BTreeMap::new();
    for r in report["nodes"].as_array().unwrap() {
        let e = got.entry(r["node"].as_str().unwrap().to_string()).or_default();
        e.0 += num(r, "promised_memory_card_hours");
        e.1 += num(r, "unknown_memory_card_hours");
        e.2 += num(r, "card_hours");
    }
    let mut want: BTreeMap<String, f64> = BTreeMap::new();
    let mut kinds: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in truth["by_pod"].as_array().unwrap() {
        let node = p["node"].as_str().unwrap().to_string();
        *want.entry(node.clone()).or_default() += num(p, "promised_memory_card_hours");
        kinds.entry(node).or_default().push(p["kind"].as_str().unwrap().to_string());
    }
    for k in ["whole", "mig", "timeslice", "hami"] {
        assert!(kinds.values().flatten().any(|x| x == k), "{k} simulated");
    }
    assert_eq!(want.len(), 7, "{want:?}");
    let (mut figures, mut err) = (Vec::new(), 0.0f64);
    for (node, w) in &want {
        let (memory, unknown, card_hours) = got[node];
        assert!(*w > 0.0);
        assert!((memory - w).abs() <= 1e-9 * w, "{node}: memory promised {memory} vs the truth's {w}");
        assert_eq!(unknown, 0.0, "{node}");
        err = err.max((memory - w).abs() / w);
        figures.push(format!("{node} {:.3}", memory / card_hours));
    }
    println!("memory ratio per node (standard profile, 12 h): {}; vs the truth {err:.2e}", figures.join(", "));
}
