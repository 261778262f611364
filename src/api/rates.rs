//! `/rates`: the dated rate history per GPU model (from a TCO model or set by hand), TCO previews, cloud reference
//! rates and the self-build vs rent view.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::{ReaderErrors, WriterErrors};
use super::{ApiJson, ApiQuery, AppState};
use crate::auth::{Finance, GlobalReader, ScopedReader};
use crate::db::{self, audit, rates::StoredCloudRates, rates::StoredRate};
use crate::error::{ApiError, FieldError};
use crate::money::RatePerCardHour;
use crate::pricing::{CloudRates, ModelCatalog, RateBreakdown, RentVsBuild, TcoInputs, rent_vs_build};
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

/// How a DCGM `modelName` is priced: the built-in catalogue's key, unless an alias says otherwise.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ModelAlias {
    /// The DCGM `modelName`, e.g. `NVIDIA A100-SXM4-80GB`.
    pub model_name: String,
    /// The pricing model key its rates are stored under, e.g. `A100-80GB`.
    pub pricing_model: String,
}

#[utoipa::path(get, path = "/model-aliases", tag = "rates", security(("bearer" = [])),
    responses((status = 200, description = "Every DCGM model name mapped to a pricing model", body = Vec<ModelAlias>), ReaderErrors))]
async fn list_model_aliases(
    State(s): State<AppState>,
    ScopedReader(_scope): ScopedReader,
) -> Result<Json<Vec<ModelAlias>>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    let aliases = db::rates::aliases(&mut conn).await?;
    Ok(Json(aliases.into_iter().map(|(model_name, pricing_model)| ModelAlias { model_name, pricing_model }).collect()))
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
    Finance(p): Finance,
    Path(model_name): Path<String>,
    ApiJson(input): ApiJson<AliasInput>,
) -> Result<Json<ModelAlias>, ApiError> {
    let model_name = validate::model_name("model_name", &model_name)?;
    let key = validate::model_name("pricing_model", &input.pricing_model)?;
    let mut tx = s.pool.begin().await?;
    let before = db::rates::put_alias(&mut tx, &model_name, &key).await?;
    audit::record(
        &mut tx,
        &p.actor(),
        "model_alias.put",
        &format!("model:{model_name}"),
        before.map(serde_json::Value::from),
        Some(serde_json::Value::from(key.as_str())),
    )
    .await?;
    tx.commit().await?;
    crate::alerts::check_after_change(&s.pool, s.billing_tz, None).await;
    Ok(Json(ModelAlias { model_name, pricing_model: key }))
}

fn pricing_errors(errors: Vec<crate::pricing::FieldError>, prefix: &str) -> ApiError {
    ApiError::Invalid(
        errors.into_iter().map(|e| FieldError { field: format!("{prefix}{}", e.field), message: e.reason }).collect(),
    )
}

#[utoipa::path(get, path = "/rates", tag = "rates", security(("bearer" = [])),
    responses((status = 200, description = "Every rate version, per model by effective date", body = Vec<StoredRate>), ReaderErrors))]
async fn list_rates(
    State(s): State<AppState>,
    ScopedReader(_scope): ScopedReader,
) -> Result<Json<Vec<StoredRate>>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    Ok(Json(db::rates::list(&mut conn).await?))
}

/// A new rate version: either `tco` (the rate is derived) or `rate` (set by hand), not both.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RateInput {
    /// Pricing model key, e.g. `A100-80GB` (DCGM names such as `NVIDIA A100-SXM4-80GB` are mapped to it).
    pub gpu_model: String,
    pub effective_from: NaiveDate,
    pub tco: Option<TcoInputs>,
    #[schema(value_type = Option<String>)]
    pub rate: Option<Decimal>,
}

/// Adds a rate version (finance, admin). Two versions of one model on the same date are refused. Audited.
#[utoipa::path(post, path = "/rates", tag = "rates", security(("bearer" = [])), request_body = RateInput,
    responses((status = 201, description = "The rate version as stored", body = StoredRate), ReaderErrors, WriterErrors))]
