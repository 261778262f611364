//! Whether a month may be closed (SPEC §6 "Closing needs a complete month"), as data: what stands in the way
//! ([`Blocker`]: an hour of a cluster not stored — the hours before a cluster's first ingest too: they have no data,
//! and a month no data covers is not complete (issue 33: October without any data said ready) —, a window whose
//! read failed and was not read again, a watermark short of the month's end, an unknown or unpriced GPU model, a
//! node whose cards could not be counted, an hour kept over a smaller read), so a close can refuse with it — or
//! record it beside the reason of an explicit override; beside it, each cluster's coverage of the month (hours with
//! data / hours of the month). Pure: the use case `crate::usecase::readiness` reads the stored facts and lists.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Duration, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::billing::{Month, MonthBills};
use crate::db;

/// Anomaly kinds that mean a node's cards were not counted but assumed (a unit taken as a card, a configured
/// replica count): its lines rest on a guess until configuration settles it.
pub const UNVERIFIED_NODE_ANOMALIES: &[&str] = &["default_replicas", "unverified_node"];

/// One thing that stands in the way of closing a month.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Blocker {
    /// The month has not ended in the billing time zone.
    NotEnded { month_end: DateTime<Utc> },
    /// Hours of the month a cluster has not stored, though it was read before them.
    MissingHours { cluster: String, hours: i64, spans: Vec<HourSpan> },
    /// Hours of the month before a cluster's first ingest (all of them when its first ingest is after the month,
    /// or there is none): no data covers them.
    UncoveredHours { cluster: String, hours: i64, spans: Vec<HourSpan> },
    /// No cluster is registered: nothing covers the month.
    NoCluster,
    /// A read that failed and whose hours have not all been stored since.
    FailedWindow {
        cluster: String,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        error: String,
        failed_at: DateTime<Utc>,
        /// Hours of the window, within the month, not stored since the failure.
        hours_not_read_since: i64,
    },
    /// The cluster's watermark (every hour before it is stored) is short of the month's end.
    WatermarkBeforeMonthEnd { cluster: String, watermark: Option<DateTime<Utc>>, month_end: DateTime<Utc> },
    /// Card-hours of a GPU model that is unknown or has no rate for some day of the month: billed at nothing.
    UnknownGpuModel {
        gpu_model: String,
        #[schema(value_type = String)]
        usage_card_hours: Decimal,
        #[schema(value_type = String)]
        capacity_card_hours: Decimal,
        reason: String,
    },
    /// Under reserved-quota billing, a quota scope's guaranteed card-hours billed at nothing: no reservation terms
    /// name the model of its cards, or that model has no rate for some day of the month (SPEC §10).
    UnpricedReservation {
        team: String,
        scope: String,
        /// The terms' model; absent when no terms cover the hours.
        gpu_model: Option<String>,
        #[schema(value_type = String)]
        guaranteed_card_hours: Decimal,
        reason: String,
    },
    /// A node whose cards could not be counted (its units taken at face value or by a configured count).
    UnverifiedNode { cluster: String, node: String, anomaly: String, hours: i64 },
    /// A stored hour a later read held less for, left as it was: the source and the books disagree.
    KeptHour {
        cluster: String,
        hour: DateTime<Utc>,
        run_id: i64,
        stored_rows: i32,
        stored_samples: Option<i64>,
        read_rows: i32,
        read_samples: i64,
    },
    /// An adjustment booked to the month awaits its checker (SPEC §11): a close leaves it out, and approved later it
    /// restates the month on the next open one.
    PendingAdjustment {
        /// Its id (`ADJ-<id>` on the statements).
        id: i64,
        team: String,
        /// Yuan: negative a credit, positive a debit.
        amount: crate::money::Money,
    },
}

/// A run of whole hours `[from, to)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HourSpan {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
}

/// An instant as RFC 3339 in UTC, to the second (`2026-10-15T03:00:00Z`), as the API writes them.
fn ts(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, &ts)
    }
}

impl Blocker {
    /// The blocker in words, its instants written by `ts`. A statement frozen under layout 1 prints them as that
    /// release did (chrono's `2026-10-15 03:00:00 UTC`), see `export::pdf`.
    pub fn describe(&self, ts: &dyn Fn(&DateTime<Utc>) -> String) -> String {
        let mut out = String::new();
        // writing into a String cannot fail
        let _ = self.write(&mut out, ts);
        out
    }

