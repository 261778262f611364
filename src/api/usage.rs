//! `/usage`: stored GPU-hours over any range, grouped by team, namespace, pod or GPU model, within the caller's
//! scope.

use axum::Json;
use axum::extract::{OriginalUri, State};
use axum::http::HeaderMap;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::{Paged, ReaderErrors};
use super::error::ApiError;
use super::page::{self, PageRequest};
use super::views::GroupBy;
use super::{ApiQuery, AppState};
use crate::api::bearer::ScopedReader;
use crate::usecase::usage::UsageRow;
use crate::validate;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_usage))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UsageQuery {
    /// Start (inclusive): a date (its midnight in the billing time zone) or a time with or without seconds and offset; without an offset, billing time zone.
    #[param(value_type = String)]
    pub from: validate::TimeInput,
    /// End (exclusive): a date (its midnight in the billing time zone) or a time with or without seconds and offset; without an offset, billing time zone.
    #[param(value_type = String)]
    pub to: validate::TimeInput,
    /// team, namespace, pod or model.
    pub group_by: Option<GroupBy>,
    #[param(value_type = Option<String>)]
    pub cluster: Option<validate::ClusterName>,
    /// At most this many rows (1–1000, default 100).
    pub limit: Option<i64>,
    /// The page after this cursor (from `Link`).
    pub after: Option<String>,
}

#[utoipa::path(get, path = "/usage", tag = "usage", security(("bearer" = [])), params(UsageQuery),
    responses(Paged<UsageRow>, ReaderErrors))]
async fn get_usage(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    OriginalUri(uri): OriginalUri,
    ApiQuery(q): ApiQuery<UsageQuery>,
) -> Result<(HeaderMap, Json<Vec<UsageRow>>), ApiError> {
    let req = PageRequest::<UsageKeyOfRow>::parse(q.limit, q.after.as_deref())?;
    let group_by = q.group_by.map_or(crate::db::usage::GroupBy::Team, Into::into);
    // a row per pod over a long range is a huge answer and a long scan: capped harder than the rest
    let max_days = if group_by == crate::db::usage::GroupBy::Pod {
        validate::MAX_POD_RANGE_DAYS
    } else {
        validate::MAX_RANGE_DAYS
    };
    let (from, to) = (q.from.resolve("from", s.billing_tz)?, q.to.resolve("to", s.billing_tz)?);
    validate::range(from, to, max_days)?;
    let rows = crate::usecase::usage::usage(&s.cases, &scope, from, to, group_by, q.cluster.as_ref()).await?;
    let (rows, next) = page::page(rows, row_key, &req);
    Ok((page::link(&uri, next.as_deref(), &[]), Json(rows)))
}

/// A row's place in the pages: its group, unique within one answer.
type UsageKeyOfRow = (Option<String>, Option<String>, Option<String>, Option<String>);

fn row_key(r: &UsageRow) -> UsageKeyOfRow {
    (r.team.clone(), r.namespace.clone(), r.pod.clone(), r.gpu_model.clone())
}
