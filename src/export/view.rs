//! The statement view of layout 3: the statement, in one language, as a document of sections made of titles,
//! lines, notes and tables of finished strings — built from the statement and its extras alone, by pure code, so
//! the PDF and the portal's statement page render the same words and figures ([`super::present`] formats them).
//!
//! Layout 4 differs from layout 3 in words and times only ([`Style`]): times in the billing time zone, named; the
//! glossary's terms ([`crate::glossary`]: 追溯调整, 未分配成本, policies without their English codes); close blockers
//! in the reader's language; a team named once; sums on the teams table's total row. A layout-3 month keeps its
//! words and UTC times for good (`tests/fixtures/layout3/`).
//!
//! Layout 5 adds, beside a team's lines, its unit cost of inference per model ([`Statement::unit_cost_of`]: empty,
//! so nothing printed, before layout 5 and for a team without serving pods).

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;

use super::StatementExtras;
use super::present::{self, Lang, card_hours, card_hours_f64, change, percent, rate, yuan};
use crate::billing::TeamBill;
use crate::glossary;
use crate::ledger::frozen::{Coverage, IdleLine, UnitCostLine, UtilizationFigures};
use crate::ledger::{Layout, MonthStatus, Statement};
use crate::money::{Money, RatePerCardHour};

/// Who prepared a statement and when: for an open month (a draft) the reader who asked for it and the time it was
/// rendered; a closed month's is its close (who closed it, when), so its bytes never change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    pub by: String,
    pub at: DateTime<Utc>,
}

/// The statement as a document.
#[derive(Debug, Clone, PartialEq)]
pub struct StatementView {
    pub lang: Lang,
    /// On every page of an open month's statement (草稿 / DRAFT); `None` for a closed month.
    pub watermark: Option<String>,
    /// Each section starts a page: the finance summary, then one statement per team.
    pub sections: Vec<Section>,
    /// The page numbers' form: `{n} / {total}`.
    pub page_of: &'static str,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    /// Printed at the top of its continuation pages.
    pub running_head: String,
    pub blocks: Vec<Block>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Title(String),
    Line(String),
    /// Wrapped text; `warning` for what a reader must not miss (an unknown GPU model, capacity unknown).
    Note {
        text: String,
        warning: bool,
    },
    Table(Table),
    /// A bar chart of amounts, labelled with their values.
    Chart {
        title: String,
        bars: Vec<(String, Money)>,
    },
    /// Sign-off lines (prepared by, 审核, 批准).
    Approval(Vec<String>),
}

/// A table kept with its heading (a renderer never leaves the heading alone at a page's bottom).
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub heading: Option<String>,
    pub columns: Vec<Column>,
    pub rows: Vec<Vec<String>>,
    /// A last row set apart (sums).
    pub total: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub name: String,
    /// Share of the page's width, in points of an A4 landscape page's 762.
    pub width: f32,
    pub right: bool,
}

/// The model of cards no source named (metering's name for it): a listed problem on the statement.
const UNKNOWN_MODEL: &str = "unknown";

fn col(name: &str, width: f32, right: bool) -> Column {
    Column { name: name.to_string(), width, right }
}

/// What a layout prints a view in: its language, and from layout 4 on the glossary's words and the billing time
/// zone (a layout-3 month keeps the words and the UTC times it was frozen with).
#[derive(Debug, Clone, Copy)]
struct Style {
    lang: Lang,
    /// Layout 4 or later.
    v4: bool,
    /// Layout 5 or later.
    v5: bool,
    /// Layout 6 or later: the statement's id and each line's ([`crate::ledger::line_id`]).
    v6: bool,
    /// Layout 4: the zone its times print in (`None`: UTC, named).
    tz: Option<chrono_tz::Tz>,
}

impl Style {
    fn of(st: &Statement, extras: &StatementExtras, lang: Lang) -> Style {
        Style {
            lang,
            v4: st.layout >= Layout::V4,
            v5: st.layout >= Layout::V5,
            v6: st.layout >= Layout::V6,
            tz: extras.time_zone,
        }
    }

    fn l(&self, zh: &'static str, en: &'static str) -> &'static str {
        self.lang.pick(zh, en)
    }

    /// The glossary's term `key` from layout 4 on; before, the words layout 3 printed.
    fn word(&self, key: &str, v3_zh: &'static str, v3_en: &'static str) -> String {
        if self.v4 { glossary::term(self.lang, key) } else { self.l(v3_zh, v3_en).to_string() }
    }

    /// An instant to the minute: layout 3 in UTC (`2026-12-05 07:37 UTC`), layout 4 in the billing time zone,
    /// named (`2026-12-05 15:37 (Asia/Shanghai)`).
    fn time(&self, t: DateTime<Utc>) -> String {
        if self.v4 {
            present::when(t, self.tz.unwrap_or(chrono_tz::UTC))
        } else {
            t.format("%Y-%m-%d %H:%M UTC").to_string()
        }
    }

    /// The start of an hour (the coverage table): in UTC for layout 3, in the billing time zone for layout 4.
    fn hour(&self, t: DateTime<Utc>) -> String {
        match (self.v4, self.tz) {
            (true, Some(tz)) => t.with_timezone(&tz).format("%Y-%m-%d %H:00").to_string(),
            _ => t.format("%Y-%m-%d %H:00").to_string(),
        }
    }

    /// The zone's name (layout 4).
    fn zone(&self) -> &'static str {
        self.tz.unwrap_or(chrono_tz::UTC).name()
    }

    /// A GPU model: the one nothing named in words from layout 4 on.
    fn model(&self, model: &str) -> String {
        if self.v4 { glossary::model(self.lang, model) } else { model.to_string() }
    }

    /// A team where one cell names it: from layout 4 on its name, and its id only when they differ.
    fn team_name(&self, st: &Statement, team: &str) -> String {
        let name = team_name(st, team);
        if self.v4 { glossary::team_name(self.lang, team, name) } else { name.to_string() }
    }
}

