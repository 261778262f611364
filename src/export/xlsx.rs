//! The month's statements as an Excel workbook for finance: a summary sheet that reconciles to the capacity cost,
//! then one sheet per team with its lines. Real cells: numbers are numbers (money `#,##0.00`, card-hours
//! `#,##0.000`, rates `#,##0.0000`), months are dates shown `yyyy-mm`, text is text (never a formula, so a name
//! starting with `=` cannot run). Each table has a Chinese header row with the English field name below it.
//! Deterministic: fixed document properties and creation time (the close's time, or the month's first day for an
//! open month), so equal statements give equal bytes and the file can carry an ETag.
//!
//! Replica billing (SPEC §3) as the CSV and the PDF show it, and only where the statement carries it (so a month
//! closed before replica billing keeps its bytes): the replica settings among the summary's facts, the
//! whole-card replica-hours and the unverified-node mark as two more columns of the team sheets, and the platform
//! over-recovery (what whole-card billing recovers above the cards' cost) in the reconciliation.
//!
//! Layout 4 ([`Style::V4`]) prints the workbook in one language (zh-CN by default): every header in the glossary's
//! words (the field names in a hidden row below it, for programs that read the workbook), codes as words
//! (`showback` 展示成本, `kept_by_platform` 平台承担, `hami` HAMi 虚拟卡, `usage` 用量, yes/no 是/否), the time zone
//! and a closed month's closing time in it, a total row under the teams table, and the capacity shortfall in the
//! reconciliation. A layout-1 to -3 month keeps its bytes ([`Style::V3`]). From layout 5 on a team's sheet has,
//! below its lines, its unit cost of inference per model ([`UNIT_COST_HEADER`]) when it served any.

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use rust_xlsxwriter::{DocProperties, Format, Workbook, Worksheet, XlsxError};

use crate::billing::Month;
use crate::glossary::{self, Lang};
use crate::ledger::{MonthStatus, Statement};
use crate::money::{Money, RatePerCardHour};

/// How a layout writes the workbook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Layouts 1–3: bilingual headers (a Chinese row, the field names below), codes as stored.
    V3,
    /// Layout 4: in `lang`, the glossary's words, times in `tz`, a total row; from layout 6 on (`line_ids`) a
    /// `line_id` column at the end of a team sheet's lines ([`crate::ledger::line_id`]).
    V4 { lang: Lang, tz: chrono_tz::Tz, line_ids: bool },
}

impl Style {
    fn lang(self) -> Option<Lang> {
        match self {
            Style::V3 => None,
            Style::V4 { lang, .. } => Some(lang),
        }
    }

    /// A code as written: as stored (layout 3) or the glossary's word of `family`.
    fn word(self, family: &str, code: &str) -> String {
        match (self.lang(), family) {
            (None, _) => code.to_string(),
            (Some(lang), "line") => glossary::line_type(lang, code),
            (Some(lang), "kind") => glossary::kind(lang, code),
            (Some(lang), _) => glossary::term(lang, &format!("{family}.{code}")),
        }
    }

    fn model(self, m: &str) -> String {
        self.lang().map_or_else(|| m.to_string(), |lang| glossary::model(lang, m))
    }

    /// A yes/no cell: a boolean (layout 3) or 是 / 否.
    fn flag(self, ws: &mut Worksheet, row: u32, col: u16, v: bool) -> Result<(), XlsxError> {
        match self.lang() {
            None => ws.write_boolean(row, col, v).map(|_| ()),
            Some(lang) => ws.write_string(row, col, glossary::yes_no(lang, v)).map(|_| ()),
        }
    }
}

/// The summary sheet's name in a layout-4 workbook.
pub fn summary_sheet(lang: Lang) -> &'static str {
    lang.pick("汇总", "Summary")
}

/// The summary sheet's name (team sheets are named by team id, which is ASCII: they cannot collide with it).
pub const SUMMARY_SHEET: &str = "汇总 Summary";

