//! Issue 10, defects 6 and 8: bad input is refused with a JSON error naming the field (422 invalid, 400
//! unreadable, 413, 405, 404), nothing is written, and no request holds the database past the timeout.

use crate::common;

use common::api::{TestApi, write_counts};
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

/// Asserts a JSON error with this status, code and field.
#[track_caller]
fn assert_error(got: &(u16, Value), status: u16, code: &str, field: &str) {
    let (s, body) = got;
    assert_eq!(*s, status, "{body}");
    assert_eq!(body["status"], status, "{body}");
    assert_eq!(body["code"], code, "{body}");
    if field.is_empty() {
        assert!(body["field"].is_null(), "{body}");
    } else {
        assert_eq!(body["field"], field, "{body}");
    }
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
}

fn rate(model: &str, from: &str) -> Value {
    json!({"gpu_model": model, "effective_from": from, "rate": "10"})
}

#[sqlx::test]
async fn nul_bytes_anywhere_are_a_422_naming_the_field(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    let before = write_counts(&pool).await;
    // body text fields
    let r = api.call(Method::PUT, "/api/v1/teams/cv", fin, Some(json!({"name": "a\u{0}b"}))).await;
    assert_error(&r, 422, "invalid_input", "name");
    assert!(r.1["message"].as_str().unwrap().contains("NUL"), "{}", r.1);
    let r = api
        .call(
            Method::POST,
            "/api/v1/mappings",
            fin,
            Some(json!({"namespace": "ns\u{0}", "team_id": "vision", "valid_from": "2026-11-01"})),
        )
        .await;
    assert_error(&r, 422, "invalid_input", "namespace");
    let r = api.call(Method::POST, "/api/v1/rates", fin, Some(rate("A100\u{0}", "2026-11-01"))).await;
    assert_error(&r, 422, "invalid_input", "gpu_model");
    let r = api.call(Method::PUT, "/api/v1/model-aliases/x", fin, Some(json!({"pricing_model": "\u{0}A100"}))).await;
    assert_error(&r, 422, "invalid_input", "pricing_model");
    // path parameters
    let r = api.call(Method::PUT, "/api/v1/cloud-rates/A%00", fin, Some(json!({"spot": "1"}))).await;
    assert_error(&r, 422, "invalid_input", "model");
    let r = api.call(Method::PUT, "/api/v1/model-aliases/A%00", fin, Some(json!({"pricing_model": "A100"}))).await;
    assert_error(&r, 422, "invalid_input", "model_name");
    let r = api.call(Method::GET, "/api/v1/teams/%00", fin, None).await;
    assert_error(&r, 422, "invalid_input", "id");
    let r = api.call(Method::GET, "/api/v1/bills/2026-10/teams/vi%00", fin, None).await;
    assert_error(&r, 422, "invalid_input", "team");
    let r = api.call(Method::PUT, "/api/v1/budgets/2026-11/vi%00", fin, Some(json!({"amount": "10"}))).await;
    assert_error(&r, 422, "invalid_input", "team");
    // query parameters
    let r = api
        .call(Method::GET, "/api/v1/usage?from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z&cluster=a%00", fin, None)
        .await;
    assert_error(&r, 422, "invalid_input", "cluster");
    let r = api
        .call(
            Method::GET,
            "/api/v1/rent-vs-build?model=A%00&from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z",
            fin,
            None,
        )
        .await;
    assert_error(&r, 422, "invalid_input", "model");
    assert_eq!(write_counts(&pool).await, before, "nothing written");
}

#[sqlx::test]
async fn dates_and_months_out_of_range_are_refused(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    let before = write_counts(&pool).await;
    for from in ["-5000-01-01", "0000-01-01", "200000-01-01", "1999-12-31", "2101-01-01"] {
        let r = api.call(Method::POST, "/api/v1/rates", fin, Some(rate("A100-80GB", from))).await;
        assert_error(&r, 422, "invalid_input", "effective_from");
        let m = json!({"namespace": "ns", "team_id": "vision", "valid_from": from});
        let r = api.call(Method::POST, "/api/v1/mappings", fin, Some(m)).await;
        assert_error(&r, 422, "invalid_input", "valid_from");
    }
    let r = api.call(Method::PUT, "/api/v1/budgets/0000-01/vision", fin, Some(json!({"amount": "100"}))).await;
    assert_error(&r, 422, "invalid_input", "month");
    for month in ["0000-01", "1999-12", "9999-12", "2026-13"] {
        let r = api.call(Method::POST, &format!("/api/v1/bills/{month}/close"), fin, None).await;
        assert_error(&r, 422, "invalid_input", "month");
        let r = api.call(Method::GET, &format!("/api/v1/bills/{month}"), fin, None).await;
        assert_error(&r, 422, "invalid_input", "month");
    }
    let r = api.call(Method::GET, "/api/v1/usage?from=-5000-01-01T00:00:00Z&to=2026-11-02T00:00:00Z", fin, None).await;
    assert_eq!(r.0, 422, "{}", r.1);
    assert_eq!(write_counts(&pool).await, before, "nothing written, no month closed");
    // a CSV import with such a date writes nothing either
    let csv = "namespace,team,valid_from\nok,vision,2026-11-01\nbad,vision,-5000-01-01\n".to_string();
    let r = api.raw(Method::POST, "/api/v1/mappings/import", &api.finance, "text/csv", csv).await;
    assert_error(&r, 422, "invalid_input", "row 3: valid_from");
    assert_eq!(write_counts(&pool).await, before, "all rows or none");
}

