//! The API's edges under abuse (issue 27, items 5 and 8), against `cardhour::http::server::serve` on loopback over a real
//! database: a stored idempotent answer is replayed only to a caller still authenticated; under `/api/` every
//! answer is JSON, also those the HTTP layer makes before any route (a URI over 64 KiB, a 1 MiB header, a
//! malformed request line, the API's paths in another case); `PUT /teams/{id}` and `POST /mappings` refuse unknown
//! fields as every body does; a budget amount has at most 2 decimals, the document says so and a third is refused naming `amount`.

use crate::common;

use common::api::TestApi;
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[sqlx::test]
async fn a_revoked_token_gets_401_not_the_stored_answer(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let body = json!({"gpu_model": "A100-80GB", "effective_from": "2026-11-01", "rate": "12.5"});
    let post = || {
        api.client
            .post(format!("{}/api/v1/rates", api.base))
            .bearer_auth(&api.finance)
            .header("Idempotency-Key", "k-revoked")
            .json(&body)
            .send()
    };
    let first = post().await.unwrap();
    assert_eq!(first.status().as_u16(), 201);
    let again = post().await.unwrap();
    assert_eq!(again.status().as_u16(), 201);
    assert_eq!(again.headers().get("idempotent-replayed").map(|v| v.to_str().unwrap()), Some("true"));

    sqlx::query("UPDATE api_tokens SET revoked_at = now() WHERE name = 'finance'").execute(&pool).await.unwrap();
    let after = post().await.unwrap();
    assert_eq!(after.status().as_u16(), 401, "authentication comes before any replay");
    assert!(after.headers().get("idempotent-replayed").is_none());
    let challenge = after.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_string());
    assert_eq!(challenge.as_deref(), Some(r#"Bearer realm="cardhour", error="invalid_token""#));
    let err: Value = after.json().await.unwrap();
    assert_eq!(err["status"], 401, "{err}");
    assert!(!err.to_string().contains("12.5"), "nothing of the stored answer: {err}");

    // an expired token the same way
    let (s, _) = api.call(Method::GET, "/api/v1/teams", Some(&api.admin), None).await;
    assert_eq!(s, 200);
    sqlx::query(
        "UPDATE api_tokens SET created_at = now() - interval '1 minute', expires_at = now() - interval '1 second'
         WHERE name = 'admin'",
    )
    .execute(&pool)
    .await
    .unwrap();
    let r = api
        .client
        .post(format!("{}/api/v1/rates", api.base))
        .bearer_auth(&api.admin)
        .header("Idempotency-Key", "k-revoked")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
}

/// Sends `request` as raw bytes on a fresh connection and reads the whole answer (the server closes after it).
async fn raw(api: &TestApi, request: &[u8]) -> (u16, String, String) {
    let mut s = tokio::net::TcpStream::connect(api.base.trim_start_matches("http://")).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(10), s.read_to_end(&mut got)).await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&got).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or_else(|| panic!("no answer: {text:?}"));
    let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_string())
}