/// The view of `st` for the teams `include` accepts, with `extras`, in `lang`.
pub fn statement_view(
    st: &Statement,
    include: impl Fn(&str) -> bool,
    extras: &StatementExtras,
    lang: Lang,
) -> StatementView {
    let l = |zh: &'static str, en: &'static str| lang.pick(zh, en);
    let style = Style::of(st, extras, lang);
    let teams: Vec<&str> = st.team_ids().into_iter().filter(|t| include(t)).collect();
    let mut sections = Vec::new();
    if extras.finance_summary {
        sections.push(summary(st, &teams, extras, style));
    }
    for team in &teams {
        sections.push(team_section(st, team, extras, style));
    }
    if sections.is_empty() {
        sections.push(Section {
            running_head: String::new(),
            blocks: vec![
                Block::Title(format!("{} {}", l("GPU 成本结算单", "GPU cost statement"), st.month)),
                Block::Line(l("本月没有您团队的结算单。", "No statement of your teams for this month.").into()),
            ],
        });
    }
    StatementView {
        lang,
        watermark: (st.status == MonthStatus::Open)
            .then(|| l("草稿 · 未结账，数字可能变化", "DRAFT · month open, figures may change").to_string()),
        sections,
        page_of: "{n} / {total}",
    }
}

fn status_words(st: &Statement, style: Style) -> String {
    let lang = style.lang;
    match (st.status, st.closed_at, &st.closed_by) {
        (MonthStatus::Closed, Some(at), Some(by)) => {
            format!("{} {} {}", lang.pick("已结账", "closed"), style.time(at), by)
        }
        (MonthStatus::Closed, ..) => lang.pick("已结账", "closed").into(),
        (MonthStatus::Open, ..) => lang.pick("草稿（未结账）", "draft (open)").into(),
    }
}

/// A bill mode in words.
pub fn mode_words(mode: crate::billing::BillMode, lang: Lang) -> &'static str {
    use crate::billing::BillMode;
    match mode {
        BillMode::Showback => lang.pick("展示成本（showback）", "showback (cost shown)"),
        BillMode::Chargeback => lang.pick("分摊计费（chargeback）", "chargeback (cost billed)"),
        BillMode::Reserved => lang.pick("预留配额计费（reserved quota）", "reserved quota (guarantees billed)"),
    }
}

/// An unallocated-cost policy in words.
pub fn unallocated_words(policy: crate::billing::UnallocatedPolicy, lang: Lang) -> &'static str {
    use crate::billing::UnallocatedPolicy;
    match policy {
        UnallocatedPolicy::KeptByPlatform => lang.pick("未分配成本由平台承担", "unallocated cost kept by the platform"),
        UnallocatedPolicy::SpreadProportionally => {
            lang.pick("未分配成本按用量比例分摊", "unallocated cost spread in proportion to usage")
        }
    }
}

fn policy_words(st: &Statement, style: Style) -> String {
    let (p, lang) = (&st.bills.policy, style.lang);
    let (mode, unallocated) = if style.v4 {
        (glossary::mode(lang, p.mode), glossary::unallocated_sentence(lang, p.unallocated))
    } else {
        (mode_words(p.mode, lang).to_string(), unallocated_words(p.unallocated, lang).to_string())
    };
    let mut words = format!("{mode}{}{unallocated}", lang.pick("；", "; "));
    if let Some(r) = &st.bills.replica_policies {
        words.push_str(lang.pick("；时间片副本：", "; time-sliced replicas: "));
        words.push_str(&replica_words(r, style));
    }
    words
}

/// The replica billing settings of the month in words (`fraction` where none is set).
fn replica_words(v: &[crate::billing::ReplicaPolicyVersion], style: Style) -> String {
    use crate::billing::ReplicaBilling;
    let lang = style.lang;
    let name = |p: ReplicaBilling| match p {
        ReplicaBilling::Fraction => style.word("replicas.fraction", "按份额计费（fraction）", "billed by fraction"),
        ReplicaBilling::WholeCard => {
            style.word("replicas.whole_card", "每个副本按整卡计费（whole card）", "each billed as a whole card")
        }
    };
    if v.is_empty() {
        return name(ReplicaBilling::Fraction);
    }
    v.iter()
        .map(|p| {
            let scope = p.pool.as_ref().map_or_else(|| p.cluster.clone(), |pool| format!("{}/{pool}", p.cluster));
            format!("{scope} {} {}", lang.pick("自", "from"), p.from) + &format!(" {}", name(p.policy))
        })
        .collect::<Vec<_>>()
        .join(lang.pick("，", ", "))
}

fn period(st: &Statement) -> String {
    let from = st.month.first_day();
    let to = st.month.next().first_day().pred_opt().unwrap_or(from);
    format!("{from} – {to}")
}

fn header_lines(st: &Statement, style: Style) -> Vec<Block> {
    let l = |zh: &'static str, en: &'static str| style.l(zh, en);
    let mut out = vec![
        Block::Line(format!(
            "{} {}   {} {}   {} {}",
            l("月份", "Month"),
            st.month,
            l("账期", "Period"),
            period(st),
            l("状态", "Status"),
            status_words(st, style)
        )),
        Block::Line(format!("{} {}", l("计费政策", "Policy"), policy_words(st, style))),
    ];
    if let Some(o) = &st.close_override {
        let text = if style.v4 {
            match style.lang {
                Lang::Zh => format!("本月在数据不完整时结账（由 {} 确认），原因：{}", o.by, o.reason),
                Lang::En => format!("Closed incomplete, by override of {}. Reason: {}", o.by, o.reason),
            }
        } else {
            format!(
                "{} {}. {} {}",
                l("本月在数据不完整时结账，由", "Closed incomplete, by override of"),
                o.by,
                l("原因：", "Reason:"),
                o.reason
            )
        };
        out.push(Block::Note { text, warning: true });
    }
    out
}

