//! What a close freezes (SPEC §6): the fixture month of layout 1, written by the code before layouts existed.
//!
//! `write_layout1_fixture` (ignored) seeds two months, closes them through the API and writes October's stored
//! snapshot and every representation of it to `tests/fixtures/layout1/`. It was run once on the release that
//! stored version-1 snapshots; its output is the golden truth later layouts must keep rendering byte for byte.

mod common;

use std::path::PathBuf;
use std::process::Command;

use cardhour::metering::{CapacityRow, ContainerKey, HourOutput, UsageRow, UtilSource};
use chrono::{DateTime, Duration, Utc};
use common::api::TestApi;
use reqwest::Method;
use serde_json::json;
use sqlx::PgPool;

const A100: &str = "NVIDIA A100-SXM4-80GB";
const H100: &str = "NVIDIA H100 80GB HBM3";
const L40S: &str = "NVIDIA L40S";

fn fixtures() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/layout1"))
}

/// A pod's hour: `cards` of `model` at `util` (0–1) holding 8 GiB.
fn row(namespace: &str, pod: &str, team: &str, model: &str, cards: f64, util: f64) -> UsageRow {
    UsageRow {
        key: ContainerKey { namespace: namespace.into(), pod: pod.into(), container: "main".into() },
        resource: "nvidia_com_gpu".into(),
        kind: "whole",
        gpu_model: model.into(),
        mig_profile: None,
        node: format!("node-{}", if model == A100 { "a" } else { "h" }),
        units: cards,
        fraction: 1.0,
        gpu_seconds: cards * 3600.0,
        effective_gpu_seconds: cards * 3600.0 * util,
        unmetered_gpu_seconds: 0.0,
        util_source: UtilSource::SmActive,
        peak_fb_used_mib: Some(8192.0),
        label_team: Some(team.into()),
    }
}

/// Stores `hours` hours from `from` of `rows`, with two 8-card nodes (A100, H100) as capacity.
async fn store(pool: &PgPool, from: &str, hours: i64, rows: &[UsageRow]) {
    let from: DateTime<Utc> = from.parse().unwrap();
    for h in 0..hours {
        let out = HourOutput {
            interval_ms: Some(60_000),
            rows: rows.to_vec(),
            capacity: [("node-a", A100), ("node-h", H100)]
                .map(|(node, model)| CapacityRow {
                    node: node.into(),
                    gpu_model: model.into(),
                    cards: 8.0,
                    card_seconds: 8.0 * 3600.0,
                })
                .to_vec(),
            ..HourOutput::default()
        };
        let hour = from + Duration::hours(h);
        let mut tx = pool.begin().await.unwrap();
        cardhour::db::clusters::upsert(&mut tx, "c1", "http://127.0.0.1:9").await.unwrap();
        cardhour::db::usage::lock_hour(&mut tx, "c1", hour).await.unwrap();
        cardhour::db::usage::replace_hour(&mut tx, "c1", hour, &out).await.unwrap();
        tx.commit().await.unwrap();
    }
}

/// Rates and mappings: A100 12.5; H100 20, then 22.75 from 2026-10-10; L40S has no rate (unpriced).
async fn seed_rates(api: &TestApi) {
    let fin = Some(api.finance.as_str());
    for (model, from, rate) in
        [("A100-80GB", "2026-09-01", "12.5"), ("H100-80GB", "2026-09-01", "20"), ("H100-80GB", "2026-10-10", "22.75")]
    {
        let r = json!({"gpu_model": model, "effective_from": from, "rate": rate});
        assert_eq!(api.call(Method::POST, "/api/v1/rates", fin, Some(r)).await.0, 201);
    }
    for (ns, team) in [("vision-train", "vision"), ("nlp-prod", "nlp"), ("nlp-llm", "nlp"), ("nlp-dev", "nlp")] {
        let m = json!({"namespace": ns, "team_id": team, "valid_from": "2026-09-01"});
        assert_eq!(api.call(Method::POST, "/api/v1/mappings", fin, Some(m)).await.0, 201);
    }
}

/// September's three hours: vision 1 A100, nlp 2 A100 (`nlp_cards`).
async fn seed_september(pool: &PgPool, nlp_cards: f64) {
    let rows = [
        row("vision-train", "vision-idle-pod", "vision", A100, 1.0, 0.01),
        row("nlp-prod", "nlp-idle-pod", "nlp", A100, nlp_cards, 0.01),
    ];
    store(pool, "2026-09-20T00:00:00Z", 3, &rows).await;
}

