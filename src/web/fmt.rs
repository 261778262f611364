//! How pages print figures: the statements' own formatting ([`crate::export::present`]: `¥12,345.67`, card-hours,
//! percentages, changes), plus instants in the billing time zone.

use chrono::{DateTime, Utc};

pub use crate::export::present::{card_hours, card_hours_f64, change, percent, yuan};

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
}
