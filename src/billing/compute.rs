//! A month's bills: team bills from usage lines, the capacity cost, and what happens to the difference.
//!
//! Capacity not offered to workloads (cordoned nodes, unhealthy cards: SPEC §3) is priced apart and kept by the
//! platform: no team could have used it, so it is never spread. The unallocated cost is the offered capacity's
//! cost minus the allocated cost (Σ team line amounts), so allocated + unallocated + not_offered =
//! capacity_cost exactly — as long as the teams' usage costs no more than the offered capacity. Unallocated is
//! never negative (SPEC §6): usage above the counted capacity (capacity never seen for cards pods held, or the
//! rounding of many lines against one capacity line) is the **capacity shortfall**, a figure of its own that
//! nothing spreads, so spreading can never credit the teams their own bills away. Per the bill's policy the
//! unallocated cost is either kept by the platform or spread over teams in proportion to their allocated amounts
//! (largest remainder, ties by team name). Either way, to the fen: Σ team totals + platform_kept = capacity_cost
//! + over_recovery + capacity_shortfall.
//!
//! Showback (cost shown) and chargeback (cost billed) compute the *same* numbers: the mode only says what
//! finance does with them, so it is carried to the output and nothing else. Reserved-quota billing (SPEC §10) adds
//! each quota scope's reservation lines to its team ([`super::reserved`]); what the reservations bill above the
//! offered capacity's cost is the **over-commitment**, a figure of its own like the shortfall, so unallocated stays
//! never negative and, to the fen: Σ team totals + platform_kept = capacity_cost + over_recovery +
//! capacity_shortfall + over_commitment.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::lines::{BillLine, CapacityBillLine, CapacityLine, UsageLine, bill_lines, capacity_lines};
use super::replicas::{ReplicaBilling, ReplicaPolicyVersion};
use super::reserved::{Reservations, reservation_bill_lines};
use super::spread::largest_remainder;
use crate::money::Money;

/// Showback shows cost to teams; chargeback bills it to them (the numbers are identical); reserved-quota billing
/// bills each team its quota guarantees whether used or not, and its use above them (SPEC §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BillMode {
    #[default]
    Showback,
    Chargeback,
    Reserved,
}

/// Who carries the cost of capacity no team used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnallocatedPolicy {
    /// The platform team keeps it (teams pay for what they used).
    #[default]
    KeptByPlatform,
    /// Split over teams in proportion to their allocated amounts (teams pay for the whole cluster).
    SpreadProportionally,
}

/// The per-bill policy, shown on the bill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct BillPolicy {
    pub mode: BillMode,
    pub unallocated: UnallocatedPolicy,
}

impl BillMode {
    /// Every mode, in the order forms list them.
    pub const ALL: [BillMode; 3] = [BillMode::Showback, BillMode::Chargeback, BillMode::Reserved];

    /// The API's name (`showback`, `chargeback`, `reserved`).
    pub fn as_str(self) -> &'static str {
        match self {
            BillMode::Showback => "showback",
            BillMode::Chargeback => "chargeback",
            BillMode::Reserved => "reserved",
        }
    }

    /// The mode named so by the API.
    pub fn parse(name: &str) -> Option<BillMode> {
        BillMode::ALL.into_iter().find(|m| m.as_str() == name)
    }
}

impl UnallocatedPolicy {
    /// The API's name (`kept_by_platform`, `spread_proportionally`).
    pub fn as_str(self) -> &'static str {
        match self {
            UnallocatedPolicy::KeptByPlatform => "kept_by_platform",
            UnallocatedPolicy::SpreadProportionally => "spread_proportionally",
        }
    }
}

/// The policy a caller asked a statement for: either part may be left out. An open month fills what is left out
/// from the configured default (a draft under another policy); a closed month has the policy it was frozen with,
/// and a part asked for must be that one ([`PolicyChoice::conflict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PolicyChoice {
    pub mode: Option<BillMode>,
    pub unallocated: Option<UnallocatedPolicy>,
    /// A draft's preview with every time-sliced replica billed so, whatever the dated settings say (open months
    /// only: a closed month was billed per the settings of its time).
    pub replicas: Option<ReplicaBilling>,
}

impl PolicyChoice {
    /// Nothing asked for: the default policy (open) or the frozen one (closed).
    pub const NONE: PolicyChoice = PolicyChoice { mode: None, unallocated: None, replicas: None };

    /// Both parts chosen.
    pub fn exactly(p: BillPolicy) -> PolicyChoice {
        PolicyChoice { mode: Some(p.mode), unallocated: Some(p.unallocated), replicas: None }
    }

    /// The policy asked for, with what was left out taken from `default`.
    pub fn or(self, default: BillPolicy) -> BillPolicy {
        BillPolicy {
            mode: self.mode.unwrap_or(default.mode),
            unallocated: self.unallocated.unwrap_or(default.unallocated),
        }
    }

    /// Both parts, or `None` when one is missing (a close must name the whole policy it freezes).
    pub fn complete(self) -> Option<BillPolicy> {
        Some(BillPolicy { mode: self.mode?, unallocated: self.unallocated? })
    }

