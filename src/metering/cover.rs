//! The intersection rule of SPEC §3: a utilization sample scraped on its own grid (DCGM, HAMi's monitor) covers
//! `[u, u + interval)`; where that meets the time a pod held its cards per kube-state-metrics it counts as
//! effective, and held time no utilization sample covers is unmetered — never paired with a nearest sample.

use super::Sample;

/// One utilization source of a held card (a device, a MIG instance, a copy, a pod's own series): its series,
/// the first covering an instant wins (a pod's per-process series of one card may come as several), and how a
/// sample's value becomes a share of a card.
pub(super) struct Source<'a> {
    pub(super) series: Vec<&'a [Sample]>,
    /// The scrape interval of the source: each sample covers this long from its timestamp.
    pub(super) interval_ms: i64,
    /// A sample (its timestamp and value) as the share of one card the holder used while it covers.
    pub(super) share: &'a dyn Fn(i64, f64) -> f64,
}

/// What the utilization samples made of a span of held time.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub(super) struct Covered {
    /// ∫ min(Σ shares, held) over the covered part, in card-ms.
    pub(super) effective_ms: f64,
    /// `held` × the part of the span no sample covers, in card-ms.
    pub(super) unmetered_ms: f64,
    /// Which sources covered some of the span (by index).
    pub(super) covering: u64,
}

/// The sample of `series` covering instant `x`: the latest one at or before `x` whose interval reaches past it.
fn covering_at(series: &[Sample], x: f64, interval_ms: i64) -> Option<Sample> {
    let i = series.partition_point(|s| (s.t_ms as f64) <= x);
    let s = *series.get(i.checked_sub(1)?)?;
    (x < (s.t_ms + interval_ms) as f64).then_some(s)
}

