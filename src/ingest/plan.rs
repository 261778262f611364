//! How many hours the next batch of a backfill reads: as many as fit a budget of samples at the density the last
//! read showed, never more than the longest batch allowed. A sparse month is a handful of batches, a dense day many.

/// The most hours one batch of `cardhour ingest` reads where `--chunk-hours` does not say (a month and a day: the
/// sample budget is what bounds a batch).
pub const MAX_BATCH_HOURS: usize = 744;

/// The most hours a worker claims at once where neither `--chunk-hours` nor the cluster's `batch_hours` says.
pub const WORKER_BATCH_HOURS: u32 = 6;

/// The samples one batch reads by default (`--batch-samples`): about 5 hours of 256 GPUs at a 60 s scrape
/// interval (the dense week of BENCHMARKS.md) or 67 hours of its 90-day sparse set, within the 256 MB of memory an
/// ingest may take on each. Memory follows the series as much as the samples, so this was measured, not derived;
/// half the budget took Prometheus 8.3 s of CPU instead of 3.8 s on the dense week (likely: a chunk it stores holds
/// 2 hours of 60 s samples and is read whole by every batch it overlaps).
pub const DEFAULT_BATCH_SAMPLES: u64 = 1_000_000;

/// The least sample budget accepted (below it, batches of one hour are all there is anyway).
pub const MIN_BATCH_SAMPLES: u64 = 10_000;

/// A batch grows at most this many times over the last one: the density of a quiet stretch does not promise the
/// next, and a batch too large for its budget is held in memory whole.
const GROWTH: usize = 4;

/// Sizes the batches of one backfill from what the reads before them held.
///
/// Invariant: every length it gives is at least 1 and at most both the hours left and the longest batch; once a
/// read was observed, a length above 1 holds at most the budget at that read's density.
#[derive(Debug, Clone)]
pub struct BatchPlanner {
    /// `None`: every batch `max_hours` long.
    budget: Option<u64>,
    max_hours: usize,
    /// Samples per hour of the last read, and its length in hours.
    last: Option<(f64, usize)>,
}

impl BatchPlanner {
    /// Batches of at most `max_hours` hours (at least 1) holding about `budget` samples.
    pub fn new(budget: u64, max_hours: usize) -> Self {
        Self { budget: Some(budget.max(1)), max_hours: max_hours.max(1), last: None }
    }

    /// Batches of `max_hours` hours whatever they hold (`budget` `None`), or as [`BatchPlanner::new`].
    pub fn with(budget: Option<u64>, max_hours: usize) -> Self {
        match budget {
            Some(b) => Self::new(b, max_hours),
            None => Self { budget: None, max_hours: max_hours.max(1), last: None },
        }
    }

    /// The hours of the next batch out of `remaining` (at least 1). The first batch is one hour: nothing is known
    /// of the density yet, and one hour is the smallest a batch can be.
    pub fn next_len(&self, remaining: usize) -> usize {
        let by_budget = match (self.budget, self.last) {
            (None, _) => self.max_hours,
            (Some(_), None) => 1,
            (Some(budget), Some((per_hour, last_len))) => {
                let fit = (budget as f64 / per_hour.max(1.0)).floor();
                let fit = if fit >= usize::MAX as f64 { usize::MAX } else { fit as usize };
                fit.min(last_len.saturating_mul(GROWTH))
            }
        };
        by_budget.clamp(1, self.max_hours).min(remaining.max(1))
    }

    /// Notes what a read of `hours` hours held.
    pub fn observe(&mut self, hours: usize, samples: u64) {
        if hours > 0 {
            self.last = Some((samples as f64 / hours as f64, hours));
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_sparse_month_is_a_handful_of_batches_and_a_dense_week_many() {
        let batches = |per_hour: u64, hours: usize| {
            let mut p = BatchPlanner::new(DEFAULT_BATCH_SAMPLES, MAX_BATCH_HOURS);
            let (mut at, mut lens) = (0, Vec::new());
            while at < hours {
                let n = p.next_len(hours - at);
                p.observe(n, per_hour * n as u64);
                lens.push(n);
                at += n;
            }
            lens
        };
        // 30 days at 24,000 samples an hour (the sparse benchmark set): 1, 4, 16, 41, 41, …
        let sparse = batches(24_000, 720);
        assert_eq!(&sparse[..4], &[1, 4, 16, 41]);
        assert!(sparse.len() <= 21, "{sparse:?}");
        // 151 days of a few pods (2,000 samples an hour): 1, 4, 16, 64, 256, 500, …
        let quiet = batches(2_000, 151 * 24);
        assert_eq!(&quiet[..6], &[1, 4, 16, 64, 256, 500]);
        assert!(quiet.len() <= 12, "{quiet:?}");
        // 256 GPUs at 60 s (203,000 samples an hour): 4-hour batches, never above the budget
        let dense = batches(203_000, 168);
        assert!(dense[1..dense.len() - 1].iter().all(|&n| n == 4), "{dense:?}");
        // denser than the budget in one hour: one hour at a time
        assert!(batches(5_000_000, 10).iter().all(|&n| n == 1));
    }

    #[test]
    fn a_denser_stretch_shrinks_the_next_batch() {
        let mut p = BatchPlanner::new(100_000, 744);
        p.observe(100, 10_000);
        assert_eq!(p.next_len(1000), 400, "grows at most fourfold");
        p.observe(400, 4_000_000);
        assert_eq!(p.next_len(1000), 10);
        assert_eq!(p.next_len(3), 3);
        assert_eq!(p.next_len(0), 1, "asked for nothing left, still a valid length");
        let fixed = BatchPlanner::with(None, 6);
        assert_eq!((fixed.next_len(100), fixed.next_len(4)), (6, 4));
    }

    proptest! {
        #[test]
        fn lengths_stay_within_every_bound(
            budget in 1u64..10_000_000,
            max in 1usize..800,
            reads in prop::collection::vec((1usize..800, 0u64..50_000_000), 0..20),
            remaining in 1usize..5000,
        ) {
            let mut p = BatchPlanner::new(budget, max);
            let mut last = None;
            for (h, s) in reads {
                p.observe(h, s);
                last = Some((h, s));
            }
            let n = p.next_len(remaining);
            prop_assert!(n >= 1 && n <= max && n <= remaining);
            if let Some((h, s)) = last {
                let per_hour = (s as f64 / h as f64).max(1.0);
                prop_assert!(n == 1 || n as f64 * per_hour <= budget as f64 + 1e-6);
                prop_assert!(n <= h * GROWTH);
            }
        }
    }
}