    /// The first part asked for that differs from `frozen` (`"mode"` or `"unallocated"`), with what was asked and
    /// what was frozen: a closed month's statement exists under its frozen policy only.
    pub fn conflict(self, frozen: BillPolicy) -> Option<(&'static str, &'static str, &'static str)> {
        if let Some(m) = self.mode.filter(|m| *m != frozen.mode) {
            return Some(("mode", m.as_str(), frozen.mode.as_str()));
        }
        if let Some(r) = self.replicas {
            return Some(("replicas", r.as_str(), "the dated replica settings"));
        }
        self.unallocated
            .filter(|u| *u != frozen.unallocated)
            .map(|u| ("unallocated", u.as_str(), frozen.unallocated.as_str()))
    }
}

/// One team's bill for the month.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TeamBill {
    pub team: String,
    /// Sorted by namespace, GPU model, kind, rate (unpriced first).
    pub lines: Vec<BillLine>,
    /// Σ line amounts.
    pub allocated: Money,
    /// The team's part of the unallocated cost (0 unless the policy spreads it; negative = a credit).
    pub unallocated_share: Money,
    /// `allocated + unallocated_share`.
    pub total: Money,
    pub card_hours: Decimal,
    pub effective_card_hours: Decimal,
    pub unmetered_card_hours: Decimal,
}

impl TeamBill {
    /// A bill with no lines, e.g. for a team that appears in only one of two months being compared.
    pub fn empty(team: impl Into<String>) -> TeamBill {
        TeamBill::from_lines(team.into(), Vec::new())
    }

    /// A team bill whose totals are the sums of `lines` (unallocated share 0).
    pub fn from_lines(team: String, lines: Vec<BillLine>) -> TeamBill {
        let allocated = lines.iter().map(|l| l.amount).sum();
        TeamBill {
            team,
            allocated,
            unallocated_share: Money::ZERO,
            total: allocated,
            card_hours: lines.iter().map(|l| l.card_hours).sum(),
            effective_card_hours: lines.iter().map(|l| l.effective_card_hours).sum(),
            unmetered_card_hours: lines.iter().map(|l| l.unmetered_card_hours).sum(),
            lines,
        }
    }

    fn with_share(mut self, share: Money) -> TeamBill {
        self.unallocated_share = share;
        self.total = self.allocated + share;
        self
    }
}

/// All teams' bills for one month of one cluster (or of whatever scope the caller summed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonthBills {
    /// Sorted by team name.
    pub teams: Vec<TeamBill>,
    /// The priced capacity lines, sorted by model then rate.
    pub capacity: Vec<CapacityBillLine>,
    /// Σ capacity line amounts (each rounded to the fen).
    pub capacity_cost: Money,
    /// Σ teams' allocated amounts.
    pub allocated: Money,
    /// `capacity_cost − not_offered − allocated`: offered capacity no team used; negative when time-slicing
    /// oversells the cards.
    pub unallocated: Money,
    /// What no team carries: the not-offered cost, plus all of `unallocated` when kept by the platform or when
    /// spreading finds no team with a positive allocated amount.
    pub platform_kept: Money,
    pub policy: BillPolicy,
    /// Σ capacity lines' not-offered amounts: capacity the platform keeps, never spread. `None` in a month closed
    /// before offered capacity was recorded (its `unallocated` is then `capacity_cost − allocated`), and left out
    /// of its stored form, so such a snapshot reads and prints as it was closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_offered: Option<Money>,
    /// What billing time-sliced replicas as whole cards recovered above their cards' cost (Σ line amount −
    /// line's physical amount): the platform's over-recovery, its own line, never a negative `unallocated`.
    /// `None` when no line is billed so (and in months closed before the policy existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_recovery: Option<Money>,
    /// What the teams' usage cost above the offered capacity's cost (usage on capacity that was never counted, or
    /// the rounding of many lines against one capacity line): its own figure, never a negative `unallocated`
    /// and never spread. `None` when there is none (and in months closed before it existed, whose `unallocated`
    /// may be negative as they were closed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_shortfall: Option<Money>,
    /// What reserved-quota billing billed above the offered capacity's cost beyond any shortfall (guarantees
    /// promised over the cards there are): its own figure, never a negative `unallocated`, never spread. `None`
    /// when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_commitment: Option<Money>,
    /// The replica billing settings in effect during the month, shown on the statement; `None` when the month has
    /// no time-sliced usage and no setting (and in months closed before the policy existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_policies: Option<Vec<ReplicaPolicyVersion>>,
}

impl MonthBills {
    /// The not-offered cost, 0 for a month closed before it was recorded.
    pub fn not_offered_cost(&self) -> Money {
        self.not_offered.unwrap_or_default()
    }

    /// The over-recovery, 0 when nothing was billed as whole cards.
    pub fn over_recovery_amount(&self) -> Money {
        self.over_recovery.unwrap_or_default()
    }

    /// The capacity shortfall, 0 when the offered capacity covers the usage.
    pub fn shortfall_amount(&self) -> Money {
        self.capacity_shortfall.unwrap_or_default()
    }

    /// The over-commitment, 0 unless reservations billed above the offered capacity.
    pub fn over_commitment_amount(&self) -> Money {
        self.over_commitment.unwrap_or_default()
    }

    /// `unallocated − capacity_shortfall − over_commitment`: the offered capacity's cost minus the allocation,
    /// signed (what months closed before the shortfall existed stored as `unallocated`).
    pub fn unallocated_signed(&self) -> Money {
        self.unallocated - self.shortfall_amount() - self.over_commitment_amount()
    }

