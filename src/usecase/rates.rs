//! Rates per card-hour: the dated history per GPU model (from a TCO model or set by hand), TCO previews, cloud
//! reference rates, the model aliases DCGM names are priced under, and self-build vs rent at the measured
//! allocation. Every change is audited and re-checks the budgets it touches.

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::{Error, Services, global_only};
use crate::access::{Scope, Writer};
use crate::db::{self, audit, rates::StoredCloudRates, rates::StoredRate};
use crate::money::RatePerCardHour;
use crate::pricing::{CloudRates, ModelCatalog, RateBreakdown, RateSource, RentVsBuild, TcoInputs, rent_vs_build};
use crate::validate::{self, GpuModel, Invalid};

/// How a DCGM `modelName` is priced: the built-in catalogue's key, unless an alias says otherwise.
#[derive(Debug, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ModelAlias {
    /// The DCGM `modelName`, e.g. `NVIDIA A100-SXM4-80GB`.
    pub model_name: String,
    /// The pricing model key its rates are stored under, e.g. `A100-80GB`.
    pub pricing_model: String,
}

/// Every DCGM model name mapped to a pricing model (any reader).
pub async fn model_aliases(s: &Services, _scope: &Scope) -> Result<Vec<ModelAlias>, Error> {
    let mut conn = s.pool.acquire().await?;
    let aliases = db::rates::aliases(&mut conn).await?;
    Ok(aliases.into_iter().map(|(model_name, pricing_model)| ModelAlias { model_name, pricing_model }).collect())
}

/// Prices DCGM model name `model_name` under `pricing_model` (finance); open months follow at once. Audited.
pub async fn put_model_alias(
    s: &Services,
    by: &Writer,
    model_name: &str,
    pricing_model: &str,
) -> Result<ModelAlias, Error> {
    let actor = &by.actor();
    let model_name = GpuModel::parse("model_name", model_name)?;
    let key = GpuModel::parse("pricing_model", pricing_model)?;
    let mut tx = s.pool.begin().await?;
    let before = db::rates::put_alias(&mut tx, &model_name, &key).await?;
    audit::record(
        &mut tx,
        actor,
        "model_alias.put",
        &format!("model:{model_name}"),
        before.map(serde_json::Value::from),
        Some(serde_json::Value::from(key.as_str())),
    )
    .await?;
    tx.commit().await?;
    crate::usecase::alerts::check_after_change(&s.pool, s.billing_tz, None).await;
    Ok(ModelAlias { model_name: model_name.into_string(), pricing_model: key.into_string() })
}

/// Pricing's refused fields as the use cases' error, each name prefixed (`tco.`).
fn pricing_errors(errors: Vec<crate::pricing::FieldError>, prefix: &str) -> Error {
    Error::Invalid(errors.into_iter().map(|e| Invalid::new(format!("{prefix}{}", e.field), e.message)).collect())
}

/// Every rate version, per model by effective date (any reader).
pub async fn rates(s: &Services, _scope: &Scope) -> Result<Vec<StoredRate>, Error> {
    let mut conn = s.pool.acquire().await?;
    Ok(db::rates::list(&mut conn).await?)
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
    #[serde(default, deserialize_with = "crate::validate::decimal::optional_decimal")]
    pub rate: Option<Decimal>,
}

/// Adds a rate version (finance). Two versions of one model on the same date are refused. Audited.
pub async fn create_rate(s: &Services, by: &Writer, input: RateInput) -> Result<StoredRate, Error> {
    let actor = &by.actor();
    let model = GpuModel::parse("gpu_model", &input.gpu_model)?;
    let effective_from = validate::date("effective_from", input.effective_from)?;
    let (rate, tco) = match (input.tco, input.rate) {
        (Some(tco), None) => {
            let tco = tco.validate().map_err(|e| pricing_errors(e, "tco."))?;
            (tco.rate(), Some(serde_json::to_value(tco.inputs()).map_err(anyhow::Error::from)?))
        }
        (None, Some(rate)) => {
            let rate = RatePerCardHour::new(rate)
                .filter(|r| crate::pricing::RATE.contains(r.as_decimal()))
                .ok_or_else(|| Error::invalid("rate", "must be between 0 and 1,000,000 yuan per card-hour"))?;
            (rate, None)
        }
        _ => return Err(Error::invalid("tco", "give either `tco` or `rate`, exactly one")),
    };
    let model = ModelCatalog::new().key_of(&model);
    let mut tx = s.pool.begin().await?;
    // one statement decides: of concurrent identical requests exactly one inserts (and is audited)
    let stored =
        db::rates::insert(&mut tx, &model, effective_from, rate, tco, actor).await?.ok_or_else(|| Error::Conflict {
            field: Some("effective_from".into()),
            message: format!("{model} already has a rate effective from {effective_from}"),
        })?;
    let after = serde_json::to_value(&stored).ok();
    audit::record(&mut tx, actor, "rate.create", &format!("rate:{}", stored.id), None, after).await?;
    tx.commit().await?;
    crate::usecase::alerts::check_after_change(&s.pool, s.billing_tz, Some(effective_from)).await;
    Ok(stored)
}

