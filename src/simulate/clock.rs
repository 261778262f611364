//! The simulation's time units, in the milliseconds Prometheus timestamps count.

/// Milliseconds per hour.
pub const HOUR_MS: i64 = 3_600_000;
/// Milliseconds per day.
pub const DAY_MS: i64 = 24 * HOUR_MS;

pub(super) fn rfc3339(ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .map(|d| d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .unwrap_or_default()
}
