//! cardhour's own Prometheus metrics: one recorder per process (the `metrics` facade with
//! `metrics-exporter-prometheus`, rendered by our own `/metrics` handler, no listener of its own), the figures the
//! ingest reports ([`ingest`]), HTTP request durations ([`http`]), and gauges read from Postgres at scrape time
//! ([`scrape`]) so that every process tells the same lag, failed windows and undelivered alerts however many
//! workers run. [`CATALOGUE`] names every family exported; the dashboard and the alert rules are checked against it.

pub mod http;
pub mod ingest;
pub mod scrape;

use std::sync::OnceLock;
use std::time::Duration;

use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use sqlx::PgPool;

/// What a family is, as Prometheus' `# TYPE` line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Where a family's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Counted by this process since it started (the in-memory recorder).
    Process,
    /// Read from Postgres (or the pool) at every scrape: the same in every process.
    Scrape,
}

/// One exported metric family.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub labels: &'static [&'static str],
    pub origin: Origin,
    pub help: &'static str,
}

const fn family(
    name: &'static str,
    kind: Kind,
    labels: &'static [&'static str],
    origin: Origin,
    help: &'static str,
) -> Family {
    Family { name, kind, labels, origin, help }
}

pub const BUILD_INFO: &str = "cardhour_build_info";
pub const HTTP_DURATION: &str = "cardhour_http_request_duration_seconds";
pub const HOURS: &str = "cardhour_ingest_hours_total";
pub const HOURS_KEPT: &str = "cardhour_ingest_hours_kept_total";
pub const USAGE_ROWS: &str = "cardhour_ingest_usage_rows_total";
pub const SAMPLES: &str = "cardhour_ingest_samples_total";
pub const READ_DURATION: &str = "cardhour_ingest_read_duration_seconds";
pub const ANOMALIES: &str = "cardhour_ingest_anomalies_total";
pub const BATCH_DURATION: &str = "cardhour_ingest_batch_duration_seconds";
pub const LAST_SUCCESS: &str = "cardhour_ingest_last_success_timestamp_seconds";
pub const INGEST_UP: &str = "cardhour_ingest_up";
pub const SOURCE_ERRORS: &str = "cardhour_source_errors_total";
pub const SOURCE_RETRIES: &str = "cardhour_source_retries_total";
pub const WATERMARK: &str = "cardhour_ingest_watermark_timestamp_seconds";
pub const WATERMARK_LAG: &str = "cardhour_ingest_watermark_lag_seconds";
pub const FAILED_WINDOWS: &str = "cardhour_ingest_failed_windows";
pub const ALERTS_UNDELIVERED: &str = "cardhour_budget_alerts_undelivered";
pub const QUEUED_HOURS: &str = "cardhour_ingest_queued_hours";
pub const LEASED_HOURS: &str = "cardhour_ingest_leased_hours";
pub const FAILING_HOURS: &str = "cardhour_ingest_failing_hours";
pub const FAILURES_IN_ROW: &str = "cardhour_ingest_failures_in_row";
pub const BATCH_HOURS: &str = "cardhour_ingest_batch_hours";
pub const RECOVERED: &str = "cardhour_ingest_recovered_timestamp_seconds";
pub const READY: &str = "cardhour_ready";
pub const MIGRATIONS_PENDING: &str = "cardhour_migrations_pending";
pub const DATABASE_UP: &str = "cardhour_metrics_database_up";
pub const POOL_CONNECTIONS: &str = "cardhour_db_pool_connections";
pub const POOL_MAX: &str = "cardhour_db_pool_max_connections";

use Kind::{Counter, Gauge, Histogram};
use Origin::{Process, Scrape};

