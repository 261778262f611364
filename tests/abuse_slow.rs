//! Slow clients are cut off (issue 27, item 3), by `cardhour::http::server::serve` with short limits so the test is fast
//! (`cardhour serve` defaults to 30 s: `--header-timeout`, `--body-timeout`): 20 slowloris connections sending one
//! header line at a time are closed once the header timeout passes; a PUT body and a login form trickled a byte at
//! a time are answered 408 (JSON under `/api/`, a page elsewhere) once the body timeout passes; and meanwhile the
//! service answers everyone else at once. Raw TCP on loopback, a real database.

use crate::common;

use std::time::{Duration, Instant};

use cardhour::http::server::ClientLimits;
use common::api::TestApi;
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const LIMIT: Duration = Duration::from_secs(1);

async fn start(pool: PgPool) -> TestApi {
    TestApi::start_with(pool, ClientLimits { header_timeout: LIMIT, body_timeout: LIMIT }).await
}

fn addr(api: &TestApi) -> String {
    api.base.trim_start_matches("http://").to_string()
}

/// Sends `lines` one every `every` until the server closes the connection (or `give_up` passes); returns when it
/// closed, and what it sent before closing.
async fn trickle(
    addr: &str,
    head: &str,
    lines: impl Fn(usize) -> String + Send + 'static,
    every: Duration,
) -> (Duration, String) {
    let started = Instant::now();
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let (mut r, mut w) = s.into_split();
    let reader = tokio::spawn(async move {
        let mut got = Vec::new();
        // returns at EOF or reset: the server closed
        let _ = r.read_to_end(&mut got).await;
        (started.elapsed(), String::from_utf8_lossy(&got).into_owned())
    });
    let writer = tokio::spawn(async move {
        for i in 0.. {
            tokio::time::sleep(every).await;
            if w.write_all(lines(i).as_bytes()).await.is_err() || started.elapsed() > Duration::from_secs(20) {
                break;
            }
        }
    });
    let out = tokio::time::timeout(Duration::from_secs(20), reader).await.expect("the server never closed").unwrap();
    writer.abort();
    out
}

/// A plain GET on a fresh connection, timed.
async fn quick_get(api: &TestApi) -> Duration {
    let started = Instant::now();
    let (status, teams) = api.call(reqwest::Method::GET, "/api/v1/teams", Some(&api.viewer), None).await;
    assert_eq!(status, 200, "{teams}");
    assert!(teams.as_array().is_some_and(|t| !t.is_empty()));
    started.elapsed()
}

#[sqlx::test]
async fn slowloris_connections_are_closed_after_the_header_timeout(pool: PgPool) {
    let api = start(pool).await;
    let addr = addr(&api);
    let slow: Vec<_> = (0..20)
        .map(|i| {
            let addr = addr.clone();
            tokio::spawn(async move {
                trickle(
                    &addr,
                    "GET /api/v1/teams HTTP/1.1\r\nHost: x\r\n",
                    move |n| format!("X-Slow-{i}-{n}: a\r\n"),
                    Duration::from_millis(200),
                )
                .await
            })
        })
        .collect();
    // meanwhile others are served at once
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut others = Vec::new();
    for _ in 0..5 {
        others.push(quick_get(&api).await);
    }
    for t in slow {
        let (closed_after, answer) = t.await.unwrap();
        assert!(closed_after >= LIMIT - Duration::from_millis(50), "not before the limit: {closed_after:?}");
        assert!(closed_after < LIMIT * 3, "closed within the header timeout (3× margin): {closed_after:?}");
        assert!(!answer.contains("200 OK"), "never answered as if complete: {answer}");
    }
    let slowest = others.iter().max().unwrap();
    assert!(*slowest < Duration::from_millis(500), "others served meanwhile: {others:?}");
}

#[sqlx::test]
async fn a_trickled_body_is_answered_408_after_the_body_timeout(pool: PgPool) {
    let api = start(pool).await;
    let addr = addr(&api);
    // a PUT whose 20-byte body comes a byte every 200 ms (4 s in all)
    let put = format!(
        "PUT /api/v1/budgets/2026-10/vision HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 20\r\n\r\n",
        api.finance
    );
    let body = "{\"amount\": \"5000\"}  ";
    assert_eq!(body.len(), 20);
    let api_put = {
        let addr = addr.clone();
        tokio::spawn(async move {
            trickle(&addr, &put, move |i| body.get(i..=i).unwrap_or(" ").to_string(), Duration::from_millis(200)).await
        })
    };
    // a login form, the same way (a page: the answer is a page)
    let form = "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n\
                Content-Length: 40\r\n\r\n";
    let page_post = {
        let addr = addr.clone();
        tokio::spawn(async move { trickle(&addr, form, |_| "a".to_string(), Duration::from_millis(200)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let other = quick_get(&api).await;

    let (closed_after, answer) = api_put.await.unwrap();
    assert!(closed_after < LIMIT * 3, "cut within the body timeout (3× margin): {closed_after:?}");
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("connection: close"), "{answer}");
    let json: serde_json::Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!((json["status"].as_u64(), json["field"].as_str()), (Some(408), Some("body")), "{json}");
    // nothing half-written: the budget is as it was (none was set in this test)
    let budgets: i64 = sqlx::query_scalar("SELECT count(*) FROM budgets").fetch_one(&api.pool).await.unwrap();
    assert_eq!(budgets, 0);

    let (closed_after, answer) = page_post.await.unwrap();
    assert!(closed_after < LIMIT * 3, "{closed_after:?}");
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
    assert!(answer.contains("text/html") && answer.contains("408"), "a page: {answer}");
    assert!(other < Duration::from_millis(500), "others served meanwhile: {other:?}");
}

#[test]
fn cardhour_serve_defaults_to_thirty_seconds_and_refuses_a_zero() {
    assert_eq!(
        ClientLimits::default(),
        ClientLimits { header_timeout: Duration::from_secs(30), body_timeout: Duration::from_secs(30) }
    );
    let help = common::run_cardhour(["serve", "--help"], &[]);
    let text = String::from_utf8_lossy(&help.stdout);
    for (flag, env) in [("--header-timeout", "CARDHOUR_HEADER_TIMEOUT"), ("--body-timeout", "CARDHOUR_BODY_TIMEOUT")] {
        assert!(text.contains(flag) && text.contains(env) && text.contains("[default: 30s]"), "{flag}: {text}");
    }
    let out =
        common::run_cardhour(["serve", "--header-timeout", "0"], &[("DATABASE_URL", "postgres://x@127.0.0.1:1/x")]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--header-timeout"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