#[sqlx::test]
async fn blank_names_and_invisible_characters_are_refused(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    let before = write_counts(&pool).await;
    let r = api.call(Method::PUT, "/api/v1/cloud-rates/%20", fin, Some(json!({"on_demand": "25"}))).await;
    assert_error(&r, 422, "invalid_input", "model");
    let r = api.call(Method::PUT, "/api/v1/model-aliases/%20", fin, Some(json!({"pricing_model": "A100"}))).await;
    assert_error(&r, 422, "invalid_input", "model_name");
    for name in ["evil\u{202E}gpj.exe", "a\u{7}b", "two\nlines", "   ", "\u{2066}x\u{2069}"] {
        let r = api.call(Method::PUT, "/api/v1/teams/cv", fin, Some(json!({"name": name}))).await;
        assert_error(&r, 422, "invalid_input", "name");
    }
    let r = api.call(Method::PUT, "/api/v1/teams/cv", fin, Some(json!({"name": "CV", "owner": "\u{202E}x"}))).await;
    assert_error(&r, 422, "invalid_input", "owner");
    let csv = "namespace,team,team_name,valid_from\nrec,rec,\u{202E}推荐,2026-11-01\n".to_string();
    let r = api.raw(Method::POST, "/api/v1/mappings/import", &api.finance, "text/csv", csv).await;
    assert_error(&r, 422, "invalid_input", "row 2: team_name");
    assert_eq!(write_counts(&pool).await, before);
    // a Chinese display name is fine, and trimmed
    let (s, team) = api.call(Method::PUT, "/api/v1/teams/cv", fin, Some(json!({"name": " 视觉组 "}))).await;
    assert_eq!((s, team["name"].as_str()), (200, Some("视觉组")));
}

#[sqlx::test]
async fn axum_rejections_are_json(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    let before = write_counts(&pool).await;
    // a path parameter that is not a number
    let r = api.call(Method::DELETE, "/api/v1/rates/abc", fin, None).await;
    assert_error(&r, 400, "bad_request", "id");
    // an unknown route under /api, and anywhere
    let r = api.call(Method::GET, "/api/v1/nope", fin, None).await;
    assert_error(&r, 404, "not_found", "");
    // 405 keeps `Allow`, and has a JSON body
    let resp = api.client.patch(format!("{}/api/v1/rates", api.base)).bearer_auth(&api.finance).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 405);
    assert!(resp.headers().get("allow").is_some());
    let body: Value = resp.json().await.unwrap();
    assert_eq!((body["status"].as_u64(), body["code"].as_str()), (Some(405), Some("method_not_allowed")), "{body}");
    // a body that is not UTF-8
    let resp = api
        .client
        .post(format!("{}/api/v1/mappings/import", api.base))
        .bearer_auth(&api.finance)
        .header("content-type", "text/csv")
        .body(vec![b'n', 0xff, 0xfe, b'\n'])
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap();
    // neither UTF-8 nor GB18030 (what Chinese Excel saves): refused as a value, naming the body
    assert_error(&(status, body), 422, "invalid_input", "body");
    // one body limit: 3 MB of CSV is read (and refused for its row count, not its size); 9 MB is a JSON 413
    let mut csv = String::from("namespace,team,valid_from\n");
    while csv.len() < 3 * 1024 * 1024 {
        csv.push_str("some-namespace,vision,2026-11-01\n");
    }
    let r = api.raw(Method::POST, "/api/v1/mappings/import", &api.finance, "text/csv", csv).await;
    assert_error(&r, 422, "invalid_input", "body");
    assert!(r.1["message"].as_str().unwrap().contains("10000 rows"), "{}", r.1);
    let big = format!("{{\"gpu_model\": \"{}\"}}", "x".repeat(9 * 1024 * 1024));
    let r = api.raw(Method::POST, "/api/v1/rates", &api.finance, "application/json", big).await;
    assert_error(&r, 413, "payload_too_large", "body");
    // unreadable JSON is a 400, a wrong content type too; both JSON
    let r = api.raw(Method::POST, "/api/v1/rates", &api.finance, "application/json", "{".into()).await;
    assert_error(&r, 400, "bad_request", "body");
    let r = api.raw(Method::POST, "/api/v1/rates", &api.finance, "text/plain", "{}".into()).await;
    assert_eq!((r.0, r.1["code"].as_str()), (400, Some("bad_request")), "{}", r.1);
    assert_eq!(write_counts(&pool).await, before);
}

