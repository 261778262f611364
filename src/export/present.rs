//! How a statement prints its figures and words from layout 3 on, in zh-CN and en: money as `¥12,345.67`
//! (negative `−¥1,234.00`), card-hours with 3 decimals, rates with 4, percentages with 1, kinds and line types
//! in words. Pure: the PDF and the portal's statement page print the same strings.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use crate::money::{Money, RatePerCardHour};

pub use crate::glossary::{LANGS, Lang};

/// `d` with `dp` decimals (rounded half away from zero) and thousands separated by commas; the sign as a true
/// minus (U+2212) in front of `prefix`: `group(-1234.5, 2, "¥")` = `−¥1,234.50`. Never `−0.00`: a value that
/// rounds to zero prints without a sign.
pub fn group(d: Decimal, dp: u32, prefix: &str) -> String {
    let mut r = d.round_dp_with_strategy(dp, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
    r.rescale(dp);
    let negative = r.is_sign_negative() && !r.is_zero();
    let plain = r.abs().to_string();
    let (int, frac) = plain.split_once('.').unwrap_or((&plain, ""));
    let mut out = String::with_capacity(plain.len() + 6);
    if negative {
        out.push('\u{2212}');
    }
    out.push_str(prefix);
    out.push_str(&crate::money::thousands(int));
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    out
}

/// `¥12,345.67`, `−¥1,234.00`.
pub fn yuan(m: Money) -> String {
    group(m.as_decimal(), 2, "¥")
}

/// Card-hours: `1,234.500`.
pub fn card_hours(d: Decimal) -> String {
    group(d, 3, "")
}

/// Card-hours from a measured `f64` (utilization figures): as [`card_hours`]; a non-finite value prints `–`.
pub fn card_hours_f64(x: f64) -> String {
    Decimal::from_f64_retain(x).map_or_else(|| "–".to_string(), card_hours)
}

/// A rate per card-hour: `¥12.5000`; unpriced in words.
pub fn rate(r: Option<RatePerCardHour>, lang: Lang) -> String {
    r.map_or_else(|| lang.pick("未定价", "unpriced").to_string(), |r| group(r.as_decimal(), 4, "¥"))
}

/// A unit cost of inference (¥ per million tokens, per thousand requests): `¥13.3333`, 4 decimals as the report
/// rounds it; none (no tokens, no requests) as `–`.
pub fn unit_yuan(d: Option<Decimal>) -> String {
    d.map_or_else(|| "–".to_string(), |d| group(d, crate::billing::unit_cost::UNIT_COST_DP, "¥"))
}

/// A serving engine by its name (`vllm` → vLLM, `sglang` → SGLang), from the glossary; an unknown code as stored.
pub fn engine(lang: Lang, code: &str) -> String {
    crate::glossary::lookup(&format!("engine.{code}"))
        .map_or_else(|| code.to_string(), |(zh, en)| lang.pick(zh, en).to_string())
}

/// A whole count (tokens, requests) with thousands grouped: `3,000,000`.
pub fn count(n: i64) -> String {
    group(Decimal::from(n), 0, "")
}

/// A ratio (0–1) as a percentage with one decimal: `61.3 %`; none as `–`.
pub fn percent(r: Option<f64>) -> String {
    match r.and_then(Decimal::from_f64_retain) {
        Some(d) => format!("{} %", group(d * Decimal::ONE_HUNDRED, 1, "")),
        None => "–".to_string(),
    }
}

/// `part` as a percentage of `whole`, one decimal, computed in decimals (`1095.50` of `1000.00` = `109.6 %`);
/// `–` when `whole` is 0.
pub fn share(part: Money, whole: Money) -> String {
    if whole.is_zero() {
        return "–".into();
    }
    format!("{} %", group(part.as_decimal() / whole.as_decimal() * Decimal::ONE_HUNDRED, 1, ""))
}

/// A change between two amounts: `+¥1,234.00 (+12.3 %)`, `−¥5.00 (−0.5 %)`; no percentage when the earlier is 0.
pub fn change(now: Money, before: Money) -> String {
    let delta = now - before;
    let sign = if delta.as_decimal() > Decimal::ZERO { "+" } else { "" };
    let mut s = format!("{sign}{}", yuan(delta));
    if !before.is_zero() {
        let pct = delta.as_decimal() / before.as_decimal().abs() * Decimal::ONE_HUNDRED;
        let p = group(pct, 1, "");
        let psign = if pct > Decimal::ZERO && !p.chars().all(|c| c == '0' || c == '.') { "+" } else { "" };
        s.push_str(&format!(" ({psign}{p} %)"));
    }
    s
}

/// An instant as a reader in the billing time zone reads it, to the minute, the zone named:
/// `2026-11-03 14:00 (Asia/Shanghai)`.
pub fn when(t: DateTime<Utc>, tz: chrono_tz::Tz) -> String {
    format!("{} ({})", t.with_timezone(&tz).format("%Y-%m-%d %H:%M"), tz.name())
}

/// A resource kind in words: whole cards, MIG slices, time-slicing, HAMi virtual cards (an unknown kind as
/// stored).
pub fn kind(kind: &str, lang: Lang) -> String {
    let words = match kind {
        "whole" => lang.pick("整卡", "Whole card"),
        "mig" => lang.pick("MIG 切片", "MIG slice"),
        "timeslice" => lang.pick("时间片共享", "Time-slicing share"),
        "mps" => lang.pick("MPS 共享", "MPS share"),
        "hami" => lang.pick("HAMi 虚拟卡", "HAMi virtual card"),
        "reservation" => lang.pick("预留", "Reservation"),
        "reservation_use" => lang.pick("保障内使用抵扣", "Used within the reservation (credit)"),
        other => other,
    };
    words.to_string()
}

/// A bill line's namespace cell: a reservation line's quota scope names its queue's kind (a namespace's quota
/// prints as the namespace).
pub fn scope(namespace: &str, lang: Lang) -> String {
    match namespace.split_once('/') {
        Some(("cluster_queue", q)) => format!("{} {q}", lang.pick("Kueue 队列", "ClusterQueue")),
        Some(("volcano_queue", q)) => format!("{} {q}", lang.pick("Volcano 队列", "Volcano queue")),
        _ => namespace.to_string(),
    }
}

/// Replica billing settings in one cell: `fraction` when none is set, else `cluster[/pool]:policy@from` joined
/// by `;` (a draft previewed under one policy: `*:whole_card@…`).
pub fn replica_settings(v: &[crate::billing::ReplicaPolicyVersion]) -> String {
    if v.is_empty() {
        return "fraction".into();
    }
    v.iter()
        .map(|p| match &p.pool {
            Some(pool) => format!("{}/{pool}:{}@{}", p.cluster, p.policy.as_str(), p.from),
            None => format!("{}:{}@{}", p.cluster, p.policy.as_str(), p.from),
        })
        .collect::<Vec<_>>()
        .join(";")
}

pub use crate::access::actor_name;

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal_macros::dec;

    #[test]
    fn money_has_the_yuan_sign_separators_and_two_decimals() {
        assert_eq!(yuan(Money::round_fen(dec!(12345.67))), "¥12,345.67");
        assert_eq!(yuan(Money::round_fen(dec!(-1234))), "\u{2212}¥1,234.00");
        assert_eq!(yuan(Money::round_fen(dec!(0))), "¥0.00");
        assert_eq!(yuan(Money::round_fen(dec!(999.999))), "¥1,000.00");
        assert_eq!(yuan(Money::round_fen(dec!(1234567890.1))), "¥1,234,567,890.10");
        assert_eq!(yuan(Money::round_fen(dec!(-0.001))), "¥0.00", "never −0.00");
    }

    #[test]
    fn quantities_have_fixed_decimals() {
        assert_eq!(card_hours(dec!(61)), "61.000");
        assert_eq!(card_hours(dec!(41.75)), "41.750");
        assert_eq!(card_hours(dec!(104.435000)), "104.435");
        assert_eq!(card_hours(dec!(12345.6785)), "12,345.679");
        assert_eq!(card_hours(dec!(-0.0001)), "0.000", "never −0.000");
        assert_eq!(card_hours_f64(f64::NAN), "–");
        assert_eq!(rate(RatePerCardHour::new(dec!(12.5)), Lang::Zh), "¥12.5000");
        assert_eq!(rate(None, Lang::En), "unpriced");
        assert_eq!(percent(Some(0.6133)), "61.3 %");
        assert_eq!(percent(None), "–");
    }

    #[test]
    fn changes_say_their_sign_and_share() {
        let m = |d: Decimal| Money::round_fen(d);
        assert_eq!(change(m(dec!(110)), m(dec!(100))), "+¥10.00 (+10.0 %)");
        assert_eq!(change(m(dec!(90)), m(dec!(100))), "\u{2212}¥10.00 (\u{2212}10.0 %)");
        assert_eq!(change(m(dec!(5)), m(dec!(0))), "+¥5.00");
        assert_eq!(change(m(dec!(5)), m(dec!(5))), "¥0.00 (0.0 %)");
        assert_eq!(share(m(dec!(1095.50)), m(dec!(1000))), "109.6 %");
        assert_eq!(share(m(dec!(1)), m(dec!(0))), "–");
    }

    #[test]
    fn kinds_and_languages_are_words() {
        assert_eq!(kind("hami", Lang::Zh), "HAMi 虚拟卡");
        assert_eq!(kind("timeslice", Lang::En), "Time-slicing share");
        assert_eq!(kind("whole", Lang::Zh), "整卡");
        assert_eq!(kind("mig", Lang::Zh), "MIG 切片");
        assert_eq!(kind("other", Lang::Zh), "other");
    }
}
