//! `/reports/low-utilization`: the pods that wasted the most GPU-hours in a range (default the last 7 days), by
//! hours, not by percent, with owner, GPU model and the money — the API's `GET /reports/low-utilization`, from the
//! same use case; a team lead sees its own teams' pods.

use std::collections::BTreeMap;

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;

use super::{FieldErrors, ReportLink, given, report_nav, time_field};
use crate::money::Money;
use crate::usecase::reports;
use crate::usecase::state::AppState;
use crate::waste::WastefulPod;
use crate::web::extract::PageUser;
use crate::web::fmt::{card_hours_f64, percent, when, yuan};
use crate::web::i18n::{PageLang, t};
use crate::web::layout::{Chrome, PageError};

/// The form as sent: every field text, so a bad one comes back with its message.
#[derive(Debug, Default, Deserialize)]
pub struct TopForm {
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
    #[serde(default)]
    pub top: String,
}

pub struct PodRow {
    pub rank: usize,
    pub team: String,
    pub owner: String,
    pub cluster: String,
    pub namespace: String,
    pub pod: String,
    pub gpu_model: String,
    pub gpu_hours: String,
    pub effective_gpu_hours: String,
    pub unmetered_gpu_hours: String,
    pub wasted_gpu_hours: String,
    pub utilization: String,
    pub rate: String,
    pub wasted_amount: String,
    pub wasted_per_month: String,
}

pub struct TeamRow {
    pub team: String,
    pub pods: usize,
    pub wasted_gpu_hours: String,
    pub wasted_amount: String,
    pub wasted_per_month: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "report_low_utilization.html")]
pub struct LowUtilizationPage {
    pub c: Chrome,
    pub links: Vec<ReportLink>,
    pub q: TopForm,
    pub errors: FieldErrors,
    /// The range judged, in the billing time zone (empty when the form was refused).
    pub range: String,
    pub rows: Vec<PodRow>,
    pub teams: Vec<TeamRow>,
    pub total: TeamRow,
}

fn pod_row(rank: usize, p: &WastefulPod, lang: crate::web::i18n::Lang) -> PodRow {
    PodRow {
        rank,
        team: p.team.clone(),
        owner: p.owner.clone().unwrap_or_else(|| "—".into()),
        cluster: p.cluster.clone(),
        namespace: p.namespace.clone(),
        pod: p.pod.clone(),
        gpu_model: p.gpu_model.clone(),
        gpu_hours: card_hours_f64(p.gpu_hours),
        effective_gpu_hours: card_hours_f64(p.effective_gpu_hours),
        unmetered_gpu_hours: card_hours_f64(p.unmetered_gpu_hours),
        wasted_gpu_hours: card_hours_f64(p.wasted_gpu_hours),
        utilization: percent(p.utilization),
        rate: crate::export::present::rate(p.rate, lang),
        wasted_amount: yuan(p.wasted_amount),
        wasted_per_month: yuan(p.wasted_per_month),
    }
}

/// The listed pods added up per team (most wasted hours first), and over all of them.
fn by_team(pods: &[WastefulPod], total_word: &str) -> (Vec<TeamRow>, TeamRow) {
    #[derive(Default)]
    struct Sum {
        pods: usize,
        hours: f64,
        amount: Money,
        per_month: Money,
    }
    let add = |s: &mut Sum, p: &WastefulPod| {
        s.pods += 1;
        s.hours += p.wasted_gpu_hours;
        s.amount = s.amount + p.wasted_amount;
        s.per_month = s.per_month + p.wasted_per_month;
    };
    let mut teams: BTreeMap<&str, Sum> = BTreeMap::new();
    let mut all = Sum::default();
    for p in pods {
        add(teams.entry(&p.team).or_default(), p);
        add(&mut all, p);
    }
    let row = |team: &str, s: &Sum| TeamRow {
        team: team.to_string(),
        pods: s.pods,
        wasted_gpu_hours: card_hours_f64(s.hours),
        wasted_amount: yuan(s.amount),
        wasted_per_month: yuan(s.per_month),
    };
    let mut sums: Vec<(&str, Sum)> = teams.into_iter().collect();
    sums.sort_by(|a, b| b.1.hours.total_cmp(&a.1.hours).then_with(|| a.0.cmp(b.0)));
    (sums.iter().map(|(t, s)| row(t, s)).collect(), row(total_word, &all))
}

pub async fn low_utilization(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    Query(q): Query<TopForm>,
) -> Result<Response, PageError> {
    let c = Chrome::new(&user, lang, "/reports/utilization", t(lang, "low_util.title"));
    let links = report_nav(lang, &user, "/reports/low-utilization", None);
    let mut errors = FieldErrors::default();
    let from = errors.take(time_field("from", &q.from));
    let to = errors.take(time_field("to", &q.to));
    let top = given(&q.top).map(|v| {
        v.parse::<i64>()
            .map_err(|_| crate::validate::Invalid::new("top", format!("`{}` is not a whole number", v.escape_debug())))
    });
    let top = errors.take(top.transpose());
    let range = match (from, to, top) {
        (Some(from), Some(to), Some(top)) if errors.is_empty() => {
            errors.take(reports::low_utilization_range(from, to, top, s.billing_tz, Utc::now()))
        }
        _ => None,
    };
    let Some((from, to, top)) = range else {
        let total = by_team(&[], t(lang, "total")).1;
        let page = LowUtilizationPage { c, links, q, errors, range: String::new(), rows: vec![], teams: vec![], total };
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response());
    };
    let pods = reports::low_utilization(&s.cases, &user.principal.scope(), from, to, top).await?;
    let (teams, total) = by_team(&pods, t(lang, "total"));
    let page = LowUtilizationPage {
        c,
        links,
        q,
        errors,
        range: format!("{} – {}", when(&from, s.billing_tz), when(&to, s.billing_tz)),
        rows: pods.iter().enumerate().map(|(i, p)| pod_row(i + 1, p, lang)).collect(),
        teams,
        total,
    };
    Ok(page.into_response())
}
