//! Bill lines: usage and capacity as the caller hands them in, and the priced lines a bill is made of.
//!
//! The caller has already resolved the rate of every period (a rate change mid-month arrives as several
//! [`UsageLine`]s with different rates), so this module only groups and prices. Lines with the same key —
//! (namespace, GPU model, resource kind, rate) for usage, (GPU model, rate) for capacity — are merged first,
//! so a caller may pass stored hourly rows directly; each merged line is then priced once and rounded to
//! the fen (四舍五入, half up) *at line level*, as the spec requires. Lines with different rates are never
//! merged: the bill shows every rate used.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::finance::FinanceCodes;
use crate::money::{Money, RatePerCardHour};

/// One team's usage of one (namespace, GPU model, resource kind) during one rate period of the month.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageLine {
    pub team: String,
    pub namespace: String,
    pub gpu_model: String,
    /// Resource kind: `whole`, `mig`, `timeslice` or `hami` (carried through as given).
    pub kind: String,
    /// GPU-hours (卡时), already weighted by the card fraction.
    pub card_hours: Decimal,
    /// Effective GPU-hours (有效卡时).
    pub effective_card_hours: Decimal,
    /// The part of `card_hours` without any utilization sample (counted, but not as 0 % or 100 %).
    pub unmetered_card_hours: Decimal,
    /// The rate of this period; `None` when no rate is known for the model (the line is billed at 0 and flagged).
    pub rate: Option<RatePerCardHour>,
    /// Time-sliced replicas billed as whole cards ([`super::replicas`]): the replica-hours billed, each replica a
    /// card; `None` when billed by fraction (the physical `card_hours`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_card_hours: Option<Decimal>,
    /// Held on a node whose cards could not be counted (taken at face value): the bill line is marked.
    #[serde(default)]
    pub unverified_node: bool,
    /// The team's finance codes on the days of this line ([`super::finance`]); a change of codes mid-month makes
    /// two lines. `None` when the team has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finance: Option<FinanceCodes>,
}

/// The cluster's capacity of one GPU model during one rate period of the month.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityLine {
    pub gpu_model: String,
    pub card_hours: Decimal,
    /// The part of `card_hours` offered to workloads (SPEC §3): not on a cordoned node, not an unhealthy card.
    /// Taken as at most `card_hours` and at least 0.
    pub offered_card_hours: Decimal,
    pub rate: Option<RatePerCardHour>,
}

impl CapacityLine {
    /// A line whose every card was offered.
    pub fn fully_offered(gpu_model: impl Into<String>, card_hours: Decimal, rate: Option<RatePerCardHour>) -> Self {
        CapacityLine { gpu_model: gpu_model.into(), card_hours, offered_card_hours: card_hours, rate }
    }

    fn not_offered_card_hours(&self) -> Decimal {
        (self.card_hours - self.offered_card_hours.max(Decimal::ZERO)).max(Decimal::ZERO)
    }
}

/// A priced line of a team's bill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BillLine {
    pub namespace: String,
    pub gpu_model: String,
    pub kind: String,
    pub card_hours: Decimal,
    pub effective_card_hours: Decimal,
    pub unmetered_card_hours: Decimal,
    /// The rate used, printed on the bill.
    pub rate: Option<RatePerCardHour>,
    /// `rate × card_hours` (or × `whole_card_hours` when billed so), rounded half up to the fen; 0 when unpriced.
    pub amount: Money,
    /// No rate was known: the hours are shown, the amount is 0, and finance must see why.
    pub unpriced: bool,
    /// Time-sliced replicas billed as whole cards: the replica-hours the amount is for (`card_hours` stays the
    /// physical share). Absent on lines billed by fraction, so statements closed before it read as they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_card_hours: Option<Decimal>,
    /// Some of the line's pods ran on a node whose cards could not be counted (taken at face value, a unit a
    /// card): its hours are as the node advertised them until configuration settles it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unverified_node: bool,
    /// A reservation line of reserved-quota billing ([`super::reserved`]): the guaranteed card-hours it bills, or
    /// (negative) the card-hours used within the guarantee it credits back; its GPU-hour columns are 0. Absent on
    /// usage lines, so statements closed before it read as they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_card_hours: Option<Decimal>,
    /// A reservation line's factor on the model's rate (its rate is the model's rate × this factor); absent on
    /// usage lines and on a credit line (priced at the model's rate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_factor: Option<Decimal>,
    /// The team's finance codes on the line's days ([`super::finance`]): lines of one key with other codes are
    /// lines of their own. Absent without codes, so statements closed before them read as they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finance: Option<FinanceCodes>,
}

