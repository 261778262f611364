//! `/reports/quotas` (what each team was promised and used of it, and what its GPU pods waited; a team lead sees
//! its own teams) with its CSV and workbook, and `/reports/capacity-plan` (per GPU model: capacity, allocation,
//! waits and the what-if of N more cards; global readers) — the API's `GET /reports/quotas/{month}`,
//! `GET /reports/queue/{month}` and `GET /reports/capacity-plan`, from the same use cases (SPEC §10).

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{ReportLink, report_nav};
use crate::glossary::{self, Lang};
use crate::usecase::capacity_plan::{self, MAX_EXTRA_CARDS};
use crate::usecase::quotas::{self, QuotaHours, TeamWait};
use crate::usecase::report_exports::{self, Format};
use crate::usecase::state::AppState;
use crate::web::capability::PageGlobalReader;
use crate::web::extract::PageUser;
use crate::web::fmt::{card_hours_f64, count, percent, wait};
use crate::web::i18n::{PageLang, t};
use crate::web::layout::{Chrome, MonthQuery, PageError};

pub struct QuotaCells {
    pub guaranteed: String,
    pub used_within: String,
    pub borrowed: String,
    pub reserved_idle: String,
}

impl QuotaCells {
    fn of(f: &QuotaHours) -> Self {
        QuotaCells {
            guaranteed: card_hours_f64(f.guaranteed_card_hours),
            used_within: card_hours_f64(f.used_within_card_hours),
            borrowed: card_hours_f64(f.borrowed_card_hours),
            reserved_idle: card_hours_f64(f.reserved_idle_card_hours),
        }
    }
}

pub struct ScopeRow {
    pub kind: String,
    pub scope: String,
    pub figures: QuotaCells,
}

pub struct TeamQuotaRow {
    pub team: String,
    pub figures: QuotaCells,
    pub scopes: Vec<ScopeRow>,
}

pub struct WaitRow {
    pub team: String,
    pub pending_card_hours: String,
    pub pods_started: String,
    pub pods_waited: String,
    pub median: String,
    pub p90: String,
    pub never_ran: String,
}

impl WaitRow {
    fn of(lang: Lang, team: String, w: &TeamWait) -> Self {
        WaitRow {
            team,
            pending_card_hours: card_hours_f64(w.pending_card_hours),
            pods_started: count(w.pods_started as i64),
            pods_waited: count(w.pods_waited as i64),
            median: wait(lang, w.median_wait_seconds),
            p90: wait(lang, w.p90_wait_seconds),
            never_ran: count(w.never_ran as i64),
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "report_quotas.html")]
pub struct QuotasPage {
    pub c: Chrome,
    pub links: Vec<ReportLink>,
    pub month: String,
    pub teams: Vec<TeamQuotaRow>,
    pub total: QuotaCells,
    pub waits: Vec<WaitRow>,
    pub wait_total: WaitRow,
    pub download_query: String,
}

fn team_word(lang: Lang, team: &str) -> String {
    glossary::team_name(lang, team, team)
}

/// `GET /reports/quotas?month=YYYY-MM`.
pub async fn quotas_page(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    Query(q): Query<MonthQuery>,
) -> Result<QuotasPage, PageError> {
    let month = q.month(&s)?;
    let scope = user.principal.scope();
    let quota = quotas::quota_report(&s.cases, &scope, month).await?;
    let queue = quotas::queue_report(&s.cases, &scope, month).await?;
    let teams = quota
        .teams
        .iter()
        .map(|t| TeamQuotaRow {
            team: team_word(lang, &t.team),
            figures: QuotaCells::of(&t.figures),
            scopes: t
                .scopes
                .iter()
                .map(|sc| ScopeRow {
                    kind: glossary::term(lang, &format!("scope_kind.{}", sc.scope_kind)),
                    scope: sc.scope.clone(),
                    figures: QuotaCells::of(&sc.figures),
                })
                .collect(),
        })
        .collect();
    Ok(QuotasPage {
        c: Chrome::new(&user, lang, "/reports/utilization", format!("{} {month}", t(lang, "report.quotas"))),
        links: report_nav(lang, &user, "/reports/quotas", Some(&month.to_string())),
        month: month.to_string(),
        teams,
        total: QuotaCells::of(&quota.total),
        waits: queue.teams.iter().map(|w| WaitRow::of(lang, team_word(lang, &w.team), w)).collect(),
        wait_total: WaitRow::of(lang, crate::web::i18n::heading(lang, "line.total"), &queue.total),
        download_query: format!("month={month}&lang={}", lang.code()),
    })
}

async fn quotas_file(
    s: AppState,
    user: PageUser,
    lang: Lang,
    q: MonthQuery,
    queue: bool,
    format: Format,
) -> Result<Response, PageError> {
    let month = q.month(&s)?;
    let scope = user.principal.scope();
    let f = report_exports::quotas_file(&s.cases, &scope, month, queue, format, Some(lang)).await?;
    Ok(super::file_response(f))
}

/// `GET /reports/quotas.csv`: the quota scopes per team.
pub async fn quotas_csv(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    Query(q): Query<MonthQuery>,
) -> Result<Response, PageError> {
    quotas_file(s, user, lang, q, false, Format::Csv).await
}

/// `GET /reports/queue.csv`: the queue wait per team.
pub async fn queue_csv(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    Query(q): Query<MonthQuery>,
) -> Result<Response, PageError> {
    quotas_file(s, user, lang, q, true, Format::Csv).await
}

/// `GET /reports/quotas.xlsx`: both sheets.
pub async fn quotas_xlsx(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    Query(q): Query<MonthQuery>,
) -> Result<Response, PageError> {
    quotas_file(s, user, lang, q, false, Format::Xlsx).await
}

#[derive(Debug, Default, Deserialize)]
pub struct PlanForm {
    pub month: Option<String>,
    #[serde(default)]
    pub extra_cards: String,
}

pub struct OutcomeCells {
    pub capacity: String,
    pub pending_card_hours: String,
    pub pods_waited: String,
    pub median: String,
    pub p90: String,
    pub never_ran: String,
}

impl OutcomeCells {
    fn of(lang: Lang, o: &capacity_plan::ReplayView) -> Self {
        OutcomeCells {
            capacity: card_hours_f64(o.capacity_cards),
            pending_card_hours: card_hours_f64(o.pending_card_hours),
            pods_waited: count(o.pods_waited as i64),
            median: wait(lang, o.median_wait_seconds),
            p90: wait(lang, o.p90_wait_seconds),
            never_ran: count(o.never_ran as i64),
        }
    }
}

pub struct ModelRow {
    pub gpu_model: String,
    pub capacity_cards: String,
    pub allocation_rate: String,
    pub pending_card_hours: String,
    pub pods_started: String,
    pub pods_waited: String,
    pub median: String,
    pub p90: String,
    pub today: OutcomeCells,
    pub with_extra: OutcomeCells,
    pub saved: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "report_capacity_plan.html")]