/// Removes rate version `id` (finance). Closed months keep their bills; open months are recomputed. Audited.
pub async fn delete_rate(s: &Services, by: &Writer, id: i64) -> Result<(), Error> {
    let actor = &by.actor();
    let mut tx = s.pool.begin().await?;
    // deleted and read back in one statement: of concurrent deletions one finds the row, the others not found
    let before = db::rates::delete(&mut tx, id).await?.ok_or_else(|| Error::NotFound(format!("rate {id}")))?;
    audit::record(&mut tx, actor, "rate.delete", &format!("rate:{id}"), serde_json::to_value(&before).ok(), None)
        .await?;
    tx.commit().await?;
    crate::usecase::alerts::check_after_change(&s.pool, s.billing_tz, Some(before.effective_from)).await;
    Ok(())
}

/// The rate a TCO model gives, with its yearly breakdown; nothing is stored.
pub fn preview_rate(input: TcoInputs) -> Result<RateBreakdown, Error> {
    let tco = input.validate().map_err(|e| pricing_errors(e, ""))?;
    Ok(tco.breakdown())
}

/// Every model's cloud reference rates (any reader).
pub async fn cloud_rates(s: &Services, _scope: &Scope) -> Result<Vec<StoredCloudRates>, Error> {
    let mut conn = s.pool.acquire().await?;
    Ok(db::rates::cloud_rates(&mut conn).await?)
}

/// Sets the cloud reference rates (yuan per card-hour) of `model` (finance). Audited.
pub async fn put_cloud_rates(s: &Services, by: &Writer, model: &str, rates: CloudRates) -> Result<CloudRates, Error> {
    let actor = &by.actor();
    let mut errors = Vec::new();
    for (field, v) in [("on_demand", rates.on_demand), ("spot", rates.spot), ("reserved", rates.reserved)] {
        if v.is_some_and(|v| !crate::pricing::CLOUD_RATE.contains(v)) {
            errors.push(Invalid::new(field, "must be between 0 and 1,000,000"));
        }
    }
    let model = GpuModel::parse("model", model).map_err(|e| errors.insert(0, e)).ok();
    let Some(model) = model.filter(|_| errors.is_empty()) else { return Err(Error::Invalid(errors)) };
    let model = ModelCatalog::new().key_of(&model);
    let mut tx = s.pool.begin().await?;
    // the entry's `before` is the row as it was, read under its lock; the same values again write nothing
    let change = db::rates::put_cloud_rates(&mut tx, &model, &rates).await?;
    if audit::record_change(&mut tx, actor, "cloud_rates.put", &format!("model:{model}"), &change).await? {
        tx.commit().await?;
    }
    Ok(rates)
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

/// Self-build vs rent of `model` over `[from, to)` (at most [`validate::MAX_RANGE_DAYS`]) at the measured
/// allocation: own cost per allocated card-hour against each cloud rate, and the break-even allocation (global
/// readers).
pub async fn rent_vs_build_view(
    s: &Services,
    scope: &Scope,
    model: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Result<RentVsBuildView, Error> {
    global_only(scope)?;
    validate::range(from, to, validate::MAX_RANGE_DAYS)?;
    let model = validate::model_name("model", model)?;
    let mut conn = s.pool.acquire().await?;
    let book = db::rates::rate_book(&mut conn).await?;
    let model = book.catalog.key_for(&model);
    let tco = book
        .history
        .versions(&model)
        .iter()
        .rev()
        .find_map(|v| match &v.source {
            RateSource::Tco(t) => Some(t.as_ref().clone()),
            RateSource::Manual => None,
        })
        .ok_or_else(|| Error::NotFound(format!("a TCO-derived rate for {model}")))?;
    let cloud = db::rates::cloud_rates(&mut conn)
        .await?
        .into_iter()
        .find(|c| c.gpu_model == model)
        .map(|c| c.rates())
        .unwrap_or(CloudRates { on_demand: None, spot: None, reserved: None });
    let m = db::usage::model_allocation(&s.pool, from, to).await?;
    let (mut alloc, mut cap, mut eff, mut metered) = (0.0, 0.0, 0.0, 0.0);
    for r in m.iter().filter(|r| book.catalog.key_for(&r.gpu_model) == model) {
        alloc += r.gpu_seconds;
        cap += r.capacity_seconds;
        eff += r.effective_gpu_seconds;
        metered += r.gpu_seconds - r.unmetered_gpu_seconds;
    }
    if cap <= 0.0 || alloc <= 0.0 {
        return Err(Error::NotFound(format!("measured usage and capacity of {model} in that range")));
    }
    let ratio = |a: f64, b: f64| Decimal::from_f64_retain(a / b).unwrap_or_default().round_dp(4);
    let allocation_rate = ratio(alloc, cap).min(Decimal::ONE);
    let comparison =
        rent_vs_build(&tco, allocation_rate, &cloud).map_err(|e| pricing_errors(e.fields().to_vec(), ""))?;
    Ok(RentVsBuildView {
        gpu_model: model,
        allocation_rate,
        utilization: (metered > 0.0).then(|| ratio(eff, metered)),
        comparison: comparison.rounded(),
    })
}
