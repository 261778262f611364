//! The continuous worker. Any number of worker processes share the configured clusters' due hours through the
//! queue in Postgres (`db::queue`): each takes a batch of consecutive hours under a lease, reads, meters and
//! stores it in one transaction that also takes the hours off the queue. A read that fails gives the hours back
//! for a retry after a capped backoff; a source that times out is read in smaller batches.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::source::SampleSource;
use super::window::floor_hour;
use super::{ClusterIngest, Fence, IngestError, IngestOptions, WriteMode, read_batch};
use crate::db;
use crate::db::queue::Claim;
use crate::prom::{PromError, RetryPolicy};
use crate::shutdown::Stop;

/// A cluster a worker ingests: its source and how it is read and metered (`chunk_hours` is its largest batch).
#[derive(Debug, Clone)]
pub struct WorkerCluster {
    pub source: SampleSource,
    pub ingest: IngestOptions,
}

#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// How long after an hour ends its samples are taken as complete (remote-write and federation lag).
    pub lateness: Duration,
    /// Hours before the newest complete one that every cycle ingests again, to catch late samples.
    pub reprocess_hours: u32,
    /// Where a cluster without a watermark starts: this many hours back.
    pub initial_hours: u32,
    /// Stop once no hour is left queued for these clusters (cron, a shared backfill; hours other workers hold are
    /// waited for, since they may die before storing them); a failure that would fail again (a refused query)
    /// ends it with the error, others are retried after their backoff.
    pub once: bool,
    /// How long a worker holds hours without renewing its lease (renewed every third of it while it works).
    pub lease: Duration,
    /// A fixed span `[from, to)` to ingest instead of following the clock: a backfill shared by workers. Only
    /// hours not stored yet are queued.
    pub span: Option<(DateTime<Utc>, DateTime<Utc>)>,
    /// This worker's name in its leases (host, process, a random part).
    pub name: String,
    /// The longest wait before a failed batch is read again.
    pub max_backoff: Duration,
}

impl WorkerOptions {
    /// The hours one cycle queues at `now`: from the watermark (or the initial span), and at least the
    /// re-processed span, up to the newest complete hour; the re-processed span starts at the second value.
    fn cycle(
        &self,
        now: DateTime<Utc>,
        watermark: Option<DateTime<Utc>>,
    ) -> Option<(DateTime<Utc>, DateTime<Utc>, DateTime<Utc>)> {
        if let Some((from, to)) = self.span {
            return (from < to).then_some((from, to, to));
        }
        let (from, to) = cycle_range(now, watermark, self)?;
        Some((from, to, to - chrono::Duration::hours(i64::from(self.reprocess_hours))))
    }
}

/// A name for this worker: host, process id and a random part (a restarted process is another worker).
pub fn worker_name() -> String {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    format!("{host}:{}:{:04x}", std::process::id(), rand::random::<u16>())
}

/// The hours a cycle ingests at `now`: from the watermark (or the initial span), and at least the re-processed
/// span, up to the newest complete hour.
pub fn cycle_range(
    now: DateTime<Utc>,
    watermark: Option<DateTime<Utc>>,
    opts: &WorkerOptions,
) -> Option<(DateTime<Utc>, DateTime<Utc>)> {
    let lateness = chrono::Duration::from_std(opts.lateness).unwrap_or_default();
    let to = floor_hour(now - lateness);
    let start = watermark.unwrap_or(to - chrono::Duration::hours(i64::from(opts.initial_hours)));
    let from = start.min(to - chrono::Duration::hours(i64::from(opts.reprocess_hours)));
    (from < to).then_some((from, to))
}

/// Reads within a batch: a few quick tries; longer outages are the queue's backoff, so other clusters go on.
const BATCH_RETRY: RetryPolicy =
    RetryPolicy { attempts: Some(3), first_delay: Duration::from_secs(1), max_delay: Duration::from_secs(4) };

/// A short fixed name for what failed, for the health page and the metrics.
pub fn error_kind(e: &IngestError) -> &'static str {
    match e {
        IngestError::Prometheus(p) => p.kind(),
        IngestError::Database(_) => "database",
        IngestError::LeaseLost(_) => "lease_lost",
        IngestError::Range(_) | IngestError::ClusterName(_) => "config",
    }
}