/// One line per cluster: how much of the month its data covers.
fn coverage_table(coverage: &[Coverage], style: Style) -> Option<Table> {
    if coverage.is_empty() {
        return None;
    }
    let l = |zh: &'static str, en: &'static str| style.l(zh, en);
    let hour = |t: Option<DateTime<Utc>>| t.map_or_else(|| "–".to_string(), |t| style.hour(t));
    let rows = coverage
        .iter()
        .map(|c| {
            let share = (c.hours_elapsed > 0).then(|| f64::from(c.hours_present) / f64::from(c.hours_elapsed));
            vec![
                c.cluster.clone(),
                hour(c.first_hour),
                hour(c.last_hour),
                c.hours_present.to_string(),
                c.hours_elapsed.to_string(),
                percent(share),
            ]
        })
        .collect();
    let heading = match (style.v4, style.lang) {
        (false, _) => l("数据覆盖（UTC 整点）", "Data coverage (UTC hours)").to_string(),
        (true, Lang::Zh) => format!("数据覆盖（{} 整点）", style.zone()),
        (true, Lang::En) => format!("Data coverage (hours in {})", style.zone()),
    };
    Some(Table {
        heading: Some(heading),
        columns: vec![
            col(l("集群", "Cluster"), 150.0, false),
            col(l("首个小时", "First hour"), 130.0, false),
            col(l("最后小时", "Last hour"), 130.0, false),
            col(l("已采集小时", "Hours present"), 100.0, true),
            col(l("已过小时", "Hours elapsed"), 100.0, true),
            col(l("覆盖率", "Coverage"), 80.0, true),
        ],
        rows,
        total: None,
    })
}

/// Capacity is unknown when no node capacity was seen: its cost and everything derived from it (unallocated,
/// platform kept) are then unknown, never a negative amount.
fn capacity_known(st: &Statement) -> bool {
    st.bills.capacity.iter().any(|c| c.card_hours > Decimal::ZERO)
}

fn summary(st: &Statement, teams: &[&str], extras: &StatementExtras, style: Style) -> Section {
    let lang = style.lang;
    let l = |zh: &'static str, en: &'static str| lang.pick(zh, en);
    let title =
        format!("{} {} — {}", l("GPU 成本结算单", "GPU cost statement"), st.month, l("财务汇总", "finance summary"));
    let mut blocks = vec![Block::Title(title.clone())];
    blocks.extend(header_lines(st, style));
    if let Some(t) = coverage_table(&extras.coverage, style) {
        blocks.push(Block::Table(t));
    }
    if let Some(o) = &st.close_override {
        for b in &o.blockers {
            let text = if style.v4 { super::blocker::words(b, lang, &|t| style.time(*t)) } else { b.to_string() };
            blocks.push(Block::Note { text: format!("– {text}"), warning: false });
        }
    }

    let b = &st.bills;
    let known = capacity_known(st);
    let unknown = l("未知（未采集到节点容量）", "unknown (no node capacity seen)");
    let m = |v: Money| if known { yuan(v) } else { unknown.to_string() };
    let mut rows = vec![
        vec![l("容量成本", "Capacity cost").to_string(), m(b.capacity_cost)],
        vec![l("已分配（各团队用量）", "Allocated (teams' usage)").to_string(), yuan(b.allocated)],
        vec![style.word("term.unallocated", "未分配", "Unallocated"), m(b.unallocated)],
    ];
    if let Some(n) = b.not_offered {
        rows.push(vec![l("未上架（平台承担）", "Not offered (kept by the platform)").to_string(), m(n)]);
    }
    rows.push(vec![l("平台承担", "Platform kept").to_string(), m(b.platform_kept)]);
    if let Some(over) = b.over_recovery {
        rows.push(vec![
            l("超额回收（副本按整卡计费）", "Over-recovery (replicas billed as whole cards)").to_string(),
            yuan(over),
        ]);
    }
    if style.v4
        && let Some(short) = b.capacity_shortfall
    {
        rows.push(vec![glossary::term(lang, "term.capacity_shortfall"), yuan(short)]);
    }
    if let Some(over) = b.over_commitment {
        rows.push(vec![glossary::term(lang, "term.over_commitment"), yuan(over)]);
    }
    blocks.push(Block::Table(Table {
        heading: Some(l("集群成本", "Cluster cost").into()),
        columns: vec![col(l("项目", "Item"), 260.0, false), col(l("金额", "Amount"), 150.0, true)],
        rows,
        total: None,
    }));
    if !known {
        blocks.push(Block::Note {
            text: l(
                "本月未采集到任何节点容量：容量成本、未分配与平台承担无法计算，不是负数。",
                "No node capacity was seen this month: capacity cost, unallocated and platform kept cannot be \
                 computed (they are not negative).",
            )
            .into(),
            warning: true,
        });
    }
    if let Some(f) = &extras.utilization {
        blocks.push(Block::Table(utilization_table(f, known, lang)));
    }

    let mut bars: Vec<(String, Money)> = teams.iter().map(|t| (style.team_name(st, t), st.team_total(t))).collect();
    bars.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let all = bars.len();
    bars.truncate(CHART_TEAMS);
    if !bars.is_empty() {
        let title = if bars.len() < all {
            match lang {
                Lang::Zh => format!("团队合计（元），最高的 {} 个（共 {all} 个）", bars.len()),
                Lang::En => format!("Team totals (CNY), the {} largest of {all}", bars.len()),
            }
        } else {
            l("团队合计（元）", "Team totals (CNY)").to_string()
        };
        blocks.push(Block::Chart { title, bars });
    }

    let previous = extras.previous.as_ref();
    let prev_head = previous.map_or_else(
        || l("上月", "Previous month").to_string(),
        |p| format!("{} {}", p.month, if p.closed { "" } else { l("（未结账）", " (open)") }).trim_end().to_string(),
    );
    let table = if style.v4 {
        teams_table_v4(st, teams, extras, style, &prev_head)
    } else {
        teams_table_v3(st, teams, extras, lang, &prev_head)
    };
    blocks.push(Block::Table(table));
    blocks.push(approval(st, extras, style));
    Section { running_head: format!("{title} ({})", l("续", "continued")), blocks }
}

