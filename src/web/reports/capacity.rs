//! The cluster-wide capacity reports (global readers; a team lead gets the not-found page, as from the API):
//! `/reports/fragmentation` (free cards per node in an hour, the largest free block) and
//! `/reports/oversubscription` (cards' worth promised over physical cards per cluster, GPU model and node per
//! day, with the same cards' utilization beside it) — the API's `GET /reports/fragmentation` and
//! `GET /reports/oversubscription`, from the same use cases.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use serde::Deserialize;

use super::{FieldErrors, ReportLink, given, report_nav, time_field};
use crate::usecase::state::AppState;
use crate::usecase::{self, reports};
use crate::validate::ClusterName;
use crate::waste::OversubscriptionRow;
use crate::web::capability::PageGlobalReader;
use crate::web::fmt::{card_hours_f64, percent, when, yuan};
use crate::web::i18n::{PageLang, t};
use crate::web::layout::{Chrome, PageError};

/// A ratio of promised over physical cards: `2.50×`; none as `–`.
fn times(r: Option<f64>) -> String {
    r.filter(|r| r.is_finite()).map_or_else(|| "–".into(), |r| format!("{r:.2}×"))
}

#[derive(Debug, Default, Deserialize)]
pub struct HourForm {
    #[serde(default)]
    pub hour: String,
}

pub struct NodeRow {
    pub cluster: String,
    pub node: String,
    pub gpu_model: String,
    pub cards: String,
    pub allocated_cards: String,
    pub free_cards: String,
    pub free_whole_cards: u32,
}

#[derive(Template, WebTemplate)]
#[template(path = "report_fragmentation.html")]
pub struct FragmentationPage {
    pub c: Chrome,
    pub links: Vec<ReportLink>,
    pub q: HourForm,
    pub errors: FieldErrors,
    /// The hour judged, in the billing time zone; empty when nothing is stored (or the form was refused).
    pub hour: String,
    pub free_cards: String,
    pub largest_free_block: u32,
    pub fragmentation: String,
    pub nodes: Vec<NodeRow>,
}

pub async fn fragmentation(
    State(s): State<AppState>,
    PageGlobalReader(user): PageGlobalReader,
    PageLang(lang): PageLang,
    Query(q): Query<HourForm>,
) -> Result<Response, PageError> {
    let c = Chrome::new(&user, lang, "/reports/utilization", t(lang, "frag.title"));
    let links = report_nav(lang, &user, "/reports/fragmentation", None);
    let mut errors = FieldErrors::default();
    let hour = time_field("hour", &q.hour).and_then(|h| reports::fragmentation_hour(h, s.billing_tz));
    let mut page = FragmentationPage {
        c,
        links,
        q,
        errors: FieldErrors::default(),
        hour: String::new(),
        free_cards: card_hours_f64(0.0),
        largest_free_block: 0,
        fragmentation: percent(None),
        nodes: vec![],
    };
    let Some(hour) = errors.take(hour) else {
        page.errors = errors;
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response());
    };
    let (at, f) = match reports::fragmentation_at(&s.cases, &user.principal.scope(), hour).await {
        Ok(found) => found,
        // nothing stored yet: the page says so rather than "not found"
        Err(usecase::Error::NotFound(_)) if hour.is_none() => return Ok(page.into_response()),
        Err(e) => return Err(e.into()),
    };
    page.hour = when(&at, s.billing_tz);
    page.free_cards = card_hours_f64(f.free_cards);
    page.largest_free_block = f.largest_free_block;
    page.fragmentation = percent(f.fragmentation);
    page.nodes = f
        .nodes
        .iter()
        .map(|n| NodeRow {
            cluster: n.cluster.clone(),
            node: n.node.clone(),
            gpu_model: n.gpu_model.clone(),
            cards: card_hours_f64(n.cards),
            allocated_cards: card_hours_f64(n.allocated_cards),
            free_cards: card_hours_f64(n.free_cards),
            free_whole_cards: n.free_whole_cards,
        })
        .collect();
    Ok(page.into_response())
}

#[derive(Debug, Default, Deserialize)]
pub struct RangeForm {
    #[serde(default)]
    pub from: String,
    #[serde(default)]
    pub to: String,
    #[serde(default)]
    pub cluster: String,
}

pub struct OversubRow {
    pub day: String,
    pub cluster: String,
    pub gpu_model: String,
    pub node: String,
    pub card_hours: String,
    pub held_card_hours: String,
    pub promised_card_hours: String,
    pub compute_ratio: String,
    /// Memory promised over the cards' memory; `≥` before it where some memory promise is unknown (a lower bound).
    pub memory_ratio: String,
    /// Promised more than the physical cards.
    pub over: bool,
    pub busy: String,
    pub utilization: String,
    pub unmetered_card_hours: String,
}

