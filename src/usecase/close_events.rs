//! The signed close event (SPEC §11, issue 30): the endpoints finance configures, the event a close records in its
//! own transaction (an outbox: [`record`], called by the close), and its delivery — POSTed with an HMAC-SHA256
//! signature until an endpoint acknowledges it (2xx), retried with backoff
//! ([`crate::export::close_event::backoff`]), every POST recorded.
//!
//! Deliveries run right after a close (the API and the pages spawn [`deliver_soon`]; `cardhour close` waits for
//! them), on every worker cycle, every minute in `cardhour serve`, and with `cardhour close-events deliver`. Each
//! delivery is claimed for its POST with `FOR UPDATE SKIP LOCKED`: two deliverers never POST the same one at once,
//! and one acknowledged is never sent again. The one repeat that remains possible (a POST that arrived whose
//! acknowledgement could not be recorded) carries the same `Idempotency-Key` (the event id) for the receiver to drop.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::{PgConnection, PgPool};

use super::{Error, Services, global_only};
use crate::access::{Scope, Writer};
use crate::db;
use crate::db::close_events::{Attempt, Due, Endpoint};
use crate::export::close_event::{
    EVENT_ID_HEADER, SIGNATURE_HEADER, backoff, excerpt, new_event_id, payload, signature,
};
use crate::ledger::{LedgerError, Statement};
use crate::validate;

/// The shortest secret an endpoint may have.
pub const SECRET_MIN: usize = 16;
/// The longest secret an endpoint may have.
pub const SECRET_MAX: usize = 256;
/// The longest error excerpt kept with a delivery.
pub const ERROR_MAX: usize = 500;
/// How long one POST may take.
pub const POST_TIMEOUT: Duration = Duration::from_secs(10);
/// The latest POSTs shown of each delivery (an endpoint down for months has thousands).
const ATTEMPTS_SHOWN: i64 = 50;
/// The most POSTs one delivery run makes (the rest wait for the next run).
const RUN_MAX: usize = 1000;
/// How long a claimed delivery is another deliverer's to leave alone: its POST's timeout and a margin to record
/// the answer. A deliverer that dies meanwhile leaves it due again after this (the same `Idempotency-Key`).
const LEASE: Duration = Duration::from_secs(POST_TIMEOUT.as_secs() + 60);

#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointInput {
    /// Where the event is POSTed: an absolute http(s) URL.
    #[schema(example = "https://erp.example/hooks/cardhour")]
    pub url: String,
    /// The HMAC-SHA256 key of `X-Cardhour-Signature` (16 to 256 characters); never answered again but masked.
    #[schema(min_length = 16, max_length = 256)]
    pub secret: String,
}

/// An endpoint as the faces show it: the secret masked.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct EndpointView {
    pub id: i64,
    pub url: String,
    /// The secret's fingerprint: the first 8 hex digits of its SHA-256, e.g. `sha256:4f1c2a9b` (enough to tell two
    /// secrets apart, nothing of the secret's own characters).
    pub secret: String,
    /// Inactive: no new events, and its pending deliveries are not sent.
    pub active: bool,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
}

/// The secret's fingerprint as the faces show it: `sha256:` and the first 8 hex digits of its SHA-256. None of the
/// secret's own characters (a mask of its last 4 gave a quarter of a 16-character secret away).
pub fn mask(secret: &str) -> String {
    format!("sha256:{}", &crate::digest::sha256_hex(secret.as_bytes())[..8])
}

impl From<Endpoint> for EndpointView {
    fn from(e: Endpoint) -> Self {
        EndpointView {
            id: e.id,
            secret: mask(&e.secret),
            url: e.url,
            active: e.active,
            created_by: e.created_by,
            created_at: e.created_at,
        }
    }
}

/// Every endpoint, the newest first (global readers).
pub async fn endpoints(s: &Services, scope: &Scope) -> Result<Vec<EndpointView>, Error> {
    global_only(scope)?;
    let mut conn = s.pool.acquire().await?;
    Ok(db::close_events::endpoints(&mut conn).await?.into_iter().map(Into::into).collect())
}

/// Adds an endpoint every later close's event is delivered to (finance, admin). Audited (the secret masked).
pub async fn create(s: &Services, by: &Writer, input: &EndpointInput) -> Result<EndpointView, Error> {
    let mut bad = Vec::new();
    let url = validate::http_url("url", input.url.trim()).map_err(|e| bad.push(e)).ok();
    let n = input.secret.chars().count();
    if !(SECRET_MIN..=SECRET_MAX).contains(&n) || input.secret.chars().any(char::is_control) {
        bad.push(validate::FieldError::new(
            "secret",
            format!("must be {SECRET_MIN} to {SECRET_MAX} characters, no control characters"),
        ));
    }
    let Some(url) = url.filter(|_| bad.is_empty()) else { return Err(Error::Invalid(bad)) };
    let actor = by.actor();
    let mut tx = s.pool.begin().await?;
    let e: EndpointView = db::close_events::insert_endpoint(&mut tx, &url, &input.secret, &actor).await?.into();
    let after = serde_json::to_value(&e).ok();
    db::audit::record(&mut tx, &actor, "close_endpoint.create", &format!("close_endpoint:{}", e.id), None, after)
        .await?;
    tx.commit().await?;
    Ok(e)
}

