//! Quotas against use (SPEC §10): per hour and quota scope (a namespace's ResourceQuota, a Kueue ClusterQueue, a
//! Volcano queue), the guarantee's card-seconds split by the scope's own GPU-seconds — cardhour's metering, not the
//! quota's `used`, which counts requests of pods that may not be Running — into used within the guarantee,
//! borrowed above it and reserved idle. Pure.

use std::collections::{BTreeMap, BTreeSet};

use super::sample::Sample;

/// What holds a guarantee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScopeKind {
    /// A namespace's `hard` GPU ResourceQuota (counted only where the namespace has no queue).
    Namespace,
    /// A Kueue ClusterQueue's nominal quota.
    ClusterQueue,
    /// A Volcano queue's guarantee.
    VolcanoQueue,
}

/// One quota scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QuotaScope {
    pub kind: ScopeKind,
    pub name: String,
}

/// A scope's hour (or a sum of hours): card-seconds throughout.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QuotaUse {
    /// ∫ guaranteed quota dt.
    pub guaranteed: f64,
    /// min(used, guaranteed).
    pub used_within: f64,
    /// max(0, used − guaranteed): use above the guarantee, lent by other scopes or free capacity.
    pub borrowed: f64,
    /// guaranteed − used within it: paid for, not used.
    pub reserved_idle: f64,
}

impl QuotaUse {
    /// The scope's own use: used within the guarantee plus borrowed.
    pub fn used(&self) -> f64 {
        self.used_within + self.borrowed
    }
}

impl std::ops::Add for QuotaUse {
    type Output = QuotaUse;

    /// A team's figures are the sums over its scopes and hours (each split on its own first).
    fn add(self, o: QuotaUse) -> QuotaUse {
        QuotaUse {
            guaranteed: self.guaranteed + o.guaranteed,
            used_within: self.used_within + o.used_within,
            borrowed: self.borrowed + o.borrowed,
            reserved_idle: self.reserved_idle + o.reserved_idle,
        }
    }
}

/// One scope's hour split by its use (negative inputs, which no gauge or meter gives, count as 0).
pub fn split_use(guaranteed: f64, used: f64) -> QuotaUse {
    let (guaranteed, used) = (guaranteed.max(0.0), used.max(0.0));
    let used_within = used.min(guaranteed);
    QuotaUse { guaranteed, used_within, borrowed: used - used_within, reserved_idle: guaranteed - used_within }
}

/// ∫ of a gauge over `[start_ms, end_ms)` by sample, like any gauge: each sample in the hour holds its value for one
/// scrape interval of its source (`interval_ms`). Seconds × the gauge's unit (cards for a GPU quota).
pub fn gauge_seconds(samples: &[Sample], interval_ms: i64, (start_ms, end_ms): (i64, i64)) -> f64 {
    let from = samples.partition_point(|s| s.t_ms < start_ms);
    let to = samples.partition_point(|s| s.t_ms < end_ms);
    let sum: f64 = samples[from..to].iter().map(|s| s.v.max(0.0)).sum();
    sum * interval_ms as f64 / 1000.0
}

/// The namespaces' ResourceQuota guarantees that count (SPEC §10): a namespace with a queue (a Kueue LocalQueue,
/// a Volcano queue its pods are in) is guaranteed by its queue, its ResourceQuota being then only its ceiling;
/// the others by their `hard` GPU quota.
pub fn counted_namespace_guarantees<'a>(
    hard: &'a BTreeMap<String, f64>,
    queued: &BTreeSet<String>,
) -> impl Iterator<Item = (&'a str, f64)> {
    hard.iter().filter(|(ns, _)| !queued.contains(*ns)).map(|(ns, g)| (ns.as_str(), *g))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn use_within_above_and_below_the_guarantee() {
        let u = split_use(8.0 * 3600.0, 3.0 * 3600.0);
        assert_eq!((u.used_within, u.borrowed, u.reserved_idle), (3.0 * 3600.0, 0.0, 5.0 * 3600.0));
        let u = split_use(4.0 * 3600.0, 6.0 * 3600.0);
        assert_eq!((u.used_within, u.borrowed, u.reserved_idle), (4.0 * 3600.0, 2.0 * 3600.0, 0.0));
        let u = split_use(0.0, 3600.0);
        assert_eq!((u.guaranteed, u.borrowed), (0.0, 3600.0), "no guarantee: all of it borrowed");
    }

    #[test]
    fn a_team_sums_its_scopes_each_split_on_its_own() {
        // 16 cards reserved in one queue and 4 used; 2 guaranteed in a namespace and 6 used: the queue's idle
        // cards do not cover the namespace's borrowing
        let team = split_use(16.0, 4.0) + split_use(2.0, 6.0);
        assert_eq!(team, QuotaUse { guaranteed: 18.0, used_within: 6.0, borrowed: 4.0, reserved_idle: 12.0 });
        assert_eq!(team.used(), 10.0);
    }

    #[test]
    fn a_gauge_counts_its_samples_in_the_hour_an_interval_each() {
        let h = 3_600_000;
        let samples: Vec<Sample> = (0..70).map(|k| Sample::new(k * 60_000 - 300_000, 8.0)).collect();
        // 60 samples fall in [0, 1 h): 8 cards × 60 × 60 s
        assert_eq!(gauge_seconds(&samples, 60_000, (0, h)), 8.0 * 3600.0);
        // a quota raised mid-hour: 30 minutes at 4, 30 at 8
        let raised: Vec<Sample> = (0..60).map(|k| Sample::new(k * 60_000, if k < 30 { 4.0 } else { 8.0 })).collect();
        assert_eq!(gauge_seconds(&raised, 60_000, (0, h)), 6.0 * 3600.0);
        assert_eq!(gauge_seconds(&raised, 60_000, (h, 2 * h)), 0.0);
    }

    #[test]
    fn a_queued_namespace_is_guaranteed_by_its_queue_not_its_resource_quota() {
        let hard = BTreeMap::from([("a".to_string(), 4.0), ("b".to_string(), 2.0)]);
        let queued = BTreeSet::from(["a".to_string()]);
        assert_eq!(counted_namespace_guarantees(&hard, &queued).collect::<Vec<_>>(), [("b", 2.0)]);
    }

    proptest! {
        #[test]
        fn the_split_adds_up(guaranteed in 0.0f64..1e7, used in 0.0f64..1e7) {
            let u = split_use(guaranteed, used);
            prop_assert!(u.used_within >= 0.0 && u.borrowed >= 0.0 && u.reserved_idle >= 0.0);
            prop_assert!((u.used_within + u.reserved_idle - guaranteed).abs() <= 1e-6);
            prop_assert!((u.used() - used).abs() <= 1e-6);
            prop_assert!(u.borrowed == 0.0 || u.reserved_idle == 0.0, "a scope never borrows while it idles");
        }
    }
}