/// A priced capacity line: what the cluster's cards of one model cost during one rate period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityBillLine {
    pub gpu_model: String,
    pub card_hours: Decimal,
    pub rate: Option<RatePerCardHour>,
    /// `rate × card_hours`, rounded half up to the fen; 0 when unpriced.
    pub amount: Money,
    pub unpriced: bool,
    /// Of `card_hours`, those not offered to workloads (cordoned nodes, unhealthy cards). `None` in a month
    /// closed before offered capacity was recorded — every card counted as offered then — and left out of its
    /// stored form, so such a snapshot reads and prints as it was closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_offered_card_hours: Option<Decimal>,
    /// `rate × not_offered_card_hours`, rounded half up to the fen: kept by the platform, never spread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_offered_amount: Option<Money>,
}

impl CapacityBillLine {
    /// The card-hours offered to workloads.
    pub fn offered_card_hours(&self) -> Decimal {
        self.card_hours - self.not_offered_card_hours.unwrap_or_default()
    }

    /// What the offered card-hours cost: `amount − not_offered_amount`, so the two parts add up to the line.
    pub fn offered_amount(&self) -> Money {
        self.amount - self.not_offered_amount.unwrap_or_default()
    }
}

/// What a bill line bills: lines with equal keys are one line of the bill but for their finance codes (a
/// restatement compares them so: codes move no money). Ordered as bills are sorted (namespace, model, kind, then
/// rate with the unpriced line first).
pub type LineKey = (String, String, String, Option<RatePerCardHour>);

impl BillLine {
    pub fn key(&self) -> LineKey {
        (self.namespace.clone(), self.gpu_model.clone(), self.kind.clone(), self.rate)
    }

    /// What the line's physical card-hours cost (its amount under fraction billing), rounded like the line.
    pub fn physical_amount(&self) -> Money {
        price(self.rate, self.card_hours)
    }

    /// What whole-card billing recovers on this line above its cards' cost (0 when billed by fraction, and on a
    /// reservation line: what a reservation bills above use is the over-commitment, [`super::MonthBills`]).
    pub fn over_recovery(&self) -> Money {
        if self.is_reservation() { Money::ZERO } else { self.amount - self.physical_amount() }
    }

    /// A reservation line (reserved-quota billing), not usage.
    pub fn is_reservation(&self) -> bool {
        self.reserved_card_hours.is_some()
    }
}

/// The amount for some card-hours at an optional rate: unpriced hours cost 0 (and are flagged by the caller).
pub(crate) fn price(rate: Option<RatePerCardHour>, card_hours: Decimal) -> Money {
    rate.map_or(Money::ZERO, |r| r.amount(card_hours))
}

#[derive(Default)]
struct Hours {
    card: Decimal,
    effective: Decimal,
    unmetered: Decimal,
    whole: Decimal,
    unverified: bool,
}

/// Merges usage lines by key and prices each merged line once, sorted by key.
pub(crate) fn bill_lines<'a>(usage: impl IntoIterator<Item = &'a UsageLine>) -> Vec<BillLine> {
    // whole-card billed hours are a line of their own beside the same key's fraction-billed ones (a policy
    // change mid-month), so each line's amount is one rate × one kind of hours
    // (and lines of other finance codes are lines of their own, after the line without)
    let mut merged: BTreeMap<(LineKey, bool, Option<FinanceCodes>), Hours> = BTreeMap::new();
    for u in usage {
        let key = (u.namespace.clone(), u.gpu_model.clone(), u.kind.clone(), u.rate);
        let h = merged.entry((key, u.whole_card_hours.is_some(), u.finance.clone())).or_default();
        h.card += u.card_hours;
        h.effective += u.effective_card_hours;
        h.unmetered += u.unmetered_card_hours;
        h.whole += u.whole_card_hours.unwrap_or_default();
        h.unverified |= u.unverified_node;
    }
    merged
        .into_iter()
        .map(|(((namespace, gpu_model, kind, rate), whole, finance), h)| {
            let whole_card_hours = whole.then_some(h.whole);
            BillLine {
                namespace,
                gpu_model,
                kind,
                card_hours: h.card,
                effective_card_hours: h.effective,
                unmetered_card_hours: h.unmetered,
                rate,
                amount: price(rate, whole_card_hours.unwrap_or(h.card)),
                unpriced: rate.is_none(),
                whole_card_hours,
                unverified_node: h.unverified,
                reserved_card_hours: None,
                reservation_factor: None,
                finance,
            }
        })
        .collect()
}