    fn write(&self, f: &mut dyn fmt::Write, ts: &dyn Fn(&DateTime<Utc>) -> String) -> fmt::Result {
        match self {
            Self::NotEnded { month_end } => write!(f, "the month has not ended (it ends {})", ts(month_end)),
            Self::MissingHours { cluster, hours, spans } => {
                let spans: Vec<String> = spans.iter().map(|s| format!("{} – {}", ts(&s.from), ts(&s.to))).collect();
                write!(f, "cluster {cluster}: {hours} hour(s) not ingested: {}", spans.join(", "))
            }
            Self::UncoveredHours { cluster, hours, spans } => {
                let spans: Vec<String> = spans.iter().map(|s| format!("{} – {}", ts(&s.from), ts(&s.to))).collect();
                write!(
                    f,
                    "cluster {cluster}: {hours} hour(s) before its first ingest have no data: {}",
                    spans.join(", ")
                )
            }
            Self::NoCluster => write!(f, "no cluster is registered: no data covers the month"),
            Self::FailedWindow { cluster, from, to, error, failed_at, hours_not_read_since } => write!(
                f,
                "cluster {cluster}: the read of {} – {} failed at {} ({error}); \
                 {hours_not_read_since} hour(s) of it not ingested since",
                ts(from),
                ts(to),
                ts(failed_at)
            ),
            Self::WatermarkBeforeMonthEnd { cluster, watermark, month_end } => match watermark {
                Some(w) => write!(
                    f,
                    "cluster {cluster}: complete only until {}, before the month's end {}",
                    ts(w),
                    ts(month_end)
                ),
                None => write!(f, "cluster {cluster}: no watermark, the month ends {}", ts(month_end)),
            },
            Self::UnknownGpuModel { gpu_model, usage_card_hours, capacity_card_hours, reason } => write!(
                f,
                "GPU model {gpu_model}: {reason} ({usage_card_hours} card-hours used, {capacity_card_hours} \
                 of capacity)"
            ),
            Self::UnpricedReservation { team, scope, guaranteed_card_hours, reason, .. } => write!(
                f,
                "team {team}, quota {scope}: {reason} ({guaranteed_card_hours} guaranteed card-hours billed at nothing)"
            ),
            Self::UnverifiedNode { cluster, node, anomaly, hours } => {
                write!(f, "cluster {cluster}, node {node}: cards not counted ({anomaly}) in {hours} hour(s)")
            }
            Self::KeptHour { cluster, hour, run_id, stored_rows, stored_samples, read_rows, read_samples } => write!(
                f,
                "cluster {cluster}: hour {} kept over a smaller read by run {run_id} (stored {stored_rows} rows / \
                 {} samples, read {read_rows} rows / {read_samples} samples)",
                ts(hour),
                stored_samples.map_or_else(|| "?".to_string(), |s| s.to_string())
            ),
            Self::PendingAdjustment { id, team, amount } => write!(
                f,
                "adjustment ADJ-{id} of team {team} ({amount} yuan) awaits approval: decide it before the close, \
                 or it restates the month on a later statement once approved"
            ),
        }
    }
}

/// A month's readiness to close.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Readiness {
    #[schema(value_type = String, example = "2026-11")]
    pub month: Month,
    /// The month's span in the billing time zone.
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    /// No blocker: the month closes without an override.
    pub ready: bool,
    pub blockers: Vec<Blocker>,
    pub checked_at: DateTime<Utc>,
    /// Each registered cluster's coverage of the month.
    #[serde(default)]
    pub coverage: Vec<ClusterCoverage>,
}

/// How much of a month one cluster's stored data covers: hours with data / hours of the month.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ClusterCoverage {
    pub cluster: String,
    /// Hours of the month with data stored.
    pub hours_covered: i64,
    /// Hours of the month in the billing time zone (743, 744 or 745 across a DST change).
    pub hours_of_month: i64,
    /// Hours of the month elapsed at the time of the answer (all of them once it has ended).
    pub hours_elapsed: i64,
    /// `hours_covered / hours_of_month` (0–1).
    pub share: f64,
    /// The first and last hour of the month with data; none when no hour has.
    pub first_hour: Option<DateTime<Utc>>,
    pub last_hour: Option<DateTime<Utc>>,
    /// The cluster's first stored hour ever; the month's hours before it are uncovered.
    pub first_ingest: Option<DateTime<Utc>>,
}

