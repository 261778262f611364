//! `/teams` and `/mappings`: who owns which namespace, with a CSV import from a CMDB (all rows or none).

use axum::Json;
use axum::extract::{OriginalUri, Path, State};
use axum::http::HeaderMap;
use axum::http::StatusCode;
use chrono::NaiveDate;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::{Paged, ReaderErrors, WriterErrors};
use super::error::ApiError;
use super::extract::ApiJson;
use super::page::{self, PageRequest};
use super::views::{FinanceCodesVersion, ImportReport, Mapping, Team};
use super::{ApiPath, ApiQuery, AppState};
use crate::api::bearer::{Finance, ScopedReader};
use crate::db::audit::Change;
use crate::usecase::finance_codes::{self, FinanceCodesInput};
use crate::usecase::mappings::{self, MappingInput};
use crate::usecase::teams::{self, TeamInput};
use crate::validate::TeamId;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_teams))
        .routes(routes!(get_team, put_team))
        .routes(routes!(list_finance_codes, put_finance_codes))
        .routes(routes!(list_mappings, create_mapping))
        .routes(routes!(import_mappings))
}

/// The teams the caller may see (a team lead: its own).
#[utoipa::path(get, path = "/teams", tag = "teams", security(("bearer" = [])),
    responses((status = 200, description = "Every team the caller may see", body = Vec<Team>), ReaderErrors))]
async fn list_teams(State(s): State<AppState>, ScopedReader(scope): ScopedReader) -> Result<Json<Vec<Team>>, ApiError> {
    Ok(Json(teams::teams(&s.cases, &scope).await?.into_iter().map(Into::into).collect()))
}

#[utoipa::path(get, path = "/teams/{id}", tag = "teams", security(("bearer" = [])),
    params(("id" = String, Path, description = "team id")),
    responses((status = 200, description = "The team", body = Team), ReaderErrors))]
async fn get_team(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    ApiPath(id): ApiPath<TeamId>,
) -> Result<Json<Team>, ApiError> {
    Ok(Json(teams::team(&s.cases, &scope, &id).await?.into()))
}

/// Creates or renames a team (finance, admin). Audited.
#[utoipa::path(put, path = "/teams/{id}", tag = "teams", security(("bearer" = [])),
    params(("id" = String, Path, description = "team id")), request_body = TeamInput,
    responses((status = 200, description = "The team as stored", body = Team), ReaderErrors, WriterErrors))]
async fn put_team(
    State(s): State<AppState>,
    Finance(writer): Finance,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<TeamInput>,
) -> Result<Json<Team>, ApiError> {
    Ok(Json(teams::put_team(&s.cases, &writer, &id, &input).await?.into()))
}

/// The team's finance codes (cost centre, GL account, legal entity), every dated version (SPEC §11). A team lead:
/// its own team's only.
#[utoipa::path(get, path = "/teams/{id}/finance-codes", tag = "teams", security(("bearer" = [])),
    params(("id" = String, Path, description = "team id")),
    responses((status = 200, description = "The team's versions, by first day", body = Vec<FinanceCodesVersion>),
        ReaderErrors))]
async fn list_finance_codes(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    ApiPath(id): ApiPath<TeamId>,
) -> Result<Json<Vec<FinanceCodesVersion>>, ApiError> {
    let rows = finance_codes::versions(&s.cases, &scope, Some(&id)).await?;
    Ok(Json(rows.into_iter().map(Into::into).collect()))
}

/// Puts the team's finance codes from a day (finance, admin): a new version (201), or the version of that day
/// changed (200; the codes stored already: 200, nothing written or audited). Every bill line of the team from that
/// day carries them (a change mid-month splits its lines there); a closed month keeps the codes it was closed
/// with. Blank or absent codes are none; all none clears them from the day. Audited.
#[utoipa::path(put, path = "/teams/{id}/finance-codes", tag = "teams", security(("bearer" = [])),
    params(("id" = String, Path, description = "team id")), request_body = FinanceCodesInput,
    responses((status = 201, description = "A new version, as stored", body = FinanceCodesVersion),
        (status = 200, description = "The version of that day, as stored (changed or as it was)",
            body = FinanceCodesVersion),
        ReaderErrors, WriterErrors))]