/// The teams table as layout 3 printed it: id and name apart, the sum of the totals only.
fn teams_table_v3(st: &Statement, teams: &[&str], extras: &StatementExtras, lang: Lang, prev_head: &str) -> Table {
    let l = |zh: &'static str, en: &'static str| lang.pick(zh, en);
    let previous = extras.previous.as_ref();
    let columns = vec![
        col(l("团队", "Team"), 70.0, false),
        col(l("名称", "Name"), 90.0, false),
        col(l("负责人", "Owner"), 70.0, false),
        col(l("已分配", "Allocated"), 80.0, true),
        col(l("分摊", "Unalloc. share"), 70.0, true),
        col(l("重述", "Restated"), 65.0, true),
        col(l("合计", "Total"), 85.0, true),
        col(l("预算", "Budget"), 80.0, true),
        col(prev_head, 75.0, true),
        col(l("环比", "Change"), 77.0, true),
    ];
    let rows = teams
        .iter()
        .map(|t| {
            let info = st.teams.get(*t);
            let bill = bill_of(st, t);
            let total = st.team_total(t);
            let before = previous.and_then(|p| p.teams.get(*t).copied());
            vec![
                t.to_string(),
                info.map(|i| i.name.clone()).unwrap_or_default(),
                info.and_then(|i| i.owner.clone()).unwrap_or_default(),
                yuan(bill.map_or(Money::ZERO, |b| b.allocated)),
                yuan(bill.map_or(Money::ZERO, |b| b.unallocated_share)),
                yuan(st.team_restated(t)),
                yuan(total),
                extras.budgets.get(*t).map_or_else(|| "–".into(), |m| yuan(*m)),
                before.map_or_else(|| "–".into(), yuan),
                before.map_or_else(|| "–".into(), |b| change(total, b)),
            ]
        })
        .collect();
    let sum: Money = teams.iter().map(|t| st.team_total(t)).sum();
    let mut total = vec![String::new(); 10];
    total[0] = l("合计", "Sum of totals").into();
    total[6] = yuan(sum);
    if let Some(p) = previous {
        let before: Money = teams.iter().filter_map(|t| p.teams.get(*t).copied()).sum();
        total[8] = yuan(before);
        total[9] = change(sum, before);
    }
    Table { heading: Some(l("各团队", "Teams").into()), columns, rows, total: Some(total) }
}

/// The teams table from layout 4 on: a team named once ([`glossary::team_label`]), the glossary's words, and a
/// total row that sums every money column (the month's totals: [`crate::billing::MonthTotals`]).
fn teams_table_v4(st: &Statement, teams: &[&str], extras: &StatementExtras, style: Style, prev_head: &str) -> Table {
    let lang = style.lang;
    let l = |zh: &'static str, en: &'static str| lang.pick(zh, en);
    let g = |key: &str| glossary::term(lang, key);
    let previous = extras.previous.as_ref();
    // approved adjustments: a column of their own, only where there are any (the page keeps its width)
    let adjusted = st.adjusted_among(teams.iter().copied());
    let mut columns = vec![
        col(&g("term.team"), if adjusted { 100.0 } else { 140.0 }, false),
        col(&g("term.owner"), 70.0, false),
        col(&g("term.allocated"), 80.0, true),
        col(&g("term.unallocated_share"), 75.0, true),
        col(&g("term.restated"), 70.0, true),
        col(&g("term.total"), 85.0, true),
        col(&g("term.budget"), 75.0, true),
        col(prev_head, 75.0, true),
        col(&g("term.change"), if adjusted { 72.0 } else { 92.0 }, true),
    ];
    if adjusted {
        columns.insert(5, col(&g("term.adjusted"), 60.0, true));
    }
    let rows = teams
        .iter()
        .map(|t| {
            let info = st.teams.get(*t);
            let bill = bill_of(st, t);
            let total = st.team_total(t);
            let before = previous.and_then(|p| p.teams.get(*t).copied());
            let mut row = vec![
                glossary::team_label(lang, t, info.map_or(*t, |i| i.name.as_str())),
                info.and_then(|i| i.owner.clone()).unwrap_or_default(),
                yuan(bill.map_or(Money::ZERO, |b| b.allocated)),
                yuan(bill.map_or(Money::ZERO, |b| b.unallocated_share)),
                yuan(st.team_restated(t)),
                yuan(total),
                extras.budgets.get(*t).map_or_else(|| "–".into(), |m| yuan(*m)),
                before.map_or_else(|| "–".into(), yuan),
                before.map_or_else(|| "–".into(), |b| change(total, b)),
            ];
            if adjusted {
                row.insert(5, yuan(st.team_adjusted(t)));
            }
            row
        })
        .collect();
    let sums = crate::billing::MonthTotals::of_teams(
        teams.iter().map(|t| (bill_of(st, t), st.team_restated(t), st.team_adjusted(t))),
    );
    let mut total = vec![String::new(); 9];
    total[0] = g("term.total");
    total[2] = yuan(sums.allocated);
    total[3] = yuan(sums.unallocated_share);
    total[4] = yuan(sums.restated);
    total[5] = yuan(sums.total);
    let budgets: Vec<Money> = teams.iter().filter_map(|t| extras.budgets.get(*t).copied()).collect();
    if !budgets.is_empty() {
        total[6] = yuan(budgets.into_iter().sum());
    }
    if let Some(p) = previous {
        let before: Money = teams.iter().filter_map(|t| p.teams.get(*t).copied()).sum();
        total[7] = yuan(before);
        total[8] = change(sums.total, before);
    }
    if adjusted {
        total.insert(5, yuan(sums.adjusted));
    }
    Table { heading: Some(l("各团队", "Teams").into()), columns, rows, total: Some(total) }
}

/// The team's adjustments: the approved ones (in its total) with id, month corrected, reason, maker and checker;
/// on a draft also those awaiting approval (in no total), so finance sees what a decision would change.
fn adjustment_tables(st: &Statement, team: &str, lang: Lang, blocks: &mut Vec<Block>) {
    let g = |key: &str| glossary::term(lang, key);
    let table = |heading: String, list: Vec<&crate::ledger::Adjustment>, with_checker: bool| {
        let mut columns = vec![
            col(&g("term.adjustment_id"), 60.0, false),
            col(&g("term.corrected_month"), 60.0, false),
            col(&g("term.reason"), if with_checker { 250.0 } else { 350.0 }, false),
            col(&g("term.entered_by"), 100.0, false),
        ];
        if with_checker {
            columns.push(col(&g("term.approved_by"), 100.0, false));
        }
        columns.push(col(&g("term.amount"), 92.0, true));
        let rows = list
            .into_iter()
            .map(|a| {
                let name = |actor: &str| present::actor_name(actor).to_string();
                let mut r = vec![a.line_id(), a.month.to_string(), a.reason.clone(), name(&a.entered_by)];
                if with_checker {
                    r.push(a.decided_by.as_deref().map(name).unwrap_or_default());
                }
                r.push(yuan(a.amount));
                r
            })
            .collect();
        Block::Table(Table { heading: Some(heading), columns, rows, total: None })
    };
    let approved: Vec<_> = st.adjustments_of(team).collect();
    if !approved.is_empty() {
        blocks.push(table(g("term.adjustments"), approved, true));
    }
    let pending: Vec<_> = st.pending_adjustments_of(team).collect();
    if !pending.is_empty() {
        blocks.push(table(g("term.pending_adjustments"), pending, false));
    }
}