/// Deactivates endpoint `id` (finance, admin): no later event goes to it and its pending deliveries are not sent.
/// Deactivating an inactive one changes nothing (and is not audited again).
pub async fn deactivate(s: &Services, by: &Writer, id: i64) -> Result<EndpointView, Error> {
    let mut tx = s.pool.begin().await?;
    let before = db::close_events::endpoint_for_update(&mut tx, id)
        .await?
        .ok_or_else(|| Error::NotFound(format!("no close-event endpoint {id}")))?;
    if !before.active {
        return Ok(before.into());
    }
    db::close_events::deactivate(&mut tx, id).await?;
    let before: EndpointView = before.into();
    let after = EndpointView { active: false, ..before.clone() };
    let actor = by.actor();
    let (b, a) = (serde_json::to_value(&before).ok(), serde_json::to_value(&after).ok());
    db::audit::record(&mut tx, &actor, "close_endpoint.deactivate", &format!("close_endpoint:{id}"), b, a).await?;
    tx.commit().await?;
    Ok(after)
}

/// Records the event of closed statement `st` (read back from what the close froze) and a delivery to every
/// active endpoint, in the close's transaction `conn`: a close never exists without its event, and a close rolled
/// back has none. How many deliveries.
pub(super) async fn record(conn: &mut PgConnection, st: &Statement) -> Result<u64, LedgerError> {
    let id = new_event_id();
    let month = st.month.to_string();
    let body = payload(st, &id).map_err(|e| LedgerError::Snapshot(month.clone(), e))?;
    let body = String::from_utf8(body).expect("serde_json writes UTF-8");
    Ok(db::close_events::insert_event(conn, &id, &month, &body).await?)
}

/// Why a delivery run stopped: the database (the HTTP client's failures are recorded per delivery).
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// The HTTP client cannot be built (no TLS backend): nothing was delivered.
    #[error("cannot build the close-event client: {0}")]
    Client(String),
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DeliveryRun {
    /// Deliveries acknowledged in this run.
    pub delivered: usize,
    /// POSTs not acknowledged (each retried later).
    pub failed: usize,
}

/// POSTs every delivery due by `now` (the deliverer's clock: tests pass one ahead to make a retry due) once, one at a
/// time, each claimed by a lease for its POST so that no other deliverer sends it meanwhile (and no database
/// transaction waits on a receiver).
pub async fn deliver_due(pool: &PgPool, now: DateTime<Utc>) -> Result<DeliveryRun, DeliveryError> {
    let client = reqwest::Client::builder()
        .timeout(POST_TIMEOUT)
        // a redirect is no acknowledgement: the signed body goes only where finance said
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| DeliveryError::Client(e.to_string()))?;
    let mut run = DeliveryRun::default();
    for _ in 0..RUN_MAX {
        // claimed by a lease, committed: no transaction (nor pooled connection) is held while the receiver answers
        let lease_until = now.max(Utc::now()) + chrono::Duration::from_std(LEASE).unwrap_or_default();
        let mut conn = pool.acquire().await?;
        let Some(due) = db::close_events::claim_due(&mut conn, now, lease_until).await? else {
            break;
        };
        drop(conn);
        let (status, error) = post(&client, &due).await;
        // a failed POST is due again after its backoff, counted from the deliverer's clock (never before it, so
        // this run does not take it again)
        let at = now.max(Utc::now());
        let attempts = u32::try_from(due.attempts).unwrap_or(0).saturating_add(1);
        let retry_at = error.as_ref().map(|_| at + chrono::Duration::from_std(backoff(attempts)).unwrap_or_default());
        let a = Attempt { at, status, error: error.as_deref(), retry_at };
        let mut tx = pool.begin().await?;
        db::close_events::attempted(&mut tx, due.delivery_id, &a).await?;
        tx.commit().await?;
        match error {
            None => run.delivered += 1,
            Some(e) => {
                tracing::warn!(event = %due.event_id, url = %due.url, error = %e, attempts, "close event not delivered");
                run.failed += 1;
            }
        }
    }
    Ok(run)
}

/// One POST of `due`: the answer's status (if one came) and the error (`None`: acknowledged with a 2xx).
async fn post(client: &reqwest::Client, due: &Due) -> (Option<i32>, Option<String>) {
    let req = client
        .post(&due.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(EVENT_ID_HEADER, &due.event_id)
        .header("Idempotency-Key", &due.event_id)
        .header(SIGNATURE_HEADER, signature(&due.secret, due.payload.as_bytes()))
        .body(due.payload.clone());
    match req.send().await {
        Ok(r) if r.status().is_success() => (Some(i32::from(r.status().as_u16())), None),
        Ok(r) => (Some(i32::from(r.status().as_u16())), Some(excerpt(&format!("HTTP {}", r.status()), ERROR_MAX))),
        Err(e) => (None, Some(excerpt(&error_chain(&e), ERROR_MAX))),
    }
}

/// An error with its causes (reqwest's own message says only "error sending request").
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// Delivers what is due now in the background, right after a close (best effort: what fails is retried by the
/// next run). Logs instead of failing.
pub fn deliver_soon(pool: PgPool) {
    tokio::spawn(async move { log_run(deliver_due(&pool, Utc::now()).await) });
}

/// Delivers what is due every `period`, for ever (`cardhour serve`).
pub async fn deliver_every(pool: PgPool, period: Duration) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        log_run(deliver_due(&pool, Utc::now()).await);
    }
}

