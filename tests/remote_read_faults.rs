//! Remote read misbehaving: absent (404) or refused as disabled (a proxy's 405, VictoriaMetrics' 400), a
//! non-streamed answer, a truncated frame, a wrong CRC, a corrupt chunk.
//! `--source remote-read` gives a clear error naming the source and writes nothing; `auto` falls back to the query
//! API, remembers what its probe found, and says why.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use cardhour::ingest::{self, FetchSpec, IngestOptions, SampleSource, SourceKind, SourceRequest, WriteMode};
use cardhour::metering::MeterConfig;
use cardhour::prom::proto::{Chunk, ChunkEncoding, ChunkedReadResponse, ChunkedSeries, Label};
use cardhour::prom::{PromClient, RetryPolicy};
use cardhour::shutdown::Stop;
use chrono::{DateTime, Utc};
use prost::Message;
use sqlx::PgPool;

const EMPTY: &str = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
const STREAMED: &str = "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse";

type Answer = (StatusCode, &'static str, Vec<u8>);

/// What VictoriaMetrics 1.79 answers a remote read with.
const VM_UNSUPPORTED: &[u8] =
    br#"remoteAddr: "127.0.0.1:37998"; requestURI: /api/v1/read; unsupported path requested: "/api/v1/read""#;

/// A server whose remote read answers `read(call number)` and whose query API answers every query (instant or range) with no series.
async fn serve(read: impl Fn(usize) -> Answer + Send + Sync + 'static) -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let read = Arc::new(read);
    let handler = move || {
        let (read, counter) = (read.clone(), counter.clone());
        async move {
            let (status, content_type, body) = read(counter.fetch_add(1, Ordering::SeqCst));
            (status, [("content-type", content_type)], body).into_response()
        }
    };
    let query = || async { ([("content-type", "application/json")], EMPTY).into_response() };
    // the range query is the trailing day's devices (one per chunk)
    let app = Router::new()
        .route("/api/v1/read", post(handler))
        .route("/api/v1/query", post(query))
        .route("/api/v1/query_range", post(query));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), calls)
}

const CASTAGNOLI: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// One frame as Prometheus writes it: uvarint length, big-endian CRC32-Castagnoli, the message.
fn frame(msg: &ChunkedReadResponse) -> Vec<u8> {
    let payload = msg.encode_to_vec();
    let mut out = Vec::new();
    let mut n = payload.len() as u64;
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(&CASTAGNOLI.checksum(&payload).to_be_bytes());
    out.extend_from_slice(&payload);
    out
}

/// A frame of one series whose single chunk says it holds 5 samples and holds none.
fn corrupt_chunk_frame() -> Vec<u8> {
    let start = t("2026-01-01T00:00:00Z").timestamp_millis();
    frame(&ChunkedReadResponse {
        chunked_series: vec![ChunkedSeries {
            labels: vec![Label { name: "__name__".into(), value: "kube_pod_status_phase".into() }],
            chunks: vec![Chunk {
                min_time_ms: start,
                max_time_ms: start + 60_000,
                r#type: ChunkEncoding::Xor as i32,
                data: vec![0, 5],
            }],
        }],
        query_index: 0,
    })
}