/// October: 7 hours on the 5th (two idle A100 pods, 4 busy H100) and 3 on the 12th (after the H100 rate change:
/// 4 busy H100 of nlp, 2 H100 of vision at 50 %, an unpriced L40S).
async fn seed_october(pool: &PgPool) {
    let fifth = [
        row("vision-train", "vision-idle-pod", "vision", A100, 1.0, 0.01),
        row("nlp-prod", "nlp-idle-pod", "nlp", A100, 3.0, 0.01),
        row("nlp-llm", "nlp-llm-0", "nlp", H100, 4.0, 0.6),
    ];
    store(pool, "2026-10-05T00:00:00Z", 7, &fifth).await;
    let twelfth = [
        row("nlp-llm", "nlp-llm-0", "nlp", H100, 4.0, 0.6),
        row("vision-train", "vision-eval", "vision", H100, 2.0, 0.5),
        row("nlp-dev", "nlp-dev-0", "nlp", L40S, 1.0, 0.3),
    ];
    store(pool, "2026-10-12T00:00:00Z", 3, &twelfth).await;
}

fn pdftotext(pdf: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.pdf");
    std::fs::write(&path, pdf).unwrap();
    let out = Command::new("pdftotext").arg("-layout").arg(&path).arg("-").output().expect("pdftotext (poppler-utils)");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

async fn get(api: &TestApi, token: &str, path: &str) -> Vec<u8> {
    let resp = api.client.get(format!("{}{path}", api.base)).bearer_auth(token).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    resp.bytes().await.unwrap().to_vec()
}

/// The representations of October compared with the golden files: (file, token, path, is a PDF).
fn representations(api: &TestApi) -> Vec<(&'static str, String, &'static str, bool)> {
    let (fin, lead) = (api.finance.clone(), api.lead.clone());
    vec![
        ("month.json", fin.clone(), "/api/v1/bills/2026-10", false),
        ("month-lead.json", lead.clone(), "/api/v1/bills/2026-10", false),
        ("team-vision.json", fin.clone(), "/api/v1/bills/2026-10/teams/vision", false),
        ("team-nlp.json", fin.clone(), "/api/v1/bills/2026-10/teams/nlp", false),
        ("bills.csv", fin.clone(), "/api/v1/exports/2026-10/bills.csv", false),
        ("bills-nlp.csv", fin.clone(), "/api/v1/exports/2026-10/bills.csv?team=nlp", false),
        ("bills-lead.csv", lead.clone(), "/api/v1/exports/2026-10/bills.csv", false),
        ("statements.txt", fin, "/api/v1/exports/2026-10/statements.pdf", true),
        ("statements-lead.txt", lead, "/api/v1/exports/2026-10/statements.pdf", true),
    ]
}

/// Run once, on the release that stored version-1 snapshots:
/// `cargo test --test frozen_layout -- --ignored write_layout1_fixture`.
#[sqlx::test]
#[ignore = "writes the layout-1 fixture; only meaningful on the code that closed months as version 1"]
async fn write_layout1_fixture(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    seed_rates(&api).await;
    seed_september(&pool, 2.0).await;
    let reason = json!({"override": {"reason": "fixture: no ingest run behind these hours"}});
    let (status, body) = api.call(Method::POST, "/api/v1/bills/2026-09/close", fin, Some(reason)).await;
    assert_eq!(status, 201, "{body}");
    // September changes after its close: October restates it
    seed_september(&pool, 3.0).await;
    seed_october(&pool).await;
    let close = json!({"mode": "chargeback", "unallocated": "spread_proportionally",
        "override": {"reason": "固定样例 fixture: no ingest run behind these hours"}});
    let (status, body) = api.call(Method::POST, "/api/v1/bills/2026-10/close", fin, Some(close)).await;
    assert_eq!(status, 201, "{body}");

    let dir = fixtures();
    std::fs::create_dir_all(&dir).unwrap();
    let (snapshot, closed_at, closed_by): (String, String, String) = sqlx::query_as(
        "SELECT snapshot::text, to_char(closed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"'), closed_by
         FROM closed_months WHERE month = '2026-10'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    std::fs::write(dir.join("snapshot.json"), snapshot + "\n").unwrap();
    std::fs::write(dir.join("closed.json"), json!({"closed_at": closed_at, "closed_by": closed_by}).to_string() + "\n")
        .unwrap();
    for (file, token, path, pdf) in representations(&api) {
        let body = get(&api, &token, path).await;
        let body = if pdf { pdftotext(&body).into_bytes() } else { body };
        std::fs::write(dir.join(file), body).unwrap();
    }
}
