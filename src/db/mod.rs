//! All SQL lives here: connections, migrations and one module per stored thing. Callers own transactions.

pub mod adjustments;
pub mod audit;
pub mod bills;
pub mod budgets;
pub mod close_events;
pub mod clusters;
pub mod constraint;
pub mod finance_codes;
pub mod health;
pub mod history;
pub mod idempotency;
pub mod logins;
pub mod node_facts;
pub mod nodes;
pub mod oversubscription;
pub mod queue;
pub mod quota;
pub mod rates;
pub mod readiness;
pub mod replica_policy;
pub mod reports;
pub mod reservations;
pub mod retention;
pub mod roles;
pub mod serving;
pub mod sessions;
pub mod settings;
pub mod teams;
pub mod telemetry;
pub mod tokens;
pub mod turns;
pub mod usage;
pub mod users;
pub mod version;
pub mod waits;
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

/// The setting a session declares itself a migration with: the DDL guard (migrations/20261212000300_ddl_guard.sql)
/// admits structure changes of non-superusers only under it.
pub const MIGRATING: (&str, &str) = ("cardhour.migrating", "on");

/// Applies the pending migrations, on one connection declared a migration (closed afterwards, so the declaration
/// never serves another caller of the pool).
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    let mut conn = pool.acquire().await?;
    conn.close_on_drop();
    sqlx::query!("SELECT set_config($1, $2, false)", MIGRATING.0, MIGRATING.1).fetch_one(&mut *conn).await?;
    MIGRATOR.run(&mut *conn).await
}

/// A pool whose every connection is declared a migration (`cardhour migrate`: the migrations and the service
/// role's grants are structure changes).
pub async fn connect_migrating(url: &str, max_connections: u32) -> Result<PgPool, sqlx::Error> {
    let opts = PgConnectOptions::from_str(url)?.log_statements(tracing::log::LevelFilter::Debug).options([MIGRATING]);
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(opts)
        .await
}

/// Whether the DDL guard's event trigger is installed and enabled in the database (a superuser installs it).
pub async fn ddl_guard_installed(pool: &PgPool) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT FROM pg_event_trigger WHERE evtname = 'cardhour_ddl_guard' AND evtenabled <> 'D')
               AS "installed!""#
    )
    .fetch_one(pool)
    .await
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
    constraint::on_constraint(e).is_some_and(|r| !r.violation.is_conflict())
}
