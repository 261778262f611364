//! The ingest: whole hours read from Prometheus, metered, and written to Postgres one transaction per batch of hours.

mod carry;
pub mod config;
mod fetch;
pub mod flags;
pub mod health;
pub mod source;
mod store;
pub mod window;
pub mod worker;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use futures_util::{StreamExt, stream};
use serde::Serialize;
use sqlx::PgPool;

pub use carry::{CarriedDevices, TRAILING_HOURS};
pub use fetch::{FetchSpec, Fetched, UTIL_MARGIN_MS, ksm_margin_ms, selectors};
pub use source::{SampleSource, SourceKind, SourceRequest};
pub use worker::{WorkerCluster, WorkerOptions, run_worker};

use crate::db;
pub use crate::db::history::RunCommand;
use crate::metering::{Anomaly, AnomalyKind, HourOutput, MeterConfig, meter_hour, node_facts};
use crate::prom::{PromClient, PromError, RetryPolicy};
use crate::shutdown::Stop;
use crate::telemetry::ingest as telemetry;
pub use store::{Fence, StoreError};
use store::{HourOutcome, MeteredHour, RunStart, store_batch};
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
    /// A worker's lease on the hours it read expired and another worker took them: nothing was stored.
    #[error("{0}")]
    LeaseLost(String),
}

impl From<StoreError> for IngestError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Database(e) => Self::Database(e),
            lost @ StoreError::LeaseLost { .. } => Self::LeaseLost(lost.to_string()),
        }
    }
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
    /// The part of `gpu_hours` bridged over kube-state-metrics scrape gaps (`--ksm-gap-bridge`).
    pub bridged_gpu_hours: f64,
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
    /// A one-off ingest by writer `by` (audited as it), keeping every stored hour a smaller read would shrink.
    pub fn ingest(by: &crate::access::Writer) -> Self {
        WriteMode { command: RunCommand::Ingest, actor: by.actor(), replace_smaller: false }
    }

    /// A one-off ingest by the library's [`backfill`] (no person behind it: audited as `library`).
    fn library() -> Self {
        WriteMode { command: RunCommand::Ingest, actor: "library".into(), replace_smaller: false }
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
            self.bridged_gpu_hours += r.bridged_gpu_seconds / 3600.0;
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

/// Ingests the whole hours `[from, to)`: every batch of `chunk_hours` hours in its own transaction, idempotent,
/// each hour complete or absent, read by the query API. `on_hour` is called after each stored hour (progress).
pub async fn backfill(
    pool: &PgPool,
    client: &PromClient,
    opts: &IngestOptions,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    on_hour: impl FnMut(DateTime<Utc>),
) -> Result<IngestSummary, IngestError> {
    let source = SampleSource::query(client.clone());
    backfill_until(pool, &source, opts, from, to, on_hour, &WriteMode::library(), &Stop::never()).await
}

/// [`backfill`] as one run of `mode` that ends early, between two batches, once `stop` is asked for: the batch
/// being stored is finished (its transaction committed), a read in progress is dropped, and the summary says
/// `stopped`. A stored hour is replaced only by a read with at least as many rows and samples, unless `mode` says
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
    let hours = window::hours(from, to)?;
    let mut ingest = ClusterIngest::new(pool, source, opts, mode, (from, to)).await?;
    // Reading the next batch overlaps with metering and storing this one.
    // Only the first batch reads its trailing day's devices: each later one follows the last and takes them from
    // what the ingest carries.
    let mut fetched = stream::iter(window::chunks(&hours, opts.chunk_hours).into_iter().enumerate())
        .map(|(i, chunk)| async move {
            (chunk[0], read_batch(source, opts, &chunk, i == 0).await.map(|(f, t)| (chunk, f, t)))
        })
        .buffered(2);
    loop {
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
        let stored = ingest.store(&chunk, data, read_time, None, stop).await?;
        stored.iter().for_each(|&h| on_hour(h));
        if stored.is_empty() {
            break;
        }
    }
    let mut summary = ingest.finish().await;
    summary.stopped = summary.hours + (summary.kept.len() as u64) < hours.len() as u64;
    Ok(summary)
}

