//! The signed close event (SPEC §11): the body POSTed when a month closes — the month, its policy and each team's
//! statement by a stable id and the sha256 of its JSON exactly as the API serves it — its signature (HMAC-SHA256
//! of the body, keyed by the endpoint's secret) and the retry schedule of a delivery not acknowledged. Pure: the
//! close records the body in its transaction, the deliverers send these bytes.

use std::time::Duration;

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::json_view::{PolicyView, policy_view, team_statement_json};
use crate::ledger::Statement;
use crate::money::Money;

/// The event's name in the body's `event`.
pub const MONTH_CLOSED: &str = "month.closed";
/// The header carrying the body's signature, `sha256=<hex>`.
pub const SIGNATURE_HEADER: &str = "X-Cardhour-Signature";
/// The header carrying the event's id (the `Idempotency-Key` too).
pub const EVENT_ID_HEADER: &str = "X-Cardhour-Event-Id";

/// The body of a close event.
#[derive(Debug, Serialize)]
pub struct CloseEvent {
    pub event: &'static str,
    pub event_id: String,
    pub month: String,
    pub closed_at: Option<DateTime<Utc>>,
    pub closed_by: Option<String>,
    pub policy: PolicyView,
    /// sha256 hex of the frozen snapshot, as the database stored it (`snapshot_hash` of the close's answer).
    pub snapshot_sha256: Option<String>,
    pub statements: Vec<StatementRef>,
    pub capacity_cost: Money,
    pub unallocated: Money,
}

/// One team's statement of the closed month.
#[derive(Debug, Serialize)]
pub struct StatementRef {
    /// `<month>/<team>`: the same for every render of the closed month.
    pub id: String,
    pub team: String,
    pub total: Money,
    /// sha256 hex of the bytes `GET /api/v1/bills/{month}/teams/{team}` answers for the closed month.
    pub content_sha256: String,
}

/// The stable id of a team's statement of a month.
pub fn statement_id(month: &str, team: &str) -> String {
    format!("{month}/{team}")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The event of closed statement `st` (as read back from its frozen snapshot), as the bytes every delivery sends.
pub fn payload(st: &Statement, event_id: &str) -> Result<Vec<u8>, serde_json::Error> {
    let month = st.month.to_string();
    let mut statements = Vec::new();
    for team in st.team_ids() {
        let bytes = team_statement_json(st, team)?;
        statements.push(StatementRef {
            id: statement_id(&month, team),
            team: team.to_string(),
            total: st.team_total(team),
            content_sha256: hex(&Sha256::digest(&bytes)),
        });
    }
    let event = CloseEvent {
        event: MONTH_CLOSED,
        event_id: event_id.to_string(),
        month,
        closed_at: st.closed_at,
        closed_by: st.closed_by.clone(),
        policy: policy_view(&st.bills),
        snapshot_sha256: st.content_hash.clone(),
        statements,
        capacity_cost: st.bills.capacity_cost,
        unallocated: st.bills.unallocated,
    };
    serde_json::to_vec(&event)
}

/// `sha256=<hex HMAC-SHA256(secret, body)>`: the signature header's value.
pub fn signature(secret: &str, body: &[u8]) -> String {
    // HMAC takes a key of any length
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(body);
    format!("sha256={}", hex(&mac.finalize().into_bytes()))
}

/// The first retry's wait.
pub const FIRST_RETRY: Duration = Duration::from_secs(30);
/// The longest wait between two tries.
pub const LONGEST_RETRY: Duration = Duration::from_secs(3600);

/// How long after its `attempts`-th failed try (1 for the first) a delivery is tried again: 30 s, doubling on each
/// failure, at most an hour.
pub fn backoff(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(16);
    FIRST_RETRY.saturating_mul(1 << doublings).min(LONGEST_RETRY)
}

/// A new event id: 128 random bits as a UUID (version 4) string.
pub fn new_event_id() -> String {
    let b: [u8; 16] = rand::random();
    let mut b = b;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// `s` cut to at most `max` characters (an error excerpt kept with a delivery).
pub fn excerpt(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_schedule_doubles_up_to_an_hour() {
        let secs: Vec<u64> = (1..=10).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(secs, [30, 60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]);
        assert_eq!(backoff(0), FIRST_RETRY);
        assert_eq!(backoff(u32::MAX), LONGEST_RETRY);
    }

    #[test]
    fn the_signature_is_rfc_4231s_hmac() {
        // RFC 4231 test case 2
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn event_ids_are_uuids() {
        let (a, b) = (new_event_id(), new_event_id());
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert_eq!(excerpt("日本語テキスト", 3), "日本語");
    }
}
