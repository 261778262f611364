//! Teams and the namespace → team mappings; every mapping change re-resolves the stored usage of its namespace.

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgPool};

use super::audit::Change;
use crate::access::Scope;
use crate::validate::{ClusterName, Namespace, TeamId};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Team {
    /// Stable id: lower-case letters, digits, `.`, `_`, `-`.
    pub id: String,
    /// Display name, any script (e.g. 推荐算法组).
    pub name: String,
    /// 负责人.
    pub owner: Option<String>,
}

pub async fn list(pool: &PgPool, scope: &Scope) -> Result<Vec<Team>, sqlx::Error> {
    let teams = scope.teams.as_deref() as Option<&[String]>;
    sqlx::query_as!(
        Team,
        "SELECT id, name, owner FROM teams WHERE $1::text[] IS NULL OR id = ANY($1) ORDER BY id",
        teams
    )
    .fetch_all(pool)
    .await
}

pub async fn get(conn: &mut PgConnection, id: &TeamId) -> Result<Option<Team>, sqlx::Error> {
    sqlx::query_as!(Team, "SELECT id, name, owner FROM teams WHERE id = $1", id.as_str()).fetch_optional(conn).await
}

/// Creates the team or updates its name and owner. As a budget is put (`db::budgets::put`): the creation is the
/// insert that wins, a change reads the row under its lock first (concurrent puts of one team see each other's
/// change as `before`), the name and owner stored already write nothing.
pub async fn upsert(conn: &mut PgConnection, team: &Team) -> Result<Change<Team>, sqlx::Error> {
    let created = sqlx::query_as!(
        Team,
        "INSERT INTO teams (id, name, owner) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING
         RETURNING id, name, owner",
        team.id,
        team.name,
        team.owner
    )
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(created) = created {
        return Ok(Change::Created(created));
    }
    let before = sqlx::query_as!(Team, "SELECT id, name, owner FROM teams WHERE id = $1 FOR UPDATE", team.id)
        .fetch_one(&mut *conn)
        .await?;
    if before.name == team.name && before.owner == team.owner {
        return Ok(Change::Unchanged(before));
    }
    let after = sqlx::query_as!(
        Team,
        "UPDATE teams SET name = $2, owner = $3 WHERE id = $1 RETURNING id, name, owner",
        team.id,
        team.name,
        team.owner
    )
    .fetch_one(conn)
    .await?;
    Ok(Change::Changed { before, after })
}

/// Creates the team unless it exists; `false` when it did (then nothing changes).
pub async fn create(conn: &mut PgConnection, team: &Team) -> Result<bool, sqlx::Error> {
    let r = sqlx::query!(
        "INSERT INTO teams (id, name, owner) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
        team.id,
        team.name,
        team.owner
    )
    .execute(conn)
    .await?;
    Ok(r.rows_affected() == 1)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

pub async fn list_mappings(pool: &PgPool, scope: &Scope) -> Result<Vec<Mapping>, sqlx::Error> {
    let teams = scope.teams.as_deref() as Option<&[String]>;
    sqlx::query_as!(
        Mapping,
        "SELECT id, cluster, namespace, team_id, valid_from, created_by, created_at FROM namespace_mappings
         WHERE $1::text[] IS NULL OR team_id = ANY($1)
         ORDER BY namespace, cluster NULLS FIRST, valid_from",
        teams
    )
    .fetch_all(pool)
    .await
}

/// Inserts a mapping and re-attributes its namespace's usage; `None` when that cluster, namespace and day
/// are mapped already (also when a concurrent request mapped them first).
pub async fn insert_mapping(
    conn: &mut PgConnection,
    cluster: Option<&ClusterName>,
    namespace: &Namespace,
    team_id: &TeamId,
    valid_from: NaiveDate,
    actor: &str,
) -> Result<Option<Mapping>, sqlx::Error> {
    let m = sqlx::query_as!(
        Mapping,
        "INSERT INTO namespace_mappings (cluster, namespace, team_id, valid_from, created_by)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (coalesce(cluster, ''), namespace, valid_from) DO NOTHING
         RETURNING id, cluster, namespace, team_id, valid_from, created_by, created_at",
        cluster.map(ClusterName::as_str),
        namespace.as_str(),
        team_id.as_str(),
        valid_from,
        actor
    )
    .fetch_optional(&mut *conn)
    .await?;
    if m.is_some() {
        retag_namespace(conn, namespace.as_str()).await?;
    }
    Ok(m)
}

/// The mapping of exactly this cluster (`None`: every cluster), namespace and first day, if any.
pub async fn mapping_at(
    conn: &mut PgConnection,
    cluster: Option<&ClusterName>,
    namespace: &Namespace,
    valid_from: NaiveDate,
) -> Result<Option<Mapping>, sqlx::Error> {
    sqlx::query_as!(
        Mapping,
        "SELECT id, cluster, namespace, team_id, valid_from, created_by, created_at FROM namespace_mappings
         WHERE coalesce(cluster, '') = coalesce($1, '') AND namespace = $2 AND valid_from = $3
         FOR UPDATE",
        cluster.map(ClusterName::as_str),
        namespace.as_str(),
        valid_from
    )
    .fetch_optional(conn)
    .await
}

/// Points mapping `id` at another team and re-attributes its namespace's usage.
pub async fn update_mapping_team(
    conn: &mut PgConnection,
    id: i64,
    team_id: &TeamId,
    actor: &str,
) -> Result<Mapping, sqlx::Error> {
    let m = sqlx::query_as!(
        Mapping,
        "UPDATE namespace_mappings SET team_id = $2, created_by = $3, created_at = now() WHERE id = $1
         RETURNING id, cluster, namespace, team_id, valid_from, created_by, created_at",
        id,
        team_id.as_str(),
        actor
    )
    .fetch_one(&mut *conn)
    .await?;
    retag_namespace(conn, &m.namespace).await?;
    Ok(m)
}

/// Re-resolves the team of every stored usage row of `namespace` (SPEC §4 priority, as of each row's day).
pub async fn retag_namespace(conn: &mut PgConnection, namespace: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE gpu_usage_hourly SET team = team_of(cluster, namespace, hour, label_team)
         WHERE namespace = $1 AND team IS DISTINCT FROM team_of(cluster, namespace, hour, label_team)",
        namespace
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "UPDATE usage_namespace_hourly u SET team = g.team
         FROM (SELECT cluster, hour, namespace, gpu_model, kind, max(team) AS team FROM gpu_usage_hourly
               WHERE namespace = $1 GROUP BY cluster, hour, namespace, gpu_model, kind) g
         WHERE u.cluster = g.cluster AND u.hour = g.hour AND u.namespace = g.namespace
           AND u.gpu_model = g.gpu_model AND u.kind = g.kind AND u.team IS DISTINCT FROM g.team",
        namespace
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "SELECT refresh_daily(cluster, day) FROM (SELECT DISTINCT cluster, billing_date(hour) AS day
             FROM usage_namespace_hourly WHERE namespace = $1) d",
        namespace
    )
    .execute(&mut *conn)
    .await?;
    // a pod's team per day is the one of its last hour in the day
    sqlx::query!(
        "UPDATE usage_pod_daily d SET team = h.team
         FROM (SELECT cluster, hour, pod, max(team) AS team FROM gpu_usage_hourly WHERE namespace = $1
               GROUP BY cluster, hour, pod) h
         WHERE d.namespace = $1 AND h.cluster = d.cluster AND h.hour = d.last_hour AND h.pod = d.pod
           AND d.team IS DISTINCT FROM h.team",
        namespace
    )
    .execute(conn)
    .await?;
    Ok(())
}
