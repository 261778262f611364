//! Months of data, some closed, for the storage tests (tests/storage_months.rs, tests/backup_restore.rs): hours
//! stored as the ingest stores them, rates and mappings through the API, months closed through the API, and every
//! representation of a closed month fetched as a client gets it.

use chrono::{DateTime, Duration, Utc};
use reqwest::Method;
use serde_json::json;
use sqlx::PgPool;

use super::api::{TestApi, full_node, row};
use cardhour::metering::HourOutput;

pub const MODEL: &str = super::api::SEED_MODEL;

/// Stores `hours` hours from `from` (UTC): vision 1 A100 and nlp `nlp_cards`, two 8-card nodes, as the ingest does
/// (a batch per call, under the hours' locks).
pub async fn store(pool: &PgPool, from: &str, hours: i64, nlp_cards: f64) -> Result<(), sqlx::Error> {
    store_with(pool, from, hours, nlp_cards, false).await
}

/// [`store`], with a time-sliced replica of vision's besides when `timeslice` (a quarter of a card: 900 s an hour,
/// 3,600 replica-seconds, which a whole-card replica policy bills).
pub async fn store_with(
    pool: &PgPool,
    from: &str,
    hours: i64,
    nlp_cards: f64,
    timeslice: bool,
) -> Result<(), sqlx::Error> {
    let from: DateTime<Utc> = from.parse().unwrap();
    let mut rows = vec![row("vision-train", "vision-pod", "vision", 1.0), row("nlp-prod", "nlp-pod", "nlp", nlp_cards)];
    if timeslice {
        let mut r = row("vision-train", "vision-shared", "vision", 1.0);
        r.kind = "timeslice";
        r.fraction = 0.25;
        r.gpu_seconds = 900.0;
        r.effective_gpu_seconds = 9.0;
        rows.push(r);
    }
    let out = HourOutput {
        interval_ms: Some(60_000),
        rows,
        capacity: vec![full_node("node-a", MODEL), full_node("node-b", MODEL)],
        ..HourOutput::default()
    };
    let hours: Vec<DateTime<Utc>> = (0..hours).map(|h| from + Duration::hours(h)).collect();
    let batch: Vec<cardhour::db::usage::HourRows> =
        hours.iter().map(|&hour| cardhour::db::usage::HourRows { hour, out: &out }).collect();
    cardhour::db::usage::ensure_month_partitions(pool, &hours).await?; // as the ingest does, before its transaction
    let mut tx = pool.begin().await?;
    cardhour::db::clusters::upsert(&mut tx, "c1", "http://127.0.0.1:9").await?;
    for &h in &hours {
        cardhour::db::usage::lock_hour(&mut tx, "c1", h).await?;
    }
    cardhour::db::usage::replace_hours(&mut tx, "c1", &batch).await?;
    tx.commit().await
}

/// A rate (A100 12.5 from September) and the two mappings.
pub async fn rates_and_mappings(api: &TestApi) {
    let fin = Some(api.finance.as_str());
    let rate = json!({"gpu_model": "A100-80GB", "effective_from": "2026-09-01", "rate": "12.5"});
    assert_eq!(api.call(Method::POST, "/api/v1/rates", fin, Some(rate)).await.0, 201);
    for (ns, team) in [("vision-train", "vision"), ("nlp-prod", "nlp")] {
        let m = json!({"namespace": ns, "team_id": team, "valid_from": "2026-09-01"});
        assert_eq!(api.call(Method::POST, "/api/v1/mappings", fin, Some(m)).await.0, 201);
    }
}

/// Closes `month` (showback, unallocated kept by the platform, overriding readiness: no ingest run here).
pub async fn close(api: &TestApi, month: &str) {
    let body = json!({"mode": "showback", "unallocated": "kept_by_platform",
                      "override": {"reason": "no ingest run in this test"}});
    let (status, answer) =
        api.call(Method::POST, &format!("/api/v1/bills/{month}/close"), Some(&api.finance), Some(body)).await;
    assert_eq!(status, 201, "closing {month}: {answer}");
}

/// Shanghai months (the tests' billing time zone): September 3 hours (with a time-sliced replica besides, billed
/// as a whole card by the cluster's replica policy), October 3 hours on the 5th and 2 hours of November's first
/// billing day that are still October in UTC (10-31 16:00–18:00Z), November 2 hours on the 10th, December 2 hours
/// on the 1st. Rates and mappings first. September and October are then closed.
pub async fn seed_four_months(api: &TestApi) {
    rates_and_mappings(api).await;
    sqlx::query(
        "INSERT INTO replica_billing_policies (cluster, effective_from, policy, set_by)
         VALUES ('c1', '2026-09-01', 'whole_card', 'test')",
    )
    .execute(&api.pool)
    .await
    .unwrap();
    store_with(&api.pool, "2026-09-20T00:00:00Z", 3, 2.0, true).await.unwrap();
    store(&api.pool, "2026-10-05T00:00:00Z", 3, 3.0).await.unwrap();
    store(&api.pool, "2026-10-31T16:00:00Z", 2, 1.0).await.unwrap();
    store(&api.pool, "2026-11-10T00:00:00Z", 2, 2.0).await.unwrap();
    store(&api.pool, "2026-12-01T02:00:00Z", 2, 4.0).await.unwrap();
    close(api, "2026-09").await;
    close(api, "2026-10").await;
}

/// Every representation of a closed month a client fetches — the month and team statements as JSON (finance and a
/// team lead), the CSV export (whole, one team, the lead's), the PDF statements — as (path, token kind, bytes).
pub async fn representations(api: &TestApi, month: &str) -> Vec<(String, &'static str, Vec<u8>)> {
    let mut out = Vec::new();
    for (who, token) in [("finance", &api.finance), ("lead", &api.lead)] {
        for path in [
            format!("/api/v1/bills/{month}"),
            format!("/api/v1/bills/{month}/teams/vision"),
            format!("/api/v1/exports/{month}/bills.csv"),
            format!("/api/v1/exports/{month}/bills.csv?team=vision"),
            format!("/api/v1/exports/{month}/statements.pdf"),
        ] {
            let resp = api.client.get(format!("{}{path}", api.base)).bearer_auth(token).send().await.unwrap();
            let status = resp.status().as_u16();
            let body = resp.bytes().await.unwrap().to_vec();
            assert_eq!(status, 200, "{who} {path}: {}", String::from_utf8_lossy(&body));
            out.push((path, who, body));
        }
    }
    out
}

/// Row counts of the rollups (kept forever) and of the raw hourly usage, by table.
pub async fn counts(pool: &PgPool, tables: &[&str]) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for t in tables {
        let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {t}")).fetch_one(pool).await.unwrap();
        out.push((t.to_string(), n));
    }
    out
}

/// The rollups and the tables a closed statement or a restatement reads: retention keeps every row of them.
pub const KEPT: &[&str] = &[
    "usage_namespace_hourly",
    "usage_namespace_daily",
    "usage_pod_daily",
    "node_capacity_hourly",
    "capacity_daily",
    "closed_months",
    "ingested_hours",
];

/// A digest of every row of the kept tables (row text in a fixed order), to show they are the same rows.
pub async fn kept_digest(pool: &PgPool) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for t in KEPT {
        let d: Option<String> =
            sqlx::query_scalar(&format!("SELECT md5(string_agg(x::text, '|' ORDER BY x::text)) FROM {t} x"))
                .fetch_one(pool)
                .await
                .unwrap();
        out.push((t.to_string(), d.unwrap_or_default()));
    }
    out
}
