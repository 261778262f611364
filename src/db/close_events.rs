//! The close event's tables: the endpoints finance configured, the events (one per close, the body as sent), each
//! event's delivery to each endpoint, and every POST of a delivery.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

/// A configured endpoint, its secret included (the faces mask it).
#[derive(Clone)]
pub struct Endpoint {
    pub id: i64,
    pub url: String,
    pub secret: String,
    pub active: bool,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

impl std::fmt::Debug for Endpoint {
    /// Without the secret: a stray `{:?}` must not log it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("id", &self.id)
            .field("url", &self.url)
            .field("active", &self.active)
            .field("created_by", &self.created_by)
            .field("created_at", &self.created_at)
            .finish_non_exhaustive()
    }
}

pub async fn insert_endpoint(
    conn: &mut PgConnection,
    url: &str,
    secret: &str,
    by: &str,
) -> Result<Endpoint, sqlx::Error> {
    sqlx::query_as!(
        Endpoint,
        "INSERT INTO close_endpoints (url, secret, created_by) VALUES ($1, $2, $3)
         RETURNING id, url, secret, active, created_by, created_at",
        url,
        secret,
        by
    )
    .fetch_one(conn)
    .await
}

/// Every endpoint, the newest first.
pub async fn endpoints(conn: &mut PgConnection) -> Result<Vec<Endpoint>, sqlx::Error> {
    sqlx::query_as!(
        Endpoint,
        "SELECT id, url, secret, active, created_by, created_at FROM close_endpoints ORDER BY id DESC"
    )
    .fetch_all(conn)
    .await
}

/// Endpoint `id`, locked until the transaction ends.
pub async fn endpoint_for_update(conn: &mut PgConnection, id: i64) -> Result<Option<Endpoint>, sqlx::Error> {
    sqlx::query_as!(
        Endpoint,
        "SELECT id, url, secret, active, created_by, created_at FROM close_endpoints WHERE id = $1 FOR UPDATE",
        id
    )
    .fetch_optional(conn)
    .await
}

pub async fn deactivate(conn: &mut PgConnection, id: i64) -> Result<(), sqlx::Error> {
    sqlx::query!("UPDATE close_endpoints SET active = false WHERE id = $1", id).execute(conn).await?;
    Ok(())
}

/// Records event `id` of the close of `month` with its body, and a delivery due now to every active endpoint (in
/// the close's transaction); how many deliveries.
pub async fn insert_event(conn: &mut PgConnection, id: &str, month: &str, payload: &str) -> Result<u64, sqlx::Error> {
    sqlx::query!("INSERT INTO close_events (id, month, payload) VALUES ($1, $2, $3)", id, month, payload)
        .execute(&mut *conn)
        .await?;
    let r = sqlx::query!(
        "INSERT INTO close_deliveries (event_id, endpoint_id) SELECT $1, id FROM close_endpoints WHERE active",
        id
    )
    .execute(conn)
    .await?;
    Ok(r.rows_affected())
}

/// A delivery claimed for one POST.
pub struct Due {
    pub delivery_id: i64,
    pub event_id: String,
    pub attempts: i32,
    pub url: String,
    pub secret: String,
    pub payload: String,
}

impl std::fmt::Debug for Due {
    /// Without the secret: a stray `{:?}` must not log it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Due")
            .field("delivery_id", &self.delivery_id)
            .field("event_id", &self.event_id)
            .field("attempts", &self.attempts)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// Claims the undelivered delivery to an active endpoint due soonest by `now` for one POST: its next attempt is
/// moved to `lease_until`, so no other deliverer takes it until then (`SKIP LOCKED` while this statement runs, the
/// lease after it) — and one that dies mid-POST leaves it due again once the lease ends. The caller commits the
/// claim before it POSTs: no transaction stays open across the request. `None` when nothing is due.
pub async fn claim_due(
    conn: &mut PgConnection,
    now: DateTime<Utc>,
    lease_until: DateTime<Utc>,
) -> Result<Option<Due>, sqlx::Error> {
    sqlx::query_as!(
        Due,
        "WITH c AS (
             SELECT d.id FROM close_deliveries d
             JOIN close_endpoints e ON e.id = d.endpoint_id
             WHERE d.delivered_at IS NULL AND d.next_attempt_at <= $1 AND e.active
             ORDER BY d.next_attempt_at, d.id
             LIMIT 1
             FOR UPDATE OF d SKIP LOCKED)
         UPDATE close_deliveries d SET next_attempt_at = $2
         FROM c, close_endpoints e, close_events ev
         WHERE d.id = c.id AND e.id = d.endpoint_id AND ev.id = d.event_id
         RETURNING d.id AS delivery_id, d.event_id, d.attempts, e.url, e.secret, ev.payload",
        now,
        lease_until
    )
    .fetch_optional(conn)
    .await
}

