//! `/reports/unit-cost`: what a million tokens and a thousand requests cost, per team, namespace, model, engine,
//! day or month, within the caller's scope (SPEC §9).

use axum::Json;
use axum::extract::State;
use chrono::{NaiveDate, Utc};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::ReaderErrors;
use super::error::ApiError;
use super::{ApiQuery, AppState};
use crate::api::bearer::ScopedReader;
use crate::billing::UnitGroup;
use crate::usecase::unit_cost::{self, UnitCostReport};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_unit_cost))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct UnitCostQuery {
    /// First billing day (YYYY-MM-DD, default: the first day of the current month in the billing time zone).
    #[param(value_type = Option<String>, format = Date)]
    pub from: Option<NaiveDate>,
    /// The billing day after the last (YYYY-MM-DD, exclusive; default: tomorrow); at most 366 days after `from`.
    #[param(value_type = Option<String>, format = Date)]
    pub to: Option<NaiveDate>,
    /// team, namespace, model (default), engine, day or month.
    pub group_by: Option<UnitGroup>,
}

/// ¥ per million input, output and total tokens and per thousand successful requests of serving pods, each a
/// ratio of sums over the group (cost ÷ tokens), the serving pod's own GPU cost priced as bills price it; hours of
/// serving without traffic are idle serving cost, apart. Team leads see their own teams' pods only.
#[utoipa::path(get, path = "/reports/unit-cost", tag = "reports", security(("bearer" = [])), params(UnitCostQuery),
    responses((status = 200, description = "Unit cost per group and in total", body = UnitCostReport), ReaderErrors))]
async fn get_unit_cost(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    ApiQuery(q): ApiQuery<UnitCostQuery>,
) -> Result<Json<UnitCostReport>, ApiError> {
    let (from, to) = unit_cost::range(q.from, q.to, s.billing_tz, Utc::now())?;
    let group = q.group_by.unwrap_or_default();
    Ok(Json(unit_cost::report(&s.cases, &scope, from, to, group).await?))
}
