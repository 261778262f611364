//! `/reports/quotas/{month}`, `/reports/queue/{month}` and `/queue-mappings`: what each team was promised, what
//! it used of it, what its GPU pods waited, and which team a queue belongs to (SPEC §10), with a CSV import of
//! queue mappings (all rows or none) like the namespace mappings' CMDB import.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::{ReaderErrors, WriterErrors};
use super::error::ApiError;
use super::extract::ApiJson;
use super::teams::ImportQuery;
use super::{ApiPath, ApiQuery, AppState};
use crate::api::bearer::{Finance, ScopedReader};
use crate::billing::Month;
use crate::db;
use crate::usecase::capacity_plan::{self, CapacityPlan};
use crate::usecase::queue_mapping_import::{self, QueueRowOutcome};
use crate::usecase::queue_mappings::{self, QueueMappingInput};
use crate::usecase::quotas::{self, QueueReport, QuotaReport};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_quotas))
        .routes(routes!(get_queue))
        .routes(routes!(get_capacity_plan))
        .routes(routes!(list_queue_mappings, create_queue_mapping))
        .routes(routes!(import_queue_mappings))
}

/// Per team and quota scope in the month: guaranteed card-hours (a Kueue ClusterQueue's nominal quota, a Volcano
/// queue's deserved share, a namespace's `hard` GPU ResourceQuota where the namespace is in no queue), used within
/// the guarantee, borrowed above it and reserved idle — each scope split hour by hour by its own pods' metered
/// GPU-hours. Team leads see their own teams.
#[utoipa::path(get, path = "/reports/quotas/{month}", tag = "reports", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM in the billing time zone")),
    responses((status = 200, description = "The month's quotas per team and scope", body = QuotaReport), ReaderErrors))]
async fn get_quotas(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    ApiPath(month): ApiPath<Month>,
) -> Result<Json<QuotaReport>, ApiError> {
    Ok(Json(quotas::quota_report(&s.cases, &scope, month).await?))
}

/// Per team in the month: Pending card-hours of its GPU pods (∫ q·f while Pending), the pods first Running in the
/// month, those of them that waited, the median and p90 of their waits (nearest rank), and the pods last seen in
/// the month that never ran. Team leads see their own teams.
#[utoipa::path(get, path = "/reports/queue/{month}", tag = "reports", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM in the billing time zone")),
    responses((status = 200, description = "The month's queue wait per team", body = QueueReport), ReaderErrors))]
async fn get_queue(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    ApiPath(month): ApiPath<Month>,
) -> Result<Json<QueueReport>, ApiError> {
    Ok(Json(quotas::queue_report(&s.cases, &scope, month).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct CapacityPlanQuery {
    /// YYYY-MM in the billing time zone (default: the current month).
    #[param(value_type = Option<String>, pattern = r"^[0-9]{4}-[0-9]{2}$")]
    pub month: Option<Month>,
    /// Cards added to each GPU model in the what-if (default 8, one node; at most 10000).
    #[param(maximum = 10000)]
    pub extra_cards: Option<u32>,
}

/// Per GPU model in the month: capacity, allocation rate, Pending card-hours and the waits seen, and the what-if —
/// the month's GPU pods replayed in arrival order (their cards, their Running time) on the capacity and on
/// `extra_cards` more, first come first served within a queue — an estimate. For global readers.
#[utoipa::path(get, path = "/reports/capacity-plan", tag = "reports", security(("bearer" = [])),
    params(CapacityPlanQuery),
    responses((status = 200, description = "The month's capacity plan per GPU model", body = CapacityPlan), ReaderErrors))]
async fn get_capacity_plan(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    ApiQuery(q): ApiQuery<CapacityPlanQuery>,
) -> Result<Json<CapacityPlan>, ApiError> {
    let month = q.month.unwrap_or_else(|| Month::containing(Utc::now(), s.billing_tz));
    Ok(Json(capacity_plan::capacity_plan(&s.cases, &scope, month, q.extra_cards.unwrap_or(8)).await?))
}

/// A queue's team from a date on.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct QueueMapping {
    pub id: i64,
    /// `null`: every cluster.
    pub cluster: Option<String>,
    /// `cluster_queue` (Kueue) or `volcano_queue`.
    pub queue_kind: String,
    pub queue: String,
    pub team_id: String,
    /// First day (billing time zone) the mapping applies.
    pub valid_from: NaiveDate,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

impl From<db::quota::QueueMapping> for QueueMapping {
    fn from(m: db::quota::QueueMapping) -> Self {
        Self {
            id: m.id,
            cluster: m.cluster,
            queue_kind: m.queue_kind,
            queue: m.queue,
            team_id: m.team_id,
            valid_from: m.valid_from,
            created_by: m.created_by,
            created_at: m.created_at,
        }
    }
}

/// The queue mappings of the teams the caller may see.
#[utoipa::path(get, path = "/queue-mappings", tag = "teams", security(("bearer" = [])),
    responses((status = 200, description = "Queue → team mappings", body = Vec<QueueMapping>), ReaderErrors))]