/// The columns of a team sheet: Chinese header, English header.
pub const LINE_HEADER: [(&str, &str); 12] = [
    ("月份", "month"),
    ("行类型", "line_type"),
    ("原月份", "original_month"),
    ("命名空间", "namespace"),
    ("GPU 型号", "gpu_model"),
    ("资源类型", "kind"),
    ("卡时", "card_hours"),
    ("有效卡时", "effective_card_hours"),
    ("未计量卡时", "unmetered_card_hours"),
    ("费率（元/卡时）", "rate"),
    ("金额（元）", "amount"),
    ("未定价", "unpriced"),
];

/// The columns a team sheet adds where the statement carries replica settings or unverified lines.
pub const REPLICA_HEADER: [(&str, &str); 2] =
    [("整卡计费副本卡时", "whole_card_hours"), ("未核实节点", "unverified_node")];

/// The columns a team sheet adds after the others for reserved-quota billing's lines (only when it has some): the
/// guaranteed (or credited) card-hours, the card-hours column staying GPU-hours, and the factor on the rate.
pub const RESERVATION_HEADER: [(&str, &str); 2] =
    [("预留计费卡时（负数为抵扣）", "reserved_card_hours"), ("预留系数", "reservation_factor")];

/// The unit-cost table a team sheet has below its lines (layout 5 on, for a team that served models), from its
/// second column.
pub const UNIT_COST_HEADER: [(&str, &str); 8] = [
    ("模型", "model"),
    ("推理引擎", "engine"),
    ("词元总数", "total_tokens"),
    ("请求数", "requests"),
    ("每百万词元成本（元）", "cost_per_million_tokens"),
    ("每千次请求成本（元）", "cost_per_thousand_requests"),
    ("空闲推理成本（元）", "idle_serving_cost"),
    // some of its hours ran on a GPU model without a rate: their cost counted as 0 (the PDF marks the model ⚠)
    ("未定价", "unpriced"),
];

/// The team table of the summary sheet.
pub const TEAM_HEADER: [(&str, &str); 9] = [
    ("团队", "team"),
    ("团队名称", "team_name"),
    ("负责人", "owner"),
    ("卡时", "card_hours"),
    ("有效卡时", "effective_card_hours"),
    ("分配金额", "allocated"),
    ("未分配分摊", "unallocated_share"),
    ("重述", "restated"),
    ("合计", "total"),
];

/// The capacity table of the summary sheet (every team only).
pub const CAPACITY_HEADER: [(&str, &str); 6] = [
    ("GPU 型号", "gpu_model"),
    ("容量卡时", "card_hours"),
    ("未提供卡时", "not_offered_card_hours"),
    ("费率（元/卡时）", "rate"),
    ("金额（元）", "amount"),
    ("未定价", "unpriced"),
];

/// The cell formats: one per kind of quantity.
struct Formats {
    header: Format,
    money: Format,
    hours: Format,
    rate: Format,
    month: Format,
    bold_money: Format,
    /// Whole counts (tokens, requests): `#,##0`.
    count: Format,
}

impl Formats {
    fn new() -> Formats {
        Formats {
            header: Format::new().set_bold(),
            money: Format::new().set_num_format("#,##0.00"),
            hours: Format::new().set_num_format("#,##0.000"),
            rate: Format::new().set_num_format("#,##0.0000"),
            month: Format::new().set_num_format("yyyy-mm"),
            bold_money: Format::new().set_bold().set_num_format("#,##0.00"),
            count: Format::new().set_num_format("#,##0"),
        }
    }
}