/// Logs a delivery run's outcome.
pub fn log_run(run: Result<DeliveryRun, DeliveryError>) {
    match run {
        Ok(r) if r.delivered + r.failed > 0 => {
            tracing::info!(delivered = r.delivered, not_delivered = r.failed, "close events")
        }
        Ok(_) => {}
        Err(e) => tracing::error!(error = %e, "close-event delivery failed; the next run tries again"),
    }
}

/// One POST of a delivery.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct AttemptView {
    pub at: DateTime<Utc>,
    /// The answer's HTTP status; absent when none came (connection refused, timeout).
    pub status: Option<i32>,
    /// Why it was not acknowledged (at most 500 characters); absent for a 2xx.
    pub error: Option<String>,
}

/// An event's delivery to one endpoint.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct DeliveryView {
    pub endpoint_id: i64,
    pub url: String,
    /// `delivered` (acknowledged), `retrying` (a POST failed; tried again at `next_attempt_at`), `pending` (not
    /// tried yet) or `inactive` (its endpoint was deactivated before it was acknowledged: not sent).
    pub state: DeliveryState,
    pub attempts: i32,
    /// When it is tried next (absent once delivered).
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub last_status: Option<i32>,
    pub last_error: Option<String>,
    /// Its latest POSTs (at most 50), oldest first; `attempts` counts them all.
    pub attempt_log: Vec<AttemptView>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    Delivered,
    Retrying,
    Pending,
    Inactive,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Delivered => "delivered",
            DeliveryState::Retrying => "retrying",
            DeliveryState::Pending => "pending",
            DeliveryState::Inactive => "inactive",
        }
    }
}

/// A recorded close event: its body exactly as POSTed, and its deliveries.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct EventView {
    pub id: String,
    pub month: String,
    pub created_at: DateTime<Utc>,
    /// The body as POSTed (JSON text; `X-Cardhour-Signature` signs these bytes).
    pub payload: String,
    pub deliveries: Vec<DeliveryView>,
}

/// The latest `limit` close events, the newest first, with their deliveries and every POST (global readers).
pub async fn events(s: &Services, scope: &Scope, limit: i64) -> Result<Vec<EventView>, Error> {
    global_only(scope)?;
    let mut conn = s.pool.acquire().await?;
    let events = db::close_events::events(&mut conn, limit).await?;
    let ids: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
    let active: std::collections::HashMap<i64, bool> =
        db::close_events::endpoints(&mut conn).await?.into_iter().map(|e| (e.id, e.active)).collect();
    let deliveries = db::close_events::deliveries(&mut conn, &ids).await?;
    let delivery_ids: Vec<i64> = deliveries.iter().map(|d| d.id).collect();
    let mut log: std::collections::HashMap<i64, Vec<AttemptView>> = std::collections::HashMap::new();
    for a in db::close_events::attempts(&mut conn, &delivery_ids, ATTEMPTS_SHOWN).await? {
        log.entry(a.delivery_id).or_default().push(AttemptView { at: a.at, status: a.status, error: a.error });
    }
    let mut of_event: std::collections::HashMap<&str, Vec<&db::close_events::Delivery>> =
        std::collections::HashMap::new();
    for d in &deliveries {
        of_event.entry(d.event_id.as_str()).or_default().push(d);
    }
    Ok(events
        .into_iter()
        .map(|e| EventView {
            deliveries: of_event
                .get(e.id.as_str())
                .into_iter()
                .flatten()
                .map(|d| {
                    let state = match (d.delivered_at, d.attempts, active.get(&d.endpoint_id).copied()) {
                        (Some(_), ..) => DeliveryState::Delivered,
                        (None, _, Some(false)) => DeliveryState::Inactive,
                        (None, 0, _) => DeliveryState::Pending,
                        (None, ..) => DeliveryState::Retrying,
                    };
                    DeliveryView {
                        endpoint_id: d.endpoint_id,
                        url: d.url.clone(),
                        state,
                        attempts: d.attempts,
                        next_attempt_at: d.delivered_at.is_none().then_some(d.next_attempt_at),
                        delivered_at: d.delivered_at,
                        last_status: d.last_status,
                        last_error: d.last_error.clone(),
                        attempt_log: log.remove(&d.id).unwrap_or_default(),
                    }
                })
                .collect(),
            id: e.id,
            month: e.month,
            created_at: e.created_at,
            payload: e.payload,
        })
        .collect())
}