    /// The same bills under another policy: the same lines, capacity and unallocated cost, the unallocated cost
    /// kept or spread as `policy` says (what a comparison of a month frozen under one policy with a view under
    /// another needs: like with like). A month closed with a negative unallocated (before the shortfall existed)
    /// is read as its shortfall, never spread. Read under a mode other than reserved-quota billing, a reserved
    /// month loses its reservation lines and its over-commitment — what is left is exactly that mode's bill, the
    /// usage lines never changing with the mode; the other way round a snapshot holds no guarantee to bill, so its
    /// lines stay as they are.
    pub fn under(&self, policy: BillPolicy) -> MonthBills {
        let drop = policy.mode != BillMode::Reserved;
        let plain: Vec<TeamBill> = self
            .teams
            .iter()
            .filter_map(|t| {
                if !drop {
                    return Some(t.clone().with_share(Money::ZERO));
                }
                let lines: Vec<BillLine> = t.lines.iter().filter(|l| !l.is_reservation()).cloned().collect();
                // a team billed nothing but its guarantee has no bill without it
                (!lines.is_empty() || t.lines.is_empty()).then(|| TeamBill::from_lines(t.team.clone(), lines))
            })
            .collect();
        let allocated: Money = plain.iter().map(|t| t.allocated).sum();
        // the offered capacity's cost minus the allocation, signed: what dropped reservation lines billed returns to
        // it; kept, the over-commitment is the reservations' (the lines, not the unallocated policy) and stays
        let (signed, over_commitment) = if drop {
            (self.unallocated_signed() + (self.allocated - allocated), None)
        } else {
            (self.unallocated_signed() + self.over_commitment_amount(), self.over_commitment)
        };
        let (unallocated, shortfall) =
            if signed < Money::ZERO { (Money::round_fen(Decimal::ZERO), -signed) } else { (signed, Money::ZERO) };
        let shares = match policy.unallocated {
            UnallocatedPolicy::KeptByPlatform => None,
            UnallocatedPolicy::SpreadProportionally => {
                largest_remainder(unallocated, &plain.iter().map(|t| t.allocated).collect::<Vec<_>>())
            }
        };
        let not_offered = self.not_offered_cost();
        let (teams, platform_kept) = match shares {
            Some(shares) => (plain.into_iter().zip(shares).map(|(t, s)| t.with_share(s)).collect(), not_offered),
            None => (plain, not_offered + unallocated),
        };
        MonthBills {
            teams,
            allocated,
            unallocated,
            platform_kept,
            policy,
            capacity_shortfall: (!shortfall.is_zero()).then_some(shortfall),
            over_commitment,
            ..self.clone()
        }
    }
}

/// Builds the month's bills. Usage lines are grouped by team, merged per (namespace, model, kind, rate) and
/// priced at line level; capacity lines likewise per (model, rate). Input order does not matter.
pub fn compute_month(usage: &[UsageLine], capacity: &[CapacityLine], policy: BillPolicy) -> MonthBills {
    compute_month_reserved(usage, &Reservations::default(), capacity, policy)
}

