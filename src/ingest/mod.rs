//! The ingest: whole hours read from Prometheus, metered, and written to Postgres one transaction per batch of hours.

mod carry;
mod cluster;
pub mod config;
mod fetch;
pub mod flags;
pub mod health;
mod pipeline;
pub mod plan;
pub mod source;
mod store;
pub mod window;
pub mod worker;

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgPool;

pub use carry::{CarriedDevices, TRAILING_HOURS};
pub use cluster::{ClusterIngest, read_batch};
pub use fetch::{FetchSpec, Fetched, SELECTORS, UTIL_MARGIN_MS, ksm_margin_ms, selectors};
pub use pipeline::{backfill, backfill_until};
pub use source::{SampleSource, SourceKind, SourceRequest};
pub use worker::{WorkerCluster, WorkerOptions, run_worker};

use crate::db;
pub use crate::db::history::RunCommand;
use crate::metering::{AnomalyKind, HourOutput, MeterConfig};
use crate::prom::{PromError, RetryPolicy};
pub use store::{Fence, StoreError};

/// How one cluster is read.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    pub cluster: String,
    pub fetch: FetchSpec,
    pub meter: MeterConfig,
    /// The most hours one batch reads and stores (the worker's largest claim).
    pub chunk_hours: usize,
    /// The samples a backfill's batch holds, about ([`plan::BatchPlanner`]): batches are sized by it, within
    /// `chunk_hours`; `None`: every batch `chunk_hours` long.
    pub batch_samples: Option<u64>,
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
    /// Transactions the hours were stored in.
    pub batches: u64,
    pub usage_rows: u64,
    /// Tokens and requests rows (per hour, pod, model and engine) of serving engines' counters.
    pub serving_rows: u64,
    /// Tokens served (input and output) in the hours read.
    pub tokens: i64,
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
        self.serving_rows += out.serving.len() as u64;
        self.tokens +=
            out.serving.iter().map(|r| r.input_tokens.unwrap_or(0) + r.output_tokens.unwrap_or(0)).sum::<i64>();
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
