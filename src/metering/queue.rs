//! Queue wait of GPU pods (SPEC §10): a pod waits from its first Pending sample to its first Running one (or its
//! end); per team and month, the pods that waited among those first Running in it, the median and p90 of their
//! waits by nearest rank, and the pods that never ran, apart. Pure.
//!
//! "The median and p90 wait of those" is read as: of the pods that waited (a wait > 0) — a pod Running at its first
//! sample did not queue, and counting it would let many quick starts hide long waits.

use serde::Serialize;

use super::gap::Edges;
use super::sample::Sample;

/// What kube-state-metrics' phase samples say of one pod object (ms): when it was first seen Pending, first seen
/// Running, and last seen in any phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PodPhases {
    pub first_pending_ms: Option<i64>,
    pub first_running_ms: Option<i64>,
    pub last_seen_ms: i64,
}

/// How a pod's wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// First Running after waiting this long (0: Running at its first sample, or Pending first seen after it).
    Ran { wait_ms: i64 },
    /// Never Running: Pending from its first Pending sample to its end.
    NeverRan { pending_ms: i64 },
}

impl PodPhases {
    /// The pod's wait; `None` for a pod seen in neither phase (Succeeded or Failed from its first sample).
    pub fn wait(&self) -> Option<Wait> {
        match (self.first_pending_ms, self.first_running_ms) {
            (pending, Some(running)) => {
                Some(Wait::Ran { wait_ms: pending.filter(|&p| p < running).map_or(0, |p| running - p) })
            }
            (Some(pending), None) => Some(Wait::NeverRan { pending_ms: (self.last_seen_ms - pending).max(0) }),
            (None, None) => None,
        }
    }
}

/// One GPU pod object's hour of its wait (SPEC §10): an hour it was seen Pending in, or became Running in (no
/// Running sample just before); over a pod's hours, the first Pending, the first Running and the last seen are
/// its wait's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PendingRow {
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    /// The model of the node its cards are on; `unknown` while unbound (a Pending pod's `node` is empty).
    pub gpu_model: String,
    pub phases: PodPhases,
    /// Its cards (q·f over its GPU requests) at its last request sample of the hour.
    pub cards: f64,
    /// Its queue (a Kueue ClusterQueue, a Volcano queue), where a pod label names one.
    pub queue: Option<super::QuotaScope>,
    /// Σ q·f × interval over its request samples of the hour at which it was Pending (no gap bridged: a
    /// pod waiting across an outage of kube-state-metrics counts only what was seen).
    pub pending_card_seconds: f64,
    pub label_team: Option<String>,
}

/// What the phase series of a pod (`kube_pod_status_phase` Pending and Running, each with its edges) say of it
/// in `[start, end)`: its first Pending sample there, its first Running sample there when it is a start (the
/// sample before it, the edge, is not Running), and its last sample of either (`start` when none).
pub fn hour_phases(
    pending: Option<(&[Sample], &Edges)>,
    running: Option<(&[Sample], &Edges)>,
    (start_ms, end_ms): (i64, i64),
) -> PodPhases {
    let inside = |s: &&Sample| s.t_ms >= start_ms && s.t_ms < end_ms;
    let first_on = |series: Option<(&[Sample], &Edges)>| {
        series.and_then(|(samples, _)| samples.iter().filter(inside).find(|s| s.v >= 0.5).map(|s| s.t_ms))
    };
    let first_running = first_on(running).filter(|&t| {
        let (samples, edges) = running.expect("a Running sample");
        let before = samples.iter().rfind(|s| s.t_ms < t).copied().or(edges.before);
        before.is_none_or(|b| b.v < 0.5)
    });
    let last_seen_ms = [pending, running]
        .into_iter()
        .flatten()
        .filter_map(|(samples, _)| samples.iter().rfind(inside).map(|s| s.t_ms))
        .max()
        .unwrap_or(start_ms);
    PodPhases { first_pending_ms: first_on(pending), first_running_ms: first_running, last_seen_ms }
}

/// The `p`-th percentile (0–100) of ascending `sorted` by nearest rank: its ⌈p/100 · n⌉-th value (the first for
/// p = 0); `None` when empty.
pub fn nearest_rank(sorted: &[i64], p: u32) -> Option<i64> {
    let n = sorted.len() as u64;
    let rank = (u64::from(p.min(100)) * n).div_ceil(100).max(1);
    sorted.get(usize::try_from(rank - 1).ok()?).copied()
}

/// The waits of a group of pods (a team's in a month, or a replay's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WaitStats {
    /// Pods that became Running.
    pub pods_started: u64,
    /// Of those, the pods that waited (a wait > 0).
    pub pods_waited: u64,
    /// The median wait of the pods that waited, by nearest rank, in milliseconds.
    pub median_wait_ms: Option<i64>,
    /// Their 90th percentile wait, by nearest rank, in milliseconds.
    pub p90_wait_ms: Option<i64>,
    /// Pods that never ran (counted apart: their wait has no end).
    pub never_ran: u64,
}