fn opts() -> IngestOptions {
    IngestOptions {
        cluster: "rr".into(),
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

async fn ingest_by(pool: &PgPool, source: &SampleSource) -> Result<ingest::IngestSummary, ingest::IngestError> {
    let (from, to) = (t("2026-01-01T00:00:00Z"), t("2026-01-01T03:00:00Z"));
    ingest::backfill_until(pool, source, &opts(), from, to, |_| {}, &WriteMode::ingest(&test_writer()), &Stop::never())
        .await
}

fn client(url: &str) -> PromClient {
    PromClient::new(url, Duration::from_secs(5)).unwrap()
}

#[sqlx::test]
async fn a_broken_remote_read_is_a_clear_error_naming_it_and_writes_nothing(pool: PgPool) {
    let mut wrong_crc = corrupt_chunk_frame();
    wrong_crc[3] ^= 0x01;
    let mut truncated = corrupt_chunk_frame();
    truncated.truncate(truncated.len() - 1);
    let cases: Vec<(Answer, &str)> = vec![
        ((StatusCode::NOT_FOUND, "text/plain", b"404 page not found".to_vec()), "endpoint absent (HTTP 404)"),
        // a proxy that routes only the query API
        (
            (StatusCode::METHOD_NOT_ALLOWED, "text/html", b"<html>405 Not Allowed</html>".to_vec()),
            "endpoint absent (HTTP 405)",
        ),
        // VictoriaMetrics' own answer (a real one: tests/vm_truth.rs)
        ((StatusCode::BAD_REQUEST, "text/plain", VM_UNSUPPORTED.to_vec()), "endpoint absent (HTTP 400)"),
        ((StatusCode::OK, "application/x-protobuf", vec![0, 1, 2]), "non-streamed answer"),
        ((StatusCode::OK, STREAMED, truncated), "truncated frame"),
        ((StatusCode::OK, STREAMED, wrong_crc), "checksum mismatch"),
        ((StatusCode::OK, STREAMED, corrupt_chunk_frame()), "corrupt chunk: chunk ends after 0 of its 5 samples"),
    ];
    for (answer, needle) in cases {
        let (url, calls) = serve(move |_| answer.clone()).await;
        let source = SampleSource::new(client(&url), SourceKind::RemoteRead, "--source remote-read", false);
        let err = ingest_by(&pool, &source).await.unwrap_err().to_string();
        assert!(err.contains(&format!("remote read at {url}/api/v1/read: ")), "{err}");
        assert!(err.contains(needle), "expected {needle:?} in {err}");
        // a broken stream is not retried (it would break the same way); every selector was asked once
        let calls = calls.load(Ordering::SeqCst);
        assert!((1..=cardhour::ingest::SELECTORS + 5).contains(&calls), "{needle}");
        assert_eq!(count(&pool, "SELECT count(*) FROM ingested_hours").await, 0, "{needle}");
        assert_eq!(count(&pool, "SELECT count(*) FROM clusters").await, 0, "{needle}");
    }
}

#[sqlx::test]
async fn auto_falls_back_to_the_query_api_and_remembers_its_probe(pool: PgPool) {
    let (url, calls) = serve(|_| (StatusCode::NOT_FOUND, "text/plain", b"404 page not found".to_vec())).await;
    let source = ingest::source::choose(&pool, client(&url), "rr", SourceRequest::Auto).await.unwrap();
    assert_eq!(source.kind(), SourceKind::Query);
    assert!(source.reason().contains("endpoint absent (HTTP 404)"), "{}", source.reason());
    let s = ingest_by(&pool, &source).await.unwrap();
    assert_eq!((s.hours, s.source.as_str()), (3, "query"));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "one probe, then only the query API");
    let stored: (String, String, bool) = sqlx::query_as(
        "SELECT sample_source, sample_source_reason, sample_source_probed FROM clusters WHERE name = 'rr'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((stored.0.as_str(), stored.2), ("query", true));
    assert!(stored.1.contains("endpoint absent"), "{}", stored.1);

    // the next run does not probe again: the choice is remembered for this cluster and URL, and health shows it
    let again = ingest::source::choose(&pool, client(&url), "rr", SourceRequest::Auto).await.unwrap();
    assert_eq!(again.kind(), SourceKind::Query);
    assert!(again.describe().ends_with("(remembered)"), "{}", again.describe());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    let health = ingest::health::health(&pool, Utc::now()).await.unwrap();
    assert_eq!(health.clusters[0].sample_source.as_deref(), Some("query"));
    assert!(health.clusters[0].sample_source_reason.as_deref().unwrap().contains("endpoint absent"));

    // an explicit choice is used as asked and not taken for a probe's
    let explicit =
        ingest::source::choose(&pool, client(&url), "rr", SourceRequest::Only(SourceKind::RemoteRead)).await.unwrap();
    assert_eq!((explicit.kind(), explicit.reason()), (SourceKind::RemoteRead, "--source remote-read"));
}

#[sqlx::test]
async fn auto_falls_back_when_remote_read_is_refused_as_disabled(pool: PgPool) {
    for (status, body, needle) in [
        (StatusCode::METHOD_NOT_ALLOWED, &b"<html>405 Not Allowed</html>"[..], "endpoint absent (HTTP 405)"),
        (StatusCode::BAD_REQUEST, VM_UNSUPPORTED, "endpoint absent (HTTP 400)"),
    ] {
        let (url, calls) = serve(move |_| (status, "text/plain", body.to_vec())).await;
        let cluster = format!("rr-{}", status.as_u16());
        let source = ingest::source::choose(&pool, client(&url), &cluster, SourceRequest::Auto).await.unwrap();
        assert_eq!(source.kind(), SourceKind::Query, "{}", source.reason());
        assert!(source.reason().contains(needle), "{}", source.reason());
        let s = ingest_by(&pool, &source).await.unwrap();
        assert_eq!((s.hours, s.source.as_str()), (3, "query"));
        assert_eq!(calls.load(Ordering::SeqCst), 1, "one probe, then only the query API");
    }
}

#[sqlx::test]
async fn auto_reads_a_window_by_the_query_api_when_its_remote_read_breaks(pool: PgPool) {
    // the probe gets a valid streamed answer (no frames), every read after it a corrupt chunk
    let (url, calls) = serve(|n| match n {
        0 => (StatusCode::OK, STREAMED, Vec::new()),
        _ => (StatusCode::OK, STREAMED, corrupt_chunk_frame()),
    })
    .await;
    let source = ingest::source::choose(&pool, client(&url), "rr", SourceRequest::Auto).await.unwrap();
    assert_eq!(source.kind(), SourceKind::RemoteRead, "{}", source.reason());
    let s = ingest_by(&pool, &source).await.unwrap();
    assert_eq!((s.hours, s.source.as_str()), (3, "remote-read"));
    assert!(calls.load(Ordering::SeqCst) > 1);
    assert_eq!(count(&pool, "SELECT count(*) FROM ingested_hours").await, 3);
}

/// The tests' writer (the command line's operator, audited as `test`).
fn test_writer() -> cardhour::access::Writer {
    cardhour::access::Writer::of(&cardhour::access::Principal::operator("test")).expect("an operator writes")
}
