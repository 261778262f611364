//! The reports and the idle list as files (CSV, workbook): the same figures as their JSON and pages — one use case
//! each computes them — laid out as [`ReportTable`]s with their window, rule and total row. Each face asks for a
//! [`ReportFile`] by [`ReportKind`] and gets bytes, a content type and a file name.

use chrono::{DateTime, Utc};

use super::{Error, Services};
use crate::access::Scope;
use crate::billing::Month;
use crate::export::table::{Cell, Column, ReportTable, Writing, column, report_csv, report_xlsx};
use crate::glossary::Lang;
use crate::money::Money;
use crate::validate::ClusterName;
use crate::waste::{OversubscriptionRow, UtilizationReport, WastefulPod};

/// A file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Xlsx,
}

impl Format {
    pub fn ext(self) -> &'static str {
        match self {
            Format::Csv => "csv",
            Format::Xlsx => "xlsx",
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::Csv => "text/csv; charset=utf-8",
            Format::Xlsx => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        }
    }
}

/// A report file: its bytes and its name (`cardhour-<report>[-<period>].<ext>`).
#[derive(Debug, Clone)]
pub struct ReportFile {
    pub name: String,
    pub format: Format,
    pub bytes: Vec<u8>,
}

/// Writes `tables` (a CSV holds the first) in `format`: a CSV's words only when `words` asks, a workbook always in
/// a language (`words`, else zh-CN).
fn file(
    tables: Vec<ReportTable>,
    format: Format,
    words: Option<Lang>,
    tz: chrono_tz::Tz,
    name: String,
) -> Result<ReportFile, Error> {
    let bytes = match format {
        Format::Csv => {
            let first = tables
                .into_iter()
                .next()
                .ok_or_else(|| Error::Internal(anyhow::anyhow!("a report without a table")))?;
            report_csv(&first, Writing { words, tz }).map_err(|e| Error::Internal(e.into()))?
        }
        Format::Xlsx => report_xlsx(&tables, words.unwrap_or_default(), tz).map_err(|e| Error::Internal(e.into()))?,
    };
    Ok(ReportFile { name: format!("{name}.{}", format.ext()), format, bytes })
}

const IDLE_COLUMNS: [Column; 16] = [
    column("window_from", "term.window_from"),
    column("window_to", "term.window_to"),
    column("cluster", "term.cluster"),
    column("team", "term.team"),
    column("owner", "term.owner"),
    column("namespace", "term.namespace"),
    column("pod", "term.pod"),
    column("gpu_model", "term.gpu_model"),
    column("cards_held", "term.cards_held"),
    column("hours_held", "term.hours_held"),
    column("average_utilization", "term.average_utilization"),
    column("peak_fb_used_mib", "term.peak_fb_used_mib"),
    column("rate", "term.rate"),
    column("idle_spend", "term.idle_spend"),
    column("still_running", "term.still_running"),
    column("monthly_projection", "term.monthly_projection"),
];

