//! `/idle`: the idle-waste list — pods holding GPUs and memory while barely using them, most money first.

use axum::Json;
use axum::extract::{OriginalUri, State};
use axum::http::HeaderMap;
use chrono::Utc;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::{Paged, ReaderErrors};
use super::error::ApiError;
use super::page::{self, PageRequest};
use super::{ApiQuery, AppState};
use crate::api::bearer::ScopedReader;
use crate::waste::IdlePod;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_idle))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct IdleQuery {
    /// `weekly` (7 days, < 10 %, default) or `short_term` (2 hours, < 15 %).
    pub rule: Option<String>,
    /// Window end, a whole hour (default: the current hour): a date (its midnight in the billing time zone) or a time with or without seconds and offset; without an offset, billing time zone.
    #[param(value_type = Option<String>)]
    pub to: Option<crate::validate::TimeInput>,
    /// Window length in hours (1–2160; default from the rule).
    pub hours: Option<u32>,
    /// Utilization threshold, 0–1 (default from the rule).
    pub max_utilization: Option<f64>,
    /// Memory a pod must hold to count, MiB (default 1024).
    pub min_memory_mib: Option<f64>,
    /// Also list pods that no longer hold cards at the window's end.
    pub include_ended: Option<bool>,
    /// At most this many pods (1–1000, default 100).
    pub limit: Option<i64>,
    /// The page after this cursor (from `Link`, which also pins the window's end `to`).
    pub after: Option<String>,
}

/// The idle-waste list over a window, within the caller's scope (a team lead: its teams).
#[utoipa::path(get, path = "/idle", tag = "waste", security(("bearer" = [])), params(IdleQuery),
    responses(Paged<IdlePod>, ReaderErrors))]
async fn get_idle(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    OriginalUri(uri): OriginalUri,
    ApiQuery(q): ApiQuery<IdleQuery>,
) -> Result<(HeaderMap, Json<Vec<IdlePod>>), ApiError> {
    let req = PageRequest::<IdleRank>::parse(q.limit, q.after.as_deref())?;
    let ask = crate::usecase::idle::IdleAsk {
        rule: q.rule,
        to: q.to,
        hours: q.hours,
        max_utilization: q.max_utilization,
        min_memory_mib: q.min_memory_mib,
        include_ended: q.include_ended,
    };
    let (to, hours, rule, only_running) = ask.resolve(s.billing_tz, Utc::now())?;
    let list = crate::usecase::idle::idle_pods(&s.cases, &scope, to, hours, rule, only_running).await?;
    let (rows, next) = page::page(list.as_ref().clone(), rank, &req);
    // the next pages read the same window, whatever the hour is by then
    let pinned = [("to", to.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))];
    Ok((page::link(&uri, next.as_deref(), &pinned), Json(rows)))
}

/// A pod's place in the list: most money spent idle first, then by namespace, pod, cluster and model (unique).
type IdleRank = (rust_decimal::Decimal, String, String, String, String);

fn rank(p: &IdlePod) -> IdleRank {
    (-p.idle_spend.as_decimal(), p.namespace.clone(), p.pod.clone(), p.cluster.clone(), p.gpu_model.clone())
}
