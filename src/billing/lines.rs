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
}

/// The cluster's capacity of one GPU model during one rate period of the month.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityLine {
    pub gpu_model: String,
    pub card_hours: Decimal,
    pub rate: Option<RatePerCardHour>,
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
    /// `rate × card_hours`, rounded half up to the fen; 0 when unpriced.
    pub amount: Money,
    /// No rate was known: the hours are shown, the amount is 0, and finance must see why.
    pub unpriced: bool,
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
}

/// The identity of a bill line: lines with equal keys are one line. Ordered as bills are sorted
/// (namespace, model, kind, then rate with the unpriced line first).
pub type LineKey = (String, String, String, Option<RatePerCardHour>);

impl BillLine {
    pub fn key(&self) -> LineKey {
        (self.namespace.clone(), self.gpu_model.clone(), self.kind.clone(), self.rate)
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
}

/// Merges usage lines by key and prices each merged line once, sorted by key.
pub(crate) fn bill_lines<'a>(usage: impl IntoIterator<Item = &'a UsageLine>) -> Vec<BillLine> {
    let mut merged: BTreeMap<LineKey, Hours> = BTreeMap::new();
    for u in usage {
        let h = merged.entry((u.namespace.clone(), u.gpu_model.clone(), u.kind.clone(), u.rate)).or_default();
        h.card += u.card_hours;
        h.effective += u.effective_card_hours;
        h.unmetered += u.unmetered_card_hours;
    }
    merged
        .into_iter()
        .map(|((namespace, gpu_model, kind, rate), h)| BillLine {
            namespace,
            gpu_model,
            kind,
            card_hours: h.card,
            effective_card_hours: h.effective,
            unmetered_card_hours: h.unmetered,
            rate,
            amount: price(rate, h.card),
            unpriced: rate.is_none(),
        })
        .collect()
}

/// Merges capacity lines by (model, rate) and prices each once, sorted by model then rate.
pub(crate) fn capacity_lines(capacity: &[CapacityLine]) -> Vec<CapacityBillLine> {
    let mut merged: BTreeMap<(String, Option<RatePerCardHour>), Decimal> = BTreeMap::new();
    for c in capacity {
        *merged.entry((c.gpu_model.clone(), c.rate)).or_default() += c.card_hours;
    }
    merged
        .into_iter()
        .map(|((gpu_model, rate), card_hours)| CapacityBillLine {
            gpu_model,
            card_hours,
            rate,
            amount: price(rate, card_hours),
            unpriced: rate.is_none(),
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
            CapacityLine { gpu_model: "H100".into(), card_hours: dec!(5760), rate: rate(dec!(12.3457)) },
            CapacityLine { gpu_model: "H100".into(), card_hours: dec!(5760), rate: rate(dec!(12.3457)) },
            CapacityLine { gpu_model: "A30".into(), card_hours: dec!(720), rate: None },
        ]);
        assert_eq!(cap.len(), 2);
        assert_eq!((cap[0].gpu_model.as_str(), cap[0].unpriced, cap[0].amount), ("A30", true, Money::ZERO));
        assert_eq!(cap[1].card_hours, dec!(11520));
        assert_eq!(cap[1].amount.to_string(), "142222.46");
    }
}