pub struct CapacityPlanPage {
    pub c: Chrome,
    pub links: Vec<ReportLink>,
    pub month: String,
    pub extra_cards: String,
    pub error: String,
    pub models: Vec<ModelRow>,
}

/// `GET /reports/capacity-plan?month=YYYY-MM&extra_cards=N`.
pub async fn capacity_plan_page(
    State(s): State<AppState>,
    PageGlobalReader(user): PageGlobalReader,
    PageLang(lang): PageLang,
    Query(q): Query<PlanForm>,
) -> Result<Response, PageError> {
    let month = MonthQuery { month: q.month.clone() }.month(&s)?;
    let c = Chrome::new(&user, lang, "/reports/utilization", format!("{} {month}", t(lang, "report.capacity_plan")));
    let links = report_nav(lang, &user, "/reports/capacity-plan", Some(&month.to_string()));
    let typed = q.extra_cards.trim();
    let extra = match typed {
        "" => Ok(8),
        v => v.parse::<u32>().ok().filter(|n| *n <= MAX_EXTRA_CARDS).ok_or(()),
    };
    let mut page = CapacityPlanPage {
        c,
        links,
        month: month.to_string(),
        extra_cards: if typed.is_empty() { "8".into() } else { typed.to_string() },
        error: String::new(),
        models: Vec::new(),
    };
    let Ok(extra) = extra else {
        page.error = t(lang, "capacity_plan.extra_error").to_string();
        return Ok((axum::http::StatusCode::UNPROCESSABLE_ENTITY, page).into_response());
    };
    let plan = capacity_plan::capacity_plan(&s.cases, &user.principal.scope(), month, extra).await?;
    page.models = plan
        .models
        .iter()
        .map(|m| {
            let secs = |s: Option<f64>| wait(lang, s);
            ModelRow {
                gpu_model: glossary::model(lang, &m.gpu_model),
                capacity_cards: card_hours_f64(m.capacity_cards),
                allocation_rate: percent(m.allocation_rate),
                pending_card_hours: card_hours_f64(m.pending_card_hours),
                pods_started: count(m.pods_started as i64),
                pods_waited: count(m.pods_waited as i64),
                median: secs(m.median_wait_seconds),
                p90: secs(m.p90_wait_seconds),
                today: OutcomeCells::of(lang, &m.what_if.today),
                with_extra: OutcomeCells::of(lang, &m.what_if.with_extra),
                saved: card_hours_f64(m.what_if.saved_pending_card_hours),
            }
        })
        .collect();
    Ok(page.into_response())
}
