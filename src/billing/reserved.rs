//! Reserved-quota billing (SPEC §10), the third bill policy: a team pays its quota scopes' guaranteed card-hours at
//! the reservation rate whether it used them or not, and what it used above them at the on-demand rate.
//!
//! The usage lines stay as they are (every GPU-hour at the model's rate: GPU-hours are never moved by a policy);
//! each scope's guarantee adds two lines to the team that owns the scope:
//! - **reservation** (`保底`): the guaranteed card-hours × (the model's rate × the terms' factor), rounded to the
//!   fen at line level like every line;
//! - **reservation use** (`保底内用量抵扣`): minus the card-hours used within the guarantee × the model's rate — those
//!   hours are in the usage lines already and the reservation paid for them.
//!
//! So the team pays guaranteed × reservation rate + borrowed × rate (+ its use outside any scope × rate), as the
//! SPEC says, and every usage line still prints. The guarantee's GPU model and factor come from the scope's dated
//! reservation terms ([`ReservationBook`]); a guarantee without terms is billed at nothing and flagged (it blocks a
//! close under this policy).

use std::collections::BTreeMap;

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::finance::FinanceCodes;
use super::lines::{BillLine, price};
use crate::money::{Money, RatePerCardHour};

/// The kind of a reservation line.
pub const RESERVATION: &str = "reservation";
/// The kind of a reservation's use-within credit line.
pub const RESERVATION_USE: &str = "reservation_use";

/// One quota scope's guarantee of one team during one rate period and terms of the month, as the caller resolved
/// it (team through the scope's mapping, model and factor through the terms, rate through the rate history).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationLine {
    pub team: String,
    /// The scope as printed: `namespace/<ns>`, `cluster_queue/<name>` or `volcano_queue/<name>`.
    pub scope: String,
    /// The terms' GPU model (the rate catalog's key); `None` when no terms cover the hours.
    pub gpu_model: Option<String>,
    pub guaranteed_card_hours: Decimal,
    /// The model's on-demand rate; `None` when unknown (or no terms).
    pub rate: Option<RatePerCardHour>,
    /// The terms' factor on the rate (e.g. 0.8); `None` when no terms cover the hours.
    pub factor: Option<Decimal>,
    /// The team's finance codes on these days ([`super::finance`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finance: Option<FinanceCodes>,
}

/// The card-hours one GPU model ran within a scope's guarantee during one rate period of the month: credited at
/// that model's rate, the rate its usage lines charged them at (a scope's pods may run on several models, the
/// guarantee names one).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationCredit {
    pub team: String,
    /// The scope, printed as on its [`ReservationLine`].
    pub scope: String,
    /// The model that ran the hours (the rate catalog's key).
    pub gpu_model: String,
    pub used_within_card_hours: Decimal,
    /// The model's rate; `None` when it has none, or when the scope has no terms those days (its guarantee is
    /// billed at nothing, and so is the credit: the usage lines stand as they are).
    pub rate: Option<RatePerCardHour>,
    /// The team's finance codes on these days ([`super::finance`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finance: Option<FinanceCodes>,
}

/// What reserved-quota billing adds to the usage: the scopes' guarantees and the credits of their use within.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservations {
    pub guarantees: Vec<ReservationLine>,
    pub credits: Vec<ReservationCredit>,
}

impl Reservations {
    /// The reservations of one team.
    pub(crate) fn of_team(&self, team: &str) -> (Vec<&ReservationLine>, Vec<&ReservationCredit>) {
        (
            self.guarantees.iter().filter(|g| g.team == team).collect(),
            self.credits.iter().filter(|c| c.team == team).collect(),
        )
    }

    /// The teams with a reservation.
    pub(crate) fn teams(&self) -> impl Iterator<Item = &str> {
        self.guarantees.iter().map(|g| g.team.as_str()).chain(self.credits.iter().map(|c| c.team.as_str()))
    }
}

