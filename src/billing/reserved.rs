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
    pub used_within_card_hours: Decimal,
    /// The model's on-demand rate; `None` when unknown (or no terms).
    pub rate: Option<RatePerCardHour>,
    /// The terms' factor on the rate (e.g. 0.8); `None` when no terms cover the hours.
    pub factor: Option<Decimal>,
}

/// The reservation rate: the model's rate × the factor, to 4 decimals like every rate; none without either.
pub fn reservation_rate(rate: Option<RatePerCardHour>, factor: Option<Decimal>) -> Option<RatePerCardHour> {
    RatePerCardHour::new(rate?.as_decimal() * factor?)
}

/// The GPU model printed on a reservation line whose scope has no terms.
pub const NO_TERMS_MODEL: &str = "—";

/// The two bill lines of each (team's) scope, model and rate, merged across the caller's lines first (so hourly or
/// daily inputs give the same amounts), sorted like bill lines. A guarantee of zero card-hours gives no line.
pub(crate) fn reservation_bill_lines<'a>(lines: impl IntoIterator<Item = &'a ReservationLine>) -> Vec<BillLine> {
    type Key = (String, String, Option<RatePerCardHour>, Option<Decimal>);
    let mut merged: BTreeMap<Key, (Decimal, Decimal)> = BTreeMap::new();
    for l in lines {
        let model = l.gpu_model.clone().unwrap_or_else(|| NO_TERMS_MODEL.to_string());
        let e = merged.entry((l.scope.clone(), model, l.rate, l.factor.map(|f| f.normalize()))).or_default();
        e.0 += l.guaranteed_card_hours;
        e.1 += l.used_within_card_hours;
    }
    let mut out = Vec::new();
    for ((scope, gpu_model, rate, factor), (guaranteed, used)) in merged {
        if guaranteed.is_zero() {
            continue;
        }
        let reserved_rate = reservation_rate(rate, factor);
        let line = |kind: &str, rate: Option<RatePerCardHour>, hours: Decimal, amount: Money| BillLine {
            namespace: scope.clone(),
            gpu_model: gpu_model.clone(),
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
        };
        out.push(BillLine {
            reservation_factor: factor,
            ..line(RESERVATION, reserved_rate, guaranteed, price(reserved_rate, guaranteed))
        });
        if !used.is_zero() {
            // the credit is priced like the usage it takes back: the same rate, rounded the same way, negated
            out.push(line(RESERVATION_USE, rate, -used, -price(rate, used)));
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

    fn scope(team: &str, guaranteed: Decimal, used: Decimal) -> ReservationLine {
        ReservationLine {
            team: team.into(),
            scope: "cluster_queue/cq-nlp".into(),
            gpu_model: Some("H100".into()),
            guaranteed_card_hours: guaranteed,
            used_within_card_hours: used,
            rate: rate(dec!(12.3457)),
            factor: Some(dec!(0.8)),
        }
    }

    #[test]
    fn a_reservation_and_its_use_by_hand() {
        // 720 guaranteed card-hours at 12.3457 × 0.8 = 9.87656 → 9.8766 a card-hour: 7111.152 → 7111.15.
        // 500.5 used within: −500.5 × 12.3457 = −6179.02285 → −6179.02.
        let lines = reservation_bill_lines(&[scope("nlp", dec!(400), dec!(300)), scope("nlp", dec!(320), dec!(200.5))]);
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
        let bare = ReservationLine { gpu_model: None, factor: None, rate: None, ..scope("nlp", dec!(10), dec!(0)) };
        let lines = reservation_bill_lines(&[bare]);
        assert_eq!(lines.len(), 1, "nothing used within: no credit line");
        assert_eq!(
            (lines[0].gpu_model.as_str(), lines[0].unpriced, lines[0].amount),
            (NO_TERMS_MODEL, true, Money::ZERO)
        );
        assert!(reservation_bill_lines(&[scope("nlp", dec!(0), dec!(0))]).is_empty());
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
