//! Raw samples, the scrape-interval inference and the grid-point matching rule.

/// One raw sample: integer milliseconds since the epoch and its value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub t_ms: i64,
    pub v: f64,
}

impl Sample {
    pub fn new(t_ms: i64, v: f64) -> Self {
        Self { t_ms, v }
    }
}

/// The value of the sample matching grid point `t`: the first sample `s` with
/// `t − half ≤ s < t + half`. Samples must be sorted by time.
pub fn match_at(samples: &[Sample], t: i64, half: i64) -> Option<f64> {
    let lo = t - half;
    let i = samples.partition_point(|s| s.t_ms < lo);
    samples.get(i).filter(|s| s.t_ms < t + half).map(|s| s.v)
}

/// The median spacing of consecutive samples over all given series — the scrape interval, robust against gaps
/// (a gap makes one long spacing, which the median ignores).
pub fn infer_interval_ms<'a>(series: impl IntoIterator<Item = &'a [Sample]>) -> Option<i64> {
    let mut gaps: Vec<i64> =
        series.into_iter().flat_map(|s| s.windows(2).map(|w| w[1].t_ms - w[0].t_ms)).filter(|d| *d > 0).collect();
    if gaps.is_empty() {
        return None;
    }
    let mid = gaps.len() / 2;
    Some(*gaps.select_nth_unstable(mid).1)
}

/// The shortest spacing of consecutive samples over all given series: one pair of scrapes a scrape interval apart
/// is enough to show that interval, however much of the window an outage took.
pub fn min_spacing_ms<'a>(series: impl IntoIterator<Item = &'a [Sample]>) -> Option<i64> {
    series.into_iter().flat_map(|s| s.windows(2).map(|w| w[1].t_ms - w[0].t_ms)).filter(|d| *d > 0).min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: i64) -> Sample {
        Sample::new(t, t as f64)
    }

    #[test]
    fn match_takes_the_half_open_neighbourhood() {
        let xs = [s(1_000), s(61_000), s(121_000)];
        assert_eq!(match_at(&xs, 60_000, 30_000), Some(61_000.0));
        assert_eq!(match_at(&xs, 31_000, 30_000), Some(1_000.0));
        assert_eq!(match_at(&xs, 31_001, 30_000), Some(61_000.0));
        // t + half is excluded, t − half included
        assert_eq!(match_at(&xs, 30_999, 30_000), Some(1_000.0));
        assert_eq!(match_at(&xs, 91_000, 30_000), Some(61_000.0));
        assert_eq!(match_at(&xs, 200_000, 30_000), None);
        assert_eq!(match_at(&[], 0, 30_000), None);
    }

    #[test]
    fn interval_is_the_median_spacing_and_ignores_gaps() {
        let a: Vec<Sample> = [0, 60_000, 120_000, 1_200_000, 1_260_000].map(s).to_vec();
        let b: Vec<Sample> = [30_000, 90_000].map(s).to_vec();
        assert_eq!(infer_interval_ms([a.as_slice(), b.as_slice()]), Some(60_000));
        assert_eq!(infer_interval_ms([[s(5)].as_slice()]), None);
    }
}