/// The idle list of `ask` (within `scope`) as a file: a row per pod with its window, the money spent idle in it
/// and (labelled a projection) the monthly cost of the pods still running; the total row sums both.
pub async fn idle_file(
    s: &Services,
    scope: &Scope,
    ask: &super::idle::IdleAsk,
    format: Format,
    words: Option<Lang>,
    now: DateTime<Utc>,
) -> Result<ReportFile, Error> {
    let v = super::idle::idle_view(s, scope, ask, now).await?;
    let rows = v
        .pods
        .iter()
        .map(|p| {
            vec![
                Cell::Time(v.from),
                Cell::Time(v.to),
                Cell::Text(p.cluster.clone()),
                Cell::Text(p.team.clone()),
                Cell::Text(p.owner.clone().unwrap_or_default()),
                Cell::Text(p.namespace.clone()),
                Cell::Text(p.pod.clone()),
                Cell::Code("model", p.gpu_model.clone()),
                Cell::Hours(p.cards_held),
                Cell::Hours(p.hours_held),
                Cell::Ratio(Some(p.average_utilization)),
                Cell::Mib(p.peak_fb_used_mib),
                Cell::Rate(p.rate),
                Cell::Money(p.idle_spend),
                Cell::Flag(p.still_running),
                p.monthly_projection.map_or(Cell::Empty, Cell::Money),
            ]
        })
        .collect();
    let mut total = vec![Cell::Empty; IDLE_COLUMNS.len()];
    total[0] = Cell::Code("line", "total".into());
    total[13] = Cell::Money(v.spent);
    total[15] = Cell::Money(v.projected);
    let table = ReportTable {
        title: "report.idle",
        facts: vec![
            ("term.window_from", Cell::Time(v.from)),
            ("term.window_to", Cell::Time(v.to)),
            ("term.window_hours", Cell::Count(i64::from(v.hours))),
            ("term.max_utilization", Cell::Ratio(Some(v.rule.max_utilization))),
            ("term.min_memory_mib", Cell::Mib(v.rule.min_memory_mib)),
        ],
        columns: IDLE_COLUMNS.to_vec(),
        rows,
        total: Some(total),
    };
    let name = format!("cardhour-idle-{}", v.to.with_timezone(&s.billing_tz).format("%Y%m%d%H%M"));
    file(vec![table], format, words, s.billing_tz, name)
}

const LOW_COLUMNS: [Column; 15] = [
    column("window_from", "term.window_from"),
    column("window_to", "term.window_to"),
    column("cluster", "term.cluster"),
    column("team", "term.team"),
    column("owner", "term.owner"),
    column("namespace", "term.namespace"),
    column("pod", "term.pod"),
    column("gpu_model", "term.gpu_model"),
    column("gpu_hours", "term.gpu_hours"),
    column("effective_gpu_hours", "term.effective_gpu_hours"),
    column("wasted_gpu_hours", "term.wasted_gpu_hours"),
    column("utilization", "term.utilization"),
    column("rate", "term.rate"),
    column("wasted_amount", "term.wasted_amount"),
    column("wasted_per_month", "term.wasted_per_month"),
];

/// The low-utilization top N of `[from, to)` (within `scope`) as a file; the total row sums hours and money.
pub async fn low_utilization_file(
    s: &Services,
    scope: &Scope,
    (from, to, top): (DateTime<Utc>, DateTime<Utc>, i64),
    format: Format,
    words: Option<Lang>,
) -> Result<ReportFile, Error> {
    let pods: Vec<WastefulPod> = super::reports::low_utilization(s, scope, from, to, top).await?;
    let rows = pods
        .iter()
        .map(|p| {
            vec![
                Cell::Time(from),
                Cell::Time(to),
                Cell::Text(p.cluster.clone()),
                Cell::Text(p.team.clone()),
                Cell::Text(p.owner.clone().unwrap_or_default()),
                Cell::Text(p.namespace.clone()),
                Cell::Text(p.pod.clone()),
                Cell::Code("model", p.gpu_model.clone()),
                Cell::Hours(p.gpu_hours),
                Cell::Hours(p.effective_gpu_hours),
                Cell::Hours(p.wasted_gpu_hours),
                Cell::Ratio(p.utilization),
                Cell::Rate(p.rate),
                Cell::Money(p.wasted_amount),
                Cell::Money(p.wasted_per_month),
            ]
        })
        .collect();
    let mut total = vec![Cell::Empty; LOW_COLUMNS.len()];
    total[0] = Cell::Code("line", "total".into());
    total[8] = Cell::Hours(pods.iter().map(|p| p.gpu_hours).sum());
    total[9] = Cell::Hours(pods.iter().map(|p| p.effective_gpu_hours).sum());
    total[10] = Cell::Hours(pods.iter().map(|p| p.wasted_gpu_hours).sum());
    total[13] = Cell::Money(pods.iter().map(|p| p.wasted_amount).sum());
    total[14] = Cell::Money(pods.iter().map(|p| p.wasted_per_month).sum());
    let table = ReportTable {
        title: "report.low_utilization",
        facts: vec![
            ("term.window_from", Cell::Time(from)),
            ("term.window_to", Cell::Time(to)),
            ("term.top", Cell::Count(top)),
        ],
        columns: LOW_COLUMNS.to_vec(),
        rows,
        total: Some(total),
    };
    let name = format!("cardhour-low-utilization-{}", to.with_timezone(&s.billing_tz).format("%Y%m%d%H%M"));
    file(vec![table], format, words, s.billing_tz, name)
}

