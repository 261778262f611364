//! The billing policy for time-sliced replicas (issue 16 item 3) and unverified nodes on the bill (item 1), end
//! to end on a real Postgres: the same month billed by fraction and as whole cards side by side, the policy on
//! the statement (API JSON, CSV, PDF), and lines held on an unverified node marked.
//!
//! Ground truth, by hand (A100 at 12.5 yuan per card-hour, 4 hours on 2026-10-05, cluster c1):
//! - node `ts`: 2 cards time-sliced into 4 replicas each; vision's pod holds 1 replica (¼ card), nlp's 2 (½ card);
//!   node `mps`: 1 card, MPS with 4 replicas, nlp's pod holds 1 (¼ card); node `u`: 1 card nothing counts
//!   (unverified), vision's pod holds it whole.
//! - Fraction: vision timeslice 1 card-hour = 12.50, nlp timeslice 2 = 25.00, nlp mps 1 = 12.50, vision whole on
//!   `u` 4 = 50.00 → allocated 100.00; capacity (2 + 1 + 1) × 4 = 16 card-hours = 200.00; unallocated 100.00.
//! - Whole card (c1 from 2026-10-01): vision timeslice 4 replica-hours = 50.00 (4 × 12.50), nlp 8 = 100.00
//!   (4 × 25.00); MPS and whole lines unchanged → allocated 212.50; over-recovery 212.50 − 100.00 = 112.50;
//!   unallocated still 100.00 (capacity is allocated physically, never negative).

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;

use cardhour::metering::{
    Anomaly, AnomalyKind, CapacityRow, ContainerKey, HourOutput, OfferedSource, UsageRow, UtilSource,
};
use chrono::{DateTime, Duration, Utc};
use common::api::TestApi;
use common::{TestDb, run_cardhour_ok};
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

const A100: &str = "NVIDIA A100-SXM4-80GB";

