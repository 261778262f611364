//! Capacity planning's what-if (SPEC §10, seed 000 §31.5 用数据支撑采购): a month's GPU pods of one GPU model
//! replayed in arrival order — their cards, their Running durations — on the capacity plus N cards, first come
//! first served within a queue, giving the Pending card-hours and the waits N more cards would have saved. An
//! estimate: the replay knows nothing of node boundaries, priorities or preemption. Pure.
//!
//! Across queues the pods are started in arrival order too, but a queue whose first pod does not fit does not hold
//! up another queue's pod that does (a scheduler's queues are independent); within a queue no pod overtakes an
//! earlier one (first come first served). A pod asking for more cards than the capacity never starts.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use serde::Serialize;

use crate::metering::{Wait, WaitStats, wait_stats};

/// Cards compared with this slack: fractions of a card (a MIG slice is g/7, a time-sliced replica 1/n) summed and
/// taken away again must not make a pod miss a fit by a rounding error.
const CARD_EPSILON: f64 = 1e-9;

const HOUR_MS: f64 = 3_600_000.0;

/// One pod of the month as the replay sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayPod {
    /// Its queue (a Kueue ClusterQueue, a Volcano queue, or its namespace): first come first served within it.
    pub queue: String,
    /// When it asked for its cards: its first Pending sample (its first Running one when none was Pending).
    pub arrival_ms: i64,
    /// The cards it holds while Running (a fraction of a card on shared cards).
    pub cards: f64,
    /// How long it ran.
    pub run_ms: i64,
}

/// What the replay of a month on some capacity gives.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ReplayOutcome {
    /// The capacity replayed on, in cards.
    pub capacity_cards: f64,
    /// Σ cards × wait over the pods, in card-hours.
    pub pending_card_hours: f64,
    /// The pods' waits (pods larger than the capacity count as never run).
    #[schema(value_type = Object)]
    pub waits: WaitStats,
}

/// The replay on today's capacity beside the replay on N more cards, and what the cards would have saved.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct WhatIf {
    pub extra_cards: u32,
    /// The month replayed on the capacity it had (the estimate's own baseline, so both sides share its
    /// simplifications).
    pub today: ReplayOutcome,
    pub with_extra: ReplayOutcome,
    /// today's Pending card-hours − with the extra cards'.
    pub saved_pending_card_hours: f64,
}

/// When each pod starts, replayed on `capacity` cards (`None`: it never starts, being larger than the capacity);
/// in the order of `pods`.
pub fn schedule(pods: &[ReplayPod], capacity: f64) -> Vec<Option<i64>> {
    let mut starts = vec![None; pods.len()];
    // arrival order, ties in the given order
    let mut order: Vec<usize> = (0..pods.len()).filter(|&i| pods[i].cards <= capacity + CARD_EPSILON).collect();
    order.sort_by_key(|&i| (pods[i].arrival_ms, i));
    let mut arrivals = order.into_iter().peekable();
    let mut queues: BTreeMap<&str, VecDeque<usize>> = BTreeMap::new();
    // running pods by their end (earliest first), with their cards
    let mut running: BinaryHeap<Reverse<(i64, usize)>> = BinaryHeap::new();
    let mut held = 0.0;
    loop {
        let next_arrival = arrivals.peek().map(|&i| pods[i].arrival_ms);
        let next_end = running.peek().map(|Reverse((end, _))| *end);
        let now = match (next_arrival, next_end) {
            (Some(a), Some(e)) => a.min(e),
            (Some(t), None) | (None, Some(t)) => t,
            (None, None) => break,
        };
        while let Some(Reverse((end, i))) = running.peek().copied()
            && end <= now
        {
            running.pop();
            held -= pods[i].cards;
        }
        if running.is_empty() {
            held = 0.0; // no rounding left over when nothing runs
        }
        while let Some(&i) = arrivals.peek()
            && pods[i].arrival_ms <= now
        {
            arrivals.next();
            queues.entry(pods[i].queue.as_str()).or_default().push_back(i);
        }
        // start what fits: the queues' first pods in arrival order, each queue's in turn as long as they fit
        loop {
            let mut heads: Vec<usize> = queues.values().filter_map(|q| q.front().copied()).collect();
            heads.sort_by_key(|&i| (pods[i].arrival_ms, i));
            let Some(i) = heads.into_iter().find(|&i| held + pods[i].cards <= capacity + CARD_EPSILON) else {
                break;
            };
            let queue = queues.get_mut(pods[i].queue.as_str()).expect("the pod's queue");
            queue.pop_front();
            if queue.is_empty() {
                queues.remove(pods[i].queue.as_str());
            }
            starts[i] = Some(now);
            held += pods[i].cards;
            running.push(Reverse((now + pods[i].run_ms.max(0), i)));
        }
    }
    starts
}

