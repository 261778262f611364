//! The ingest: whole hours read from Prometheus, metered, and written to Postgres one transaction per hour.

mod fetch;
pub mod health;
pub mod source;
pub mod window;
mod worker;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::{StreamExt, stream};
use serde::Serialize;
use sqlx::PgPool;

pub use fetch::{FetchSpec, Fetched, UTIL_MARGIN_MS, selectors};
pub use source::{SampleSource, SourceKind, SourceRequest};
pub use worker::{WorkerOptions, run_worker};

use crate::db;
pub use crate::db::history::RunCommand;
use crate::metering::{Anomaly, AnomalyKind, HourOutput, MeterConfig, meter_hour};
use crate::prom::{PromClient, PromError, RetryPolicy};
use crate::shutdown::Stop;
use crate::telemetry::ingest as telemetry;
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
    /// The sample source read (`remote-read`, `vm-export`, `query`) and why it was chosen.
    pub source: String,
    pub source_reason: String,
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
    /// The run's id: `cardhour ingest undo RUN` puts back what it replaced.
    pub run_id: Option<i64>,
    /// Stored hours whose rows this run changed (their former rows are kept with the run).
    pub hours_changed: u64,
    /// Stored hours left as they were because this run read less for them.
    pub kept: Vec<KeptRead>,
    /// Where the time went.
    pub timings: Timings,
}

/// Seconds spent per stage. Reading overlaps with metering and writing (the next hours are read meanwhile), so
/// the stages add up to more than the wall time; decoding (JSON or chunks) is part of reading.
#[derive(Debug, Default, Serialize)]
pub struct Timings {
    pub read_s: f64,
    pub decode_s: f64,
    pub meter_s: f64,
    pub write_s: f64,
}

/// A stored hour not replaced: what is stored and what was read.
#[derive(Debug, Clone, Serialize)]
pub struct KeptRead {
    pub hour: DateTime<Utc>,
    pub stored_rows: i64,
    pub stored_samples: Option<i64>,
    pub read_rows: u64,
    pub read_samples: u64,
}

/// Who is writing and whether a smaller read may replace what is stored.
#[derive(Debug, Clone)]
pub struct WriteMode {
    pub command: RunCommand,
    pub actor: String,
    /// Replace stored hours even by a read with fewer rows or samples (audited).
    pub replace_smaller: bool,
}

impl WriteMode {
    /// A one-off ingest that keeps every stored hour a smaller read would shrink.
    pub fn ingest(actor: impl Into<String>) -> Self {
        WriteMode { command: RunCommand::Ingest, actor: actor.into(), replace_smaller: false }
    }

    /// The worker: never shrinks an hour.
    pub fn worker() -> Self {
        WriteMode { command: RunCommand::Worker, actor: "worker".into(), replace_smaller: false }
    }
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
    crate::validate::cluster("cluster", name).map(drop).map_err(|_| IngestError::ClusterName(name.to_string()))
}

/// Ingests the whole hours `[from, to)`: every hour in its own transaction, idempotent, each one
/// complete or absent, read by the query API. `on_hour` is called after each stored hour (progress).
pub async fn backfill(
    pool: &PgPool,
    client: &PromClient,
    opts: &IngestOptions,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    on_hour: impl FnMut(DateTime<Utc>),
) -> Result<IngestSummary, IngestError> {
    let source = SampleSource::query(client.clone());
    backfill_until(pool, &source, opts, from, to, on_hour, &WriteMode::ingest("library"), &Stop::never()).await
}

