//! Issue 10, defect 4: concurrent identical writes give one success and conflicts (never a 500), with one
//! audit row per effective change; `Idempotency-Key` replays the first answer.

use crate::common;

use std::collections::BTreeMap;

use common::api::TestApi;
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

const N: usize = 20;

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

/// Sends `n` copies of one request at once; returns every (status, body).
async fn burst(api: &TestApi, method: Method, path: &str, body: Option<Value>, key: Option<&str>) -> Vec<(u16, Value)> {
    let mut tasks = Vec::new();
    for _ in 0..N {
        let mut req = api.client.request(method.clone(), format!("{}{path}", api.base)).bearer_auth(&api.finance);
        if let Some(b) = &body {
            req = req.json(b);
        }
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        tasks.push(tokio::spawn(async move {
            let resp = req.send().await.unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

fn tally(answers: &[(u16, Value)]) -> BTreeMap<u16, usize> {
    let mut t = BTreeMap::new();
    for (s, _) in answers {
        *t.entry(*s).or_default() += 1;
    }
    t
}

#[sqlx::test]
async fn concurrent_identical_rate_posts_give_one_201_and_409s(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let body = json!({"gpu_model": "A100-80GB", "effective_from": "2026-11-01", "rate": "12.5"});
    let answers = burst(&api, Method::POST, "/api/v1/rates", Some(body), None).await;
    assert_eq!(tally(&answers), BTreeMap::from([(201, 1), (409, N - 1)]), "{answers:?}");
    for (s, b) in answers.iter().filter(|(s, _)| *s == 409) {
        assert_eq!((b["code"].as_str(), b["field"].as_str()), (Some("conflict"), Some("effective_from")), "{s} {b}");
    }
    assert_eq!(count(&pool, "SELECT count(*) FROM rate_versions").await, 1);
    assert_eq!(count(&pool, "SELECT count(*) FROM audit_log WHERE action = 'rate.create'").await, 1);
}

/// Two days of stored usage of `vision-train`: a mapping's re-attribution then takes a while, and the
/// requests that lose the race overlap the winner's transaction.
async fn store_usage(pool: &PgPool) {
    use cardhour::metering::{ContainerKey, HourOutput, UsageRow, UtilSource};
    let mut tx = pool.begin().await.unwrap();
    cardhour::db::clusters::upsert(&mut tx, "c1", "http://127.0.0.1:9").await.unwrap();
    let start: chrono::DateTime<chrono::Utc> = "2026-11-01T00:00:00Z".parse().unwrap();
    for h in 0..48 {
        let rows = (0..20)
            .map(|p| UsageRow {
                key: ContainerKey { namespace: "vision-train".into(), pod: format!("p{p}"), container: "c".into() },
                resource: "nvidia_com_gpu".into(),
                kind: "whole",
                gpu_model: "NVIDIA A100-SXM4-80GB".into(),
                mig_profile: None,
                node: "n1".into(),
                units: 1.0,
                fraction: 1.0,
                memory_share: Some(1.0),
                gpu_seconds: 3600.0,
                effective_gpu_seconds: 1800.0,
                unmetered_gpu_seconds: 0.0,
                bridged_gpu_seconds: 0.0,
                util_source: UtilSource::SmActive,
                peak_fb_used_mib: None,
                label_team: None,
            })
            .collect();
        let out = HourOutput { interval_ms: Some(60_000), rows, ..HourOutput::default() };
        cardhour::db::usage::replace_hour(&mut tx, "c1", start + chrono::Duration::hours(h), &out).await.unwrap();
    }
    tx.commit().await.unwrap();
}

#[sqlx::test]
async fn concurrent_identical_mapping_posts_give_one_201_and_409s(pool: PgPool) {
    store_usage(&pool).await;
    let api = TestApi::start(pool.clone()).await;
    for (round, day) in ["2026-11-01", "2026-11-02", "2026-11-03"].into_iter().enumerate() {
        let body = json!({"namespace": "vision-train", "team_id": "vision", "valid_from": day});
        let answers = burst(&api, Method::POST, "/api/v1/mappings", Some(body), None).await;
        assert_eq!(tally(&answers), BTreeMap::from([(201, 1), (409, N - 1)]), "{answers:?}");
        let conflict = answers.iter().find(|(s, _)| *s == 409).unwrap();
        assert_eq!(conflict.1["field"], "valid_from", "{}", conflict.1);
        let n = round as i64 + 1;
        assert_eq!(count(&pool, "SELECT count(*) FROM namespace_mappings").await, n);
        assert_eq!(count(&pool, "SELECT count(*) FROM audit_log WHERE action = 'mapping.create'").await, n);
    }
    // the stored usage follows the mapping: every GPU-hour is vision's now
    let vision = count(&pool, "SELECT count(*) FROM gpu_usage_hourly WHERE team = 'vision'").await;
    assert_eq!(vision, 48 * 20);
}

#[sqlx::test]
async fn concurrent_deletes_give_one_204_and_404s_with_one_audit_row(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let (s, rate) = api
        .call(
            Method::POST,
            "/api/v1/rates",
            Some(&api.finance),
            Some(json!({"gpu_model": "A100-80GB", "effective_from": "2026-11-01", "rate": "12.5"})),
        )
        .await;
    assert_eq!(s, 201, "{rate}");
    let id = rate["id"].as_i64().unwrap();
    let answers = burst(&api, Method::DELETE, &format!("/api/v1/rates/{id}"), None, None).await;
    assert_eq!(tally(&answers), BTreeMap::from([(204, 1), (404, N - 1)]), "{answers:?}");
    assert!(answers.iter().filter(|(s, _)| *s == 404).all(|(_, b)| b["code"] == "not_found"));
    assert_eq!(count(&pool, "SELECT count(*) FROM rate_versions").await, 0);
    assert_eq!(count(&pool, "SELECT count(*) FROM audit_log WHERE action = 'rate.delete'").await, 1);
    let before: Value =
        sqlx::query_scalar("SELECT before FROM audit_log WHERE action = 'rate.delete'").fetch_one(&pool).await.unwrap();
    assert_eq!(before["id"], id);
    assert_eq!(before["rate"], rate["rate"]);
}

#[sqlx::test]
async fn an_idempotency_key_replays_the_first_answer(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let body = json!({"gpu_model": "A100-80GB", "effective_from": "2026-11-01", "rate": "12.5"});
    let post = |body: Value, key: &'static str| {
        api.client
            .post(format!("{}/api/v1/rates", api.base))
            .bearer_auth(&api.finance)
            .header("Idempotency-Key", key)
            .json(&body)
            .send()
    };
    let first = post(body.clone(), "k-1").await.unwrap();
    assert_eq!(first.status().as_u16(), 201);
    let first: Value = first.json().await.unwrap();
    let again = post(body.clone(), "k-1").await.unwrap();
    assert_eq!(again.status().as_u16(), 201, "the original status, not a 409");
    assert_eq!(again.headers().get("idempotent-replayed").map(|v| v.to_str().unwrap()), Some("true"));
    assert_eq!(again.json::<Value>().await.unwrap(), first, "the original body");
    assert_eq!(count(&pool, "SELECT count(*) FROM rate_versions").await, 1);
    assert_eq!(count(&pool, "SELECT count(*) FROM audit_log").await, 1);
    // the same key with another request
    let mut other = body.clone();
    other["rate"] = json!("13");
    let resp = post(other, "k-1").await.unwrap();
    assert_eq!(resp.status().as_u16(), 422);
    let err: Value = resp.json().await.unwrap();
    assert_eq!(err["field"], "Idempotency-Key", "{err}");
    // without a key the same request is a conflict, as before
    let (s, err) = api.call(Method::POST, "/api/v1/rates", Some(&api.finance), Some(body.clone())).await;
    assert_eq!((s, err["field"].as_str()), (409, Some("effective_from")));
    // keys are per caller: the admin's `k-1` is another key (and meets the conflict)
    let resp = api
        .client
        .post(format!("{}/api/v1/rates", api.base))
        .bearer_auth(&api.admin)
        .header("Idempotency-Key", "k-1")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 409);
    assert_eq!(count(&pool, "SELECT count(*) FROM rate_versions").await, 1);
    assert_eq!(count(&pool, "SELECT count(*) FROM audit_log").await, 1);
    let stored =
        count(&pool, "SELECT count(*) FROM idempotency_keys WHERE expires_at > now() + interval '23 hours'").await;
    assert_eq!(stored, 2, "finance's and admin's k-1, kept a day");
}

#[sqlx::test]
async fn concurrent_posts_with_one_key_write_once(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let body = json!({"namespace": "vision-train", "team_id": "vision", "valid_from": "2026-11-01"});
    let answers = burst(&api, Method::POST, "/api/v1/mappings", Some(body), Some("same")).await;
    let t = tally(&answers);
    assert!(t.keys().all(|s| *s == 201 || *s == 409), "{answers:?}");
    assert!(t.get(&201).is_some_and(|n| *n >= 1), "{answers:?}");
    // every 201 is the first answer itself, replayed
    let created: Vec<&Value> = answers.iter().filter(|(s, _)| *s == 201).map(|(_, b)| b).collect();
    assert!(created.iter().all(|b| *b == created[0]), "{created:?}");
    // a 409 says either "in flight" (the key) or the lost race (the mapping)
    for (_, b) in answers.iter().filter(|(s, _)| *s == 409) {
        assert!(b["field"] == "Idempotency-Key" || b["field"] == "valid_from", "{b}");
    }
    assert_eq!(count(&pool, "SELECT count(*) FROM namespace_mappings").await, 1);
    assert_eq!(count(&pool, "SELECT count(*) FROM audit_log").await, 1);
}

#[sqlx::test]
async fn constraint_violations_map_to_409_and_422_naming_the_field(pool: PgPool) {
    use axum::response::IntoResponse;
    use cardhour::api::error::ApiError;
    let insert =
        "INSERT INTO rate_versions (gpu_model, effective_from, rate, created_by) VALUES ('A', '2026-11-01', 1, 't')";
    sqlx::query(insert).execute(&pool).await.unwrap();
    let dup = sqlx::query(insert).execute(&pool).await.unwrap_err();
    let e = ApiError::from(dup);
    assert!(matches!(&e, ApiError::Conflict { field: Some(f), .. } if f == "effective_from"), "{e:?}");
    let fk = sqlx::query(
        "INSERT INTO namespace_mappings (namespace, team_id, valid_from, created_by) VALUES ('n', 'nobody', '2026-11-01', 't')",
    )
    .execute(&pool)
    .await
    .unwrap_err();
    let r = ApiError::from(fk).into_response();
    assert_eq!(r.status().as_u16(), 422);
    let body: Value = serde_json::from_slice(&axum::body::to_bytes(r.into_body(), 10_000).await.unwrap()).unwrap();
    assert_eq!((body["code"].as_str(), body["field"].as_str()), (Some("invalid_input"), Some("team_id")));
    let nul = sqlx::query("SELECT $1::text").bind("a\0b").execute(&pool).await.unwrap_err();
    assert_eq!(ApiError::from(nul).status().as_u16(), 422);
}