/// The workbook of `st`, teams `include` accepts; `every_team`: the export holds every team (a global reader, no
/// team asked for), so the summary also carries the capacity and its reconciliation.
pub fn write(
    st: &Statement,
    include: impl Fn(&str) -> bool,
    every_team: bool,
    style: Style,
) -> Result<Vec<u8>, XlsxError> {
    let f = Formats::new();
    let mut wb = Workbook::new();
    wb.set_properties(&properties(st, style));
    let teams: Vec<&str> = st.team_ids().into_iter().filter(|t| include(t)).collect();
    summary(wb.add_worksheet(), st, &teams, every_team, &f, style)?;
    let mut used = Vec::new();
    for team in &teams {
        let ws = wb.add_worksheet();
        ws.set_name(sheet_name(team, &mut used))?;
        team_sheet(ws, st, team, &f, style)?;
    }
    wb.save_to_buffer()
}

/// Fixed properties: a workbook's bytes depend on the statement only.
fn properties(st: &Statement, style: Style) -> DocProperties {
    let created: DateTime<Utc> =
        st.closed_at.unwrap_or_else(|| st.month.first_day().and_time(Default::default()).and_utc());
    let title = match style.lang() {
        None => format!("GPU 成本账单 {} / GPU cost statement {}", st.month, st.month),
        Some(lang) => format!("{} {}", lang.pick("GPU 成本账单", "GPU cost statement"), st.month),
    };
    DocProperties::new().set_title(title).set_author("cardhour").set_creation_datetime(&created)
}

/// A sheet name from a team id: Excel allows at most 31 characters, so a longer id is cut, and a cut that
/// collides with an earlier one gets `~N`.
fn sheet_name(team: &str, used: &mut Vec<String>) -> String {
    let base: String = team.chars().take(31).collect();
    let mut name = base.clone();
    let mut n = 2;
    while used.contains(&name) {
        let suffix = format!("~{n}");
        name = format!("{}{suffix}", &base[..base.len().min(31 - suffix.len())]);
        n += 1;
    }
    used.push(name.clone());
    name
}

fn month_date(m: Month) -> NaiveDate {
    m.first_day()
}

/// A table's header: two rows — layout 3 the Chinese and the field names; layout 4 the glossary's words in the
/// workbook's language (`term.<field>`) and the field names in a hidden row (for programs that read the workbook).
fn header(ws: &mut Worksheet, row: u32, cols: &[(&str, &str)], f: &Formats, style: Style) -> Result<(), XlsxError> {
    for (c, (zh, en)) in cols.iter().enumerate() {
        match style.lang() {
            None => ws.write_string_with_format(row, c as u16, *zh, &f.header)?,
            Some(lang) => {
                ws.write_string_with_format(row, c as u16, glossary::term(lang, &format!("term.{en}")), &f.header)?
            }
        };
        ws.write_string(row + 1, c as u16, *en)?;
    }
    if style.lang().is_some() {
        ws.set_row_hidden(row + 1)?;
    }
    Ok(())
}

fn money(ws: &mut Worksheet, row: u32, col: u16, m: Money, fmt: &Format) -> Result<(), XlsxError> {
    ws.write_with_format(row, col, m.as_decimal(), fmt)?;
    Ok(())
}

fn hours(ws: &mut Worksheet, row: u32, col: u16, h: Decimal, f: &Formats) -> Result<(), XlsxError> {
    ws.write_with_format(row, col, h, &f.hours)?;
    Ok(())
}

/// A rate cell; an unknown rate is an empty cell (the line says `unpriced`).
fn rate(ws: &mut Worksheet, row: u32, col: u16, r: Option<RatePerCardHour>, f: &Formats) -> Result<(), XlsxError> {
    if let Some(r) = r {
        ws.write_with_format(row, col, r.as_decimal(), &f.rate)?;
    }
    Ok(())
}

/// Whether the team sheets carry [`REPLICA_HEADER`] (as the CSV's replica columns).
fn replica_columns(st: &Statement) -> bool {
    st.bills.replica_policies.is_some() || st.bills.teams.iter().flat_map(|t| &t.lines).any(|l| l.unverified_node)
}

