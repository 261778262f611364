//! All SQL lives here: connections, migrations and one module per stored thing. Callers own transactions.

pub mod audit;
pub mod bills;
pub mod budgets;
pub mod clusters;
pub mod health;
pub mod history;
pub mod idempotency;
pub mod rates;
pub mod readiness;
pub mod reports;
pub mod roles;
pub mod settings;
pub mod teams;
pub mod tokens;
pub mod usage;
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