/// The month replayed on `capacity` cards.
pub fn replay(pods: &[ReplayPod], capacity: f64) -> ReplayOutcome {
    let starts = schedule(pods, capacity);
    let mut pending_card_ms = 0.0;
    let waits = pods.iter().zip(&starts).map(|(p, start)| match start {
        Some(s) => {
            pending_card_ms += p.cards * (s - p.arrival_ms) as f64;
            Wait::Ran { wait_ms: s - p.arrival_ms }
        }
        None => Wait::NeverRan { pending_ms: 0 },
    });
    let waits = wait_stats(waits.collect::<Vec<_>>());
    ReplayOutcome { capacity_cards: capacity, pending_card_hours: pending_card_ms / HOUR_MS, waits }
}

/// The month on today's `capacity` and on `extra` more cards.
pub fn what_if(pods: &[ReplayPod], capacity: f64, extra: u32) -> WhatIf {
    let today = replay(pods, capacity);
    let with_extra = replay(pods, capacity + f64::from(extra));
    WhatIf {
        extra_cards: extra,
        saved_pending_card_hours: today.pending_card_hours - with_extra.pending_card_hours,
        today,
        with_extra,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const H: i64 = 3_600_000;

    fn pod(queue: &str, arrival_h: f64, cards: f64, run_h: f64) -> ReplayPod {
        let ms = |h: f64| (h * H as f64) as i64;
        ReplayPod { queue: queue.into(), arrival_ms: ms(arrival_h), cards, run_ms: ms(run_h) }
    }

    /// The hand-made month: three pods, one card short. On 3 cards A (2 cards, 0–3 h) and B (1 card from
    /// 1 h for 2 h) fill the capacity when C (1 card, at 2 h, for 1 h) arrives: C waits until 3 h, 1 card-hour
    /// Pending. One more card and nobody waits.
    #[test]
    fn three_pods_one_card_short() {
        let pods = [pod("q", 0.0, 2.0, 3.0), pod("q", 1.0, 1.0, 2.0), pod("q", 2.0, 1.0, 1.0)];
        assert_eq!(schedule(&pods, 3.0), [Some(0), Some(H), Some(3 * H)]);
        let w = what_if(&pods, 3.0, 1);
        assert_eq!(w.today.pending_card_hours, 1.0);
        assert_eq!(
            w.today.waits,
            WaitStats { pods_started: 3, pods_waited: 1, median_wait_ms: Some(H), p90_wait_ms: Some(H), never_ran: 0 }
        );
        assert_eq!(schedule(&pods, 4.0), [Some(0), Some(H), Some(2 * H)]);
        assert_eq!(w.with_extra.pending_card_hours, 0.0);
        assert_eq!(w.with_extra.waits.pods_waited, 0);
        assert_eq!(w.saved_pending_card_hours, 1.0);
        // on 2 cards: B waits for A (2 h), C behind B in its queue starts with it at 3 h (1 h)
        let two = replay(&pods, 2.0);
        assert_eq!(schedule(&pods, 2.0), [Some(0), Some(3 * H), Some(3 * H)]);
        assert_eq!(two.pending_card_hours, 3.0);
        assert_eq!((two.waits.median_wait_ms, two.waits.p90_wait_ms), (Some(H), Some(2 * H)));
    }

    #[test]
    fn no_pod_overtakes_an_earlier_one_of_its_queue_but_other_queues_go_on() {
        // 4 cards. big (3, queue a) runs 0–2 h; wide (3, a) arrives at 0.5 h and waits for it; small (1, a)
        // arrives at 1 h while a card is free but stays behind wide; other (1, queue b) takes that card at 1.5 h
        // (until 2.5 h). At 2 h wide starts beside other; small starts when other ends, at 2.5 h.
        let pods = [pod("a", 0.0, 3.0, 2.0), pod("a", 0.5, 3.0, 1.0), pod("a", 1.0, 1.0, 1.0), pod("b", 1.5, 1.0, 1.0)];
        assert_eq!(schedule(&pods, 4.0), [Some(0), Some(2 * H), Some(5 * H / 2), Some(3 * H / 2)]);
        // the same with small in its own queue: it takes the free card at once (until 2 h), so other finds none
        // at 1.5 h and starts beside wide at 2 h
        let mut own = pods.clone();
        own[2].queue = "c".into();
        assert_eq!(schedule(&own, 4.0), [Some(0), Some(2 * H), Some(H), Some(2 * H)]);
    }

    #[test]
    fn a_pod_larger_than_the_capacity_never_starts_and_holds_up_nobody() {
        let pods = [pod("q", 0.0, 9.0, 1.0), pod("q", 0.5, 1.0, 1.0)];
        assert_eq!(schedule(&pods, 8.0), [None, Some(H / 2)]);
        let r = replay(&pods, 8.0);
        assert_eq!((r.waits.never_ran, r.waits.pods_started, r.pending_card_hours), (1, 1, 0.0));
    }

    #[test]
    fn fractions_of_cards_fill_a_card_exactly() {
        // seven 1g MIG slices on one card, and an eighth that waits for the first to end
        let mut pods: Vec<ReplayPod> = (0..7).map(|k| pod("q", 0.0, 1.0 / 7.0, 1.0 + f64::from(k))).collect();
        pods.push(pod("q", 0.5, 1.0 / 7.0, 1.0));
        let starts = schedule(&pods, 1.0);
        assert!(starts[..7].iter().all(|s| *s == Some(0)), "{starts:?}");
        assert_eq!(starts[7], Some(H));
    }

    fn pods_strategy() -> impl Strategy<Value = Vec<ReplayPod>> {
        prop::collection::vec(
            (0u8..3, 0i64..48, prop::sample::select(vec![0.25, 0.5, 1.0, 2.0, 4.0, 8.0]), 1i64..12),
            0..40,
        )
        .prop_map(|v| {
            v.into_iter()
                .map(|(q, at, cards, run)| ReplayPod {
                    queue: format!("q{q}"),
                    arrival_ms: at * H / 2,
                    cards,
                    run_ms: run * H / 2,
                })
                .collect()
        })
    }

    proptest! {
        /// Whatever the month: no pod starts before it arrives, the cards running never exceed the capacity, no
        /// pod starts before an earlier one of its queue, every pod that fits starts, and on as many cards as all
        /// the pods ask for together nobody waits.
        #[test]
        fn the_replay_keeps_its_rules(pods in pods_strategy(), capacity in prop::sample::select(vec![1.0, 2.0, 4.0, 8.0])) {
            let starts = schedule(&pods, capacity);
            for (i, (p, s)) in pods.iter().zip(&starts).enumerate() {
                prop_assert_eq!(s.is_some(), p.cards <= capacity);
                let Some(s) = *s else { continue };
                prop_assert!(s >= p.arrival_ms);
                // at its start, what runs (itself included) fits
                let held: f64 = pods
                    .iter()
                    .zip(&starts)
                    .filter(|(q, t)| t.is_some_and(|t| t <= s && s < t + q.run_ms))
                    .map(|(q, _)| q.cards)
                    .sum();
                prop_assert!(held <= capacity + 1e-9, "{held} > {capacity} at {s}");
                for (j, (q, t)) in pods.iter().zip(&starts).enumerate() {
                    let earlier = (q.arrival_ms, j) < (p.arrival_ms, i);
                    if q.queue == p.queue && earlier && let Some(t) = t {
                        prop_assert!(*t <= s, "pod {j} of {} overtaken by {i}", q.queue);
                    }
                }
            }
            let all: f64 = pods.iter().map(|p| p.cards).sum();
            let roomy = replay(&pods, all.max(8.0));
            prop_assert_eq!(roomy.pending_card_hours, 0.0);
            prop_assert_eq!(roomy.waits.pods_started, pods.len() as u64);
        }
    }
}
