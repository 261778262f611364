//! What the ingest reports, per cluster: a handful of calls made where an hour is stored or kept, a chunk is read,
//! a batch ends, and (through [`reading`]) every failed request to the source. Each call is one line at its place,
//! so the ingest can move them when it changes shape.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::metering::HourOutput;

use super::{
    ANOMALIES, BATCH_DURATION, HOURS, HOURS_KEPT, INGEST_UP, LAST_SUCCESS, READ_DURATION, SAMPLES, SOURCE_ERRORS,
    SOURCE_RETRIES, USAGE_ROWS,
};

/// A stored hour: its rows and its anomalies (by the metering's own kind names, so a kind added there shows up
/// here without a change).
pub fn hour_stored(cluster: &str, out: &HourOutput) {
    let c = cluster.to_string();
    metrics::counter!(HOURS, "cluster" => c.clone()).increment(1);
    metrics::counter!(USAGE_ROWS, "cluster" => c.clone()).increment(out.rows.len() as u64);
    for a in &out.anomalies {
        metrics::counter!(ANOMALIES, "cluster" => c.clone(), "kind" => a.kind.as_str()).increment(a.count);
    }
}

/// A stored hour left as it was: this read held less.
pub fn hour_kept(cluster: &str) {
    metrics::counter!(HOURS_KEPT, "cluster" => cluster.to_string()).increment(1);
}

/// A chunk of hours read from the source: its raw samples and how long the read took.
/// `source` names how the chunk was read (the ingest's source kinds: a fixed list).
pub fn chunk_read(cluster: &str, source: &'static str, samples: u64, took: Duration) {
    let (c, s) = (cluster.to_string(), source);
    metrics::counter!(SAMPLES, "cluster" => c.clone(), "source" => s).increment(samples);
    metrics::histogram!(READ_DURATION, "cluster" => c, "source" => s).record(took.as_secs_f64());
}

tokio::task_local! {
    /// The cluster whose source the current task is reading (see [`reading`]).
    static READING: Arc<str>;
}

/// Runs `read` as a read of `cluster`'s source: every request that fails inside it (each attempt of
/// [`crate::prom::with_retry`]) is counted for `cluster` by [`request_failed`].
pub async fn reading<F: Future>(cluster: &str, read: F) -> F::Output {
    READING.scope(Arc::from(cluster), read).await
}

/// A request to a source failed, of `kind` (one of the source errors' fixed kinds, `crate::prom::PromError::kind`);
/// `retrying` when it is tried again. Counted for the cluster of the enclosing [`reading`]; outside one (a probe of
/// what a server serves) nothing is counted.
pub fn request_failed(kind: &'static str, retrying: bool) {
    let Ok(cluster) = READING.try_with(|c| c.to_string()) else { return };
    metrics::counter!(SOURCE_ERRORS, "cluster" => cluster.clone(), "kind" => kind).increment(1);
    if retrying {
        metrics::counter!(SOURCE_RETRIES, "cluster" => cluster.clone(), "kind" => kind).increment(1);
    }
    metrics::gauge!(INGEST_UP, "cluster" => cluster).set(0.0);
}

/// One batch (a run of hours of one cluster): timed from [`Batch::start`]; a batch dropped without
/// [`Batch::succeeded`] (an early return, a `?`) counts as failed.
#[must_use = "a batch dropped at once is recorded as a failed one"]
pub struct Batch {
    cluster: String,
    started: Instant,
    done: bool,
}

impl Batch {
    pub fn start(cluster: &str) -> Self {
        Self::since(cluster, Instant::now())
    }

    /// A batch that began at `started` (its read, which may have overlapped the previous batch's store).
    pub fn since(cluster: &str, started: Instant) -> Self {
        Batch { cluster: cluster.to_string(), started, done: false }
    }

    pub fn succeeded(mut self) {
        self.done = true;
        self.finish("ok");
        let now = chrono::Utc::now().timestamp_millis() as f64 / 1000.0;
        metrics::gauge!(LAST_SUCCESS, "cluster" => self.cluster.clone()).set(now);
        metrics::gauge!(INGEST_UP, "cluster" => self.cluster.clone()).set(1.0);
    }

    /// Stopped before it was stored (a shutdown): neither a success nor a failure.
    pub fn cancelled(mut self) {
        self.done = true;
    }

    fn finish(&self, outcome: &'static str) {
        let took = self.started.elapsed().as_secs_f64();
        metrics::histogram!(BATCH_DURATION, "cluster" => self.cluster.clone(), "outcome" => outcome).record(took);
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        if !self.done {
            self.finish("error");
            metrics::gauge!(INGEST_UP, "cluster" => self.cluster.clone()).set(0.0);
        }
    }
}
