//! A source too slow for the batch a worker reads: reads that time out give the hours back and halve the batch,
//! smaller batches go through, every hour is stored, and the health report shows the batch size and the timeouts.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Form, State};
use axum::routing::post;
use cardhour::ingest::{self, FetchSpec, IngestOptions, SampleSource, WorkerCluster, WorkerOptions};
use cardhour::metering::MeterConfig;
use cardhour::prom::{PromClient, RetryPolicy};
use chrono::{DateTime, Utc};
use sqlx::PgPool;

const EMPTY: &str = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
/// Reads of a window longer than this take longer than the client's timeout.
const SLOW_ABOVE_MS: i64 = 3 * 3_600_000;

/// A query API answering every query with no series — slowly when its range selector spans more than
/// [`SLOW_ABOVE_MS`]; the ranges asked for are recorded.
async fn serve() -> (String, Arc<Mutex<Vec<i64>>>) {
    let seen: Arc<Mutex<Vec<i64>>> = Arc::default();
    let query = async |State(seen): State<Arc<Mutex<Vec<i64>>>>, Form(form): Form<Vec<(String, String)>>| {
        let query = form.iter().find(|(k, _)| k == "query").map(|(_, v)| v.clone()).unwrap_or_default();
        let range_ms = query
            .rsplit_once('[')
            .and_then(|(_, r)| r.strip_suffix("ms]"))
            .and_then(|ms| ms.parse::<i64>().ok())
            .unwrap_or(0);
        seen.lock().unwrap().push(range_ms);
        if range_ms > SLOW_ABOVE_MS {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        ([("content-type", "application/json")], EMPTY)
    };
    let range = async || ([("content-type", "application/json")], EMPTY);
    let app = Router::new()
        .route("/api/v1/query", post(query))
        .route("/api/v1/query_range", post(range))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), seen)
}

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

#[sqlx::test]
async fn a_slow_source_is_read_in_smaller_batches_until_every_hour_is_stored(pool: PgPool) {
    let (url, seen) = serve().await;
    let client = PromClient::new(&url, Duration::from_millis(300)).unwrap();
    let cluster = WorkerCluster {
        source: SampleSource::query(client),
        ingest: IngestOptions {
            cluster: "slow".into(),
            fetch: FetchSpec { matchers: None, team_label: "label_team".into() },
            meter: MeterConfig::default(),
            chunk_hours: 8,
            batch_samples: None,
            retry: RetryPolicy::cli(),
        },
    };
    let (from, to) = (t("2026-06-01T00:00:00Z"), t("2026-06-01T08:00:00Z"));
    let opts = WorkerOptions {
        lateness: Duration::from_secs(600),
        reprocess_hours: 0,
        initial_hours: 0,
        once: true,
        lease: Duration::from_secs(30),
        span: Some((from, to)),
        name: "slow-test".into(),
        max_backoff: Duration::from_secs(1),
    };
    ingest::run_worker(&pool, &[cluster], &opts, async |_, _| {}, std::future::pending()).await.unwrap();

    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM ingested_hours WHERE cluster = 'slow'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 8, "every hour stored in the end");
    // the batch shrank from 8 hours (8 h + margins, slow) to 4 (still slow) to 2 (fast), then grew by one per batch
    let ranges = seen.lock().unwrap().clone();
    assert!(!ranges.is_empty());
    let hours_asked: Vec<i64> = ranges.iter().map(|ms| ms / 3_600_000).collect();
    assert!(hours_asked.iter().any(|&h| h >= 8), "the first read spans the whole batch: {hours_asked:?}");
    assert!(hours_asked.iter().any(|&h| (2..3).contains(&h)), "a read of a 2-hour batch: {hours_asked:?}");
    let health = ingest::health::health(&pool, Utc::now()).await.unwrap();
    let w = health.clusters.iter().find(|c| c.cluster == "slow").and_then(|c| c.worker.clone()).expect("worker state");
    assert_eq!(w.last_error_kind.as_deref(), Some("timeout"), "{w:?}");
    assert!(w.last_error.as_deref().unwrap_or("").contains("did not answer within"), "{w:?}");
    assert!(w.batch_hours.is_some_and(|b| (2..8).contains(&b)), "the batch is smaller than configured: {w:?}");
    assert_eq!(w.failures_in_row, 0, "recovered: {w:?}");
    assert!(w.recovered_at.is_some(), "{w:?}");
    assert_eq!(w.queued_hours, 0, "{w:?}");
}