/// Per cluster, in this worker: the batch size it reads with now.
struct Batches {
    now: u32,
    max: u32,
}

impl Batches {
    /// Multiplicative decrease on a timeout, additive increase on a success (a source that is slow at a size
    /// does not swing back to it at once).
    fn after(&mut self, outcome: Result<(), &IngestError>) {
        self.now = match outcome {
            Ok(()) => (self.now + 1).min(self.max),
            Err(IngestError::Prometheus(PromError::Timeout { .. })) => (self.now / 2).max(1),
            Err(_) => self.now,
        };
    }
}

/// Runs until `shutdown` resolves or, with `once`, until nothing due is left for it. A shutdown while a batch is
/// read gives its hours back; one while it is stored lets the transaction finish. `after_cycle` is called with the
/// span planned or stored since the worker was last idle (the budget checks hang here), once per cycle; what it
/// does cannot fail the ingest.
pub async fn run_worker(
    pool: &PgPool,
    clusters: &[WorkerCluster],
    opts: &WorkerOptions,
    mut after_cycle: impl AsyncFnMut(DateTime<Utc>, DateTime<Utc>),
    shutdown: impl Future<Output = ()>,
) -> Result<(), IngestError> {
    tokio::pin!(shutdown);
    let (stop_handle, stop) = crate::shutdown::channel();
    let names: Vec<String> = clusters.iter().map(|c| c.ingest.cluster.clone()).collect();
    for name in &names {
        super::validate_cluster_name(name)?;
    }
    let mode = WriteMode::worker();
    let by_name: HashMap<&str, &WorkerCluster> = clusters.iter().map(|c| (c.ingest.cluster.as_str(), c)).collect();
    let mut batches: HashMap<String, Batches> = HashMap::new();
    for c in clusters {
        let max = c.ingest.chunk_hours.clamp(1, 168) as u32;
        let known = db::queue::batch_hours(pool, &c.ingest.cluster).await?.map_or(max, |n| (n as u32).clamp(1, max));
        batches.insert(c.ingest.cluster.clone(), Batches { now: known, max });
    }
    let mut ingests: HashMap<String, ClusterIngest<'_>> = HashMap::new();
    let mut next_plan = Utc::now();
    let mut planned_span = false;
    // what this cycle stored or planned: its budgets are checked once the worker is idle
    let mut stored_span: Option<Span> = None;
    let mut db_failures = 0u32;
    loop {
        if stop.is_requested() {
            return Ok(());
        }
        let now = Utc::now();
        let plan_due = if opts.span.is_some() { !planned_span } else { now >= next_plan };
        if plan_due {
            match plan_all(pool, clusters, opts, now).await {
                Ok(planned) => {
                    // the budgets of the cycle's months are checked once it is idle, even when another worker
                    // stored its hours (or they were stored already): undelivered alerts go out every cycle
                    stored_span = union(stored_span, planned);
                    planned_span = true;
                    next_plan = now + until_next_hour(now, opts.lateness);
                    db_failures = 0;
                }
                Err(e) => {
                    db_failures += 1;
                    if opts.once && db_failures > DB_ATTEMPTS_ONCE {
                        return Err(e.into());
                    }
                    tracing::error!(error = %e, "could not queue the due hours; retrying");
                    if wait(backoff(db_failures, opts.max_backoff), &mut shutdown).await {
                        return Ok(());
                    }
                    continue;
                }
            }
        }
        let claim = db::queue::claim(pool, &names, &opts.name, opts.lease, |c| batches.get(c).map_or(1, |b| b.now));
        let claim = match claim.await {
            Ok(c) => {
                db_failures = 0;
                c
            }
            Err(e) => {
                db_failures += 1;
                if opts.once && db_failures > DB_ATTEMPTS_ONCE {
                    return Err(e.into());
                }
                tracing::error!(error = %e, "could not take hours from the queue (database?); retrying");
                if wait(backoff(db_failures, opts.max_backoff), &mut shutdown).await {
                    return Ok(());
                }
                continue;
            }
        };
        let Some(claim) = claim else {
            // a cycle ends: the next stores its batches under a run of its own (what `ingest undo` puts back),
            // and no summary grows for the life of the process
            ingests.clear();
            if let Some((from, to)) = stored_span.take() {
                tokio::select! {
                    () = after_cycle(from, to) => {}
                    () = &mut shutdown => return Ok(()),
                }
            }
            let (left, next_due) = match db::queue::remaining(pool, &names).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(error = %e, "could not read the queue (database?); retrying");
                    (1, None)
                }
            };
            if let Err(e) = db::queue::settle(pool, &names).await {
                tracing::warn!(error = %e, "could not settle the failures of recovered clusters");
            }
            if opts.once && left == 0 {
                return Ok(());
            }
            // a backfill's hours left are held by other workers (or wait for their retry): look again soon, so
            // the last worker out does not sleep through the end; a finished one only waits for new hours
            let poll = if left > 0 { BACKFILL_POLL } else { IDLE_POLL };
            let mut until = if opts.span.is_some() { Utc::now() + poll } else { next_plan };
            if let Some(due) = next_due {
                until = until.min(due);
            }
            let pause =
                (until - Utc::now()).to_std().unwrap_or_default().clamp(Duration::from_millis(200), IDLE_POLL_STD);
            if wait(pause, &mut shutdown).await {
                return Ok(());
            }
            continue;
        };
        let cluster = by_name[claim.cluster.as_str()];
        if !ingests.contains_key(&claim.cluster) {
            let span = opts.span.unwrap_or((claim.hours[0], claim.hours[0]));
            let ingest = ClusterIngest::new(pool, &cluster.source, &cluster.ingest, &mode, span).await;
            match ingest {
                Ok(i) => {
                    ingests.insert(claim.cluster.clone(), i);
                }
                Err(e) => {
                    give_back(pool, &claim, opts, &e, 0).await;
                    if opts.once && !retried(&e) {
                        return Err(e);
                    }
                    continue;
                }
            }
        }
        let ingest = ingests.get_mut(&claim.cluster).expect("inserted above");
        let work = process(ingest, &cluster.ingest, &cluster.source, &claim, opts, &stop);
        let heartbeat = keep_lease(pool, &claim, opts);
        tokio::pin!(work, heartbeat);
        let result = tokio::select! {
            r = &mut work => r,
            lost = &mut heartbeat => Err(lost),
            () = &mut shutdown => {
                tracing::info!("stopping after the batch being stored");
                stop_handle.request();
                // the read is dropped at the next await; a store in progress commits
                tokio::select! {
                    r = &mut work => r,
                    lost = &mut heartbeat => Err(lost),
                }
            }
        };
        let batch = batches.get_mut(&claim.cluster).expect("every cluster has a batch size");
        batch.after(result.as_ref().map(|_| ()));
        let (from, to) = (claim.hours[0], claim.hours[claim.hours.len() - 1] + chrono::Duration::hours(1));
        match result {
            Ok(true) => {
                stored_span = union(stored_span, Some((from, to)));
                if let Err(e) = db::queue::record_success(pool, &claim.cluster, batch.now).await {
                    tracing::warn!(error = %e, cluster = %claim.cluster, "could not record the success");
                }
                tracing::info!(cluster = %claim.cluster, from = %rfc3339(from), to = %rfc3339(to), worker = %opts.name,
                    "stored");
            }
            Ok(false) => {
                // stopped before storing: the hours go back to the queue at once
                if let Err(e) = db::queue::release(pool, &claim, &opts.name, Duration::ZERO, None).await {
                    tracing::warn!(error = %e, "could not give the hours back; their lease expires");
                }
                return Ok(());
            }
            Err(e) => {
                let failures = give_back(pool, &claim, opts, &e, batch.now).await;
                tracing::error!(error = %e, cluster = %claim.cluster, from = %rfc3339(from), to = %rfc3339(to),
                    failures, batch_hours = batch.now, "batch failed; its hours are read again after a backoff");
                // a --once run rides out what may pass (a source down, a database restart) and ends on the rest
                if opts.once && !retried(&e) {
                    return Err(e);
                }
            }
        }
    }
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Failures worth reading the hours again for: the source or the database may come back, a lost lease is
/// another worker's now; a refused query or a bad name will fail again.
fn retried(e: &IngestError) -> bool {
    match e {
        IngestError::Prometheus(p) => p.is_transient(),
        IngestError::Database(_) | IngestError::LeaseLost(_) => true,
        IngestError::Range(_) | IngestError::ClusterName(_) => false,
    }
}

