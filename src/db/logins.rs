//! Failed logins, for the throttle: recorded per name tried and client address, counted over a window, forgotten
//! after it (and a name's on its successful login).

use chrono::{DateTime, Utc};
use sqlx::PgPool;

/// The failures of the window: how many, and the oldest (when the window frees a slot), per name and per address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recent {
    pub by_name: i64,
    pub oldest_by_name: Option<DateTime<Utc>>,
    pub by_address: i64,
    pub oldest_by_address: Option<DateTime<Utc>>,
}

/// The failures since `since` for `username` and for `address` (an IP address as text).
pub async fn recent(pool: &PgPool, username: &str, address: &str, since: DateTime<Utc>) -> Result<Recent, sqlx::Error> {
    let r = sqlx::query!(
        r#"SELECT count(*) FILTER (WHERE username = $1) AS "by_name!",
                  min(at) FILTER (WHERE username = $1) AS oldest_by_name,
                  count(*) FILTER (WHERE address = $2::text::inet) AS "by_address!",
                  min(at) FILTER (WHERE address = $2::text::inet) AS oldest_by_address
           FROM login_failures WHERE at > $3 AND (username = $1 OR address = $2::text::inet)"#,
        username,
        address,
        since
    )
    .fetch_one(pool)
    .await?;
    Ok(Recent {
        by_name: r.by_name,
        oldest_by_name: r.oldest_by_name,
        by_address: r.by_address,
        oldest_by_address: r.oldest_by_address,
    })
}

/// Records a failure, and forgets every failure older than `forget_before`.
pub async fn record_failure(
    pool: &PgPool,
    username: &str,
    address: &str,
    forget_before: DateTime<Utc>,
) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query!("DELETE FROM login_failures WHERE at <= $1", forget_before).execute(&mut *tx).await?;
    sqlx::query!("INSERT INTO login_failures (username, address) VALUES ($1, $2::text::inet)", username, address)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

/// Forgets the failures of `username` (it has just signed in; its address's failures stay counted).
pub async fn forget(pool: &PgPool, username: &str) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM login_failures WHERE username = $1", username).execute(pool).await?;
    Ok(())
}