/// The statistics of `waits` (SPEC §10).
pub fn wait_stats(waits: impl IntoIterator<Item = Wait>) -> WaitStats {
    let (mut stats, mut waited) = (WaitStats::default(), Vec::new());
    for w in waits {
        match w {
            Wait::Ran { wait_ms } => {
                stats.pods_started += 1;
                if wait_ms > 0 {
                    waited.push(wait_ms);
                }
            }
            Wait::NeverRan { .. } => stats.never_ran += 1,
        }
    }
    waited.sort_unstable();
    stats.pods_waited = waited.len() as u64;
    stats.median_wait_ms = nearest_rank(&waited, 50);
    stats.p90_wait_ms = nearest_rank(&waited, 90);
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const H: i64 = 3_600_000;

    #[test]
    fn a_pod_waits_from_its_first_pending_sample_to_its_first_running_one() {
        let p = |pending, running, last| PodPhases {
            first_pending_ms: pending,
            first_running_ms: running,
            last_seen_ms: last,
        };
        assert_eq!(p(Some(0), Some(2 * H), 5 * H).wait(), Some(Wait::Ran { wait_ms: 2 * H }));
        assert_eq!(p(None, Some(H), 5 * H).wait(), Some(Wait::Ran { wait_ms: 0 }));
        // Pending again after it ran (a restart of its containers does not make a pod Pending; a late sample of
        // an earlier phase does not either)
        assert_eq!(p(Some(3 * H), Some(H), 5 * H).wait(), Some(Wait::Ran { wait_ms: 0 }));
        assert_eq!(p(Some(H), None, 4 * H).wait(), Some(Wait::NeverRan { pending_ms: 3 * H }));
        assert_eq!(p(None, None, 4 * H).wait(), None);
    }

    #[test]
    fn an_hour_holds_the_first_pending_sample_and_a_start() {
        let m = 60_000;
        let series = |vals: &[(i64, f64)]| vals.iter().map(|&(t, v)| Sample::new(t * m, v)).collect::<Vec<_>>();
        let none = Edges::default();
        // Pending at 0..10 min, Running from 10
        let pending = series(&[(0, 1.0), (5, 1.0), (10, 0.0), (15, 0.0)]);
        let running = series(&[(0, 0.0), (5, 0.0), (10, 1.0), (15, 1.0)]);
        let p = hour_phases(Some((&pending, &none)), Some((&running, &none)), (0, H));
        assert_eq!(p, PodPhases { first_pending_ms: Some(0), first_running_ms: Some(10 * m), last_seen_ms: 15 * m });
        // Running already before the hour (its edge): no start in this hour
        let running = series(&[(60, 1.0), (65, 1.0)]);
        let before = Edges { before: Some(Sample::new(55 * m, 1.0)), after: None };
        let p = hour_phases(None, Some((&running, &before)), (H, 2 * H));
        assert_eq!(p.first_running_ms, None);
        // the edge before says Pending: the hour's first Running sample is the start
        let before = Edges { before: Some(Sample::new(55 * m, 0.0)), after: None };
        assert_eq!(hour_phases(None, Some((&running, &before)), (H, 2 * H)).first_running_ms, Some(60 * m));
        // nothing seen: the hour's start
        assert_eq!(hour_phases(None, None, (H, 2 * H)).last_seen_ms, H);
    }

    #[test]
    fn nearest_rank_is_the_ceiling_rank() {
        let v = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];
        assert_eq!(nearest_rank(&v, 50), Some(50));
        assert_eq!(nearest_rank(&v, 90), Some(90));
        assert_eq!(nearest_rank(&v, 91), Some(100));
        assert_eq!(nearest_rank(&v, 0), Some(10));
        assert_eq!(nearest_rank(&v, 100), Some(100));
        assert_eq!(nearest_rank(&[7], 90), Some(7));
        assert_eq!(nearest_rank(&[1, 2], 50), Some(1));
        assert_eq!(nearest_rank(&[], 50), None);
    }

    #[test]
    fn stats_count_the_pods_that_waited_and_the_ones_that_never_ran_apart() {
        let waits = [
            Wait::Ran { wait_ms: 0 },
            Wait::Ran { wait_ms: 4 * H },
            Wait::Ran { wait_ms: H },
            Wait::Ran { wait_ms: 0 },
            Wait::Ran { wait_ms: 2 * H },
            Wait::NeverRan { pending_ms: 9 * H },
        ];
        let s = wait_stats(waits);
        assert_eq!(
            s,
            WaitStats {
                pods_started: 5,
                pods_waited: 3,
                median_wait_ms: Some(2 * H),
                p90_wait_ms: Some(4 * H),
                never_ran: 1
            }
        );
        assert_eq!(wait_stats([Wait::Ran { wait_ms: 0 }]).median_wait_ms, None, "nobody waited");
    }

    proptest! {
        #[test]
        fn percentiles_are_values_of_the_waits_in_order(waits in prop::collection::vec(0i64..100 * H, 0..60)) {
            let s = wait_stats(waits.iter().map(|&w| Wait::Ran { wait_ms: w }));
            let waited: Vec<i64> = waits.iter().copied().filter(|&w| w > 0).collect();
            prop_assert_eq!(s.pods_started, waits.len() as u64);
            prop_assert_eq!(s.pods_waited, waited.len() as u64);
            prop_assert_eq!(s.median_wait_ms.is_some(), !waited.is_empty());
            if let (Some(m), Some(p)) = (s.median_wait_ms, s.p90_wait_ms) {
                prop_assert!(waited.contains(&m) && waited.contains(&p) && m <= p);
                // at least half the waits are ≤ the median, at least 90 % ≤ the p90
                let at_most = |x: i64| waited.iter().filter(|&&w| w <= x).count() * 100;
                prop_assert!(at_most(m) >= 50 * waited.len() && at_most(p) >= 90 * waited.len());
            }
        }
    }
}