fn row(ns: &str, pod: &str, team: &str, node: &str, kind: &'static str, units: f64, fraction: f64) -> UsageRow {
    UsageRow {
        key: ContainerKey { namespace: ns.into(), pod: pod.into(), container: "main".into() },
        resource: "nvidia_com_gpu".into(),
        kind,
        gpu_model: A100.into(),
        mig_profile: None,
        node: node.into(),
        units,
        fraction,
        memory_share: Some(1.0),
        gpu_seconds: units * fraction * 3600.0,
        effective_gpu_seconds: units * fraction * 3600.0 * 0.5,
        unmetered_gpu_seconds: 0.0,
        bridged_gpu_seconds: 0.0,
        util_source: UtilSource::SmActive,
        peak_fb_used_mib: Some(8192.0),
        label_team: Some(team.into()),
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

async fn store(pool: &PgPool, from: &str, hours: i64, unverified: bool) {
    let rows = vec![
        row("vision-train", "v-ts", "vision", "ts", "timeslice", 1.0, 0.25),
        row("nlp-prod", "n-ts", "nlp", "ts", "timeslice", 2.0, 0.25),
        row("nlp-prod", "n-mps", "nlp", "mps", "mps", 1.0, 0.25),
        row("vision-train", "v-u", "vision", "u", "whole", 1.0, 1.0),
    ];
    let anomalies = if unverified {
        vec![Anomaly { kind: AnomalyKind::UnverifiedNode, subject: "u".into(), count: 1 }]
    } else {
        Vec::new()
    };
    store_hours(pool, from, hours, rows, vec![cap("ts", 2.0), cap("mps", 1.0), cap("u", 1.0)], anomalies).await;
}

/// The same rows, capacity and anomalies in each of `hours` hours from `from`, written as the ingest writes an hour.
async fn store_hours(
    pool: &PgPool,
    from: &str,
    hours: i64,
    rows: Vec<UsageRow>,
    capacity: Vec<CapacityRow>,
    anomalies: Vec<Anomaly>,
) {
    let from: DateTime<Utc> = from.parse().unwrap();
    for h in 0..hours {
        let out = HourOutput {
            interval_ms: Some(60_000),
            rows: rows.clone(),
            capacity: capacity.clone(),
            anomalies: anomalies.clone(),
            serving: Vec::new(),
            pending: Vec::new(),
            quota: Vec::new(),
        };
        let hour = from + Duration::hours(h);
        let mut tx = pool.begin().await.unwrap();
        cardhour::db::clusters::upsert(&mut tx, "c1", "http://127.0.0.1:9").await.unwrap();
        cardhour::db::usage::lock_hour(&mut tx, "c1", hour).await.unwrap();
        cardhour::db::usage::replace_hour(&mut tx, "c1", hour, &out).await.unwrap();
        tx.commit().await.unwrap();
    }
}

async fn seed(api: &TestApi) {
    let fin = Some(api.finance.as_str());
    let r = json!({"gpu_model": "A100-80GB", "effective_from": "2026-09-01", "rate": "12.5"});
    assert_eq!(api.call(Method::POST, "/api/v1/rates", fin, Some(r)).await.0, 201);
    for (ns, team) in [("vision-train", "vision"), ("nlp-prod", "nlp")] {
        let m = json!({"namespace": ns, "team_id": team, "valid_from": "2026-09-01"});
        assert_eq!(api.call(Method::POST, "/api/v1/mappings", fin, Some(m)).await.0, 201);
    }
    store(&api.pool, "2026-10-05T00:00:00Z", 4, true).await;
}

async fn get(api: &TestApi, path: &str) -> Vec<u8> {
    let resp = api.client.get(format!("{}{path}", api.base)).bearer_auth(&api.finance).send().await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.bytes().await.unwrap().to_vec();
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    body
}

async fn get_json(api: &TestApi, path: &str) -> Value {
    serde_json::from_slice(&get(api, path).await).unwrap()
}

/// (team, namespace, kind) → the line's JSON, from the team statements.
async fn lines(api: &TestApi, query: &str) -> BTreeMap<(String, String, String), Value> {
    let mut out = BTreeMap::new();
    for team in ["nlp", "vision"] {
        let st = get_json(api, &format!("/api/v1/bills/2026-10/teams/{team}{query}")).await;
        for l in st["lines"].as_array().unwrap() {
            let key = (team.to_string(), l["namespace"].as_str().unwrap().into(), l["kind"].as_str().unwrap().into());
            assert!(out.insert(key, l.clone()).is_none(), "one line per team, namespace and kind");
        }
    }
    out
}

fn amount(l: &Value) -> rust_decimal::Decimal {
    l["amount"].as_str().unwrap().parse().unwrap()
}

fn csv_rows(bytes: &[u8]) -> Vec<BTreeMap<String, String>> {
    let body = bytes.strip_prefix("\u{feff}".as_bytes()).expect("UTF-8 with BOM");
    csv::Reader::from_reader(body).deserialize().map(Result::unwrap).collect()
}

fn pdftotext(pdf: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.pdf");
    std::fs::write(&path, pdf).unwrap();
    let out = Command::new("pdftotext").arg("-layout").arg(&path).arg("-").output().expect("pdftotext (poppler-utils)");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fraction_and_whole_card_side_by_side_with_the_policy_on_the_statement() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;

    // by fraction (nothing set): the physical shares
    let fraction = lines(&api, "").await;
    let key = |t: &str, ns: &str, k: &str| (t.to_string(), ns.to_string(), k.to_string());
    let expected_fraction = [
        (key("nlp", "nlp-prod", "mps"), "12.50"),
        (key("nlp", "nlp-prod", "timeslice"), "25.00"),
        (key("vision", "vision-train", "timeslice"), "12.50"),
        (key("vision", "vision-train", "whole"), "50.00"),
    ];
    assert_eq!(fraction.len(), expected_fraction.len());
    for (k, a) in &expected_fraction {
        assert_eq!(fraction[k]["amount"], *a, "{k:?}");
        assert!(fraction[k].get("whole_card_hours").is_none());
    }
    let month = get_json(&api, "/api/v1/bills/2026-10").await;
    assert_eq!(month["policy"]["replicas"], json!([]), "time-sliced usage: the (default) policy is shown");
    assert_eq!((month["allocated"].as_str(), month["unallocated"].as_str()), (Some("100.00"), Some("100.00")));
    assert!(month.get("over_recovery").is_none());

    // the draft previewed as whole cards is what the dated setting then bills
    let preview = lines(&api, "?replicas=whole_card").await;
    run_cardhour_ok(
        ["policy", "set", "--cluster", "c1", "--from", "2026-10-01", "--replicas", "whole-card"],
        &[("DATABASE_URL", db.url.as_str())],
    );
    let whole = lines(&api, "").await;
    assert_eq!(preview.keys().collect::<Vec<_>>(), whole.keys().collect::<Vec<_>>());
    for (k, l) in &whole {
        assert_eq!(preview[k]["amount"], l["amount"], "{k:?}");
    }

    // side by side: exactly the replicas factor (4) on the time-sliced lines, nothing else moves; GPU-hours stay
    for (k, f) in &fraction {
        let w = &whole[k];
        assert_eq!(w["card_hours"], f["card_hours"], "GPU-hours are physical: {k:?}");
        if k.2 == "timeslice" {
            assert_eq!(amount(w), amount(f) * rust_decimal::Decimal::from(4), "{k:?}");
            assert_eq!(w["whole_card_hours"].as_str().unwrap().parse::<f64>().unwrap(), {
                f["card_hours"].as_str().unwrap().parse::<f64>().unwrap() * 4.0
            });
        } else {
            assert_eq!(w["amount"], f["amount"], "MPS and whole cards are never billed as whole cards: {k:?}");
        }
    }
    assert_eq!(whole[&key("vision", "vision-train", "timeslice")]["amount"], "50.00");
    assert_eq!(whole[&key("nlp", "nlp-prod", "timeslice")]["amount"], "100.00");

    let month = get_json(&api, "/api/v1/bills/2026-10").await;
    assert_eq!(
        month["policy"]["replicas"],
        json!([{"cluster": "c1", "pool": null, "from": "2026-10-01", "policy": "whole_card"}])
    );
    assert_eq!(month["allocated"], "212.50");
    assert_eq!(month["over_recovery"], "112.50", "212.50 billed − 100.00 the cards' cost");
    assert_eq!(month["unallocated"], "100.00", "capacity stays physical: not 200.00 − 212.50");
    assert_eq!(month["capacity_cost"], "200.00");

    // the CSV: the policy on every row, the replica-hours beside the amount, the over-recovery its own row
    let csv = csv_rows(&get(&api, "/api/v1/exports/2026-10/bills.csv").await);
    assert!(!csv.is_empty());
    assert!(csv.iter().all(|r| r["policy"] == "showback/kept_by_platform/replicas:c1:whole_card@2026-10-01"));
    let ts: Vec<_> = csv.iter().filter(|r| r["line_type"] == "usage" && r["kind"] == "timeslice").collect();
    assert_eq!(
        ts.iter()
            .map(|r| (r["team"].as_str(), r["amount"].as_str(), r["whole_card_hours"].as_str()))
            .collect::<Vec<_>>(),
        // layout 4: card-hours with 6 decimals in every card-hour column
        [("nlp", "100.00", "8.000000"), ("vision", "50.00", "4.000000")]
    );
    let over: Vec<_> = csv.iter().filter(|r| r["line_type"] == "over_recovery").map(|r| r["amount"].as_str()).collect();
    assert_eq!(over, ["112.50"]);
    let unverified: Vec<_> = csv
        .iter()
        .filter(|r| r["unverified_node"] == "true")
        .map(|r| (r["team"].as_str(), r["kind"].as_str()))
        .collect();
    assert_eq!(unverified, [("vision", "whole")]);

    // the PDF: the policy in words, the over-recovery line, the marks
    let text = pdftotext(&get(&api, "/api/v1/exports/2026-10/statements.pdf?lang=en").await);
    // layout 4: the glossary's words for the replica policy
    assert!(text.contains("time-sliced replicas: c1 from 2026-10-01 each replica billed as a whole card"), "{text}");
    assert!(text.contains("Over-recovery (replicas billed as whole cards)") && text.contains("¥112.50"), "{text}");
    assert!(text.contains("(whole card)") && text.contains("Unverified node"), "{text}");

    // the draft previewed by fraction again, whatever the setting says: the first figures
    let back = lines(&api, "?replicas=fraction").await;
    for (k, f) in &fraction {
        assert_eq!(back[k]["amount"], f["amount"], "{k:?}");
    }
    // a bad policy name is refused on the field, nothing computed
    let resp = api
        .client
        .get(format!("{}/api/v1/bills/2026-10?replicas=whole", api.base))
        .bearer_auth(&api.finance)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 422);
    let body: Value = resp.json().await.unwrap();
    assert!(body.to_string().contains("replicas"), "{body}");
}

/// A line held on a node whose cards nothing counts is marked in the API; the same line on a verified node is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_on_an_unverified_node_are_marked() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let marked = lines(&api, "").await;
    let flagged: Vec<_> =
        marked.iter().filter(|(_, l)| l["unverified_node"] == true).map(|(k, _)| k.2.as_str()).collect();
    assert_eq!(flagged, ["whole"]);
    // the node verified (re-ingested without the anomaly): no mark left
    store(&api.pool, "2026-10-05T00:00:00Z", 4, false).await;
    let clean = lines(&api, "").await;
    assert!(!clean.is_empty() && clean.values().all(|l| l.get("unverified_node").is_none()));
}

