//! The management reports (global readers; a team lead gets the not-found page): utilization per day with its
//! team × day heatmap, efficiency tiers, and the team ranking, for a month (`?month=YYYY-MM`, default the current).

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::routing::get;
use chrono::Utc;
use serde::Deserialize;

use super::fmt::{card_hours_f64, percent, yuan};
use super::i18n::{PageLang, t};
use super::layout::{Chrome, PageError};
use crate::auth::PageUser;
use crate::billing::Month;
use crate::state::AppState;
use crate::usecase::{months, reports, tiers};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/reports/utilization", get(utilization))
        .route("/reports/tiers", get(tiers_page))
        // the ranking is the tiers page: teams by efficiency, each with its tier
        .route("/reports/ranking", get(tiers_page))
}

#[derive(Debug, Default, Deserialize)]
pub struct MonthQuery {
    pub month: Option<String>,
}

/// The month asked for, or the current one; a user who may not read cluster-wide figures gets not found.
fn month_for(s: &AppState, user: &PageUser, q: &MonthQuery) -> Result<Month, PageError> {
    if !user.principal.scope().is_global() {
        return Err(PageError::NotFound);
    }
    match q.month.as_deref().filter(|m| !m.is_empty()) {
        None => Ok(months::current(&s.cases, Utc::now())),
        Some(m) => crate::validate::month("month", m).map_err(|_| PageError::NotFound),
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
    user: PageUser,
    PageLang(lang): PageLang,
    Query(q): Query<MonthQuery>,
) -> Result<UtilizationPage, PageError> {
    let month = month_for(&s, &user, &q)?;
    let scope = user.principal.scope();
    let report = reports::month_utilization(&s.cases, &scope, month).await?;
    let map = tiers::heatmap(&s.cases, &scope, month).await?;
    let cols: Vec<String> = map.days.iter().map(|d| d.format("%d").to_string()).collect();
    let rows: Vec<String> = map.teams.iter().map(|(t, _)| t.clone()).collect();
    let cells: Vec<Vec<Option<f64>>> = map.teams.iter().map(|(_, v)| v.clone()).collect();
    Ok(UtilizationPage {
        c: Chrome::new(&user, lang, "/reports/utilization", format!("{} {month}", t(lang, "utilization"))),
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
    pub month: String,
    pub rows: Vec<TierRow>,
}

/// The tiers page is also the ranking: teams by efficiency, each with its tier.
async fn tiers_page(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    Query(q): Query<MonthQuery>,
) -> Result<TiersPage, PageError> {
    let month = month_for(&s, &user, &q)?;
    let ranking = reports::team_ranking(&s.cases, &user.principal.scope(), month).await?;
    Ok(TiersPage {
        c: Chrome::new(&user, lang, "/reports/utilization", format!("{} {month}", t(lang, "tiers.title"))),
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
