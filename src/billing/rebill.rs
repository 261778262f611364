//! A month's bills with some card-hours moved — from one bill line (team, namespace, model, kind, rate) to another,
//! or in or out of the capacity — recomputed under the same policy: what a change of a node's settings (its model,
//! cards or replicas) will do to a month once its hours are metered again, computable before anything is saved.
//! Pure: the moves in, the bills after out; the lines are re-priced and the unallocated cost re-split exactly as
//! [`compute_month`] does.

use std::collections::BTreeMap;

use rust_decimal::Decimal;

use super::compute::{MonthBills, compute_month};
use super::finance::FinanceCodes;
use super::lines::{CapacityLine, UsageLine};
use crate::money::RatePerCardHour;

/// Card-hours of one bill line's key moved to another key.
#[derive(Debug, Clone, PartialEq)]
pub struct LineMove {
    pub team: String,
    pub namespace: String,
    /// (pricing key, kind, rate) before and after.
    pub from: (String, String, Option<RatePerCardHour>),
    pub to: (String, String, Option<RatePerCardHour>),
    pub card_hours_before: Decimal,
    pub card_hours_after: Decimal,
    /// The team's finance codes on the days moved: the line of those codes is the one moved from and to.
    pub finance: Option<FinanceCodes>,
}

/// Capacity card-hours of one (pricing key, rate) moved to another.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityMove {
    pub from: (String, Option<RatePerCardHour>),
    pub to: (String, Option<RatePerCardHour>),
    pub card_hours_before: Decimal,
    pub card_hours_after: Decimal,
    /// Of those, offered to workloads.
    pub offered_before: Decimal,
    pub offered_after: Decimal,
}

type UsageKey = (String, String, String, String, Option<RatePerCardHour>, Option<FinanceCodes>);