/// The team's total by finance codes (SPEC §11), where it has codes: what each (cost centre, GL account, legal
/// entity) is booked and by which lines (their ids: split lines of one namespace read alike in the lines table) — a
/// usage or reservation line under the codes of its days, the other lines (unallocated share, restatements,
/// adjustments) under the month's last day's — summing to the team's total.
fn finance_codes_table(st: &Statement, team: &str, lang: Lang, blocks: &mut Vec<Block>) {
    use crate::ledger::line_id;
    let team_codes = st.month_end_codes(team);
    let bill = st.bills.teams.iter().find(|b| b.team == team);
    let lines: &[crate::billing::BillLine] = bill.map_or(&[], |b| &b.lines);
    if team_codes.is_none() && lines.iter().all(|l| l.finance.is_none()) {
        return;
    }
    // every line of the team's total: its codes, id and amount
    let mut all: Vec<(Option<&crate::billing::FinanceCodes>, String, Money)> =
        lines.iter().map(|l| (l.finance.as_ref(), line_id::bill_line(team, l), l.amount)).collect();
    if let Some(b) = bill.filter(|b| !b.unallocated_share.is_zero()) {
        all.push((team_codes, line_id::unallocated_share(team), b.unallocated_share));
    }
    all.extend(st.restatements_of(team).map(|r| (team_codes, line_id::restatement(r), r.amount_delta)));
    all.extend(st.adjustments_of(team).map(|a| (team_codes, a.line_id(), a.amount)));
    let mut by: std::collections::BTreeMap<Option<&crate::billing::FinanceCodes>, (Vec<String>, Money)> =
        Default::default();
    for (codes, id, amount) in all {
        let e = by.entry(codes).or_insert((Vec::new(), Money::ZERO));
        e.0.push(id);
        e.1 = e.1 + amount;
    }
    let g = |key: &str| glossary::term(lang, key);
    let columns = vec![
        col(&g("term.cost_centre"), 105.0, false),
        col(&g("term.gl_account"), 95.0, false),
        col(&g("term.legal_entity"), 170.0, false),
        col(&g("term.line_id"), 210.0, false),
        col(&g("term.amount"), 92.0, true),
    ];
    let dash = |v: &str| if v.is_empty() { "—".to_string() } else { v.to_string() };
    // a code set's ids three to a row (a cell holds one line of text): its codes and amount on the first
    const IDS_PER_ROW: usize = 3;
    let mut rows = Vec::new();
    for (codes, (ids, amount)) in by {
        let [cc, gl, le] = codes.map_or(["", "", ""], |c| c.cells());
        for (i, chunk) in ids.chunks(IDS_PER_ROW).enumerate() {
            rows.push(match i {
                0 => vec![dash(cc), dash(gl), dash(le), chunk.join(" "), yuan(amount)],
                _ => vec![String::new(), String::new(), String::new(), chunk.join(" "), String::new()],
            });
        }
    }
    let sum = vec![g("term.total"), String::new(), String::new(), String::new(), yuan(st.team_total(team))];
    blocks.push(Block::Table(Table { heading: Some(g("term.finance_codes")), columns, rows, total: Some(sum) }));
}

/// Teams shown in the summary chart (largest totals first); the table lists them all.
const CHART_TEAMS: usize = 20;

fn utilization_table(f: &UtilizationFigures, capacity_known: bool, lang: Lang) -> Table {
    let l = |zh: &'static str, en: &'static str| lang.pick(zh, en);
    let unknown = l("未知", "unknown").to_string();
    let cap = |x: f64| if capacity_known { card_hours_f64(x) } else { unknown.clone() };
    let ratio = |r: Option<f64>| if capacity_known { percent(r) } else { unknown.clone() };
    let mut rows = vec![vec![l("容量卡时", "Capacity card-hours").to_string(), cap(f.capacity_card_hours)]];
    if f.not_offered_card_hours > 0.0 {
        rows.push(vec![l("可用卡时", "Offered card-hours").into(), cap(f.offered_card_hours)]);
        rows.push(vec![l("未上架卡时", "Not offered card-hours").into(), cap(f.not_offered_card_hours)]);
    }
    rows.extend([
        vec![l("卡时", "GPU-hours").to_string(), card_hours_f64(f.gpu_hours)],
        vec![l("有效卡时", "Effective GPU-hours").to_string(), card_hours_f64(f.effective_gpu_hours)],
        vec![l("分配率", "Allocation rate").to_string(), ratio(f.allocation_rate)],
        vec![l("利用率", "Utilization").to_string(), percent(f.utilization)],
        vec![l("有效率", "Effective rate").to_string(), ratio(f.effective_rate)],
    ]);
    Table {
        heading: Some(l("本月利用率", "Utilization this month").into()),
        columns: vec![col(l("指标", "Figure"), 260.0, false), col(l("本月", "Month"), 150.0, true)],
        rows,
        total: None,
    }
}

fn team_name<'s>(st: &'s Statement, team: &'s str) -> &'s str {
    st.teams.get(team).map_or(team, |i| i.name.as_str())
}

fn bill_of<'s>(st: &'s Statement, team: &str) -> Option<&'s TeamBill> {
    st.bills.teams.iter().find(|b| b.team == team)
}

