//! The portal's words in zh-CN and en: one table of keys, the language of a request (`?lang=`, then the `lang`
//! cookie the switch leaves, then `Accept-Language`), and the cookie that keeps a choice. The language type is the
//! statements' own ([`crate::export::Lang`]), so a page and its PDF speak alike.

use axum::extract::{FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::Response;

pub use crate::export::Lang;

/// A word a page prints: key, zh-CN, en.
use super::words::Word;

/// The tables of words: the shared ones here, and each section's own beside its handlers (one owner per table).
const TABLES: &[&[Word]] = &[
    WORDS,
    super::words::admin::WORDS,
    super::words::adjustments::WORDS,
    super::words::budgets::WORDS,
    super::words::rates::WORDS,
    super::words::tco::WORDS,
    super::words::manual::WORDS,
    super::words::field_errors::WORDS,
    super::words::reports::WORDS,
    super::words::nodes::WORDS,
    super::words::layout::WORDS,
];

/// The words every section shares.
const WORDS: &[Word] = &[
    ("app", "GPU 成本核算", "GPU cost accounting"),
    ("nav.home", "首页", "Home"),
    ("nav.bills", "账单", "Bills"),
    ("nav.idle", "闲置浪费", "Idle waste"),
    ("nav.reports", "报表", "Reports"),
    ("nav.health", "采集健康", "Ingest health"),
    ("nav.nodes", "节点", "Nodes"),
    ("logout", "退出登录", "Log out"),
    ("signed_in_as", "当前用户", "Signed in as"),
    ("lang.switch", "English", "中文"),
    ("not_found", "页面不存在", "Page not found"),
    ("error", "出错了", "Something went wrong"),
    ("month", "月份", "Month"),
    ("status", "状态", "Status"),
    ("status.open", "未结账", "open"),
    ("status.closed", "已结账", "closed"),
    ("team", "团队", "Team"),
    ("owner", "负责人", "Owner"),
    ("total", "合计", "Total"),
    ("teams", "团队", "Teams"),
    ("card_hours", "卡时", "Card-hours"),
    ("effective_card_hours", "有效卡时", "Effective card-hours"),
    ("allocated", "已分配", "Allocated"),
    ("unallocated", "未分配成本", "Unallocated cost"),
    ("unallocated_share", "未分配分摊", "Unallocated share"),
    ("platform_kept", "平台承担", "Kept by the platform"),
    ("capacity_cost", "容量成本", "Capacity cost"),
    ("restated", "追溯调整", "Restated"),
    ("forecast", "本月预测", "Forecast for the month"),
    ("vs_previous", "较上月", "Change vs previous month"),
    ("allocation_rate", "分配率", "Allocation rate"),
    ("utilization", "利用率", "Utilization"),
    ("effective_rate", "有效率", "Effective rate"),
    ("bills.title", "月度账单", "Monthly bills"),
    ("bills.month", "月账单", "Bills of the month"),
    ("bills.statement", "团队结算单", "Team statement"),
    ("download.csv", "下载 CSV", "Download CSV"),
    ("download.pdf", "下载 PDF", "Download PDF"),
    ("download.month_csv", "下载本月账单 CSV", "Download the month's CSV"),
    ("download.month_pdf", "下载本月结算单 PDF", "Download the month's PDF"),
    ("download.month_xlsx", "下载本月工作簿", "Download the month's workbook (xlsx)"),
    ("bills.closed_at", "结账时间", "Closed at"),
    ("bills.policy_shown", "本页数字的计费政策：", "Figures under the bill policy: "),
    (
        "bills.draft_note",
        "（草稿：结账前可换另一政策查看）",
        "(a draft: look at it under another policy before closing)",
    ),
    ("bills.show_policy", "按此政策查看", "Show under this policy"),
    ("coverage.title", "数据覆盖", "Data coverage"),
    ("coverage.cluster", "集群", "Cluster"),
    ("coverage.hours", "有数据的小时 / 本月小时", "Hours with data / hours of the month"),
    ("coverage.share", "覆盖率", "Covered"),
    ("coverage.span", "首个与最后一个有数据的小时", "First and last hour with data"),
    ("close.title", "结账", "Close the month"),
    ("close.link", "结账…", "Close this month…"),
    ("close.frozen", "结账后以下数字将被冻结，不再变化：", "Closing freezes these figures for good:"),
    ("close.mode", "计费方式", "Bill mode"),
    ("close.unallocated", "未分配成本", "Unallocated cost"),
    ("close.reason", "未就绪时的结账理由", "Reason to close although not ready"),
    ("close.submit", "确认结账", "Close the month"),
    ("close.preview", "按所选政策预览", "Preview under the chosen policy"),
    ("close.policy_shown", "以下数字的计费政策：", "The figures below are under: "),
    (
        "close.figures_changed",
        "所选政策下的数字与页面之前显示的不同，未结账。请核对下面按所选政策重新计算的数字，再确认结账。",
        "Not closed: the figures under the chosen policy differ from those shown. Check the figures below, now under the chosen policy, and confirm again.",
    ),
    ("close.fix_nodes", "在节点页设置 GPU 型号与卡数…", "Set GPU models and cards on the nodes page…"),
    ("close.blockers", "尚未就绪：", "Not ready yet:"),
    ("close.ready", "本月数据完整，可以结账。", "The month is complete and can be closed."),
    ("close.cannot", "只能结账已结束的月份。", "Only an ended month can be closed."),
    ("close.choose", "结账前请选择", "Choose one to close the month"),
    (
        "close.give_reason",
        "本月数据尚未就绪：如仍要结账，请填写理由",
        "The month is not ready: give a reason to close it anyway",
    ),
    ("close.not_ended", "{month} 尚未结束", "{month} has not ended yet"),
    ("form.nul", "不能包含 NUL 字符", "must not contain NUL characters"),
    ("form.too_long", "最多 {max} 个字符", "at most {max} characters"),
    ("home.overview", "本月概览", "The month at a glance"),
    ("home.team", "团队首页", "Team home"),
    ("budget", "预算", "Budget"),
    ("spent", "已花费", "Spent"),
    ("trend", "12 个月趋势", "12-month trend"),
    ("by_namespace", "按命名空间与 GPU 型号", "By namespace and GPU model"),
    ("namespace", "命名空间", "Namespace"),
    ("gpu_model", "GPU 型号", "GPU model"),
    ("gpu_hours", "卡时", "GPU-hours"),
    ("effective_gpu_hours", "有效卡时", "Effective GPU-hours"),
    ("idle.title", "闲置 Pod", "Idle pods"),
    ("idle.per_month", "每月 ¥", "¥ per month"),
    ("idle.total", "每月浪费合计", "Waste per month, total"),
    ("idle.threshold", "利用率阈值（%）", "Utilization threshold (%)"),
    ("idle.filter", "筛选", "Filter"),
    ("idle.none", "没有闲置 Pod。", "No idle pods."),
    ("pod", "Pod", "Pod"),
    ("cluster", "集群", "Cluster"),
    ("cards", "卡数", "Cards"),
    ("all", "全部", "all"),
    ("low_eff.title", "低效 Pod", "Low-efficiency pods"),
    ("wasted_gpu_hours", "浪费卡时", "Wasted GPU-hours"),
    ("downloads", "下载", "Downloads"),
    ("health.title", "采集健康", "Ingest health"),
    ("health.watermark", "水位线", "Watermark"),
    ("health.lag", "延迟（小时）", "Lag (hours)"),
    ("health.last_error", "最近错误", "Last error"),
    ("health.unmetered", "未计量占比（近 24 小时）", "Unmetered share (last 24 h)"),
    ("health.unknown", "未知资源", "Unknown resources"),
    ("health.non_finite", "非有限样本", "Non-finite samples"),
    ("health.node_issues", "节点问题", "Node issues"),
    ("health.failed", "失败窗口", "Failed windows"),
    ("health.workers", "采集进程", "Workers"),
    ("health.queued", "待采集", "Queued"),
    ("health.leased", "采集中", "Held"),
    ("health.batch", "批大小", "Batch"),
    ("health.failures_in_row", "连续失败", "Failures in a row"),
    ("health.retry_at", "重试于", "retry at"),
    ("health.recovered", "已恢复于", "Recovered at"),
    ("health.bridged", "补齐卡时（近 24 小时）", "Bridged GPU-hours (last 24 h)"),
    ("health.ksm_gaps", "kube-state-metrics 采集中断", "kube-state-metrics gaps"),
    ("health.gap_bridged", "已补齐", "bridged"),
    ("health.gap_unbilled", "未计费", "not billed"),
    ("health.pods", "个 Pod", "pods"),
    ("none", "无", "none"),
    ("tiers.title", "效率分级与排名", "Efficiency tiers and ranking"),
    ("tier", "等级", "Tier"),
    ("tier.golden", "金牌（≥70%）", "golden (≥ 70 %)"),
    ("tier.silver", "银牌（50–70%）", "silver (50–70 %)"),
    ("tier.bronze", "铜牌（<50%）", "bronze (< 50 %)"),
    ("rank", "排名", "Rank"),
    ("cost", "成本", "Cost"),
    ("day", "日期", "Day"),
    ("heatmap", "利用率热力图（团队 × 日）", "Utilization heatmap (team × day)"),
    ("show", "显示", "Show"),
];

/// The word `key` in `lang`: the pages' tables, else the glossary's term of that key (`term.model`,
/// `report.unit_cost`: the words a page shares with the CSV, the workbook and the PDF); an unknown key prints itself
/// (a missing word shows on the page, never a panic).
pub fn t(lang: Lang, key: &'static str) -> &'static str {
    TABLES
        .iter()
        .flat_map(|t| t.iter())
        .find(|(k, ..)| *k == key)
        .map(|(_, zh, en)| lang.pick(zh, en))
        .or_else(|| crate::glossary::lookup(key).map(|(zh, en)| lang.pick(zh, en)))
        .unwrap_or(key)
}

/// A glossary term as a heading or a label prints it: in English its first letter upper-case (the glossary writes
/// `input tokens` for a cell of a file; a column of a page reads `Input tokens`), in Chinese as it is.
pub fn heading(lang: Lang, key: &'static str) -> String {
    let word = t(lang, key);
    let mut chars = word.chars();
    match (lang, chars.next()) {
        (Lang::En, Some(first)) => first.to_uppercase().chain(chars).collect(),
        _ => word.to_string(),
    }
}

/// The cookie the language switch leaves.
const COOKIE: &str = "lang";

/// `?lang=` of a query string, when it names a language.
fn from_query(query: Option<&str>) -> Option<Lang> {
    url::form_urlencoded::parse(query?.as_bytes()).find(|(k, _)| k == "lang").and_then(|(_, v)| Lang::parse(&v))
}

fn from_cookie(headers: &HeaderMap) -> Option<Lang> {
    headers.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|c| {
        let (k, v) = c.trim().split_once('=')?;
        (k == COOKIE).then(|| Lang::parse(v)).flatten()
    })
}

/// The first language of `Accept-Language` the portal speaks (weights aside: browsers list the preferred first).
fn from_accept(headers: &HeaderMap) -> Option<Lang> {
    let v = headers.get(header::ACCEPT_LANGUAGE)?.to_str().ok()?;
    v.split(',').find_map(|part| Lang::parse(part.split(';').next().unwrap_or("")))
}

/// The language of a request: the switch (`?lang=`), the cookie it left, the browser's, else zh-CN.
pub fn lang_of(query: Option<&str>, headers: &HeaderMap) -> Lang {
    from_query(query).or_else(|| from_cookie(headers)).or_else(|| from_accept(headers)).unwrap_or_default()
}

/// The language of a page request.
pub struct PageLang(pub Lang);

impl<S: Send + Sync> FromRequestParts<S> for PageLang {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(PageLang(lang_of(parts.uri.query(), &parts.headers)))
    }
}

