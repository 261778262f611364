//! A close's blockers in words of a language: the glossary's (`blocker.*`), as the pages and a layout-4 statement
//! print them.

use chrono::{DateTime, Utc};

use crate::glossary::{self, Lang};
use crate::ledger::readiness::{Blocker, HourSpan};

/// The blocker in `lang`, in the glossary's words ([`crate::glossary`], `blocker.*`), its instants written by
/// `ts` (the billing time zone, named): what the pages and a layout-4 statement print. The English of
/// [`Blocker::describe`] stays the API's and layout 3's.
pub fn words(blocker: &Blocker, lang: Lang, ts: &dyn Fn(&DateTime<Utc>) -> String) -> String {
    let spans = |spans: &[HourSpan]| {
        spans.iter().map(|s| format!("{} – {}", ts(&s.from), ts(&s.to))).collect::<Vec<_>>().join(lang.pick("，", ", "))
    };
    let p = |key: &str, values: &[(&str, String)]| glossary::phrase(lang, key, values);
    match blocker {
        Blocker::NotEnded { month_end } => p("blocker.not_ended", &[("month_end", ts(month_end))]),
        Blocker::MissingHours { cluster, hours, spans: s } => p(
            "blocker.missing_hours",
            &[("cluster", cluster.clone()), ("hours", hours.to_string()), ("spans", spans(s))],
        ),
        Blocker::UncoveredHours { cluster, hours, spans: s } => p(
            "blocker.uncovered_hours",
            &[("cluster", cluster.clone()), ("hours", hours.to_string()), ("spans", spans(s))],
        ),
        Blocker::NoCluster => p("blocker.no_cluster", &[]),
        Blocker::FailedWindow { cluster, from, to, error, failed_at, hours_not_read_since } => p(
            "blocker.failed_window",
            &[
                ("cluster", cluster.clone()),
                ("from", ts(from)),
                ("to", ts(to)),
                ("failed_at", ts(failed_at)),
                ("error", error.clone()),
                ("hours", hours_not_read_since.to_string()),
            ],
        ),
        Blocker::WatermarkBeforeMonthEnd { cluster, watermark: Some(w), month_end } => {
            p("blocker.watermark", &[("cluster", cluster.clone()), ("watermark", ts(w)), ("month_end", ts(month_end))])
        }
        Blocker::WatermarkBeforeMonthEnd { cluster, watermark: None, month_end } => {
            p("blocker.no_watermark", &[("cluster", cluster.clone()), ("month_end", ts(month_end))])
        }
        Blocker::UnknownGpuModel { gpu_model, usage_card_hours, capacity_card_hours, .. } => {
            let values = [
                ("model", gpu_model.clone()),
                ("usage", super::present::card_hours(*usage_card_hours)),
                ("capacity", super::present::card_hours(*capacity_card_hours)),
            ];
            p(if gpu_model == "unknown" { "blocker.unknown_gpu_model" } else { "blocker.unpriced_model" }, &values)
        }
        Blocker::UnpricedReservation { team, scope, gpu_model, guaranteed_card_hours, .. } => {
            let values = [
                ("team", team.clone()),
                ("scope", scope.clone()),
                ("model", gpu_model.clone().unwrap_or_default()),
                ("hours", super::present::card_hours(*guaranteed_card_hours)),
            ];
            p(
                if gpu_model.is_some() { "blocker.unpriced_reservation" } else { "blocker.reservation_without_terms" },
                &values,
            )
        }
        Blocker::UnverifiedNode { cluster, node, anomaly, hours } => p(
            "blocker.unverified_node",
            &[
                ("cluster", cluster.clone()),
                ("node", node.clone()),
                ("anomaly", glossary::anomaly(lang, anomaly)),
                ("hours", hours.to_string()),
            ],
        ),
        Blocker::KeptHour { cluster, hour, run_id, stored_rows, stored_samples, read_rows, read_samples } => p(
            "blocker.kept_hour",
            &[
                ("cluster", cluster.clone()),
                ("hour", ts(hour)),
                ("run", run_id.to_string()),
                ("stored_rows", stored_rows.to_string()),
                ("stored_samples", stored_samples.map_or_else(|| "?".to_string(), |s| s.to_string())),
                ("read_rows", read_rows.to_string()),
                ("read_samples", read_samples.to_string()),
            ],
        ),
        Blocker::PendingAdjustment { id, team, amount } => p(
            "blocker.pending_adjustment",
            &[("id", format!("ADJ-{id}")), ("team", team.clone()), ("amount", amount.to_string())],
        ),
    }
}