/// The reservation rate: the model's rate × the factor, to 4 decimals like every rate; none without either.
pub fn reservation_rate(rate: Option<RatePerCardHour>, factor: Option<Decimal>) -> Option<RatePerCardHour> {
    RatePerCardHour::new(rate?.as_decimal() * factor?)
}

/// The GPU model printed on a reservation line whose scope has no terms.
pub const NO_TERMS_MODEL: &str = "—";

/// The bill lines of each (team's) scope — its reservation per terms' model, rate and factor, then its credits per
/// model that ran and rate — merged across the caller's lines first (so hourly or daily inputs give the same
/// amounts), by scope. A guarantee of zero card-hours gives no line, a credit of zero none either.
pub(crate) fn reservation_bill_lines<'a>(
    guarantees: impl IntoIterator<Item = &'a ReservationLine>,
    credits: impl IntoIterator<Item = &'a ReservationCredit>,
) -> Vec<BillLine> {
    type Priced = (String, Option<RatePerCardHour>, Option<Decimal>);
    #[derive(Default)]
    struct Scope {
        reserved: BTreeMap<Priced, Decimal>,
        credited: BTreeMap<(String, Option<RatePerCardHour>), Decimal>,
    }
    // a scope's lines of other finance codes (a change mid-month) are lines of their own
    let mut scopes: BTreeMap<(String, Option<FinanceCodes>), Scope> = BTreeMap::new();
    for g in guarantees {
        let model = g.gpu_model.clone().unwrap_or_else(|| NO_TERMS_MODEL.to_string());
        let s = scopes.entry((g.scope.clone(), g.finance.clone())).or_default();
        *s.reserved.entry((model, g.rate, g.factor.map(|f| f.normalize()))).or_default() += g.guaranteed_card_hours;
    }
    for c in credits {
        let s = scopes.entry((c.scope.clone(), c.finance.clone())).or_default();
        *s.credited.entry((c.gpu_model.clone(), c.rate)).or_default() += c.used_within_card_hours;
    }
    let mut out = Vec::new();
    for ((scope, finance), s) in scopes {
        let line =
            |kind: &str, gpu_model: String, rate: Option<RatePerCardHour>, hours: Decimal, amount: Money| BillLine {
                namespace: scope.clone(),
                gpu_model,
                kind: kind.to_string(),
                card_hours: Decimal::ZERO,
                effective_card_hours: Decimal::ZERO,
                unmetered_card_hours: Decimal::ZERO,
                rate,
                amount,
                unpriced: rate.is_none(),
                whole_card_hours: None,
                unverified_node: false,
                reserved_card_hours: Some(hours),
                reservation_factor: None,
                finance: finance.clone(),
            };
        for ((gpu_model, rate, factor), guaranteed) in s.reserved {
            if guaranteed.is_zero() {
                continue;
            }
            let reserved_rate = reservation_rate(rate, factor);
            out.push(BillLine {
                reservation_factor: factor,
                ..line(RESERVATION, gpu_model, reserved_rate, guaranteed, price(reserved_rate, guaranteed))
            });
        }
        for ((gpu_model, rate), used) in s.credited {
            if used.is_zero() {
                continue;
            }
            // the credit is priced like the usage it takes back: the same rate, rounded the same way, negated
            out.push(line(RESERVATION_USE, gpu_model, rate, -used, -price(rate, used)));
        }
    }
    out
}

/// A scope's reservation terms from a day on: the GPU model its guaranteed cards are priced as, and the factor on
/// that model's rate. Cluster-specific terms win over terms for every cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReservationTerm {
    pub cluster: Option<String>,
    pub scope_kind: String,
    pub scope: String,
    pub gpu_model: String,
    pub factor: Decimal,
    pub valid_from: NaiveDate,
}

/// Every reservation term, answering which one applies to a scope on a day.
#[derive(Debug, Clone, Default)]
pub struct ReservationBook {
    terms: Vec<ReservationTerm>,
}

impl ReservationBook {
    pub fn new(terms: Vec<ReservationTerm>) -> ReservationBook {
        ReservationBook { terms }
    }

