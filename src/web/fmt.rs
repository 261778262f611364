//! How pages print figures: the statements' own formatting ([`crate::export::present`]: `¥12,345.67`, card-hours,
//! percentages, changes), plus instants in the billing time zone.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use crate::glossary::Lang;

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

/// A wait as a reader reads it: `2 小时 05 分` / `2 h 05 min`, `45 秒` / `45 s` under a minute; `—` for none.
pub fn wait(lang: Lang, seconds: Option<f64>) -> String {
    let Some(s) = seconds.filter(|s| s.is_finite() && *s >= 0.0) else { return "—".into() };
    let s = s.round() as i64;
    let (h, m) = (s / 3600, (s % 3600) / 60);
    match (lang, h, m) {
        (Lang::Zh, 0, 0) => format!("{s} 秒"),
        (Lang::En, 0, 0) => format!("{s} s"),
        (Lang::Zh, 0, m) => format!("{m} 分"),
        (Lang::En, 0, m) => format!("{m} min"),
        (Lang::Zh, h, m) => format!("{h} 小时 {m:02} 分"),
        (Lang::En, h, m) => format!("{h} h {m:02} min"),
    }
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

    #[test]
    fn waits_read_in_hours_and_minutes() {
        assert_eq!(wait(Lang::Zh, Some(7500.0)), "2 小时 05 分");
        assert_eq!(wait(Lang::En, Some(7500.0)), "2 h 05 min");
        assert_eq!(wait(Lang::Zh, Some(61.0)), "1 分");
        assert_eq!(wait(Lang::En, Some(45.0)), "45 s");
        assert_eq!(wait(Lang::Zh, None), "—");
    }
}