/// Database failures a `--once` worker rides out (a restart) before it gives up.
const DB_ATTEMPTS_ONCE: u32 = 10;
const BACKFILL_POLL: chrono::Duration = chrono::Duration::seconds(1);
const IDLE_POLL: chrono::Duration = chrono::Duration::seconds(30);
const IDLE_POLL_STD: Duration = Duration::from_secs(30);

fn backoff(failures: u32, max: Duration) -> Duration {
    let p = RetryPolicy { attempts: None, first_delay: Duration::from_secs(1), max_delay: max };
    p.delay(failures.saturating_sub(1))
}

/// Sleeps `d` unless `shutdown` comes first (then `true`).
async fn wait(d: Duration, shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>) -> bool {
    tokio::select! {
        () = tokio::time::sleep(d) => false,
        () = shutdown.as_mut() => true,
    }
}

type Span = (DateTime<Utc>, DateTime<Utc>);

/// The smallest span covering both.
fn union(a: Option<Span>, b: Option<Span>) -> Option<Span> {
    match (a, b) {
        (Some((f1, t1)), Some((f2, t2))) => Some((f1.min(f2), t1.max(t2))),
        (a, b) => a.or(b),
    }
}

/// Queues every cluster's due hours (and registers the cluster the queue refers to); returns the span the cycle
/// covers.
async fn plan_all(
    pool: &PgPool,
    clusters: &[WorkerCluster],
    opts: &WorkerOptions,
    now: DateTime<Utc>,
) -> Result<Option<Span>, sqlx::Error> {
    let lateness = chrono::Duration::from_std(opts.lateness).unwrap_or_default();
    let mut planned = None;
    for c in clusters {
        let name = &c.ingest.cluster;
        let mut tx = pool.begin().await?;
        db::clusters::upsert(&mut tx, name, c.source.base_url()).await?;
        let watermark = db::watermark::get(&mut tx, name).await?;
        if let Some((from, to, reprocess_from)) = opts.cycle(now, watermark) {
            planned = union(planned, Some((from, to)));
            let queued = db::queue::plan(&mut tx, name, from, to, reprocess_from, to + lateness, opts.lateness).await?;
            if queued > 0 {
                tracing::info!(cluster = %name, %from, %to, queued, "queued hours");
            }
        }
        tx.commit().await?;
    }
    Ok(planned)
}

