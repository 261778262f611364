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

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ImportResult {
    pub teams_created: usize,
    pub mappings: Vec<Mapping>,
}

/// Imports a CMDB export as CSV — header `namespace,team,valid_from` and optional `team_name`, `owner`,
/// `cluster` columns. All rows or none: any bad row is a 422 naming `row N: field`.
#[utoipa::path(post, path = "/mappings/import", tag = "teams", security(("bearer" = [])),
    request_body(content = String, content_type = "text/csv"),
    responses((status = 201, description = "The teams created and the mappings stored", body = ImportResult), ReaderErrors, WriterErrors))]
async fn import_mappings(
    State(s): State<AppState>,
    Finance(p): Finance,
    body: String,
) -> Result<(StatusCode, Json<ImportResult>), ApiError> {
    let rows = parse_mapping_csv(&body).map_err(ApiError::Invalid)?;
    let mut tx = s.pool.begin().await?;
    let mut teams_created = 0;
    let mut mappings = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        let at = format!("row {}: ", i + 2);
        if db::teams::get(&mut tx, &row.team).await?.is_none() {
            let team = validate_team(&row.team, row.team_name.as_deref().unwrap_or(&row.team), row.owner.as_deref())
                .map_err(|e| {
                    ApiError::Invalid(
                        e.into_iter().map(|f| FieldError { field: format!("{at}{}", f.field), ..f }).collect(),
                    )
                })?;
            // a concurrent import may create it first: then it is not ours to count or audit
            if db::teams::create(&mut tx, &team).await? {
                audit::record(&mut tx, &p.actor(), "team.put", &format!("team:{}", team.id), None, json(&team)).await?;
                teams_created += 1;
            }
        }
        let input = MappingInput {
            cluster: row.cluster.clone(),
            namespace: row.namespace.clone(),
            team_id: row.team.clone(),
            valid_from: row.valid_from,
        };
        mappings.push(insert_checked(&mut tx, &input, &p.actor(), &at).await?);
    }
    tx.commit().await?;
    Ok((StatusCode::CREATED, Json(ImportResult { teams_created, mappings })))
}

#[derive(Debug, Deserialize)]
struct CsvRow {
    namespace: String,
    team: String,
    valid_from: String,
    team_name: Option<String>,
    owner: Option<String>,
    cluster: Option<String>,
}

#[derive(Debug)]
struct MappingRow {
    namespace: String,
    team: String,
    valid_from: NaiveDate,
    team_name: Option<String>,
    owner: Option<String>,
    cluster: Option<String>,
}

/// Each row re-attributes stored usage: an import is bounded so that it cannot hold the database for minutes.
const MAX_IMPORT_ROWS: usize = 10_000;

/// Every row checked before anything is written; all errors reported at once.
fn parse_mapping_csv(body: &str) -> Result<Vec<MappingRow>, Vec<FieldError>> {
    let body = body.strip_prefix('\u{feff}').unwrap_or(body);
    let mut reader = csv::ReaderBuilder::new().trim(csv::Trim::All).from_reader(body.as_bytes());
    let mut errors = Vec::new();
    let mut rows = Vec::new();
    for (i, rec) in reader.deserialize::<CsvRow>().enumerate() {
        if i >= MAX_IMPORT_ROWS {
            errors.push(FieldError {
                field: "body".into(),
                message: format!("at most {MAX_IMPORT_ROWS} rows per import; split the file"),
            });
            break;
        }
        let at = format!("row {}", i + 2);
        let row = match rec {
            Ok(r) => r,
            Err(e) => {
                errors.push(FieldError { field: at, message: e.to_string() });
                continue;
            }
        };
        let mut bad =
            |field: &str, message: String| errors.push(FieldError { field: format!("{at}: {field}"), message });
        if let Err(e) = validate::namespace("namespace", &row.namespace) {
            bad("namespace", e.message);
        }
        if TeamId::parse("team", &row.team).is_err() {
            bad("team", format!("`{}` is not a team id (a-z, 0-9, `.`, `_`, `-`)", row.team.escape_debug()));
        }
        for (field, v) in [("team_name", &row.team_name), ("owner", &row.owner)] {
            if let Err(e) = validate::optional_text(field, v.as_deref(), validate::NAME_MAX) {
                bad(field, e.message);
            }
        }
        if let Some(Err(e)) = row.cluster.as_deref().filter(|c| !c.is_empty()).map(|c| validate::cluster("cluster", c))
        {
            bad("cluster", e.message);
        }
        match validate::parse_date("valid_from", &row.valid_from) {
            Ok(valid_from) => rows.push(MappingRow {
                namespace: row.namespace,
                team: row.team,
                valid_from,
                team_name: row.team_name.filter(|s| !s.is_empty()),
                owner: row.owner.filter(|s| !s.is_empty()),
                cluster: row.cluster.filter(|s| !s.is_empty()),
            }),
            Err(e) => bad("valid_from", e.message),
        }
    }
    if rows.is_empty() && errors.is_empty() {
        errors.push(FieldError {
            field: "body".into(),
            message: "no rows (expected a header and at least one row)".into(),
        });
    }
    if errors.is_empty() { Ok(rows) } else { Err(errors) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_are_all_checked() {
        let ok = "\u{feff}namespace,team,team_name,owner,valid_from\nrecsys,rec,推荐算法组,张三,2026-11-01\n";
        let rows = parse_mapping_csv(ok).unwrap();
        assert_eq!(rows[0].team_name.as_deref(), Some("推荐算法组"));
        assert_eq!(rows[0].valid_from, NaiveDate::from_ymd_opt(2026, 11, 1).unwrap());
        let bad = "namespace,team,valid_from\na,Bad Team,2026-11-01\nb,ok,2026-13-01\n";
        let errs = parse_mapping_csv(bad).unwrap_err();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["row 2: team", "row 3: valid_from"]);
        assert!(parse_mapping_csv("namespace,team,valid_from\n").is_err());
        assert!(parse_mapping_csv("namespace,team\na,b\n").is_err());
    }
}
