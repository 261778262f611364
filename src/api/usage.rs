//! `/usage`: stored GPU-hours over any range, grouped by team, namespace, pod or GPU model, within the caller's
//! scope.

use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::{ApiQuery, AppState};
use crate::auth::ScopedReader;
use crate::db::{self, usage::GroupBy};
use crate::error::{ApiError, ErrorBody};
use crate::usage::UsageRow;
use crate::validate;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_usage))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
pub struct UsageQuery {
    /// Start (inclusive): a date (its midnight in the billing time zone) or a time with or without seconds and offset; without an offset, billing time zone.
    #[param(value_type = String)]
    pub from: validate::TimeInput,
    /// End (exclusive): a date (its midnight in the billing time zone) or a time with or without seconds and offset; without an offset, billing time zone.
    #[param(value_type = String)]
    pub to: validate::TimeInput,
    /// team, namespace, pod or model.
    pub group_by: Option<GroupBy>,
    pub cluster: Option<String>,
}

#[utoipa::path(get, path = "/usage", tag = "usage", security(("bearer" = [])), params(UsageQuery),
    responses((status = 200, body = Vec<UsageRow>), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn get_usage(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    ApiQuery(q): ApiQuery<UsageQuery>,
) -> Result<Json<Vec<UsageRow>>, ApiError> {
    let group_by = q.group_by.unwrap_or(GroupBy::Team);
    // a row per pod over a long range is a huge answer and a long scan: capped harder than the rest
    let max_days = if group_by == GroupBy::Pod { validate::MAX_POD_RANGE_DAYS } else { validate::MAX_RANGE_DAYS };
    let (from, to) = (q.from.resolve("from", s.billing_tz)?, q.to.resolve("to", s.billing_tz)?);
    validate::range(from, to, max_days)?;
    if let Some(c) = &q.cluster {
        validate::cluster("cluster", c)?;
    }
    let compute = async || {
        let totals = db::usage::totals(&s.pool, from, to, group_by, q.cluster.as_deref(), &scope, s.billing_tz).await?;
        Ok::<_, ApiError>(totals.into_iter().map(Into::into).collect::<Vec<UsageRow>>())
    };
    if group_by == GroupBy::Pod {
        // a row per pod: large over long ranges, and not what dashboards repeat; not kept
        return Ok(Json(compute().await?));
    }
    let key = (from, to, group_by, q.cluster.clone(), scope.teams.clone());
    let rows = s.usage.get_or_compute(&s.pool, key, compute).await?;
    Ok(Json(rows.as_ref().clone()))
}

/// What a usage answer depends on besides the stored data: range, grouping, cluster, the caller's teams.
pub type UsageKey = (DateTime<Utc>, DateTime<Utc>, GroupBy, Option<String>, Option<Vec<String>>);