/// Node `u`'s usage as metered once configured with 4 replicas per card (what `cardhour nodes set --replicas 4`
/// makes the next ingest store): its 1 unit is a quarter of a card, time-sliced, and the node has 1 card of 4
/// units instead of 4 cards at face value.
async fn store_configured(pool: &PgPool, from: &str, hours: i64) {
    let from: DateTime<Utc> = from.parse().unwrap();
    for h in 0..hours {
        let out = HourOutput {
            interval_ms: Some(60_000),
            rows: vec![row("vision-train", "v-u", "vision", "u", "timeslice", 1.0, 0.25)],
            capacity: vec![cap("u", 1.0)],
            anomalies: Vec::new(),
            serving: Vec::new(),
            pending: Vec::new(),
            quota: Vec::new(),
        };
        let hour = from + Duration::hours(h);
        let mut tx = pool.begin().await.unwrap();
        cardhour::db::usage::lock_hour(&mut tx, "c1", hour).await.unwrap();
        cardhour::db::usage::replace_hour(&mut tx, "c1", hour, &out).await.unwrap();
        tx.commit().await.unwrap();
    }
}

/// Node `u` at face value: 4 units taken as 4 cards, vision's pod holding one as a whole card, listed unverified.
async fn store_face_value(pool: &PgPool, from: &str, hours: i64) {
    let from: DateTime<Utc> = from.parse().unwrap();
    for h in 0..hours {
        let out = HourOutput {
            interval_ms: Some(60_000),
            rows: vec![row("vision-train", "v-u", "vision", "u", "whole", 1.0, 1.0)],
            capacity: vec![cap("u", 4.0)],
            anomalies: vec![Anomaly { kind: AnomalyKind::UnverifiedNode, subject: "u".into(), count: 1 }],
            serving: Vec::new(),
            pending: Vec::new(),
            quota: Vec::new(),
        };
        let hour = from + Duration::hours(h);
        let mut tx = pool.begin().await.unwrap();
        cardhour::db::clusters::upsert(&mut tx, "c1", "http://127.0.0.1:9").await.unwrap();
        cardhour::db::usage::lock_hour(&mut tx, "c1", hour).await.unwrap();
        cardhour::db::usage::replace_hour(&mut tx, "c1", hour, &out).await.unwrap();
        tx.commit().await.unwrap();
    }
}

