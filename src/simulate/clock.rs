//! The simulation's time units, in the milliseconds Prometheus timestamps count.

/// Milliseconds per hour.
pub const HOUR_MS: i64 = 3_600_000;
/// Milliseconds per day.
pub const DAY_MS: i64 = 24 * HOUR_MS;
