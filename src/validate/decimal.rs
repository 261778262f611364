//! Decimals as the API reads them: JSON strings (so no float rounds an amount) in one shape, each field within
//! a [`DecimalRange`] whose JSON Schema pattern is derived from the same bounds the check uses.

use std::sync::LazyLock;

use regex::Regex;
use rust_decimal::Decimal;
use serde::Deserialize;

use crate::money::thousands;

/// A decimal as the API reads one: not negative (no amount typed is), an integer part without leading zeros (at
/// most 15 digits), at most 10 decimals.
pub const DECIMAL_PATTERN: &str = r"^(0|[1-9][0-9]{0,14})(\.[0-9]{1,10})?$";
/// The most decimals a typed amount may carry (the fraction of [`DECIMAL_PATTERN`]).
const SCALE: usize = 10;

static DECIMAL: LazyLock<Regex> = LazyLock::new(|| Regex::new(DECIMAL_PATTERN).expect("a valid pattern"));

/// The values a decimal field takes: from `min` (excluded when `min_exclusive`) to `max` (included), whole
/// bounds, written with at most `decimals` decimals (`None`: as many as [`DECIMAL_PATTERN`] allows). One constant
/// per rule, read by the check and by the OpenAPI document ([`DecimalRange::pattern`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecimalRange {
    pub min: u64,
    pub min_exclusive: bool,
    pub max: u64,
    pub decimals: Option<u32>,
}

impl DecimalRange {
    /// `[min, max]`.
    pub const fn closed(min: u64, max: u64) -> Self {
        DecimalRange { min, min_exclusive: false, max, decimals: None }
    }

    /// `(min, max]`.
    pub const fn above(min: u64, max: u64) -> Self {
        DecimalRange { min, min_exclusive: true, max, decimals: None }
    }

    /// The range written with at most `decimals` decimals (money: 2, fen); more are refused, not rounded.
    pub const fn with_decimals(self, decimals: u32) -> Self {
        DecimalRange { decimals: Some(decimals), ..self }
    }

    /// The most decimals a value of the range may be written with.
    fn scale(&self) -> usize {
        self.decimals.map_or(SCALE, |d| (d as usize).min(SCALE))
    }

    /// Whether `v` is in the range and, for a range with a number of decimals, written with no more (as typed:
    /// `5.10` has two).
    pub fn contains(&self, v: Decimal) -> bool {
        let (min, max) = (Decimal::from(self.min), Decimal::from(self.max));
        let decimals_ok = self.decimals.is_none_or(|d| v.scale() <= d);
        (if self.min_exclusive { v > min } else { v >= min }) && v <= max && decimals_ok
    }

    /// "between 0 and 1,000,000" / "more than 0 and at most 5" / "… with at most 2 decimals", for messages.
    pub fn describe(&self) -> String {
        let (min, max) = (thousands(&self.min.to_string()), thousands(&self.max.to_string()));
        let bounds = if self.min_exclusive {
            format!("more than {min} and at most {max}")
        } else {
            format!("between {min} and {max}")
        };
        match self.decimals {
            Some(d) => format!("{bounds}, with at most {d} decimals"),
            None => bounds,
        }
    }

    /// The strings of [`DECIMAL_PATTERN`] whose value is in the range, as an anchored regex: what JSON Schema
    /// cannot say of a string with `minimum`/`maximum`, it says with a pattern.
    pub fn pattern(&self) -> String {
        let scale = self.scale();
        // no decimals at all: no fraction, not even `.0`
        let (any_fraction, zero_fraction) = match scale {
            0 => (String::new(), String::new()),
            _ => (format!(r"(\.[0-9]{{1,{scale}}})?"), format!(r"(\.0{{1,{scale}}})?")),
        };
        let mut alternatives = Vec::new();
        // the integer part below `max` takes any fraction; at `min` (excluded) only a fraction that is not zero
        let first_whole = if self.min_exclusive { self.min + 1 } else { self.min };
        if self.max > first_whole {
            alternatives.push(format!("{}{any_fraction}", integers(first_whole, self.max - 1)));
        }
        if self.min_exclusive && self.min < self.max && scale > 0 {
            let non_zero: Vec<String> =
                (0..scale).map(|z| format!("0{{{z}}}[1-9][0-9]{{0,{}}}", scale - 1 - z)).collect();
            alternatives.push(format!(r"{}\.(?:{})", self.min, non_zero.join("|")));
        }
        if self.max >= first_whole || (self.min_exclusive && self.min < self.max && scale > 0) {
            alternatives.push(format!("{}{zero_fraction}", self.max));
        }
        format!("^(?:{})$", alternatives.join("|"))
    }

