//! VictoriaMetrics' export as a sample source: a misbehaving export (absent, not JSON, cut off) is a clear error
//! naming the source and writes nothing; `auto` chooses the export when remote read is not streamed.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use cardhour::ingest::{self, FetchSpec, IngestOptions, SampleSource, SourceKind, SourceRequest, WriteMode};
use cardhour::metering::MeterConfig;
use cardhour::prom::{PromClient, RetryPolicy};
use cardhour::shutdown::Stop;
use chrono::{DateTime, Utc};
use sqlx::PgPool;

const EMPTY: &str = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;

/// A server whose export answers `export` (status, body), whose remote read is absent, and whose query API answers
/// every query with no series.
async fn serve(export: (StatusCode, &'static str)) -> String {
    let handler = move || async move { (export.0, [("content-type", "application/json")], export.1).into_response() };
    let query = || async { ([("content-type", "application/json")], EMPTY).into_response() };
    let app = Router::new()
        .route("/api/v1/export", post(handler))
        .route("/api/v1/query", post(query))
        .route("/api/v1/query_range", post(query));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

fn opts() -> IngestOptions {
    IngestOptions {
        cluster: "vm".into(),
        fetch: FetchSpec { matchers: None, team_label: "label_team".into() },
        meter: MeterConfig::default(),
        chunk_hours: 6,
        batch_samples: None,
        retry: RetryPolicy {
            attempts: Some(2),
            first_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(20),
        },
    }
}

fn t(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar::<_, i64>(sql).fetch_one(pool).await.unwrap()
}

fn client(url: &str) -> PromClient {
    PromClient::new(url, Duration::from_secs(5)).unwrap()
}

const LINE: &str = r#"{"metric":{"__name__":"kube_pod_status_phase"},"values":[1],"timestamps":[1767225600000]}"#;

#[sqlx::test]
async fn a_broken_export_is_a_clear_error_naming_it_and_writes_nothing(pool: PgPool) {
    let cases: Vec<((StatusCode, &'static str), &str)> = vec![
        ((StatusCode::NOT_FOUND, "404 page not found"), "endpoint absent (HTTP 404)"),
        ((StatusCode::OK, "<html>not an export</html>\n"), "line 1 is not an export line"),
        ((StatusCode::OK, LINE), "truncated answer"),
    ];
    for (answer, needle) in cases {
        let url = serve(answer).await;
        let source = SampleSource::new(client(&url), SourceKind::VmExport, "--source vm-export", false);
        let (from, to) = (t("2026-01-01T00:00:00Z"), t("2026-01-01T03:00:00Z"));
        let err = ingest::backfill_until(
            &pool,
            &source,
            &opts(),
            from,
            to,
            |_| {},
            &WriteMode::ingest(&test_writer()),
            &Stop::never(),
        )
        .await
        .unwrap_err()
        .to_string();
        assert!(err.contains(&format!("vm export at {url}/api/v1/export: ")), "{err}");
        assert!(err.contains(needle), "expected {needle:?} in {err}");
        assert_eq!(count(&pool, "SELECT count(*) FROM ingested_hours").await, 0, "{needle}");
        assert_eq!(count(&pool, "SELECT count(*) FROM gpu_usage_hourly").await, 0, "{needle}");
    }
}

#[sqlx::test]
async fn auto_chooses_the_export_when_remote_read_is_absent(pool: PgPool) {
    let url = serve((StatusCode::OK, "")).await;
    let source = ingest::source::choose(&pool, client(&url), "vm", SourceRequest::Auto).await.unwrap();
    assert_eq!(source.kind(), SourceKind::VmExport, "{}", source.reason());
    assert!(source.reason().contains("VictoriaMetrics export answered the probe"), "{}", source.reason());
    // an export absent as well leaves the query API
    let none = serve((StatusCode::NOT_FOUND, "404 page not found")).await;
    let source = ingest::source::choose(&pool, client(&none), "vm2", SourceRequest::Auto).await.unwrap();
    assert_eq!(source.kind(), SourceKind::Query, "{}", source.reason());
    assert!(source.reason().contains("vm export at"), "{}", source.reason());
}

/// The tests' writer (the command line's operator, audited as `test`).
fn test_writer() -> cardhour::access::Writer {
    cardhour::access::Writer::of(&cardhour::access::Principal::operator("test")).expect("an operator writes")
}
