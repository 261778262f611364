//! One time-zone rule (billing time zone Asia/Shanghai): a date without an offset is a billing day, in the CLI and
//! the API alike, so `cardhour usage --from 2026-11-01 --to 2026-12-01` is the bill of 2026-11; times are accepted
//! with or without seconds and offset; a bad time is answered with the formats accepted.
//!
//! Ground truth: three stored hours of vision cards — 2 at 2026-10-31T20:00Z (Nov 1 04:00 in Shanghai: November),
//! 1 at 2026-11-15T00:00Z (November) and 4 at 2026-11-30T18:00Z (Dec 1 02:00 in Shanghai: December). November's
//! bill holds the first two, 3 card-hours; read as UTC days the month would hold the last two, 5.

use crate::common;

use chrono::{DateTime, Utc};
use common::api::TestApi;
use common::{TestDb, run_cardhour, run_cardhour_ok};
use reqwest::Method;
use serde_json::Value;
use sqlx::PgPool;

use cardhour::metering::{ContainerKey, HourOutput, UsageRow, UtilSource};

async fn store(pool: &PgPool, hour: &str, cards: f64) {
    let hour: DateTime<Utc> = hour.parse().unwrap();
    let row = UsageRow {
        key: ContainerKey { namespace: "vision-train".into(), pod: "v-0".into(), container: "main".into() },
        resource: "nvidia_com_gpu".into(),
        kind: "whole",
        gpu_model: "NVIDIA A100-SXM4-80GB".into(),
        mig_profile: None,
        node: "node-a".into(),
        units: cards,
        fraction: 1.0,
        memory_share: Some(1.0),
        gpu_seconds: cards * 3600.0,
        effective_gpu_seconds: cards * 1800.0,
        unmetered_gpu_seconds: 0.0,
        bridged_gpu_seconds: 0.0,
        util_source: UtilSource::SmActive,
        peak_fb_used_mib: Some(8192.0),
        label_team: Some("vision".into()),
    };
    let out = HourOutput { interval_ms: Some(60_000), rows: vec![row], ..HourOutput::default() };
    let mut tx = pool.begin().await.unwrap();
    cardhour::db::clusters::upsert(&mut tx, "c1", "http://127.0.0.1:9").await.unwrap();
    cardhour::db::usage::lock_hour(&mut tx, "c1", hour).await.unwrap();
    cardhour::db::usage::replace_hour(&mut tx, "c1", hour, &out).await.unwrap();
    tx.commit().await.unwrap();
}

fn vision_hours(rows: &Value) -> f64 {
    rows.as_array().unwrap().iter().find(|r| r["team"] == "vision").map_or(0.0, |r| r["gpu_hours"].as_f64().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dates_are_billing_days_everywhere() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    for (hour, cards) in [("2026-10-31T20:00:00Z", 2.0), ("2026-11-15T00:00:00Z", 1.0), ("2026-11-30T18:00:00Z", 4.0)] {
        store(&pool, hour, cards).await;
    }
    let (status, bill) = api.call(Method::GET, "/api/v1/bills/2026-11/teams/vision", Some(&api.finance), None).await;
    assert_eq!(status, 200, "{bill}");
    let billed: f64 = bill["card_hours"].as_str().unwrap().parse().unwrap();
    assert_eq!(billed, 3.0);

    // the CLI: dates are billing days, and every spelling of the same instants gives the same totals
    for (from, to) in [
        ("2026-11-01", "2026-12-01"),
        ("2026-11-01T00:00", "2026-12-01 00:00"),
        ("2026-11-01 00:00:00+08:00", "2026-11-30T16:00Z"),
        ("2026-10-31T16:00:00Z", "2026-12-01T00:00:00+08:00"),
    ] {
        let out = run_cardhour_ok(["usage", "--from", from, "--to", to, "--format", "json"], &db.env());
        let rows: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(vision_hours(&rows), billed, "usage --from {from} --to {to} is the bill of 2026-11");
    }
    let out = run_cardhour(["usage", "--from", "2026-11-29T", "--to", "2026-12-01"], &db.env());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("is not a time") && stderr.contains("2026-11-01T08:00"),
        "{stderr}"
    );
    let help = run_cardhour_ok(["usage", "--help"], &[]);
    assert!(help.contains("billing time zone") && help.contains("--from"), "{help}");

    // the API: the same rule, and a clear answer to a bad time
    for (from, to) in [("2026-11-01", "2026-12-01"), ("2026-11-01T00:00", "2026-12-01T00:00:00%2B08:00")] {
        let path = format!("/api/v1/usage?from={from}&to={to}");
        let (status, rows) = api.call(Method::GET, &path, Some(&api.finance), None).await;
        assert_eq!(status, 200, "{path}: {rows}");
        assert_eq!(vision_hours(&rows), billed, "{path}");
    }
    let (status, utc_days) = api
        .call(Method::GET, "/api/v1/usage?from=2026-11-01T00:00Z&to=2026-12-01T00:00Z", Some(&api.finance), None)
        .await;
    assert_eq!((status, vision_hours(&utc_days)), (200, 5.0), "UTC days hold the 15th and the 30th");
    let (status, err) =
        api.call(Method::GET, "/api/v1/usage?from=2026-11-29T&to=2026-12-01", Some(&api.finance), None).await;
    assert_eq!((status, err["field"].as_str()), (422, Some("from")), "{err}");
    let message = err["message"].as_str().unwrap();
    assert!(!message.contains("premature") && message.contains("is not a time"), "{message}");
}
