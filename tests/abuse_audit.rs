//! The audit log tells the truth under concurrency (issue 27, item 4), over the API on loopback and a real database:
//! 10 parallel budget changes leave a chain of entries that replays — one creation, each `before` the `after` of
//! the entry before it, the last `after` the value stored — and no entry that changed nothing; `PUT
//! /cloud-rates/{model}` records what it replaced; 20 identical `PUT /teams/{id}` write one entry, and none when
//! nothing changes. Before, each write read its `before` without a lock: three entries claimed the creation, the
//! chain broke, cloud rates always said `before: null` and every identical team put was an entry.

use crate::common;

use common::api::TestApi;
use futures_util::future::join_all;
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{Value, json};
use sqlx::PgPool;

/// The audit entries of `entity`, oldest first, as (before, after).
async fn entries(pool: &PgPool, entity: &str) -> Vec<(Option<Value>, Option<Value>)> {
    sqlx::query_as("SELECT before, after FROM audit_log WHERE entity = $1 ORDER BY id")
        .bind(entity)
        .fetch_all(pool)
        .await
        .unwrap()
}

/// `n` copies of a request at once; every status.
async fn burst(api: &TestApi, method: Method, path: &str, bodies: Vec<Value>) -> Vec<u16> {
    join_all(bodies.into_iter().map(|b| {
        let m = method.clone();
        async move { api.call(m, path, Some(&api.finance), Some(b)).await.0 }
    }))
    .await
}

fn dec(v: &Value) -> Decimal {
    v.as_str().unwrap_or_else(|| panic!("not a decimal string: {v}")).parse().unwrap()
}

/// The chain of a value's entries: exactly one creation (the first), each `before` equal to the `after` before it,
/// no entry whose `before` equals its `after`; the last `after`.
fn replay(chain: &[(Option<Value>, Option<Value>)]) -> Value {
    assert!(!chain.is_empty());
    assert!(chain[0].0.is_none(), "the first entry is the creation: {chain:?}");
    assert_eq!(chain.iter().filter(|(b, _)| b.is_none()).count(), 1, "one creation: {chain:?}");
    for pair in chain.windows(2) {
        assert_eq!(pair[1].0, pair[0].1, "each before is the after of the entry before it: {chain:?}");
    }
    assert!(chain.iter().all(|(b, a)| b != a), "no entry that changed nothing: {chain:?}");
    chain.last().unwrap().1.clone().unwrap()
}

#[sqlx::test]
async fn ten_parallel_budget_changes_leave_a_chain_that_replays(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let path = "/api/v1/budgets/2026-10/vision";
    // ten different amounts and two repeats of one of them, all at once
    let mut bodies: Vec<Value> = (0..10).map(|i| json!({"amount": format!("{}.50", 1000 + i)})).collect();
    bodies.push(json!({"amount": "1003.50"}));
    bodies.push(json!({"amount": "1003.5"}));
    let statuses = burst(&api, Method::PUT, path, bodies).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");

    let chain = entries(&pool, "budget:vision:2026-10").await;
    assert!((10..=12).contains(&chain.len()), "one entry per effective change: {}", chain.len());
    let last = replay(&chain);
    let (status, stored) = api.call(Method::GET, "/api/v1/budgets/2026-10", Some(&api.finance), None).await;
    assert_eq!(status, 200);
    let stored = stored.as_array().unwrap().iter().find(|b| b["team_id"] == "vision").cloned().unwrap();
    assert_eq!(dec(&last["amount"]), dec(&stored["amount"]), "the chain replays to the value stored");
    assert_eq!(last["thresholds"], stored["thresholds"]);

    // the stored value again (written another way): nothing
    let again =
        json!({"amount": stored["amount"].as_str().unwrap().trim_end_matches('0'), "thresholds": ["1.0", "0.80"]});
    assert_eq!(api.call(Method::PUT, path, Some(&api.finance), Some(again)).await.0, 200);
    assert_eq!(entries(&pool, "budget:vision:2026-10").await.len(), chain.len(), "a put of the same value is no entry");
}

#[sqlx::test]
async fn a_cloud_rate_change_records_what_it_replaced(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let path = "/api/v1/cloud-rates/A100-80GB";
    let fin = Some(api.finance.as_str());
    let first = json!({"on_demand": "25.5", "spot": "9"});
    let second = json!({"on_demand": "24", "spot": "9", "reserved": "15"});
    assert_eq!(api.call(Method::PUT, path, fin, Some(first)).await.0, 200);
    assert_eq!(api.call(Method::PUT, path, fin, Some(second.clone())).await.0, 200);
    // the same again, and the same at once from 10 callers: no entry
    assert_eq!(api.call(Method::PUT, path, fin, Some(second.clone())).await.0, 200);
    let statuses = burst(&api, Method::PUT, path, vec![second; 10]).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");

    let entity: String = sqlx::query_scalar("SELECT entity FROM audit_log WHERE action = 'cloud_rates.put' LIMIT 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    let chain = entries(&pool, &entity).await;
    assert_eq!(chain.len(), 2, "{chain:?}");
    let last = replay(&chain);
    let before = chain[1].0.clone().unwrap();
    assert_eq!((dec(&before["on_demand"]), dec(&before["spot"])), ("25.5".parse().unwrap(), "9".parse().unwrap()));
    assert!(before["reserved"].is_null(), "{before}");
    assert_eq!(dec(&last["reserved"]), "15".parse::<Decimal>().unwrap());
}

#[sqlx::test]
async fn twenty_identical_team_puts_write_one_entry(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let body = json!({"name": "计算机视觉", "owner": "张三"});
    let statuses = burst(&api, Method::PUT, "/api/v1/teams/cv", vec![body.clone(); 20]).await;
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    let chain = entries(&pool, "team:cv").await;
    assert_eq!(chain.len(), 1, "one creation: {chain:?}");
    assert_eq!(replay(&chain), json!({"id": "cv", "name": "计算机视觉", "owner": "张三"}));

    // nothing changes: no entry; a rename among identical puts: exactly one more, replaying
    let statuses = burst(&api, Method::PUT, "/api/v1/teams/cv", vec![body; 20]).await;
    assert!(statuses.iter().all(|s| *s == 200));
    assert_eq!(entries(&pool, "team:cv").await.len(), 1);
    let renamed = json!({"name": "视觉组", "owner": "张三"});
    let statuses = burst(&api, Method::PUT, "/api/v1/teams/cv", vec![renamed; 20]).await;
    assert!(statuses.iter().all(|s| *s == 200));
    let chain = entries(&pool, "team:cv").await;
    assert_eq!(chain.len(), 2, "{chain:?}");
    assert_eq!(replay(&chain)["name"], "视觉组");
}
