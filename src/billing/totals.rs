//! The total row of a month's teams table: the sums of the team rows it closes (allocated, unallocated share,
//! restated, adjusted, total; card-hours), so every face prints one and the same total row.

use rust_decimal::Decimal;

use super::compute::TeamBill;
use crate::money::Money;

/// The sums of a month's team rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MonthTotals {
    pub card_hours: Decimal,
    pub effective_card_hours: Decimal,
    pub allocated: Money,
    pub unallocated_share: Money,
    /// Σ restatements of earlier closed months shown on the month.
    pub restated: Money,
    /// Σ approved adjustments booked to the month.
    pub adjusted: Money,
    /// Σ team totals: allocated + unallocated share + restated + adjusted.
    pub total: Money,
}

impl MonthTotals {
    /// The sums of team rows given as (the team's bill, if it has one; its restated amount; its adjusted amount).
    pub fn of_teams<'a>(rows: impl IntoIterator<Item = (Option<&'a TeamBill>, Money, Money)>) -> MonthTotals {
        let mut t = MonthTotals::default();
        for (bill, restated, adjusted) in rows {
            if let Some(b) = bill {
                t.card_hours += b.card_hours;
                t.effective_card_hours += b.effective_card_hours;
                t.allocated = t.allocated + b.allocated;
                t.unallocated_share = t.unallocated_share + b.unallocated_share;
                t.total = t.total + b.total;
            }
            t.restated = t.restated + restated;
            t.adjusted = t.adjusted + adjusted;
            t.total = t.total + restated + adjusted;
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal_macros::dec;

    #[test]
    fn the_total_row_sums_its_rows() {
        let mut a = TeamBill::empty("a");
        a.allocated = Money::round_fen(dec!(100.10));
        a.unallocated_share = Money::round_fen(dec!(5.05));
        a.total = a.allocated + a.unallocated_share;
        a.card_hours = dec!(8.5);
        let m = |d| Money::round_fen(d);
        let t = MonthTotals::of_teams([(Some(&a), m(dec!(-1.15)), m(dec!(-10))), (None, m(dec!(2)), m(dec!(0.5)))]);
        assert_eq!(
            (t.allocated.to_string(), t.unallocated_share.to_string(), t.restated.to_string(), t.total.to_string()),
            ("100.10".into(), "5.05".into(), "0.85".into(), "96.50".into())
        );
        assert_eq!(t.adjusted.to_string(), "-9.50");
        assert_eq!(t.card_hours, dec!(8.5));
        assert_eq!(MonthTotals::of_teams([]), MonthTotals::default());
    }
}