/// Whether the team sheets carry [`RESERVATION_HEADER`] (as the CSV's reservation columns).
fn reservation_columns(st: &Statement) -> bool {
    st.bills.teams.iter().flat_map(|t| &t.lines).any(|l| l.is_reservation())
}

fn status_text(st: &Statement, style: Style) -> String {
    match (st.status, style.lang()) {
        (MonthStatus::Open, None) => "草稿 draft (open)".into(),
        (MonthStatus::Closed, None) => "已结账 closed".into(),
        (MonthStatus::Open, Some(lang)) => glossary::term(lang, "status.draft"),
        (MonthStatus::Closed, Some(lang)) => glossary::term(lang, "status.closed"),
    }
}

/// The summary's facts: (label, value) after the month's date cell.
fn facts(st: &Statement, style: Style) -> Vec<(String, String)> {
    let b = &st.bills;
    let Style::V4 { lang, tz, .. } = style else {
        let mut facts: Vec<(String, String)> = vec![
            ("状态 status".into(), status_text(st, style)),
            ("计费模式 mode".into(), b.policy.mode.as_str().into()),
            ("未分配策略 unallocated".into(), b.policy.unallocated.as_str().into()),
        ];
        if let Some(r) = &b.replica_policies {
            facts.push(("副本计费 replicas".into(), crate::export::present::replica_settings(r)));
        }
        return facts;
    };
    let g = |key: &str| glossary::term(lang, key);
    let mut facts = vec![
        (g("term.status"), status_text(st, style)),
        (lang.pick("计费方式", "Bill mode").into(), glossary::mode(lang, b.policy.mode)),
        (g("term.unallocated"), glossary::unallocated(lang, b.policy.unallocated)),
    ];
    if let Some(r) = &b.replica_policies {
        let words = if r.is_empty() {
            g("replicas.fraction")
        } else {
            r.iter()
                .map(|p| {
                    let scope =
                        p.pool.as_ref().map_or_else(|| p.cluster.clone(), |pool| format!("{}/{pool}", p.cluster));
                    format!(
                        "{scope} {} {} {}",
                        lang.pick("自", "from"),
                        p.from,
                        g(&format!("replicas.{}", p.policy.as_str()))
                    )
                })
                .collect::<Vec<_>>()
                .join(lang.pick("；", "; "))
        };
        facts.push((lang.pick("时间片副本", "Time-sliced replicas").into(), words));
    }
    facts.push((g("term.time_zone"), tz.name().to_string()));
    if let Some(at) = st.closed_at {
        facts.push((g("term.closed_at"), crate::export::present::when(at, tz)));
    }
    facts
}

