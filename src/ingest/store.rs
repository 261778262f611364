//! Storing a batch of metered hours: one transaction for all of them (each hour kept or replaced as a whole, the
//! rollups refreshed once), the run registered with its first batch, the watermark moved.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::source::SampleSource;
use super::{KeptRead, WriteMode};
use crate::db;
use crate::metering::{HourOutput, NodeFact};

/// One metered hour, with the samples it was metered from.
#[derive(Debug)]
pub struct MeteredHour {
    pub hour: DateTime<Utc>,
    pub out: HourOutput,
    pub samples: u64,
    /// What each node was taken to be in the hour, with its evidence.
    pub node_facts: Vec<NodeFact>,
}

/// What a run is registered with.
pub struct RunStart<'a> {
    pub source: &'a SampleSource,
    pub mode: &'a WriteMode,
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

/// What became of one hour of a batch.
pub enum HourOutcome {
    /// Stored; `changed` when it replaced different rows.
    Replaced {
        changed: bool,
    },
    Kept(KeptRead),
}

/// A worker's hold on the hours being stored: the transaction stores them only if the worker still holds them.
#[derive(Debug, Clone, Copy)]
pub struct Fence<'a> {
    pub claim: &'a db::queue::Claim,
    pub worker: &'a str,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// The worker's lease on the hours expired and another worker took them: nothing was stored.
    #[error("the lease on {cluster} {from} .. {to} was lost (expired and taken over): nothing stored")]
    LeaseLost { cluster: String, from: DateTime<Utc>, to: DateTime<Utc> },
}

pub struct StoredBatch {
    pub watermark: DateTime<Utc>,
    /// In the batch's order.
    pub outcomes: Vec<HourOutcome>,
    pub run_id: i64,
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

/// Writes a batch of metered hours (ascending, at least one) in one transaction and moves the watermark. An hour
/// whose stored rows or samples outnumber this read's stays as it is (listed as kept) unless the run forces it;
/// what a replacement removes is kept with the run. The run is registered with its first batch (`run_id` `None`).
/// All or nothing: an error leaves every hour of the batch as it was. With a `fence`, the batch is stored only
/// if the worker still holds every hour of its claim (they leave the queue in the same transaction); without one
/// (a one-off ingest), queued hours it stored that no worker holds leave the queue.
pub async fn store_batch(
    pool: &PgPool,
    cluster: &str,
    batch: &[MeteredHour],
    run_id: Option<i64>,
    run: &RunStart<'_>,
    fence: Option<Fence<'_>>,
) -> Result<StoredBatch, StoreError> {
    let hours: Vec<DateTime<Utc>> = batch.iter().map(|h| h.hour).collect();
    debug_assert!(!hours.is_empty() && hours.windows(2).all(|w| w[0] < w[1]));
    // the months' partitions, in a short transaction of their own (never inside the batch's: see the function)
    db::usage::ensure_month_partitions(pool, &hours).await?;
    let mut tx = pool.begin().await?;
    let run_id = match run_id {
        Some(id) => id,
        None => start_run(&mut tx, cluster, run).await?,
    };
    db::queue::lock_for_store(&mut tx, cluster).await?;
    for &hour in &hours {
        db::usage::lock_hour(&mut tx, cluster, hour).await?;
    }
    let stored = db::history::stored_hours(&mut tx, cluster, &hours).await?;
    let mut outcomes = Vec::with_capacity(batch.len());
    let (mut replace, mut replaced_stored) = (Vec::new(), Vec::new());
    for h in batch {
        let rows = h.out.rows.len() as u64;
        match stored.get(&h.hour) {
            Some(s) if !run.mode.replace_smaller && s.is_larger_than(rows, h.samples) => {
                db::history::keep_hour(&mut tx, cluster, h.hour, run_id, s, rows, h.samples).await?;
                outcomes.push(Some(HourOutcome::Kept(KeptRead {
                    hour: h.hour,
                    stored_rows: s.usage_rows,
                    stored_samples: s.samples_read,
                    read_rows: rows,
                    read_samples: h.samples,
                })));
            }
            before => {
                if before.is_some() {
                    replaced_stored.push(h.hour);
                }
                replace.push(h);
                outcomes.push(None);
            }
        }
    }
    if !replaced_stored.is_empty() {
        db::history::save_replaced_hours(&mut tx, run_id, cluster, &replaced_stored).await?;
    }
    let rows: Vec<db::usage::HourRows> =
        replace.iter().map(|h| db::usage::HourRows { hour: h.hour, out: &h.out }).collect();
    db::usage::replace_hours(&mut tx, cluster, &rows).await?;
    let facts: Vec<(DateTime<Utc>, &[NodeFact])> = replace.iter().map(|h| (h.hour, h.node_facts.as_slice())).collect();
    db::node_facts::insert(&mut tx, cluster, &facts).await?;
    let replaced_hours: Vec<DateTime<Utc>> = replace.iter().map(|h| h.hour).collect();
    let samples: Vec<i64> = replace.iter().map(|h| h.samples as i64).collect();
    db::history::record_reads(&mut tx, cluster, &replaced_hours, &samples, run_id).await?;
    // re-reads of unchanged samples (every worker cycle) leave no history
    let mut changed = std::collections::BTreeSet::new();
    for &hour in &replaced_stored {
        if db::history::forget_if_unchanged(&mut tx, run_id, cluster, hour).await? {
            changed.insert(hour);
        }
    }
    let watermark = db::watermark::advance(&mut tx, cluster, hours[0]).await?;
    match fence {
        Some(f) => {
            if !db::queue::complete(&mut tx, f.claim, f.worker).await? {
                let to = hours[hours.len() - 1] + chrono::Duration::hours(1);
                return Err(StoreError::LeaseLost { cluster: cluster.to_string(), from: hours[0], to });
            }
        }
        None => db::queue::forget_stored(&mut tx, cluster, &hours).await?,
    }
    tx.commit().await?;
    let outcomes = outcomes
        .into_iter()
        .zip(&hours)
        .map(|(o, hour)| o.unwrap_or(HourOutcome::Replaced { changed: changed.contains(hour) }))
        .collect();
    Ok(StoredBatch { watermark, outcomes, run_id })
}
