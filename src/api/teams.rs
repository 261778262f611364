//! `/teams` and `/mappings`: who owns which namespace, with a CSV import from a CMDB (all rows or none).

use axum::Json;
use axum::extract::{OriginalUri, Path, State};
use axum::http::HeaderMap;
use axum::http::StatusCode;
use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::{Paged, ReaderErrors, WriterErrors};
use super::extract::ApiJson;
use super::page::{self, PageRequest};
use super::{ApiQuery, AppState};
use crate::auth::{Finance, ScopedReader};
use crate::db::{self, audit, teams::Mapping, teams::Team};
use crate::error::{ApiError, FieldError};
use crate::mappings::{self, ImportReport};
use crate::validate::{self, TeamId};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_teams))
        .routes(routes!(get_team, put_team))
        .routes(routes!(list_mappings, create_mapping))
        .routes(routes!(import_mappings))
}

/// The teams the caller may see (a team lead: its own).
#[utoipa::path(get, path = "/teams", tag = "teams", security(("bearer" = [])),
    responses((status = 200, description = "Every team the caller may see", body = Vec<Team>), ReaderErrors))]
async fn list_teams(State(s): State<AppState>, ScopedReader(scope): ScopedReader) -> Result<Json<Vec<Team>>, ApiError> {
    Ok(Json(db::teams::list(&s.pool, &scope).await?))
}

#[utoipa::path(get, path = "/teams/{id}", tag = "teams", security(("bearer" = [])),
    params(("id" = String, Path, description = "team id")),
    responses((status = 200, description = "The team", body = Team), ReaderErrors))]
async fn get_team(
    State(s): State<AppState>,
    ScopedReader(scope): ScopedReader,
    Path(id): Path<String>,
) -> Result<Json<Team>, ApiError> {
    let id = TeamId::parse("id", &id)?.into_string();
    let not_found = || ApiError::NotFound(format!("team {id}"));
    if !scope.allows(&id) {
        return Err(not_found());
    }
    let mut conn = s.pool.acquire().await?;
    db::teams::get(&mut conn, &id).await?.map(Json).ok_or_else(not_found)
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub struct TeamInput {
    pub name: String,
    pub owner: Option<String>,
}

/// Creates or renames a team (finance, admin). Audited.
#[utoipa::path(put, path = "/teams/{id}", tag = "teams", security(("bearer" = [])),
    params(("id" = String, Path, description = "team id")), request_body = TeamInput,
    responses((status = 200, description = "The team as stored", body = Team), ReaderErrors, WriterErrors))]
async fn put_team(
    State(s): State<AppState>,
    Finance(p): Finance,
    Path(id): Path<String>,
    ApiJson(input): ApiJson<TeamInput>,
) -> Result<Json<Team>, ApiError> {
    let team = validate_team(&id, &input.name, input.owner.as_deref()).map_err(ApiError::Invalid)?;
    let mut tx = s.pool.begin().await?;
    let before = db::teams::upsert(&mut tx, &team).await?;
    audit::record(&mut tx, &p.actor(), "team.put", &format!("team:{id}"), json(&before), json(&team)).await?;
    tx.commit().await?;
    Ok(Json(team))
}

fn json<T: Serialize>(v: &T) -> Option<serde_json::Value> {
    serde_json::to_value(v).ok().filter(|v| !v.is_null())
}

/// Every field checked, all errors reported at once.
fn validate_team(id: &str, name: &str, owner: Option<&str>) -> Result<Team, Vec<FieldError>> {
    let id = TeamId::parse("id", id);
    let name = validate::text("name", name, validate::NAME_MAX);
    let owner = validate::optional_text("owner", owner, validate::NAME_MAX);
    match (id, name, owner) {
        (Ok(id), Ok(name), Ok(owner)) => Ok(Team { id: id.into_string(), name, owner }),
        (id, name, owner) => Err([id.err(), name.err(), owner.err()]
            .into_iter()
            .flatten()
            .map(|e| FieldError { field: e.field, message: e.message })
            .collect()),
    }
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
    let rows = db::teams::list_mappings(&s.pool, &scope).await?;
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

#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
pub struct MappingInput {
    /// Omit for every cluster.
    pub cluster: Option<String>,
    pub namespace: String,
    pub team_id: String,
    pub valid_from: NaiveDate,
}

/// Maps a namespace to a team from a date (finance, admin); stored usage is re-attributed. Audited.
#[utoipa::path(post, path = "/mappings", tag = "teams", security(("bearer" = [])), request_body = MappingInput,
    responses((status = 201, description = "The mapping as stored", body = Mapping), ReaderErrors, WriterErrors))]
