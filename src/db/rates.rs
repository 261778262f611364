//! Rate versions (a dated history per GPU model), cloud reference rates and model-name aliases.

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use sqlx::PgConnection;

use super::audit::Change;
use crate::money::RatePerCardHour;
use crate::pricing::{CloudRates, ModelCatalog, PricingError, RateBook, RateHistory, RateVersion, Tco};
use crate::validate::GpuModel;

/// A stored rate version (the API shows it as `api::views::StoredRate`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredRate {
    pub id: i64,
    /// Pricing model key, e.g. `A100-80GB`.
    pub gpu_model: String,
    /// First day (billing time zone) the rate applies.
    pub effective_from: NaiveDate,
    pub rate: RatePerCardHour,
    /// The TCO inputs it was derived from; `null` for a rate set by hand.
    pub tco: Option<serde_json::Value>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

struct Row {
    id: i64,
    gpu_model: String,
    effective_from: NaiveDate,
    rate: Decimal,
    tco: Option<serde_json::Value>,
    created_by: String,
    created_at: DateTime<Utc>,
}

impl From<Row> for StoredRate {
    fn from(r: Row) -> Self {
        StoredRate {
            id: r.id,
            gpu_model: r.gpu_model,
            effective_from: r.effective_from,
            rate: RatePerCardHour::new(r.rate).unwrap_or_else(|| RatePerCardHour::new(Decimal::ZERO).expect("zero")),
            tco: r.tco,
            created_by: r.created_by,
            created_at: r.created_at,
        }
    }
}