fn json_error(head: &str, body: &str, status: u16) -> Value {
    assert!(head.contains("content-type: application/json"), "{head}");
    let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    assert_eq!(v["status"], status, "{v}");
    assert!(v["code"].is_string() && v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    v
}

#[sqlx::test]
async fn every_answer_under_the_api_is_json(pool: PgPool) {
    let api = TestApi::start(pool).await;
    // a URI over 64 KiB: the HTTP layer's 414
    let long = format!("GET /api/v1/teams?x={} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70 * 1024));
    let (status, head, body) = raw(&api, long.as_bytes()).await;
    assert_eq!(status, 414, "{head}");
    assert_eq!(json_error(&head, &body, 414)["code"], "uri_too_long");

    // a 1 MiB header: the HTTP layer's 431 (the whole request is still being sent when it answers)
    let big = format!("GET /api/v1/teams HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "b".repeat(1024 * 1024));
    let (status, head, body) = raw(&api, big.as_bytes()).await;
    assert_eq!(status, 431, "{head}");
    assert_eq!(json_error(&head, &body, 431)["code"], "headers_too_large");

    // malformed request lines and headers
    for bad in [
        &b"GET /api/v1/te ams HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"GET /api/v1/teams HTTP/9.9\r\nHost: x\r\n\r\n",
        b"GET /api/v1/teams\x01 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /api/v1/teams HTTP/1.1\r\nHo st: x\r\n\r\n",
        b"\x00\x01\x02 nonsense\r\n\r\n",
    ] {
        let (status, head, body) = raw(&api, bad).await;
        assert_eq!(status, 400, "{:?}: {head}", String::from_utf8_lossy(bad));
        assert_eq!(json_error(&head, &body, 400)["code"], "bad_request");
    }

    // the API's paths in upper case: no route, answered as the API answers
    for path in ["/API/V1/teams", "/Api/v1/teams", "/API"] {
        let (status, body) = api.call(Method::GET, path, Some(&api.viewer), None).await;
        assert_eq!(status, 404, "{path}");
        assert_eq!(body["code"], "not_found", "{path}: {body}");
    }

    // a page's path keeps the page's language
    let long = format!("GET /bills?x={} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70 * 1024));
    let (status, head, body) = raw(&api, long.as_bytes()).await;
    assert_eq!(status, 414);
    assert!(head.contains("content-type: text/html") && body.contains("414"), "{head}\n{body}");

    // and a normal request on a kept-alive connection is untouched by any of it
    let (status, teams) = api.call(Method::GET, "/api/v1/teams", Some(&api.viewer), None).await;
    assert_eq!(status, 200, "{teams}");
}

#[sqlx::test]
async fn team_bodies_refuse_unknown_fields(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    let (status, err) =
        api.call(Method::PUT, "/api/v1/teams/cv", fin, Some(json!({"name": "CV", "is_admin": true}))).await;
    assert_eq!(status, 422, "{err}");
    assert_eq!(err["field"], "is_admin", "{err}");
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM teams WHERE id = 'cv'").fetch_one(&pool).await.unwrap();
    assert_eq!(n, 0, "nothing written");
    let (status, team) = api.call(Method::PUT, "/api/v1/teams/cv", fin, Some(json!({"name": "CV"}))).await;
    assert_eq!((status, team["name"].as_str()), (200, Some("CV")), "{team}");
    // a mapping's body alike (schemathesis sent one with extra properties)
    let mapping = json!({"namespace": "cv-train", "team_id": "cv", "valid_from": "2026-11-01", "S": 60});
    let (status, err) = api.call(Method::POST, "/api/v1/mappings", fin, Some(mapping)).await;
    assert_eq!((status, err["field"].as_str()), (422, Some("S")), "{err}");
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM namespace_mappings").fetch_one(&pool).await.unwrap();
    assert_eq!(n, 0, "nothing written");
    // and the document says so
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(common::contract::committed_document()).unwrap()).unwrap();
    for schema in ["TeamInput", "MappingInput"] {
        assert_eq!(doc["components"]["schemas"][schema]["additionalProperties"], false, "{schema}");
    }
}

#[sqlx::test]
async fn a_budget_amount_has_at_most_two_decimals(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    let path = "/api/v1/budgets/2026-10/vision";
    for bad in ["0.000029", "5000.001", "0.001", "12.345"] {
        let (status, err) = api.call(Method::PUT, path, fin, Some(json!({"amount": bad}))).await;
        assert_eq!(status, 422, "{bad}: {err}");
        assert_eq!(err["field"], "amount", "{bad}: {err}");
        assert!(err["message"].as_str().unwrap().contains("2 decimals"), "{bad}: {err}");
    }
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM budgets").fetch_one(&pool).await.unwrap();
    assert_eq!(n, 0, "nothing written, nothing rounded to 0.00");
    for good in ["0.01", "5000.5", "5000.50", "10000000000"] {
        let (status, b) = api.call(Method::PUT, path, fin, Some(json!({"amount": good}))).await;
        assert_eq!((status, b["amount"].as_str()), (200, Some(good)), "{b}");
    }
    // the thresholds' whole range is stored: 10 (1000 %) was refused by the database as out of range
    let (status, b) =
        api.call(Method::PUT, path, fin, Some(json!({"amount": "100", "thresholds": ["10.0000", "0.5"]}))).await;
    assert_eq!(status, 200, "{b}");
    let stored: Vec<rust_decimal::Decimal> =
        sqlx::query_scalar("SELECT thresholds FROM budgets").fetch_one(&pool).await.unwrap();
    assert_eq!(stored, [rust_decimal::Decimal::new(5, 1), rust_decimal::Decimal::TEN], "{b}");

    // the document says the same: its pattern for the amount takes what the server takes, and no more
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(common::contract::committed_document()).unwrap()).unwrap();
    let pattern = doc["components"]["schemas"]["BudgetInput"]["properties"]["amount"]["pattern"].as_str().unwrap();
    let re = regex::Regex::new(pattern).unwrap();
    for bad in ["0.000029", "5000.001", "0", "0.00", "-1", "1e3"] {
        assert!(!re.is_match(bad), "{bad} by {pattern}");
    }
    for good in ["0.01", "5000.5", "5000.50", "10000000000", "10000000000.00"] {
        assert!(re.is_match(good), "{good} by {pattern}");
    }
}