async fn create_mapping(
    State(s): State<AppState>,
    Finance(p): Finance,
    ApiJson(input): ApiJson<MappingInput>,
) -> Result<(StatusCode, Json<Mapping>), ApiError> {
    let mut tx = s.pool.begin().await?;
    let m = insert_checked(&mut tx, &input, &p.actor(), "").await?;
    tx.commit().await?;
    crate::alerts::check_after_change(&s.pool, s.billing_tz, Some(m.valid_from)).await;
    Ok((StatusCode::CREATED, Json(m)))
}

/// Checks and inserts one mapping inside the caller's transaction; `at` prefixes field names (CSV rows).
async fn insert_checked(
    tx: &mut sqlx::PgConnection,
    input: &MappingInput,
    actor: &str,
    at: &str,
) -> Result<Mapping, ApiError> {
    let named = |e: validate::Invalid| ApiError::invalid(format!("{at}{}", e.field), e.message);
    let ns = validate::namespace("namespace", &input.namespace).map_err(named)?;
    let team = TeamId::parse("team_id", &input.team_id).map_err(named)?;
    let valid_from = validate::date("valid_from", input.valid_from).map_err(named)?;
    let cluster = match input.cluster.as_deref().map(str::trim).filter(|c| !c.is_empty()) {
        Some(c) => Some(validate::cluster("cluster", c).map_err(named)?),
        None => None,
    };
    if db::teams::get(&mut *tx, team.as_str()).await?.is_none() {
        return Err(ApiError::invalid(format!("{at}team_id"), format!("unknown team `{team}`")));
    }
    // one statement decides: of concurrent identical requests exactly one inserts (and is audited)
    let m = db::teams::insert_mapping(&mut *tx, cluster.as_deref(), &ns, team.as_str(), valid_from, actor)
        .await
        .map_err(|e| match ApiError::from(e) {
            ApiError::Invalid(_) => ApiError::invalid(format!("{at}team_id"), format!("unknown team `{team}`")),
            other => other,
        })?
        .ok_or_else(|| ApiError::Conflict {
            field: Some(format!("{at}valid_from")),
            message: format!("namespace {ns} already has a mapping valid from {valid_from}"),
        })?;
    audit::record(&mut *tx, actor, "mapping.create", &format!("namespace:{ns}"), None, json(&m)).await?;
    Ok(m)
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
    Finance(p): Finance,
    ApiQuery(q): ApiQuery<ImportQuery>,
    body: axum::body::Bytes,
) -> Result<(StatusCode, Json<ImportReport>), ApiError> {
    let text = mappings::decode(&body)?;
    let rows = mappings::parse(&text).map_err(invalid)?;
    let mut tx = s.pool.begin().await?;
    let report = mappings::import(&mut tx, &rows, &p.actor(), q.dry_run).await.map_err(|e| match e {
        mappings::ImportError::Invalid(errors) => invalid(errors),
        mappings::ImportError::Database(e) => e.into(),
    })?;
    if q.dry_run {
        tx.rollback().await?;
    } else {
        tx.commit().await?;
        if let Some(since) =
            report.rows.iter().filter(|r| r.action != mappings::RowAction::Unchanged).map(|r| r.valid_from).min()
        {
            crate::alerts::check_after_change(&s.pool, s.billing_tz, Some(since)).await;
        }
    }
    let status = if report.changed() { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(report)))
}

fn invalid(errors: Vec<validate::Invalid>) -> ApiError {
    ApiError::Invalid(errors.into_iter().map(|e| FieldError { field: e.field, message: e.message }).collect())
}
