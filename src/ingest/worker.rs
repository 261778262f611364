//! The continuous worker: each hour once it is complete plus a lateness delay, re-processing a recent span.

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::source::SampleSource;
use super::window::floor_hour;
use super::{IngestError, IngestOptions, WriteMode, backfill_until};
use crate::db;
use crate::prom::RetryPolicy;

#[derive(Debug, Clone)]
pub struct WorkerOptions {
    pub ingest: IngestOptions,
    /// How long after an hour ends its samples are taken as complete (remote-write and federation lag).
    pub lateness: Duration,
    /// Hours before the newest complete one that every cycle ingests again, to catch late samples.
    pub reprocess_hours: u32,
    /// Where a cluster without a watermark starts: this many hours back.
    pub initial_hours: u32,
    /// Run one cycle and return (cron, tests).
    pub once: bool,
}

/// The hours one cycle ingests at `now`: from the watermark (or the initial span), and at least the re-processed
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

/// Runs until `shutdown` resolves or, with `once`, after one cycle. A shutdown during a cycle lets the hour being
/// stored finish (its transaction commits) and skips the rest; one while waiting returns at once.
/// `after_cycle` is called with the span each successful cycle ingested (the budget checks hang here); what it
/// does cannot fail the ingest.
pub async fn run_worker(
    pool: &PgPool,
    source: &SampleSource,
    opts: &WorkerOptions,
    mut after_cycle: impl AsyncFnMut(DateTime<Utc>, DateTime<Utc>),
    shutdown: impl Future<Output = ()>,
) -> Result<(), IngestError> {
    tokio::pin!(shutdown);
    let (stop_handle, stop) = crate::shutdown::channel();
    let mut ingest = opts.ingest.clone();
    ingest.retry = RetryPolicy::worker();
    let mut failures = 0u32;
    loop {
        let cycle = async {
            let mut conn = pool.acquire().await?;
            let watermark = db::watermark::get(&mut conn, &ingest.cluster).await?;
            drop(conn);
            match cycle_range(Utc::now(), watermark, opts) {
                Some((from, to)) => {
                    let s =
                        backfill_until(pool, source, &ingest, from, to, |_| {}, &WriteMode::worker(), &stop).await?;
                    tracing::info!(cluster = %s.cluster, hours = s.hours, rows = s.usage_rows, watermark = ?s.watermark,
                        non_finite = s.non_finite_samples, stopped = s.stopped, kept = s.kept.len(),
                        "ingested {from} .. {to}");
                    Ok::<_, IngestError>(Some((from, to)))
                }
                None => Ok(None),
            }
        };
        tokio::pin!(cycle);
        let result = tokio::select! {
            r = &mut cycle => r,
            () = &mut shutdown => {
                tracing::info!("stopping after the hour being stored");
                stop_handle.request();
                return cycle.await.map(|_| ());
            }
        };
        if let Ok(Some((from, to))) = result {
            tokio::select! {
                () = after_cycle(from, to) => {}
                () = &mut shutdown => return Ok(()),
            }
        }
        let wait = match result {
            Ok(_) => {
                failures = 0;
                if opts.once {
                    return Ok(());
                }
                until_next_hour(Utc::now(), opts.lateness)
            }
            Err(e @ (IngestError::Range(_) | IngestError::ClusterName(_))) => return Err(e),
            Err(e) => {
                if opts.once {
                    return Err(e);
                }
                let delay = RetryPolicy::worker().delay(failures);
                failures += 1;
                tracing::error!(error = %e, retry_in = ?delay, "ingest cycle failed");
                delay
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = &mut shutdown => return Ok(()),
        }
    }
}

/// Time until the next hour is complete (its end plus the lateness).
fn until_next_hour(now: DateTime<Utc>, lateness: Duration) -> Duration {
    let lateness_c = chrono::Duration::from_std(lateness).unwrap_or_default();
    let next = floor_hour(now - lateness_c) + chrono::Duration::hours(1) + lateness_c;
    (next - now).to_std().unwrap_or(Duration::from_secs(1)).max(Duration::from_secs(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::FetchSpec;
    use crate::metering::MeterConfig;

    fn opts() -> WorkerOptions {
        WorkerOptions {
            ingest: IngestOptions {
                cluster: "c".into(),
                fetch: FetchSpec { matchers: None, team_label: "label_team".into() },
                meter: MeterConfig::default(),
                chunk_hours: 6,
                retry: RetryPolicy::cli(),
            },
            lateness: Duration::from_secs(600),
            reprocess_hours: 2,
            initial_hours: 24,
            once: true,
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
        assert_eq!(until_next_hour(now, o.lateness), Duration::from_secs(5 * 60));
    }
}