/// [`backfill`] as one run of `mode` that ends early, between two hours, once `stop` is asked for: the hour being
/// stored is finished (its transaction committed), a read in progress is dropped, and the summary says `stopped`.
/// A stored hour is replaced only by a read with at least as many rows and samples, unless `mode` says
/// otherwise (the run is then audited); what a replacement removes is kept with the run.
#[allow(clippy::too_many_arguments)]
pub async fn backfill_until(
    pool: &PgPool,
    source: &SampleSource,
    opts: &IngestOptions,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    mut on_hour: impl FnMut(DateTime<Utc>),
    mode: &WriteMode,
    stop: &Stop,
) -> Result<IngestSummary, IngestError> {
    validate_cluster_name(&opts.cluster)?;
    let hours = window::hours(from, to)?;
    let batch = telemetry::Batch::start(&opts.cluster);
    // the nodes configured for this cluster (cards, replicas, model, sharing) where nothing on them tells it
    let mut meter_cfg = opts.meter.clone();
    {
        let mut conn = pool.acquire().await?;
        for (node, settings) in db::nodes::for_cluster(&mut conn, &opts.cluster).await? {
            meter_cfg.nodes.entry(node).or_insert(settings);
        }
    }
    let mut summary = IngestSummary {
        cluster: opts.cluster.clone(),
        source: source.kind().as_str().to_string(),
        source_reason: source.describe(),
        ..IngestSummary::default()
    };
    // the cluster and the run are registered with the first stored hour: an ingest that stores nothing (an
    // unreachable source, bad input) leaves the database as it was
    let mut run_id: Option<i64> = None;
    let decode_before = source.decode_time();
    // Fetching the next run of hours overlaps with metering and storing this one.
    let mut fetched = stream::iter(window::chunks(&hours, opts.chunk_hours))
        .map(|chunk| {
            let start = chunk[0].timestamp_millis();
            let end = start + chunk.len() as i64 * HOUR_MS;
            let (spec, retry, cluster) = (opts.fetch.clone(), opts.retry, opts.cluster.clone());
            async move {
                let started = Instant::now();
                let read = telemetry::reading(&cluster, fetch::fetch(source, &spec, start, end, retry)).await;
                (chunk[0], read.map(|f| (chunk, f, started.elapsed())))
            }
        })
        .buffered(2);
    'chunks: loop {
        let next = tokio::select! {
            biased;
            () = stop.requested() => None,
            next = fetched.next() => next,
        };
        let Some((first, read)) = next else { break };
        let (chunk, data, read_time) = match read {
            Ok(read) => read,
            Err(e) => {
                // the hours from this chunk on were not read: a close of their month must know
                record_failure(pool, &opts.cluster, first, to, mode, &e).await;
                return Err(e.into());
            }
        };
        summary.timings.read_s += read_time.as_secs_f64();
        telemetry::chunk_read(&opts.cluster, source.kind(), data.samples_read, read_time);
        let hours_ms: Vec<i64> = chunk.iter().map(DateTime::timestamp_millis).collect();
        for (hour, (input, non_finite)) in chunk.into_iter().zip(data.into_hours(&hours_ms)) {
            if stop.is_requested() {
                break 'chunks;
            }
            let samples = input_samples(&input);
            let meter = meter_cfg.clone();
            let started = Instant::now();
            let mut out = tokio::task::spawn_blocking(move || meter_hour(&input, &meter))
                .await
                .expect("metering is pure and does not panic");
            summary.timings.meter_s += started.elapsed().as_secs_f64();
            out.anomalies.extend(non_finite.into_iter().map(|(metric, count)| Anomaly {
                kind: AnomalyKind::NonFiniteSample,
                subject: metric,
                count,
            }));
            let run = RunStart { source, mode, from, to };
            let started = Instant::now();
            let stored = store_hour(pool, &opts.cluster, hour, &out, samples, run_id, &run).await?;
            summary.timings.write_s += started.elapsed().as_secs_f64();
            run_id = Some(stored.run_id);
            summary.run_id = run_id;
            summary.watermark = Some(stored.watermark);
            match stored.outcome {
                HourOutcome::Kept(k) => {
                    tracing::warn!(cluster = %opts.cluster, %hour, stored_rows = k.stored_rows,
                        stored_samples = ?k.stored_samples, read_rows = k.read_rows, read_samples = k.read_samples,
                        "kept the stored hour: this read holds less (source past its retention, restarted without \
                         its data, or the wrong URL?)");
                    summary.kept.push(k);
                    telemetry::hour_kept(&opts.cluster);
                }
                HourOutcome::Replaced { changed } => {
                    summary.hours_changed += u64::from(changed);
                    summary.add(&out, samples);
                    telemetry::hour_stored(&opts.cluster, &out);
                }
            }
            tracing::debug!(cluster = %opts.cluster, %hour, rows = out.rows.len(), "stored hour");
            on_hour(hour);
        }
    }
    summary.stopped = summary.hours + (summary.kept.len() as u64) < hours.len() as u64;
    summary.timings.decode_s = source.decode_time().saturating_sub(decode_before).as_secs_f64();
    batch.succeeded();
    Ok(summary)
}