const DAY_COLUMNS: [Column; 9] = [
    column("day", "term.day"),
    column("capacity_card_hours", "term.capacity_card_hours"),
    column("offered_card_hours", "term.offered_card_hours"),
    column("gpu_hours", "term.gpu_hours"),
    column("effective_gpu_hours", "term.effective_gpu_hours"),
    column("unmetered_gpu_hours", "term.unmetered_card_hours"),
    column("allocation_rate", "term.allocation_rate"),
    column("utilization", "term.utilization"),
    column("effective_rate", "term.effective_rate"),
];

const TEAM_COLUMNS: [Column; 6] = [
    column("team", "term.team"),
    column("gpu_hours", "term.gpu_hours"),
    column("effective_gpu_hours", "term.effective_gpu_hours"),
    column("unmetered_gpu_hours", "term.unmetered_card_hours"),
    column("utilization", "term.utilization"),
    column("share_of_capacity", "term.share_of_capacity"),
];

fn figures_row(first: Cell, f: &crate::waste::Figures) -> Vec<Cell> {
    vec![
        first,
        Cell::Hours(f.capacity_card_hours),
        Cell::Hours(f.offered_card_hours),
        Cell::Hours(f.gpu_hours),
        Cell::Hours(f.effective_gpu_hours),
        Cell::Hours(f.unmetered_gpu_hours),
        Cell::Ratio(f.allocation_rate),
        Cell::Ratio(f.utilization),
        Cell::Ratio(f.effective_rate),
    ]
}

/// The month's utilization report as a file (global readers): per billing day with the month's row as total; the
/// workbook adds a sheet per team (the CSV holds the days).
pub async fn utilization_file(
    s: &Services,
    scope: &Scope,
    month: Month,
    format: Format,
    words: Option<Lang>,
) -> Result<ReportFile, Error> {
    let r: UtilizationReport = super::reports::month_utilization(s, scope, month).await?;
    let days = ReportTable {
        title: "report.utilization_days",
        facts: vec![("term.month", Cell::Text(month.to_string()))],
        columns: DAY_COLUMNS.to_vec(),
        rows: r.days.iter().map(|d| figures_row(Cell::Day(d.day), &d.figures)).collect(),
        total: Some(figures_row(Cell::Code("line", "total".into()), &r.totals)),
    };
    let teams = ReportTable {
        title: "report.utilization_teams",
        facts: vec![("term.month", Cell::Text(month.to_string()))],
        columns: TEAM_COLUMNS.to_vec(),
        rows: r
            .teams
            .iter()
            .map(|t| {
                vec![
                    Cell::Text(t.team.clone()),
                    Cell::Hours(t.gpu_hours),
                    Cell::Hours(t.effective_gpu_hours),
                    Cell::Hours(t.unmetered_gpu_hours),
                    Cell::Ratio(t.utilization),
                    Cell::Ratio(t.share_of_capacity),
                ]
            })
            .collect(),
        total: None,
    };
    file(vec![days, teams], format, words, s.billing_tz, format!("cardhour-utilization-{month}"))
}

const TIER_COLUMNS: [Column; 8] = [
    column("rank", "term.rank"),
    column("team", "term.team"),
    column("team_name", "term.team_name"),
    column("gpu_hours", "term.gpu_hours"),
    column("effective_gpu_hours", "term.effective_gpu_hours"),
    column("utilization", "term.utilization"),
    column("tier", "term.tier"),
    column("cost", "term.cost"),
];