fn summary(
    ws: &mut Worksheet,
    st: &Statement,
    teams: &[&str],
    every_team: bool,
    f: &Formats,
    style: Style,
) -> Result<(), XlsxError> {
    let lang = style.lang();
    ws.set_name(lang.map_or(SUMMARY_SHEET, summary_sheet))?;
    let b = &st.bills;
    let title = lang.map_or("GPU 成本账单 GPU cost statement", |l| l.pick("GPU 成本账单", "GPU cost statement"));
    ws.write_string_with_format(0, 0, title, &f.header)?;
    let month_label = lang.map_or_else(|| "月份 month".to_string(), |l| glossary::term(l, "term.month"));
    ws.write_string_with_format(1, 0, month_label, &f.header)?;
    ws.write_datetime_with_format(1, 1, month_date(st.month), &f.month)?;
    let facts = facts(st, style);
    for (i, (label, value)) in facts.iter().enumerate() {
        let row = 2 + i as u32;
        ws.write_string_with_format(row, 0, label, &f.header)?;
        ws.write_string(row, 1, value)?;
    }
    let mut row = facts.len() as u32 + 3;
    // approved adjustments: a column of their own before the total, only where a team of the sheet has one (bytes
    // as before otherwise)
    let adjusted = st.adjusted_among(teams.iter().copied());
    let mut team_cols = TEAM_HEADER.to_vec();
    if adjusted {
        team_cols.insert(8, ("调账", "adjusted"));
    }
    let total_col = if adjusted { 9 } else { 8 };
    header(ws, row, &team_cols, f, style)?;
    row += 2;
    for team in teams {
        let bill = b.teams.iter().find(|t| t.team == *team);
        let info = st.teams.get(*team);
        let restated: Money = st.team_restated(team);
        let name = info.map_or(*team, |i| i.name.as_str());
        ws.write_string(row, 0, *team)?;
        ws.write_string(row, 1, lang.map_or_else(|| name.to_string(), |l| glossary::team_name(l, team, name)))?;
        ws.write_string(row, 2, info.and_then(|i| i.owner.as_deref()).unwrap_or(""))?;
        hours(ws, row, 3, bill.map_or(Decimal::ZERO, |b| b.card_hours), f)?;
        hours(ws, row, 4, bill.map_or(Decimal::ZERO, |b| b.effective_card_hours), f)?;
        money(ws, row, 5, bill.map_or(Money::ZERO, |b| b.allocated), &f.money)?;
        money(ws, row, 6, bill.map_or(Money::ZERO, |b| b.unallocated_share), &f.money)?;
        money(ws, row, 7, restated, &f.money)?;
        if adjusted {
            money(ws, row, 8, st.team_adjusted(team), &f.money)?;
        }
        money(ws, row, total_col, st.team_total(team), &f.money)?;
        row += 1;
    }
    if let Some(lang) = lang {
        // the table's total row: the sums of its rows (layout 4)
        let sums = crate::billing::MonthTotals::of_teams(
            teams.iter().map(|t| (b.teams.iter().find(|x| x.team == *t), st.team_restated(t), st.team_adjusted(t))),
        );
        ws.write_string_with_format(row, 0, glossary::term(lang, "term.total"), &f.header)?;
        ws.write_with_format(row, 3, sums.card_hours, &f.hours)?;
        ws.write_with_format(row, 4, sums.effective_card_hours, &f.hours)?;
        for (col, m) in [(5, sums.allocated), (6, sums.unallocated_share), (7, sums.restated), (total_col, sums.total)]
        {
            money(ws, row, col, m, &f.bold_money)?;
        }
        if adjusted {
            money(ws, row, 8, sums.adjusted, &f.bold_money)?;
        }
        row += 1;
    }
    if every_team {
        row += 1;
        header(ws, row, &CAPACITY_HEADER, f, style)?;
        row += 2;
        for c in &b.capacity {
            ws.write_string(row, 0, style.model(&c.gpu_model))?;
            hours(ws, row, 1, c.card_hours, f)?;
            if let Some(n) = c.not_offered_card_hours {
                hours(ws, row, 2, n, f)?;
            }
            rate(ws, row, 3, c.rate, f)?;
            money(ws, row, 4, c.amount, &f.money)?;
            style.flag(ws, row, 5, c.unpriced)?;
            row += 1;
        }
        // the reconciliation, to the fen: allocated + unallocated + not offered = capacity cost, and what the teams
        // carry + what the platform keeps = capacity cost
        row += 1;
        let mut figures: Vec<(&str, &str, Money)> =
            vec![("分配金额合计", "allocated", b.allocated), ("未分配", "unallocated", b.unallocated)];
        if let Some(n) = b.not_offered {
            figures.push(("未提供（平台承担）", "not_offered", n));
        }
        figures.push(("容量成本", "capacity_cost", b.capacity_cost));
        figures.push(("团队承担合计", "teams_total", b.teams.iter().map(|t| t.total).sum()));
        figures.push(("平台承担", "platform_kept", b.platform_kept));
        if let Some(over) = b.over_recovery {
            // what whole-card billing recovered above the cards' cost: not part of capacity, its own line
            figures.push(("超额回收（副本按整卡计费）", "over_recovery", over));
        }
        if let (Some(short), Some(_)) = (b.capacity_shortfall, lang) {
            figures.push(("", "capacity_shortfall", short));
        }
        if let Some(over) = b.over_commitment {
            // what reservations billed above the offered capacity: its own line, nothing spread of it
            figures.push(("超额承诺（保障超出可用容量）", "over_commitment", over));
        }
        for (zh, en, m) in figures {
            match lang {
                None => {
                    ws.write_string_with_format(row, 0, zh, &f.header)?;
                    ws.write_string(row, 1, en)?;
                }
                Some(lang) => {
                    let label = match en {
                        "teams_total" => lang.pick("团队承担合计", "Carried by the teams").to_string(),
                        "allocated" => lang.pick("分配金额合计", "Allocated").to_string(),
                        code => glossary::term(lang, &format!("term.{code}")),
                    };
                    ws.write_string_with_format(row, 0, label, &f.header)?;
                }
            }
            money(ws, row, 2, m, &f.bold_money)?;
            row += 1;
        }
    }
    ws.set_column_width(0, 22)?;
    ws.set_column_width(1, 22)?;
    Ok(())
}