/// Every family cardhour exports, with its labels. Label values are bounded: route templates (never raw paths),
/// methods from a fixed list, status codes, cluster names, and the fixed kinds of `crate::prom::PromError::kind` and of
/// the metering's anomalies.
pub const CATALOGUE: &[Family] = &[
    family(
        BUILD_INFO,
        Gauge,
        &["version", "process"],
        Process,
        "Always 1: the version and the command (serve, worker) of this process.",
    ),
    family(
        HTTP_DURATION,
        Histogram,
        &["route", "method", "status"],
        Process,
        "HTTP requests by route template (`unmatched` for none), method and status: duration until the answer's head; _count is the number of requests.",
    ),
    family(HOURS, Counter, &["cluster"], Process, "Hours written by this process (a re-processed hour counts again)."),
    family(HOURS_KEPT, Counter, &["cluster"], Process, "Stored hours left as they were because the read held less."),
    family(USAGE_ROWS, Counter, &["cluster"], Process, "Usage rows written."),
    family(
        SAMPLES,
        Counter,
        &["cluster", "source"],
        Process,
        "Raw samples read, by sample source (remote-read, vm-export, query).",
    ),
    family(
        READ_DURATION,
        Histogram,
        &["cluster", "source"],
        Process,
        "Time to read one chunk of hours from the source.",
    ),
    family(
        ANOMALIES,
        Counter,
        &["cluster", "kind"],
        Process,
        "Anomalies met in written hours, by kind (unknown_resource, non_finite_sample, … as the metering names them), counting each occurrence.",
    ),
    family(
        BATCH_DURATION,
        Histogram,
        &["cluster", "outcome"],
        Process,
        "One ingest batch (a run of hours of one cluster), ok or error.",
    ),
    family(LAST_SUCCESS, Gauge, &["cluster"], Process, "Unix time of the last ingest batch that succeeded."),
    family(INGEST_UP, Gauge, &["cluster"], Process, "1 after a batch succeeded, 0 after a read or a batch failed."),
    family(
        SOURCE_ERRORS,
        Counter,
        &["cluster", "kind"],
        Process,
        "Failed requests to the cluster's source (every attempt), by kind: unreachable, timeout, http_status, query_rejected, bad_answer, bad_url, remote_read, vm_export, denied (401/403), tls, credentials.",
    ),
    family(
        SOURCE_RETRIES,
        Counter,
        &["cluster", "kind"],
        Process,
        "Failed source requests that were tried again, by kind.",
    ),
    family(
        WATERMARK,
        Gauge,
        &["cluster"],
        Scrape,
        "Unix time of the cluster's watermark: every hour before it is stored.",
    ),
    family(WATERMARK_LAG, Gauge, &["cluster"], Scrape, "Seconds from the cluster's watermark to now."),
    family(FAILED_WINDOWS, Gauge, &["cluster"], Scrape, "Failed reads whose hours were not all stored again since."),
    family(QUEUED_HOURS, Gauge, &["cluster"], Scrape, "Hours queued for the workers (due or not), held ones included."),
    family(LEASED_HOURS, Gauge, &["cluster"], Scrape, "Queued hours a worker holds under a lease now."),
    family(
        FAILING_HOURS,
        Gauge,
        &["cluster"],
        Scrape,
        "Queued hours whose last read failed, waiting for their retry after a backoff.",
    ),
    family(
        FAILURES_IN_ROW,
        Gauge,
        &["cluster"],
        Scrape,
        "Batches of the cluster that failed in a row (0 once one is stored again, or nothing failed is left queued).",
    ),
    family(
        BATCH_HOURS,
        Gauge,
        &["cluster"],
        Scrape,
        "Hours the workers read per batch now (halved after a timeout, back up an hour per stored batch).",
    ),
    family(RECOVERED, Gauge, &["cluster"], Scrape, "Unix time the cluster's reads last recovered after failures."),
    family(
        ALERTS_UNDELIVERED,
        Gauge,
        &["attempted"],
        Scrape,
        "Budget alerts not delivered to the webhook: attempted=\"true\" when a delivery was tried and failed, \"false\" when none was tried (no webhook configured yet).",
    ),
    family(
        READY,
        Gauge,
        &[],
        Scrape,
        "1 when /readyz would answer 200: the database answers and every migration is applied.",
    ),
    family(MIGRATIONS_PENDING, Gauge, &[], Scrape, "Migrations of this binary the database has not applied."),
    family(
        DATABASE_UP,
        Gauge,
        &[],
        Scrape,
        "1 when this scrape read the database's figures within the scrape's time limit.",
    ),
    family(POOL_CONNECTIONS, Gauge, &["state"], Scrape, "Connections of this process's database pool, idle or in_use."),
    family(POOL_MAX, Gauge, &[], Scrape, "The most connections this process's database pool opens."),
];

