//! Failed logins, for the throttle: an attempt is admitted — and recorded as a failure — before its password is
//! checked, under a lock per name and per address (`login_admit`, migrations/20261212000100_login_throttle.sql), so
//! a burst of attempts cannot all be checked; a success forgets its name's failures, the window forgets the rest.

use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// The limits of the throttle: failures per name and per address within a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub window: chrono::TimeDelta,
    pub by_name: i32,
    pub by_address: i32,
}

/// Admits an attempt of `username` from `address` (an IP address as text): `None` when admitted (it is recorded
/// as a failure until [`forget`] clears it), else when the first slot frees (nothing recorded).
pub async fn admit(
    pool: &PgPool,
    username: &str,
    address: &str,
    limits: Limits,
) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    let window_secs = i32::try_from(limits.window.num_seconds()).unwrap_or(i32::MAX);
    sqlx::query_scalar!(
        "SELECT login_admit($1, $2::text::inet, $3, $4, $5)",
        username,
        address,
        window_secs,
        limits.by_name,
        limits.by_address
    )
    .fetch_one(pool)
    .await
}

/// Forgets the failures of `username` (it has just signed in; its address's other failures stay counted).
pub async fn forget(pool: &PgPool, username: &str) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM login_failures WHERE username = $1", username).execute(pool).await?;
    Ok(())
}