async fn put_finance_codes(
    State(s): State<AppState>,
    Finance(writer): Finance,
    ApiPath(id): ApiPath<TeamId>,
    ApiJson(input): ApiJson<FinanceCodesInput>,
) -> Result<(StatusCode, Json<FinanceCodesVersion>), ApiError> {
    let change = finance_codes::put(&s.cases, &writer, &id, &input).await?;
    let status = if matches!(change, Change::Created(_)) { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(change.into_after().into())))
}

#[utoipa::path(get, path = "/mappings", tag = "teams", security(("bearer" = [])),
    params(PageQuery), responses(Paged<Mapping>, ReaderErrors))]
async fn list_mappings(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    OriginalUri(uri): OriginalUri,
    ApiQuery(q): ApiQuery<PageQuery>,
) -> Result<(HeaderMap, Json<Vec<Mapping>>), ApiError> {
    let req = PageRequest::parse(q.limit, q.after.as_deref())?;
    let rows: Vec<Mapping> = mappings::mappings(&s.cases, &scope).await?.into_iter().map(Into::into).collect();
    let (rows, next) = page::page(rows, mapping_key, &req);
    Ok((page::link(&uri, next.as_deref(), &[]), Json(rows)))
}

/// `limit` and `after` of a paged list that takes no other parameter.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PageQuery {
    /// At most this many rows (1–1000, default 100).
    pub limit: Option<i64>,
    /// The page after this cursor (from `Link`).
    pub after: Option<String>,
}

/// A mapping's place in the pages: by namespace, cluster (every cluster first), first day and id (unique).
fn mapping_key(m: &Mapping) -> (String, Option<String>, NaiveDate, i64) {
    (m.namespace.clone(), m.cluster.clone(), m.valid_from, m.id)
}

/// Maps a namespace to a team from a date (finance, admin); stored usage is re-attributed. Audited.
#[utoipa::path(post, path = "/mappings", tag = "teams", security(("bearer" = [])), request_body = MappingInput,
    responses((status = 201, description = "The mapping as stored", body = Mapping), ReaderErrors, WriterErrors))]
async fn create_mapping(
    State(s): State<AppState>,
    Finance(writer): Finance,
    ApiJson(input): ApiJson<MappingInput>,
) -> Result<(StatusCode, Json<Mapping>), ApiError> {
    Ok((StatusCode::CREATED, Json(mappings::create_mapping(&s.cases, &writer, &input).await?.into())))
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ImportQuery {
    /// Report what the import would do per row (insert, update, unchanged) and write nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// Imports a CMDB export as CSV — header `namespace,team,valid_from` and optional `team_name`, `owner`, `cluster`
/// columns — in UTF-8 (with or without BOM) or GBK/GB18030 (as Chinese Excel saves it), dates as `2026-11-01`,
/// `2026/11/01`, `2026/11/1` or `20261101`. Idempotent: a row equal to the stored mapping is `unchanged` (nothing
/// written, nothing audited), one naming another team for a stored cluster, namespace and day is an `update`.
/// All rows or none: any bad row is a 422 listing every problem as `row N: field` (N the line in the file).
/// `?dry_run=true` reports the same and writes nothing. 201 when something was written, else 200.
#[utoipa::path(post, path = "/mappings/import", tag = "teams", security(("bearer" = [])), params(ImportQuery),
    request_body(content = String, content_type = "text/csv"),
    responses((status = 201, description = "Imported; what each row did", body = ImportReport),
        (status = 200, description = "Nothing written (every row unchanged, or a dry run); what each row does",
            body = ImportReport),
        ReaderErrors, WriterErrors))]
async fn import_mappings(
    State(s): State<AppState>,
    Finance(writer): Finance,
    ApiQuery(q): ApiQuery<ImportQuery>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<ImportReport>), ApiError> {
    let report = mappings::import(&s.cases, &writer, &body, q.dry_run).await?;
    let status = if report.changed() { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(report.into())))
}