fn team_section(st: &Statement, team: &str, extras: &StatementExtras, style: Style) -> Section {
    let lang = style.lang;
    let l = |zh: &'static str, en: &'static str| lang.pick(zh, en);
    let name = style.team_name(st, team);
    let mut blocks = vec![Block::Title(format!("{name} — {} {}", l("GPU 成本结算单", "GPU cost statement"), st.month))];
    let owner = st.teams.get(team).and_then(|i| i.owner.as_deref()).unwrap_or("—");
    blocks.push(Block::Line(format!("{} {team}   {} {owner}", l("团队", "Team"), l("负责人", "Owner"))));
    if style.v6 {
        blocks.push(Block::Line(format!("{} {}/{team}", glossary::term(lang, "term.statement_id"), st.month)));
    }
    blocks.extend(header_lines(st, style));
    for c in &extras.coverage {
        blocks.push(Block::Line(match lang {
            Lang::Zh => format!("数据覆盖 {}：{} / {} 小时", c.cluster, c.hours_present, c.hours_elapsed),
            Lang::En => format!("Data coverage {}: {} of {} hours", c.cluster, c.hours_present, c.hours_elapsed),
        }));
    }

    let bill = bill_of(st, team);
    let unknown_hours: Decimal =
        bill.iter().flat_map(|b| &b.lines).filter(|l| l.gpu_model == UNKNOWN_MODEL).map(|l| l.card_hours).sum();
    if unknown_hours > Decimal::ZERO {
        blocks.push(Block::Note {
            text: match (lang, style.v4) {
                (Lang::Zh, true) => format!(
                    "⚠ {} 卡时的 GPU 型号未知，未定价：请在「节点」页设置该节点的 GPU 型号，或在节点上部署 DCGM。",
                    card_hours(unknown_hours)
                ),
                (Lang::Zh, false) => format!(
                    "⚠ {} 卡时的 GPU 型号未知，未定价：请在节点上部署 dcgm-exporter 或 GPU Feature Discovery，或由财务设置节点型号。",
                    card_hours(unknown_hours)
                ),
                (Lang::En, _) => format!(
                    "⚠ {} card-hours are on an unknown GPU model and unpriced: run dcgm-exporter or GPU Feature \
                     Discovery on the node, or have finance set the node's model.",
                    card_hours(unknown_hours)
                ),
            },
            warning: true,
        });
    }

    let mut rates: std::collections::BTreeMap<String, std::collections::BTreeSet<Option<RatePerCardHour>>> =
        Default::default();
    let mut rows = Vec::new();
    // layout 6: each line's id in a last column
    let mut ids: Vec<String> = Vec::new();
    if let Some(b) = bill {
        for line in &b.lines {
            // the rates used are the models' rates: a reservation's (rate × factor) is on its own line and note
            if !line.is_reservation() {
                rates.entry(line.gpu_model.clone()).or_default().insert(line.rate);
            }
            let mut kind = present::kind(&line.kind, lang);
            if line.whole_card_hours.is_some() {
                kind.push_str(l("（整卡）", " (whole card)"));
            }
            if line.unverified_node {
                kind.push_str(" ⚠");
            }
            if let Some(f) = line.reservation_factor {
                kind.push_str(&format!("{}{}{}", l("（系数 ", " (× "), f.normalize(), l("）", ")")));
            }
            // a reservation line bills guaranteed card-hours, not GPU-hours: they print in the card-hours column
            // under their own line type, the effective column empty
            let (line_type, hours, effective) = match line.reserved_card_hours {
                Some(h) => (l("预留配额计费", "Reserved quota"), card_hours(h), String::new()),
                None => (l("用量", "Usage"), card_hours(line.card_hours), card_hours(line.effective_card_hours)),
            };
            rows.push(vec![
                line_type.to_string(),
                present::scope(&line.namespace, lang),
                style.model(&line.gpu_model),
                kind,
                hours,
                effective,
                rate(line.rate, lang),
                yuan(line.amount),
            ]);
            ids.push(crate::ledger::line_id::bill_line(team, line));
        }
        if !b.unallocated_share.is_zero() {
            let mut r = vec![String::new(); 8];
            r[0] = l("未分配分摊", "Unallocated share").into();
            r[7] = yuan(b.unallocated_share);
            rows.push(r);
            ids.push(crate::ledger::line_id::unallocated_share(team));
        }
    }
    for r in st.restatements_of(team) {
        if !r.is_unallocated_share() {
            rates.entry(r.gpu_model.clone()).or_default().insert(r.rate);
        }
        let restated = style.word("term.restated", "重述", "Restated");
        let label = match r.original_month {
            Some(m) => format!("{restated} {m}"),
            None => restated,
        };
        ids.push(crate::ledger::line_id::restatement(r));
        // layout 4 prints no code where a namespace would be: the share is said by its kind column
        let namespace = if style.v4 && r.is_unallocated_share() { String::new() } else { r.namespace.clone() };
        rows.push(vec![
            label,
            namespace,
            style.model(&r.gpu_model),
            if r.is_unallocated_share() {
                l("未分配分摊", "Unallocated share").into()
            } else {
                present::kind(&r.kind, lang)
            },
            card_hours(r.card_hours_delta),
            card_hours(r.effective_card_hours_delta),
            if r.is_unallocated_share() { String::new() } else { rate(r.rate, lang) },
            yuan(r.amount_delta),
        ]);
    }
    for a in st.adjustments_of(team) {
        // an approved adjustment: a line of the total, its id where a line has its namespace (details below)
        let word = glossary::term(lang, "term.adjustment");
        let label = if a.month != st.month { format!("{word} {}", a.month) } else { word };
        let mut r = vec![String::new(); 8];
        r[0] = label;
        // its id where a line has its namespace, unless the ids have their own column (layout 6)
        r[1] = if style.v6 { String::new() } else { a.line_id() };
        r[7] = yuan(a.amount);
        rows.push(r);
        ids.push(a.line_id());
    }
    let total = st.team_total(team);
    let mut sum = vec![String::new(); 8];
    sum[0] = l("合计", "Total").into();
    sum[7] = yuan(total);
    // layout 6 makes room for the ids on the page's width: the text columns give what they can spare
    let w = |v5: f32, v6: f32| if style.v6 { v6 } else { v5 };
    let mut columns = vec![
        col(l("类型", "Line"), w(85.0, 70.0), false),
        col(l("命名空间", "Namespace"), w(130.0, 110.0), false),
        col(l("GPU 型号", "GPU model"), w(95.0, 85.0), false),
        col(l("类别", "Kind"), w(100.0, 85.0), false),
        col(l("卡时", "Card-hours"), w(85.0, 75.0), true),
        col(l("有效卡时", "Effective"), w(85.0, 75.0), true),
        col(l("单价（元/卡时）", "Rate (CNY/card-h)"), w(82.0, 77.0), true),
        col(l("金额", "Amount"), w(100.0, 90.0), true),
    ];
    if style.v6 {
        // first, left-aligned: a right-aligned amount and an id side by side would read as one
        columns.insert(0, col(&glossary::term(lang, "term.line_id"), 95.0, false));
        for (row, id) in rows.iter_mut().zip(ids) {
            row.insert(0, id);
        }
        sum.insert(1, String::new());
    }
    blocks.push(Block::Table(Table { heading: Some(l("明细", "Lines").into()), columns, rows, total: Some(sum) }));
    adjustment_tables(st, team, lang, &mut blocks);
    finance_codes_table(st, team, lang, &mut blocks);
    let marked = |f: fn(&crate::billing::BillLine) -> bool| bill.iter().flat_map(|b| &b.lines).any(f);
    if marked(|l| l.whole_card_hours.is_some()) {
        let whole: Decimal = bill.iter().flat_map(|b| &b.lines).filter_map(|l| l.whole_card_hours).sum();
        blocks.push(Block::Note {
            text: match lang {
                Lang::Zh => format!(
                    "（整卡）：时间片副本按整卡计费，金额按 {} 副本卡时计；卡时一栏仍为物理份额。",
                    card_hours(whole)
                ),
                Lang::En => format!(
                    "(whole card): time-sliced replicas billed as whole cards, the amount for {} replica card-hours;                      the card-hours column stays the physical share.",
                    card_hours(whole)
                ),
            },
            warning: false,
        });
    }
    if marked(|l| l.is_reservation()) {
        blocks.push(Block::Note {
            text: l(
                "预留配额计费：预留一行按配额的保障卡时 × 预留单价（型号单价 × 系数）计费，不论是否使用；保障内的用量已在用量行按型号单价计费，\
                 故以「保障内使用抵扣」一行按同一单价抵回；超出保障的用量按型号单价计费。",
                "Reserved quota: a reservation line bills the quota's guaranteed card-hours at the reservation rate \
                 (the model's rate × the factor), used or not; the hours used within the guarantee are in the usage \
                 lines at the model's rate, so the line \"used within the reservation\" credits them back at that rate; \
                 use above the guarantee is billed at the model's rate.",
            )
            .into(),
            warning: false,
        });
    }
    // a guarantee unpriced (no terms, or no rate for their model); a credit of an unpriced model's use is no
    // reservation's fault, and its usage line says so already
    if marked(|l| l.kind == crate::billing::reserved::RESERVATION && l.unpriced) {
        blocks.push(Block::Note {
            text: l(
                "⚠ 预留未计价：该配额没有预留条款说明其 GPU 型号，或该型号没有单价；请财务补充预留条款或单价后再结账。",
                "⚠ Reservation not priced: no reservation terms name the quota's GPU model, or the model has no rate; \
                 finance states the terms (or the rate) before closing.",
            )
            .into(),
            warning: true,
        });
    }
    if marked(|l| l.unverified_node) {
        blocks.push(Block::Note {
            text: l(
                "⚠ 未核实节点：该行部分用量所在节点的物理卡数无法统计，按节点公布的数量计（一个单位算一张卡），待节点配置后重述。",
                // the spaces are how layouts 1–4 printed it (a line break lost in the source): kept for them
                if style.v5 {
                    "⚠ Unverified node: part of this line ran on a node whose cards could not be counted; taken at \
                     face value (a unit a card) until the node is configured."
                } else {
                    "⚠ Unverified node: part of this line ran on a node whose cards could not be counted; taken at face                  value (a unit a card) until the node is configured."
                },
            )
            .into(),
            warning: true,
        });
    }

    // layout 5: the team's unit cost of inference per model, beside its lines
    if let Some(t) = unit_cost_table(st.unit_cost_of(team), style) {
        blocks.push(Block::Table(t));
        if st.unit_cost_of(team).iter().any(|u| u.unpriced) {
            blocks.push(Block::Note {
                text: l(
                    "⚠ 标 ⚠ 的模型：部分推理小时所用的 GPU 型号没有单价，其成本按 0 计入上表。",
                    "⚠ Models marked ⚠: some serving hours ran on a GPU model without a rate; their cost counts as 0 \
                     above.",
                )
                .into(),
                warning: true,
            });
        }
    }

    let mut totals = Vec::new();
    if let Some(b) = bill {
        totals.push(vec![l("卡时", "Card-hours").to_string(), card_hours(b.card_hours)]);
        totals.push(vec![l("有效卡时", "Effective card-hours").to_string(), card_hours(b.effective_card_hours)]);
        totals.push(vec![
            style.word("term.unmetered_card_hours", "无利用率数据的卡时", "Unmetered card-hours"),
            card_hours(b.unmetered_card_hours),
        ]);
        totals.push(vec![l("已分配", "Allocated").to_string(), yuan(b.allocated)]);
        totals.push(vec![l("未分配分摊", "Unallocated share").to_string(), yuan(b.unallocated_share)]);
    }
    totals.push(vec![style.word("term.restated", "重述", "Restated"), yuan(st.team_restated(team))]);
    if st.adjusted_among(std::iter::once(team)) {
        totals.push(vec![glossary::term(lang, "term.adjusted"), yuan(st.team_adjusted(team))]);
    }
    totals.push(vec![l("合计", "Total").to_string(), yuan(total)]);
    if let Some(budget) = extras.budgets.get(team) {
        totals.push(vec![l("预算", "Budget").to_string(), yuan(*budget)]);
        totals.push(vec![l("预算使用", "Budget used").to_string(), present::share(total, *budget)]);
        totals.push(vec![l("预算余额", "Budget left").to_string(), yuan(*budget - total)]);
    }
    if let Some(p) = &extras.previous {
        let before = p.teams.get(team).copied().unwrap_or(Money::ZERO);
        let head = match lang {
            Lang::Zh => format!("上月合计（{}{}）", p.month, if p.closed { "" } else { "，未结账" }),
            Lang::En => format!("Previous month ({}{})", p.month, if p.closed { "" } else { ", open" }),
        };
        totals.push(vec![head, yuan(before)]);
        totals.push(vec![l("环比变化", "Change").to_string(), change(total, before)]);
    }
    blocks.push(Block::Table(Table {
        heading: Some(l("汇总", "Summary").into()),
        columns: vec![col(l("项目", "Item"), 260.0, false), col(l("金额 / 数量", "Amount / quantity"), 150.0, true)],
        rows: totals,
        total: None,
    }));

    if !rates.is_empty() {
        let rows = rates
            .into_iter()
            .map(|(model, set)| {
                let list: Vec<String> = set.into_iter().map(|r| rate(r, lang)).collect();
                vec![style.model(&model), list.join(", ")]
            })
            .collect();
        blocks.push(Block::Table(Table {
            heading: Some(l("使用的单价（元/卡时）", "Rates used (CNY per card-hour)").into()),
            columns: vec![col(l("GPU 型号", "GPU model"), 160.0, false), col(l("单价", "Rates"), 400.0, false)],
            rows,
            total: None,
        }));
    }
    if let Some(t) = idle_table(team, &extras.idle, style) {
        blocks.push(t);
    }
    blocks.push(approval(st, extras, style));
    let head =
        if style.v4 { glossary::team_label(lang, team, team_name(st, team)) } else { format!("{name} ({team})") };
    Section { running_head: format!("{head} — {} ({})", st.month, l("续", "continued")), blocks }
}

