//! The ingest: whole hours read from Prometheus, metered, and written to Postgres one transaction per hour.

mod fetch;
pub mod window;
mod worker;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::{StreamExt, TryStreamExt, stream};
use serde::Serialize;
use sqlx::PgPool;

pub use fetch::{FetchSpec, Fetched, UTIL_MARGIN_MS, selectors};
pub use worker::{WorkerOptions, run_worker};

use crate::db;
use crate::metering::{Anomaly, AnomalyKind, HourOutput, MeterConfig, meter_hour};
use crate::prom::{PromClient, PromError, RetryPolicy};
use crate::shutdown::Stop;
use window::HOUR_MS;

/// How one cluster is read.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    pub cluster: String,
    pub fetch: FetchSpec,
    pub meter: MeterConfig,
    /// Hours read per round of queries during a backfill.
    pub chunk_hours: usize,
    pub retry: RetryPolicy,
}

#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    #[error(transparent)]
    Prometheus(#[from] PromError),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Range(#[from] window::RangeError),
    #[error("cluster name `{0}` is invalid: use letters, digits, `.`, `_` or `-` (at most 63)")]
    ClusterName(String),
}

/// What an ingest did, for the terminal and for the note on the run.
#[derive(Debug, Default, Serialize)]
pub struct IngestSummary {
    pub cluster: String,
    pub hours: u64,
    pub usage_rows: u64,
    pub samples_read: u64,
    pub gpu_hours: f64,
    pub effective_gpu_hours: f64,
    pub unmetered_gpu_hours: f64,
    /// The scrape intervals used, in seconds, and in how many hours.
    pub scrape_intervals_s: BTreeMap<String, u64>,
    pub non_finite_samples: u64,
    /// Anomaly kind → subject → count, over all hours.
    pub anomalies: BTreeMap<String, BTreeMap<String, u64>>,
    pub watermark: Option<DateTime<Utc>>,
    /// A stop was asked for: the hours after the last stored one were left for the next run.
    pub stopped: bool,
}

impl IngestSummary {
    fn add(&mut self, out: &HourOutput, samples_read: u64) {
        self.hours += 1;
        self.usage_rows += out.rows.len() as u64;
        self.samples_read += samples_read;
        for r in &out.rows {
            self.gpu_hours += r.gpu_seconds / 3600.0;
            self.effective_gpu_hours += r.effective_gpu_seconds / 3600.0;
            self.unmetered_gpu_hours += r.unmetered_gpu_seconds / 3600.0;
        }
        if let Some(ms) = out.interval_ms {
            *self.scrape_intervals_s.entry(format!("{}", ms as f64 / 1000.0)).or_default() += 1;
        }
        for a in &out.anomalies {
            if a.kind == AnomalyKind::NonFiniteSample {
                self.non_finite_samples += a.count;
            }
            *self.anomalies.entry(a.kind.as_str().to_string()).or_default().entry(a.subject.clone()).or_default() +=
                a.count;
        }
    }
}

pub fn validate_cluster_name(name: &str) -> Result<(), IngestError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok { Ok(()) } else { Err(IngestError::ClusterName(name.to_string())) }
}

/// Ingests the whole hours `[from, to)`: every hour in its own transaction, idempotent, each one
/// complete or absent. `on_hour` is called after each stored hour (progress).
pub async fn backfill(
    pool: &PgPool,
    client: &PromClient,
    opts: &IngestOptions,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    on_hour: impl FnMut(DateTime<Utc>),
) -> Result<IngestSummary, IngestError> {
    backfill_until(pool, client, opts, from, to, on_hour, &Stop::never()).await
}

/// [`backfill`] that ends early, between two hours, once `stop` is asked for: the hour being stored is finished
/// (its transaction committed), a read in progress is dropped, and the summary says `stopped`.
pub async fn backfill_until(
    pool: &PgPool,
    client: &PromClient,
    opts: &IngestOptions,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    mut on_hour: impl FnMut(DateTime<Utc>),
    stop: &Stop,
) -> Result<IngestSummary, IngestError> {
    validate_cluster_name(&opts.cluster)?;
    let hours = window::hours(from, to)?;
    let mut summary = IngestSummary { cluster: opts.cluster.clone(), ..IngestSummary::default() };
    // Fetching the next run of hours overlaps with metering and storing this one.
    let mut fetched = stream::iter(window::chunks(&hours, opts.chunk_hours))
        .map(|chunk| {
            let start = chunk[0].timestamp_millis();
            let end = start + chunk.len() as i64 * HOUR_MS;
            let (client, spec, retry) = (client.clone(), opts.fetch.clone(), opts.retry);
            async move { fetch::fetch(&client, &spec, start, end, retry).await.map(|f| (chunk, f)) }
        })
        .buffered(2);
    'chunks: loop {
        let next = tokio::select! {
            biased;
            () = stop.requested() => None,
            next = fetched.try_next() => next?,
        };
        let Some((chunk, data)) = next else { break };
        let hours_ms: Vec<i64> = chunk.iter().map(DateTime::timestamp_millis).collect();
        for (hour, (input, non_finite)) in chunk.into_iter().zip(data.into_hours(&hours_ms)) {
            if stop.is_requested() {
                break 'chunks;
            }
            let samples = input_samples(&input);
            let meter = opts.meter.clone();
            let mut out = tokio::task::spawn_blocking(move || meter_hour(&input, &meter))
                .await
                .expect("metering is pure and does not panic");
            out.anomalies.extend(non_finite.into_iter().map(|(metric, count)| Anomaly {
                kind: AnomalyKind::NonFiniteSample,
                subject: metric,
                count,
            }));
            summary.watermark = Some(store_hour(pool, &opts.cluster, client.base_url(), hour, &out).await?);
            tracing::debug!(cluster = %opts.cluster, %hour, rows = out.rows.len(), "stored hour");
            summary.add(&out, samples);
            on_hour(hour);
        }
    }
    summary.stopped = summary.hours < hours.len() as u64;
    Ok(summary)
}

fn input_samples(i: &crate::metering::HourInput) -> u64 {
    let n = i.requests.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.running.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.devices.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.hami.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.namespaces.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.capacity.iter().map(|s| s.samples.len()).sum::<usize>();
    n as u64
}

/// Writes one metered hour in one transaction (registering the cluster with its first hour) and moves the
/// watermark.
async fn store_hour(
    pool: &PgPool,
    cluster: &str,
    prometheus_url: &str,
    hour: DateTime<Utc>,
    out: &HourOutput,
) -> Result<DateTime<Utc>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    db::clusters::upsert(&mut tx, cluster, prometheus_url).await?;
    db::usage::lock_hour(&mut tx, cluster, hour).await?;
    db::usage::replace_hour(&mut tx, cluster, hour, out).await?;
    let mark = db::watermark::advance(&mut tx, cluster, hour).await?;
    tx.commit().await?;
    Ok(mark)
}

/// The default Prometheus request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
