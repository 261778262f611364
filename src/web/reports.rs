//! The management reports: utilization per day with its team × day heatmap, efficiency tiers and the team ranking
//! for a month (`?month=YYYY-MM`, default the current), the low-utilization top N ([`waste_top`]), fragmentation
//! and oversubscription ([`capacity`]). All but the top N are cluster-wide (a team lead gets the not-found page, as
//! from the API); the top N shows a team lead its own teams' pods.

mod capacity;
mod waste_top;

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::routing::get;

use super::capability::PageGlobalReader;
use super::fmt::{card_hours_f64, percent, yuan};
use super::i18n::{self, Lang, PageLang, t};
use super::layout::{Chrome, MonthQuery, PageError};
use crate::usecase::state::AppState;
use crate::usecase::{reports, tiers};
use crate::web::extract::PageUser;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/reports/utilization", get(utilization))
        .route("/reports/tiers", get(tiers_page))
        // the ranking is the tiers page: teams by efficiency, each with its tier
        .route("/reports/ranking", get(tiers_page))
        .route("/reports/low-utilization", get(waste_top::low_utilization))
        .route("/reports/fragmentation", get(capacity::fragmentation))
        .route("/reports/oversubscription", get(capacity::oversubscription))
}

/// The reports' own words.
pub(super) const WORDS: &[i18n::Word] = &[
    ("low_util.title", "低利用率 Top N", "Low-utilization top N"),
    (
        "low_util.note",
        "按浪费 GPU 小时排名（不按百分比）；金额按区间结束时的费率。",
        "Ranked by wasted GPU-hours, not by percent; money at the rates in force at the range's end.",
    ),
    ("low_util.none", "区间内没有浪费 GPU 小时的 Pod。", "No pod wasted GPU-hours in the range."),
    ("low_util.by_team", "按团队（所列 Pod）", "By team (the pods listed)"),
    ("low_util.wasted_amount", "区间浪费 ¥", "Wasted ¥ in range"),
    ("low_util.per_month", "按月折算 ¥/月", "At a month's pace ¥/month"),
    ("low_util.pods", "Pod 数", "Pods"),
    ("top", "Top N", "Top N"),
    ("from", "起", "From"),
    ("to", "止", "To"),
    ("range", "区间", "Range"),
    ("rate", "费率", "Rate"),
    ("unmetered_gpu_hours", "未计量 GPU 小时", "Unmetered GPU-hours"),
    ("frag.title", "碎片化", "Fragmentation"),
    ("frag.hour", "小时", "Hour"),
    ("frag.free_cards", "空闲卡", "Free cards"),
    ("frag.largest", "单节点最大空闲整卡", "Largest free block on one node"),
    ("frag.share", "碎片化程度", "Fragmentation"),
    (
        "frag.note",
        "碎片化 = 1 − 单节点最大空闲整卡 ÷ 全部空闲卡：0 表示空闲卡集中在一个节点上，越接近 1 越分散。",
        "Fragmentation = 1 − largest free block ÷ free cards: 0 when all free cards sit on one node, towards 1 when they are scattered.",
    ),
    ("frag.none", "还没有存储的小时。", "No hour is stored yet."),
    ("node", "节点", "Node"),
    ("allocated_cards", "已分配卡", "Allocated cards"),
    ("free_whole_cards", "空闲整卡", "Free whole cards"),
    ("oversub.title", "超卖", "Oversubscription"),
    (
        "oversub.note",
        "承诺算力 ÷ 物理卡（按时间加权）：时间片副本承诺整卡，MPS 副本 1/副本数，HAMi gpucores/100，MIG g/切片数。显存同理：承诺显存 ÷ 卡的显存（≥ 表示部分承诺未知）。旁边是同一批卡的忙碌度：比值 3 而卡只忙 20 % 没问题，卡忙 90 % 就是争抢。",
        "Cards' worth promised ÷ physical cards, time-weighted: a time-slicing replica promises a whole card, an MPS replica 1/replicas, HAMi gpucores/100, MIG g/slices. Memory likewise: memory promised ÷ the cards' memory (≥: some promise unknown). Beside them, how busy the same cards were: a ratio of 3 on cards 20 % busy is fine, on cards 90 % busy it is contention.",
    ),
    ("oversub.by_cluster", "按集群", "By cluster"),
    ("oversub.by_model", "按 GPU 型号", "By GPU model"),
    ("oversub.by_node", "按节点", "By node"),
    ("oversub.physical", "物理卡时", "Physical card-hours"),
    ("oversub.held", "占用卡时", "Held card-hours"),
    ("oversub.promised", "承诺卡时", "Promised card-hours"),
    ("oversub.ratio", "超卖比", "Compute ratio"),
    ("oversub.memory_ratio", "显存超卖比", "Memory ratio"),
    ("oversub.busy", "忙碌度", "Busy"),
    ("oversub.none", "区间内没有容量数据。", "No capacity stored in the range."),
    ("oversub.over", "超卖", "oversubscribed"),
    (
        "oversub.over_key",
        "底色标出的行：承诺超过物理卡（超卖）。",
        "Shaded rows: more promised than the physical cards (oversubscribed).",
    ),
    ("oversub.billing", "时间片副本的计费", "How time-sliced replicas were billed"),
    (
        "oversub.billing_note",
        "各月结算单上的计费设置与超额回收（整卡计费收回的超出卡成本部分，由平台单列）。",
        "The settings and the over-recovery on each month's statement (what whole-card billing recovered above the cards' cost, the platform's own line).",
    ),
    ("oversub.policies", "计费设置", "Settings"),
    ("oversub.over_recovery", "超额回收", "Over-recovery"),
    ("oversub.fraction", "按份额", "fraction"),
    ("oversub.whole_card", "整卡", "whole card"),
    ("oversub.from", "自", "from"),
    ("oversub.all_fraction", "全部按份额计费（默认）", "all by fraction (the default)"),
    ("unmetered_card_hours", "未计量卡时", "Unmetered card-hours"),
    ("all_clusters", "全部集群", "all clusters"),
];

