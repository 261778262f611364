//! Stored answers of POST requests sent with an `Idempotency-Key`, per caller and key, until they expire.

use sqlx::PgPool;

/// A key's stored state.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    pub fingerprint: String,
    /// `None`: the first request with this key is still being answered.
    pub status: Option<i16>,
    pub content_type: Option<String>,
    pub body: Option<Vec<u8>>,
}

/// Claims the key for a request with `fingerprint`; `None` when claimed, else what the key holds already.
/// Expired keys, and claims left unanswered for `stale_secs` (a crashed request), are taken over.
pub async fn claim(
    pool: &PgPool,
    caller: &str,
    key: &str,
    fingerprint: &str,
    ttl_secs: i64,
    stale_secs: i64,
) -> Result<Option<Stored>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query!(
        "DELETE FROM idempotency_keys WHERE caller = $1 AND key = $2
             AND (expires_at < now() OR (status IS NULL AND created_at < now() - make_interval(secs => $3)))",
        caller,
        key,
        stale_secs as f64
    )
    .execute(&mut *tx)
    .await?;
    let claimed = sqlx::query!(
        "INSERT INTO idempotency_keys (caller, key, fingerprint, expires_at)
         VALUES ($1, $2, $3, now() + make_interval(secs => $4))
         ON CONFLICT (caller, key) DO NOTHING",
        caller,
        key,
        fingerprint,
        ttl_secs as f64
    )
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    let existing = if claimed {
        None
    } else {
        sqlx::query_as!(
            Stored,
            "SELECT fingerprint, status, content_type, body FROM idempotency_keys WHERE caller = $1 AND key = $2",
            caller,
            key
        )
        .fetch_optional(&mut *tx)
        .await?
    };
    tx.commit().await?;
    // a row that vanished between the insert and the select (expired and taken over) reads as in flight
    Ok(if claimed {
        None
    } else {
        Some(existing.unwrap_or(Stored {
            fingerprint: fingerprint.into(),
            status: None,
            content_type: None,
            body: None,
        }))
    })
}

/// Stores the answer of the claimed key.
pub async fn answer(
    pool: &PgPool,
    caller: &str,
    key: &str,
    status: i16,
    content_type: Option<&str>,
    body: &[u8],
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE idempotency_keys SET status = $3, content_type = $4, body = $5 WHERE caller = $1 AND key = $2",
        caller,
        key,
        status,
        content_type,
        body
    )
    .execute(pool)
    .await?;
    Ok(())
}

/// Gives the key up (the request failed in a way a retry may fix).
pub async fn release(pool: &PgPool, caller: &str, key: &str) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM idempotency_keys WHERE caller = $1 AND key = $2 AND status IS NULL", caller, key)
        .execute(pool)
        .await?;
    Ok(())
}
