//! Restatements (更正): differences between a closed month's bill and the same month recomputed later.
//!
//! A closed month is immutable. When late data or a correction changes what the month would bill, the
//! difference is not written into the closed bill but shown as restatement lines on the next open month.
//! Lines are compared per key (namespace, GPU model, kind, rate): each key whose hours or amount differ
//! gives one line with recomputed − closed. Amount deltas are differences of already-rounded line amounts,
//! so `closed.allocated + Σ amount_delta (usage lines) == recomputed.allocated` exactly.
//!
//! A change in the team's share of the unallocated cost (capacity changed, or other teams' usage moved
//! the proportions) is carried as one more line, namespace [`UNALLOCATED_SHARE_NAMESPACE`], empty model and
//! kind, no rate, zero hours. With it, `closed.total + Σ amount_delta == recomputed.total` exactly.

use std::collections::{BTreeMap, BTreeSet};

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::compute::{MonthBills, TeamBill};
use super::lines::{BillLine, LineKey};
use super::month::Month;
use crate::money::{Money, RatePerCardHour};

/// The namespace of the restatement line that carries a change in the unallocated share.
pub const UNALLOCATED_SHARE_NAMESPACE: &str = "(unallocated share)";

/// One difference between a closed bill and its recomputation (recomputed − closed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestatementLine {
    pub team: String,
    pub namespace: String,
    pub gpu_model: String,
    pub kind: String,
    pub rate: Option<RatePerCardHour>,
    pub card_hours_delta: Decimal,
    pub effective_card_hours_delta: Decimal,
    pub unmetered_card_hours_delta: Decimal,
    pub amount_delta: Money,
    /// The closed month being restated; left `None` here, set by the caller that knows it.
    pub original_month: Option<Month>,
}

impl RestatementLine {
    /// Whether this line carries the unallocated-share difference rather than a usage difference.
    pub fn is_unallocated_share(&self) -> bool {
        self.namespace == UNALLOCATED_SHARE_NAMESPACE
    }
}

#[derive(Default)]
struct Sums {
    card: Decimal,
    effective: Decimal,
    unmetered: Decimal,
    amount: Money,
}

/// Sums lines per key: bills from `compute_month` have one line per key already, but a stored or
/// hand-edited bill might not.
fn by_key(lines: &[BillLine]) -> BTreeMap<LineKey, Sums> {
    let mut map: BTreeMap<LineKey, Sums> = BTreeMap::new();
    for l in lines {
        let s = map.entry(l.key()).or_default();
        s.card += l.card_hours;
        s.effective += l.effective_card_hours;
        s.unmetered += l.unmetered_card_hours;
        s.amount = s.amount + l.amount;
    }
    map
}

/// The non-zero differences `recomputed − closed` for one team, sorted by key, then the unallocated-share
/// line if that share changed. Lines take the team name of `recomputed`. Empty when nothing changed.
pub fn restatement(closed: &TeamBill, recomputed: &TeamBill) -> Vec<RestatementLine> {
    let (old, new) = (by_key(&closed.lines), by_key(&recomputed.lines));
    let zero = Sums::default();
    let keys: BTreeSet<&LineKey> = old.keys().chain(new.keys()).collect();
    let mut out: Vec<RestatementLine> = keys
        .into_iter()
        .filter_map(|key| {
            let (o, n) = (old.get(key).unwrap_or(&zero), new.get(key).unwrap_or(&zero));
            let line = RestatementLine {
                team: recomputed.team.clone(),
                namespace: key.0.clone(),
                gpu_model: key.1.clone(),
                kind: key.2.clone(),
                rate: key.3,
                card_hours_delta: n.card - o.card,
                effective_card_hours_delta: n.effective - o.effective,
                unmetered_card_hours_delta: n.unmetered - o.unmetered,
                amount_delta: n.amount - o.amount,
                original_month: None,
            };
            let changed = !(line.card_hours_delta.is_zero()
                && line.effective_card_hours_delta.is_zero()
                && line.unmetered_card_hours_delta.is_zero()
                && line.amount_delta.is_zero());
            changed.then_some(line)
        })
        .collect();

    let share_delta = recomputed.unallocated_share - closed.unallocated_share;
    if !share_delta.is_zero() {
        out.push(RestatementLine {
            team: recomputed.team.clone(),
            namespace: UNALLOCATED_SHARE_NAMESPACE.to_owned(),
            gpu_model: String::new(),
            kind: String::new(),
            rate: None,
            card_hours_delta: Decimal::ZERO,
            effective_card_hours_delta: Decimal::ZERO,
            unmetered_card_hours_delta: Decimal::ZERO,
            amount_delta: share_delta,
            original_month: None,
        });
    }
    out
}