    /// `v` if it is in the range, else the field's message.
    pub fn check(&self, field: &str, v: Decimal) -> Result<Decimal, super::Invalid> {
        if self.contains(v) {
            Ok(v)
        } else {
            Err(super::Invalid::new(field, format!("must be {}, got {v}", self.describe())))
        }
    }
}

/// A regex (a group) for the whole numbers `lo..=hi` written without leading zeros.
fn integers(lo: u64, hi: u64) -> String {
    let mut parts = Vec::new();
    let (lo_len, hi_len) = (lo.to_string().len(), hi.to_string().len());
    for len in lo_len..=hi_len {
        let smallest = if len == 1 { 0 } else { 10u64.pow(len as u32 - 1) };
        let largest = 10u64.saturating_pow(len as u32) - 1;
        let (a, b) = (lo.max(smallest), hi.min(largest));
        if a <= b {
            parts.push(same_length(a.to_string().as_bytes(), b.to_string().as_bytes()));
        }
    }
    format!("(?:{})", parts.join("|"))
}

/// A regex for the digit strings of one length from `lo` to `hi` (both that long, `lo <= hi`).
fn same_length(lo: &[u8], hi: &[u8]) -> String {
    let (l, h) = (lo[0] as char, hi[0] as char);
    let rest = lo.len() - 1;
    if rest == 0 {
        return if l == h { l.to_string() } else { format!("[{l}-{h}]") };
    }
    if l == h {
        return format!("{l}{}", same_length(&lo[1..], &hi[1..]));
    }
    let (lo_rest, hi_rest) = (&lo[1..], &hi[1..]);
    let lo_min = lo_rest.iter().all(|c| *c == b'0');
    let hi_max = hi_rest.iter().all(|c| *c == b'9');
    let mut parts = Vec::new();
    // the leading digits that take every tail; the edge digits take the tails from or up to `lo`/`hi`
    let (first_full, last_full) =
        (if lo_min { l } else { (l as u8 + 1) as char }, if hi_max { h } else { (h as u8 - 1) as char });
    if !lo_min {
        parts.push(format!("{l}{}", same_length(lo_rest, &vec![b'9'; rest])));
    }
    if first_full <= last_full {
        let lead = if first_full == last_full { first_full.to_string() } else { format!("[{first_full}-{last_full}]") };
        parts.push(format!("{lead}[0-9]{{{rest}}}"));
    }
    if !hi_max {
        parts.push(format!("{h}{}", same_length(&vec![b'0'; rest], hi_rest)));
    }
    format!("(?:{})", parts.join("|"))
}

/// A decimal read from a JSON string of [`DECIMAL_PATTERN`]: a JSON number (which a client may have rounded
/// through a float) or any other spelling (`1e3`, `1_000`, `+5`, `007`) is refused.
struct Text(Decimal);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        use serde::de::Error;
        let s = String::deserialize(d)?;
        parse_text(&s).map(Text).map_err(D::Error::custom)
    }
}

/// A decimal typed as text, by the API's one rule ([`DECIMAL_PATTERN`]); the message says what is accepted.
fn parse_text(s: &str) -> Result<Decimal, String> {
    if !DECIMAL.is_match(s) {
        return Err(format!(
            "`{}` is not a decimal: send a string such as \"1234.56\" (not negative, no exponent, no leading \
             zeros, at most {SCALE} decimals)",
            s.escape_debug()
        ));
    }
    s.parse().map_err(|e: rust_decimal::Error| e.to_string())
}

