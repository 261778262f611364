//! How time-sliced replicas are billed (SPEC §3, issue 16 item 3): by *fraction* (a replica is 1/replicas of a
//! card, the physical share — the default) or as a *whole card* each (the user bears the contention). The policy
//! changes money only: GPU-hours, allocation and capacity stay physical, and what whole-card billing recovers
//! above the cards' cost is the platform's over-recovery, a line of its own. MPS replicas are capped at
//! 1/replicas of the card, so they are always billed by fraction. Set per cluster or node pool, dated like rates.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// How a time-sliced replica is billed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplicaBilling {
    /// A replica is 1/replicas of a card: its physical share.
    #[default]
    Fraction,
    /// Each replica is billed as a whole card.
    WholeCard,
}

/// A policy name that is neither `fraction` nor `whole-card`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid replica billing policy {0:?}: expected fraction or whole-card")]
pub struct ReplicaBillingParseError(pub String);

impl ReplicaBilling {
    /// The stored and API name (`fraction`, `whole_card`).
    pub fn as_str(self) -> &'static str {
        match self {
            ReplicaBilling::Fraction => "fraction",
            ReplicaBilling::WholeCard => "whole_card",
        }
    }

    /// `fraction`, `whole-card` or `whole_card`; nothing else (no case folding, no spaces).
    pub fn parse(s: &str) -> Result<ReplicaBilling, ReplicaBillingParseError> {
        match s {
            "fraction" => Ok(ReplicaBilling::Fraction),
            "whole-card" | "whole_card" => Ok(ReplicaBilling::WholeCard),
            _ => Err(ReplicaBillingParseError(s.to_owned())),
        }
    }

    /// The policy that applies to a resource kind: only time-sliced replicas are ever billed as whole cards
    /// (MPS caps a replica at its share, MIG slices and HAMi shares are physical partitions).
    pub fn for_kind(self, kind: &str) -> ReplicaBilling {
        if kind == "timeslice" { self } else { ReplicaBilling::Fraction }
    }

    /// The card-hours billed for `card_hours` (physical, q·f) held through `replica_hours` (q, the replicas
    /// themselves) of `kind`: the physical hours by fraction, the replica hours as whole cards.
    pub fn billed_hours(self, kind: &str, card_hours: Decimal, replica_hours: Decimal) -> Decimal {
        match self.for_kind(kind) {
            ReplicaBilling::Fraction => card_hours,
            ReplicaBilling::WholeCard => replica_hours,
        }
    }
}

/// One dated setting: from `from` on, the cluster's replicas (or only those of node pool `pool`) are billed so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReplicaPolicyVersion {
    pub cluster: String,
    /// `None`: the whole cluster; a pool's setting wins over its cluster's.
    pub pool: Option<String>,
    #[schema(value_type = String, format = Date)]
    pub from: NaiveDate,
    #[schema(value_type = String, example = "whole_card")]
    pub policy: ReplicaBilling,
}

/// Every dated setting, resolved per (cluster, pool, day) like a rate: the latest `from` on or before the day,
/// the pool's before the cluster's; fraction where nothing is set.
#[derive(Debug, Clone, Default)]
pub struct ReplicaPolicyBook {
    versions: Vec<ReplicaPolicyVersion>,
}

impl ReplicaPolicyBook {
    pub fn new(mut versions: Vec<ReplicaPolicyVersion>) -> ReplicaPolicyBook {
        versions.sort_by(|a, b| (&a.cluster, &a.pool, a.from).cmp(&(&b.cluster, &b.pool, b.from)));
        ReplicaPolicyBook { versions }
    }

    fn latest(&self, cluster: &str, pool: Option<&str>, day: NaiveDate) -> Option<ReplicaBilling> {
        self.versions
            .iter()
            .filter(|v| v.cluster == cluster && v.pool.as_deref() == pool && v.from <= day)
            .max_by_key(|v| v.from)
            .map(|v| v.policy)
    }

    /// The policy of a node pool's (or, without a pool, the cluster's) replicas on `day`.
    pub fn at(&self, cluster: &str, pool: Option<&str>, day: NaiveDate) -> ReplicaBilling {
        pool.and_then(|p| self.latest(cluster, Some(p), day))
            .or_else(|| self.latest(cluster, None, day))
            .unwrap_or_default()
    }