/// [`restatement`] for every team of a month, teams paired by name (a team present on one side only is
/// compared with an empty bill), sorted by team. Σ amount_delta = Σ recomputed totals − Σ closed totals.
/// A change in what the platform keeps belongs to no team and is not a restatement line; compare
/// `platform_kept` directly.
pub fn restate_month(closed: &MonthBills, recomputed: &MonthBills) -> Vec<RestatementLine> {
    let old: BTreeMap<&str, &TeamBill> = closed.teams.iter().map(|t| (t.team.as_str(), t)).collect();
    let new: BTreeMap<&str, &TeamBill> = recomputed.teams.iter().map(|t| (t.team.as_str(), t)).collect();
    let teams: BTreeSet<&str> = old.keys().chain(new.keys()).copied().collect();
    teams
        .into_iter()
        .flat_map(|team| {
            let empty = TeamBill::empty(team);
            restatement(old.get(team).copied().unwrap_or(&empty), new.get(team).copied().unwrap_or(&empty))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::billing::compute::{BillMode, BillPolicy, UnallocatedPolicy, compute_month};
    use crate::billing::lines::{CapacityLine, UsageLine};
    use rust_decimal_macros::dec;

    fn usage(team: &str, ns: &str, hours: Decimal, r: Decimal) -> UsageLine {
        UsageLine {
            team: team.into(),
            namespace: ns.into(),
            gpu_model: "H100".into(),
            kind: "whole".into(),
            card_hours: hours,
            effective_card_hours: hours / dec!(2),
            unmetered_card_hours: Decimal::ZERO,
            rate: RatePerCardHour::new(r),
            whole_card_hours: None,
            unverified_node: false,
            finance: None,
        }
    }

    #[test]
    fn identical_bills_restate_nothing() {
        let bills = compute_month(&[usage("a", "a", dec!(96), dec!(12.3457))], &[], BillPolicy::default());
        assert!(restatement(&bills.teams[0], &bills.teams[0]).is_empty());
        assert!(restate_month(&bills, &bills).is_empty());
    }

    #[test]
    fn late_usage_and_a_new_rate_period() {
        // Closed: 96 card-hours × 12.3457 = 1185.19 (1185.1872).
        // Recomputed after a late ingest: 100 card-hours at 12.3457 = 1234.57, plus a 4 card-hour segment at the
        // new rate 13.0000 = 52.00. Deltas: +4 h / +49.38 on the old-rate line, +4 h / +52.00 on a new line.
        let closed = compute_month(&[usage("a", "ns", dec!(96), dec!(12.3457))], &[], BillPolicy::default());
        let recomputed = compute_month(
            &[usage("a", "ns", dec!(100), dec!(12.3457)), usage("a", "ns", dec!(4), dec!(13))],
            &[],
            BillPolicy::default(),
        );
        let (c, r) = (&closed.teams[0], &recomputed.teams[0]);
        let lines = restatement(c, r);
        assert_eq!(lines.len(), 2);
        assert_eq!((lines[0].card_hours_delta, lines[0].amount_delta.to_string()), (dec!(4), "49.38".into()));
        assert_eq!(lines[0].effective_card_hours_delta, dec!(2));
        assert_eq!(lines[1].rate.unwrap().to_string(), "13.0000");
        assert_eq!(lines[1].amount_delta.to_string(), "52.00");
        assert!(lines.iter().all(|l| l.team == "a" && l.original_month.is_none()));
        assert_eq!(c.total + lines.iter().map(|l| l.amount_delta).sum::<Money>(), r.total);
    }

    #[test]
    fn unallocated_share_change_is_one_extra_line() {
        // Capacity 100 card-hours × 10 = 1000.00. Closed: a 20 h, b 20 h → 200.00 each, share 300.00 each.
        // Recomputed: a 30 h → 300.00, b 20 h → 200.00, unallocated 500.00 → a 300.00, b 200.00.
        // a: usage +10 h / +100.00, share 300.00 → 300.00 (no share line); b: usage unchanged, share −100.00.
        let spread = BillPolicy { mode: BillMode::Chargeback, unallocated: UnallocatedPolicy::SpreadProportionally };
        let cap = [CapacityLine::fully_offered("H100", dec!(100), RatePerCardHour::new(dec!(10)))];
        let closed =
            compute_month(&[usage("a", "a", dec!(20), dec!(10)), usage("b", "b", dec!(20), dec!(10))], &cap, spread);
        let recomputed =
            compute_month(&[usage("a", "a", dec!(30), dec!(10)), usage("b", "b", dec!(20), dec!(10))], &cap, spread);
        let lines = restate_month(&closed, &recomputed);
        assert_eq!(lines.len(), 2);
        assert_eq!((lines[0].team.as_str(), lines[0].amount_delta.to_string()), ("a", "100.00".into()));
        assert!(lines[1].is_unallocated_share());
        assert_eq!((lines[1].team.as_str(), lines[1].amount_delta.to_string()), ("b", "-100.00".into()));
        assert_eq!(lines[1].card_hours_delta, Decimal::ZERO);
        // Both months bill the whole capacity, so the restatements net to zero.
        assert_eq!(lines.iter().map(|l| l.amount_delta).sum::<Money>(), Money::ZERO);
    }

    #[test]
    fn a_team_that_disappears_is_restated_to_zero() {
        let closed = compute_month(&[usage("gone", "g", dec!(1), dec!(3))], &[], BillPolicy::default());
        let recomputed = compute_month(&[], &[], BillPolicy::default());
        let lines = restate_month(&closed, &recomputed);
        assert_eq!(lines.len(), 1);
        assert_eq!((lines[0].team.as_str(), lines[0].card_hours_delta), ("gone", dec!(-1)));
        assert_eq!(lines[0].amount_delta.to_string(), "-3.00");
    }
}
