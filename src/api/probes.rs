//! Liveness and readiness probes for orchestrators: `/healthz` answers while the process runs, `/readyz` only
//! when the database answers and its schema is the one this binary was built for. Served by `cardhour serve` and
//! by a worker's `--metrics-listen` port alike (they need only the pool).

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use sqlx::PgPool;

use super::error::ApiError;

/// The liveness answer: the process runs and serves requests (nothing else is checked, so a database outage
/// does not get the process restarted in a loop).
pub async fn healthz() -> &'static str {
    "ok"
}

#[derive(Debug, Serialize)]
pub struct Ready {
    pub status: &'static str,
    /// Migrations applied (all that this binary knows).
    pub migrations: usize,
}

/// The readiness answer: 200 when the database is reachable and every migration of this binary is applied,
/// 503 (JSON, code `unavailable`) otherwise — details in the log, not in the answer.
pub async fn readyz(State(pool): State<PgPool>) -> Result<Json<Ready>, ApiError> {
    let status = crate::db::schema_status(&pool).await.map_err(|e| {
        tracing::warn!(error = %e, "readiness: the database cannot be read");
        ApiError::Unavailable("the database cannot be reached or was never migrated".into())
    })?;
    if !status.pending.is_empty() {
        tracing::warn!(pending = ?status.pending, "readiness: migrations not applied");
        return Err(ApiError::Unavailable(format!(
            "{} migration(s) not applied: run `cardhour migrate`",
            status.pending.len()
        )));
    }
    Ok(Json(Ready { status: "ready", migrations: status.applied }))
}