/// Reads the raw samples of some consecutive hours (one window), retried per the options, with the devices of its
/// trailing day if `trailing` (else [`ClusterIngest::store`] takes them from the windows before, or reads them);
/// with the time it took.
pub async fn read_batch(
    source: &SampleSource,
    opts: &IngestOptions,
    hours: &[DateTime<Utc>],
    trailing: bool,
) -> Result<(Fetched, Duration), PromError> {
    let start = hours[0].timestamp_millis();
    let end = start + hours.len() as i64 * HOUR_MS;
    let started = Instant::now();
    let ksm_margin = fetch::ksm_margin_ms(&opts.meter);
    let read = fetch::fetch(source, &opts.fetch, ksm_margin, (start, end), trailing, opts.retry);
    let read = telemetry::reading(&opts.cluster, read).await?;
    telemetry::chunk_read(&opts.cluster, source.kind().as_str(), read.samples_read, started.elapsed());
    Ok((read, started.elapsed()))
}

/// One cluster's ingest, batch by batch: its metering configuration (with the nodes configured for it), the run
/// its batches are stored under, and what it did so far.
pub struct ClusterIngest<'a> {
    pool: &'a PgPool,
    source: &'a SampleSource,
    mode: &'a WriteMode,
    span: (DateTime<Utc>, DateTime<Utc>),
    meter: MeterConfig,
    run_id: Option<i64>,
    decode_before: Duration,
    summary: IngestSummary,
    /// Usage rows stored since the statistics were last checked.
    rows_unchecked: u64,
    /// The devices of the last stored window's trailing day and hours, for the next window.
    seen: CarriedDevices,
    fetch: fetch::FetchSpec,
    retry: RetryPolicy,
}

/// Rows a backfill stores between two looks at the tables' statistics (and the least change that is analyzed).
const ANALYZE_EVERY_ROWS: u64 = 20_000;

impl<'a> ClusterIngest<'a> {
    /// Starts an ingest of `opts.cluster` registered as a run of `mode` over `span` (with its first stored batch:
    /// an ingest that stores nothing leaves the database as it was).
    pub async fn new(
        pool: &'a PgPool,
        source: &'a SampleSource,
        opts: &IngestOptions,
        mode: &'a WriteMode,
        span: (DateTime<Utc>, DateTime<Utc>),
    ) -> Result<Self, IngestError> {
        validate_cluster_name(&opts.cluster)?;
        // the nodes configured for this cluster (cards, replicas, model, sharing) where nothing on them tells it
        let mut meter = opts.meter.clone();
        let mut conn = pool.acquire().await?;
        for (node, settings) in db::nodes::for_cluster(&mut conn, &opts.cluster).await? {
            meter.nodes.entry(node).or_insert(settings);
        }
        let summary = IngestSummary {
            cluster: opts.cluster.clone(),
            source: source.kind().as_str().to_string(),
            source_reason: source.describe(),
            ..IngestSummary::default()
        };
        let decode_before = source.decode_time();
        Ok(Self {
            pool,
            source,
            mode,
            span,
            meter,
            run_id: None,
            decode_before,
            summary,
            rows_unchecked: 0,
            seen: CarriedDevices::default(),
            fetch: opts.fetch.clone(),
            retry: opts.retry,
        })
    }

    /// Whether a window starting at `hour` must read its trailing day's devices (it does not follow the last
    /// window this ingest stored).
    pub fn needs_trailing(&self, hour: DateTime<Utc>) -> bool {
        !self.seen.reaches(hour.timestamp_millis())
    }

