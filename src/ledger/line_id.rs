//! Stable line ids (SPEC §11, layout 6): every line of a statement has an id that is the same on every face (JSON,
//! CSV, workbook), in every render and after the close, made from what the line is — never from its position or
//! its figures — so an ERP that booked a line finds it again, and a restatement names the line it corrects. A
//! statement's own id is `<month>/<team>`; a line's is unique within it.
//!
//! - `L-…` a usage or reservation line: its team, namespace (or quota scope), GPU model, kind, rate, whether billed
//!   as whole cards, and a reservation line's factor;
//! - `R-…` a restatement: the closed month it restates and the key of the line it corrects (the unallocated share
//!   of that month included);
//! - `U-…` a team's share of the unallocated cost; `C-…` a capacity line (model, rate); `UC-…` a team's unit cost of
//!   inference of one model and engine; `K-…` a cluster row of an export (unallocated, kept by the platform, …) by
//!   its line type; `ADJ-<n>` an approved adjustment ([`super::Adjustment::line_id`]).
//!
//! `…` is the first 12 hex digits of the SHA-256 of the parts joined by the unit separator (U+001F), which no part
//! can hold (team ids, namespaces and models are refused with control characters).

use crate::billing::{BillLine, CapacityBillLine, Month, RestatementLine};
use crate::money::RatePerCardHour;

fn hash(parts: &[&str]) -> String {
    crate::digest::sha256_hex(parts.join("\u{1f}").as_bytes())[..12].to_string()
}

fn rate(r: Option<RatePerCardHour>) -> String {
    r.map_or_else(|| "-".to_string(), |r| r.to_string())
}

/// A usage or reservation line of `team`'s bill. A line with finance codes has them among its parts (a team whose
/// codes change mid-month has a line of each: two ids); one without has the parts it had before codes existed.
pub fn bill_line(team: &str, l: &BillLine) -> String {
    let whole = if l.whole_card_hours.is_some() { "whole" } else { "fraction" };
    let factor = l.reservation_factor.map(|f| f.normalize().to_string()).unwrap_or_default();
    let rate = rate(l.rate);
    let mut parts = vec![team, &l.namespace, &l.gpu_model, &l.kind, &rate, whole, &factor];
    if let Some(codes) = &l.finance {
        parts.push("finance");
        parts.extend(codes.cells());
    }
    format!("L-{}", hash(&parts))
}

/// A restatement line of `r.team` (the month it restates and the line it corrects).
pub fn restatement(r: &RestatementLine) -> String {
    let month = r.original_month.map(|m: Month| m.to_string()).unwrap_or_default();
    format!("R-{}", hash(&[&month, &r.team, &r.namespace, &r.gpu_model, &r.kind, &rate(r.rate)]))
}

/// `team`'s share of the unallocated cost.
pub fn unallocated_share(team: &str) -> String {
    format!("U-{}", hash(&["unallocated_share", team]))
}

/// A cluster row of an export (`unallocated`, `platform_kept`, …: one of each per statement) by its line type.
pub fn cluster(line_type: &str) -> String {
    format!("K-{}", hash(&["cluster", line_type]))
}

/// A capacity line of the cluster.
pub fn capacity(c: &CapacityBillLine) -> String {
    format!("C-{}", hash(&[&c.gpu_model, &rate(c.rate)]))
}