async fn list_queue_mappings(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
) -> Result<Json<Vec<QueueMapping>>, ApiError> {
    let rows = queue_mappings::queue_mappings(&s.cases, &scope).await?;
    Ok(Json(rows.into_iter().map(Into::into).collect()))
}

/// Maps a Kueue ClusterQueue or a Volcano queue to a team from a date (finance, admin): the queue's quota rows
/// count for the team from that day. Audited.
#[utoipa::path(post, path = "/queue-mappings", tag = "teams", security(("bearer" = [])),
    request_body = QueueMappingInput,
    responses((status = 201, description = "The mapping as stored", body = QueueMapping), ReaderErrors, WriterErrors))]
async fn create_queue_mapping(
    State(s): State<AppState>,
    Finance(writer): Finance,
    ApiJson(input): ApiJson<QueueMappingInput>,
) -> Result<(StatusCode, Json<QueueMapping>), ApiError> {
    Ok((StatusCode::CREATED, Json(queue_mappings::create_queue_mapping(&s.cases, &writer, &input).await?.into())))
}

/// What a queue mapping import did (or, dry, would do).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct QueueImportReport {
    /// Nothing was written.
    pub dry_run: bool,
    pub inserted: usize,
    pub updated: usize,
    pub unchanged: usize,
    /// One per row, in file order.
    pub rows: Vec<QueueRowOutcome>,
    /// The mappings written (inserted or updated), as stored; empty on a dry run.
    pub mappings: Vec<QueueMapping>,
}

impl From<queue_mapping_import::QueueImportReport> for QueueImportReport {
    fn from(r: queue_mapping_import::QueueImportReport) -> Self {
        Self {
            dry_run: r.dry_run,
            inserted: r.inserted,
            updated: r.updated,
            unchanged: r.unchanged,
            rows: r.rows,
            mappings: r.mappings.into_iter().map(Into::into).collect(),
        }
    }
}

/// Imports queue → team mappings as CSV (finance, admin) — header `queue_kind,queue,team,valid_from` and an
/// optional `cluster` column (blank: every cluster); `queue_kind` is `cluster_queue` (Kueue) or `volcano_queue` —
/// in UTF-8 (with or without BOM) or GBK/GB18030 (as Chinese Excel saves it), dates as `2026-11-01`,
/// `2026/11/01`, `2026/11/1` or `20261101`. Every team (and cluster) must exist: the import creates none.
/// Idempotent: a row equal to the stored mapping is `unchanged` (nothing written, nothing audited), one naming
/// another team for a stored cluster, queue and day is an `update`. All rows or none: any bad row is a 422
/// listing every problem as `row N: field` (N the line in the file; a missing column is `row 1: <column>`).
/// `?dry_run=true` reports the same and writes nothing. 201 when something was written, else 200. Audited as
/// `queue_mapping.create` and `queue_mapping.update`.
#[utoipa::path(post, path = "/queue-mappings/import", tag = "teams", security(("bearer" = [])), params(ImportQuery),
    request_body(content = String, content_type = "text/csv"),
    responses((status = 201, description = "Imported; what each row did", body = QueueImportReport),
        (status = 200, description = "Nothing written (every row unchanged, or a dry run); what each row does",
            body = QueueImportReport),
        ReaderErrors, WriterErrors))]
async fn import_queue_mappings(
    State(s): State<AppState>,
    Finance(writer): Finance,
    ApiQuery(q): ApiQuery<ImportQuery>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<QueueImportReport>), ApiError> {
    let report = queue_mappings::import(&s.cases, &writer, &body, q.dry_run).await?;
    let status = if report.changed() { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(report.into())))
}