/// A unit-cost line's model, marked ⚠ where some of its hours ran on a GPU model without a rate (its cost 0).
fn unit_cost_model(u: &UnitCostLine, style: Style) -> String {
    let mut model = style.model(&u.model);
    if u.unpriced {
        model.push_str(" ⚠");
    }
    model
}

/// The team's unit cost of inference per model (layout 5 on): tokens and requests served, ¥ per million tokens and
/// per thousand requests (ratios of sums, 4 decimals; `–` where an engine counts none), and the cost of serving
/// hours without traffic, apart. `None` for a team without serving pods: nothing is printed for it.
fn unit_cost_table(lines: &[UnitCostLine], style: Style) -> Option<Table> {
    if lines.is_empty() {
        return None;
    }
    let g = |key: &str| glossary::term(style.lang, key);
    let rows = lines
        .iter()
        .map(|u| {
            vec![
                unit_cost_model(u, style),
                present::engine(style.lang, &u.engine),
                present::count(u.total_tokens),
                present::count(u.requests),
                present::unit_yuan(u.cost_per_million_tokens),
                present::unit_yuan(u.cost_per_thousand_requests),
                yuan(u.idle_cost),
            ]
        })
        .collect();
    Some(Table {
        heading: Some(g("statement.unit_cost")),
        columns: vec![
            col(&g("term.model"), 170.0, false),
            col(&g("term.engine"), 70.0, false),
            col(&g("term.total_tokens"), 100.0, true),
            col(&g("term.requests"), 85.0, true),
            col(&g("term.cost_per_million_tokens"), 125.0, true),
            col(&g("term.cost_per_thousand_requests"), 112.0, true),
            col(&g("term.idle_serving_cost"), 100.0, true),
        ],
        rows,
        total: None,
    })
}