/// `team`'s unit cost of inference of `model` on `engine`.
pub fn unit_cost(team: &str, model: &str, engine: &str) -> String {
    format!("UC-{}", hash(&[team, model, engine]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::billing::{BillMode, BillPolicy, CapacityLine, UnallocatedPolicy, UsageLine, compute_month};
    use rust_decimal::Decimal;
    use rust_decimal_macros::dec;

    fn usage(team: &str, ns: &str, kind: &str, rate: Decimal, whole: bool) -> UsageLine {
        UsageLine {
            team: team.into(),
            namespace: ns.into(),
            gpu_model: "A100-80GB".into(),
            kind: kind.into(),
            card_hours: dec!(10),
            effective_card_hours: dec!(5),
            unmetered_card_hours: Decimal::ZERO,
            rate: Some(RatePerCardHour::new(rate).unwrap()),
            whole_card_hours: whole.then_some(dec!(20)),
            unverified_node: false,
            finance: None,
        }
    }

    #[test]
    fn ids_are_made_of_what_a_line_is_unique_and_stable() {
        let lines = vec![
            usage("nlp", "nlp-prod", "whole", dec!(14), false),
            usage("nlp", "nlp-prod", "whole", dec!(15), false),
            usage("nlp", "nlp-prod", "timeslice", dec!(14), false),
            usage("nlp", "nlp-prod", "timeslice", dec!(14), true),
            usage("nlp", "nlp-dev", "whole", dec!(14), false),
            usage("vision", "nlp-prod", "whole", dec!(14), false),
        ];
        let cap =
            vec![CapacityLine::fully_offered("A100-80GB", dec!(1000), Some(RatePerCardHour::new(dec!(14)).unwrap()))];
        let policy = BillPolicy { mode: BillMode::Chargeback, unallocated: UnallocatedPolicy::KeptByPlatform };
        let bills = compute_month(&lines, &cap, policy);
        let ids: Vec<String> = bills.teams.iter().flat_map(|t| t.lines.iter().map(|l| bill_line(&t.team, l))).collect();
        assert_eq!(ids.len(), 6);
        let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
        assert_eq!(unique.len(), 6, "{ids:?}");
        assert!(ids.iter().all(|id| id.starts_with("L-") && id.len() == 14), "{ids:?}");
        // the same lines computed again, in another order, with other hours: the same ids
        let mut again = lines.clone();
        again.reverse();
        for l in &mut again {
            l.card_hours = dec!(99);
        }
        let bills2 = compute_month(&again, &cap, policy);
        let mut ids2: Vec<String> =
            bills2.teams.iter().flat_map(|t| t.lines.iter().map(|l| bill_line(&t.team, l))).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        ids2.sort();
        assert_eq!(sorted, ids2);
        assert_ne!(unallocated_share("nlp"), unallocated_share("vision"));
        assert_ne!(unit_cost("nlp", "llama", "vllm"), unit_cost("nlp", "llama", "tgi"));
        assert!(capacity(&bills.capacity[0]).starts_with("C-"));
    }

    #[test]
    fn codes_changing_mid_month_split_a_line_into_two_ids_and_leave_lines_without_codes_as_they_were() {
        use crate::billing::FinanceCodes;
        let codes = |cc: &str| FinanceCodes { cost_centre: Some(cc.into()), ..Default::default() };
        let before = usage("nlp", "nlp-prod", "whole", dec!(14), false);
        let plain = compute_month(std::slice::from_ref(&before), &[], BillPolicy::default());
        // the first half of the month under CC-1, the second under CC-2: two lines of 10 card-hours each
        let split = compute_month(
            &[
                UsageLine { finance: Some(codes("CC-1")), ..before.clone() },
                UsageLine { finance: Some(codes("CC-2")), ..before.clone() },
            ],
            &[],
            BillPolicy::default(),
        );
        let lines = &split.teams[0].lines;
        assert_eq!(lines.len(), 2);
        assert_eq!(lines.iter().map(|l| l.card_hours).sum::<Decimal>(), dec!(20));
        assert_eq!(lines[0].finance, Some(codes("CC-1")));
        assert_ne!(bill_line("nlp", &lines[0]), bill_line("nlp", &lines[1]));
        // a line without codes keeps the id of layout 6, which no line with codes has
        let id = bill_line("nlp", &plain.teams[0].lines[0]);
        assert_eq!(id, "L-".to_string() + &hash(&["nlp", "nlp-prod", "A100-80GB", "whole", "14.0000", "fraction", ""]));
        assert!(lines.iter().all(|l| bill_line("nlp", l) != id));
    }
}
