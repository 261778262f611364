//! How pages print figures: the statements' own formatting ([`crate::export::present`]: `¥12,345.67`, card-hours,
//! percentages, changes), plus instants in the billing time zone.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use crate::export::present::group;
pub use crate::export::present::{card_hours, card_hours_f64, change, count, percent, yuan};

/// What a ratio without a divisor prints (no tokens, no requests, no GPU-hours to divide by).
pub const NO_RATIO: &str = "—";

/// A unit cost — ¥ per million tokens, per thousand requests — with its 4 decimals (`¥12.3456`); `—` where the
/// group has nothing to divide by (the pages' mark for a missing figure, where the statements print `–`).
pub fn unit_yuan(d: Option<Decimal>) -> String {
    d.map_or_else(|| NO_RATIO.to_string(), |d| group(d, crate::billing::unit_cost::UNIT_COST_DP, "¥"))
}

/// Tokens per GPU-hour with 2 decimals (`12,345.68`); `—` without GPU-hours.
pub fn per_gpu_hour(d: Option<Decimal>) -> String {
    d.map_or_else(|| NO_RATIO.to_string(), |d| group(d, 2, ""))
}

/// An instant as a reader in the billing time zone reads it: `2026-11-03 14:00 (Asia/Shanghai)`.
pub fn when(t: &DateTime<Utc>, tz: chrono_tz::Tz) -> String {
    crate::export::present::when(*t, tz)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_print_in_the_billing_zone() {
        let t = DateTime::parse_from_rfc3339("2026-10-31T16:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(when(&t, chrono_tz::Asia::Shanghai), "2026-11-01 00:00 (Asia/Shanghai)");
    }

    #[test]
    fn counts_and_unit_costs_print_grouped_with_their_decimals() {
        use rust_decimal_macros::dec;
        assert_eq!(count(0), "0");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(unit_yuan(Some(dec!(10))), "¥10.0000");
        assert_eq!(unit_yuan(Some(dec!(12345.67891))), "¥12,345.6789");
        assert_eq!(unit_yuan(None), "—");
        assert_eq!(per_gpu_hour(Some(dec!(987654.321))), "987,654.32");
        assert_eq!(per_gpu_hour(None), "—");
    }
}
