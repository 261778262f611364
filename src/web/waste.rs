//! The idle-waste list (`/idle`: the week's idle pods, filtered by team and utilization threshold, sorted by a
//! column, with the ¥/month total) and ingest health (`/health`, global readers: per cluster whether the stored
//! numbers are complete).

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::Utc;
use serde::Deserialize;

use super::fmt::{card_hours_f64, percent, when, yuan};
use super::i18n::{Lang, PageLang, t};
use super::layout::{Chrome, PageError};
use crate::usecase::state::AppState;
use crate::usecase::{health, team_home::IDLE_HOURS};
use crate::waste::{IdlePod, IdleRule};
use crate::web::extract::PageUser;

pub fn routes() -> Router<AppState> {
    Router::new().route("/idle", get(idle)).route("/health", get(health_page))
}

/// The filter form as sent: every field text, so a bad one comes back with its message.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct IdleQuery {
    #[serde(default)]
    pub team: String,
    /// Utilization threshold in percent (default SPEC §7's 10).
    #[serde(default)]
    pub threshold: String,
    /// `money` (default), `utilization`, `team`, `pod`.
    #[serde(default)]
    pub sort: String,
}

pub struct IdleRow {
    pub team: String,
    pub namespace: String,
    pub pod: String,
    pub owner: String,
    pub gpu_model: String,
    pub cards: String,
    pub utilization: String,
    pub idle_spend: String,
    pub monthly: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "idle.html")]
pub struct IdlePage {
    pub c: Chrome,
    pub q: IdleQuery,
    pub teams: Vec<String>,
    pub rows: Vec<IdleRow>,
    pub total_monthly: String,
    pub error: Option<String>,
}

impl IdlePage {
    pub fn selected(&self, team: &str) -> &'static str {
        if self.q.team == team { "selected" } else { "" }
    }
}

/// The rule of a threshold in percent (empty: SPEC §7's weekly rule).
fn rule_of(threshold: &str) -> Result<IdleRule, String> {
    let threshold = threshold.trim();
    if threshold.is_empty() {
        return Ok(IdleRule::WEEKLY);
    }
    let pct: f64 = threshold.parse().map_err(|_| format!("`{}` is not a number", threshold.escape_debug()))?;
    IdleRule { max_utilization: pct / 100.0, ..IdleRule::WEEKLY }
        .validate()
        .map_err(|_| "must be between 0 and 100".to_string())
}

fn sort(rows: &mut [IdlePod], by: &str) {
    match by {
        "utilization" => rows.sort_by(|a, b| a.average_utilization.total_cmp(&b.average_utilization)),
        "team" => rows.sort_by(|a, b| (&a.team, &a.namespace, &a.pod).cmp(&(&b.team, &b.namespace, &b.pod))),
        "pod" => rows.sort_by(|a, b| (&a.namespace, &a.pod).cmp(&(&b.namespace, &b.pod))),
        // the use case's order: most money spent idle first
        _ => {}
    }
}

async fn idle(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    Query(q): Query<IdleQuery>,
) -> Result<Response, PageError> {
    let scope = user.principal.scope();
    let teams: Vec<String> = crate::usecase::teams::teams(&s.cases, &scope).await?.into_iter().map(|t| t.id).collect();
    let c = Chrome::new(&user, lang, "/idle", t(lang, "idle.title"));
    let rule = match rule_of(&q.threshold) {
        Ok(r) => r,
        Err(e) => {
            let page = IdlePage { c, q, teams, rows: vec![], total_monthly: yuan(Default::default()), error: Some(e) };
            return Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response());
        }
    };
    let team = q.team.trim();
    // a team outside the scope (or unknown) is not found, as its pages are
    if !team.is_empty() && !teams.iter().any(|t| t == team) {
        return Err(PageError::NotFound);
    }
    let to = crate::ingest::window::floor_hour(Utc::now());
    let list = crate::usecase::idle::idle_pods(&s.cases, &scope, to, IDLE_HOURS, rule, true).await?;
    let mut pods: Vec<IdlePod> = list.iter().filter(|p| team.is_empty() || p.team == team).cloned().collect();
    sort(&mut pods, &q.sort);
    let total_monthly = yuan(pods.iter().filter_map(|p| p.monthly_projection).sum());
    let rows = pods
        .iter()
        .map(|p| IdleRow {
            team: p.team.clone(),
            namespace: p.namespace.clone(),
            pod: p.pod.clone(),
            owner: p.owner.clone().unwrap_or_else(|| "—".into()),
            gpu_model: p.gpu_model.clone(),
            cards: card_hours_f64(p.cards_held),
            utilization: percent(Some(p.average_utilization)),
            idle_spend: yuan(p.idle_spend),
            monthly: p.monthly_projection.map_or_else(|| "—".into(), yuan),
        })
        .collect();
    Ok(IdlePage { c, q, teams, rows, total_monthly, error: None }.into_response())
}