/// Merges capacity lines by (model, rate) and prices each once, sorted by model then rate. The not-offered
/// card-hours are priced on their own, rounded at line level like the line: they are at most the line's hours,
/// so their amount is at most the line's amount.
pub(crate) fn capacity_lines(capacity: &[CapacityLine]) -> Vec<CapacityBillLine> {
    let mut merged: BTreeMap<(String, Option<RatePerCardHour>), (Decimal, Decimal)> = BTreeMap::new();
    for c in capacity {
        let e = merged.entry((c.gpu_model.clone(), c.rate)).or_default();
        e.0 += c.card_hours;
        e.1 += c.not_offered_card_hours();
    }
    merged
        .into_iter()
        .map(|((gpu_model, rate), (card_hours, not_offered))| CapacityBillLine {
            gpu_model,
            card_hours,
            rate,
            amount: price(rate, card_hours),
            unpriced: rate.is_none(),
            not_offered_card_hours: Some(not_offered),
            not_offered_amount: Some(price(rate, not_offered)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal_macros::dec;

    fn rate(d: Decimal) -> Option<RatePerCardHour> {
        RatePerCardHour::new(d)
    }

    fn usage(ns: &str, model: &str, kind: &str, hours: Decimal, r: Option<RatePerCardHour>) -> UsageLine {
        UsageLine {
            team: "alg".into(),
            namespace: ns.into(),
            gpu_model: model.into(),
            kind: kind.into(),
            card_hours: hours,
            effective_card_hours: hours / dec!(2),
            unmetered_card_hours: Decimal::ZERO,
            rate: r,
            whole_card_hours: None,
            unverified_node: false,
            finance: None,
        }
    }

    #[test]
    fn prices_each_line_half_up_to_the_fen() {
        // 8 cards × 12 h = 96 card-hours × 12.3457 = 1185.1872 → 1185.19.
        // 1g.10gb MIG = 1/7 card: 100 h → 14.285714 card-hours × 8.5000 = 121.428569 → 121.43.
        let lines = bill_lines(&[
            usage("train", "H100", "whole", dec!(96), rate(dec!(12.3457))),
            usage("infer", "A100", "mig", dec!(14.285714), rate(dec!(8.5))),
        ]);
        assert_eq!(lines.len(), 2);
        // Sorted by namespace: "infer" < "train".
        assert_eq!((lines[0].namespace.as_str(), lines[0].amount.to_string()), ("infer", "121.43".into()));
        assert_eq!((lines[1].namespace.as_str(), lines[1].amount.to_string()), ("train", "1185.19".into()));
        assert!(!lines[0].unpriced && !lines[1].unpriced);
    }

    #[test]
    fn rounding_is_per_line_not_per_total() {
        // Two kinds at 0.0100 yuan/card-hour, 0.5 card-hours each: 0.005 → 0.01 per line, 0.02 together,
        // where rounding the team's 0.010 exact yuan once would give 0.01.
        let lines = bill_lines(&[
            usage("ns", "T4", "timeslice", dec!(0.5), rate(dec!(0.01))),
            usage("ns", "T4", "whole", dec!(0.5), rate(dec!(0.01))),
        ]);
        assert_eq!(lines.iter().map(|l| l.amount).sum::<Money>().to_string(), "0.02");
    }

    #[test]
    fn same_key_merges_before_pricing_and_different_rates_stay_apart() {
        // Two hourly rows at 10.0001: 0.5 + 0.5 card-hours = 1 → 10.0001 → 10.00 (one line, priced once).
        // The same usage at another rate stays a separate line showing that rate.
        let lines = bill_lines(&[
            usage("ns", "H100", "whole", dec!(0.5), rate(dec!(10.0001))),
            usage("ns", "H100", "whole", dec!(0.5), rate(dec!(10.0001))),
            usage("ns", "H100", "whole", dec!(2), rate(dec!(11))),
        ]);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].card_hours, dec!(1));
        assert_eq!(lines[0].effective_card_hours, dec!(0.5));
        assert_eq!(lines[0].amount.to_string(), "10.00");
        assert_eq!(lines[1].rate.unwrap().to_string(), "11.0000");
        assert_eq!(lines[1].amount.to_string(), "22.00");
    }

    #[test]
    fn unpriced_lines_are_kept_at_zero_and_flagged() {
        let lines = bill_lines(&[usage("ns", "L40S", "whole", dec!(5), None)]);
        assert_eq!(lines.len(), 1);
        assert!(lines[0].unpriced);
        assert_eq!(lines[0].amount, Money::ZERO);
        assert_eq!(lines[0].card_hours, dec!(5));
    }

    #[test]
    fn capacity_is_priced_per_model_and_rate() {
        // 2 nodes × 8 H100 × 720 h = 11520 card-hours × 12.3457 = 142222.464 → 142222.46.
        let cap = capacity_lines(&[
            CapacityLine::fully_offered("H100", dec!(5760), rate(dec!(12.3457))),
            CapacityLine::fully_offered("H100", dec!(5760), rate(dec!(12.3457))),
            CapacityLine::fully_offered("A30", dec!(720), None),
        ]);
        assert_eq!(cap.len(), 2);
        assert_eq!((cap[0].gpu_model.as_str(), cap[0].unpriced, cap[0].amount), ("A30", true, Money::ZERO));
        assert_eq!(cap[1].card_hours, dec!(11520));
        assert_eq!(cap[1].amount.to_string(), "142222.46");
        assert_eq!((cap[1].not_offered_card_hours, cap[1].not_offered_amount), (Some(dec!(0)), Some(Money::ZERO)));
        assert_eq!(cap[1].offered_card_hours(), dec!(11520));
    }

    #[test]
    fn not_offered_hours_are_priced_apart_and_the_parts_add_up() {
        // One node of 8 cards cordoned for 12 h, another offering 6 of its 8 for 720 h, at 12.3457:
        // 96 + 1440 = 1536 not offered of 11520 card-hours. 1536 × 12.3457 = 18963.0 (18962.9952 → 18963.00);
        // the line 142222.46, so what was offered costs 142222.46 − 18963.00 = 123259.46.
        let r = rate(dec!(12.3457));
        let cap = capacity_lines(&[
            CapacityLine { gpu_model: "H100".into(), card_hours: dec!(5760), offered_card_hours: dec!(5664), rate: r },
            CapacityLine { gpu_model: "H100".into(), card_hours: dec!(5760), offered_card_hours: dec!(4320), rate: r },
        ]);
        assert_eq!(cap.len(), 1);
        assert_eq!(cap[0].not_offered_card_hours, Some(dec!(1536)));
        assert_eq!(cap[0].offered_card_hours(), dec!(9984));
        assert_eq!(cap[0].not_offered_amount.unwrap().to_string(), "18963.00");
        assert_eq!(cap[0].offered_amount().to_string(), "123259.46");
        // offered hours outside [0, card_hours] are taken at the nearest bound
        let odd = capacity_lines(&[
            CapacityLine { gpu_model: "A".into(), card_hours: dec!(10), offered_card_hours: dec!(11), rate: r },
            CapacityLine { gpu_model: "B".into(), card_hours: dec!(10), offered_card_hours: dec!(-1), rate: r },
        ]);
        assert_eq!(odd[0].not_offered_card_hours, Some(dec!(0)));
        assert_eq!(odd[1].not_offered_card_hours, Some(dec!(10)));
        assert_eq!(odd[1].not_offered_amount, Some(odd[1].amount));
    }

    #[test]
    fn a_capacity_line_closed_before_offered_capacity_reads_and_writes_as_it_was() {
        let stored = r#"{"gpu_model":"H100","card_hours":"720","rate":"1.5000","amount":"1080.00","unpriced":false}"#;
        let line: CapacityBillLine = serde_json::from_str(stored).unwrap();
        assert_eq!((line.not_offered_card_hours, line.not_offered_amount), (None, None));
        assert_eq!((line.offered_card_hours(), line.offered_amount().to_string()), (dec!(720), "1080.00".into()));
        assert_eq!(serde_json::to_string(&line).unwrap(), stored);
    }
}