/// Reads, meters and stores a claim under its fence. `Ok(false)`: stopped before anything was stored.
async fn process(
    ingest: &mut ClusterIngest<'_>,
    opts: &IngestOptions,
    source: &SampleSource,
    claim: &Claim,
    wopts: &WorkerOptions,
    stop: &Stop,
) -> Result<bool, IngestError> {
    let read_opts = IngestOptions { retry: BATCH_RETRY, ..opts.clone() };
    let (data, read_time) = tokio::select! {
        biased;
        () = stop.requested() => return Ok(false),
        read = read_batch(source, &read_opts, &claim.hours, ingest.needs_trailing(claim.hours[0])) => read?,
    };
    let fence = Fence { claim, worker: &wopts.name };
    let stored = ingest.store(&claim.hours, data, read_time, Some(fence), stop).await?;
    Ok(!stored.is_empty())
}

/// Renews the lease every third of its length; resolves only when it was lost (or cannot be renewed in time).
async fn keep_lease(pool: &PgPool, claim: &Claim, opts: &WorkerOptions) -> IngestError {
    let every = opts.lease / 3;
    let mut last_renewed = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(every).await;
        match db::queue::renew(pool, claim, &opts.name, opts.lease).await {
            Ok(true) => last_renewed = tokio::time::Instant::now(),
            Ok(false) => {
                return IngestError::LeaseLost(format!(
                    "the lease on {} from {} was lost (expired and taken over): nothing stored",
                    claim.cluster, claim.hours[0]
                ));
            }
            Err(e) if last_renewed.elapsed() + every >= opts.lease => {
                return IngestError::LeaseLost(format!("the lease on {} could not be renewed: {e}", claim.cluster));
            }
            Err(e) => tracing::warn!(error = %e, "could not renew the lease; trying again"),
        }
    }
}