#[sqlx::test]
async fn fields_are_named_once_and_invalid_values_are_422(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    let mut body = rate("A100-80GB", "2026-11-01");
    body["extra"] = json!(1);
    let r = api.call(Method::POST, "/api/v1/rates", fin, Some(body)).await;
    assert_error(&r, 422, "invalid_input", "extra");
    let r = api
        .call(
            Method::POST,
            "/api/v1/rates",
            fin,
            Some(json!({"gpu_model": "A", "effective_from": "2026-11-01", "rate": []})),
        )
        .await;
    assert_error(&r, 422, "invalid_input", "rate");
    let message = r.1["message"].as_str().unwrap();
    assert!(message.starts_with("rate: ") && !message.contains("rate: rate"), "{message}");
    let r = api.call(Method::POST, "/api/v1/bills/2026-10/close", fin, Some(json!({"mode": 1}))).await;
    assert_error(&r, 422, "invalid_input", "mode");
    // every body is an object: an array (which serde would read as a struct's fields in order) or a scalar is
    // refused, and nothing is written
    let before = write_counts(&pool).await;
    for body in [json!([null, null]), json!(["A100-80GB", "2026-11-01", "10"]), json!("x"), json!(null)] {
        let r = api.call(Method::POST, "/api/v1/rates", fin, Some(body.clone())).await;
        assert_error(&r, 422, "invalid_input", "body");
        let r = api.call(Method::PUT, "/api/v1/cloud-rates/A100-80GB", fin, Some(body)).await;
        assert_error(&r, 422, "invalid_input", "body");
    }
    assert_eq!(write_counts(&pool).await, before);
    // query values that parse but are out of bounds, or do not parse
    for (path, field) in [
        ("/api/v1/usage?from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z", "to"),
        ("/api/v1/usage?from=yesterday&to=2026-11-01T00:00:00Z", "from"),
        ("/api/v1/reports/low-utilization?top=0", "top"),
        ("/api/v1/reports/low-utilization?top=501", "top"),
        ("/api/v1/audit?limit=0", "limit"),
        ("/api/v1/audit?limit=1001", "limit"),
        ("/api/v1/idle?rule=monthly", "rule"),
        ("/api/v1/idle?hours=0", "hours"),
        ("/api/v1/bills/2026-13", "month"),
    ] {
        let r = api.call(Method::GET, path, fin, None).await;
        assert_error(&r, 422, "invalid_input", field);
    }
}

#[sqlx::test]
async fn long_ranges_are_capped(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    // a row per pod over four months; anything over years
    let r = api
        .call(Method::GET, "/api/v1/usage?from=2026-01-01T00:00:00Z&to=2026-05-01T00:00:00Z&group_by=pod", fin, None)
        .await;
    assert_error(&r, 422, "invalid_input", "to");
    assert!(r.1["message"].as_str().unwrap().contains("92 days"), "{}", r.1);
    let (s, rows) = api
        .call(Method::GET, "/api/v1/usage?from=2026-01-01T00:00:00Z&to=2026-05-01T00:00:00Z&group_by=team", fin, None)
        .await;
    assert_eq!((s, rows), (200, json!([])));
    let r = api.call(Method::GET, "/api/v1/usage?from=2001-01-01T00:00:00Z&to=2026-05-01T00:00:00Z", fin, None).await;
    assert_error(&r, 422, "invalid_input", "to");
    let r = api
        .call(
            Method::GET,
            "/api/v1/reports/low-utilization?from=2026-01-01T00:00:00Z&to=2026-06-01T00:00:00Z",
            fin,
            None,
        )
        .await;
    assert_error(&r, 422, "invalid_input", "to");
    let r = api
        .call(
            Method::GET,
            "/api/v1/rent-vs-build?model=A100-80GB&from=2001-01-01T00:00:00Z&to=2026-01-01T00:00:00Z",
            fin,
            None,
        )
        .await;
    assert_error(&r, 422, "invalid_input", "to");
}