fn team_sheet(ws: &mut Worksheet, st: &Statement, team: &str, f: &Formats, style: Style) -> Result<(), XlsxError> {
    let replica_cols = replica_columns(st);
    let mut cols = LINE_HEADER.to_vec();
    if replica_cols {
        cols.extend(REPLICA_HEADER);
    }
    let res_col = reservation_columns(st).then_some(cols.len() as u16);
    if res_col.is_some() {
        cols.extend(RESERVATION_HEADER);
    }
    // finance codes (SPEC §11): each line's, where the team has codes (a sheet without any as before)
    let bill = st.bills.teams.iter().find(|t| t.team == team);
    let team_codes = st.month_end_codes(team);
    let has_codes = team_codes.is_some() || bill.is_some_and(|b| b.lines.iter().any(|l| l.finance.is_some()));
    let code_col = has_codes.then_some(cols.len() as u16);
    if has_codes {
        cols.extend([("成本中心", "cost_centre"), ("总账科目", "gl_account"), ("法人主体", "legal_entity")]);
    }
    let codes = |ws: &mut Worksheet, row: u32, c: Option<&crate::billing::FinanceCodes>| -> Result<(), XlsxError> {
        if let (Some(col), Some(c)) = (code_col, c) {
            for (i, v) in c.cells().into_iter().enumerate().filter(|(_, v)| !v.is_empty()) {
                ws.write_string(row, col + i as u16, v)?;
            }
        }
        Ok(())
    };
    // layout 6: each line's stable id in the last column
    let id_col = matches!(style, Style::V4 { line_ids: true, .. }).then_some(cols.len() as u16);
    if id_col.is_some() {
        cols.push(("行编号", "line_id"));
    }
    let id = |ws: &mut Worksheet, row: u32, id: String| -> Result<(), XlsxError> {
        if let Some(c) = id_col {
            ws.write_string(row, c, id)?;
        }
        Ok(())
    };
    header(ws, 0, &cols, f, style)?;
    ws.set_freeze_panes(2, 0)?;
    let mut row = 2;
    let month = month_date(st.month);
    let texts = |ws: &mut Worksheet, row: u32, kind: &str, ns: &str, model: &str, k: &str| -> Result<(), XlsxError> {
        ws.write_datetime_with_format(row, 0, month, &f.month)?;
        ws.write_string(row, 1, style.word("line", kind))?;
        ws.write_string(row, 3, ns)?;
        ws.write_string(row, 4, if model.is_empty() { String::new() } else { style.model(model) })?;
        ws.write_string(row, 5, if k.is_empty() { String::new() } else { style.word("kind", k) })?;
        Ok(())
    };
    if let Some(bill) = bill {
        for l in &bill.lines {
            if let (Some(h), Some(c)) = (l.reserved_card_hours, res_col) {
                // a reservation line: no GPU-hours, its guaranteed (or credited) hours in their own column
                let scope = style
                    .lang()
                    .map_or_else(|| l.namespace.clone(), |w| crate::export::present::scope(&l.namespace, w));
                texts(ws, row, &l.kind, &scope, &l.gpu_model, &l.kind)?;
                hours(ws, row, c, h, f)?;
                if let Some(factor) = l.reservation_factor {
                    ws.write(row, c + 1, factor)?;
                }
            } else {
                texts(ws, row, "usage", &l.namespace, &l.gpu_model, &l.kind)?;
                hours(ws, row, 6, l.card_hours, f)?;
                hours(ws, row, 7, l.effective_card_hours, f)?;
                hours(ws, row, 8, l.unmetered_card_hours, f)?;
            }
            rate(ws, row, 9, l.rate, f)?;
            money(ws, row, 10, l.amount, &f.money)?;
            style.flag(ws, row, 11, l.unpriced)?;
            if replica_cols {
                if let Some(h) = l.whole_card_hours {
                    hours(ws, row, 12, h, f)?;
                }
                style.flag(ws, row, 13, l.unverified_node)?;
            }
            codes(ws, row, l.finance.as_ref())?;
            id(ws, row, crate::ledger::line_id::bill_line(team, l))?;
            row += 1;
        }
        if !bill.unallocated_share.is_zero() {
            texts(ws, row, "unallocated_share", "", "", "")?;
            money(ws, row, 10, bill.unallocated_share, &f.money)?;
            style.flag(ws, row, 11, false)?;
            codes(ws, row, team_codes)?;
            id(ws, row, crate::ledger::line_id::unallocated_share(team))?;
            row += 1;
        }
    }
    for r in st.restatements_of(team) {
        // in words, an earlier month's unallocated share says so by its line type, not by a code namespace
        let (ns, k) = if style.lang().is_some() && r.is_unallocated_share() {
            ("", "")
        } else {
            (r.namespace.as_str(), r.kind.as_str())
        };
        texts(ws, row, "restatement", ns, &r.gpu_model, k)?;
        if let Some(m) = r.original_month {
            ws.write_datetime_with_format(row, 2, month_date(m), &f.month)?;
        }
        hours(ws, row, 6, r.card_hours_delta, f)?;
        hours(ws, row, 7, r.effective_card_hours_delta, f)?;
        hours(ws, row, 8, r.unmetered_card_hours_delta, f)?;
        rate(ws, row, 9, r.rate, f)?;
        money(ws, row, 10, r.amount_delta, &f.money)?;
        style.flag(ws, row, 11, false)?;
        codes(ws, row, team_codes)?;
        id(ws, row, crate::ledger::line_id::restatement(r))?;
        row += 1;
    }
    for a in st.adjustments_of(team) {
        // an approved adjustment: a line of the total, its id where a line has its namespace (details below)
        texts(ws, row, "adjustment", &a.line_id(), "", "")?;
        if a.month != st.month {
            ws.write_datetime_with_format(row, 2, month_date(a.month), &f.month)?;
        }
        money(ws, row, 10, a.amount, &f.money)?;
        style.flag(ws, row, 11, false)?;
        codes(ws, row, team_codes)?;
        id(ws, row, a.line_id())?;
        row += 1;
    }
    let total = style.lang().map_or_else(|| "合计 total".to_string(), |l| glossary::term(l, "term.total"));
    ws.write_string_with_format(row, 1, total, &f.header)?;
    money(ws, row, 10, st.team_total(team), &f.bold_money)?;
    let row = adjustments_table(ws, row + 2, st, team, f, style)?;
    unit_cost_table(ws, row, st, team, f, style)?;
    ws.set_column_width(1, 18)?;
    ws.set_column_width(3, 20)?;
    ws.set_column_width(4, 24)?;
    Ok(())
}