fn oversub_row(r: &OversubscriptionRow) -> OversubRow {
    OversubRow {
        day: r.day.to_string(),
        cluster: r.cluster.clone(),
        gpu_model: r.gpu_model.clone().unwrap_or_default(),
        node: r.node.clone().unwrap_or_default(),
        card_hours: card_hours_f64(r.card_hours),
        held_card_hours: card_hours_f64(r.held_card_hours),
        promised_card_hours: card_hours_f64(r.promised_card_hours),
        compute_ratio: times(r.compute_ratio),
        memory_ratio: match (times(r.memory_ratio), r.unknown_memory_card_hours > 0.0) {
            (m, true) if r.memory_ratio.is_some() => format!("≥ {m}"),
            (m, _) => m,
        },
        // by what the page prints: 1.00× is not oversubscribed
        over: r.compute_ratio.is_some_and(|x| x >= 1.005),
        busy: percent(r.busy),
        utilization: percent(r.utilization),
        unmetered_card_hours: card_hours_f64(r.unmetered_card_hours),
    }
}

/// How one month's time-sliced replicas were billed (its statement's figures).
pub struct BillingRow {
    pub month: String,
    pub policies: String,
    pub over_recovery: String,
}

fn billing_row(b: &reports::MonthReplicaBilling, lang: crate::web::i18n::Lang) -> BillingRow {
    let policy = |p: crate::billing::ReplicaBilling| match p {
        crate::billing::ReplicaBilling::Fraction => t(lang, "oversub.fraction"),
        crate::billing::ReplicaBilling::WholeCard => t(lang, "oversub.whole_card"),
    };
    let policies = if b.policies.is_empty() {
        t(lang, "oversub.all_fraction").to_string()
    } else {
        b.policies
            .iter()
            .map(|v| {
                let at = v.pool.as_ref().map_or_else(|| v.cluster.clone(), |p| format!("{}/{p}", v.cluster));
                format!("{at}: {} {} {}", policy(v.policy), t(lang, "oversub.from"), v.from)
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    BillingRow {
        month: b.month.to_string(), policies, over_recovery: b.over_recovery.map_or_else(|| "–".into(), yuan)
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "report_oversubscription.html")]
pub struct OversubscriptionPage {
    pub c: Chrome,
    pub links: Vec<ReportLink>,
    pub q: RangeForm,
    pub errors: FieldErrors,
    pub range: String,
    pub clusters: Vec<OversubRow>,
    pub gpu_models: Vec<OversubRow>,
    pub nodes: Vec<OversubRow>,
    /// The replica billing of the months the range touches.
    pub billing: Vec<BillingRow>,
}

pub async fn oversubscription(
    State(s): State<AppState>,
    PageGlobalReader(user): PageGlobalReader,
    PageLang(lang): PageLang,
    Query(q): Query<RangeForm>,
) -> Result<Response, PageError> {
    let c = Chrome::new(&user, lang, "/reports/utilization", t(lang, "oversub.title"));
    let links = report_nav(lang, &user, "/reports/oversubscription", None);
    let mut errors = FieldErrors::default();
    let from = errors.take(time_field("from", &q.from));
    let to = errors.take(time_field("to", &q.to));
    let cluster = errors.take(given(&q.cluster).map(|c| ClusterName::parse("cluster", c)).transpose());
    let asked = match (from, to, cluster) {
        (Some(from), Some(to), Some(cluster)) if errors.is_empty() => errors
            .take(reports::oversubscription_range(from, to, s.billing_tz, Utc::now()))
            .map(|(from, to)| (from, to, cluster)),
        _ => None,
    };
    let Some((from, to, cluster)) = asked else {
        let page = OversubscriptionPage {
            c,
            links,
            q,
            errors,
            range: String::new(),
            clusters: vec![],
            gpu_models: vec![],
            nodes: vec![],
            billing: vec![],
        };
        return Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response());
    };
    let scope = user.principal.scope();
    let report = reports::oversubscription(&s.cases, &scope, from, to, cluster.as_ref()).await?;
    let billing = reports::replica_billing(&s.cases, &scope, from, to).await?;
    let rows = |rs: &[OversubscriptionRow]| rs.iter().map(oversub_row).collect();
    Ok(OversubscriptionPage {
        c,
        links,
        q,
        errors,
        range: format!("{} – {}", when(&from, s.billing_tz), when(&to, s.billing_tz)),
        clusters: rows(&report.clusters),
        gpu_models: rows(&report.gpu_models),
        nodes: rows(&report.nodes),
        billing: billing.iter().map(|b| billing_row(b, lang)).collect(),
    }
    .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_print_with_two_decimals() {
        assert_eq!(times(Some(2.5)), "2.50×");
        assert_eq!(times(Some(0.09838000000000002)), "0.10×");
        assert_eq!((times(None), times(Some(f64::NAN))), ("–".into(), "–".into()));
    }
}
