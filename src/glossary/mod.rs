//! The one glossary (术语表) of cardhour's domain words in zh-CN and en, below every face and every export: the
//! pages (`web`), the PDF statements, the CSV and the workbooks (`export`), and the close blockers (`export::blocker`)
//! all print a term from here, so one thing has one name everywhere.
//!
//! The terms live in a data file (`terms.tsv`: key, zh-CN, en), read once. Why a module of its own rather than the
//! portal's word table: that table is the pages' (`web::i18n`, with each section's labels beside its handlers),
//! and `export` must not import `web`; the domain terms both print are here, a layer both may import, and the
//! portal's table looks a key up here first ([`lookup`]), so a page and its PDF cannot drift apart.
//!
//! Choices made once (SPEC §3, §6 and the zh pages as they were): 卡时 for GPU-hours (never "GPU 小时"),
//! 追溯调整 for a restatement (never "重述"), 未上架 for capacity not offered (never "未提供"), the `unassigned`
//! team 未分配 and the unallocated cost 未分配成本 (so the two never read alike), showback 展示成本 and chargeback
//! 分摊计费, sharing kinds in words (整卡, MIG 切片, 时间片共享, MPS 共享, HAMi 虚拟卡).

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::billing::{BillMode, UnallocatedPolicy};

/// The language of a page or a statement. zh-CN is the default: the statements go to a Chinese finance team (SPEC
/// §1 names its readers in Chinese); `en` is for everyone else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Lang {
    #[default]
    Zh,
    En,
}

/// The languages' codes as the API names them (`?lang=`).
pub const LANGS: [&str; 2] = ["zh", "en"];

impl Lang {
    /// Exactly one of [`LANGS`] (the API's rule; the document lists them).
    pub fn from_code(s: &str) -> Option<Lang> {
        match s {
            "zh" => Some(Lang::Zh),
            "en" => Some(Lang::En),
            _ => None,
        }
    }

    /// `zh` or `en` (also `zh-CN`, `zh-cn`, `en-US`…, as a browser or a command line says it); anything else is
    /// refused.
    pub fn parse(s: &str) -> Option<Lang> {
        let s = s.trim().to_ascii_lowercase();
        match s.split(['-', '_']).next() {
            Some("zh") => Some(Lang::Zh),
            Some("en") => Some(Lang::En),
            _ => None,
        }
    }

    /// The text of `zh` or `en`, whichever this is.
    pub fn pick<'a>(self, zh: &'a str, en: &'a str) -> &'a str {
        match self {
            Lang::Zh => zh,
            Lang::En => en,
        }
    }

    /// `zh` or `en`.
    pub fn code(self) -> &'static str {
        self.pick("zh", "en")
    }
}

/// The terms file, compiled in.
const TERMS: &str = include_str!("terms.tsv");

/// Every term: key → (zh-CN, en).
fn table() -> &'static HashMap<&'static str, (&'static str, &'static str)> {
    static TABLE: OnceLock<HashMap<&'static str, (&'static str, &'static str)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        TERMS
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .filter_map(|l| {
                let mut parts = l.split('\t');
                Some((parts.next()?, (parts.next()?, parts.next()?)))
            })
            .collect()
    })
}

/// A term's two languages, when the glossary has `key`.
pub fn lookup(key: &str) -> Option<(&'static str, &'static str)> {
    table().get(key).copied()
}

/// The term `key` in `lang`; an unknown key prints itself (a missing term shows, never a panic — the tests hold
/// every key used to the file).
pub fn term(lang: Lang, key: &str) -> String {
    lookup(key).map_or_else(|| key.to_string(), |(zh, en)| lang.pick(zh, en).to_string())
}

/// `template` with each `{name}` replaced by its value.
pub fn fill(template: &str, values: &[(&str, String)]) -> String {
    let mut out = template.to_string();
    for (name, value) in values {
        out = out.replace(&format!("{{{name}}}"), value);
    }
    out
}

/// The term `key` in `lang` with its placeholders filled.
pub fn phrase(lang: Lang, key: &str, values: &[(&str, String)]) -> String {
    fill(&term(lang, key), values)
}

/// A term of a family (`kind.hami`, `anomaly.non_finite_sample`) for a code as stored; a code the glossary does not
/// know prints as stored (a new kind shows rather than vanishes).
fn coded(lang: Lang, family: &str, code: &str) -> String {
    lookup(&format!("{family}.{code}")).map_or_else(|| code.to_string(), |(zh, en)| lang.pick(zh, en).to_string())
}

/// A resource kind in words: 整卡, MIG 切片, 时间片共享, MPS 共享, HAMi 虚拟卡.
pub fn kind(lang: Lang, kind: &str) -> String {
    coded(lang, "kind", kind)
}

