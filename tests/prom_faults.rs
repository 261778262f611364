//! Prometheus misbehaving: unreachable, slow, 5xx, malformed JSON. A clear error, retries in the worker, and
//! never a partial hour in the database.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use cardhour::ingest::{self, FetchSpec, IngestOptions, WorkerOptions};
use cardhour::metering::MeterConfig;
use cardhour::prom::{PromClient, PromError, RetryPolicy};
use chrono::{DateTime, Utc};
use sqlx::PgPool;

const EMPTY: &str = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;

/// A server of the two query routes on a loopback port answering every query with `answer(call number)`.
async fn serve<F>(answer: F) -> (String, Arc<AtomicUsize>)
where
    F: Fn(usize) -> (StatusCode, &'static str, Duration) + Send + Sync + 'static,
{
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let answer = Arc::new(answer);
    let handler = move || {
        let (answer, counter) = (answer.clone(), counter.clone());
        async move {
            let (status, body, delay) = answer(counter.fetch_add(1, Ordering::SeqCst));
            tokio::time::sleep(delay).await;
            (status, [("content-type", "application/json")], body).into_response()
        }
    };
    // the range query is the trailing day's devices (one per chunk)
    let app = Router::new().route("/api/v1/query", post(handler.clone())).route("/api/v1/query_range", post(handler));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), calls)
}

fn opts(retry: RetryPolicy) -> IngestOptions {
    IngestOptions {
        cluster: "faulty".into(),
        fetch: FetchSpec { matchers: None, team_label: "label_team".into() },
        meter: MeterConfig::default(),
        chunk_hours: 6,
        batch_samples: None,
        retry,
    }
}

fn quick_retry() -> RetryPolicy {
    RetryPolicy { attempts: Some(3), first_delay: Duration::from_millis(10), max_delay: Duration::from_millis(50) }
}

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

async fn stored_hours(pool: &PgPool) -> i64 {
    sqlx::query_scalar::<_, i64>("SELECT count(*) FROM ingested_hours").fetch_one(pool).await.unwrap()
}

async fn ingest_against(
    pool: &PgPool,
    url: &str,
    timeout: Duration,
) -> Result<ingest::IngestSummary, ingest::IngestError> {
    let client = PromClient::new(url, timeout).unwrap();
    ingest::backfill(pool, &client, &opts(quick_retry()), t("2026-01-01T00:00:00Z"), t("2026-01-01T03:00:00Z"), |_| {})
        .await
}

#[sqlx::test]
async fn server_errors_are_retried_then_reported_and_nothing_is_written(pool: PgPool) {
    let (url, calls) = serve(|_| (StatusCode::INTERNAL_SERVER_ERROR, "boom", Duration::ZERO)).await;
    let err = ingest_against(&pool, &url, Duration::from_secs(5)).await.unwrap_err();
    assert!(err.to_string().contains("HTTP 500"), "{err}");
    // 6 concurrent queries × 3 attempts (the second chunk's prefetch may add more)
    assert!(calls.load(Ordering::SeqCst) >= 18);
    assert_eq!(stored_hours(&pool).await, 0);
}

#[sqlx::test]
async fn malformed_json_is_a_clear_error(pool: PgPool) {
    let (url, _) = serve(|_| {
        (StatusCode::OK, r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{}"#, Duration::ZERO)
    })
    .await;
    let err = ingest_against(&pool, &url, Duration::from_secs(5)).await.unwrap_err();
    assert!(matches!(err, ingest::IngestError::Prometheus(PromError::Malformed(_))), "{err}");
    assert_eq!(stored_hours(&pool).await, 0);
}

#[sqlx::test]
async fn a_slow_prometheus_times_out(pool: PgPool) {
    let (url, _) = serve(|_| (StatusCode::OK, EMPTY, Duration::from_secs(3))).await;
    let err = ingest_against(&pool, &url, Duration::from_millis(300)).await.unwrap_err();
    assert!(matches!(err, ingest::IngestError::Prometheus(PromError::Timeout { .. })), "{err}");
    assert_eq!(stored_hours(&pool).await, 0);
}

#[sqlx::test]
async fn an_unreachable_prometheus_is_named(pool: PgPool) {
    // a port nobody listens on: bind, note it, close
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let err = ingest_against(&pool, &format!("http://127.0.0.1:{port}"), Duration::from_secs(2)).await.unwrap_err();
    assert!(err.to_string().contains("unreachable"), "{err}");
    assert_eq!(stored_hours(&pool).await, 0);
}

#[sqlx::test]
async fn a_rejected_query_is_not_retried(pool: PgPool) {
    let (url, calls) = serve(|_| {
        (StatusCode::BAD_REQUEST, r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#, Duration::ZERO)
    })
    .await;
    let err = ingest_against(&pool, &url, Duration::from_secs(5)).await.unwrap_err();
    assert!(err.to_string().contains("bad_data"), "{err}");
    // one read per selector (and the probe), none again
    assert!(calls.load(Ordering::SeqCst) <= cardhour::ingest::SELECTORS + 1, "a permanent error must not be retried");
    assert_eq!(stored_hours(&pool).await, 0);
}

#[sqlx::test]
async fn the_worker_backs_off_until_prometheus_recovers(pool: PgPool) {
    // the first 8 queries fail; the worker keeps trying and then stores every hour
    let (url, calls) = serve(|n| {
        if n < 8 {
            (StatusCode::SERVICE_UNAVAILABLE, "warming up", Duration::ZERO)
        } else {
            (StatusCode::OK, EMPTY, Duration::ZERO)
        }
    })
    .await;
    let client = PromClient::new(&url, Duration::from_secs(5)).unwrap();
    let w = WorkerOptions {
        lateness: Duration::from_secs(600),
        reprocess_hours: 1,
        initial_hours: 3,
        once: true,
        lease: Duration::from_secs(30),
        span: None,
        name: "test-worker".into(),
        max_backoff: Duration::from_secs(2),
    };
    let started = std::time::Instant::now();
    let mut cycles = Vec::new();
    let cluster = ingest::WorkerCluster { source: ingest::SampleSource::query(client), ingest: opts(quick_retry()) };
    ingest::run_worker(&pool, &[cluster], &w, async |from, to| cycles.push((from, to)), std::future::pending())
        .await
        .unwrap();
    assert!(calls.load(Ordering::SeqCst) > 8);
    assert!(started.elapsed() >= Duration::from_secs(1), "the worker backs off before retrying");
    assert_eq!(stored_hours(&pool).await, 3);
    let mark: DateTime<Utc> =
        sqlx::query_scalar("SELECT complete_until FROM ingest_watermarks WHERE cluster = 'faulty'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(mark, ingest::window::floor_hour(Utc::now() - chrono::Duration::minutes(10)));
    // the hook after a cycle (budget checks) sees the span that cycle stored, once the retries succeeded
    assert_eq!(cycles, [(mark - chrono::Duration::hours(3), mark)]);
}
