//! The portal's sessions in `portal_sessions`: a tower-sessions [`SessionStore`] with checked queries, keyed by
//! the SHA-256 of the session id (the table never holds a usable cookie), expired rows never loaded and deleted
//! periodically.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use tower_sessions::cookie::time::OffsetDateTime;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, SessionStore};

/// The sessions of `pool`.
#[derive(Debug, Clone)]
pub struct PgSessionStore {
    pool: PgPool,
}

impl PgSessionStore {
    pub fn new(pool: PgPool) -> Self {
        Self { pool }
    }

    /// Deletes the sessions that have expired (they are never loaded anyway: this keeps the table small).
    pub async fn delete_expired(&self) -> Result<u64, sqlx::Error> {
        let r = sqlx::query!("DELETE FROM portal_sessions WHERE expiry_date <= now()").execute(&self.pool).await?;
        Ok(r.rows_affected())
    }
}

fn id_hash(id: &Id) -> String {
    crate::digest::sha256_hex(id.to_string().as_bytes())
}

fn expiry(t: OffsetDateTime) -> DateTime<Utc> {
    DateTime::from_timestamp(t.unix_timestamp(), t.nanosecond()).unwrap_or(DateTime::<Utc>::MIN_UTC)
}

fn backend(e: impl std::fmt::Display) -> session_store::Error {
    session_store::Error::Backend(e.to_string())
}

fn encode(r: &Record) -> session_store::Result<serde_json::Value> {
    serde_json::to_value(&r.data).map_err(|e| session_store::Error::Encode(e.to_string()))
}

#[async_trait]
impl SessionStore for PgSessionStore {
    /// A new session; on the (2^-128) chance its random id is taken, a new id is drawn.
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        let data = encode(record)?;
        loop {
            let inserted = sqlx::query!(
                "INSERT INTO portal_sessions (id_hash, data, expiry_date) VALUES ($1, $2, $3)
                 ON CONFLICT (id_hash) DO NOTHING",
                id_hash(&record.id),
                data,
                expiry(record.expiry_date)
            )
            .execute(&self.pool)
            .await
            .map_err(backend)?;
            if inserted.rows_affected() == 1 {
                return Ok(());
            }
            record.id = Id::default();
        }
    }

    /// Updates a session that exists; one deleted meanwhile (signed out, its user's password changed) stays
    /// deleted: a request still running under it must not bring it back when it saves. (New sessions go
    /// through [`create`](SessionStore::create).)
    async fn save(&self, record: &Record) -> session_store::Result<()> {
        sqlx::query!(
            "UPDATE portal_sessions SET data = $2, expiry_date = $3 WHERE id_hash = $1",
            id_hash(&record.id),
            encode(record)?,
            expiry(record.expiry_date)
        )
        .execute(&self.pool)
        .await
        .map_err(backend)?;
        Ok(())
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        let row = sqlx::query!(
            "SELECT data, expiry_date FROM portal_sessions WHERE id_hash = $1 AND expiry_date > now()",
            id_hash(id)
        )
        .fetch_optional(&self.pool)
        .await
        .map_err(backend)?;
        let Some(row) = row else { return Ok(None) };
        let data = serde_json::from_value(row.data).map_err(|e| session_store::Error::Decode(e.to_string()))?;
        let expiry_date = OffsetDateTime::from_unix_timestamp_nanos(
            i128::from(row.expiry_date.timestamp()) * 1_000_000_000
                + i128::from(row.expiry_date.timestamp_subsec_nanos()),
        )
        .map_err(|e| session_store::Error::Decode(e.to_string()))?;
        Ok(Some(Record { id: *id, data, expiry_date }))
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        sqlx::query!("DELETE FROM portal_sessions WHERE id_hash = $1", id_hash(id))
            .execute(&self.pool)
            .await
            .map_err(backend)?;
        Ok(())
    }
}

/// Ends every session of user `user_id` but `keep`'s (the one making the change); how many ended.
pub async fn end_user_sessions(conn: &mut PgConnection, user_id: i64, keep: Option<&Id>) -> Result<u64, sqlx::Error> {
    let r = sqlx::query!(
        "DELETE FROM portal_sessions WHERE data @> jsonb_build_object('user_id', $1::bigint)
         AND ($2::text IS NULL OR id_hash <> $2)",
        user_id,
        keep.map(id_hash)
    )
    .execute(conn)
    .await?;
    Ok(r.rows_affected())
}

/// Deletes expired sessions every `every` until the process ends.
pub async fn delete_expired_every(pool: PgPool, every: std::time::Duration) {
    let store = PgSessionStore::new(pool);
    let mut tick = tokio::time::interval(every);
    loop {
        tick.tick().await;
        if let Err(e) = store.delete_expired().await {
            tracing::warn!("deleting expired portal sessions: {e}");
        }
    }
}