#[sqlx::test]
async fn a_read_past_the_timeout_is_a_json_503_and_a_write_answers_its_outcome(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    // the same application with a short request timeout, and a read that must wait: another transaction holds the
    // rates table, so the read cannot finish before the timeout however fast the machine (a zero timeout was not
    // enough: a read whose every round trip happened to be answered at once finished inside its first poll)
    let state = cardhour::usecase::state::AppState::new(pool.clone(), chrono_tz::Asia::Shanghai);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = cardhour::http::server::app_with_timeout(state, std::time::Duration::from_millis(300));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE rate_versions IN ACCESS EXCLUSIVE MODE").execute(&mut *holder).await.unwrap();
    let started = std::time::Instant::now();
    let resp = api.client.get(format!("{base}/api/v1/rates")).bearer_auth(&api.finance).send().await.unwrap();
    let waited = started.elapsed();
    let status = resp.status().as_u16();
    let body: Value = resp.json().await.unwrap();
    holder.rollback().await.unwrap();
    assert_eq!((status, body["code"].as_str()), (503, Some("timeout")), "{body}");
    assert!(
        waited < std::time::Duration::from_secs(5),
        "answered when the timeout ran out, not when the lock went: {waited:?}"
    );
    // a write is never cut mid-commit (a 503 for what was applied): it answers what it did, and did it once
    let before = write_counts(&pool).await;
    let resp = api
        .client
        .post(format!("{base}/api/v1/rates"))
        .bearer_auth(&api.finance)
        .json(&rate("A100-80GB", "2026-11-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201, "{}", resp.text().await.unwrap());
    let changed: Vec<(&str, i64)> = write_counts(&pool)
        .await
        .into_iter()
        .zip(&before)
        .filter(|(a, b)| a.1 != b.1)
        .map(|(a, b)| (a.0, a.1 - b.1))
        .collect();
    assert_eq!(changed, [("rate_versions", 1), ("audit_log", 1)], "the write, once, with its audit row");
}

#[sqlx::test]
async fn swagger_ui_sends_the_spec_to_no_validator(pool: PgPool) {
    let api = TestApi::start(pool).await;
    let resp = api.client.get(format!("{}/swagger-ui/swagger-initializer.js", api.base)).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let js = resp.text().await.unwrap();
    let compact: String = js.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(compact.contains(r#""validatorUrl":"none""#), "{js}");
    assert!(compact.contains("/api/v1/openapi.json"), "{js}");
}

#[test]
fn the_cli_refuses_the_same_months_dates_and_names() {
    let env = [("DATABASE_URL", "postgres://postgres@127.0.0.1:1/none")];
    for (args, needle) in [
        (vec!["export", "--month", "0000-01"], "2000-01 and 2100-12"),
        (vec!["budgets", "--month", "9999-12"], "2000-01 and 2100-12"),
        (vec!["export", "--month", "2026-11", "--team", "Bad\u{202E}Team"], "team id"),
        (vec!["usage", "--from", "1970-01-01", "--to", "2026-11-01"], "between 2000-01-01 and 2100-12-31"),
        (vec!["usage", "--from", "2026-11-01", "--to", "2026-11-02", "--cluster", "a b"], "--cluster"),
    ] {
        let out = common::run_cardhour(&args, &env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// `/readyz` is 200 only with the schema this binary was built for: a migration missing from the database or a
/// database never migrated is a JSON 503, while `/healthz` (liveness) stays 200.
#[sqlx::test]
async fn readiness_probe_requires_every_migration(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let migrations = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "sql"))
        .count();
    assert!(migrations >= 10);
    let (s, body) = api.call(Method::GET, "/readyz", None, None).await;
    assert_eq!((s, &body["status"], body["migrations"].as_u64()), (200, &json!("ready"), Some(migrations as u64)));

    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = (SELECT max(version) FROM _sqlx_migrations)")
        .execute(&pool)
        .await
        .unwrap();
    let r = api.call(Method::GET, "/readyz", None, None).await;
    assert_error(&r, 503, "unavailable", "");
    assert!(r.1["message"].as_str().unwrap().contains("1 migration(s) not applied"), "{}", r.1);

    sqlx::query("DROP TABLE _sqlx_migrations").execute(&pool).await.unwrap();
    let r = api.call(Method::GET, "/readyz", None, None).await;
    assert_error(&r, 503, "unavailable", "");
    assert_eq!(api.client.get(format!("{}/healthz", api.base)).send().await.unwrap().status().as_u16(), 200);
}