async fn create_rate(
    State(s): State<AppState>,
    Finance(p): Finance,
    ApiJson(input): ApiJson<RateInput>,
) -> Result<(StatusCode, Json<StoredRate>), ApiError> {
    let model = validate::model_name("gpu_model", &input.gpu_model)?;
    let effective_from = validate::date("effective_from", input.effective_from)?;
    let (rate, tco) = match (input.tco, input.rate) {
        (Some(tco), None) => {
            let tco = tco.validate().map_err(|e| pricing_errors(e, "tco."))?;
            (tco.rate(), Some(serde_json::to_value(tco.inputs()).map_err(anyhow::Error::from)?))
        }
        (None, Some(rate)) => {
            let rate = RatePerCardHour::new(rate)
                .filter(|r| r.as_decimal() <= Decimal::from(1_000_000))
                .ok_or_else(|| ApiError::invalid("rate", "must be between 0 and 1,000,000 yuan per card-hour"))?;
            (rate, None)
        }
        _ => return Err(ApiError::invalid("tco", "give either `tco` or `rate`, exactly one")),
    };
    let model = ModelCatalog::new().key_for(&model);
    let mut tx = s.pool.begin().await?;
    // one statement decides: of concurrent identical requests exactly one inserts (and is audited)
    let stored = db::rates::insert(&mut tx, &model, effective_from, rate, tco, &p.actor()).await?.ok_or_else(|| {
        ApiError::Conflict {
            field: Some("effective_from".into()),
            message: format!("{model} already has a rate effective from {effective_from}"),
        }
    })?;
    let after = serde_json::to_value(&stored).ok();
    audit::record(&mut tx, &p.actor(), "rate.create", &format!("rate:{}", stored.id), None, after).await?;
    tx.commit().await?;
    crate::alerts::check_after_change(&s.pool, s.billing_tz, Some(effective_from)).await;
    Ok((StatusCode::CREATED, Json(stored)))
}

/// Removes a rate version (finance, admin). Closed months keep their bills; open months are recomputed. Audited.
#[utoipa::path(delete, path = "/rates/{id}", tag = "rates", security(("bearer" = [])),
    params(("id" = i64, Path, description = "rate version id")),
    responses((status = 204, description = "The rate version is deleted"), ReaderErrors, WriterErrors))]
async fn delete_rate(
    State(s): State<AppState>,
    Finance(p): Finance,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    let mut tx = s.pool.begin().await?;
    // deleted and read back in one statement: of concurrent deletions one finds the row, the others a 404
    let before = db::rates::delete(&mut tx, id).await?.ok_or_else(|| ApiError::NotFound(format!("rate {id}")))?;
    audit::record(&mut tx, &p.actor(), "rate.delete", &format!("rate:{id}"), serde_json::to_value(&before).ok(), None)
        .await?;
    tx.commit().await?;
    crate::alerts::check_after_change(&s.pool, s.billing_tz, Some(before.effective_from)).await;
    Ok(StatusCode::NO_CONTENT)
}

/// The rate a TCO model gives, with its yearly breakdown; nothing is stored.
#[utoipa::path(post, path = "/rates/preview", tag = "rates", security(("bearer" = [])), request_body = TcoInputs,
    responses((status = 200, description = "The rate the inputs give, with its parts", body = RateBreakdown), ReaderErrors, WriterErrors))]
async fn preview_rate(
    ScopedReader(_scope): ScopedReader,
    ApiJson(input): ApiJson<TcoInputs>,
) -> Result<Json<RateBreakdown>, ApiError> {
    let tco = input.validate().map_err(|e| pricing_errors(e, ""))?;
    Ok(Json(tco.breakdown()))
}

#[utoipa::path(get, path = "/cloud-rates", tag = "rates", security(("bearer" = [])),
    responses((status = 200, description = "Every model's cloud reference rates", body = Vec<StoredCloudRates>), ReaderErrors))]
async fn list_cloud_rates(
    State(s): State<AppState>,
    ScopedReader(_scope): ScopedReader,
) -> Result<Json<Vec<StoredCloudRates>>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    Ok(Json(db::rates::cloud_rates(&mut conn).await?))
}

/// Sets the cloud reference rates (yuan per card-hour) of a model (finance, admin). Audited.
#[utoipa::path(put, path = "/cloud-rates/{model}", tag = "rates", security(("bearer" = [])),
    params(("model" = String, Path, description = "pricing model key")), request_body = CloudRates,
    responses((status = 200, description = "The cloud rates as stored", body = CloudRates), ReaderErrors, WriterErrors))]