/// Integrates `held` cards over `[from, to)` (ms) against `sources`: the span is cut wherever a sample's interval
/// begins or ends; on each piece the covering sources' shares add up, clamped to `held`.
pub(super) fn integrate(from: f64, to: f64, held: f64, sources: &[Source]) -> Covered {
    let mut out = Covered::default();
    if to <= from {
        return out;
    }
    let mut cuts: Vec<f64> = vec![from, to];
    for src in sources {
        for series in &src.series {
            // samples whose interval meets the span: u < to and u + interval > from
            let lo = series.partition_point(|s| ((s.t_ms + src.interval_ms) as f64) <= from);
            let hi = series.partition_point(|s| (s.t_ms as f64) < to);
            for s in &series[lo..hi.max(lo)] {
                for x in [s.t_ms as f64, (s.t_ms + src.interval_ms) as f64] {
                    if x > from && x < to {
                        cuts.push(x);
                    }
                }
            }
        }
    }
    cuts.sort_by(f64::total_cmp);
    cuts.dedup();
    for piece in cuts.windows(2) {
        let (x, y) = (piece[0], piece[1]);
        let mut used = 0.0;
        let mut any = false;
        for (i, src) in sources.iter().enumerate() {
            let Some(s) = src.series.iter().find_map(|series| covering_at(series, x, src.interval_ms)) else {
                continue;
            };
            used += (src.share)(s.t_ms, s.v);
            any = true;
            if i < 64 {
                out.covering |= 1 << i;
            }
        }
        if any {
            out.effective_ms += used.clamp(0.0, held) * (y - x);
        } else {
            out.unmetered_ms += held * (y - x);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn ratio(_: i64, v: f64) -> f64 {
        v
    }

    fn series(start: i64, step: i64, values: &[f64]) -> Vec<Sample> {
        values.iter().enumerate().map(|(i, v)| Sample::new(start + i as i64 * step, *v)).collect()
    }

    #[test]
    fn a_sample_counts_where_its_interval_meets_the_held_span() {
        // held [0, 60 s); utilization every 60 s at phase 20 s: the sample at −40 s covers [0, 20 s), the one
        // at 20 s covers [20 s, 60 s)
        let util = series(-40_000, 60_000, &[0.5, 1.0]);
        let src = [Source { series: vec![&util], interval_ms: 60_000, share: &ratio }];
        let c = integrate(0.0, 60_000.0, 1.0, &src);
        assert_eq!(c.effective_ms, 0.5 * 20_000.0 + 1.0 * 40_000.0);
        assert_eq!(c.unmetered_ms, 0.0);
        // the nearest sample (20 s away) alone would have said 60 000
        // without the earlier sample, [0, 20 s) is unmetered
        let late = series(20_000, 60_000, &[1.0]);
        let src = [Source { series: vec![&late], interval_ms: 60_000, share: &ratio }];
        let c = integrate(0.0, 60_000.0, 0.5, &src);
        assert_eq!((c.effective_ms, c.unmetered_ms), (0.5 * 40_000.0, 0.5 * 20_000.0));
    }

    #[test]
    fn shares_add_up_per_piece_and_are_clamped_to_what_is_held() {
        // two cards held; one on phase 0, one on phase 30 s, both 30 s apart
        let a = series(0, 30_000, &[1.0, 1.0]);
        let b = series(15_000, 30_000, &[0.4, 0.2]);
        let src = [
            Source { series: vec![&a], interval_ms: 30_000, share: &ratio },
            Source { series: vec![&b], interval_ms: 30_000, share: &ratio },
        ];
        let c = integrate(0.0, 60_000.0, 2.0, &src);
        // [0,15) a only: 1; [15,45) 1.4; [45,60) 1.2
        let want = 15_000.0 + 1.4 * 30_000.0 + 1.2 * 15_000.0;
        assert!((c.effective_ms - want).abs() < 1e-9, "{c:?}");
        assert_eq!(c.unmetered_ms, 0.0);
        assert_eq!(c.covering, 0b11);
        let clamped = integrate(0.0, 60_000.0, 1.0, &src);
        assert!((clamped.effective_ms - (15_000.0 + 30_000.0 + 15_000.0)).abs() < 1e-9, "{clamped:?}");
    }

    #[test]
    fn the_first_series_covering_an_instant_wins() {
        let first = series(0, 60_000, &[0.25]);
        let second = series(0, 20_000, &[1.0, 1.0, 1.0, 1.0, 1.0]);
        let src = [Source { series: vec![&first, &second], interval_ms: 60_000, share: &ratio }];
        let c = integrate(0.0, 120_000.0, 1.0, &src);
        // [0,60) the first; [60,120) the second's samples at 60 and 80 s (interval 60 s) cover it
        assert!((c.effective_ms - (0.25 * 60_000.0 + 60_000.0)).abs() < 1e-9, "{c:?}");
    }

    proptest! {
        /// Held time is split exactly into covered and uncovered; effective never exceeds what is held; on the
        /// KSM grid itself (same interval, same phase) the rule is the sample-by-sample product.
        #[test]
        fn covered_and_unmetered_partition_the_span(
            phase in 0i64..60_000,
            interval in prop::sample::select(vec![15_000i64, 30_000, 60_000, 90_000]),
            values in prop::collection::vec(prop::option::of(0.0f64..1.5), 1..12),
            held in 0.1f64..4.0,
            from in 0i64..120_000,
            len in 1i64..300_000,
        ) {
            let util: Vec<Sample> = values
                .iter()
                .enumerate()
                .filter_map(|(i, v)| v.map(|v| Sample::new(phase + i as i64 * interval, v)))
                .collect();
            let src = [Source { series: vec![&util], interval_ms: interval, share: &ratio }];
            let (a, b) = (from as f64, (from + len) as f64);
            let c = integrate(a, b, held, &src);
            // the covered length, from the samples alone
            let covered: f64 = util
                .iter()
                .map(|s| {
                    let next = util.iter().find(|n| n.t_ms > s.t_ms).map_or(i64::MAX, |n| n.t_ms);
                    let end = (s.t_ms + interval).min(next) as f64;
                    (end.min(b) - (s.t_ms as f64).max(a)).max(0.0)
                })
                .sum();
            prop_assert!((c.unmetered_ms - held * (b - a - covered)).abs() <= 1e-6 * held * (b - a));
            prop_assert!(c.effective_ms <= held * covered + 1e-6);
            let want: f64 = util
                .iter()
                .map(|s| {
                    let next = util.iter().find(|n| n.t_ms > s.t_ms).map_or(i64::MAX, |n| n.t_ms);
                    let end = (s.t_ms + interval).min(next) as f64;
                    s.v.min(held) * (end.min(b) - (s.t_ms as f64).max(a)).max(0.0)
                })
                .sum();
            prop_assert!((c.effective_ms - want).abs() <= 1e-9 * (1.0 + want), "{} vs {}", c.effective_ms, want);
        }

        /// Where utilization is scraped with KSM (same grid, same phase), each KSM sample's interval is covered
        /// by exactly the sample at its own timestamp: the rule equals the nearest-sample product.
        #[test]
        fn on_the_ksm_grid_the_rule_is_the_sample_product(
            values in prop::collection::vec(0.0f64..1.0, 1..20),
            k in 0usize..20,
        ) {
            let util = series(0, 60_000, &values);
            let k = k % values.len();
            let src = [Source { series: vec![&util], interval_ms: 60_000, share: &ratio }];
            let t = (k as i64 * 60_000) as f64;
            let c = integrate(t, t + 60_000.0, 1.0, &src);
            prop_assert_eq!(c.effective_ms, values[k] * 60_000.0);
            prop_assert_eq!(c.unmetered_ms, 0.0);
        }
    }
}