/// Configuring an unverified node after September closed: October (open) is restated — its line no longer marked,
/// a quarter of the hours — and September's restatement shows on October, while every export of September (API
/// JSON, CSV, PDF) stays byte-identical. By hand (12.5 yuan): at face value 4 h × 1 card = 50.00 per month; once
/// configured 4 h × ¼ = 1 card-hour = 12.50, so September is restated by −3 card-hours and −37.50.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuring_a_node_restates_the_open_month_and_leaves_a_closed_one_byte_identical() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    let r = json!({"gpu_model": "A100-80GB", "effective_from": "2026-08-01", "rate": "12.5"});
    assert_eq!(api.call(Method::POST, "/api/v1/rates", fin, Some(r)).await.0, 201);
    let m = json!({"namespace": "vision-train", "team_id": "vision", "valid_from": "2026-08-01"});
    assert_eq!(api.call(Method::POST, "/api/v1/mappings", fin, Some(m)).await.0, 201);
    store_face_value(&pool, "2026-09-05T00:00:00Z", 4).await;
    store_face_value(&pool, "2026-10-05T00:00:00Z", 4).await;
    let close = json!({"mode": "showback", "unallocated": "kept_by_platform",
                       "override": {"reason": "node u unverified, configured after the close"}});
    let (status, body) = api.call(Method::POST, "/api/v1/bills/2026-09/close", fin, Some(close)).await;
    assert_eq!(status, 201, "{body}");

    let exports = [
        "/api/v1/bills/2026-09",
        "/api/v1/bills/2026-09/teams/vision",
        "/api/v1/exports/2026-09/bills.csv",
        "/api/v1/exports/2026-09/statements.pdf",
        "/api/v1/exports/2026-09/statements.pdf?lang=en",
        "/api/v1/exports/2026-09/bills.xlsx",
    ];
    let mut before = Vec::new();
    for p in exports {
        before.push(get(&api, p).await);
    }
    let sept = get_json(&api, "/api/v1/bills/2026-09/teams/vision").await;
    assert_eq!(
        (sept["lines"][0]["amount"].as_str(), &sept["lines"][0]["unverified_node"]),
        (Some("50.00"), &json!(true))
    );
    let oct = get_json(&api, "/api/v1/bills/2026-10/teams/vision").await;
    assert_eq!(oct["lines"][0]["unverified_node"], true);
    assert_eq!(oct["lines"][0]["amount"], "50.00");

    // configured, then the hours ingested again as the metering now reads them
    run_cardhour_ok(
        ["nodes", "set", "--cluster", "c1", "--node", "u", "--replicas", "4", "--sharing", "time-slicing"],
        &[("DATABASE_URL", db.url.as_str())],
    );
    store_configured(&pool, "2026-09-05T00:00:00Z", 4).await;
    store_configured(&pool, "2026-10-05T00:00:00Z", 4).await;

    for (p, was) in exports.iter().zip(&before) {
        assert!(get(&api, p).await == *was, "{p} changed after the close");
    }
    let oct = get_json(&api, "/api/v1/bills/2026-10/teams/vision").await;
    let lines = oct["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 1, "{oct}");
    assert_eq!((lines[0]["kind"].as_str(), lines[0]["amount"].as_str()), (Some("timeslice"), Some("12.50")));
    assert!(lines[0].get("unverified_node").is_none(), "configured: no longer marked");
    let restated = oct["restatements"].as_array().unwrap();
    let sum: rust_decimal::Decimal =
        restated.iter().map(|r| r["amount_delta"].as_str().unwrap().parse::<rust_decimal::Decimal>().unwrap()).sum();
    assert!(!restated.is_empty() && restated.iter().all(|r| r["original_month"] == "2026-09"), "{oct}");
    assert_eq!(sum.to_string(), "-37.50", "September: 12.50 now, 50.00 closed");
}