/// One link of the reports' own navigation.
pub struct ReportLink {
    pub href: String,
    pub label: &'static str,
    pub active: bool,
}

/// The reports a caller may open, linked from every report page (`templates/report_nav.html`): a team lead
/// only the top N of its teams.
fn report_nav(lang: Lang, user: &PageUser, active: &str, month: Option<&str>) -> Vec<ReportLink> {
    let month_q = month.map(|m| format!("?month={m}")).unwrap_or_default();
    let all: [(&str, &'static str, bool); 5] = [
        ("/reports/utilization", "utilization", true),
        ("/reports/tiers", "tiers.title", true),
        ("/reports/low-utilization", "low_util.title", false),
        ("/reports/fragmentation", "frag.title", false),
        ("/reports/oversubscription", "oversub.title", false),
    ];
    let global = user.principal.scope().is_global();
    all.iter()
        // the low-utilization list is the only one scoped to teams; the others are cluster-wide
        .filter(|(href, ..)| global || *href == "/reports/low-utilization")
        .map(|(href, key, monthly)| ReportLink {
            href: if *monthly { format!("{href}{month_q}") } else { (*href).to_string() },
            label: t(lang, key),
            active: *href == active,
        })
        .collect()
}

/// A query field as typed: empty is "not given".
fn given(s: &str) -> Option<&str> {
    Some(s.trim()).filter(|s| !s.is_empty())
}

/// A time field of a report's form (`from`, `to`, `hour`): empty is not given; otherwise the API's formats.
fn time_field(field: &str, s: &str) -> Result<Option<crate::validate::TimeInput>, crate::validate::Invalid> {
    given(s).map(|v| crate::validate::TimeInput::parse(field, v)).transpose()
}

/// A report form's messages, field by field (what the page prints beside each field; 422 when any).
#[derive(Debug, Default)]
pub struct FieldErrors(Vec<crate::validate::FieldError>);

impl FieldErrors {
    fn push(&mut self, e: crate::validate::FieldError) {
        self.0.push(e);
    }

    /// Keeps `r`'s value, or its message.
    fn take<T>(&mut self, r: Result<T, crate::validate::Invalid>) -> Option<T> {
        r.map_err(|e| self.push(e)).ok()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The message of `field`, empty when it has none.
    pub fn of(&self, field: &str) -> &str {
        self.0.iter().find(|e| e.field == field).map_or("", |e| e.message.as_str())
    }
}

pub struct DayRow {
    pub day: String,
    pub gpu_hours: String,
    pub allocation_rate: String,
    pub utilization: String,
    pub effective_rate: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "report_utilization.html")]
pub struct UtilizationPage {
    pub c: Chrome,
    pub links: Vec<ReportLink>,
    pub month: String,
    pub totals: DayRow,
    pub days: Vec<DayRow>,
    pub heatmap_svg: String,
}

fn day_row(day: String, f: &crate::waste::Figures) -> DayRow {
    DayRow {
        day,
        gpu_hours: card_hours_f64(f.gpu_hours),
        allocation_rate: percent(f.allocation_rate),
        utilization: percent(f.utilization),
        effective_rate: percent(f.effective_rate),
    }
}

async fn utilization(
    State(s): State<AppState>,
    PageGlobalReader(user): PageGlobalReader,
    PageLang(lang): PageLang,
    Query(q): Query<MonthQuery>,
) -> Result<UtilizationPage, PageError> {
    let month = q.month(&s)?;
    let scope = user.principal.scope();
    let report = reports::month_utilization(&s.cases, &scope, month).await?;
    let map = tiers::heatmap(&s.cases, &scope, month).await?;
    let cols: Vec<String> = map.days.iter().map(|d| d.format("%d").to_string()).collect();
    let rows: Vec<String> = map.teams.iter().map(|(t, _)| t.clone()).collect();
    let cells: Vec<Vec<Option<f64>>> = map.teams.iter().map(|(_, v)| v.clone()).collect();
    Ok(UtilizationPage {
        c: Chrome::new(&user, lang, "/reports/utilization", format!("{} {month}", t(lang, "utilization"))),
        links: report_nav(lang, &user, "/reports/utilization", Some(&month.to_string())),
        month: month.to_string(),
        totals: day_row(t(lang, "total").into(), &report.totals),
        days: report.days.iter().map(|d| day_row(d.day.to_string(), &d.figures)).collect(),
        heatmap_svg: super::chart::heatmap(&rows, &cols, &cells),
    })
}

pub struct TierRow {
    pub rank: usize,
    pub team: String,
    pub gpu_hours: String,
    pub effective_gpu_hours: String,
    pub utilization: String,
    pub cost: String,
    pub tier: &'static str,
    pub tier_word: &'static str,
}

#[derive(Template, WebTemplate)]
#[template(path = "report_tiers.html")]
pub struct TiersPage {
    pub c: Chrome,
    pub links: Vec<ReportLink>,
    pub month: String,
    pub rows: Vec<TierRow>,
}

/// The tiers page is also the ranking: teams by efficiency, each with its tier.
async fn tiers_page(
    State(s): State<AppState>,
    PageGlobalReader(user): PageGlobalReader,
    PageLang(lang): PageLang,
    Query(q): Query<MonthQuery>,
) -> Result<TiersPage, PageError> {
    let month = q.month(&s)?;
    let ranking = reports::team_ranking(&s.cases, &user.principal.scope(), month).await?;
    Ok(TiersPage {
        c: Chrome::new(&user, lang, "/reports/utilization", format!("{} {month}", t(lang, "tiers.title"))),
        links: report_nav(lang, &user, "/reports/tiers", Some(&month.to_string())),
        month: month.to_string(),
        rows: ranking
            .iter()
            .map(|r| {
                let tier = tiers::Tier::of(r.utilization);
                TierRow {
                    rank: r.rank,
                    team: r.team.clone(),
                    gpu_hours: card_hours_f64(r.gpu_hours),
                    effective_gpu_hours: card_hours_f64(r.effective_gpu_hours),
                    utilization: percent(r.utilization),
                    cost: yuan(r.cost),
                    tier: tier.map_or("none", tiers::Tier::as_str),
                    tier_word: t(
                        lang,
                        tier.map_or("none", |t| match t {
                            tiers::Tier::Golden => "tier.golden",
                            tiers::Tier::Silver => "tier.silver",
                            tiers::Tier::Bronze => "tier.bronze",
                        }),
                    ),
                }
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Role;
    use crate::web::layout::tests::user;

    #[test]
    fn the_report_nav_offers_what_the_role_may_open() {
        let links = report_nav(Lang::En, &user(Role::Viewer, &[]), "/reports/tiers", Some("2026-10"));
        let hrefs: Vec<&str> = links.iter().map(|l| l.href.as_str()).collect();
        assert_eq!(
            hrefs,
            [
                "/reports/utilization?month=2026-10",
                "/reports/tiers?month=2026-10",
                "/reports/low-utilization",
                "/reports/fragmentation",
                "/reports/oversubscription"
            ]
        );
        assert_eq!(
            links.iter().filter(|l| l.active).map(|l| l.label).collect::<Vec<_>>(),
            ["Efficiency tiers and ranking"]
        );
        // a team lead: only the top N of its own teams
        let lead = report_nav(Lang::Zh, &user(Role::TeamLead, &["vision"]), "/reports/low-utilization", None);
        assert_eq!(
            lead.iter().map(|l| (l.href.as_str(), l.label, l.active)).collect::<Vec<_>>(),
            [("/reports/low-utilization", "低利用率 Top N", true)]
        );
    }

    #[test]
    fn form_fields_keep_their_messages() {
        let mut errors = FieldErrors::default();
        assert_eq!(errors.take(time_field("from", "  ")), Some(None), "empty is not given");
        assert!(errors.take(time_field("to", "2026-11-01")).flatten().is_some());
        assert!(errors.is_empty());
        assert_eq!(errors.take(time_field("from", "soon")), None);
        assert!(errors.of("from").contains("is not a time"), "{}", errors.of("from"));
        assert_eq!(errors.of("to"), "");
    }
}
