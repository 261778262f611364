//! All SQL lives here: connections, migrations and one module per stored thing. Callers own transactions.

pub mod audit;
pub mod bills;
pub mod budgets;
pub mod clusters;
pub mod health;
pub mod history;
pub mod idempotency;
pub mod logins;
pub mod nodes;
pub mod oversubscription;
pub mod queue;
pub mod rates;
pub mod readiness;
pub mod replica_policy;
pub mod reports;
pub mod retention;
pub mod roles;
pub mod sessions;
pub mod settings;
pub mod teams;
pub mod telemetry;
pub mod tokens;
pub mod usage;
pub mod users;
pub mod version;
pub mod waste;
pub mod watermark;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};
use std::str::FromStr;
use std::time::Duration;

/// Connects to `DATABASE_URL` with a small pool; statement logging goes to debug level only.
pub async fn connect(url: &str, max_connections: u32) -> Result<PgPool, sqlx::Error> {
    connect_bounded(url, max_connections, None).await
}

/// [`connect`] with PostgreSQL's `statement_timeout` set on every connection of the pool: a statement running
/// longer is cancelled by the server (SQLSTATE 57014), whatever the client does meanwhile.
pub async fn connect_bounded(
    url: &str,
    max_connections: u32,
    statement_timeout: Option<Duration>,
) -> Result<PgPool, sqlx::Error> {
    let mut opts = PgConnectOptions::from_str(url)?.log_statements(tracing::log::LevelFilter::Debug);
    if let Some(t) = statement_timeout {
        opts = opts.options([("statement_timeout", format!("{}ms", t.as_millis()))]);
    }
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(opts)
        .await
}

pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    MIGRATOR.run(pool).await
}

/// Whether the database's schema is the one this binary was built for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaStatus {
    /// Migrations the database has applied that this binary also knows.
    pub applied: usize,
    /// Migrations this binary has that the database has not applied (`cardhour migrate` applies them).
    pub pending: Vec<i64>,
}

/// Reads the applied migrations through sqlx's own bookkeeping (nothing is written: a database that was never
/// migrated is an error, not an empty table created on the way).
pub async fn schema_status(pool: &PgPool) -> Result<SchemaStatus, sqlx::migrate::MigrateError> {
    use sqlx::migrate::Migrate;
    let mut conn = pool.acquire().await?;
    let applied: std::collections::HashSet<i64> =
        conn.list_applied_migrations().await?.into_iter().map(|m| m.version).collect();
    let known: Vec<i64> = MIGRATOR.iter().filter(|m| m.migration_type.is_up_migration()).map(|m| m.version).collect();
    Ok(SchemaStatus {
        applied: known.iter().filter(|v| applied.contains(v)).count(),
        pending: known.into_iter().filter(|v| !applied.contains(v)).collect(),
    })
}

/// Whether the database refused a value the caller gave (a reference to nothing, a check, a NUL byte, a value out
/// of range): the caller's input, not a failure of the service.
pub fn refuses_value(e: &sqlx::Error) -> bool {
    e.as_database_error().and_then(|d| d.code()).is_some_and(|c| {
        matches!(c.as_ref(), "23503" | "23514" | "23502" | "22001" | "22021" | "22P05" | "22008" | "22007" | "22003")
    })
}
