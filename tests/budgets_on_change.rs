//! Budgets are checked whenever what they depend on changes — a rate, a mapping, the budget itself — not only by
//! the worker or `cardhour budgets`: the alert is in `GET /budgets/{month}` right after the change. Delivery stays
//! one POST per crossing however often budgets are checked.
//!
//! Ground truth: 11.8 card-hours of A100 at 10 yuan = 118.00 yuan against a budget of 100.00 = 118 %.

use crate::common;

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Asia::Shanghai;
use common::api::TestApi;
use common::{TestDb, run_cardhour_ok};
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

use cardhour::billing::Month;
use cardhour::metering::{ContainerKey, HourOutput, UsageRow, UtilSource};

const A100: &str = "NVIDIA A100-SXM4-80GB";

/// One stored hour at `hour` of `cards` A100 in `namespace`, labelled `label`.
async fn store(pool: &PgPool, hour: DateTime<Utc>, namespace: &str, label: &str, cards: f64) {
    let row = UsageRow {
        key: ContainerKey { namespace: namespace.into(), pod: format!("{namespace}-0"), container: "main".into() },
        resource: "nvidia_com_gpu".into(),
        kind: "whole",
        gpu_model: A100.into(),
        mig_profile: None,
        node: "node-a".into(),
        units: cards,
        fraction: 1.0,
        memory_share: Some(1.0),
        gpu_seconds: cards * 3600.0,
        effective_gpu_seconds: cards * 3600.0 * 0.5,
        unmetered_gpu_seconds: 0.0,
        bridged_gpu_seconds: 0.0,
        util_source: UtilSource::SmActive,
        peak_fb_used_mib: Some(8192.0),
        label_team: Some(label.into()),
    };
    let out = HourOutput { interval_ms: Some(60_000), rows: vec![row], ..HourOutput::default() };
    let mut tx = pool.begin().await.unwrap();
    cardhour::db::clusters::upsert(&mut tx, "c1", "http://127.0.0.1:9").await.unwrap();
    cardhour::db::usage::lock_hour(&mut tx, "c1", hour).await.unwrap();
    cardhour::db::usage::replace_hour(&mut tx, "c1", hour, &out).await.unwrap();
    tx.commit().await.unwrap();
}

/// The current billing month and its first hour (always in the past).
fn this_month() -> (Month, DateTime<Utc>) {
    let m = Month::containing(Utc::now(), Shanghai);
    (m, m.bounds(Shanghai).0)
}

/// Team → its alerts as (threshold, basis), from `GET /budgets/{month}`.
async fn alerts(api: &TestApi, month: Month) -> Vec<(String, String, String, String)> {
    let (status, list) = api.call(Method::GET, &format!("/api/v1/budgets/{month}"), Some(&api.viewer), None).await;
    assert_eq!(status, 200, "{list}");
    let mut out = Vec::new();
    for b in list.as_array().unwrap() {
        for a in b["alerts"].as_array().unwrap() {
            out.push((
                b["team_id"].as_str().unwrap().to_string(),
                b["spent"].as_str().unwrap().to_string(),
                a["threshold"].as_str().unwrap().to_string(),
                a["basis"].as_str().unwrap().to_string(),
            ));
        }
    }
    out
}

fn actual(alerts: &[(String, String, String, String)], team: &str) -> Option<String> {
    alerts.iter().find(|a| a.0 == team && a.3 == "actual").map(|a| format!("{} at {}", a.1, a.2))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_a_mapping_or_a_budget_change_raises_the_alert_at_once() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    let (month, first_hour) = this_month();
    let budget = json!({"amount": "100", "thresholds": ["1.0"]});
    for team in ["vision", "nlp"] {
        let (status, b) =
            api.call(Method::PUT, &format!("/api/v1/budgets/{month}/{team}"), fin, Some(budget.clone())).await;
        assert_eq!(status, 200, "{b}");
    }
    // stored as an ingest would, but without one: no check has run
    store(&pool, first_hour, "vision-train", "vision", 11.8).await;
    store(&pool, first_hour + Duration::hours(1), "shared-ns", "misc", 11.8).await;
    assert_eq!(alerts(&api, month).await, [], "unpriced: nothing spent yet");

    // a rate: vision's 11.8 card-hours now cost 118.00, 118 % of its budget — listed right after the POST
    let rate = json!({"gpu_model": "A100-80GB", "effective_from": month.first_day().to_string(), "rate": "10"});
    let (status, out) = api.call(Method::POST, "/api/v1/rates", fin, Some(rate)).await;
    assert_eq!(status, 201, "{out}");
    let after_rate = alerts(&api, month).await;
    assert_eq!(actual(&after_rate, "vision"), Some("118.00 at 1.0000".into()), "{after_rate:?}");
    assert_eq!(actual(&after_rate, "nlp"), None);

    // a mapping: the shared namespace moves to nlp, whose spend becomes 118.00
    let m = json!({"namespace": "shared-ns", "team_id": "nlp", "valid_from": month.first_day().to_string()});
    let (status, out) = api.call(Method::POST, "/api/v1/mappings", fin, Some(m)).await;
    assert_eq!(status, 201, "{out}");
    assert_eq!(actual(&alerts(&api, month).await, "nlp"), Some("118.00 at 1.0000".into()));

    // a budget set below what is spent alerts at once too
    let put = json!({"name": "Misc", "owner": "x"});
    assert_eq!(api.call(Method::PUT, "/api/v1/teams/misc", fin, Some(put)).await.0, 200);
    store(&pool, first_hour + Duration::hours(2), "misc-ns", "misc", 2.0).await;
    let (status, _) =
        api.call(Method::PUT, &format!("/api/v1/budgets/{month}/misc"), fin, Some(json!({"amount": "10"}))).await;
    assert_eq!(status, 200);
    let all = alerts(&api, month).await;
    assert_eq!(actual(&all, "misc"), Some("20.00 at 0.8000".into()), "{all:?}");

    // delivery: however often budgets are checked, one POST per crossing, each with its idempotency key
    let (_, posts, addr) = common::webhook::receiver().await;
    let hook = format!("http://{addr}/hook");
    for _ in 0..2 {
        run_cardhour_ok(["budgets", "--month", &month.to_string(), "--webhook", &hook], &db.env());
    }
    let posts: Vec<Value> = posts.lock().unwrap().clone();
    let recorded: i64 = sqlx::query_scalar("SELECT count(*) FROM budget_alerts").fetch_one(&pool).await.unwrap();
    assert!(recorded >= 3);
    assert_eq!(posts.len() as i64, recorded, "one POST per crossing: {posts:?}");
}
