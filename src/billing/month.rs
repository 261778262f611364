//! The billing month (账期): `YYYY-MM`, a half-open interval of instants in the billing time zone.
//!
//! Bills are per calendar month *as finance sees it*, i.e. in the billing time zone (default Asia/Shanghai),
//! not in UTC: November 2026 in Shanghai starts at 2026-10-31T16:00Z. Usage is stored in UTC hours, so the
//! caller selects stored rows with [`Month::bounds`].

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, LocalResult, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The billing time zone unless configured otherwise.
pub const DEFAULT_BILLING_TZ: Tz = chrono_tz::Asia::Shanghai;

/// A calendar month, e.g. `2026-11`. Ordered chronologically; (de)serialised as the string `"YYYY-MM"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Month {
    // Field order matters: the derived `Ord` compares the year first.
    year: i32,
    month: u32,
}

/// The first and last month a billing month may be: a month outside them is a typo, and closing one (`0000-01`)
/// would be irreversible.
pub const FIRST_MONTH: Month = Month { year: 2000, month: 1 };
pub const LAST_MONTH: Month = Month { year: 2100, month: 12 };

/// A string that is not a billing month: not in the strict `YYYY-MM` form, or outside
/// [`FIRST_MONTH`] ..= [`LAST_MONTH`]. The messages name no field: the caller's field is the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MonthParseError {
    #[error("`{}` is not a month: expected YYYY-MM, 01 to 12", .0.escape_debug())]
    Malformed(String),
    #[error("must be between 2000-01 and 2100-12")]
    OutOfRange(String),
}

impl Month {
    /// A month from its year and month (1–12), within [`FIRST_MONTH`] ..= [`LAST_MONTH`].
    pub fn new(year: i32, month: u32) -> Option<Month> {
        let m = Month { year, month };
        ((1..=12).contains(&month) && (FIRST_MONTH..=LAST_MONTH).contains(&m)).then_some(m)
    }

    /// The one parser of a billing month: exactly `YYYY-MM` (four digits, a hyphen, two digits, month 01–12)
    /// within [`FIRST_MONTH`] ..= [`LAST_MONTH`]. Nothing else is accepted (no `2026-1`, no `26-11`, no
    /// surrounding spaces): a month key typed wrongly must not silently bill another month.
    pub fn parse(s: &str) -> Result<Month, MonthParseError> {
        let malformed = || MonthParseError::Malformed(s.to_owned());
        let b = s.as_bytes();
        let well_formed = b.len() == 7 && b[4] == b'-' && b[..4].iter().chain(&b[5..]).all(u8::is_ascii_digit);
        if !well_formed {
            return Err(malformed());
        }
        let year: i32 = s[..4].parse().map_err(|_| malformed())?;
        let month: u32 = s[5..].parse().map_err(|_| malformed())?;
        if !(1..=12).contains(&month) {
            return Err(malformed());
        }
        Month::new(year, month).ok_or_else(|| MonthParseError::OutOfRange(s.to_owned()))
    }

    pub fn year(self) -> i32 {
        self.year
    }

    /// 1–12.
    pub fn month(self) -> u32 {
        self.month
    }

    /// The month after this one. (`2100-12` gives `2101-01`, which still has correct bounds but does not parse
    /// back: nothing is billed after it.)
    pub fn next(self) -> Month {
        if self.month == 12 { Month { year: self.year + 1, month: 1 } } else { Month { month: self.month + 1, ..self } }
    }

    /// The month before this one. (`2000-01` gives `1999-12`, which has correct bounds, holds no data and does
    /// not parse back.)
    pub fn prev(self) -> Month {
        match (self.year, self.month) {
            (y, 1) => Month { year: y - 1, month: 12 },
            (y, m) => Month { year: y, month: m - 1 },
        }
    }

    /// The first calendar day of the month.
    pub fn first_day(self) -> NaiveDate {
        NaiveDate::from_ymd_opt(self.year, self.month, 1)
            .expect("a year chrono spells and month 1..=12 form a valid date")
    }

    /// The month as the half-open UTC interval `[start, end)` of its local days in `tz`: from the first
    /// instant of the 1st to the first instant of the next month's 1st. Consecutive months tile exactly.
    ///
    /// e.g. `2026-11` in Asia/Shanghai (UTC+8) → `2026-10-31T16:00Z .. 2026-11-30T16:00Z`.
    pub fn bounds(self, tz: Tz) -> (DateTime<Utc>, DateTime<Utc>) {
        (start_of_day(tz, self.first_day()), start_of_day(tz, self.next().first_day()))
    }

    /// The month, in `tz`, that contains the instant `t`.
    pub fn containing(t: DateTime<Utc>, tz: Tz) -> Month {
        let local = t.with_timezone(&tz);
        Month { year: local.year(), month: local.month() }
    }
}