/// Two time-sliced nodes, one of them in a pool billed as whole cards: only its lines move, by the replicas factor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_pools_setting_wins_over_the_clusters_on_its_nodes_only() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    let r = json!({"gpu_model": "A100-80GB", "effective_from": "2026-09-01", "rate": "12.5"});
    assert_eq!(api.call(Method::POST, "/api/v1/rates", fin, Some(r)).await.0, 201);
    for (ns, team) in [("vision-train", "vision"), ("nlp-prod", "nlp")] {
        let m = json!({"namespace": ns, "team_id": team, "valid_from": "2026-09-01"});
        assert_eq!(api.call(Method::POST, "/api/v1/mappings", fin, Some(m)).await.0, 201);
    }
    let rows = vec![
        row("vision-train", "v-ts", "vision", "ts-a", "timeslice", 1.0, 0.25),
        row("nlp-prod", "n-ts", "nlp", "ts-b", "timeslice", 1.0, 0.25),
    ];
    store_hours(&pool, "2026-10-05T00:00:00Z", 4, rows, vec![cap("ts-a", 1.0), cap("ts-b", 1.0)], Vec::new()).await;
    let env = [("DATABASE_URL", db.url.as_str())];
    // 1 replica of 4 for 4 hours at ¥12.5: ¥12.50 by fraction, ¥50.00 as a whole card
    let before = lines(&api, "").await;
    let amounts = |l: &BTreeMap<(String, String, String), Value>| -> Vec<String> {
        l.values().map(|v| v["amount"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(amounts(&before), ["12.50", "12.50"], "nlp, vision by fraction");
    run_cardhour_ok(["policy", "pool", "--cluster", "c1", "--node", "ts-b", "--pool", "big"], &env);
    run_cardhour_ok(
        ["policy", "set", "--cluster", "c1", "--pool", "big", "--from", "2026-10-01", "--replicas", "whole-card"],
        &env,
    );
    let after = lines(&api, "").await;
    assert_eq!(amounts(&after), ["50.00", "12.50"], "nlp's node is in the pool, vision's is not");
    let month = get_json(&api, "/api/v1/bills/2026-10").await;
    let settings = month["policy"]["replicas"].as_array().unwrap();
    assert!(
        settings.iter().any(|s| s["pool"] == "big" && s["policy"] == "whole_card"),
        "the pool's setting on the statement: {month}"
    );
    // out of the pool again: by fraction again
    run_cardhour_ok(["policy", "pool", "--cluster", "c1", "--node", "ts-b"], &env);
    assert_eq!(amounts(&lines(&api, "").await), ["12.50", "12.50"]);
}