    /// The settings in effect at some day of `[from, to)`: the one in effect on `from` (dated `from` when it
    /// began earlier) and those that begin later, per (cluster, pool), sorted. What a statement prints.
    pub fn in_effect(&self, from: NaiveDate, to: NaiveDate) -> Vec<ReplicaPolicyVersion> {
        let mut out: Vec<ReplicaPolicyVersion> = Vec::new();
        for v in self.versions.iter().filter(|v| v.from < to) {
            if v.from <= from {
                // an earlier setting is superseded by a later one starting on or before `from`
                out.retain(|o| !(o.cluster == v.cluster && o.pool == v.pool && o.from <= from));
                out.push(ReplicaPolicyVersion { from, ..v.clone() });
            } else {
                out.push(v.clone());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rust_decimal_macros::dec;

    fn day(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    fn v(cluster: &str, pool: Option<&str>, from: &str, policy: ReplicaBilling) -> ReplicaPolicyVersion {
        ReplicaPolicyVersion { cluster: cluster.into(), pool: pool.map(Into::into), from: day(from), policy }
    }

    #[test]
    fn names_parse_strictly() {
        assert_eq!(ReplicaBilling::parse("fraction"), Ok(ReplicaBilling::Fraction));
        assert_eq!(ReplicaBilling::parse("whole-card"), Ok(ReplicaBilling::WholeCard));
        assert_eq!(ReplicaBilling::parse("whole_card"), Ok(ReplicaBilling::WholeCard));
        for bad in ["Fraction", "whole card", " fraction", "", "card"] {
            assert!(ReplicaBilling::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(serde_json::to_string(&ReplicaBilling::WholeCard).unwrap(), "\"whole_card\"");
    }

    #[test]
    fn only_time_sliced_replicas_are_billed_as_whole_cards() {
        // 4 replicas of a card, a pod holding 1 for 10 h: 2.5 card-hours physical, 10 replica-hours.
        let w = ReplicaBilling::WholeCard;
        assert_eq!(w.billed_hours("timeslice", dec!(2.5), dec!(10)), dec!(10));
        for kind in ["mps", "whole", "mig", "hami"] {
            assert_eq!(w.billed_hours(kind, dec!(2.5), dec!(10)), dec!(2.5), "{kind}");
        }
        assert_eq!(ReplicaBilling::Fraction.billed_hours("timeslice", dec!(2.5), dec!(10)), dec!(2.5));
    }

    #[test]
    fn dated_like_rates_pool_before_cluster() {
        let book = ReplicaPolicyBook::new(vec![
            v("c1", None, "2026-11-01", ReplicaBilling::WholeCard),
            v("c1", None, "2026-11-16", ReplicaBilling::Fraction),
            v("c1", Some("a100"), "2026-11-10", ReplicaBilling::WholeCard),
        ]);
        assert_eq!(book.at("c1", None, day("2026-10-31")), ReplicaBilling::Fraction);
        assert_eq!(book.at("c1", None, day("2026-11-01")), ReplicaBilling::WholeCard);
        assert_eq!(book.at("c1", None, day("2026-11-16")), ReplicaBilling::Fraction);
        // the pool's own setting from the 10th; before it, the cluster's
        assert_eq!(book.at("c1", Some("a100"), day("2026-11-09")), ReplicaBilling::WholeCard);
        assert_eq!(book.at("c1", Some("a100"), day("2026-11-20")), ReplicaBilling::WholeCard);
        assert_eq!(book.at("c1", Some("t4"), day("2026-11-20")), ReplicaBilling::Fraction);
        assert_eq!(book.at("c2", None, day("2026-11-20")), ReplicaBilling::Fraction);
        // what November's statement prints: the cluster's two settings and the pool's
        let shown = book.in_effect(day("2026-11-01"), day("2026-12-01"));
        assert_eq!(shown.len(), 3);
        assert_eq!((shown[0].from, shown[0].policy), (day("2026-11-01"), ReplicaBilling::WholeCard));
        assert_eq!((shown[1].from, shown[1].policy), (day("2026-11-16"), ReplicaBilling::Fraction));
        assert_eq!(shown[2].pool.as_deref(), Some("a100"));
        // December: only the settings still in effect, dated from the month's start
        let dec_ = book.in_effect(day("2026-12-01"), day("2027-01-01"));
        assert_eq!(
            dec_.iter().map(|v| (v.pool.is_some(), v.policy, v.from)).collect::<Vec<_>>(),
            vec![
                (false, ReplicaBilling::Fraction, day("2026-12-01")),
                (true, ReplicaBilling::WholeCard, day("2026-12-01"))
            ]
        );
    }

    proptest! {
        /// Whole-card billing of `replicas` replicas bills exactly `replicas` × the physical hours of a time-sliced
        /// line, and never less than the fraction does, whatever the kind.
        #[test]
        fn whole_card_is_the_replicas_factor(replicas in 1u32..=16, units in 1u32..=4, hours in 0u32..=744,
                                            kind in prop::sample::select(vec!["timeslice", "mps", "whole", "mig", "hami"])) {
            // held card-hours (q·f) and the replica-hours behind them (q): replicas × as many
            let card_hours = Decimal::from(units * hours);
            let replica_hours = card_hours * Decimal::from(replicas);
            let whole = ReplicaBilling::WholeCard.billed_hours(kind, card_hours, replica_hours);
            let fraction = ReplicaBilling::Fraction.billed_hours(kind, card_hours, replica_hours);
            prop_assert_eq!(fraction, card_hours);
            prop_assert!(whole >= fraction);
            if kind == "timeslice" {
                prop_assert_eq!(whole, card_hours * Decimal::from(replicas));
            } else {
                prop_assert_eq!(whole, fraction);
            }
        }

        /// The book answers the latest setting on or before the day, for any order the settings come in.
        #[test]
        fn the_latest_setting_wins(days in prop::collection::vec((0i64..60, any::<bool>()), 0..6), probe in 0i64..70) {
            let base = day("2026-11-01");
            let versions: Vec<_> = days.iter().map(|&(d, whole)| v("c", None, &(base + chrono::Duration::days(d)).to_string(),
                if whole { ReplicaBilling::WholeCard } else { ReplicaBilling::Fraction })).collect();
            let at = base + chrono::Duration::days(probe);
            // expected by brute force: the last of the settings with the greatest from ≤ at (ties: the later one)
            let expected = versions.iter().filter(|x| x.from <= at).max_by_key(|x| x.from).map(|x| x.policy);
            let book = ReplicaPolicyBook::new(versions.clone());
            let got = book.at("c", None, at);
            match expected {
                None => prop_assert_eq!(got, ReplicaBilling::Fraction),
                Some(p) => {
                    // equal dates are refused by the table's key; with duplicates any of them is acceptable
                    let same_day: Vec<_> = versions.iter().filter(|x| Some(x.from) == versions.iter().filter(|x| x.from <= at).map(|x| x.from).max()).map(|x| x.policy).collect();
                    prop_assert!(same_day.contains(&got), "{:?} not among {:?} (expected {:?})", got, same_day, p);
                }
            }
        }
    }
}