/// Each cluster's coverage of `[from, to)` at `now`, from its stored hours in the month.
pub fn coverage(
    rows: &[db::readiness::CoverageCount],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Vec<ClusterCoverage> {
    let start = crate::ingest::window::floor_hour(from);
    let hours_of_month = whole_hours(start, to);
    let hours_elapsed =
        whole_hours(start, to.min(crate::ingest::window::floor_hour(now) + Duration::hours(1)).max(start));
    rows.iter()
        .map(|r| ClusterCoverage {
            cluster: r.cluster.clone(),
            hours_covered: r.hours,
            hours_of_month,
            hours_elapsed,
            share: if hours_of_month > 0 { r.hours as f64 / hours_of_month as f64 } else { 0.0 },
            first_hour: r.first_hour,
            last_hour: r.last_hour,
            first_ingest: r.first_ingest,
        })
        .collect()
}

/// The whole hours meeting `[from, to)` for `from` on the hour (a zone whose offset is not whole hours starts its
/// month within an hour: that hour counts).
fn whole_hours(from: DateTime<Utc>, to: DateTime<Utc>) -> i64 {
    let secs = (to - from).num_seconds().max(0);
    (secs + 3599) / 3600
}

/// The hours of `[from, to)` before a cluster's first ingest (every hour when it has none, or its first is at or
/// after `to`), as one span; `None` when its first ingest is at or before the month's first hour.
pub fn uncovered_span(
    first_ingest: Option<DateTime<Utc>>,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Option<(i64, HourSpan)> {
    let start = crate::ingest::window::floor_hour(from);
    let end = first_ingest.map_or(to, |f| f.min(to));
    (end > start).then(|| {
        (
            whole_hours(start, end),
            HourSpan {
                from: start,
                to: crate::ingest::window::floor_hour(end - Duration::microseconds(1)) + Duration::hours(1),
            },
        )
    })
}

/// Joins sorted hours into runs of consecutive hours.
pub fn hour_spans(hours: &[DateTime<Utc>]) -> Vec<HourSpan> {
    let mut spans: Vec<HourSpan> = Vec::new();
    for &h in hours {
        match spans.last_mut() {
            Some(s) if s.to == h => s.to = h + Duration::hours(1),
            _ => spans.push(HourSpan { from: h, to: h + Duration::hours(1) }),
        }
    }
    spans
}

/// The GPU models of a month's bills billed at nothing: named `unknown`, or without a rate on some day.
pub fn unknown_models(bills: &MonthBills) -> Vec<Blocker> {
    #[derive(Default)]
    struct Seen {
        usage: Decimal,
        capacity: Decimal,
        unpriced: bool,
    }
    let mut seen: BTreeMap<&str, Seen> = BTreeMap::new();
    // a reservation line without a rate is a reservation's blocker ([`unpriced_reservations`]), not a model's
    for line in bills.teams.iter().flat_map(|t| &t.lines).filter(|l| !l.is_reservation()) {
        if line.rate.is_none() || line.gpu_model == "unknown" {
            let s = seen.entry(&line.gpu_model).or_default();
            s.usage += line.card_hours;
            s.unpriced |= line.rate.is_none();
        }
    }
    for line in &bills.capacity {
        if line.rate.is_none() || line.gpu_model == "unknown" {
            let s = seen.entry(&line.gpu_model).or_default();
            s.capacity += line.card_hours;
            s.unpriced |= line.rate.is_none();
        }
    }
    seen.into_iter()
        // a model without a rate but without a card-hour bills nothing and hides nothing
        .filter(|(model, s)| *model == "unknown" || !(s.usage.is_zero() && s.capacity.is_zero()))
        .map(|(model, s)| Blocker::UnknownGpuModel {
            gpu_model: model.to_string(),
            usage_card_hours: s.usage,
            capacity_card_hours: s.capacity,
            reason: if model == "unknown" {
                "the model of these cards is not known".to_string()
            } else {
                "no rate covers every day of the month".to_string()
            },
        })
        .collect()
}

/// The reservations of a month's bills billed at nothing (reserved-quota billing): one blocker per team and scope.
pub fn unpriced_reservations(bills: &MonthBills) -> Vec<Blocker> {
    let mut out: Vec<Blocker> = Vec::new();
    for t in &bills.teams {
        for l in t.lines.iter().filter(|l| l.kind == crate::billing::reserved::RESERVATION && l.unpriced) {
            let terms = l.gpu_model != crate::billing::reserved::NO_TERMS_MODEL;
            let hours = l.reserved_card_hours.unwrap_or_default();
            match out.iter_mut().find(|b| matches!(b, Blocker::UnpricedReservation { team, scope, .. } if *team == t.team && *scope == l.namespace)) {
                Some(Blocker::UnpricedReservation { guaranteed_card_hours, .. }) => *guaranteed_card_hours += hours,
                _ => out.push(Blocker::UnpricedReservation {
                    team: t.team.clone(),
                    scope: l.namespace.clone(),
                    gpu_model: terms.then(|| l.gpu_model.clone()),
                    guaranteed_card_hours: hours,
                    reason: if terms {
                        "no rate covers every day of the month for the model of its reservation terms".to_string()
                    } else {
                        "no reservation terms name the GPU model of its guaranteed cards".to_string()
                    },
                }),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn consecutive_hours_join_into_spans() {
        let hours = [t("2026-11-03T01:00:00Z"), t("2026-11-03T02:00:00Z"), t("2026-11-03T05:00:00Z")];
        assert_eq!(
            hour_spans(&hours),
            vec![
                HourSpan { from: t("2026-11-03T01:00:00Z"), to: t("2026-11-03T03:00:00Z") },
                HourSpan { from: t("2026-11-03T05:00:00Z"), to: t("2026-11-03T06:00:00Z") },
            ]
        );
        assert!(hour_spans(&[]).is_empty());
    }
}