    /// The terms of `scope` on `day` in `cluster`: the latest dated on or before the day, the cluster's own first.
    pub fn at(&self, cluster: &str, scope_kind: &str, scope: &str, day: NaiveDate) -> Option<&ReservationTerm> {
        self.terms
            .iter()
            .filter(|t| t.scope_kind == scope_kind && t.scope == scope && t.valid_from <= day)
            .filter(|t| t.cluster.as_deref().is_none_or(|c| c == cluster))
            .max_by_key(|t| (t.cluster.is_some(), t.valid_from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal_macros::dec;

    fn rate(d: Decimal) -> Option<RatePerCardHour> {
        RatePerCardHour::new(d)
    }

    fn scope(team: &str, guaranteed: Decimal) -> ReservationLine {
        ReservationLine {
            team: team.into(),
            scope: "cluster_queue/cq-nlp".into(),
            gpu_model: Some("H100".into()),
            guaranteed_card_hours: guaranteed,
            rate: rate(dec!(12.3457)),
            factor: Some(dec!(0.8)),
            finance: None,
        }
    }

    fn credit(model: &str, used: Decimal, r: Decimal) -> ReservationCredit {
        ReservationCredit {
            team: "nlp".into(),
            scope: "cluster_queue/cq-nlp".into(),
            gpu_model: model.into(),
            used_within_card_hours: used,
            rate: rate(r),
            finance: None,
        }
    }

    #[test]
    fn a_reservation_and_its_use_by_hand() {
        // 720 guaranteed card-hours at 12.3457 × 0.8 = 9.87656 → 9.8766 a card-hour: 7111.152 → 7111.15.
        // 500.5 used within: −500.5 × 12.3457 = −6179.02285 → −6179.02.
        let lines = reservation_bill_lines(
            &[scope("nlp", dec!(400)), scope("nlp", dec!(320))],
            &[credit("H100", dec!(300), dec!(12.3457)), credit("H100", dec!(200.5), dec!(12.3457))],
        );
        assert_eq!(lines.len(), 2);
        let (r, u) = (&lines[0], &lines[1]);
        assert_eq!((r.kind.as_str(), r.rate.unwrap().to_string()), (RESERVATION, "9.8766".into()));
        assert_eq!((r.reserved_card_hours, r.amount.to_string()), (Some(dec!(720)), "7111.15".into()));
        assert_eq!((r.reservation_factor, u.reservation_factor), (Some(dec!(0.8)), None));
        assert_eq!((u.kind.as_str(), u.rate.unwrap().to_string()), (RESERVATION_USE, "12.3457".into()));
        assert_eq!((u.reserved_card_hours, u.amount.to_string()), (Some(dec!(-500.5)), "-6179.02".into()));
        assert!(lines.iter().all(|l| l.card_hours.is_zero() && l.over_recovery().is_zero() && !l.unpriced));
        assert_eq!(lines[0].namespace, "cluster_queue/cq-nlp");
    }

    #[test]
    fn a_guarantee_without_terms_is_unpriced_and_an_unused_one_has_no_credit() {
        let bare = ReservationLine { gpu_model: None, factor: None, rate: None, ..scope("nlp", dec!(10)) };
        let lines = reservation_bill_lines(&[bare], &[]);
        assert_eq!(lines.len(), 1, "nothing used within: no credit line");
        assert_eq!(
            (lines[0].gpu_model.as_str(), lines[0].unpriced, lines[0].amount),
            (NO_TERMS_MODEL, true, Money::ZERO)
        );
        assert!(reservation_bill_lines(&[scope("nlp", dec!(0))], &[credit("H100", dec!(0), dec!(1))]).is_empty());
    }

    #[test]
    fn the_use_within_is_credited_at_the_rates_of_the_models_that_ran() {
        // cq-nlp reserves 100 H100 card-hours at 12.3457 × 0.8; within them ran 60 H100 card-hours (charged at
        // 12.3457 by the usage lines) and 40 L40S ones (charged at 9.0000): each credit takes back exactly what
        // its usage line charged, −740.74 and −360.00, not 40 × 12.3457 = 493.83 for the L40S hours
        let lines = reservation_bill_lines(
            &[scope("nlp", dec!(100))],
            &[credit("L40S", dec!(40), dec!(9)), credit("H100", dec!(60), dec!(12.3457))],
        );
        let got: Vec<(&str, &str, String, String)> = lines
            .iter()
            .map(|l| (l.kind.as_str(), l.gpu_model.as_str(), l.rate.unwrap().to_string(), l.amount.to_string()))
            .collect();
        assert_eq!(
            got,
            [
                (RESERVATION, "H100", "9.8766".into(), "987.66".into()),
                (RESERVATION_USE, "H100", "12.3457".into(), "-740.74".into()),
                (RESERVATION_USE, "L40S", "9.0000".into(), "-360.00".into()),
            ]
        );
        assert_eq!(lines[1].reserved_card_hours, Some(dec!(-60)));
        assert_eq!(lines[2].reserved_card_hours, Some(dec!(-40)));
    }

    #[test]
    fn codes_changing_mid_month_split_a_scopes_reservation_and_credit_lines() {
        // 400 guaranteed card-hours under CC-1, 320 under CC-2; 300 used within under CC-1, 200.5 under CC-2: each
        // part a line of its own, priced alone (400 × 9.8766 = 3950.64, 320 × 9.8766 = 3160.51; Σ 7111.15 as one
        // line would be), under its codes
        let cc = |c: &str| Some(FinanceCodes { cost_centre: Some(c.into()), ..Default::default() });
        let lines = reservation_bill_lines(
            &[
                ReservationLine { finance: cc("CC-1"), ..scope("nlp", dec!(400)) },
                ReservationLine { finance: cc("CC-2"), ..scope("nlp", dec!(320)) },
            ],
            &[
                ReservationCredit { finance: cc("CC-1"), ..credit("H100", dec!(300), dec!(12.3457)) },
                ReservationCredit { finance: cc("CC-2"), ..credit("H100", dec!(200.5), dec!(12.3457)) },
            ],
        );
        let got: Vec<(&str, Option<&str>, String)> = lines
            .iter()
            .map(|l| {
                let cc = l.finance.as_ref().and_then(|f| f.cost_centre.as_deref());
                (l.kind.as_str(), cc, l.amount.to_string())
            })
            .collect();
        assert_eq!(
            got,
            [
                (RESERVATION, Some("CC-1"), "3950.64".into()),
                (RESERVATION_USE, Some("CC-1"), "-3703.71".into()),
                (RESERVATION, Some("CC-2"), "3160.51".into()),
                (RESERVATION_USE, Some("CC-2"), "-2475.31".into()),
            ]
        );
    }

    #[test]
    fn the_terms_of_a_day_are_the_latest_the_clusters_own_first() {
        let t = |cluster: Option<&str>, model: &str, from: &str| ReservationTerm {
            cluster: cluster.map(str::to_string),
            scope_kind: "cluster_queue".into(),
            scope: "cq-nlp".into(),
            gpu_model: model.into(),
            factor: dec!(0.8),
            valid_from: from.parse().unwrap(),
        };
        let book = ReservationBook::new(vec![
            t(None, "A100-80GB", "2026-11-01"),
            t(None, "H100", "2026-12-10"),
            t(Some("c2"), "L40S", "2026-11-15"),
        ]);
        let at =
            |c: &str, d: &str| book.at(c, "cluster_queue", "cq-nlp", d.parse().unwrap()).map(|t| t.gpu_model.as_str());
        assert_eq!(at("c1", "2026-10-31"), None);
        assert_eq!(at("c1", "2026-12-09"), Some("A100-80GB"));
        assert_eq!(at("c1", "2026-12-10"), Some("H100"));
        assert_eq!(at("c2", "2026-11-14"), Some("A100-80GB"));
        assert_eq!(at("c2", "2026-12-20"), Some("L40S"), "the cluster's own terms win over later general ones");
        assert_eq!(book.at("c1", "namespace", "cq-nlp", "2026-12-20".parse().unwrap()), None);
    }
}