    /// Meters a batch read by [`read_batch`] and stores it in one transaction (under `fence` for a worker's
    /// claim). Returns the hours stored or kept: none when `stop` was asked for before the batch was stored.
    pub async fn store(
        &mut self,
        hours: &[DateTime<Utc>],
        data: Fetched,
        read_time: Duration,
        fence: Option<Fence<'_>>,
        stop: &Stop,
    ) -> Result<Vec<DateTime<Utc>>, IngestError> {
        let cluster = self.summary.cluster.clone();
        let timing = telemetry::Batch::since(&cluster, Instant::now() - read_time);
        self.summary.timings.read_s += read_time.as_secs_f64();
        let hours_ms: Vec<i64> = hours.iter().map(DateTime::timestamp_millis).collect();
        let mut data = data;
        if !data.has_trailing() && self.needs_trailing(hours[0]) {
            // read without it, expecting to follow a window that was not stored: read it now
            let started = Instant::now();
            let seen = Fetched::trailing_seen(self.source, &self.fetch, hours_ms[0], self.retry).await?;
            data.absorb_seen(seen);
            self.summary.timings.read_s += started.elapsed().as_secs_f64();
        }
        let started = Instant::now();
        let batch = meter_batch(hours, data.into_hours_carrying(&hours_ms, &mut self.seen), &self.meter).await;
        self.summary.timings.meter_s += started.elapsed().as_secs_f64();
        if stop.is_requested() {
            timing.cancelled();
            return Ok(Vec::new());
        }
        let run = RunStart { source: self.source, mode: self.mode, from: self.span.0, to: self.span.1 };
        let started = Instant::now();
        let stored = store_batch(self.pool, &cluster, &batch, self.run_id, &run, fence).await?;
        self.summary.timings.write_s += started.elapsed().as_secs_f64();
        self.run_id = Some(stored.run_id);
        self.summary.run_id = self.run_id;
        self.summary.watermark = Some(stored.watermark);
        for (h, outcome) in batch.iter().zip(stored.outcomes) {
            match outcome {
                HourOutcome::Kept(k) => {
                    tracing::warn!(%cluster, hour = %h.hour, stored_rows = k.stored_rows,
                        stored_samples = ?k.stored_samples, read_rows = k.read_rows, read_samples = k.read_samples,
                        "kept the stored hour: this read holds less (source past its retention, restarted without \
                         its data, or the wrong URL?)");
                    self.summary.kept.push(k);
                    telemetry::hour_kept(&cluster);
                }
                HourOutcome::Replaced { changed } => {
                    self.summary.hours_changed += u64::from(changed);
                    self.summary.add(&h.out, h.samples);
                    telemetry::hour_stored(&cluster, &h.out);
                }
            }
            tracing::debug!(%cluster, hour = %h.hour, rows = h.out.rows.len(), "stored hour");
        }
        timing.succeeded();
        self.rows_unchecked += batch.iter().map(|h| h.out.rows.len() as u64).sum::<u64>();
        if self.rows_unchecked >= ANALYZE_EVERY_ROWS {
            self.refresh_statistics().await;
        }
        Ok(hours.to_vec())
    }

    /// Analyzes the tables this ingest changed a lot (a failure is logged: statistics are an optimisation).
    async fn refresh_statistics(&mut self) {
        self.rows_unchecked = 0;
        let started = Instant::now();
        match db::usage::analyze_stale(self.pool, ANALYZE_EVERY_ROWS as i64).await {
            Ok(tables) if !tables.is_empty() => {
                tracing::info!(?tables, took = ?started.elapsed(), "refreshed the statistics of tables the backfill grew")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "could not refresh the tables' statistics"),
        }
        self.summary.timings.write_s += started.elapsed().as_secs_f64();
    }

    /// What the ingest did so far.
    pub fn summary(&self) -> &IngestSummary {
        &self.summary
    }

    /// The summary, with the time spent decoding answers; the statistics of what the ingest grew are refreshed.
    pub async fn finish(mut self) -> IngestSummary {
        if self.rows_unchecked > 0 {
            self.refresh_statistics().await;
        }
        self.summary.timings.decode_s = self.source.decode_time().saturating_sub(self.decode_before).as_secs_f64();
        self.summary
    }
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

/// Meters the hours of a batch, each on the blocking pool (in parallel), the window's NaN/±Inf counts added to
/// each hour's anomalies.
async fn meter_batch(
    hours: &[DateTime<Utc>],
    inputs: Vec<(crate::metering::HourInput, BTreeMap<String, u64>)>,
    cfg: &MeterConfig,
) -> Vec<MeteredHour> {
    let metered = inputs.into_iter().zip(hours).map(|((input, non_finite), &hour)| {
        let cfg = cfg.clone();
        async move {
            let samples = input_samples(&input);
            let (mut out, node_facts) =
                tokio::task::spawn_blocking(move || (meter_hour(&input, &cfg), node_facts(&input, &cfg)))
                    .await
                    .expect("metering is pure and does not panic");
            out.anomalies.extend(non_finite.into_iter().map(|(metric, count)| Anomaly {
                kind: AnomalyKind::NonFiniteSample,
                subject: metric,
                count,
            }));
            MeteredHour { hour, out, samples, node_facts }
        }
    });
    futures_util::future::join_all(metered).await
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
pub async fn undo(pool: &PgPool, run_id: i64, by: &crate::access::Writer) -> Result<UndoSummary, UndoError> {
    let actor = &by.actor();
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
