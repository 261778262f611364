//! A backfill as a bounded pipeline: batches sized by the samples they hold are read, metered and stored side by
//! side — the next batch is read while this one is metered and the one before is written — with at most
//! [`BATCHES_HELD`] batches of raw samples in memory at once.

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use tokio::sync::{Semaphore, mpsc};

use super::cluster::{ClusterIngest, read_batch};
use super::plan::BatchPlanner;
use super::source::SampleSource;
use super::{IngestError, IngestOptions, IngestSummary, WriteMode, window};
use crate::db;
use crate::prom::{PromClient, PromError};
use crate::shutdown::Stop;

/// Batches of raw samples held at once: the one being read and the one being metered (a metered batch waiting
/// to be written holds only its rows).
pub const BATCHES_HELD: usize = 2;

/// Ingests the whole hours `[from, to)`: every batch in its own transaction, idempotent, each hour complete or
/// absent, read by the query API. `on_hour` is called after each stored hour (progress).
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

/// A read that failed, from the first hour of its batch on.
struct ReadFailed {
    from: DateTime<Utc>,
    error: PromError,
}

/// [`backfill`] as one run of `mode` that ends early, between two batches, once `stop` is asked for: the batch
/// being stored is finished (its transaction committed), a read in progress is dropped, and the summary says
/// `stopped`. A stored hour is replaced only by a read with at least as many rows and samples, unless `mode` says
/// otherwise (the run is then audited); what a replacement removes is kept with the run.
///
/// Batches hold about `opts.batch_samples` samples (at the density the last read showed) and at most
/// `opts.chunk_hours` hours. A failed read stops the backfill after the batches before it are stored.
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
    let ClusterIngest { mut metering, mut storing } = ClusterIngest::new(pool, source, opts, mode, (from, to)).await?;
    let room = Semaphore::new(BATCHES_HELD);
    let (read_tx, mut read_rx) = mpsc::channel(1);
    let (metered_tx, mut metered_rx) = mpsc::channel(1);
    let hours_ref = hours.as_slice();
    let room_ref = &room;

    let reading = async move {
        let mut planner = BatchPlanner::with(opts.batch_samples, opts.chunk_hours);
        let mut at = 0;
        while at < hours_ref.len() {
            let n = planner.next_len(hours_ref.len() - at);
            let chunk = &hours_ref[at..at + n];
            let Ok(held) = room_ref.acquire().await else { break };
            // only the first batch reads its trailing day's devices: each later one follows the last and takes
            // them from what the metering carries
            let read = tokio::select! {
                biased;
                () = stop.requested() => break,
                read = read_batch(source, opts, chunk, at == 0) => read,
            };
            let failed = read.is_err();
            if let Ok((data, _)) = &read {
                planner.observe(n, data.samples_read);
            }
            if read_tx.send((chunk, read, held)).await.is_err() || failed {
                break;
            }
            at += n;
        }
    };

    let metering_ref = &mut metering;
    let meter = async move {
        while let Some((chunk, read, held)) = read_rx.recv().await {
            let (data, read_time) = match read {
                Ok(read) => read,
                Err(error) => return Err(Ok(ReadFailed { from: chunk[0], error })),
            };
            let metered = metering_ref.meter(chunk, data, read_time).await.map_err(Err)?;
            drop(held);
            if stop.is_requested() {
                metered.cancel();
                break;
            }
            if let Err(unsent) = metered_tx.send(metered).await {
                unsent.0.cancel();
                break;
            }
        }
        Ok::<(), Result<ReadFailed, IngestError>>(())
    };

    let storing_ref = &mut storing;
    let store = async move {
        while let Some(metered) = metered_rx.recv().await {
            if stop.is_requested() {
                metered.cancel();
                break;
            }
            let stored = storing_ref.store(metered, None).await?;
            stored.iter().for_each(|&h| on_hour(h));
        }
        Ok::<(), IngestError>(())
    };

    let ((), metered, stored) = tokio::join!(reading, meter, store);
    stored?;
    match metered {
        Ok(()) => {}
        Err(Ok(ReadFailed { from: first, error })) => {
            // the hours from this batch on were not read: a close of their month must know
            record_failure(pool, &opts.cluster, first, to, mode, &error).await;
            return Err(error.into());
        }
        Err(Err(e)) => return Err(e),
    }
    let done = storing.hours_done();
    let mut summary = storing.finish(&metering).await;
    summary.stopped = done < hours.len() as u64;
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
