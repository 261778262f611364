//! A burst of budget writes must not drain the pool (issue 27, item 2): 20 parallel `PUT /budgets/{month}/{team}`
//! each answer within a second and an unrelated `GET /teams` meanwhile within 100 ms — asserted with a 3× margin,
//! the machine being shared; the precise figures are BENCHMARKS.md's (scripts/bench-budget-burst.sh). Before, each
//! write's budget check waited for a global advisory lock holding a pooled connection while the check holding the
//! lock needed more: 16 connections drained, writes took 10–22 s, reads waited as long and checks were skipped.
//! Served by `cardhour::http::server::serve` with a pool of 16 (as `cardhour serve` has), over a real database.

use crate::common;

use std::time::{Duration, Instant};

use common::TestDb;
use common::api::{SEED_MONTH, TestApi, seed};
use futures_util::future::join_all;
use reqwest::Method;
use serde_json::{Value, json};

async fn timed(api: &TestApi, method: Method, path: &str, body: Option<Value>) -> (u16, Value, Duration) {
    let started = Instant::now();
    let (status, body) = api.call(method, path, Some(&api.finance), body).await;
    (status, body, started.elapsed())
}

fn ms(d: &[Duration]) -> String {
    let mut v: Vec<u128> = d.iter().map(Duration::as_millis).collect();
    v.sort_unstable();
    format!("p50 {} ms, max {} ms ({} requests)", v[v.len() / 2], v[v.len() - 1], v.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_budget_writes_at_once_leave_the_pool_to_others() {
    let db = TestDb::migrated().unwrap();
    // the pool `cardhour serve` opens
    let pool = cardhour::db::connect(&db.url, 16).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    // October: usage of vision and nlp (nlp spends 262.50 yuan), budgets of 5,000 each
    seed(&api).await;
    let mut teams: Vec<String> = vec!["vision".into(), "nlp".into()];
    for i in 0..18 {
        let t = format!("team{i:02}");
        sqlx::query("INSERT INTO teams (id, name) VALUES ($1, $1)").bind(&t).execute(&pool).await.unwrap();
        teams.push(t);
    }
    assert_eq!(timed(&api, Method::GET, "/api/v1/teams", None).await.0, 200);

    let (mut puts, mut reads) = (Vec::new(), Vec::new());
    for round in 0..3u32 {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let (base, token, done) = (api.base.clone(), api.finance.clone(), done.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut took = Vec::new();
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    let started = Instant::now();
                    let r = client.get(format!("{base}/api/v1/teams")).bearer_auth(&token).send().await.unwrap();
                    let status = r.status().as_u16();
                    let teams: Value = r.json().await.unwrap();
                    took.push(started.elapsed());
                    assert_eq!(status, 200);
                    assert!(teams.as_array().is_some_and(|t| t.len() >= 20), "{teams}");
                }
                took
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        let api = &api;
        let writes = teams.iter().enumerate().map(|(i, team)| {
            // nlp's budget below what it spent in the last round: its check must record the crossing
            let amount = if team == "nlp" && round == 2 {
                "100".to_string()
            } else {
                format!("{}", 10_000 + round * 100 + i as u32)
            };
            let path = format!("/api/v1/budgets/{SEED_MONTH}/{team}");
            async move { (amount.clone(), timed(api, Method::PUT, &path, Some(json!({"amount": amount}))).await) }
        });
        for (amount, (status, body, took)) in join_all(writes).await {
            assert_eq!(status, 200, "{body}");
            assert_eq!(body["amount"], amount.as_str());
            puts.push(took);
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        reads.extend(reader.await.unwrap());
    }
    println!("budget PUTs: {}; GET /teams meanwhile: {}", ms(&puts), ms(&reads));
    assert!(!reads.is_empty());
    let slowest_put = *puts.iter().max().unwrap();
    let slowest_read = *reads.iter().max().unwrap();
    assert!(slowest_put < Duration::from_secs(3), "every PUT within 1 s (3× margin): {}", ms(&puts));
    assert!(slowest_read < Duration::from_millis(300), "every read within 100 ms (3× margin): {}", ms(&reads));

    // what the writes were for: every budget stored, and the check after them ran: nlp's crossing is recorded
    let (status, budgets, _) = timed(&api, Method::GET, &format!("/api/v1/budgets/{SEED_MONTH}"), None).await;
    assert_eq!(status, 200, "{budgets}");
    let list = budgets.as_array().unwrap();
    assert_eq!(list.len(), 20);
    let nlp = list.iter().find(|b| b["team_id"] == "nlp").unwrap();
    assert_eq!(nlp["amount"], "100.00");
    let crossed: Vec<&str> = nlp["alerts"].as_array().unwrap().iter().filter_map(|a| a["threshold"].as_str()).collect();
    assert!(crossed.contains(&"1.0000") || crossed.contains(&"1"), "nlp spent 262.50 of 100: {nlp}");
    let vision = list.iter().find(|b| b["team_id"] == "vision").unwrap();
    assert_eq!(vision["alerts"].as_array().map(Vec::len), Some(0), "vision is far below its budget: {vision}");
}
