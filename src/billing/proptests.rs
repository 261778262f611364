//! Property tests of the billing invariants over random months: totals are sums of lines, the month
//! balances to the fen under both policies (allocated + unallocated + not offered = capacity cost, and the
//! not-offered cost is never spread), modes agree, a rate split bills each segment on its own, and
//! restatements reconcile closed and recomputed totals exactly.

use std::collections::BTreeMap;

use proptest::prelude::*;
use rust_decimal::Decimal;

use super::*;
use crate::money::{Money, RatePerCardHour};

fn rate_strategy() -> impl Strategy<Value = Option<RatePerCardHour>> {
    // Mostly priced (0 – 99.9999 yuan, 4 decimals, a few repeated values so lines merge), sometimes unpriced.
    prop_oneof![
        1 => Just(None),
        3 => prop::sample::select(vec![12.3457f64, 8.5, 0.01, 0.0]).prop_map(|r| RatePerCardHour::new(Decimal::from_f64_retain(r).unwrap())),
        6 => (0i64..1_000_000).prop_map(|r| RatePerCardHour::new(Decimal::new(r, 4))),
    ]
}

/// Card-hours to the micro-hour (as `card_hours_from_seconds` gives them), up to 10,000 h.
fn hours_strategy() -> impl Strategy<Value = Decimal> {
    (0i64..10_000_000_000).prop_map(|h| Decimal::new(h, 6))
}

fn usage_strategy() -> impl Strategy<Value = UsageLine> {
    (
        prop::sample::select(vec!["alpha", "beta", "gamma", "delta", "unassigned"]),
        prop::sample::select(vec!["train", "infer"]),
        prop::sample::select(vec!["H100", "A100", "T4"]),
        prop::sample::select(vec!["whole", "mig", "timeslice", "hami"]),
        hours_strategy(),
        0u32..=100,
        0u32..=100,
        rate_strategy(),
    )
        .prop_map(|(team, ns, model, kind, card_hours, eff_pct, unmetered_pct, rate)| UsageLine {
            team: team.into(),
            namespace: format!("{team}-{ns}"),
            gpu_model: model.into(),
            kind: kind.into(),
            card_hours,
            effective_card_hours: (card_hours * Decimal::from(eff_pct) / Decimal::from(100)).round_dp(6),
            unmetered_card_hours: (card_hours * Decimal::from(unmetered_pct) / Decimal::from(100)).round_dp(6),
            rate,
            whole_card_hours: None,
            unverified_node: false,
            finance: None,
        })
}

/// Capacity lines, most fully offered, the others offering any part of their card-hours (cordons, unhealthy cards).
fn capacity_strategy() -> impl Strategy<Value = CapacityLine> {
    (
        prop::sample::select(vec!["H100", "A100", "T4"]),
        0i64..100_000_000_000,
        prop::option::of(0u32..=1000),
        rate_strategy(),
    )
        .prop_map(|(model, h, offered_permille, rate)| {
            let card_hours = Decimal::new(h, 6);
            let offered = offered_permille
                .map_or(card_hours, |p| (card_hours * Decimal::from(p) / Decimal::from(1000)).round_dp(6));
            CapacityLine { gpu_model: model.into(), card_hours, offered_card_hours: offered, rate }
        })
}

fn policy(mode: BillMode, unallocated: UnallocatedPolicy) -> BillPolicy {
    BillPolicy { mode, unallocated }
}

fn sum_totals(bills: &MonthBills) -> Money {
    bills.teams.iter().map(|t| t.total).sum()
}