async fn put_cloud_rates(
    State(s): State<AppState>,
    Finance(p): Finance,
    Path(model): Path<String>,
    ApiJson(rates): ApiJson<CloudRates>,
) -> Result<Json<CloudRates>, ApiError> {
    let mut errors = Vec::new();
    for (field, v) in [("on_demand", rates.on_demand), ("spot", rates.spot), ("reserved", rates.reserved)] {
        if v.is_some_and(|v| v < Decimal::ZERO || v > Decimal::from(1_000_000)) {
            errors.push(FieldError { field: field.into(), message: "must be between 0 and 1,000,000".into() });
        }
    }
    if let Err(e) = validate::model_name("model", &model) {
        errors.insert(0, FieldError { field: e.field, message: e.message });
    }
    if !errors.is_empty() {
        return Err(ApiError::Invalid(errors));
    }
    let model = ModelCatalog::new().key_for(model.trim());
    let mut tx = s.pool.begin().await?;
    db::rates::put_cloud_rates(&mut tx, &model, &rates).await?;
    audit::record(
        &mut tx,
        &p.actor(),
        "cloud_rates.put",
        &format!("model:{model}"),
        None,
        serde_json::to_value(rates).ok(),
    )
    .await?;
    tx.commit().await?;
    Ok(Json(rates))
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

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RentVsBuildView {
    pub gpu_model: String,
    /// Allocated card-hours ÷ capacity card-hours of the model in the range.
    #[schema(value_type = String)]
    pub allocation_rate: Decimal,
    /// Effective ÷ allocated card-hours (metered time only).
    #[schema(value_type = String)]
    pub utilization: Option<Decimal>,
    pub comparison: RentVsBuild,
}

/// Self-build vs rent at the measured allocation: own cost per allocated card-hour against each cloud rate, and
/// the break-even allocation (global readers only).
#[utoipa::path(get, path = "/rent-vs-build", tag = "rates", security(("bearer" = [])), params(RentQuery),
    responses((status = 200, description = "Own cost against the cloud rates over the range", body = RentVsBuildView), ReaderErrors))]
async fn get_rent_vs_build(
    State(s): State<AppState>,
    GlobalReader(_reader): GlobalReader,
    ApiQuery(q): ApiQuery<RentQuery>,
) -> Result<Json<RentVsBuildView>, ApiError> {
    let (from, to) = (q.from.resolve("from", s.billing_tz)?, q.to.resolve("to", s.billing_tz)?);
    validate::range(from, to, validate::MAX_RANGE_DAYS)?;
    let model = validate::model_name("model", &q.model)?;
    let mut conn = s.pool.acquire().await?;
    let catalog = ModelCatalog::with_overrides(db::rates::aliases(&mut conn).await?);
    let model = catalog.key_for(&model);
    let versions = db::rates::versions(&mut conn).await?;
    let tco = versions
        .iter()
        .rev()
        .find_map(|v| match &v.source {
            crate::pricing::RateSource::Tco(t) if v.gpu_model == model => Some(t.as_ref().clone()),
            _ => None,
        })
        .ok_or_else(|| ApiError::NotFound(format!("a TCO-derived rate for {model}")))?;
    let cloud = db::rates::cloud_rates(&mut conn)
        .await?
        .into_iter()
        .find(|c| c.gpu_model == model)
        .map(|c| c.rates())
        .unwrap_or(CloudRates { on_demand: None, spot: None, reserved: None });
    let m = db::usage::model_allocation(&s.pool, from, to).await?;
    let (mut alloc, mut cap, mut eff, mut metered) = (0.0, 0.0, 0.0, 0.0);
    for r in m.iter().filter(|r| catalog.key_for(&r.gpu_model) == model) {
        alloc += r.gpu_seconds;
        cap += r.capacity_seconds;
        eff += r.effective_gpu_seconds;
        metered += r.gpu_seconds - r.unmetered_gpu_seconds;
    }
    if cap <= 0.0 || alloc <= 0.0 {
        return Err(ApiError::NotFound(format!("measured usage and capacity of {model} in that range")));
    }
    let ratio = |a: f64, b: f64| Decimal::from_f64_retain(a / b).unwrap_or_default().round_dp(4);
    let allocation_rate = ratio(alloc, cap).min(Decimal::ONE);
    let comparison =
        rent_vs_build(&tco, allocation_rate, &cloud).map_err(|e| pricing_errors(e.fields().to_vec(), ""))?;
    Ok(Json(RentVsBuildView {
        gpu_model: model,
        allocation_rate,
        utilization: (metered > 0.0).then(|| ratio(eff, metered)),
        comparison: comparison.rounded(),
    }))
}