/// The team's approved adjustments from row `row` (a title, a header, one row each: id, month corrected, amount,
/// reason, maker, checker); the row after it (two below the last), or `row` when there are none.
fn adjustments_table(
    ws: &mut Worksheet,
    mut row: u32,
    st: &Statement,
    team: &str,
    f: &Formats,
    style: Style,
) -> Result<u32, XlsxError> {
    let lines: Vec<_> = st.adjustments_of(team).collect();
    if lines.is_empty() {
        return Ok(row);
    }
    let lang = style.lang().unwrap_or(crate::glossary::Lang::Zh);
    ws.write_string_with_format(row, 1, glossary::term(lang, "term.adjustments"), &f.header)?;
    row += 1;
    const FIELDS: [&str; 6] = ["adjustment_id", "corrected_month", "amount", "reason", "entered_by", "approved_by"];
    for (c, field) in FIELDS.iter().enumerate() {
        ws.write_string_with_format(row, 1 + c as u16, glossary::term(lang, &format!("term.{field}")), &f.header)?;
        ws.write_string(row + 1, 1 + c as u16, *field)?;
    }
    ws.set_row_hidden(row + 1)?;
    row += 2;
    for a in lines {
        ws.write_string(row, 1, a.line_id())?;
        ws.write_datetime_with_format(row, 2, month_date(a.month), &f.month)?;
        money(ws, row, 3, a.amount, &f.money)?;
        ws.write_string(row, 4, &a.reason)?;
        ws.write_string(row, 5, crate::access::actor_name(&a.entered_by))?;
        ws.write_string(row, 6, a.decided_by.as_deref().map(crate::access::actor_name).unwrap_or(""))?;
        row += 1;
    }
    Ok(row + 1)
}

