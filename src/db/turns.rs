//! Turns taken through transaction-level advisory locks, without holding a pooled connection while waiting: a
//! waiter tries the lock, and while another transaction holds it gives its connection back to the pool before
//! trying again. A blocking `pg_advisory_xact_lock` would hold the connection for the whole wait, and 16 waiters
//! hold all of `serve`'s pool — the connections the holder itself needs to finish, and everyone else's (issue 27).

use std::time::Duration;

use sqlx::{PgPool, Postgres, Transaction};

/// The longest pause between two tries.
const MAX_PAUSE: Duration = Duration::from_millis(200);

/// A transaction holding the advisory lock of `key` (`hashtext(key)`), taken as soon as it is free; the lock is
/// held until the transaction ends (a crash rolls it back and frees it).
pub async fn begin_holding(pool: &PgPool, key: &str) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
    let mut pause = Duration::from_millis(5);
    loop {
        let mut tx = pool.begin().await?;
        let taken = sqlx::query_scalar!(r#"SELECT pg_try_advisory_xact_lock(hashtext($1)) AS "taken!""#, key)
            .fetch_one(&mut *tx)
            .await?;
        if taken {
            return Ok(tx);
        }
        tx.rollback().await?;
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}
