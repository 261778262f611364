//! The words of the rate-by-hand form: key, zh-CN, en.

use super::Word;

pub const WORDS: &[Word] = &[
    ("rates.manual.title", "或手工设定费率", "Or set a rate by hand"),
    ("rates.manual.rate", "费率（元/卡时）", "Rate (¥ per card-hour)"),
    ("rates.manual.save", "保存手工费率", "Save the rate"),
];