/// Records a failed read for the readiness of its months; a failure to record it is logged, not added to the
/// error being returned.
async fn record_failure(
    pool: &PgPool,
    cluster: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    mode: &WriteMode,
    error: &PromError,
) {
    let command = mode.command.as_str();
    let recorded = async {
        let mut conn = pool.acquire().await?;
        db::readiness::record_failure(&mut conn, cluster, from, to, command, &error.to_string()).await
    };
    if let Err(e) = recorded.await {
        tracing::error!(error = %e, %cluster, %from, %to, "could not record the failed read");
    }
}

fn input_samples(i: &crate::metering::HourInput) -> u64 {
    let n = i.requests.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.running.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.devices.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.hami.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.namespaces.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.capacity.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.allocatable.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.unschedulable.iter().map(|s| s.samples.len()).sum::<usize>()
        + i.node_labels.iter().map(|s| s.samples.len()).sum::<usize>();
    n as u64
}

/// What a run is registered with.
struct RunStart<'a> {
    source: &'a SampleSource,
    mode: &'a WriteMode,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
}

/// Registers the cluster and the run in `tx`; a run that replaces smaller reads on purpose is audited.
async fn start_run(tx: &mut sqlx::PgConnection, cluster: &str, run: &RunStart<'_>) -> Result<i64, sqlx::Error> {
    let url = run.source.base_url();
    db::clusters::upsert(tx, cluster, url).await?;
    let used = db::clusters::SourceUsed {
        kind: run.source.kind().as_str(),
        reason: run.source.reason(),
        probed: run.source.probed(),
    };
    db::clusters::record_source(tx, cluster, used).await?;
    let mode = run.mode;
    let id = db::history::start_run(tx, cluster, mode.command, &mode.actor, mode.replace_smaller, None).await?;
    if mode.replace_smaller {
        let what = serde_json::json!({"run": id, "from": run.from, "to": run.to, "source": url});
        db::audit::record(tx, &mode.actor, "ingest.replace_smaller", &format!("cluster:{cluster}"), None, Some(what))
            .await?;
    }
    Ok(id)
}

enum HourOutcome {
    Replaced { changed: bool },
    Kept(KeptRead),
}

struct StoredHour {
    watermark: DateTime<Utc>,
    outcome: HourOutcome,
    run_id: i64,
}