/// [`compute_month`] with the quota scopes' guarantees: under [`BillMode::Reserved`] each team's reservation lines
/// follow its usage lines ([`super::reserved`]); under the other modes `reservations` are not billed.
pub fn compute_month_reserved(
    usage: &[UsageLine],
    reservations: &Reservations,
    capacity: &[CapacityLine],
    policy: BillPolicy,
) -> MonthBills {
    let reserved = policy.mode == BillMode::Reserved;
    let mut by_team: BTreeMap<&str, Vec<&UsageLine>> = BTreeMap::new();
    for u in usage {
        by_team.entry(u.team.as_str()).or_default().push(u);
    }
    if reserved {
        for team in reservations.teams() {
            by_team.entry(team).or_default();
        }
    }
    let teams: Vec<TeamBill> = by_team
        .into_iter()
        .map(|(team, usage)| {
            let mut lines = bill_lines(usage);
            if reserved {
                let (guarantees, credits) = reservations.of_team(team);
                lines.extend(reservation_bill_lines(guarantees, credits));
            }
            TeamBill::from_lines(team.to_owned(), lines)
        })
        .collect();

    let capacity = capacity_lines(capacity);
    let capacity_cost: Money = capacity.iter().map(|c| c.amount).sum();
    let not_offered: Money = capacity.iter().map(|c| c.not_offered_amount.unwrap_or_default()).sum();
    let allocated: Money = teams.iter().map(|t| t.allocated).sum();
    // capacity is allocated physically: whole-card billing's surplus is over-recovery, not a negative unallocated
    let lines = || teams.iter().flat_map(|t| &t.lines);
    let over_recovery: Money = lines().map(BillLine::over_recovery).sum();
    let whole_card_billed = lines().any(|l| l.whole_card_hours.is_some());
    let signed = capacity_cost - not_offered - (allocated - over_recovery);
    // never negative (SPEC §6): what usage cost above the offered capacity is the shortfall, what reservations
    // billed above it besides is the over-commitment; neither is spread
    let reserved: Money = lines().filter(|l| l.is_reservation()).map(|l| l.amount).sum();
    let usage_signed = signed + reserved;
    let (unallocated, shortfall, over_commitment) = if signed >= Money::ZERO {
        (signed, Money::ZERO, Money::ZERO)
    } else {
        let shortfall = if usage_signed < Money::ZERO { (-usage_signed).min(-signed) } else { Money::ZERO };
        (Money::round_fen(Decimal::ZERO), shortfall, -signed - shortfall)
    };

    // Teams are sorted by name, so largest_remainder's positional tie-break is the name order.
    let shares = match policy.unallocated {
        UnallocatedPolicy::KeptByPlatform => None,
        UnallocatedPolicy::SpreadProportionally => {
            largest_remainder(unallocated, &teams.iter().map(|t| t.allocated).collect::<Vec<_>>())
        }
    };
    let (teams, platform_kept) = match shares {
        Some(shares) => (teams.into_iter().zip(shares).map(|(t, s)| t.with_share(s)).collect(), not_offered),
        None => (teams, not_offered + unallocated),
    };

    MonthBills {
        teams,
        capacity,
        capacity_cost,
        allocated,
        unallocated,
        platform_kept,
        policy,
        not_offered: Some(not_offered),
        over_recovery: whole_card_billed.then_some(over_recovery),
        capacity_shortfall: (!shortfall.is_zero()).then_some(shortfall),
        over_commitment: (!over_commitment.is_zero()).then_some(over_commitment),
        replica_policies: None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::reserved::{ReservationCredit, ReservationLine};
    use super::*;
    use crate::money::RatePerCardHour;
    use rust_decimal_macros::dec;

    const SPREAD: BillPolicy =
        BillPolicy { mode: BillMode::Chargeback, unallocated: UnallocatedPolicy::SpreadProportionally };
    const KEPT: BillPolicy = BillPolicy { mode: BillMode::Showback, unallocated: UnallocatedPolicy::KeptByPlatform };

    fn rate(d: Decimal) -> Option<RatePerCardHour> {
        RatePerCardHour::new(d)
    }

    #[test]
    fn a_policy_choice_fills_from_the_default_and_names_its_conflict() {
        let mode_only = PolicyChoice { mode: Some(BillMode::Chargeback), ..PolicyChoice::NONE };
        assert_eq!(mode_only.or(KEPT), BillPolicy { mode: BillMode::Chargeback, ..KEPT });
        assert_eq!(PolicyChoice::NONE.or(SPREAD), SPREAD);
        assert_eq!(mode_only.complete(), None);
        assert_eq!(PolicyChoice::exactly(SPREAD).complete(), Some(SPREAD));
        assert_eq!(PolicyChoice::NONE.conflict(SPREAD), None);
        assert_eq!(PolicyChoice::exactly(SPREAD).conflict(SPREAD), None);
        assert_eq!(mode_only.conflict(SPREAD), None);
        assert_eq!(mode_only.conflict(KEPT), Some(("mode", "chargeback", "showback")));
        let spread = PolicyChoice { unallocated: Some(UnallocatedPolicy::SpreadProportionally), ..PolicyChoice::NONE };
        assert_eq!(spread.conflict(KEPT), Some(("unallocated", "spread_proportionally", "kept_by_platform")));
    }

    fn usage(team: &str, ns: &str, model: &str, hours: Decimal, r: Option<RatePerCardHour>) -> UsageLine {
        UsageLine {
            team: team.into(),
            namespace: ns.into(),
            gpu_model: model.into(),
            kind: "whole".into(),
            card_hours: hours,
            effective_card_hours: hours * dec!(0.4),
            unmetered_card_hours: dec!(1),
            rate: r,
            whole_card_hours: None,
            unverified_node: false,
            finance: None,
        }
    }

    fn cap(model: &str, hours: Decimal, r: Option<RatePerCardHour>) -> CapacityLine {
        CapacityLine::fully_offered(model, hours, r)
    }

    #[test]
    fn a_month_kept_by_the_platform() {
        // Capacity: 1 node × 8 H100 × 720 h = 5760 card-hours × 12.3457 = 71111.232 → 71111.23.
        // alg:  96 card-hours × 12.3457 = 1185.1872 → 1185.19, plus 10 unpriced L40S card-hours (0.00).
        // rec: 200 card-hours × 12.3457 = 2469.14 exactly.
        // Allocated 3654.33, unallocated 71111.23 − 3654.33 = 67456.90, all kept by the platform.
        let bills = compute_month(
            &[
                usage("rec", "rec-train", "H100", dec!(200), rate(dec!(12.3457))),
                usage("alg", "alg-train", "H100", dec!(96), rate(dec!(12.3457))),
                usage("alg", "alg-train", "L40S", dec!(10), None),
            ],
            &[cap("H100", dec!(5760), rate(dec!(12.3457)))],
            KEPT,
        );
        assert_eq!(bills.capacity_cost.to_string(), "71111.23");
        assert_eq!(bills.teams.iter().map(|t| t.team.as_str()).collect::<Vec<_>>(), ["alg", "rec"]);
        let alg = &bills.teams[0];
        assert_eq!(alg.lines.len(), 2);
        assert_eq!(alg.lines[0].amount.to_string(), "1185.19");
        assert!(alg.lines[1].unpriced);
        assert_eq!(alg.allocated.to_string(), "1185.19");
        assert_eq!(alg.card_hours, dec!(106));
        assert_eq!(alg.effective_card_hours, dec!(42.4));
        assert_eq!(alg.unmetered_card_hours, dec!(2));
        assert_eq!((alg.unallocated_share, alg.total.to_string()), (Money::ZERO, "1185.19".into()));
        assert_eq!(bills.teams[1].total.to_string(), "2469.14");
        assert_eq!(bills.allocated.to_string(), "3654.33");
        assert_eq!(bills.unallocated.to_string(), "67456.90");
        assert_eq!(bills.platform_kept, bills.unallocated);
    }

    #[test]
    fn spread_over_three_teams_keeps_every_fen() {
        // Capacity 100 card-hours × 10.0000 = 1000.00; teams a, b, c each use 20 card-hours → 200.00.
        // Unallocated 1000.00 − 600.00 = 400.00; naively 133.33 × 3 = 399.99 (a fen lost).
        // Largest remainder: 40000 fen / 3 = 13333 r 1 each, the missing fen goes to "a" (name order).
        let r = rate(dec!(10));
        let bills = compute_month(
            &[
                usage("c", "c", "H100", dec!(20), r),
                usage("a", "a", "H100", dec!(20), r),
                usage("b", "b", "H100", dec!(20), r),
            ],
            &[cap("H100", dec!(100), r)],
            SPREAD,
        );
        let shares: Vec<String> = bills.teams.iter().map(|t| t.unallocated_share.to_string()).collect();
        assert_eq!(shares, ["133.34", "133.33", "133.33"]);
        let totals: Vec<String> = bills.teams.iter().map(|t| t.total.to_string()).collect();
        assert_eq!(totals, ["333.34", "333.33", "333.33"]);
        assert_eq!(bills.platform_kept, Money::ZERO);
        assert_eq!(bills.teams.iter().map(|t| t.total).sum::<Money>(), bills.capacity_cost);
        assert_eq!(bills.policy.mode, BillMode::Chargeback);
    }

    #[test]
    fn usage_above_the_counted_capacity_is_a_shortfall_never_a_negative_unallocated() {
        // Issue 33 item 16 by hand. Capacity counted: 10 T4 card-hours × 10.0000 = 100.00, and 720 L40S card-hours
        // with no rate (0.00, unpriced). Usage: a 10 T4 card-hours = 100.00, b 5 = 50.00 (their node's capacity
        // was never counted), b 3 L40S unpriced. Allocated 150.00 > 100.00: unallocated would be −50.00 and a
        // spread would credit the teams their own bills away. Instead unallocated 0.00, shortfall 50.00, nothing
        // spread: a pays 100.00, b 50.00, the platform keeps 0.00; 150.00 + 0.00 = 100.00 + 50.00.
        let r = rate(dec!(10));
        let usage = [
            usage("a", "a", "T4", dec!(10), r),
            usage("b", "b", "T4", dec!(5), r),
            usage("b", "b", "L40S", dec!(3), None),
        ];
        let capacity = [cap("T4", dec!(10), r), cap("L40S", dec!(720), None)];
        for mode in [BillMode::Showback, BillMode::Chargeback] {
            for unallocated in [UnallocatedPolicy::KeptByPlatform, UnallocatedPolicy::SpreadProportionally] {
                let bills = compute_month(&usage, &capacity, BillPolicy { mode, unallocated });
                assert_eq!(bills.capacity_cost.to_string(), "100.00");
                assert_eq!(bills.allocated.to_string(), "150.00");
                assert_eq!(bills.unallocated.to_string(), "0.00", "{mode:?} {unallocated:?}");
                assert_eq!(bills.capacity_shortfall.map(|m| m.to_string()), Some("50.00".into()));
                assert_eq!(bills.unallocated_signed().to_string(), "-50.00");
                let totals: Vec<String> = bills.teams.iter().map(|t| t.total.to_string()).collect();
                assert_eq!(totals, ["100.00", "50.00"], "{mode:?} {unallocated:?}");
                assert!(bills.teams.iter().all(|t| t.unallocated_share.is_zero()));
                assert_eq!(bills.platform_kept.to_string(), "0.00");
                let carried: Money = bills.teams.iter().map(|t| t.total).sum();
                assert_eq!(carried + bills.platform_kept, bills.capacity_cost + bills.shortfall_amount());
            }
        }
        // covered capacity: no shortfall at all
        let fine = compute_month(&usage[..1], &capacity, SPREAD);
        assert_eq!((fine.unallocated.to_string(), fine.capacity_shortfall), ("0.00".into(), None));
    }

    #[test]
    fn bills_under_another_policy_are_those_computed_under_it() {
        // spread_over_three_teams' month, kept then re-read spread (and back): what compute_month gives directly
        let r = rate(dec!(10));
        let usage = [usage("c", "c", "H100", dec!(20), r), usage("a", "a", "H100", dec!(20), r)];
        let capacity =
            [CapacityLine { gpu_model: "H100".into(), card_hours: dec!(100), offered_card_hours: dec!(90), rate: r }];
        let kept = compute_month(&usage, &capacity, KEPT);
        let spread = compute_month(&usage, &capacity, SPREAD);
        assert_eq!(kept.under(SPREAD), spread);
        assert_eq!(spread.under(KEPT), kept);
        // 1000.00 capacity, 100.00 not offered, 400.00 allocated: 500.00 spread 250.00 each
        assert_eq!(spread.teams[0].unallocated_share.to_string(), "250.00");
        assert_eq!(kept.under(SPREAD).platform_kept.to_string(), "100.00");
    }

    fn timeslice(team: &str, card_hours: Decimal, whole: Option<Decimal>, r: Option<RatePerCardHour>) -> UsageLine {
        UsageLine { kind: "timeslice".into(), whole_card_hours: whole, ..usage(team, team, "T4", card_hours, r) }
    }

    #[test]
    fn whole_card_billing_is_over_recovery_never_negative_unallocated() {
        // 2 T4 cards for 100 h at 2.5000: capacity 200 card-hours = 500.00. Team a holds 1 of 4 replicas for
        // 100 h (25 card-hours physical, 100 replica-hours), team b a whole card for 50 h (125.00).
        // Fraction: a 25 × 2.5 = 62.50; allocated 187.50; unallocated 500 − 187.50 = 312.50.
        // Whole card: a 100 × 2.5 = 250.00 (4 × 62.50); over-recovery 250.00 − 62.50 = 187.50; allocated 375.00;
        // unallocated still 312.50 (physical), kept by the platform: 375.00 + 312.50 = 500.00 + 187.50.
        let r = rate(dec!(2.5));
        let cap_ = [cap("T4", dec!(200), r)];
        let b = usage("b", "b", "T4", dec!(50), r);
        let fraction = compute_month(&[timeslice("a", dec!(25), None, r), b.clone()], &cap_, KEPT);
        let whole = compute_month(&[timeslice("a", dec!(25), Some(dec!(100)), r), b], &cap_, KEPT);
        assert_eq!((fraction.teams[0].total.to_string(), fraction.over_recovery), ("62.50".into(), None));
        assert_eq!(fraction.unallocated.to_string(), "312.50");
        assert_eq!(whole.teams[0].total.to_string(), "250.00");
        assert_eq!(whole.teams[0].lines[0].card_hours, dec!(25), "GPU-hours stay physical");
        assert_eq!(whole.teams[0].lines[0].over_recovery().to_string(), "187.50");
        assert_eq!(whole.over_recovery.map(|m| m.to_string()), Some("187.50".into()));
        assert_eq!((whole.allocated.to_string(), whole.unallocated.to_string()), ("375.00".into(), "312.50".into()));
        let totals: Money = whole.teams.iter().map(|t| t.total).sum();
        assert_eq!(totals + whole.platform_kept, whole.capacity_cost + whole.over_recovery_amount());

        // One card, its 4 replicas all held for 100 h: by fraction the card is fully allocated (250.00, nothing
        // unallocated); as whole cards 1000.00 is billed, 750.00 over-recovered, and unallocated stays 0, not −750.
        let one = [cap("T4", dec!(100), r)];
        let sold = |whole: Option<Decimal>| {
            let teams = ["a", "b", "c", "d"];
            compute_month(&teams.map(|t| timeslice(t, dec!(25), whole, r)), &one, SPREAD)
        };
        let (f, w) = (sold(None), sold(Some(dec!(100))));
        assert_eq!((f.allocated.to_string(), f.unallocated.to_string()), ("250.00".into(), "0.00".into()));
        assert_eq!((w.allocated.to_string(), w.unallocated.to_string()), ("1000.00".into(), "0.00".into()));
        assert_eq!(w.over_recovery_amount().to_string(), "750.00");
        assert!(w.teams.iter().all(|t| t.unallocated_share.is_zero()));
    }

    #[test]
    fn reserved_quota_billing_by_hand_with_its_over_commitment() {
        // SPEC §10, H100 at 10.0000, factor 0.8 (reservation rate 8.0000); capacity 100 card-hours = 1000.00.
        // a: 30 card-hours used, all within cq-a's guarantee of 80 → 300.00 + 80 × 8 = 640.00 − 300.00 = 640.00.
        // b: 50 used, namespace b's guarantee 40 (40 within, 10 borrowed) → 500.00 + 320.00 − 400.00 = 420.00
        //    (= 40 × 8 + 10 × 10). c: 10 used, no quota → 100.00.
        // Allocated 1160.00 > 1000.00: usage alone (900.00) fits, so the 160.00 above is the over-commitment, not a
        // shortfall; unallocated 0.00. 1160.00 + 0.00 kept = 1000.00 + 160.00.
        let r = rate(dec!(10));
        let used = [
            usage("a", "a", "H100", dec!(30), r),
            usage("b", "b", "H100", dec!(50), r),
            usage("c", "c", "H100", dec!(10), r),
        ];
        let res = |team: &str, scope: &str, g: Decimal, w: Decimal| {
            let guarantee = ReservationLine {
                team: team.into(),
                scope: scope.into(),
                gpu_model: Some("H100".into()),
                guaranteed_card_hours: g,
                rate: r,
                factor: Some(dec!(0.8)),
                finance: None,
            };
            let credit = ReservationCredit {
                team: team.into(),
                scope: scope.into(),
                gpu_model: "H100".into(),
                used_within_card_hours: w,
                rate: r,
                finance: None,
            };
            Reservations { guarantees: vec![guarantee], credits: vec![credit] }
        };
        let both = |a: Reservations, b: Reservations| Reservations {
            guarantees: [a.guarantees, b.guarantees].concat(),
            credits: [a.credits, b.credits].concat(),
        };
        let reservations =
            both(res("a", "cluster_queue/cq-a", dec!(80), dec!(30)), res("b", "namespace/b", dec!(40), dec!(40)));
        let capacity = [cap("H100", dec!(100), r)];
        let reserved = BillPolicy { mode: BillMode::Reserved, unallocated: UnallocatedPolicy::KeptByPlatform };
        let bills = compute_month_reserved(&used, &reservations, &capacity, reserved);
        let totals: Vec<String> = bills.teams.iter().map(|t| t.total.to_string()).collect();
        assert_eq!(totals, ["640.00", "420.00", "100.00"]);
        let a: Vec<(&str, String)> =
            bills.teams[0].lines.iter().map(|l| (l.kind.as_str(), l.amount.to_string())).collect();
        assert_eq!(
            a,
            [("whole", "300.00".into()), ("reservation", "640.00".into()), ("reservation_use", "-300.00".into())]
        );
        assert_eq!(bills.teams[0].card_hours, dec!(30), "GPU-hours are the usage's only");
        assert_eq!((bills.allocated.to_string(), bills.unallocated.to_string()), ("1160.00".into(), "0.00".into()));
        assert_eq!((bills.over_commitment_amount().to_string(), bills.capacity_shortfall), ("160.00".into(), None));
        let carried: Money = bills.teams.iter().map(|t| t.total).sum();
        assert_eq!(carried + bills.platform_kept, bills.capacity_cost + bills.over_commitment_amount());
        assert_eq!(bills.unallocated_signed().to_string(), "-160.00");
        // read under showback (a comparison with a month closed under it): the reservation lines and the
        // over-commitment go, and what is left is the showback bill itself
        assert_eq!(bills.under(KEPT), compute_month(&used, &capacity, KEPT));
        assert_eq!(bills.under(KEPT).under(reserved).teams, compute_month(&used, &capacity, KEPT).teams);

        // a's guarantee 60 instead and c 5 card-hours: allocated 480 + 420 + 50 = 950.00, 50.00 unallocated,
        // spread 480:420:50 by largest remainder; no over-commitment
        let reservations =
            both(res("a", "cluster_queue/cq-a", dec!(60), dec!(30)), res("b", "namespace/b", dec!(40), dec!(40)));
        let used = [used[0].clone(), used[1].clone(), usage("c", "c", "H100", dec!(5), r)];
        let spread = BillPolicy { mode: BillMode::Reserved, unallocated: UnallocatedPolicy::SpreadProportionally };
        let bills = compute_month_reserved(&used, &reservations, &capacity, spread);
        assert_eq!((bills.allocated.to_string(), bills.unallocated.to_string()), ("950.00".into(), "50.00".into()));
        assert_eq!(bills.over_commitment, None);
        let shares: Vec<String> = bills.teams.iter().map(|t| t.unallocated_share.to_string()).collect();
        assert_eq!(shares, ["25.26", "22.11", "2.63"]);
        assert_eq!(bills.teams.iter().map(|t| t.total).sum::<Money>() + bills.platform_kept, bills.capacity_cost);
        assert_eq!(bills.under(reserved).under(spread), bills);

        // the other modes bill use only, whatever the guarantees
        let shown = compute_month_reserved(&used, &reservations, &capacity, KEPT);
        assert_eq!(shown, compute_month(&used, &capacity, KEPT));
        assert_eq!(bills.under(SPREAD), compute_month(&used, &capacity, SPREAD), "spread: shares of the usage only");
        assert!(shown.teams.iter().flat_map(|t| &t.lines).all(|l| !l.is_reservation()));
    }

    #[test]
    fn reservations_over_capacity_beside_usage_over_it_split_into_shortfall_and_over_commitment() {
        // capacity 10 card-hours at 10 = 100.00; a uses 12 (120.00: 20.00 short) and holds a guarantee of 5 unused
        // at 8.0000 (40.00): −60.00 signed = 20.00 shortfall + 40.00 over-commitment
        let r = rate(dec!(10));
        let res = Reservations {
            guarantees: vec![ReservationLine {
                team: "a".into(),
                scope: "namespace/x".into(),
                gpu_model: Some("H100".into()),
                guaranteed_card_hours: dec!(5),
                rate: r,
                factor: Some(dec!(0.8)),
                finance: None,
            }],
            credits: Vec::new(),
        };
        let policy = BillPolicy { mode: BillMode::Reserved, unallocated: UnallocatedPolicy::SpreadProportionally };
        let bills =
            compute_month_reserved(&[usage("a", "a", "H100", dec!(12), r)], &res, &[cap("H100", dec!(10), r)], policy);
        assert_eq!(bills.shortfall_amount().to_string(), "20.00");
        assert_eq!(bills.over_commitment_amount().to_string(), "40.00");
        assert_eq!((bills.unallocated.to_string(), bills.teams[0].total.to_string()), ("0.00".into(), "160.00".into()));
        assert_eq!(
            bills.teams[0].total + bills.platform_kept,
            bills.capacity_cost + bills.shortfall_amount() + bills.over_commitment_amount()
        );
        assert_eq!(
            bills.under(SPREAD),
            compute_month(&[usage("a", "a", "H100", dec!(12), r)], &[cap("H100", dec!(10), r)], SPREAD)
        );
    }

    #[test]
    fn spreading_with_no_allocation_leaves_it_to_the_platform() {
        // Only unpriced usage: nobody has a positive allocated amount to weigh by.
        let bills = compute_month(
            &[usage("a", "a", "L40S", dec!(10), None), usage("b", "b", "L40S", dec!(3), rate(dec!(0)))],
            &[cap("H100", dec!(720), rate(dec!(1.5)))],
            SPREAD,
        );
        assert_eq!(bills.capacity_cost.to_string(), "1080.00");
        assert_eq!(bills.platform_kept.to_string(), "1080.00");
        assert!(bills.teams.iter().all(|t| t.unallocated_share.is_zero() && t.total.is_zero()));
    }

    #[test]
    fn zero_allocation_teams_get_no_share() {
        // a: 10 × 2.0000 = 20.00; z: unpriced → 0.00. Capacity 50 × 2 = 100.00 → a carries all 80.00.
        let bills = compute_month(
            &[usage("a", "a", "H100", dec!(10), rate(dec!(2))), usage("z", "z", "A30", dec!(10), None)],
            &[cap("H100", dec!(50), rate(dec!(2)))],
            SPREAD,
        );
        assert_eq!(bills.teams[0].unallocated_share.to_string(), "80.00");
        assert_eq!(bills.teams[1].unallocated_share, Money::ZERO);
    }

    #[test]
    fn capacity_not_offered_is_kept_by_the_platform_and_not_spread() {
        // 3 nodes × 8 cards × 24 h = 576 card-hours at 10.0000 = 5760.00. Node 2 offers 6 of its 8 cards
        // (2 × 24 = 48 card-hours not offered), node 3 is cordoned for 10 h (80): 128 not offered → 1280.00.
        // a uses 100 card-hours (1000.00), b 50 (500.00): allocated 1500.00.
        // Unallocated = 5760.00 − 1280.00 − 1500.00 = 2980.00, spread 2:1 → 1986.67 and 993.33
        // (298000 fen × 2/3 = 198666⅔, × 1/3 = 99333⅓: the missing fen goes to a).
        let r = rate(dec!(10));
        let capacity =
            [CapacityLine { gpu_model: "H100".into(), card_hours: dec!(576), offered_card_hours: dec!(448), rate: r }];
        let usage = [usage("a", "a", "H100", dec!(100), r), usage("b", "b", "H100", dec!(50), r)];
        let bills = compute_month(&usage, &capacity, SPREAD);
        assert_eq!(bills.capacity_cost.to_string(), "5760.00");
        assert_eq!(bills.not_offered.map(|m| m.to_string()), Some("1280.00".into()));
        assert_eq!(bills.unallocated.to_string(), "2980.00");
        let shares: Vec<String> = bills.teams.iter().map(|t| t.unallocated_share.to_string()).collect();
        assert_eq!(shares, ["1986.67", "993.33"]);
        assert_eq!(bills.platform_kept.to_string(), "1280.00");
        assert_eq!(bills.allocated + bills.unallocated + bills.not_offered_cost(), bills.capacity_cost);
        assert_eq!(bills.teams.iter().map(|t| t.total).sum::<Money>() + bills.platform_kept, bills.capacity_cost);

        // kept by the platform: all of it, in two parts
        let kept = compute_month(&usage, &capacity, KEPT);
        assert_eq!(
            (kept.unallocated.to_string(), kept.platform_kept.to_string()),
            ("2980.00".into(), "4260.00".into())
        );
        assert!(kept.teams.iter().all(|t| t.unallocated_share.is_zero()));
    }

    #[test]
    fn a_month_closed_before_offered_capacity_reads_as_it_was() {
        // a snapshot's bills as closed before `not_offered` existed: read with None, written back unchanged
        let bills = compute_month(
            &[usage("a", "a", "H100", dec!(10), rate(dec!(2)))],
            &[cap("H100", dec!(50), rate(dec!(2)))],
            KEPT,
        );
        let mut old = serde_json::to_value(&bills).unwrap();
        old.as_object_mut().unwrap().remove("not_offered");
        for c in old["capacity"].as_array_mut().unwrap() {
            let c = c.as_object_mut().unwrap();
            c.remove("not_offered_card_hours");
            c.remove("not_offered_amount");
        }
        let read: MonthBills = serde_json::from_value(old.clone()).unwrap();
        assert_eq!(read.not_offered, None);
        assert_eq!(read.not_offered_cost(), Money::ZERO);
        assert_eq!(read.allocated + read.unallocated + read.not_offered_cost(), read.capacity_cost);
        assert_eq!(serde_json::to_value(&read).unwrap(), old);
    }

    #[test]
    fn a_month_with_nothing_in_it() {
        let bills = compute_month(&[], &[], BillPolicy::default());
        assert!(bills.teams.is_empty() && bills.capacity.is_empty());
        assert_eq!(
            (bills.capacity_cost, bills.unallocated, bills.platform_kept),
            (Money::ZERO, Money::ZERO, Money::ZERO)
        );
    }

    #[test]
    fn serialises_with_policy_names() {
        let bills = compute_month(&[], &[], SPREAD);
        let json = serde_json::to_value(&bills).unwrap();
        assert_eq!(json["policy"]["mode"], "chargeback");
        assert_eq!(json["policy"]["unallocated"], "spread_proportionally");
        let back: MonthBills = serde_json::from_value(json).unwrap();
        assert_eq!(back, bills);
    }
}