/// The families [`CATALOGUE`] names (without `_bucket`, `_sum`, `_count` suffixes).
pub fn family_names() -> impl Iterator<Item = &'static str> {
    CATALOGUE.iter().map(|f| f.name)
}

/// Whether `series` (a series name as PromQL writes it, e.g. `…_seconds_bucket`) is one cardhour exports.
pub fn exports(series: &str) -> bool {
    CATALOGUE.iter().any(|f| {
        f.name == series
            || (f.kind == Histogram
                && ["_bucket", "_sum", "_count"].iter().any(|s| series.strip_suffix(s) == Some(f.name)))
    })
}

/// Seconds, for HTTP answers: 5 ms … 60 s (the request timeout).
const HTTP_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];
/// Seconds, for reads and batches: a chunk of a small cluster takes a fraction of a second, a backfill of a large
/// one an hour.
const INGEST_BUCKETS: &[f64] = &[0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process's recorder (once; later calls return the same handle) and says which command runs.
pub fn install(process: &'static str) -> &'static PrometheusHandle {
    let mut first = false;
    let handle = HANDLE.get_or_init(|| {
        first = true;
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(HTTP_DURATION.into()), HTTP_BUCKETS)
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full(READ_DURATION.into()), INGEST_BUCKETS))
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full(BATCH_DURATION.into()), INGEST_BUCKETS))
            .expect("the bucket lists are not empty");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        if let Err(e) = metrics::set_global_recorder(recorder) {
            // another recorder (an embedding program's) keeps the figures: /metrics then shows the scrape-time ones
            tracing::warn!(error = %e, "a metrics recorder is installed already; /metrics shows only database figures");
        }
        handle
    });
    if first {
        describe();
        metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION"), "process" => process).set(1.0);
        // histograms are drained at every render; without scrapes this keeps their samples from piling up
        let h = handle.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(30));
                loop {
                    tick.tick().await;
                    h.run_upkeep();
                }
            });
        }
    }
    handle
}

fn describe() {
    for f in CATALOGUE.iter().filter(|f| f.origin == Process) {
        match f.kind {
            Counter => metrics::describe_counter!(f.name, f.help),
            Gauge => metrics::describe_gauge!(f.name, f.help),
            Histogram => metrics::describe_histogram!(f.name, f.help),
        }
    }
}

/// `GET /metrics`: what this process counted, then the figures read from the database and the pool now, in
/// Prometheus' text format. Outside every authentication, like the probes: it names clusters and routes, no
/// team, amount or user.
pub async fn metrics_handler(State(pool): State<PgPool>) -> Response {
    let mut body = HANDLE.get().map(PrometheusHandle::render).unwrap_or_default();
    body.push_str(&scrape::render(&pool).await);
    ([(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_names_each_family_once_in_prometheus_style() {
        let mut names: Vec<&str> = family_names().collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a family named twice");
        for f in CATALOGUE {
            assert!(f.name.starts_with("cardhour_"), "{}", f.name);
            assert!(f.name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'), "{}", f.name);
            assert_eq!(
                f.kind == Counter,
                f.name.ends_with("_total"),
                "{}: counters and only counters end in _total",
                f.name
            );
            if f.kind == Histogram {
                assert!(f.name.ends_with("_seconds"), "{}", f.name);
            }
        }
        assert!(exports("cardhour_http_request_duration_seconds_count"));
        assert!(exports("cardhour_ingest_watermark_lag_seconds"));
        assert!(!exports("cardhour_ingest_hours_total_count"));
        assert!(!exports("cardhour_ingest_lag"));
    }
}