/// An ingest-health anomaly code in words (`non_finite_sample` → 非有限样本…).
pub fn anomaly(lang: Lang, code: &str) -> String {
    coded(lang, "anomaly", code)
}

/// A line type of the CSV and the workbook (`usage`, `restatement`, `capacity`…) in words.
pub fn line_type(lang: Lang, code: &str) -> String {
    coded(lang, "line", code)
}

/// An efficiency tier (`golden`, `silver`, `bronze`) in words.
pub fn tier(lang: Lang, code: &str) -> String {
    coded(lang, "tier", code)
}

/// A bill mode: 展示成本 / 分摊计费.
pub fn mode(lang: Lang, mode: BillMode) -> String {
    coded(lang, "mode", mode.as_str())
}

/// An unallocated policy, short (a cell): 平台承担 / 按用量比例分摊.
pub fn unallocated(lang: Lang, policy: UnallocatedPolicy) -> String {
    coded(lang, "unallocated", policy.as_str())
}

/// An unallocated policy as a sentence: 未分配成本由平台承担.
pub fn unallocated_sentence(lang: Lang, policy: UnallocatedPolicy) -> String {
    coded(lang, "unallocated_sentence", policy.as_str())
}

/// A GPU model as printed: the model nothing named is 未知型号, any other as its pricing key.
pub fn model(lang: Lang, model: &str) -> String {
    if model == "unknown" { term(lang, "model.unknown") } else { model.to_string() }
}

/// A team as printed where one cell names it: its display name, and its id after it only when they differ
/// ("视觉组（vision）"; never "nlp nlp"); the `unassigned` team in words.
pub fn team_label(lang: Lang, id: &str, name: &str) -> String {
    let shown = team_name(lang, id, name);
    if shown.is_empty() {
        return id.to_string();
    }
    if id == "unassigned" || name.eq_ignore_ascii_case(id) {
        return shown;
    }
    match lang {
        Lang::Zh => format!("{shown}（{id}）"),
        Lang::En => format!("{shown} ({id})"),
    }
}

/// A team's display name: the `unassigned` team in words (its stored name is its id), any other as named.
pub fn team_name(lang: Lang, id: &str, name: &str) -> String {
    if id == "unassigned" && (name == id || name.is_empty()) { term(lang, "team.unassigned") } else { name.to_string() }
}

/// A yes/no cell.
pub fn yes_no(lang: Lang, v: bool) -> String {
    term(lang, if v { "term.yes" } else { "term.no" })
}

/// ASCII words a zh-CN page or statement may print besides data (ids, names, models, numbers): product and unit
/// names that have no Chinese form finance uses.
pub const ZH_ALLOWED_WORDS: &[&str] = &[
    "GPU",
    "MIG",
    "MPS",
    "HAMi",
    "Pod",
    "DCGM",
    "CSV",
    "PDF",
    "ID",
    "NaN",
    "UTC",
    "kube-state-metrics",
    "Prometheus",
    "MiB",
    // the serving engines' product names (SPEC §9)
    "vLLM",
    "SGLang",
    "TGI",
    "Triton",
    // the queueing systems whose quotas are read (SPEC §10)
    "Kueue",
    "Volcano",
];

/// The ASCII words of `text` (runs of letters, with the digits, `-`, `_`, `.`, `/` and `:` inside them) that are
/// neither in [`ZH_ALLOWED_WORDS`] nor in `data` (ids and names the text prints as data), nor units: what a zh-CN
/// text must not hold. Pure digits and number formats (`12,345.67`, `2026-11`) are not words.
/// A statement's or a line's id (`2026-11/nlp`, `L-809083bb78a4`, `ADJ-12`: `crate::ledger::line_id`): a code,
/// printed as it is in every language, never a word.
fn is_line_id(w: &str) -> bool {
    if let Some((month, team)) = w.split_once('/') {
        let month_like = month.len() == 7
            && month.chars().enumerate().all(|(i, c)| if i == 4 { c == '-' } else { c.is_ascii_digit() });
        return month_like
            && !team.is_empty()
            && team.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'));
    }
    match w.split_once('-') {
        Some(("L" | "R" | "U" | "C" | "UC" | "K", hex)) => {
            hex.len() == 12 && hex.chars().all(|c| c.is_ascii_hexdigit())
        }
        Some(("ADJ", n)) => !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()),
        _ => false,
    }
}