/// One POST of a delivery: its answer's status (if any), its error (if not acknowledged), and when to try again
/// (`None`: acknowledged, never sent again).
pub struct Attempt<'a> {
    pub at: DateTime<Utc>,
    pub status: Option<i32>,
    pub error: Option<&'a str>,
    pub retry_at: Option<DateTime<Utc>>,
}

pub async fn attempted(conn: &mut PgConnection, delivery_id: i64, a: &Attempt<'_>) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO close_delivery_attempts (delivery_id, at, status, error) VALUES ($1, $2, $3, $4)",
        delivery_id,
        a.at,
        a.status,
        a.error
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "UPDATE close_deliveries
         SET attempts = attempts + 1, last_status = $2, last_error = $3,
             delivered_at = CASE WHEN $4::timestamptz IS NULL THEN $5::timestamptz END,
             next_attempt_at = coalesce($4, next_attempt_at)
         WHERE id = $1",
        delivery_id,
        a.status,
        a.error,
        a.retry_at,
        a.at
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// A recorded event (the body as sent).
#[derive(Debug, Clone)]
pub struct Event {
    pub id: String,
    pub month: String,
    pub payload: String,
    pub created_at: DateTime<Utc>,
}

/// The latest `limit` events, the newest first.
pub async fn events(conn: &mut PgConnection, limit: i64) -> Result<Vec<Event>, sqlx::Error> {
    sqlx::query_as!(
        Event,
        "SELECT id, month, payload, created_at FROM close_events ORDER BY created_at DESC, id LIMIT $1",
        limit
    )
    .fetch_all(conn)
    .await
}

/// A delivery of an event to an endpoint, as recorded.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub id: i64,
    pub event_id: String,
    pub endpoint_id: i64,
    pub url: String,
    pub attempts: i32,
    pub next_attempt_at: DateTime<Utc>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub last_status: Option<i32>,
    pub last_error: Option<String>,
}

/// The deliveries of events `ids`, by endpoint.
pub async fn deliveries(conn: &mut PgConnection, ids: &[String]) -> Result<Vec<Delivery>, sqlx::Error> {
    sqlx::query_as!(
        Delivery,
        "SELECT d.id, d.event_id, d.endpoint_id, e.url, d.attempts, d.next_attempt_at, d.delivered_at,
                d.last_status, d.last_error
         FROM close_deliveries d JOIN close_endpoints e ON e.id = d.endpoint_id
         WHERE d.event_id = ANY($1) ORDER BY d.event_id, d.endpoint_id",
        ids
    )
    .fetch_all(conn)
    .await
}

/// One POST of a delivery, as recorded.
#[derive(Debug, Clone)]
pub struct AttemptRow {
    pub delivery_id: i64,
    pub at: DateTime<Utc>,
    pub status: Option<i32>,
    pub error: Option<String>,
}

/// The latest `per_delivery` POSTs of each of deliveries `ids`, oldest first (an endpoint down for months has
/// thousands: the count is the delivery's `attempts`).
pub async fn attempts(conn: &mut PgConnection, ids: &[i64], per_delivery: i64) -> Result<Vec<AttemptRow>, sqlx::Error> {
    sqlx::query_as!(
        AttemptRow,
        r#"SELECT delivery_id AS "delivery_id!", at AS "at!", status, error
           FROM (SELECT a.*, row_number() OVER (PARTITION BY delivery_id ORDER BY at DESC, id DESC) AS latest
                 FROM close_delivery_attempts a WHERE delivery_id = ANY($1)) t
           WHERE latest <= $2
           ORDER BY delivery_id, at, id"#,
        ids,
        per_delivery
    )
    .fetch_all(conn)
    .await
}