/// The month's efficiency tiers and team ranking as a file (global readers): each team's rank, utilization, tier
/// (≥ 70 % golden, 50–70 % silver, < 50 % bronze; none without metered time) and cost; the `unassigned` team is
/// listed without a tier or a rank (it is no team to rank); the total row sums hours and cost.
pub async fn tiers_file(
    s: &Services,
    scope: &Scope,
    month: Month,
    format: Format,
    words: Option<Lang>,
) -> Result<ReportFile, Error> {
    let ranking = super::reports::team_ranking(s, scope, month).await?;
    let st = super::statements::statement(s, month, crate::billing::PolicyChoice::NONE).await?;
    let mut rows = Vec::new();
    let mut rank = 0;
    for t in &ranking {
        let unassigned = t.team == "unassigned";
        let tier = if unassigned { None } else { super::tiers::Tier::of(t.utilization) };
        if !unassigned {
            rank += 1;
        }
        let name = st.teams.get(&t.team).map_or(t.team.as_str(), |i| i.name.as_str());
        rows.push(vec![
            if unassigned { Cell::Empty } else { Cell::Count(rank) },
            Cell::Text(t.team.clone()),
            if unassigned { Cell::Code("team", t.team.clone()) } else { Cell::Text(name.to_string()) },
            Cell::Hours(t.gpu_hours),
            Cell::Hours(t.effective_gpu_hours),
            Cell::Ratio(t.utilization),
            tier.map_or(Cell::Code("tier", "none".into()), |t| Cell::Code("tier", t.as_str().into())),
            Cell::Money(t.cost),
        ]);
    }
    let mut total = vec![Cell::Empty; TIER_COLUMNS.len()];
    total[0] = Cell::Code("line", "total".into());
    total[3] = Cell::Hours(ranking.iter().map(|t| t.gpu_hours).sum());
    total[4] = Cell::Hours(ranking.iter().map(|t| t.effective_gpu_hours).sum());
    total[7] = Cell::Money(ranking.iter().map(|t| t.cost).sum::<Money>());
    let table = ReportTable {
        title: "report.tiers",
        facts: vec![("term.month", Cell::Text(month.to_string()))],
        columns: TIER_COLUMNS.to_vec(),
        rows,
        total: Some(total),
    };
    file(vec![table], format, words, s.billing_tz, format!("cardhour-tiers-{month}"))
}

const OVERSUB_COLUMNS: [Column; 14] = [
    column("level", "term.scope_level"),
    column("day", "term.day"),
    column("cluster", "term.cluster"),
    column("node", "term.node"),
    column("gpu_model", "term.gpu_model"),
    column("card_hours", "term.capacity_card_hours"),
    column("held_card_hours", "term.held_card_hours"),
    column("promised_card_hours", "term.promised_card_hours"),
    column("compute_ratio", "term.compute_ratio"),
    column("promised_memory_card_hours", "term.promised_memory_card_hours"),
    column("memory_ratio", "term.memory_ratio"),
    column("busy", "term.busy"),
    column("utilization", "term.utilization"),
    column("unmetered_card_hours", "term.unmetered_card_hours"),
];

fn oversub_row(level: &str, r: &OversubscriptionRow) -> Vec<Cell> {
    vec![
        Cell::Code("level", level.into()),
        Cell::Day(r.day),
        Cell::Text(r.cluster.clone()),
        Cell::Text(r.node.clone().unwrap_or_default()),
        r.gpu_model.clone().map_or(Cell::Empty, |m| Cell::Code("model", m)),
        Cell::Hours(r.card_hours),
        Cell::Hours(r.held_card_hours),
        Cell::Hours(r.promised_card_hours),
        Cell::Ratio(r.compute_ratio),
        Cell::Hours(r.promised_memory_card_hours),
        Cell::Ratio(r.memory_ratio),
        Cell::Ratio(r.busy),
        Cell::Ratio(r.utilization),
        Cell::Hours(r.unmetered_card_hours),
    ]
}