/// A decimal a form field holds, read as the API reads a JSON one: the value, or the field's message.
pub fn parse(field: &str, s: &str) -> Result<Decimal, super::Invalid> {
    parse_text(s).map_err(|m| super::Invalid::new(field, m))
}

/// `#[serde(deserialize_with = "…::decimal")]` for a `Decimal` field.
pub fn decimal<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Decimal, D::Error> {
    Text::deserialize(d).map(|t| t.0)
}

/// For an `Option<Decimal>` field (with `#[serde(default)]`): absent or `null` is `None`.
pub fn optional_decimal<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Decimal>, D::Error> {
    Option::<Text>::deserialize(d).map(|o| o.map(|t| t.0))
}

/// For an `Option<Vec<Decimal>>` field (with `#[serde(default)]`).
pub fn optional_decimals<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<Decimal>>, D::Error> {
    Option::<Vec<Text>>::deserialize(d).map(|o| o.map(|v| v.into_iter().map(|t| t.0).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const RANGES: [DecimalRange; 9] = [
        DecimalRange::above(0, 10_000_000_000).with_decimals(2),
        DecimalRange::closed(1, 10).with_decimals(0),
        DecimalRange::closed(0, 1_000_000),
        DecimalRange::closed(0, 1_000_000_000),
        DecimalRange::above(0, 10_000_000_000),
        DecimalRange::closed(1, 10),
        DecimalRange::above(0, 5),
        DecimalRange::above(0, 1),
        DecimalRange::closed(37, 4_215),
    ];

    fn agrees(r: &DecimalRange, s: &str) -> Result<(), String> {
        let pattern = Regex::new(&r.pattern()).unwrap();
        let by_check = DECIMAL.is_match(s) && r.contains(s.parse::<Decimal>().unwrap());
        if pattern.is_match(s) == by_check {
            Ok(())
        } else {
            Err(format!("{s:?} in {r:?}: pattern {} says {}, the check {by_check}", r.pattern(), !by_check))
        }
    }

    #[test]
    fn patterns_agree_with_the_bounds_on_the_edges() {
        let edges = [
            "0",
            "0.0",
            "0.0000000000",
            "0.0000000001",
            "0.00000000001",
            "1",
            "1.0",
            "0.5",
            "0.9999999999",
            "5",
            "5.0",
            "5.0000000001",
            "4.9999999999",
            "9",
            "10",
            "10.0",
            "10.01",
            "11",
            "36",
            "37",
            "37.5",
            "4215",
            "4215.0",
            "4215.1",
            "4216",
            "999999",
            "999999.9999999999",
            "1000000",
            "1000000.0",
            "1000000.1",
            "1000001",
            "999999999",
            "1000000000",
            "1000000001",
            "9999999999.9",
            "10000000000",
            "10000000000.1",
            "-1",
            "-0",
            "00",
            "01",
            "1.",
            ".5",
            "1e3",
            "",
        ];
        for r in &RANGES {
            for s in edges {
                agrees(r, s).unwrap();
            }
        }
    }

    #[test]
    fn numbers_and_other_spellings_are_refused() {
        let read = |json: &str| serde_json::from_str::<Text>(json).map(|t| t.0);
        assert_eq!(read(r#""12.50""#).unwrap(), Decimal::new(1250, 2));
        for bad in ["12.5", "0", r#""1e3""#, r#""1_000""#, r#""+5""#, r#""007""#, r#"" 1""#, r#""1.""#, "null"] {
            assert!(read(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn patterns_agree_with_the_bounds(s in "-?(0|[1-9][0-9]{0,11})(\\.[0-9]{1,11})?|0{0,2}[0-9]{1,3}|[0-9]{1,2}(\\.[0-9]{1,3})?", r in 0..RANGES.len()) {
            agrees(&RANGES[r], &s).map_err(TestCaseError::fail)?;
        }
    }
}