proptest! {
    #[test]
    fn totals_are_sums_and_the_month_balances(
        usage in prop::collection::vec(usage_strategy(), 0..24),
        capacity in prop::collection::vec(capacity_strategy(), 0..6),
        spread in any::<bool>(),
    ) {
        let unallocated_policy =
            if spread { UnallocatedPolicy::SpreadProportionally } else { UnallocatedPolicy::KeptByPlatform };
        let bills = compute_month(&usage, &capacity, policy(BillMode::Chargeback, unallocated_policy));

        for t in &bills.teams {
            prop_assert_eq!(t.allocated, t.lines.iter().map(|l| l.amount).sum::<Money>());
            prop_assert_eq!(t.total, t.allocated + t.unallocated_share);
            prop_assert_eq!(t.card_hours, t.lines.iter().map(|l| l.card_hours).sum::<Decimal>());
            prop_assert_eq!(t.effective_card_hours, t.lines.iter().map(|l| l.effective_card_hours).sum::<Decimal>());
            let keys: Vec<_> = t.lines.iter().map(BillLine::key).collect();
            prop_assert!(keys.windows(2).all(|w| w[0] < w[1]), "lines sorted, one per key");
            for l in &t.lines {
                prop_assert_eq!(l.unpriced, l.rate.is_none());
                prop_assert_eq!(l.amount, l.rate.map_or(Money::ZERO, |r| r.amount(l.card_hours)));
            }
            // Every usage line of the team lands in exactly one bill line.
            let in_hours: Decimal = usage.iter().filter(|u| u.team == t.team).map(|u| u.card_hours).sum();
            prop_assert_eq!(in_hours, t.card_hours);
        }
        prop_assert!(bills.teams.windows(2).all(|w| w[0].team < w[1].team));
        prop_assert_eq!(bills.capacity_cost, bills.capacity.iter().map(|c| c.amount).sum::<Money>());
        prop_assert_eq!(bills.allocated, bills.teams.iter().map(|t| t.allocated).sum::<Money>());
        let not_offered = bills.not_offered.expect("a computed month records its not-offered cost");
        prop_assert_eq!(not_offered, bills.capacity.iter().map(|c| c.not_offered_amount.unwrap()).sum::<Money>());
        // never negative: what usage cost above the offered capacity is the shortfall (SPEC §6)
        prop_assert!(bills.unallocated >= Money::ZERO);
        prop_assert!(bills.shortfall_amount() > Money::ZERO || bills.capacity_shortfall.is_none());
        prop_assert!(bills.unallocated.is_zero() || bills.capacity_shortfall.is_none());
        prop_assert_eq!(bills.unallocated_signed(), bills.capacity_cost - not_offered - bills.allocated);
        for c in &bills.capacity {
            let hours = c.not_offered_card_hours.unwrap();
            prop_assert!(hours >= Decimal::ZERO && hours <= c.card_hours);
            prop_assert_eq!(c.offered_card_hours() + hours, c.card_hours);
            prop_assert_eq!(c.not_offered_amount.unwrap(), c.rate.map_or(Money::ZERO, |r| r.amount(hours)));
            prop_assert!(c.offered_amount() >= Money::ZERO, "the not-offered part never exceeds its line");
        }
        let input_not_offered: Decimal = capacity.iter().map(|c| c.card_hours - c.offered_card_hours).sum();
        prop_assert_eq!(bills.capacity.iter().map(|c| c.not_offered_card_hours.unwrap()).sum::<Decimal>(), input_not_offered);

        // The month balances to the fen: capacity is allocated, unallocated or not offered, and teams carry
        // what the platform does not keep.
        let shortfall = bills.shortfall_amount();
        prop_assert_eq!(bills.allocated + bills.unallocated + not_offered, bills.capacity_cost + shortfall);
        prop_assert_eq!(sum_totals(&bills) + bills.platform_kept, bills.capacity_cost + shortfall);
        prop_assert!(bills.platform_kept >= not_offered);
        for t in &bills.teams {
            prop_assert!(t.unallocated_share >= Money::ZERO, "a spread never credits a team its own bill away");
        }

        let shares: Money = bills.teams.iter().map(|t| t.unallocated_share).sum();
        let anyone_allocated = bills.teams.iter().any(|t| t.allocated > Money::ZERO);
        if spread && anyone_allocated {
            // only the offered capacity nobody used is spread; the not-offered cost stays with the platform
            prop_assert_eq!(shares, bills.unallocated);
            prop_assert_eq!(bills.platform_kept, not_offered);
            for t in bills.teams.iter().filter(|t| t.allocated.is_zero()) {
                prop_assert_eq!(t.unallocated_share, Money::ZERO);
            }
        } else {
            prop_assert_eq!(shares, Money::ZERO);
            prop_assert_eq!(bills.platform_kept, bills.unallocated + not_offered);
        }
    }

    /// Taking cards out of what is offered moves their cost from the teams' spread to the platform, fen for fen,
    /// and changes nothing else: team lines, allocated amounts and the capacity cost stay.
    #[test]
    fn not_offered_capacity_moves_from_the_spread_to_the_platform(
        usage in prop::collection::vec(usage_strategy(), 0..16),
        capacity in prop::collection::vec(capacity_strategy(), 0..6),
    ) {
        let p = policy(BillMode::Chargeback, UnallocatedPolicy::SpreadProportionally);
        let full: Vec<CapacityLine> =
            capacity.iter().map(|c| CapacityLine::fully_offered(c.gpu_model.clone(), c.card_hours, c.rate)).collect();
        let (all, some) = (compute_month(&usage, &full, p), compute_month(&usage, &capacity, p));
        prop_assert_eq!(all.not_offered, Some(Money::ZERO));
        prop_assert_eq!(all.capacity_cost, some.capacity_cost);
        prop_assert_eq!(all.allocated, some.allocated);
        let moved = some.not_offered_cost();
        prop_assert_eq!(all.unallocated_signed() - moved, some.unallocated_signed());
        let spread = |b: &MonthBills| b.teams.iter().map(|t| t.unallocated_share).sum::<Money>();
        // what is moved out of a spread is at most what there was to spread (unallocated stops at 0)
        if some.teams.iter().any(|t| t.allocated > Money::ZERO) && some.capacity_shortfall.is_none() {
            prop_assert_eq!(spread(&all) - moved, spread(&some));
            prop_assert_eq!(all.platform_kept + moved, some.platform_kept);
        }
        for (a, b) in all.teams.iter().zip(&some.teams) {
            prop_assert_eq!(&a.lines, &b.lines);
        }
    }

    #[test]
    fn showback_and_chargeback_agree_and_order_does_not_matter(
        usage in prop::collection::vec(usage_strategy(), 0..16),
        capacity in prop::collection::vec(capacity_strategy(), 0..4),
    ) {
        for unallocated in [UnallocatedPolicy::KeptByPlatform, UnallocatedPolicy::SpreadProportionally] {
            let show = compute_month(&usage, &capacity, policy(BillMode::Showback, unallocated));
            let mut charge = compute_month(&usage, &capacity, policy(BillMode::Chargeback, unallocated));
            prop_assert_eq!(charge.policy.mode, BillMode::Chargeback);
            charge.policy.mode = BillMode::Showback;
            prop_assert_eq!(&show, &charge);

            let (mut u, mut c) = (usage.clone(), capacity.clone());
            u.reverse();
            c.reverse();
            prop_assert_eq!(&show, &compute_month(&u, &c, policy(BillMode::Showback, unallocated)));
        }
    }

    /// One model's month split at k rate changes: the bill lines are the segments, each priced and rounded
    /// on its own, and their amounts sum to Σ round(r_i × h_i) — never round(Σ r_i × h_i).
    #[test]
    fn split_amounts_equal_whole(
        segments in prop::collection::btree_map(0i64..1_000_000, hours_strategy(), 1..6),
    ) {
        let segments: Vec<(RatePerCardHour, Decimal)> =
            segments.into_iter().map(|(r, h)| (RatePerCardHour::new(Decimal::new(r, 4)).unwrap(), h)).collect();
        let usage: Vec<UsageLine> = segments
            .iter()
            .map(|&(rate, h)| UsageLine {
                team: "alpha".into(),
                namespace: "alpha-train".into(),
                gpu_model: "H100".into(),
                kind: "whole".into(),
                card_hours: h,
                effective_card_hours: h,
                unmetered_card_hours: Decimal::ZERO,
                rate: Some(rate),
                whole_card_hours: None,
                unverified_node: false,
                finance: None,
            })
            .collect();
        let bills = compute_month(&usage, &[], BillPolicy::default());
        let team = &bills.teams[0];
        prop_assert_eq!(team.lines.len(), segments.len());
        for (line, &(rate, h)) in team.lines.iter().zip(&segments) {
            prop_assert_eq!((line.rate, line.card_hours), (Some(rate), h));
        }
        let expected: Money = segments.iter().map(|&(r, h)| Money::round_fen(r.as_decimal() * h)).sum();
        prop_assert_eq!(team.allocated, expected);
        prop_assert_eq!(team.total, expected);
        prop_assert_eq!(team.card_hours, segments.iter().map(|&(_, h)| h).sum::<Decimal>());
    }

    /// The same rate period delivered as many hourly rows is one line, priced once on the summed hours.
    #[test]
    fn hourly_rows_of_one_period_merge(rate in 0i64..1_000_000, hours in prop::collection::vec(hours_strategy(), 1..30)) {
        let rate = RatePerCardHour::new(Decimal::new(rate, 4));
        let usage: Vec<UsageLine> = hours
            .iter()
            .map(|&h| UsageLine {
                team: "alpha".into(),
                namespace: "alpha-train".into(),
                gpu_model: "A100".into(),
                kind: "mig".into(),
                card_hours: h,
                effective_card_hours: Decimal::ZERO,
                unmetered_card_hours: h,
                rate,
                whole_card_hours: None,
                unverified_node: false,
                finance: None,
            })
            .collect();
        let bills = compute_month(&usage, &[], BillPolicy::default());
        let total_hours: Decimal = hours.iter().copied().sum();
        prop_assert_eq!(bills.teams[0].lines.len(), 1);
        prop_assert_eq!(bills.teams[0].total, rate.unwrap().amount(total_hours));
        prop_assert_eq!(bills.teams[0].unmetered_card_hours, total_hours);
    }

    #[test]
    fn restatements_reconcile_closed_and_recomputed(
        closed_usage in prop::collection::vec(usage_strategy(), 0..16),
        late_usage in prop::collection::vec(usage_strategy(), 0..8),
        dropped in 0usize..4,
        closed_capacity in prop::collection::vec(capacity_strategy(), 0..4),
        recomputed_capacity in prop::collection::vec(capacity_strategy(), 0..4),
        spread in any::<bool>(),
    ) {
        let unallocated = if spread { UnallocatedPolicy::SpreadProportionally } else { UnallocatedPolicy::KeptByPlatform };
        let p = policy(BillMode::Chargeback, unallocated);
        let closed = compute_month(&closed_usage, &closed_capacity, p);
        // Recomputed later: some rows re-ingested away, some late rows, maybe another capacity.
        let mut recomputed_usage: Vec<UsageLine> = closed_usage.iter().skip(dropped).cloned().collect();
        recomputed_usage.extend(late_usage);
        let recomputed = compute_month(&recomputed_usage, &recomputed_capacity, p);

        let lines = restate_month(&closed, &recomputed);
        let delta: Money = lines.iter().map(|l| l.amount_delta).sum();
        prop_assert_eq!(sum_totals(&closed) + delta, sum_totals(&recomputed));
        let usage_delta: Money = lines.iter().filter(|l| !l.is_unallocated_share()).map(|l| l.amount_delta).sum();
        prop_assert_eq!(closed.allocated + usage_delta, recomputed.allocated);

        // Per team, too.
        let by_team = |b: &MonthBills| b.teams.iter().map(|t| (t.team.clone(), t.clone())).collect::<BTreeMap<_, _>>();
        let (old, new) = (by_team(&closed), by_team(&recomputed));
        for (team, r) in &new {
            let c = old.get(team).cloned().unwrap_or_else(|| TeamBill::empty(team.clone()));
            let lines = restatement(&c, r);
            prop_assert_eq!(c.total + lines.iter().map(|l| l.amount_delta).sum::<Money>(), r.total);
            prop_assert!(lines.iter().all(|l| !(l.card_hours_delta.is_zero() && l.amount_delta.is_zero()
                && l.effective_card_hours_delta.is_zero() && l.unmetered_card_hours_delta.is_zero())));
        }
        prop_assert!(restate_month(&recomputed, &recomputed).is_empty());
    }
}
