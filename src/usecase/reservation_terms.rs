//! Reservation terms (SPEC §10, reserved-quota billing): which GPU model a quota scope's guaranteed cards are priced
//! as and the factor on that model's rate, from a date — dated, cluster-specific first, audited, like mappings. A
//! quota metric says how many cards a scope is promised but never of which model: finance states it here.

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Deserialize;

use super::teams::json;
use super::{Error, Services};
use crate::access::Writer;
use crate::db::{self, audit, reservations::StoredTerm};
use crate::validate::{self, ClusterName, GpuModel, Invalid, Namespace, QueueName};

/// The factor on a model's rate a reservation is billed at: above 0, at most 10, 4 decimals.
pub const FACTOR: validate::DecimalRange = validate::DecimalRange::above(0, 10).with_decimals(4);

/// What kind of quota scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScopeKind {
    /// A namespace's GPU ResourceQuota (where the namespace is in no queue).
    Namespace,
    /// A Kueue ClusterQueue.
    ClusterQueue,
    /// A Volcano queue.
    VolcanoQueue,
}

impl ScopeKind {
    pub const ALL: [ScopeKind; 3] = [ScopeKind::Namespace, ScopeKind::ClusterQueue, ScopeKind::VolcanoQueue];

    pub fn as_str(self) -> &'static str {
        match self {
            ScopeKind::Namespace => "namespace",
            ScopeKind::ClusterQueue => "cluster_queue",
            ScopeKind::VolcanoQueue => "volcano_queue",
        }
    }

    /// The kind named so.
    pub fn parse(s: &str) -> Option<ScopeKind> {
        ScopeKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReservationTermInput {
    /// Omit for every cluster.
    pub cluster: Option<String>,
    pub scope_kind: ScopeKind,
    /// The namespace, ClusterQueue or Volcano queue.
    pub scope: String,
    /// The pricing model the guaranteed cards are billed as, e.g. `H100` (its rate × `factor`).
    pub gpu_model: String,
    /// The factor on the model's rate, e.g. `0.8`.
    #[schema(value_type = String, example = "0.8")]
    #[serde(deserialize_with = "crate::validate::decimal::decimal")]
    pub factor: Decimal,
    pub valid_from: NaiveDate,
}

/// Every reservation term (global readers: terms are finance's, not a team's).
pub async fn list(s: &Services) -> Result<Vec<StoredTerm>, Error> {
    let mut conn = s.pool.acquire().await?;
    Ok(db::reservations::list(&mut conn).await?)
}

/// States a scope's reservation terms from a date (finance). Audited; a draft billed under reserved-quota billing
/// reads them at once, a closed month is restated on the next open one if they change its days.
pub async fn create(s: &Services, by: &Writer, input: &ReservationTermInput) -> Result<StoredTerm, Error> {
    let named = |e: Invalid| Error::invalid(e.field, e.message);
    let scope = match input.scope_kind {
        ScopeKind::Namespace => Namespace::parse("scope", &input.scope).map_err(named)?.as_str().to_string(),
        _ => QueueName::parse("scope", &input.scope).map_err(named)?.as_str().to_string(),
    };
    let model = GpuModel::parse("gpu_model", &input.gpu_model).map_err(named)?;
    let factor = FACTOR.check("factor", input.factor).map_err(named)?;
    let valid_from = validate::date("valid_from", input.valid_from).map_err(named)?;
    let cluster = input.cluster.as_deref().map(|c| ClusterName::parse("cluster", c)).transpose().map_err(named)?;
    let actor = by.actor();
    // the pricing key, as rates are stored: a DCGM name reads as its model
    let mut tx = s.pool.begin().await?;
    let key = db::rates::rate_book(&mut tx).await?.catalog.key_for(model.as_str());
    let new = db::reservations::NewTerm {
        cluster: cluster.as_ref().map(ClusterName::as_str),
        scope_kind: input.scope_kind.as_str(),
        scope: &scope,
        gpu_model: &key,
        factor: factor.normalize(),
        valid_from,
        created_by: &actor,
    };
    // one statement decides: of concurrent identical requests exactly one inserts (and is audited)
    let t = db::reservations::insert(&mut tx, &new)
        .await
        .map_err(|e| if db::refuses_value(&e) { Error::invalid("cluster", "unknown cluster") } else { Error::from(e) })?
        .ok_or_else(|| Error::Conflict {
            field: Some("valid_from".into()),
            message: format!("{} {scope} has reservation terms from {valid_from} already", input.scope_kind.as_str()),
        })?;
    let subject = format!("reservation:{}/{scope}", input.scope_kind.as_str());
    audit::record(&mut tx, &actor, "reservation_terms.create", &subject, None, json(&t)).await?;
    tx.commit().await?;
    Ok(t)
}