/// A kube-state-metrics gap as the health page lists it.
pub struct GapCell {
    pub span: String,
    pub bridged: bool,
    pub pods: i64,
}

pub struct ClusterRow {
    pub cluster: String,
    pub watermark: String,
    pub lag: String,
    pub last_error: String,
    pub failed_windows: usize,
    pub unmetered: String,
    pub bridged: String,
    pub ksm_gaps: Vec<GapCell>,
    pub anomalies: Vec<String>,
    pub node_issues: Vec<String>,
    /// What the workers see: hours queued and held, failures waiting for their retry, batch size, recovery.
    pub workers: Vec<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "health.html")]
pub struct HealthPage {
    pub c: Chrome,
    pub clusters: Vec<ClusterRow>,
}

async fn health_page(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
) -> Result<HealthPage, PageError> {
    let h = health::health(&s.cases, &user.principal.scope()).await?;
    let tz = s.billing_tz;
    let none = t(lang, "none");
    Ok(HealthPage {
        c: Chrome::new(&user, lang, "/health", t(lang, "health.title")),
        clusters: h
            .clusters
            .iter()
            .map(|c| ClusterRow {
                cluster: c.cluster.clone(),
                watermark: c.watermark.map_or_else(|| none.into(), |w| when(&w, tz)),
                lag: c.lag_hours.map_or_else(|| "–".into(), |l| l.to_string()),
                last_error: c
                    .failed_windows
                    .iter()
                    .max_by_key(|f| f.failed_at)
                    .map_or_else(|| none.into(), |f| format!("{} · {}", when(&f.failed_at, tz), f.error)),
                failed_windows: c.failed_windows.len(),
                unmetered: percent(c.unmetered_share_24h),
                bridged: format!("{:.2}", c.bridged_gpu_hours_24h),
                ksm_gaps: c
                    .ksm_gaps
                    .iter()
                    .map(|g| GapCell { span: g.span.clone(), bridged: g.bridged, pods: g.pods })
                    .collect(),
                anomalies: c.anomalies.iter().map(|a| format!("{}: {} ({})", a.kind, a.count, a.subjects)).collect(),
                node_issues: c.node_issues.iter().map(|n| format!("{} {} · {} h", n.node, n.kind, n.hours)).collect(),
                workers: c.worker.as_ref().map(|w| worker_lines(w, lang, tz)).unwrap_or_default(),
            })
            .collect(),
    })
}

/// A cluster's worker state in a few short lines.
fn worker_lines(w: &crate::ingest::health::QueueHealth, lang: Lang, tz: chrono_tz::Tz) -> Vec<String> {
    let mut lines = vec![format!(
        "{}: {} · {}: {}{}",
        t(lang, "health.queued"),
        w.queued_hours,
        t(lang, "health.leased"),
        w.leased_hours,
        if w.workers.is_empty() { String::new() } else { format!(" ({})", w.workers.join(", ")) }
    )];
    if let Some(b) = w.batch_hours {
        lines.push(format!("{}: {b} h", t(lang, "health.batch")));
    }
    if w.failures_in_row > 0 || w.failing_hours > 0 {
        let retry = w.next_retry_at.map(|r| format!(" · {} {}", t(lang, "health.retry_at"), when(&r, tz)));
        lines.push(format!(
            "{}: {} · {} h{}",
            t(lang, "health.failures_in_row"),
            w.failures_in_row,
            w.failing_hours,
            retry.unwrap_or_default()
        ));
    }
    if let (Some(kind), Some(at)) = (&w.last_error_kind, w.last_error_at) {
        let message = w.last_error.as_deref().unwrap_or("");
        lines.push(format!("{} {}: {kind} · {message}", t(lang, "health.last_error"), when(&at, tz)));
    }
    if let Some(r) = w.recovered_at {
        lines.push(format!("{} {}", t(lang, "health.recovered"), when(&r, tz)));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threshold_is_a_percentage() {
        assert_eq!(rule_of("").unwrap().max_utilization, IdleRule::WEEKLY.max_utilization);
        assert_eq!(rule_of(" 25 ").unwrap().max_utilization, 0.25);
        assert_eq!(rule_of("abc").unwrap_err(), "`abc` is not a number");
        assert_eq!(rule_of("150").unwrap_err(), "must be between 0 and 100");
        assert_eq!(rule_of("NaN").unwrap_err(), "must be between 0 and 100");
    }
}