/// The first instant of a local day. Midnight normally exists once; when clocks fall back over midnight it
/// exists twice and the day starts at the earlier one; when clocks spring forward at midnight (e.g. Paraguay,
/// 2017-10-01 00:00 → 01:00) it does not exist and the day starts at the transition instant.
pub fn start_of_day(tz: Tz, day: NaiveDate) -> DateTime<Utc> {
    let midnight = day.and_hms_opt(0, 0, 0).expect("00:00:00 is a valid time");
    match tz.from_local_datetime(&midnight) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => t.with_timezone(&Utc),
        LocalResult::None => first_instant_at_or_after(tz, midnight),
    }
}

/// The first UTC second whose local time in `tz` is at or after `local` (found by bisection: offsets are
/// within ±14 h, so the answer lies within a day either side of `local` read as UTC, and near a
/// spring-forward gap local time only moves forward).
fn first_instant_at_or_after(tz: Tz, local: NaiveDateTime) -> DateTime<Utc> {
    let at = |secs: i64| DateTime::from_timestamp(secs, 0).expect("within chrono's range");
    let reached = |secs: i64| at(secs).with_timezone(&tz).naive_local() >= local;
    let guess = local.and_utc().timestamp();
    // Whole seconds: time-zone transitions happen on whole seconds.
    let (mut lo, mut hi) = (guess - 26 * 3600, guess + 26 * 3600); // not reached at lo, reached at hi
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if reached(mid) { hi = mid } else { lo = mid }
    }
    at(hi)
}

impl fmt::Display for Month {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04}-{:02}", self.year, self.month)
    }
}

impl FromStr for Month {
    type Err = MonthParseError;
    fn from_str(s: &str) -> Result<Month, MonthParseError> {
        Month::parse(s)
    }
}

