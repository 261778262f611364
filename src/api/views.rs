//! The API's own forms of stored rows: what `/api/v1` answers and documents (the OpenAPI schemas of the same
//! names), converted from the rows of [`crate::db`] and the answers of the use cases, so the storage layer knows
//! nothing of the document and a column added there changes no answer here.

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::db;
use crate::money::{Money, RatePerCardHour};
use crate::usecase::mapping_import::{self, RowOutcome};

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Team {
    /// Stable id: lower-case letters, digits, `.`, `_`, `-`.
    pub id: String,
    /// Display name, any script (e.g. 推荐算法组).
    pub name: String,
    /// 负责人.
    pub owner: Option<String>,
}

impl From<db::teams::Team> for Team {
    fn from(t: db::teams::Team) -> Self {
        Self { id: t.id, name: t.name, owner: t.owner }
    }
}

/// A version of a team's finance codes (SPEC §11): from `valid_from` until the team's next version; a code absent
/// is none (all absent: the version cleared them).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct FinanceCodesVersion {
    pub team_id: String,
    #[schema(example = "2026-12-01")]
    pub valid_from: chrono::NaiveDate,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "CC-1001")]
    pub cost_centre: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "6602.01")]
    pub gl_account: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub legal_entity: Option<String>,
    /// Who set it (a person's name; the audit log keeps the credential).
    pub set_by: String,
    pub set_at: chrono::DateTime<chrono::Utc>,
}