/// `bills` with `usage` and `capacity` moved, recomputed under the bills' policy. Lines billed as whole cards stay
/// as they are (a move touches the physical share only); effective and unmetered card-hours move with the hours in
/// proportion, so a line's utilization is kept.
pub fn rebill(bills: &MonthBills, usage: &[LineMove], capacity: &[CapacityMove]) -> MonthBills {
    let mut lines: BTreeMap<UsageKey, UsageLine> = BTreeMap::new();
    let mut whole: Vec<UsageLine> = Vec::new();
    for t in &bills.teams {
        for l in &t.lines {
            let u = UsageLine {
                team: t.team.clone(),
                namespace: l.namespace.clone(),
                gpu_model: l.gpu_model.clone(),
                kind: l.kind.clone(),
                card_hours: l.card_hours,
                effective_card_hours: l.effective_card_hours,
                unmetered_card_hours: l.unmetered_card_hours,
                rate: l.rate,
                whole_card_hours: l.whole_card_hours,
                unverified_node: l.unverified_node,
                finance: l.finance.clone(),
            };
            if l.whole_card_hours.is_some() {
                whole.push(u);
            } else {
                let key = (t.team.clone(), l.namespace.clone(), l.gpu_model.clone(), l.kind.clone(), l.rate);
                lines.insert((key.0, key.1, key.2, key.3, key.4, l.finance.clone()), u);
            }
        }
    }
    for m in usage {
        let from_key =
            (m.team.clone(), m.namespace.clone(), m.from.0.clone(), m.from.1.clone(), m.from.2, m.finance.clone());
        let (mut effective, mut unmetered) = (Decimal::ZERO, Decimal::ZERO);
        if let Some(l) = lines.get_mut(&from_key) {
            let share = if l.card_hours.is_zero() { Decimal::ZERO } else { m.card_hours_before / l.card_hours };
            effective = (l.effective_card_hours * share).round_dp(6);
            unmetered = (l.unmetered_card_hours * share).round_dp(6);
            l.card_hours -= m.card_hours_before;
            l.effective_card_hours -= effective;
            l.unmetered_card_hours -= unmetered;
        }
        let ratio = if m.card_hours_before.is_zero() { Decimal::ONE } else { m.card_hours_after / m.card_hours_before };
        let to_key = (m.team.clone(), m.namespace.clone(), m.to.0.clone(), m.to.1.clone(), m.to.2, m.finance.clone());
        let l = lines.entry(to_key).or_insert_with(|| UsageLine {
            team: m.team.clone(),
            namespace: m.namespace.clone(),
            gpu_model: m.to.0.clone(),
            kind: m.to.1.clone(),
            card_hours: Decimal::ZERO,
            effective_card_hours: Decimal::ZERO,
            unmetered_card_hours: Decimal::ZERO,
            rate: m.to.2,
            whole_card_hours: None,
            unverified_node: false,
            finance: m.finance.clone(),
        });
        l.card_hours += m.card_hours_after;
        l.effective_card_hours += (effective * ratio).round_dp(6).min(m.card_hours_after);
        l.unmetered_card_hours += (unmetered * ratio).round_dp(6).min(m.card_hours_after);
    }
    let usage_lines: Vec<UsageLine> = lines
        .into_values()
        .map(|mut l| {
            // a line emptied by a move is gone; what rounding left of it is not usage
            l.card_hours = l.card_hours.max(Decimal::ZERO);
            l.effective_card_hours = l.effective_card_hours.clamp(Decimal::ZERO, l.card_hours);
            l.unmetered_card_hours = l.unmetered_card_hours.clamp(Decimal::ZERO, l.card_hours);
            l
        })
        .filter(|l| !l.card_hours.is_zero())
        .chain(whole)
        .collect();

    let mut cap: BTreeMap<(String, Option<RatePerCardHour>), CapacityLine> = BTreeMap::new();
    for c in &bills.capacity {
        cap.insert(
            (c.gpu_model.clone(), c.rate),
            CapacityLine {
                gpu_model: c.gpu_model.clone(),
                card_hours: c.card_hours,
                offered_card_hours: c.offered_card_hours(),
                rate: c.rate,
            },
        );
    }
    for m in capacity {
        if let Some(c) = cap.get_mut(&m.from) {
            c.card_hours -= m.card_hours_before;
            c.offered_card_hours -= m.offered_before;
        }
        let c = cap.entry(m.to.clone()).or_insert_with(|| CapacityLine {
            gpu_model: m.to.0.clone(),
            card_hours: Decimal::ZERO,
            offered_card_hours: Decimal::ZERO,
            rate: m.to.1,
        });
        c.card_hours += m.card_hours_after;
        c.offered_card_hours += m.offered_after;
    }
    let capacity_lines: Vec<CapacityLine> = cap
        .into_values()
        .map(|mut c| {
            c.card_hours = c.card_hours.max(Decimal::ZERO);
            c.offered_card_hours = c.offered_card_hours.clamp(Decimal::ZERO, c.card_hours);
            c
        })
        .filter(|c| !c.card_hours.is_zero())
        .collect();
    let mut after = compute_month(&usage_lines, &capacity_lines, bills.policy);
    after.replica_policies = bills.replica_policies.clone();
    after
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::billing::{BillMode, BillPolicy, UnallocatedPolicy};
    use crate::money::Money;
    use rust_decimal_macros::dec;

    fn usage(team: &str, model: &str, hours: Decimal, rate: Option<RatePerCardHour>) -> UsageLine {
        UsageLine {
            team: team.into(),
            namespace: format!("{team}-ns"),
            gpu_model: model.into(),
            kind: "whole".into(),
            card_hours: hours,
            effective_card_hours: hours / dec!(2),
            unmetered_card_hours: Decimal::ZERO,
            rate,
            whole_card_hours: None,
            unverified_node: false,
            finance: None,
        }
    }

    #[test]
    fn nothing_moved_is_the_same_bills_and_a_model_set_prices_its_hours() {
        let r = RatePerCardHour::new(dec!(10));
        let spread = BillPolicy { mode: BillMode::Chargeback, unallocated: UnallocatedPolicy::SpreadProportionally };
        // a 10 card-hours on L40S (rate 10), b 6 card-hours on the node nothing named (unknown, unpriced); capacity
        // L40S 40 card-hours (400.00) and unknown 24 (0.00)
        let bills = compute_month(
            &[usage("a", "L40S", dec!(10), r), usage("b", "unknown", dec!(6), None)],
            &[CapacityLine::fully_offered("L40S", dec!(40), r), CapacityLine::fully_offered("unknown", dec!(24), None)],
            spread,
        );
        assert_eq!(rebill(&bills, &[], &[]), bills);
        // setting the node's model to L40S: b's 6 card-hours cost 60.00, the node's 24 card-hours 240.00
        let moved = rebill(
            &bills,
            &[LineMove {
                team: "b".into(),
                namespace: "b-ns".into(),
                from: ("unknown".into(), "whole".into(), None),
                to: ("L40S".into(), "whole".into(), r),
                card_hours_before: dec!(6),
                card_hours_after: dec!(6),
                finance: None,
            }],
            &[CapacityMove {
                from: ("unknown".into(), None),
                to: ("L40S".into(), r),
                card_hours_before: dec!(24),
                card_hours_after: dec!(24),
                offered_before: dec!(24),
                offered_after: dec!(24),
            }],
        );
        // capacity 640.00, allocated 160.00, unallocated 480.00 spread 10 : 6 → 300.00 and 180.00
        assert_eq!(moved.capacity_cost, Money::round_fen(dec!(640)));
        let totals: Vec<String> = moved.teams.iter().map(|t| t.total.to_string()).collect();
        assert_eq!(totals, ["400.00", "240.00"]);
        assert_eq!(moved.teams[1].card_hours, dec!(6));
        assert_eq!(moved.teams[1].effective_card_hours, dec!(3), "utilization kept");
        assert!(moved.capacity.iter().all(|c| c.gpu_model == "L40S"));
    }
}
