//! Whether a month may be closed, read now: the stored hours, failed windows, watermarks, node problems and kept
//! hours of the month and the bills it would close with, turned into the blockers of
//! [`crate::ledger::readiness`] (SPEC §6 "Closing needs a complete month").

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use sqlx::PgPool;

use crate::billing::{Month, MonthBills};
use crate::db;
use crate::ledger::readiness::{
    Blocker, Readiness, UNVERIFIED_NODE_ANOMALIES, coverage, hour_spans, uncovered_span, unknown_models,
    unpriced_reservations,
};

/// What stands in the way of closing `month` (in `tz`) at `now`, given the bills it would close with.
pub async fn readiness(
    pool: &PgPool,
    month: Month,
    tz: chrono_tz::Tz,
    bills: &MonthBills,
    now: DateTime<Utc>,
) -> Result<Readiness, sqlx::Error> {
    let (from, to) = month.bounds(tz);
    let mut blockers = Vec::new();
    if to > now {
        blockers.push(Blocker::NotEnded { month_end: to });
    }
    let counts = db::readiness::coverage_counts(pool, from, to).await?;
    if counts.is_empty() {
        blockers.push(Blocker::NoCluster);
    }
    for c in &counts {
        if let Some((hours, span)) = uncovered_span(c.first_ingest, from, to) {
            blockers.push(Blocker::UncoveredHours { cluster: c.cluster.clone(), hours, spans: vec![span] });
        }
    }
    let missing = db::readiness::missing_hours(pool, from, to).await?;
    let mut by_cluster: BTreeMap<String, Vec<DateTime<Utc>>> = BTreeMap::new();
    for m in missing {
        by_cluster.entry(m.cluster).or_default().push(m.hour);
    }
    for (cluster, hours) in by_cluster {
        blockers.push(Blocker::MissingHours { cluster, hours: hours.len() as i64, spans: hour_spans(&hours) });
    }
    for f in db::readiness::open_failures(pool, from, to).await? {
        blockers.push(Blocker::FailedWindow {
            cluster: f.cluster,
            from: f.hour_from,
            to: f.hour_to,
            error: f.error,
            failed_at: f.failed_at,
            hours_not_read_since: f.hours_not_read_since,
        });
    }
    // the last hour the month needs ends at `to` rounded up to the hour. A watermark held back by a hole of an
    // earlier month says nothing of this one (its hours are checked one by one above): only one that stops within
    // the month, or none at all, does.
    let needed = crate::ingest::window::floor_hour(to - Duration::microseconds(1)) + Duration::hours(1);
    for c in db::readiness::clusters_before(pool, to).await? {
        if c.watermark.is_none_or(|w| w < needed && w >= from) {
            blockers.push(Blocker::WatermarkBeforeMonthEnd {
                cluster: c.cluster,
                watermark: c.watermark,
                month_end: to,
            });
        }
    }
    blockers.extend(unknown_models(bills));
    blockers.extend(unpriced_reservations(bills));
    let kinds: Vec<String> = UNVERIFIED_NODE_ANOMALIES.iter().map(|k| (*k).to_string()).collect();
    for n in db::readiness::node_problems(pool, from, to, &kinds).await? {
        blockers.push(Blocker::UnverifiedNode { cluster: n.cluster, node: n.node, anomaly: n.kind, hours: n.hours });
    }
    let mut kept = db::history::kept_hours(pool, None).await?;
    kept.retain(|k| k.hour + Duration::hours(1) > from && k.hour < to);
    kept.sort_by_key(|k| (k.cluster.clone(), k.hour));
    for k in kept {
        blockers.push(Blocker::KeptHour {
            cluster: k.cluster,
            hour: k.hour,
            run_id: k.run_id,
            stored_rows: k.stored_rows,
            stored_samples: k.stored_samples,
            read_rows: k.read_rows,
            read_samples: k.read_samples,
        });
    }
    // adjustments an approval now would book to this month: the close would leave them out
    let mut conn = pool.acquire().await?;
    let (_, pending) = super::adjustments::for_open_month(&mut conn, month).await?;
    drop(conn);
    for a in pending {
        blockers.push(Blocker::PendingAdjustment { id: a.id, team: a.team, amount: a.amount });
    }
    let coverage = coverage(&counts, from, to, now);
    Ok(Readiness { month, from, to, ready: blockers.is_empty(), blockers, checked_at: now, coverage })
}