/// The link to this page in language `code` (`en`, `zh-CN`): the language first, then the page's `query` but for
/// its own `lang` (`month=2026-10&lang=zh` → `?lang=en&month=2026-10`).
pub fn switch_href(query: &str, code: &str) -> String {
    let mut out = url::form_urlencoded::Serializer::new(String::new());
    out.append_pair("lang", code);
    for (k, v) in url::form_urlencoded::parse(query.as_bytes()).filter(|(k, _)| k != "lang") {
        out.append_pair(&k, &v);
    }
    format!("?{}", out.finish())
}

/// `zh-CN` or `en`, for `<html lang>`.
pub fn html_code(lang: Lang) -> &'static str {
    lang.pick("zh-CN", "en")
}

/// Keeps a language chosen with `?lang=` in a cookie, so the next pages speak it too.
pub async fn remember(req: Request, next: Next) -> Response {
    let chosen = from_query(req.uri().query());
    let mut res = next.run(req).await;
    if let Some(lang) = chosen {
        let code = lang.pick("zh", "en");
        let cookie = format!("{COOKIE}={code}; Path=/; Max-Age=31536000; SameSite=Lax");
        if let Ok(v) = HeaderValue::from_str(&cookie) {
            res.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    /// The pages' own words keep the glossary's choices (`crate::glossary`): 卡时, never "GPU 小时" (found on the
    /// team lead's home and the low-utilization report), 追溯调整, never "重述", 未上架, never "未提供".
    #[test]
    fn the_pages_words_keep_the_glossarys_choices() {
        let words: Vec<&Word> = TABLES.iter().flat_map(|t| t.iter()).collect();
        assert!(words.len() > 100);
        for (key, zh, _) in words {
            assert!(!zh.contains("GPU 小时") && !zh.contains("重述") && !zh.contains("未提供"), "{key}: {zh}");
        }
    }

    #[test]
    fn the_switch_beats_the_cookie_beats_the_browser() {
        let browser_en = headers(&[(header::ACCEPT_LANGUAGE, "en-US,en;q=0.9,zh-CN;q=0.5")]);
        assert_eq!(lang_of(None, &browser_en), Lang::En);
        assert_eq!(lang_of(Some("lang=zh-CN"), &browser_en), Lang::Zh);
        let cookie_zh = headers(&[(header::ACCEPT_LANGUAGE, "en"), (header::COOKIE, "a=b; lang=zh")]);
        assert_eq!(lang_of(None, &cookie_zh), Lang::Zh);
        assert_eq!(lang_of(Some("x=1&lang=en"), &cookie_zh), Lang::En);
        assert_eq!(lang_of(Some("lang=fr"), &headers(&[(header::ACCEPT_LANGUAGE, "fr, en;q=0.3")])), Lang::En);
        assert_eq!(lang_of(None, &HeaderMap::new()), Lang::Zh);
    }

    #[test]
    fn the_switch_keeps_the_query_but_its_language() {
        assert_eq!(switch_href("", "en"), "?lang=en");
        assert_eq!(switch_href("month=2026-10&lang=zh", "en"), "?lang=en&month=2026-10");
        assert_eq!(switch_href("lang=en&team=vision&lang=en&sort=pod", "zh-CN"), "?lang=zh-CN&team=vision&sort=pod");
        // what the query said stays said, encoded again
        assert_eq!(switch_href("from=2026-10-01+08%3A00&x=%26", "en"), "?lang=en&from=2026-10-01+08%3A00&x=%26");
    }

    #[test]
    fn every_key_is_in_the_table_once() {
        let all: Vec<&Word> = TABLES.iter().flat_map(|t| t.iter()).collect();
        assert!(all.len() > 50);
        for (i, (k, ..)) in all.iter().enumerate() {
            assert!(all[i + 1..].iter().all(|(o, ..)| o != k), "{k} twice");
        }
        assert_eq!(t(Lang::En, "nav.bills"), "Bills");
        assert_eq!(t(Lang::Zh, "nav.bills"), "账单");
    }

    #[test]
    fn the_glossary_answers_the_keys_the_pages_do_not_have() {
        assert_eq!(t(Lang::Zh, "term.cost_per_million_tokens"), "每百万词元成本（元）");
        assert_eq!(t(Lang::En, "term.input_tokens"), "input tokens");
        assert_eq!(heading(Lang::En, "term.input_tokens"), "Input tokens");
        assert_eq!(heading(Lang::Zh, "term.input_tokens"), "输入词元");
        // a page's own word wins over the glossary's of the same key (the tiers page names the thresholds)
        assert_eq!(t(Lang::Zh, "tier.golden"), "金牌（≥70%）");
        assert_eq!(t(Lang::En, "no.such.key"), "no.such.key");
    }
}