/// Every version, by model and date.
pub async fn list(conn: &mut PgConnection) -> Result<Vec<StoredRate>, sqlx::Error> {
    let rows = sqlx::query_as!(
        Row,
        "SELECT id, gpu_model, effective_from, rate, tco, created_by, created_at FROM rate_versions
         ORDER BY gpu_model, effective_from"
    )
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

/// Every version as pricing's [`RateVersion`] (the TCO re-validated; a stored TCO that no longer validates is
/// carried as a manual rate, its figure unchanged).
pub async fn versions(conn: &mut PgConnection) -> Result<Vec<RateVersion>, sqlx::Error> {
    Ok(list(conn)
        .await?
        .into_iter()
        .map(|stored| {
            let tco = stored.tco.and_then(|v| serde_json::from_value::<Tco>(v).ok());
            match tco {
                Some(tco) if tco.rate() == stored.rate => {
                    RateVersion::from_tco(stored.gpu_model, stored.effective_from, tco)
                }
                _ => RateVersion::manual(stored.gpu_model, stored.effective_from, stored.rate),
            }
        })
        .collect())
}

pub async fn get(conn: &mut PgConnection, id: i64) -> Result<Option<StoredRate>, sqlx::Error> {
    let row = sqlx::query_as!(
        Row,
        "SELECT id, gpu_model, effective_from, rate, tco, created_by, created_at FROM rate_versions WHERE id = $1",
        id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(Into::into))
}

pub async fn insert(
    conn: &mut PgConnection,
    gpu_model: &GpuModel,
    effective_from: NaiveDate,
    rate: RatePerCardHour,
    tco: Option<serde_json::Value>,
    actor: &str,
) -> Result<Option<StoredRate>, sqlx::Error> {
    let row = sqlx::query_as!(
        Row,
        "INSERT INTO rate_versions (gpu_model, effective_from, rate, tco, created_by) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (gpu_model, effective_from) DO NOTHING
         RETURNING id, gpu_model, effective_from, rate, tco, created_by, created_at",
        gpu_model.as_str(),
        effective_from,
        rate.as_decimal(),
        tco,
        actor
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(Into::into))
}

/// Deletes a version and returns it as it was; `None` when no such version (or another caller deleted it).
pub async fn delete(conn: &mut PgConnection, id: i64) -> Result<Option<StoredRate>, sqlx::Error> {
    let row = sqlx::query_as!(
        Row,
        "DELETE FROM rate_versions WHERE id = $1
         RETURNING id, gpu_model, effective_from, rate, tco, created_by, created_at",
        id
    )
    .fetch_optional(conn)
    .await?;
    Ok(row.map(Into::into))
}

#[derive(Debug, Clone, PartialEq, Serialize)]
/// A model's cloud rates as stored: the fields of [`CloudRates`] spelled out, since that input type refuses unknown
/// fields and a flattened schema would forbid `gpu_model` and `updated_at` (the document must match what is sent).
pub struct StoredCloudRates {
    pub gpu_model: String,
    pub on_demand: Option<rust_decimal::Decimal>,
    pub spot: Option<rust_decimal::Decimal>,
    pub reserved: Option<rust_decimal::Decimal>,
    pub updated_at: DateTime<Utc>,
}

impl StoredCloudRates {
    pub fn rates(&self) -> CloudRates {
        CloudRates { on_demand: self.on_demand, spot: self.spot, reserved: self.reserved }
    }
}

pub async fn cloud_rates(conn: &mut PgConnection) -> Result<Vec<StoredCloudRates>, sqlx::Error> {
    let rows =
        sqlx::query!("SELECT gpu_model, on_demand, spot, reserved, updated_at FROM cloud_rates ORDER BY gpu_model")
            .fetch_all(conn)
            .await?;
    Ok(rows
        .into_iter()
        .map(|r| StoredCloudRates {
            gpu_model: r.gpu_model,
            on_demand: r.on_demand,
            spot: r.spot,
            reserved: r.reserved,
            updated_at: r.updated_at,
        })
        .collect())
}

/// Sets the cloud rates of `gpu_model`. As a budget is put (`db::budgets::put`): the creation is the insert that
/// wins, a change reads the row under its lock first (its true `before`), the values stored already write nothing.
pub async fn put_cloud_rates(
    conn: &mut PgConnection,
    gpu_model: &GpuModel,
    r: &CloudRates,
) -> Result<Change<CloudRates>, sqlx::Error> {
    let gpu_model = gpu_model.as_str();
    let created = sqlx::query!(
        "INSERT INTO cloud_rates (gpu_model, on_demand, spot, reserved) VALUES ($1, $2, $3, $4)
         ON CONFLICT (gpu_model) DO NOTHING RETURNING on_demand, spot, reserved",
        gpu_model,
        r.on_demand,
        r.spot,
        r.reserved
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(c) = created {
        return Ok(Change::Created(CloudRates { on_demand: c.on_demand, spot: c.spot, reserved: c.reserved }));
    }
    let b =
        sqlx::query!("SELECT on_demand, spot, reserved FROM cloud_rates WHERE gpu_model = $1 FOR UPDATE", gpu_model)
            .fetch_one(&mut *conn)
            .await?;
    let before = CloudRates { on_demand: b.on_demand, spot: b.spot, reserved: b.reserved };
    if before == *r {
        return Ok(Change::Unchanged(before));
    }
    let a = sqlx::query!(
        "UPDATE cloud_rates SET on_demand = $2, spot = $3, reserved = $4, updated_at = now() WHERE gpu_model = $1
         RETURNING on_demand, spot, reserved",
        gpu_model,
        r.on_demand,
        r.spot,
        r.reserved
    )
    .fetch_one(conn)
    .await?;
    Ok(Change::Changed { before, after: CloudRates { on_demand: a.on_demand, spot: a.spot, reserved: a.reserved } })
}

/// DCGM model name → pricing key overrides.
pub async fn aliases(conn: &mut PgConnection) -> Result<Vec<(String, String)>, sqlx::Error> {
    let rows = sqlx::query!("SELECT model_name, pricing_model FROM gpu_model_aliases").fetch_all(conn).await?;
    Ok(rows.into_iter().map(|r| (r.model_name, r.pricing_model)).collect())
}

/// Sets (or replaces) the pricing key of a DCGM model name; returns the key it had.
pub async fn put_alias(
    conn: &mut PgConnection,
    model_name: &GpuModel,
    pricing_model: &GpuModel,
) -> Result<Option<String>, sqlx::Error> {
    let (model_name, pricing_model) = (model_name.as_str(), pricing_model.as_str());
    // the row lock makes concurrent puts of one name see each other's value as `before`
    let before =
        sqlx::query_scalar!("SELECT pricing_model FROM gpu_model_aliases WHERE model_name = $1 FOR UPDATE", model_name)
            .fetch_optional(&mut *conn)
            .await?;
    sqlx::query!(
        "INSERT INTO gpu_model_aliases (model_name, pricing_model) VALUES ($1, $2)
         ON CONFLICT (model_name) DO UPDATE SET pricing_model = EXCLUDED.pricing_model",
        model_name,
        pricing_model
    )
    .execute(conn)
    .await?;
    Ok(before)
}

/// Why the rate book could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RateBookError {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// The stored versions do not make a history (the schema's constraints should make this impossible): nothing
    /// is priced from them, anywhere.
    #[error("the stored rate history is inconsistent: {0}")]
    Inconsistent(#[from] PricingError),
}

/// The rate book as stored: the aliases over the built-in catalogue, and every rate version. The one place both
/// are loaded, for bills, idle lists, reports and rate views alike.
pub async fn rate_book(conn: &mut PgConnection) -> Result<RateBook, RateBookError> {
    let catalog = ModelCatalog::with_overrides(aliases(conn).await?);
    let history = RateHistory::new(versions(conn).await?)?;
    Ok(RateBook { catalog, history })
}