/// Writes one metered hour in one transaction and moves the watermark — unless what is stored holds more rows or
/// samples than this read and the run does not force it: then the stored hour stays and is listed as kept. The
/// run is registered with its first hour (`run_id` `None`).
async fn store_hour(
    pool: &PgPool,
    cluster: &str,
    hour: DateTime<Utc>,
    out: &HourOutput,
    samples: u64,
    run_id: Option<i64>,
    run: &RunStart<'_>,
) -> Result<StoredHour, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let run_id = match run_id {
        Some(id) => id,
        None => start_run(&mut tx, cluster, run).await?,
    };
    let mode = run.mode;
    db::usage::lock_hour(&mut tx, cluster, hour).await?;
    let stored = db::history::stored_hour(&mut tx, cluster, hour).await?;
    let rows = out.rows.len() as u64;
    let outcome = match &stored {
        Some(s) if !mode.replace_smaller && s.is_larger_than(rows, samples) => {
            db::history::keep_hour(&mut tx, cluster, hour, run_id, s, rows, samples).await?;
            HourOutcome::Kept(KeptRead {
                hour,
                stored_rows: s.usage_rows,
                stored_samples: s.samples_read,
                read_rows: rows,
                read_samples: samples,
            })
        }
        _ => {
            if stored.is_some() {
                db::history::save_replaced(&mut tx, run_id, cluster, hour).await?;
            }
            db::usage::replace_hour(&mut tx, cluster, hour, out).await?;
            db::history::record_read(&mut tx, cluster, hour, samples, run_id).await?;
            let changed = match stored {
                Some(_) => db::history::forget_if_unchanged(&mut tx, run_id, cluster, hour).await?,
                None => false,
            };
            HourOutcome::Replaced { changed }
        }
    };
    let watermark = db::watermark::advance(&mut tx, cluster, hour).await?;
    tx.commit().await?;
    Ok(StoredHour { watermark, outcome, run_id })
}

/// The default Prometheus request timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// What an undo did.
#[derive(Debug, Serialize)]
pub struct UndoSummary {
    pub run_id: i64,
    pub undo_run_id: i64,
    pub cluster: String,
    /// The hours whose former rows were put back.
    pub hours: Vec<DateTime<Utc>>,
}

#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    #[error("ingest run {0} does not exist")]
    NoSuchRun(i64),
    #[error("ingest run {0} replaced no stored hour: there is nothing to put back")]
    NothingReplaced(i64),
    #[error("ingest run {0} was undone already, by run {1} (undo that one to redo it)")]
    AlreadyUndone(i64, i64),
    #[error("hour {hour} was ingested again by run {by} after run {run}: undo run {by} first")]
    Superseded { run: i64, hour: DateTime<Utc>, by: String },
}

/// Puts back the rows run `run_id` replaced, in one transaction: all of its hours or none. What is stored now is
/// kept with a new `undo` run first, so an undo can itself be undone; audited.
pub async fn undo(pool: &PgPool, run_id: i64, actor: &str) -> Result<UndoSummary, UndoError> {
    let mut tx = pool.begin().await?;
    let run = db::history::run(&mut tx, run_id).await?.ok_or(UndoError::NoSuchRun(run_id))?;
    if let Some(by) = db::history::undone_by(&mut tx, run_id).await? {
        return Err(UndoError::AlreadyUndone(run_id, by));
    }
    let replaced = db::history::replaced_by(&mut tx, run_id).await?;
    if replaced.is_empty() {
        return Err(UndoError::NothingReplaced(run_id));
    }
    let undo_run = db::history::start_run(&mut tx, &run.cluster, RunCommand::Undo, actor, true, Some(run_id)).await?;
    let mut hours = Vec::new();
    for h in &replaced {
        db::usage::lock_hour(&mut tx, &h.cluster, h.hour).await?;
        let now = db::history::stored_hour(&mut tx, &h.cluster, h.hour).await?;
        let current_run = now.as_ref().and_then(|s| s.run_id);
        if current_run != Some(run_id) {
            let by = current_run.map_or_else(|| "an older version".to_string(), |r| r.to_string());
            return Err(UndoError::Superseded { run: run_id, hour: h.hour, by });
        }
        db::history::save_replaced(&mut tx, undo_run, &h.cluster, h.hour).await?;
        db::history::restore(&mut tx, run_id, h).await?;
        hours.push(h.hour);
    }
    let what = serde_json::json!({"run": run_id, "undo_run": undo_run, "hours": hours.len(),
        "from": hours.first(), "to": hours.last()});
    db::audit::record(&mut tx, actor, "ingest.undo", &format!("cluster:{}", run.cluster), None, Some(what)).await?;
    tx.commit().await?;
    Ok(UndoSummary { run_id, undo_run_id: undo_run, cluster: run.cluster, hours })
}
