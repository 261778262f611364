//! kube-state-metrics scrape gaps (docs/metering.md, "KSM scrape gaps"): two consecutive samples of a series
//! further apart than the scrape interval allows, the grid points missing between them, and the samples just
//! outside an hour window that let a gap straddling the window's edge be seen whole.

use chrono::{DateTime, SecondsFormat, Utc};

use super::sample::{Sample, match_at};

/// The nearest samples of a KSM series outside its hour window, within the margin the ingest reads KSM with
/// (`None` where the series has none there). They are never counted themselves: they only tell whether a gap
/// that reaches into the window has the pod Running on its far side.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Edges {
    /// The last sample before the window.
    pub before: Option<Sample>,
    /// The first sample at or after the window's end.
    pub after: Option<Sample>,
}

impl Edges {
    /// The series `samples` (the window's) with its edges, in time order.
    pub fn with<'a>(&'a self, samples: &'a [Sample]) -> impl Iterator<Item = &'a Sample> + 'a {
        self.before.iter().chain(samples).chain(self.after.iter())
    }

    /// [`match_at`] over the window's `samples` and the edges: the first sample `s` in time order with
    /// `t − half ≤ s < t + half`.
    pub fn match_at(&self, samples: &[Sample], t: i64, half: i64) -> Option<f64> {
        let near = |s: &Sample| s.t_ms >= t - half && s.t_ms < t + half;
        if let Some(b) = self.before.filter(near) {
            return Some(b.v);
        }
        match_at(samples, t, half).or_else(|| self.after.filter(near).map(|a| a.v))
    }
}

/// The scrapes missing between two consecutive samples `a` and `b` of one series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Gap {
    pub(super) a: Sample,
    pub(super) b: Sample,
    interval_ms: i64,
    /// The grid points missing: the missing time `b − a − Δ` in scrape intervals, rounded (≥ 1).
    n: i64,
}

impl Gap {
    /// The gap between consecutive samples `a` and `b`, if at least one scrape is missing between them: the
    /// time no sample covers, `b − a − Δ`, is at least `Δ/2` (so `b − a ≥ 1.5 Δ`, the rule a grid point's
    /// match uses).
    pub(super) fn between(a: Sample, b: Sample, interval_ms: i64) -> Option<Gap> {
        if interval_ms <= 0 {
            return None;
        }
        let missing = b.t_ms - a.t_ms - interval_ms;
        let n = (2 * missing + interval_ms).div_euclid(2 * interval_ms);
        (n >= 1).then_some(Gap { a, b, interval_ms, n })
    }

    /// The time no sample covers, `b − a − Δ`, in ms.
    pub(super) fn missing_ms(&self) -> i64 {
        self.b.t_ms - self.a.t_ms - self.interval_ms
    }

    /// The missing grid points, spread evenly over `(a, b)`: `a + k·(b − a)/(n + 1)`, `k = 1..=n` — exactly the
    /// scrapes that did not happen when the scrape kept its phase (`a + k·Δ`).
    pub(super) fn points(&self) -> impl Iterator<Item = i64> + '_ {
        let span = self.b.t_ms - self.a.t_ms;
        (1..=self.n).map(move |k| self.a.t_ms + k * span / (self.n + 1))
    }

    /// What one missing grid point covers: the missing time shared by the points, so the points of a gap add up
    /// to exactly `b − a − Δ` (`Δ` each when the scrape kept its phase).
    pub(super) fn weight_ms(&self) -> f64 {
        self.missing_ms() as f64 / self.n as f64
    }

    /// `<a>..<b>`, the last sample before the gap and the first after it (RFC 3339, UTC): one KSM scrape stamps
    /// all its series alike, so every pod of one outage names it alike.
    pub(super) fn subject(&self) -> String {
        format!("{}..{}", stamp(self.a.t_ms), stamp(self.b.t_ms))
    }
}

/// A sample time as RFC 3339 in UTC, with milliseconds only where it has them.
pub(super) fn stamp(t_ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(t_ms)
        .map(|d| d.to_rfc3339_opts(SecondsFormat::AutoSi, true))
        .unwrap_or_else(|| t_ms.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DT: i64 = 60_000;

    fn s(t: i64) -> Sample {
        Sample::new(t, 1.0)
    }

    #[test]
    fn a_gap_is_at_least_one_missing_scrape() {
        assert_eq!(Gap::between(s(0), s(DT), DT), None);
        // jitter and a shifted phase below half an interval are not gaps
        assert_eq!(Gap::between(s(0), s(DT + 29_999), DT), None);
        let g = Gap::between(s(0), s(DT + 30_000), DT).unwrap();
        assert_eq!((g.missing_ms(), g.points().collect::<Vec<_>>(), g.weight_ms()), (30_000, vec![45_000], 30_000.0));
        // ten scrapes missing: the points are the scrapes that did not happen, Δ each
        let g = Gap::between(s(5_000), s(5_000 + 11 * DT), DT).unwrap();
        assert_eq!(g.points().collect::<Vec<_>>(), (1..=10).map(|k| 5_000 + k * DT).collect::<Vec<_>>());
        assert_eq!(g.weight_ms(), DT as f64);
        // a restart that shifted the phase: 2.5 intervals apart, 1.5 missing, over two points
        let g = Gap::between(s(0), s(150_000), DT).unwrap();
        assert_eq!((g.points().count(), g.weight_ms() * 2.0), (2, 90_000.0));
        // a few ms of jitter: one point, the missing time exactly
        let g = Gap::between(s(0), s(2 * DT - 7), DT).unwrap();
        assert_eq!((g.points().count(), g.weight_ms()), (1, (DT - 7) as f64));
        assert_eq!(Gap::between(s(0), s(10 * DT), 0), None);
    }

    #[test]
    fn subjects_name_both_sides() {
        let h = 1_764_547_200_000; // 2025-12-01T00:00:00Z
        let g = Gap::between(s(h + 9 * DT), s(h + 20 * DT), DT).unwrap();
        assert_eq!(g.subject(), "2025-12-01T00:09:00Z..2025-12-01T00:20:00Z");
        assert_eq!(stamp(h + 1_234), "2025-12-01T00:00:01.234Z");
    }

    #[test]
    fn edges_match_in_time_order() {
        let e = Edges { before: Some(Sample::new(-10_000, 1.0)), after: Some(Sample::new(3_600_000, 0.0)) };
        let window = [Sample::new(20_000, 2.0)];
        assert_eq!(e.match_at(&window, -10_000, 30_000), Some(1.0));
        assert_eq!(e.match_at(&window, 10_000, 30_000), Some(1.0));
        assert_eq!(e.match_at(&window, 25_000, 30_000), Some(2.0));
        assert_eq!(e.match_at(&window, 3_590_000, 30_000), Some(0.0));
        assert_eq!(e.match_at(&window, 1_000_000, 30_000), None);
        let ts: Vec<i64> = e.with(&window).map(|s| s.t_ms).collect();
        assert_eq!(ts, [-10_000, 20_000, 3_600_000]);
    }
}