/// Gives a failed claim back with a backoff and records the failure; returns the failures in a row.
async fn give_back(pool: &PgPool, claim: &Claim, opts: &WorkerOptions, e: &IngestError, batch_hours: u32) -> u32 {
    if matches!(e, IngestError::LeaseLost(_)) {
        return 0;
    }
    let kind = error_kind(e);
    let message = e.to_string();
    let failures = match db::queue::record_failure(pool, &claim.cluster, kind, &message, batch_hours.max(1)).await {
        Ok(n) => n,
        Err(db) => {
            tracing::warn!(error = %db, "could not record the failure");
            1
        }
    };
    let delay = backoff(failures, opts.max_backoff);
    if let Err(db) = db::queue::release(pool, claim, &opts.name, delay, Some(&message)).await {
        tracing::warn!(error = %db, "could not give the hours back; their lease expires");
    }
    failures
}

/// Time until the next hour is complete (its end plus the lateness).
fn until_next_hour(now: DateTime<Utc>, lateness: Duration) -> chrono::Duration {
    let lateness_c = chrono::Duration::from_std(lateness).unwrap_or_default();
    let next = floor_hour(now - lateness_c) + chrono::Duration::hours(1) + lateness_c;
    (next - now).max(chrono::Duration::seconds(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> WorkerOptions {
        WorkerOptions {
            lateness: Duration::from_secs(600),
            reprocess_hours: 2,
            initial_hours: 24,
            once: true,
            lease: Duration::from_secs(60),
            span: None,
            name: "w".into(),
            max_backoff: Duration::from_secs(60),
        }
    }

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn a_cycle_starts_at_the_watermark_and_reprocesses_the_recent_span() {
        let o = opts();
        // 10:05 with 10 min lateness: 09:00–10:00 is not complete yet, so up to 09:00
        let now = t("2026-11-30T10:05:00Z");
        assert_eq!(cycle_range(now, None, &o), Some((t("2026-11-29T09:00:00Z"), t("2026-11-30T09:00:00Z"))));
        assert_eq!(
            cycle_range(now, Some(t("2026-11-30T09:00:00Z")), &o),
            Some((t("2026-11-30T07:00:00Z"), t("2026-11-30T09:00:00Z")))
        );
        assert_eq!(
            cycle_range(now, Some(t("2026-11-30T03:00:00Z")), &o),
            Some((t("2026-11-30T03:00:00Z"), t("2026-11-30T09:00:00Z")))
        );
        assert_eq!(
            o.cycle(now, Some(t("2026-11-30T03:00:00Z"))),
            Some((t("2026-11-30T03:00:00Z"), t("2026-11-30T09:00:00Z"), t("2026-11-30T07:00:00Z")))
        );
        assert_eq!(until_next_hour(now, o.lateness), chrono::Duration::minutes(5));
        let span = WorkerOptions { span: Some((t("2026-11-01T00:00:00Z"), t("2026-11-08T00:00:00Z"))), ..o };
        assert_eq!(
            span.cycle(now, None),
            Some((t("2026-11-01T00:00:00Z"), t("2026-11-08T00:00:00Z"), t("2026-11-08T00:00:00Z")))
        );
    }

    #[test]
    fn batches_halve_on_timeouts_and_grow_back_one_hour_at_a_time() {
        let mut b = Batches { now: 6, max: 6 };
        let timeout = IngestError::Prometheus(PromError::Timeout { url: "u".into(), seconds: 60 });
        b.after(Err(&timeout));
        assert_eq!(b.now, 3);
        b.after(Err(&timeout));
        b.after(Err(&timeout));
        b.after(Err(&timeout));
        assert_eq!(b.now, 1);
        let other = IngestError::Prometheus(PromError::Malformed("x".into()));
        b.after(Err(&other));
        assert_eq!(b.now, 1);
        for _ in 0..10 {
            b.after(Ok(()));
        }
        assert_eq!(b.now, 6);
    }

    #[test]
    fn backoff_is_capped() {
        let max = Duration::from_secs(60);
        assert_eq!(backoff(1, max), Duration::from_secs(1));
        assert_eq!(backoff(4, max), Duration::from_secs(8));
        assert_eq!(backoff(30, max), max);
    }
}