/// Layout 5: the team's unit cost of inference per model from row `row` (its title, header and one row per
/// model, from the second column: ¥ per million tokens and per thousand requests with 4 decimals, an empty cell
/// where there is none); nothing for a team without serving pods.
fn unit_cost_table(
    ws: &mut Worksheet,
    mut row: u32,
    st: &Statement,
    team: &str,
    f: &Formats,
    style: Style,
) -> Result<(), XlsxError> {
    let lines = st.unit_cost_of(team);
    let Some(lang) = style.lang().filter(|_| !lines.is_empty()) else { return Ok(()) };
    ws.write_string_with_format(row, 1, glossary::term(lang, "statement.unit_cost"), &f.header)?;
    row += 1;
    for (c, (_, field)) in UNIT_COST_HEADER.iter().enumerate() {
        ws.write_string_with_format(row, 1 + c as u16, glossary::term(lang, &format!("term.{field}")), &f.header)?;
        ws.write_string(row + 1, 1 + c as u16, *field)?;
    }
    ws.set_row_hidden(row + 1)?;
    row += 2;
    for u in lines {
        ws.write_string(row, 1, style.model(&u.model))?;
        ws.write_string(row, 2, crate::export::present::engine(lang, &u.engine))?;
        ws.write_with_format(row, 3, u.total_tokens as f64, &f.count)?;
        ws.write_with_format(row, 4, u.requests as f64, &f.count)?;
        for (col, d) in [(5, u.cost_per_million_tokens), (6, u.cost_per_thousand_requests)] {
            if let Some(d) = d {
                ws.write_with_format(row, col, d, &f.rate)?;
            }
        }
        money(ws, row, 7, u.idle_cost, &f.money)?;
        style.flag(ws, row, 8, u.unpriced)?;
        row += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sheet_names_fit_excel_and_stay_unique() {
        let mut used = Vec::new();
        let long = "a".repeat(40);
        assert_eq!(sheet_name("vision", &mut used), "vision");
        assert_eq!(sheet_name(&long, &mut used), "a".repeat(31));
        assert_eq!(sheet_name(&format!("{long}b"), &mut used), format!("{}~2", "a".repeat(29)));
        assert!(used.iter().all(|n| n.chars().count() <= 31));
    }
}