/// Oversubscription over `[from, to)` as a file (global readers): the clusters' rows first (the summary), then
/// the GPU models', then the nodes', per day.
pub async fn oversubscription_file(
    s: &Services,
    scope: &Scope,
    (from, to): (DateTime<Utc>, DateTime<Utc>),
    cluster: Option<&ClusterName>,
    format: Format,
    words: Option<Lang>,
) -> Result<ReportFile, Error> {
    let r = super::reports::oversubscription(s, scope, from, to, cluster).await?;
    let rows = r
        .clusters
        .iter()
        .map(|x| oversub_row("cluster", x))
        .chain(r.gpu_models.iter().map(|x| oversub_row("gpu_model", x)))
        .chain(r.nodes.iter().map(|x| oversub_row("node", x)))
        .collect();
    let table = ReportTable {
        title: "report.oversubscription",
        facts: vec![("term.window_from", Cell::Time(from)), ("term.window_to", Cell::Time(to))],
        columns: OVERSUB_COLUMNS.to_vec(),
        rows,
        total: None,
    };
    let name = format!("cardhour-oversubscription-{}", to.with_timezone(&s.billing_tz).format("%Y%m%d%H%M"));
    file(vec![table], format, words, s.billing_tz, name)
}

const UNIT_COST_COLUMNS: [Column; 14] = [
    column("group", "term.group"),
    column("engine", "term.engine"),
    column("input_tokens", "term.input_tokens"),
    column("output_tokens", "term.output_tokens"),
    column("total_tokens", "term.total_tokens"),
    column("requests", "term.requests"),
    column("serving_cost", "term.serving_cost"),
    column("cost_per_million_input_tokens", "term.cost_per_million_input_tokens"),
    column("cost_per_million_output_tokens", "term.cost_per_million_output_tokens"),
    column("cost_per_million_tokens", "term.cost_per_million_tokens"),
    column("cost_per_thousand_requests", "term.cost_per_thousand_requests"),
    column("tokens_per_gpu_hour", "term.tokens_per_gpu_hour"),
    column("idle_serving_cost", "term.idle_serving_cost"),
    column("idle_gpu_hours", "term.idle_gpu_hours"),
];

fn unit_cost_row(first: Cell, r: &crate::billing::UnitCostRow) -> Vec<Cell> {
    use crate::billing::unit_cost::UNIT_COST_DP;
    vec![
        first,
        r.engine.clone().map_or(Cell::Empty, |e| Cell::Code("engine", e)),
        Cell::Count(r.input_tokens),
        Cell::Count(r.output_tokens),
        Cell::Count(r.total_tokens),
        Cell::Count(r.requests),
        Cell::Money(r.serving_cost),
        Cell::Decimal(r.cost_per_million_input_tokens, UNIT_COST_DP),
        Cell::Decimal(r.cost_per_million_output_tokens, UNIT_COST_DP),
        Cell::Decimal(r.cost_per_million_tokens, UNIT_COST_DP),
        Cell::Decimal(r.cost_per_thousand_requests, UNIT_COST_DP),
        Cell::Decimal(r.tokens_per_gpu_hour, 2),
        Cell::Money(r.idle_cost),
        Cell::Decimal(Some(r.idle_gpu_hours), 3),
    ]
}

/// The unit-cost report of billing days `[from, to)` grouped by `group` (within `scope`) as a file: a row per
/// group with its tokens, requests, cost and unit costs (4 decimals of ¥), idle serving cost apart, a total row.
pub async fn unit_cost_file(
    s: &Services,
    scope: &Scope,
    (from, to): (chrono::NaiveDate, chrono::NaiveDate),
    group: crate::billing::UnitGroup,
    format: Format,
    words: Option<Lang>,
) -> Result<ReportFile, Error> {
    let report = super::unit_cost::report(s, scope, from, to, group).await?;
    let rows = report
        .rows
        .iter()
        .map(|r| {
            let first = match group {
                crate::billing::UnitGroup::Engine => Cell::Code("engine", r.key.clone()),
                crate::billing::UnitGroup::Team => Cell::Code("team", r.key.clone()),
                _ => Cell::Text(r.key.clone()),
            };
            unit_cost_row(first, r)
        })
        .collect();
    let table = ReportTable {
        title: "report.unit_cost",
        facts: vec![
            ("term.first_day", Cell::Day(from)),
            ("term.last_day", Cell::Day(to.pred_opt().unwrap_or(to))),
            ("term.group_by", Cell::Code("group", group.as_str().to_string())),
        ],
        columns: UNIT_COST_COLUMNS.to_vec(),
        rows,
        total: Some(unit_cost_row(Cell::Code("line", "total".into()), &report.total)),
    };
    let name = format!("cardhour-unit-cost-{}-{}", from.format("%Y%m%d"), to.format("%Y%m%d"));
    file(vec![table], format, words, s.billing_tz, name)
}

