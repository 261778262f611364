//! The home pages: for finance, admin and viewers the month at a glance; for a team lead its own team's home
//! (`/` shows the first of its teams, `/teams/{team}` any of them; another team is not found).

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::Utc;
use rust_decimal::prelude::ToPrimitive;

use super::fmt::{card_hours_f64, change, count, percent, unit_yuan, yuan};
use super::i18n::{PageLang, t};
use super::layout::{Chrome, MonthQuery, PageError};
use super::page_path::PagePath;
use crate::billing::Month;
use crate::export::Lang;
use crate::ledger::MonthStatus;
use crate::usecase::state::AppState;
use crate::usecase::{months, team_home};
use crate::validate::TeamId;
use crate::web::extract::PageUser;

/// The links to the month before and after `month` on a home (none after the current month).
pub struct MonthNav {
    pub prev: String,
    pub next: Option<String>,
}

impl MonthNav {
    fn around(s: &AppState, month: Month) -> Self {
        let current = months::current(&s.cases, Utc::now());
        let next = month.next();
        MonthNav { prev: month.prev().to_string(), next: (next <= current).then(|| next.to_string()) }
    }
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/", get(home)).route("/teams/{team}", get(team))
}

pub struct SpendRow {
    pub team: String,
    pub name: String,
    pub total: String,
    pub change: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "home.html")]
pub struct OverviewPage {
    pub c: Chrome,
    pub month: String,
    pub months: MonthNav,
    pub closed: bool,
    pub status: &'static str,
    pub total: String,
    pub change: String,
    pub forecast: Option<String>,
    pub capacity_cost: String,
    pub allocated: String,
    pub unallocated: String,
    pub platform_kept: String,
    pub allocation_rate: String,
    pub utilization: String,
    pub effective_rate: String,
    pub teams: Vec<SpendRow>,
}

async fn home(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    Query(q): Query<MonthQuery>,
) -> Result<Response, PageError> {
    let scope = user.principal.scope();
    let month = q.month(&s)?;
    if !scope.is_global() {
        let first = user.principal.teams.first().ok_or(PageError::NotFound)?;
        let first = TeamId::parse("team", first).map_err(|_| PageError::NotFound)?;
        return Ok(team_page(&s, &user, lang, &first, month, "/").await?.into_response());
    }
    let now = Utc::now();
    let o = months::overview(&s.cases, &scope, month, crate::billing::PolicyChoice::NONE, now).await?;
    let f = &o.figures;
    Ok(OverviewPage {
        c: Chrome::new(&user, lang, "/", t(lang, "home.overview")),
        month: o.month.to_string(),
        months: MonthNav::around(&s, o.month),
        closed: o.status == MonthStatus::Closed,
        status: super::bills::status_word(lang, o.status),
        total: yuan(o.total),
        // like with like: both months under the view's policy, extrapolated from covered hours unless complete
        change: change(o.comparison.current, o.comparison.previous),
        forecast: o.forecast.as_ref().map(|f| yuan(f.forecast)),
        capacity_cost: yuan(o.capacity_cost),
        allocated: yuan(o.allocated),
        unallocated: yuan(o.unallocated),
        platform_kept: yuan(o.platform_kept),
        allocation_rate: percent(f.allocation_rate),
        utilization: percent(f.utilization),
        effective_rate: percent(f.effective_rate),
        teams: o
            .teams
            .iter()
            .map(|r| SpendRow {
                team: r.team.clone(),
                name: r.name.clone(),
                total: yuan(r.total),
                change: change(r.total, r.previous),
            })
            .collect(),
    }
    .into_response())
}

pub struct UsageLine {
    pub key: String,
    pub gpu_hours: String,
    pub effective_gpu_hours: String,
    pub utilization: String,
}

pub struct PodLine {
    pub namespace: String,
    pub pod: String,
    pub owner: String,
    pub gpu_model: String,
    pub utilization: String,
    /// Cards held (idle) or wasted GPU-hours (low efficiency).
    pub figure: String,
    pub money: String,
}

/// One model of the team's serving pods in the month: what a million tokens and a thousand requests cost.
pub struct UnitLine {
    pub model: String,
    pub engine: String,
    pub tokens: String,
    pub per_million: String,
    pub per_thousand_requests: String,
    pub idle_cost: String,
    /// Some of its hours ran on a GPU model without a rate (their cost counted as 0), marked as the report marks it.
    pub unpriced: bool,
}

#[derive(Template, WebTemplate)]
#[template(path = "team_home.html")]
pub struct TeamPage {
    pub c: Chrome,
    pub team: String,
    pub name: String,
    pub owner: String,
    pub month: String,
    pub months: MonthNav,
    pub spent: String,
    pub budget: Option<String>,
    pub forecast: String,
    pub trend_svg: String,
    pub by_namespace: Vec<UsageLine>,
    pub by_model: Vec<UsageLine>,
    pub idle: Vec<PodLine>,
    pub idle_monthly: String,
    pub low_efficiency: Vec<PodLine>,
    /// The month's unit cost of inference per model (empty: the team serves nothing; the section is left out).
    pub unit_costs: Vec<UnitLine>,
    /// The unit-cost report of the month, in full.
    pub unit_cost_href: String,
    /// The team's guarantee, its use and its pods' wait this month (SPEC §10); `None`: no quota and no GPU pod.
    pub quota: Option<QuotaLine>,
    pub wait: Option<WaitLine>,
    pub quotas_href: String,
}