impl Serialize for Month {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Through [`Month::parse`], inside the visitor: a path extractor then reports the failure at its key (axum's
/// `ErrorKind::DeserializeError` names the parameter; an error raised after the string is read would not).
impl<'de> Deserialize<'de> for Month {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Month, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Month;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a billing month YYYY-MM between 2000-01 and 2100-12")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Month, E> {
                Month::parse(s).map_err(E::custom)
            }
        }
        d.deserialize_str(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;
    use proptest::prelude::*;

    fn utc(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn parses_strictly() {
        let m = Month::parse("2026-11").unwrap();
        assert_eq!((m.year(), m.month()), (2026, 11));
        assert_eq!(m.to_string(), "2026-11");
        assert_eq!("2000-01".parse::<Month>().unwrap(), FIRST_MONTH);
        assert_eq!("2100-12".parse::<Month>().unwrap(), LAST_MONTH);
        for bad in
            ["2026-13", "2026-00", "26-11", "2026-1x", "2026-1", "2026-011", " 2026-11", "2026/11", "+026-11", ""]
        {
            assert!(matches!(Month::parse(bad), Err(MonthParseError::Malformed(_))), "{bad:?} must be refused");
        }
        for far in ["0000-01", "0001-01", "1999-12", "2101-01", "9999-12"] {
            assert_eq!(Month::parse(far), Err(MonthParseError::OutOfRange(far.into())), "{far:?} must be refused");
        }
        assert_eq!(
            Month::parse("2026-13").unwrap_err().to_string(),
            "`2026-13` is not a month: expected YYYY-MM, 01 to 12"
        );
        assert_eq!(Month::parse("1999-12").unwrap_err().to_string(), "must be between 2000-01 and 2100-12");
        assert_eq!(Month::new(1999, 12), None);
        assert_eq!(Month::new(2026, 13), None);
    }

    #[test]
    fn next_and_prev_cross_years() {
        assert_eq!(Month::parse("2026-12").unwrap().next().to_string(), "2027-01");
        assert_eq!(Month::parse("2026-11").unwrap().next().to_string(), "2026-12");
        assert_eq!(Month::parse("2027-01").unwrap().prev().to_string(), "2026-12");
        assert!(Month::parse("2026-12").unwrap() < Month::parse("2027-01").unwrap());
    }

    #[test]
    fn bounds_in_shanghai() {
        // UTC+8 all year, no DST: local midnight of the 1st is 16:00Z the day before.
        let (start, end) = Month::parse("2026-11").unwrap().bounds(DEFAULT_BILLING_TZ);
        assert_eq!(start, utc("2026-10-31T16:00:00Z"));
        assert_eq!(end, utc("2026-11-30T16:00:00Z"));
        // 30 days of 24 hours.
        assert_eq!(end - start, Duration::hours(720));
    }

    #[test]
    fn bounds_follow_dst() {
        // Berlin: CET (UTC+1) on 1 March, CEST (UTC+2) from 29 March 2026, still CEST on 1 April.
        let (start, end) = Month::parse("2026-03").unwrap().bounds(chrono_tz::Europe::Berlin);
        assert_eq!(start, utc("2026-02-28T23:00:00Z"));
        assert_eq!(end, utc("2026-03-31T22:00:00Z"));
        assert_eq!(end - start, Duration::hours(31 * 24 - 1));
        let (start, end) = Month::parse("2026-02").unwrap().bounds(chrono_tz::UTC);
        assert_eq!((start, end), (utc("2026-02-01T00:00:00Z"), utc("2026-03-01T00:00:00Z")));
    }

    #[test]
    fn month_starting_in_a_spring_forward_gap() {
        // Paraguay moved its clocks from 00:00 (UTC−4) to 01:00 (UTC−3) on Sunday 2017-10-01: local midnight
        // never happened, October began at 01:00−03 = 04:00Z.
        let tz = chrono_tz::America::Asuncion;
        let (start, _) = Month::parse("2017-10").unwrap().bounds(tz);
        assert_eq!(start, utc("2017-10-01T04:00:00Z"));
        let (_, end) = Month::parse("2017-09").unwrap().bounds(tz);
        assert_eq!(end, start);
        assert_eq!(Month::containing(start, tz).to_string(), "2017-10");
        assert_eq!(Month::containing(start - Duration::seconds(1), tz).to_string(), "2017-09");
    }

    #[test]
    fn containing_uses_the_billing_zone() {
        let tz = DEFAULT_BILLING_TZ;
        assert_eq!(Month::containing(utc("2026-10-31T16:00:00Z"), tz).to_string(), "2026-11");
        assert_eq!(Month::containing(utc("2026-10-31T15:59:59Z"), tz).to_string(), "2026-10");
    }

    #[test]
    fn serde_as_string() {
        let m = Month::parse("2026-11").unwrap();
        assert_eq!(serde_json::to_string(&m).unwrap(), "\"2026-11\"");
        assert_eq!(serde_json::from_str::<Month>("\"2026-11\"").unwrap(), m);
        assert!(serde_json::from_str::<Month>("\"2026-13\"").is_err());
        assert!(serde_json::from_str::<Month>("\"0000-01\"").is_err(), "Deserialize is FromStr");
        assert!(serde_json::from_str::<Month>("202611").is_err());
    }

    proptest! {
        #[test]
        fn display_parse_round_trip_and_months_tile(year in 2000i32..=2100, month in 1u32..=12, tz_pick in 0usize..4) {
            let tz = [DEFAULT_BILLING_TZ, chrono_tz::UTC, chrono_tz::Europe::Berlin, chrono_tz::America::Asuncion][tz_pick];
            let m = Month::new(year, month).unwrap();
            prop_assert_eq!(Month::parse(&m.to_string()).unwrap(), m);
            prop_assert_eq!(serde_json::from_value::<Month>(serde_json::to_value(m).unwrap()).unwrap(), m);
            prop_assert_eq!(m.next().prev(), m);
            prop_assert!(m.next() > m);
            let (start, end) = m.bounds(tz);
            prop_assert_eq!(m.next().bounds(tz).0, end);
            prop_assert!(end - start >= Duration::hours(28 * 24 - 1) && end - start <= Duration::hours(31 * 24 + 1));
            prop_assert_eq!(Month::containing(start, tz), m);
            prop_assert_eq!(Month::containing(end - Duration::seconds(1), tz), m);
        }

        /// Any year and month the `YYYY-MM` shape can spell parses exactly when it is a month of 2000-01 ..=
        /// 2100-12, and then displays back as typed; every other string is refused.
        #[test]
        fn parses_exactly_the_months_of_the_range(year in 0u32..=9999, month in 0u32..=99) {
            let s = format!("{year:04}-{month:02}");
            let in_range = (2000..=2100).contains(&year) && (1..=12).contains(&month);
            match Month::parse(&s) {
                Ok(m) => {
                    prop_assert!(in_range, "{} accepted", s);
                    prop_assert_eq!(m.to_string(), s.clone());
                    prop_assert_eq!((m.year(), m.month()), (year as i32, month));
                    prop_assert!((FIRST_MONTH..=LAST_MONTH).contains(&m));
                }
                Err(e) => {
                    prop_assert!(!in_range, "{} refused", s);
                    let range_only = (1..=12).contains(&month);
                    prop_assert_eq!(matches!(e, MonthParseError::OutOfRange(_)), range_only);
                }
            }
            prop_assert_eq!(serde_json::from_value::<Month>(serde_json::Value::String(s.clone())).is_ok(), in_range);
        }

        #[test]
        fn arbitrary_strings_parse_only_as_displayed(s in ".{0,9}") {
            if let Ok(m) = Month::parse(&s) {
                prop_assert_eq!(m.to_string(), s);
            }
        }
    }
}