const QUOTA_COLUMNS: [Column; 7] = [
    column("team", "term.team"),
    column("scope_kind", "term.scope_kind"),
    column("scope", "term.quota_scope"),
    column("guaranteed_card_hours", "term.guaranteed_card_hours"),
    column("used_within_card_hours", "term.used_within_card_hours"),
    column("borrowed_card_hours", "term.borrowed_card_hours"),
    column("reserved_idle_card_hours", "term.reserved_idle_card_hours"),
];

const QUEUE_COLUMNS: [Column; 7] = [
    column("team", "term.team"),
    column("pending_card_hours", "term.pending_card_hours"),
    column("pods_started", "term.pods_started"),
    column("pods_waited", "term.pods_waited"),
    column("median_wait_seconds", "term.median_wait_seconds"),
    column("p90_wait_seconds", "term.p90_wait_seconds"),
    column("never_ran", "term.never_ran"),
];

fn quota_cells(f: &super::quotas::QuotaHours) -> [Cell; 4] {
    [
        Cell::Hours(f.guaranteed_card_hours),
        Cell::Hours(f.used_within_card_hours),
        Cell::Hours(f.borrowed_card_hours),
        Cell::Hours(f.reserved_idle_card_hours),
    ]
}

fn queue_row(first: Cell, w: &super::quotas::TeamWait) -> Vec<Cell> {
    let seconds = |s: Option<f64>| s.map_or(Cell::Empty, |s| Cell::Count(s.round() as i64));
    vec![
        first,
        Cell::Hours(w.pending_card_hours),
        Cell::Count(w.pods_started as i64),
        Cell::Count(w.pods_waited as i64),
        seconds(w.median_wait_seconds),
        seconds(w.p90_wait_seconds),
        Cell::Count(w.never_ran as i64),
    ]
}

/// The month's quotas and queue wait (SPEC §10) as a file, within `scope`: the CSV holds the quota scopes (a row
/// per team and scope, a total row) — or, `queue_first`, the queue wait per team; the workbook both sheets.
pub async fn quotas_file(
    s: &Services,
    scope: &Scope,
    month: Month,
    queue_first: bool,
    format: Format,
    words: Option<Lang>,
) -> Result<ReportFile, Error> {
    let quotas = super::quotas::quota_report(s, scope, month).await?;
    let queue = super::quotas::queue_report(s, scope, month).await?;
    let quota_table = ReportTable {
        title: "report.quotas",
        facts: vec![("term.month", Cell::Text(month.to_string()))],
        columns: QUOTA_COLUMNS.to_vec(),
        rows: quotas
            .teams
            .iter()
            .flat_map(|t| {
                t.scopes.iter().map(|sc| {
                    let mut row = vec![
                        Cell::Code("team", t.team.clone()),
                        Cell::Code("scope_kind", sc.scope_kind.clone()),
                        Cell::Text(sc.scope.clone()),
                    ];
                    row.extend(quota_cells(&sc.figures));
                    row
                })
            })
            .collect(),
        total: Some({
            let mut row = vec![Cell::Code("line", "total".into()), Cell::Empty, Cell::Empty];
            row.extend(quota_cells(&quotas.total));
            row
        }),
    };
    let queue_table = ReportTable {
        title: "report.queue",
        facts: vec![("term.month", Cell::Text(month.to_string()))],
        columns: QUEUE_COLUMNS.to_vec(),
        rows: queue.teams.iter().map(|t| queue_row(Cell::Code("team", t.team.clone()), t)).collect(),
        total: Some(queue_row(Cell::Code("line", "total".into()), &queue.total)),
    };
    let (tables, name) = match queue_first {
        true => (vec![queue_table, quota_table], format!("cardhour-queue-{month}")),
        false => (vec![quota_table, queue_table], format!("cardhour-quotas-{month}")),
    };
    file(tables, format, words, s.billing_tz, name)
}