/// The team's quota figures in the month.
pub struct QuotaLine {
    pub guaranteed: String,
    pub used_within: String,
    pub borrowed: String,
    pub reserved_idle: String,
    pub scopes: String,
}

/// The team's GPU pods' wait in the month.
pub struct WaitLine {
    pub pending_card_hours: String,
    pub pods_waited: String,
    pub pods_started: String,
    pub median: String,
    pub p90: String,
    pub never_ran: String,
}

impl TeamPage {
    /// Whether a model of the unit-cost section has unpriced hours (the section then says what that means).
    pub fn any_unpriced_unit_cost(&self) -> bool {
        self.unit_costs.iter().any(|r| r.unpriced)
    }
}

fn usage_lines(
    rows: &[crate::usecase::usage::UsageRow],
    key: impl Fn(&crate::usecase::usage::UsageRow) -> Option<String>,
) -> Vec<UsageLine> {
    rows.iter()
        .map(|r| UsageLine {
            key: key(r).unwrap_or_default(),
            gpu_hours: card_hours_f64(r.gpu_hours),
            effective_gpu_hours: card_hours_f64(r.effective_gpu_hours),
            utilization: percent(r.utilization),
        })
        .collect()
}

async fn team_page(
    s: &AppState,
    user: &PageUser,
    lang: Lang,
    team: &TeamId,
    month: Month,
    active: &str,
) -> Result<TeamPage, PageError> {
    let h = team_home::team_home(&s.cases, &user.principal.scope(), team, month, Utc::now()).await?;
    let bars: Vec<(String, f64, String)> =
        h.trend.iter().map(|(m, v)| (m.to_string(), v.as_decimal().to_f64().unwrap_or(0.0), yuan(*v))).collect();
    Ok(TeamPage {
        c: Chrome::new(user, lang, active, format!("{} {}", t(lang, "home.team"), h.name)),
        owner: h.owner.clone().unwrap_or_else(|| "—".into()),
        month: h.month.to_string(),
        months: MonthNav::around(s, h.month),
        spent: yuan(h.spent),
        budget: h.budget.map(yuan),
        forecast: yuan(h.forecast),
        trend_svg: super::chart::columns(&bars, 860, 260),
        by_namespace: usage_lines(&h.by_namespace, |r| r.namespace.clone()),
        by_model: usage_lines(&h.by_model, |r| r.gpu_model.clone()),
        idle: h
            .idle
            .iter()
            .map(|p| PodLine {
                namespace: p.namespace.clone(),
                pod: p.pod.clone(),
                owner: p.owner.clone().unwrap_or_else(|| "—".into()),
                gpu_model: p.gpu_model.clone(),
                utilization: percent(Some(p.average_utilization)),
                figure: card_hours_f64(p.cards_held),
                money: p.monthly_projection.map_or_else(|| "—".into(), yuan),
            })
            .collect(),
        idle_monthly: yuan(h.idle_monthly),
        low_efficiency: h
            .low_efficiency
            .iter()
            .map(|p| PodLine {
                namespace: p.namespace.clone(),
                pod: p.pod.clone(),
                owner: p.owner.clone().unwrap_or_else(|| "—".into()),
                gpu_model: p.gpu_model.clone(),
                utilization: percent(p.utilization),
                figure: card_hours_f64(p.wasted_gpu_hours),
                money: yuan(p.wasted_amount),
            })
            .collect(),
        unit_costs: h
            .unit_costs
            .iter()
            .map(|r| UnitLine {
                model: r.model.clone(),
                // the engine by its name, as every face prints it (`vLLM`, never the code `vllm`)
                engine: crate::export::present::engine(lang, &r.engine),
                tokens: count(r.total_tokens),
                per_million: unit_yuan(r.cost_per_million_tokens),
                per_thousand_requests: unit_yuan(r.cost_per_thousand_requests),
                idle_cost: yuan(r.idle_cost),
                unpriced: r.unpriced,
            })
            .collect(),
        quota: h.quota.as_ref().map(|q| QuotaLine {
            guaranteed: card_hours_f64(q.figures.guaranteed_card_hours),
            used_within: card_hours_f64(q.figures.used_within_card_hours),
            borrowed: card_hours_f64(q.figures.borrowed_card_hours),
            reserved_idle: card_hours_f64(q.figures.reserved_idle_card_hours),
            scopes: q.scopes.iter().map(|s| s.scope.as_str()).collect::<Vec<_>>().join(", "),
        }),
        wait: h.wait.as_ref().map(|w| WaitLine {
            pending_card_hours: card_hours_f64(w.pending_card_hours),
            pods_waited: count(w.pods_waited as i64),
            pods_started: count(w.pods_started as i64),
            median: super::fmt::wait(lang, w.median_wait_seconds),
            p90: super::fmt::wait(lang, w.p90_wait_seconds),
            never_ran: count(w.never_ran as i64),
        }),
        quotas_href: format!("/reports/quotas?month={}", h.month),
        unit_cost_href: format!(
            "/reports/unit-cost?from={}&to={}&group_by=model",
            h.month.first_day(),
            h.month.next().first_day()
        ),
        team: h.team,
        name: h.name,
    })
}

async fn team(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    PagePath(team): PagePath<TeamId>,
    Query(q): Query<MonthQuery>,
) -> Result<TeamPage, PageError> {
    team_page(&s, &user, lang, &team, q.month(&s)?, "/").await
}
