//! What people type into a form, read the way a spreadsheet writes it (issue 33: "60,000", "2027/1/1" and "80%"
//! were refused by forms while the CMDB import took such formats): amounts with thousands separators and a yuan
//! sign, percentages with `%`, dates with `/` or `.` or none (as [`super::lenient_date`] reads the CMDB's). Each
//! reduces the text to the API's one spelling and reads it with the API's rule, so a form and the API accept the
//! same values and refuse with the field named; the messages' words are the glossary's `form.*`.

use chrono::NaiveDate;
use rust_decimal::Decimal;

use super::Invalid;

/// An amount as typed: `60000`, `60,000`, `60,000.50`, `¥60,000`, `￥ 60，000.5`, `60000元`. Separators must group
/// the integer part by three (`6,0000` is refused, not guessed); spaces around are ignored. Not negative.
pub fn amount(field: &str, s: &str) -> Result<Decimal, Invalid> {
    let refuse =
        || Invalid::new(field, format!("`{}` is not a number: type one such as 60,000 or 1234.56", s.escape_debug()));
    let t = s.trim();
    let t = t.strip_prefix(['¥', '￥']).unwrap_or(t).trim_start();
    let t = t.strip_suffix('元').unwrap_or(t).trim_end();
    let t = t.replace('，', ",");
    let (int, frac) = match t.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (t.as_str(), None),
    };
    let plain_int = if int.contains(',') {
        let groups: Vec<&str> = int.split(',').collect();
        let ok = (1..=3).contains(&groups[0].len())
            && groups[1..].iter().all(|g| g.len() == 3)
            && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_digit()));
        if !ok {
            return Err(refuse());
        }
        groups.concat()
    } else {
        int.to_string()
    };
    let plain = match frac {
        Some(f) => format!("{plain_int}.{f}"),
        None => plain_int,
    };
    super::decimal::parse(field, &plain).map_err(|_| refuse())
}

/// A share as typed: `80%`, `80 %`, `80％`, `12.5%` (a percentage, divided by 100) or `0.8` (a share as the API
/// takes it). Not negative.
pub fn share(field: &str, s: &str) -> Result<Decimal, Invalid> {
    let refuse =
        || Invalid::new(field, format!("`{}` is not a percentage: type one such as 80% or 0.8", s.escape_debug()));
    let t = s.trim();
    match t.strip_suffix(['%', '％']) {
        Some(p) => amount(field, p.trim_end()).map(|v| v / Decimal::ONE_HUNDRED).map_err(|_| refuse()),
        None => amount(field, t).map_err(|_| refuse()),
    }
}

/// A date as typed: `2027-01-01`, `2027/1/1`, `2027.1.1`, `20270101` (the CMDB import's rule).
pub fn date(field: &str, s: &str) -> Result<NaiveDate, Invalid> {
    super::lenient_date(field, s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal_macros::dec;

    #[test]
    fn amounts_as_spreadsheets_write_them() {
        for (typed, v) in [
            ("60000", dec!(60000)),
            ("60,000", dec!(60000)),
            ("60,000.50", dec!(60000.50)),
            ("¥60,000", dec!(60000)),
            ("￥ 60，000.5", dec!(60000.5)),
            (" 1,234,567.89 ", dec!(1234567.89)),
            ("60000元", dec!(60000)),
            ("0.5", dec!(0.5)),
        ] {
            assert_eq!(amount("amount", typed).unwrap(), v, "{typed}");
        }
        for bad in ["6,0000", "60,00", ",600", "-5", "1e3", "abc", "", "60,000.5.1", "¥"] {
            let e = amount("amount", bad).unwrap_err();
            assert_eq!(e.field, "amount", "{bad}");
            assert!(e.message.contains("60,000"), "{bad}: {}", e.message);
        }
    }

    #[test]
    fn shares_and_dates() {
        assert_eq!(share("t", "80%").unwrap(), dec!(0.8));
        assert_eq!(share("t", "80 ％").unwrap(), dec!(0.8));
        assert_eq!(share("t", "12.5%").unwrap(), dec!(0.125));
        assert_eq!(share("t", "0.8").unwrap(), dec!(0.8));
        assert!(share("t", "80%%").is_err() && share("t", "-80%").is_err());
        assert_eq!(date("d", "2027/1/1").unwrap(), NaiveDate::from_ymd_opt(2027, 1, 1).unwrap());
        assert_eq!(date("d", "2027-01-01").unwrap(), NaiveDate::from_ymd_opt(2027, 1, 1).unwrap());
        assert!(date("d", "2027/13/1").is_err());
    }
}
