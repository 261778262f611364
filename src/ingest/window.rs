//! Hour windows: alignment, chunking of a backfill, and slicing fetched samples into hours.

use chrono::{DateTime, Duration, DurationRound, TimeZone, Utc};

use crate::metering::Sample;

pub const HOUR_MS: i64 = 3_600_000;

/// Why a time range cannot be ingested.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RangeError {
    #[error("--{field} {value} is not on a whole hour (ingest works in whole hours, e.g. 2026-11-01T00:00:00Z)")]
    NotWholeHour { field: &'static str, value: DateTime<Utc> },
    #[error("--to {to} must be after --from {from}")]
    Empty { from: DateTime<Utc>, to: DateTime<Utc> },
}

/// The whole hours of `[from, to)`.
pub fn hours(from: DateTime<Utc>, to: DateTime<Utc>) -> Result<Vec<DateTime<Utc>>, RangeError> {
    for (field, value) in [("from", from), ("to", to)] {
        if floor_hour(value) != value {
            return Err(RangeError::NotWholeHour { field, value });
        }
    }
    if to <= from {
        return Err(RangeError::Empty { from, to });
    }
    let n = (to - from).num_hours();
    Ok((0..n).map(|i| from + Duration::hours(i)).collect())
}

pub fn floor_hour(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(Duration::hours(1)).unwrap_or(t)
}

pub fn from_ms(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// Consecutive runs of at most `size` hours (the unit of one round of Prometheus queries).
pub fn chunks(hours: &[DateTime<Utc>], size: usize) -> Vec<Vec<DateTime<Utc>>> {
    let mut out: Vec<Vec<DateTime<Utc>>> = Vec::new();
    for h in hours {
        match out.last_mut() {
            Some(c) if c.len() < size.max(1) && *c.last().unwrap_or(h) + Duration::hours(1) == *h => c.push(*h),
            _ => out.push(vec![*h]),
        }
    }
    out
}

/// The samples of a time-sorted series in `[start, end)`.
pub fn slice(samples: &[Sample], start: i64, end: i64) -> &[Sample] {
    let a = samples.partition_point(|s| s.t_ms < start);
    let b = samples.partition_point(|s| s.t_ms < end);
    &samples[a..b.max(a)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn hours_of_a_range() {
        let h = hours(t("2026-11-01T00:00:00Z"), t("2026-11-01T03:00:00Z")).unwrap();
        assert_eq!(h.len(), 3);
        assert_eq!(h[2], t("2026-11-01T02:00:00Z"));
        assert!(matches!(
            hours(t("2026-11-01T00:30:00Z"), t("2026-11-01T03:00:00Z")),
            Err(RangeError::NotWholeHour { field: "from", .. })
        ));
        assert!(matches!(hours(t("2026-11-01T03:00:00Z"), t("2026-11-01T03:00:00Z")), Err(RangeError::Empty { .. })));
    }

    #[test]
    fn chunks_are_contiguous_and_bounded() {
        let h = hours(t("2026-11-01T00:00:00Z"), t("2026-11-01T07:00:00Z")).unwrap();
        let c = chunks(&h, 3);
        assert_eq!(c.iter().map(Vec::len).collect::<Vec<_>>(), vec![3, 3, 1]);
        let gap = vec![h[0], h[1], h[5]];
        assert_eq!(chunks(&gap, 6).len(), 2);
    }

    #[test]
    fn slice_is_half_open() {
        let s: Vec<Sample> = (0..10).map(|i| Sample::new(i * 10, 0.0)).collect();
        assert_eq!(slice(&s, 20, 50).len(), 3);
        assert_eq!(slice(&s, 20, 50)[0].t_ms, 20);
        assert!(slice(&s, 200, 300).is_empty());
    }
}
