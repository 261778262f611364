//! The worker checks budgets after each cycle: a simulated cluster ingested by `cardhour worker --once`, a budget
//! the spend crosses, and a webhook receiver that is down on the first cycle and up on the next.

use crate::common;

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Asia::Shanghai;
use common::api::TestApi;
use common::{TestDb, TestPrometheus, run_cardhour, simulate_run};
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_raises_budget_alerts_and_delivers_them_once_the_receiver_is_up() {
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate_run(dir.path(), 16, 10, 60, 11);
    let prom = TestPrometheus::from_openmetrics(&sim.metrics).unwrap();
    let db = TestDb::migrated().unwrap();
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool).await;
    let fin = Some(api.finance.as_str());
    for model in ["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA L40S"] {
        let body = json!({"gpu_model": model, "effective_from": "2020-01-01", "rate": "10"});
        let (status, out) = api.call(Method::POST, "/api/v1/rates", fin, Some(body)).await;
        assert_eq!(status, 201, "{out}");
    }

    // the worker's cycle: the 6 hours up to the newest hour 4 h old (the simulation's end); every billing month
    // those hours touch gets a budget of one fen for team vision
    let (from, to) = (sim.end - Duration::hours(6), sim.end);
    let month = |t: DateTime<Utc>| t.with_timezone(&Shanghai).format("%Y-%m").to_string();
    let months: BTreeSet<String> = [month(from), month(to - Duration::milliseconds(1))].into();
    for m in &months {
        let (status, b) =
            api.call(Method::PUT, &format!("/api/v1/budgets/{m}/vision"), fin, Some(json!({"amount": "0.01"}))).await;
        assert_eq!(status, 200, "{b}");
    }
    let (receiver, posts, addr) = common::webhook::receiver().await;
    let hook = format!("http://{addr}/hook");
    let worker = |webhook: String| {
        let (env, prom_url) = (db.env().map(|(k, v)| (k.to_string(), v.to_string())), prom.url.clone());
        tokio::task::spawn_blocking(move || {
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let args = ["worker", "--cluster", "sim", "--prometheus", &prom_url, "--lateness", "4h"];
            let args = args.into_iter().chain(["--initial-hours", "6", "--once", "--webhook", &webhook]);
            run_cardhour(args, &env)
        })
    };

    // a webhook that is no URL is refused before anything runs
    let out = worker("hooks.example".into()).await.unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an http(s) URL"));
    assert_eq!(db.psql("SELECT count(*) FROM ingested_hours").unwrap().trim(), "0");

    // first cycle: the receiver is down; the ingest still succeeds and the crossings are recorded, undelivered
    receiver.store(503, Ordering::SeqCst);
    let out = worker(hook.clone()).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stored = "SELECT extract(epoch FROM min(hour))::bigint || '|' || extract(epoch FROM max(hour))::bigint + 3600
                  FROM ingested_hours";
    assert_eq!(db.psql(stored).unwrap().trim(), format!("{}|{}", from.timestamp(), to.timestamp()));
    assert!(posts.lock().unwrap().is_empty());

    // what vision spent in each month, from its statement: one fen of budget crossed by any spend means all four
    // (threshold, basis) pairs; a month it spent nothing in raises none
    let mut expected = BTreeSet::new();
    for m in &months {
        let (status, st) = api.call(Method::GET, &format!("/api/v1/bills/{m}/teams/vision"), fin, None).await;
        assert_eq!(status, 200, "{st}");
        let total: Decimal = st["total"].as_str().unwrap().parse().unwrap();
        if total >= Decimal::new(1, 2) {
            for (threshold, basis) in
                [("0.8000", "actual"), ("0.8000", "forecast"), ("1.0000", "actual"), ("1.0000", "forecast")]
            {
                expected.insert((m.clone(), threshold.to_string(), basis.to_string()));
            }
        }
        let (_, list) = api.call(Method::GET, &format!("/api/v1/budgets/{m}"), fin, None).await;
        for a in list[0]["alerts"].as_array().unwrap() {
            assert!(a["delivered_at"].is_null() && a["attempts"] == 1 && a["last_error"] == "HTTP 503", "{a}");
        }
    }
    assert!(!expected.is_empty(), "vision spent nothing in the simulated hours");
    let recorded: usize = db.psql("SELECT count(*) FROM budget_alerts").unwrap().trim().parse().unwrap();
    assert_eq!(recorded, expected.len());

    // the next cycle (the re-processed recent hours) delivers each recorded alert once; a third sends nothing
    receiver.store(200, Ordering::SeqCst);
    for _ in 0..2 {
        let out = worker(hook.clone()).await.unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let delivered: BTreeSet<(String, String, String)> = posts
        .lock()
        .unwrap()
        .iter()
        .map(|p: &Value| {
            assert_eq!(p["team"], "vision");
            let s = |k: &str| p[k].as_str().unwrap().to_string();
            (s("month"), s("threshold"), s("basis"))
        })
        .collect();
    assert_eq!(posts.lock().unwrap().len(), expected.len(), "each alert is POSTed once");
    assert_eq!(delivered, expected);
    let undelivered = db.psql("SELECT count(*) FROM budget_alerts WHERE delivered_at IS NULL").unwrap();
    assert_eq!(undelivered.trim(), "0");
}