pub fn english_words<'t>(text: &'t str, data: &[&str]) -> Vec<&'t str> {
    let allowed = |w: &str| {
        ZH_ALLOWED_WORDS.contains(&w)
            || is_line_id(w)
            || data.iter().any(|d| *d == w || d.split(|c: char| !c.is_ascii_alphanumeric()).any(|p| p == w))
    };
    text.split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | ':')))
        .map(|w| w.trim_matches(|c: char| matches!(c, '-' | '_' | '.' | '/' | ':')))
        .filter(|w| w.chars().any(|c| c.is_ascii_alphabetic()))
        .filter(|w| !allowed(w))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_three_columns_every_key_once_both_languages() {
        let mut seen = std::collections::HashSet::new();
        for (n, line) in TERMS.lines().enumerate().filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#')) {
            let parts: Vec<&str> = line.split('\t').collect();
            assert_eq!(parts.len(), 3, "line {}: {line:?}", n + 1);
            assert!(parts.iter().all(|p| !p.trim().is_empty() && p.trim() == *p), "line {}: {line:?}", n + 1);
            assert!(seen.insert(parts[0]), "{} twice", parts[0]);
            // a zh term holds no English word but the allowed ones and its placeholders
            let zh = parts[1];
            let placeholders: Vec<&str> = zh.split('{').skip(1).filter_map(|p| p.split('}').next()).collect::<Vec<_>>();
            let words = english_words(zh, &placeholders);
            assert!(words.is_empty(), "{}: English in zh: {words:?}", parts[0]);
        }
        assert!(seen.len() > 100);
    }

    #[test]
    fn one_word_for_one_thing() {
        // the choices of issue 33: 卡时, 追溯调整, 未上架, 未分配 (team) vs 未分配成本 (cost)
        assert_eq!(term(Lang::Zh, "term.gpu_hours"), "卡时");
        assert_eq!(term(Lang::Zh, "term.card_hours"), "卡时");
        assert_eq!(term(Lang::Zh, "term.restated"), "追溯调整");
        assert_eq!(line_type(Lang::Zh, "restatement"), "追溯调整");
        assert!(term(Lang::Zh, "term.not_offered").starts_with("未上架"));
        assert_eq!(team_label(Lang::Zh, "unassigned", "unassigned"), "未分配");
        assert_eq!(term(Lang::Zh, "term.unallocated"), "未分配成本");
        for t in table().values() {
            assert!(!t.0.contains("GPU 小时") && !t.0.contains("重述") && !t.0.contains("未提供"), "{t:?}");
        }
        assert_eq!(mode(Lang::Zh, BillMode::Showback), "展示成本");
        assert_eq!(mode(Lang::En, BillMode::Chargeback), "chargeback");
        assert_eq!(unallocated(Lang::Zh, UnallocatedPolicy::KeptByPlatform), "平台承担");
        assert_eq!(kind(Lang::Zh, "hami"), "HAMi 虚拟卡");
        assert_eq!(kind(Lang::Zh, "new-kind"), "new-kind", "an unknown code prints as stored");
        assert_eq!(anomaly(Lang::Zh, "non_finite_sample"), "非有限样本（NaN 或无穷大，已跳过）");
        assert_eq!(model(Lang::Zh, "unknown"), "未知型号");
        assert_eq!(tier(Lang::Zh, "golden"), "金牌");
        assert_eq!(term(Lang::En, "no.such.key"), "no.such.key");
    }

    #[test]
    fn a_team_is_named_once() {
        assert_eq!(team_label(Lang::Zh, "nlp", "nlp"), "nlp", "never `nlp nlp`");
        assert_eq!(team_label(Lang::Zh, "nlp", "NLP"), "NLP", "a name equal but for case is printed once");
        assert_eq!(team_label(Lang::Zh, "vision", "视觉组"), "视觉组（vision）");
        assert_eq!(team_label(Lang::En, "vision", "视觉组"), "视觉组 (vision)");
        assert_eq!(team_label(Lang::En, "unassigned", "unassigned"), "unassigned");
        assert_eq!(team_name(Lang::Zh, "unassigned", "unassigned"), "未分配");
    }

    #[test]
    fn placeholders_are_filled() {
        let s = phrase(Lang::Zh, "blocker.no_watermark", &[("cluster", "c1".into()), ("month_end", "x".into())]);
        assert_eq!(s, "集群 c1：尚无完整水位线，月末为 x");
    }

    #[test]
    fn english_words_are_found_outside_the_allowlist() {
        let text = "视觉组（vision） 2026-11 ¥12,345.67 GPU 型号 A100-80GB 12.5 % showback nlp-prod Asia/Shanghai";
        assert_eq!(english_words(text, &["vision", "A100-80GB", "nlp-prod", "Asia/Shanghai"]), ["showback"]);
        assert!(english_words("卡时 1,234.000 · 2026-11-01 00:00", &[]).is_empty());
        assert_eq!(english_words("(unallocated share)", &[]), ["unallocated", "share"]);
    }

    #[test]
    fn languages_parse() {
        assert_eq!(Lang::parse("zh-CN"), Some(Lang::Zh));
        assert_eq!(Lang::parse("EN"), Some(Lang::En));
        assert_eq!(Lang::parse("fr"), None);
        assert_eq!(Lang::from_code("zh-CN"), None);
        assert_eq!(Lang::default(), Lang::Zh);
    }
}
