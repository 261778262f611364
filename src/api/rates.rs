//! `/rates`: the dated rate history per GPU model (from a TCO model or set by hand), TCO previews, cloud reference
//! rates and the self-build vs rent view.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::{ReaderErrors, WriterErrors};
use super::error::ApiError;
use super::views::{StoredCloudRates, StoredRate};
use super::{ApiJson, ApiQuery, AppState};
use crate::api::bearer::{Finance, GlobalReader, ScopedReader};
use crate::pricing::{CloudRates, RateBreakdown, TcoInputs};
use crate::usecase::rates::{self, ModelAlias, RateInput, RentVsBuildView};
use crate::validate;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_rates, create_rate))
        .routes(routes!(delete_rate))
        .routes(routes!(preview_rate))
        .routes(routes!(list_cloud_rates))
        .routes(routes!(put_cloud_rates))
        .routes(routes!(get_rent_vs_build))
        .routes(routes!(list_model_aliases))
        .routes(routes!(put_model_alias))
}

#[utoipa::path(get, path = "/model-aliases", tag = "rates", security(("bearer" = [])),
    responses((status = 200, description = "Every DCGM model name mapped to a pricing model", body = Vec<ModelAlias>), ReaderErrors))]
async fn list_model_aliases(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
) -> Result<Json<Vec<ModelAlias>>, ApiError> {
    Ok(Json(rates::model_aliases(&s.cases, &scope).await?))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AliasInput {
    pub pricing_model: String,
}

/// Prices a DCGM model name under another key (finance, admin); open months follow at once. Audited.
#[utoipa::path(put, path = "/model-aliases/{model_name}", tag = "rates", security(("bearer" = [])),
    params(("model_name" = String, Path, description = "DCGM modelName")), request_body = AliasInput,
    responses((status = 200, description = "The alias as stored", body = ModelAlias), ReaderErrors, WriterErrors))]
async fn put_model_alias(
    State(s): State<AppState>,
    Finance(writer): Finance,
    Path(model_name): Path<String>,
    ApiJson(input): ApiJson<AliasInput>,
) -> Result<Json<ModelAlias>, ApiError> {
    Ok(Json(rates::put_model_alias(&s.cases, &writer, &model_name, &input.pricing_model).await?))
}

#[utoipa::path(get, path = "/rates", tag = "rates", security(("bearer" = [])),
    responses((status = 200, description = "Every rate version, per model by effective date", body = Vec<StoredRate>), ReaderErrors))]
async fn list_rates(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
) -> Result<Json<Vec<StoredRate>>, ApiError> {
    Ok(Json(rates::rates(&s.cases, &scope).await?.into_iter().map(Into::into).collect()))
}

/// Adds a rate version (finance, admin). Two versions of one model on the same date are refused. Audited.
#[utoipa::path(post, path = "/rates", tag = "rates", security(("bearer" = [])), request_body = RateInput,
    responses((status = 201, description = "The rate version as stored", body = StoredRate), ReaderErrors, WriterErrors))]
async fn create_rate(
    State(s): State<AppState>,
    Finance(writer): Finance,
    ApiJson(input): ApiJson<RateInput>,
) -> Result<(StatusCode, Json<StoredRate>), ApiError> {
    Ok((StatusCode::CREATED, Json(rates::create_rate(&s.cases, &writer, input).await?.into())))
}

/// Removes a rate version (finance, admin). Closed months keep their bills; open months are recomputed. Audited.
#[utoipa::path(delete, path = "/rates/{id}", tag = "rates", security(("bearer" = [])),
    params(("id" = i64, Path, description = "rate version id")),
    responses((status = 204, description = "The rate version is deleted"), ReaderErrors, WriterErrors))]
async fn delete_rate(
    State(s): State<AppState>,
    Finance(writer): Finance,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    rates::delete_rate(&s.cases, &writer, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The rate a TCO model gives, with its yearly breakdown; nothing is stored.
#[utoipa::path(post, path = "/rates/preview", tag = "rates", security(("bearer" = [])), request_body = TcoInputs,
    responses((status = 200, description = "The rate the inputs give, with its parts", body = RateBreakdown), ReaderErrors, WriterErrors))]
async fn preview_rate(
    ScopedReader(_scope): ScopedReader,
    ApiJson(input): ApiJson<TcoInputs>,
) -> Result<Json<RateBreakdown>, ApiError> {
    Ok(Json(rates::preview_rate(input)?))
}

#[utoipa::path(get, path = "/cloud-rates", tag = "rates", security(("bearer" = [])),
    responses((status = 200, description = "Every model's cloud reference rates", body = Vec<StoredCloudRates>), ReaderErrors))]
async fn list_cloud_rates(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
) -> Result<Json<Vec<StoredCloudRates>>, ApiError> {
    Ok(Json(rates::cloud_rates(&s.cases, &scope).await?.into_iter().map(Into::into).collect()))
}

/// Sets the cloud reference rates (yuan per card-hour) of a model (finance, admin). Audited.
#[utoipa::path(put, path = "/cloud-rates/{model}", tag = "rates", security(("bearer" = [])),
    params(("model" = String, Path, description = "pricing model key")), request_body = CloudRates,
    responses((status = 200, description = "The cloud rates as stored", body = CloudRates), ReaderErrors, WriterErrors))]
async fn put_cloud_rates(
    State(s): State<AppState>,
    Finance(writer): Finance,
    Path(model): Path<String>,
    ApiJson(cloud): ApiJson<CloudRates>,
) -> Result<Json<CloudRates>, ApiError> {
    Ok(Json(rates::put_cloud_rates(&s.cases, &writer, &model, cloud).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RentQuery {
    /// Pricing model key.
    pub model: String,
    /// Measurement range start: a date (its midnight in the billing time zone) or a time with or without seconds and offset; without an offset, billing time zone.
    #[param(value_type = String)]
    pub from: validate::TimeInput,
    /// Measurement range end (exclusive): a date (its midnight in the billing time zone) or a time with or without seconds and offset; without an offset, billing time zone.
    #[param(value_type = String)]
    pub to: validate::TimeInput,
}

/// Self-build vs rent at the measured allocation: own cost per allocated card-hour against each cloud rate, and
/// the break-even allocation (global readers only).
#[utoipa::path(get, path = "/rent-vs-build", tag = "rates", security(("bearer" = [])), params(RentQuery),
    responses((status = 200, description = "Own cost against the cloud rates over the range", body = RentVsBuildView), ReaderErrors))]
async fn get_rent_vs_build(
    State(s): State<AppState>,
    GlobalReader(reader): GlobalReader,
    ApiQuery(q): ApiQuery<RentQuery>,
) -> Result<Json<RentVsBuildView>, ApiError> {
    let (from, to) = (q.from.resolve("from", s.billing_tz)?, q.to.resolve("to", s.billing_tz)?);
    Ok(Json(rates::rent_vs_build_view(&s.cases, &reader.scope(), &q.model, from, to).await?))
}