impl From<db::finance_codes::Row> for FinanceCodesVersion {
    fn from(r: db::finance_codes::Row) -> Self {
        Self {
            team_id: r.team_id,
            valid_from: r.valid_from,
            cost_centre: r.cost_centre,
            gl_account: r.gl_account,
            legal_entity: r.legal_entity,
            set_by: crate::access::actor_name(&r.set_by).to_string(),
            set_at: r.set_at,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Mapping {
    pub id: i64,
    /// `null`: every cluster.
    pub cluster: Option<String>,
    pub namespace: String,
    pub team_id: String,
    /// First day (billing time zone) the mapping applies.
    pub valid_from: NaiveDate,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

impl From<db::teams::Mapping> for Mapping {
    fn from(m: db::teams::Mapping) -> Self {
        Self {
            id: m.id,
            cluster: m.cluster,
            namespace: m.namespace,
            team_id: m.team_id,
            valid_from: m.valid_from,
            created_by: m.created_by,
            created_at: m.created_at,
        }
    }
}

/// What an import did (or, dry, would do).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ImportReport {
    /// Nothing was written.
    pub dry_run: bool,
    pub inserted: usize,
    pub updated: usize,
    pub unchanged: usize,
    /// Teams the file names that did not exist (created with the row's `team_name` and `owner`).
    pub teams_created: usize,
    /// Versions of teams' finance codes inserted or changed by the file's `cost_centre`, `gl_account` and
    /// `legal_entity` columns.
    pub finance_codes_set: usize,
    /// One per row, in file order.
    pub rows: Vec<RowOutcome>,
    /// The mappings written (inserted or updated), as stored; empty on a dry run.
    pub mappings: Vec<Mapping>,
}

impl From<mapping_import::ImportReport> for ImportReport {
    fn from(r: mapping_import::ImportReport) -> Self {
        Self {
            dry_run: r.dry_run,
            inserted: r.inserted,
            updated: r.updated,
            unchanged: r.unchanged,
            teams_created: r.teams_created,
            finance_codes_set: r.finance_codes_set,
            rows: r.rows,
            mappings: r.mappings.into_iter().map(Into::into).collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Budget {
    pub team_id: String,
    pub month: String,
    #[schema(value_type = String)]
    pub amount: Decimal,
    #[schema(value_type = Vec<String>)]
    pub thresholds: Vec<Decimal>,
}

impl From<db::budgets::Budget> for Budget {
    fn from(b: db::budgets::Budget) -> Self {
        Self { team_id: b.team_id, month: b.month, amount: b.amount, thresholds: b.thresholds }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Alert {
    pub team_id: String,
    pub month: String,
    #[schema(value_type = String)]
    pub threshold: Decimal,
    pub basis: String,
    pub first_seen_at: DateTime<Utc>,
    pub payload: serde_json::Value,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub delivered_at: Option<DateTime<Utc>>,
}

impl From<db::budgets::Alert> for Alert {
    fn from(a: db::budgets::Alert) -> Self {
        Self {
            team_id: a.team_id,
            month: a.month,
            threshold: a.threshold,
            basis: a.basis,
            first_seen_at: a.first_seen_at,
            payload: a.payload,
            attempts: a.attempts,
            last_error: a.last_error,
            delivered_at: a.delivered_at,
        }
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct BudgetStatus {
    #[serde(flatten)]
    pub budget: Budget,
    /// The team's statement total so far.
    pub spent: Money,
    /// At the current run rate, for the whole month.
    pub forecast: Money,
    pub alerts: Vec<Alert>,
}

impl From<crate::usecase::budgets::BudgetStatus> for BudgetStatus {
    fn from(s: crate::usecase::budgets::BudgetStatus) -> Self {
        Self {
            budget: s.budget.into(),
            spent: s.spent,
            forecast: s.forecast,
            alerts: s.alerts.into_iter().map(Into::into).collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct AuditEntry {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub actor: String,
    pub action: String,
    pub entity: String,
    pub before: Option<serde_json::Value>,
    pub after: Option<serde_json::Value>,
}

impl From<db::audit::AuditEntry> for AuditEntry {
    fn from(e: db::audit::AuditEntry) -> Self {
        Self {
            id: e.id,
            at: e.at,
            actor: e.actor,
            action: e.action,
            entity: e.entity,
            before: e.before,
            after: e.after,
        }
    }
}

/// A stored rate version as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct StoredRate {
    pub id: i64,
    /// Pricing model key, e.g. `A100-80GB`.
    pub gpu_model: String,
    /// First day (billing time zone) the rate applies.
    pub effective_from: NaiveDate,
    pub rate: RatePerCardHour,
    /// The TCO inputs it was derived from; `null` for a rate set by hand.
    #[schema(value_type = Option<crate::pricing::TcoInputs>)]
    pub tco: Option<serde_json::Value>,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

impl From<db::rates::StoredRate> for StoredRate {
    fn from(r: db::rates::StoredRate) -> Self {
        Self {
            id: r.id,
            gpu_model: r.gpu_model,
            effective_from: r.effective_from,
            rate: r.rate,
            tco: r.tco,
            created_by: r.created_by,
            created_at: r.created_at,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
/// A model's cloud rates as stored: the fields of [`CloudRates`] spelled out, since that input type refuses unknown
/// fields and a flattened schema would forbid `gpu_model` and `updated_at` (the document must match what is sent).
pub struct StoredCloudRates {
    pub gpu_model: String,
    pub on_demand: Option<rust_decimal::Decimal>,
    pub spot: Option<rust_decimal::Decimal>,
    pub reserved: Option<rust_decimal::Decimal>,
    pub updated_at: DateTime<Utc>,
}

impl From<db::rates::StoredCloudRates> for StoredCloudRates {
    fn from(c: db::rates::StoredCloudRates) -> Self {
        Self {
            gpu_model: c.gpu_model,
            on_demand: c.on_demand,
            spot: c.spot,
            reserved: c.reserved,
            updated_at: c.updated_at,
        }
    }
}

/// How stored usage is grouped for a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    Team,
    Namespace,
    Pod,
    Model,
}

impl From<GroupBy> for db::usage::GroupBy {
    fn from(g: GroupBy) -> Self {
        match g {
            GroupBy::Team => Self::Team,
            GroupBy::Namespace => Self::Namespace,
            GroupBy::Pod => Self::Pod,
            GroupBy::Model => Self::Model,
        }
    }
}