/// The team's idle pods: the money actually spent idle (a fact), and, labelled as such, what the pods still running
/// would cost a month (a projection; an ended pod projects nothing).
fn idle_table(team: &str, idle: &[IdleLine], style: Style) -> Option<Block> {
    let l = |zh: &'static str, en: &'static str| style.l(zh, en);
    let mine: Vec<&IdleLine> = idle.iter().filter(|p| p.team == team).collect();
    if mine.is_empty() {
        return None;
    }
    let rows = mine
        .iter()
        .map(|p| {
            vec![
                p.namespace.clone(),
                p.pod.clone(),
                style.model(&p.gpu_model),
                card_hours_f64(p.cards_held),
                card_hours_f64(p.hours_held),
                percent(Some(p.average_utilization)),
                yuan(p.idle_spend),
                p.monthly_projection.map_or_else(|| l("已结束", "ended").to_string(), yuan),
            ]
        })
        .collect();
    let spent: Money = mine.iter().map(|p| p.idle_spend).sum();
    let projected: Money = mine.iter().filter_map(|p| p.monthly_projection).sum();
    let mut total = vec![String::new(); 8];
    total[0] = l("合计", "Total").into();
    total[6] = yuan(spent);
    total[7] = yuan(projected);
    Some(Block::Table(Table {
        heading: Some(
            l(
                "闲置 Pod（最近 7 天利用率低于阈值且占用显存）",
                "Idle pods (last 7 days under the utilization threshold while holding GPU memory)",
            )
            .into(),
        ),
        columns: vec![
            col(l("命名空间", "Namespace"), 100.0, false),
            col("Pod", 150.0, false),
            col(l("GPU 型号", "GPU model"), 90.0, false),
            col(l("卡数", "Cards"), 55.0, true),
            col(l("小时", "Hours"), 65.0, true),
            col(l("利用率", "Util."), 55.0, true),
            col(l("闲置实际花费", "Spent idle"), 110.0, true),
            col(l("月度预测（仍运行）", "Projection/month (running)"), 137.0, true),
        ],
        rows,
        total: Some(total),
    }))
}

/// Prepared by, and lines for the reviewer and the approver to sign.
fn approval(st: &Statement, extras: &StatementExtras, style: Style) -> Block {
    let l = |zh: &'static str, en: &'static str| style.l(zh, en);
    let prepared = match (st.status, st.closed_by.as_deref(), st.closed_at, extras.prepared.as_ref()) {
        (MonthStatus::Closed, Some(by), Some(at), _) => Some((by.to_string(), at)),
        (_, _, _, Some(p)) => Some((p.by.clone(), p.at)),
        _ => None,
    };
    let prepared = prepared.map_or_else(
        || format!("{} —", l("制表", "Prepared by")),
        |(by, at)| format!("{} {by}   {} {}", l("制表", "Prepared by"), l("时间", "at"), style.time(at)),
    );
    Block::Approval(vec![
        prepared,
        format!("{} ____________________   {} ____________", l("审核", "Reviewed by"), l("日期", "Date")),
        format!("{} ____________________   {} ____________", l("批准", "Approved by"), l("日期", "Date")),
    ])
}
