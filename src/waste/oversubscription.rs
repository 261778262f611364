//! Oversubscription (超卖, SPEC §7): per node, GPU model and cluster and day, the cards' worth promised to pods over
//! the physical cards, with the same cards' utilization beside it — a ratio of 3 on cards 20 % busy is fine, on
//! cards 90 % busy it is contention. Pure: per (node, day, kind, fraction) sums in, the report out.
//!
//! What a unit promises: a whole card 1; a MIG instance g/slices; a HAMi vGPU its `gpucores/100`; an MPS replica
//! 1/replicas (MPS caps it); a time-slicing replica a **whole card** (nothing caps it). Stored GPU-seconds are the
//! physical share held (q·f·Δ), so a time-slicing row promises `gpu_seconds / f` and every other row promises its
//! `gpu_seconds`. The ratio is time-weighted: promised card-seconds over the node's physical card-seconds of the
//! day.
//!
//! Memory: a row promises its units' time (`gpu_seconds / f`) × the share of a card's memory one unit is promised
//! (stored per row; see `metering::memory`: a whole card 1, MIG its profile's memory over the card's, a
//! time-slicing replica 1, MPS 1/replicas, HAMi its `gpumem` over the card's or `gpumem_percentage`/100). Rows
//! stored before the share was have it derived from their kind, fraction and MIG profile by the same rule — except
//! HAMi's, which came from the container's requests: that time is reported as unknown memory, never guessed. The
//! memory ratio is promised card-memory-hours over physical card-hours, a lower bound where some is unknown.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::Serialize;

/// Stored usage of one node and day, one kind and fraction.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldDay {
    pub cluster: String,
    pub node: String,
    pub day: NaiveDate,
    pub gpu_model: String,
    pub kind: String,
    pub fraction: f64,
    pub mig_profile: Option<String>,
    /// The stored memory share per unit; `None` on rows stored before it, or unknown.
    pub memory_share: Option<f64>,
    pub gpu_seconds: f64,
    pub effective_gpu_seconds: f64,
    pub unmetered_gpu_seconds: f64,
}

/// Stored capacity of one node and day.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityDay {
    pub cluster: String,
    pub node: String,
    pub day: NaiveDate,
    pub gpu_model: String,
    pub card_seconds: f64,
}

/// The card-seconds one row promises.
pub fn promised_seconds(kind: &str, fraction: f64, gpu_seconds: f64) -> f64 {
    if kind == "timeslice" && fraction > 0.0 { gpu_seconds / fraction } else { gpu_seconds }
}

/// The card-memory-seconds a row promises (its units' time × the memory share of a unit); `None` where the share
/// is unknown: a HAMi row without a stored share, or a MIG profile on a card of unknown memory.
pub fn promised_memory_seconds(h: &HeldDay) -> Option<f64> {
    let share = match h.memory_share {
        Some(s) => Some(s),
        None if h.kind == "hami" => None,
        None => crate::metering::unit_memory_share(&h.kind, h.fraction, h.mig_profile.as_deref(), &h.gpu_model),
    }?;
    // stored rows have f > 0 (a constraint); units' time is gpu_seconds / f
    (h.fraction > 0.0).then(|| h.gpu_seconds / h.fraction * share)
}

/// One line of the report: a node, a GPU model or a cluster on one day.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct OversubscriptionRow {
    pub cluster: String,
    /// Set on node lines.
    pub node: Option<String>,
    /// Set on node and model lines.
    pub gpu_model: Option<String>,
    #[schema(value_type = String, format = Date)]
    pub day: NaiveDate,
    /// Physical card-hours (capacity).
    pub card_hours: f64,
    /// Card-hours held by pods (their physical share).
    pub held_card_hours: f64,
    /// Cards' worth promised to pods, in card-hours.
    pub promised_card_hours: f64,
    /// `promised / card_hours`; `None` without capacity.
    pub compute_ratio: Option<f64>,
    /// Card-memory-hours promised to pods: a card's memory for an hour is one (HAMi `gpumem` over the card's,
    /// MIG its profile's memory over the card's, a time-slicing replica a card's, MPS 1/replicas).
    pub promised_memory_card_hours: f64,
    /// `promised_memory_card_hours / card_hours`; `None` without capacity. A lower bound where
    /// `unknown_memory_card_hours` is not zero.
    pub memory_ratio: Option<f64>,
    /// Card-hours held (physical share) whose memory promise is unknown: HAMi rows stored before the memory share
    /// was, HAMi `gpumem` or MIG on a card of unknown memory.
    pub unknown_memory_card_hours: f64,
    /// Effective card-hours over the physical card-hours: how busy the cards were.
    pub busy: Option<f64>,
    /// Effective over the held, metered card-hours (SPEC utilization); `None` where nothing was metered.
    pub utilization: Option<f64>,
    pub unmetered_card_hours: f64,
}

/// The report at its three levels.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct OversubscriptionReport {
    pub nodes: Vec<OversubscriptionRow>,
    pub gpu_models: Vec<OversubscriptionRow>,
    pub clusters: Vec<OversubscriptionRow>,
}

#[derive(Default, Clone, Copy)]
struct Sums {
    capacity: f64,
    held: f64,
    promised: f64,
    memory: f64,
    unknown_memory: f64,
    effective: f64,
    unmetered: f64,
}

impl Sums {
    fn add(&mut self, o: &Sums) {
        self.capacity += o.capacity;
        self.held += o.held;
        self.promised += o.promised;
        self.memory += o.memory;
        self.unknown_memory += o.unknown_memory;
        self.effective += o.effective;
        self.unmetered += o.unmetered;
    }

    fn row(&self, cluster: &str, node: Option<&str>, model: Option<&str>, day: NaiveDate) -> OversubscriptionRow {
        let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
        OversubscriptionRow {
            cluster: cluster.to_string(),
            node: node.map(str::to_string),
            gpu_model: model.map(str::to_string),
            day,
            card_hours: self.capacity / 3600.0,
            held_card_hours: self.held / 3600.0,
            promised_card_hours: self.promised / 3600.0,
            compute_ratio: ratio(self.promised, self.capacity),
            promised_memory_card_hours: self.memory / 3600.0,
            memory_ratio: ratio(self.memory, self.capacity),
            unknown_memory_card_hours: self.unknown_memory / 3600.0,
            busy: ratio(self.effective, self.capacity),
            utilization: ratio(self.effective, self.held - self.unmetered),
            unmetered_card_hours: self.unmetered / 3600.0,
        }
    }
}

/// The report of the given sums. A node's model is its capacity's (the one of its usage where it had none).
pub fn oversubscription(held: &[HeldDay], capacity: &[CapacityDay]) -> OversubscriptionReport {
    // (cluster, day, node) → model and sums
    let mut nodes: BTreeMap<(&str, NaiveDate, &str), (&str, Sums)> = BTreeMap::new();
    for c in capacity {
        let e = nodes.entry((&c.cluster, c.day, &c.node)).or_insert((&c.gpu_model, Sums::default()));
        e.1.capacity += c.card_seconds;
    }
    for h in held {
        let e = nodes.entry((&h.cluster, h.day, &h.node)).or_insert((&h.gpu_model, Sums::default()));
        e.1.held += h.gpu_seconds;
        e.1.promised += promised_seconds(&h.kind, h.fraction, h.gpu_seconds);
        match promised_memory_seconds(h) {
            Some(m) => e.1.memory += m,
            None => e.1.unknown_memory += h.gpu_seconds,
        }
        e.1.effective += h.effective_gpu_seconds;
        e.1.unmetered += h.unmetered_gpu_seconds;
    }
    let mut models: BTreeMap<(&str, NaiveDate, &str), Sums> = BTreeMap::new();
    let mut clusters: BTreeMap<(&str, NaiveDate), Sums> = BTreeMap::new();
    let mut node_rows = Vec::with_capacity(nodes.len());
    for ((cluster, day, node), (model, sums)) in &nodes {
        models.entry((cluster, *day, model)).or_default().add(sums);
        clusters.entry((cluster, *day)).or_default().add(sums);
        node_rows.push(sums.row(cluster, Some(node), Some(model), *day));
    }
    OversubscriptionReport {
        nodes: node_rows,
        gpu_models: models.iter().map(|((c, d, m), s)| s.row(c, None, Some(m), *d)).collect(),
        clusters: clusters.iter().map(|((c, d), s)| s.row(c, None, None, *d)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A100: &str = "NVIDIA A100-SXM4-80GB";

    fn day() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 11, 3).unwrap()
    }

    fn held(node: &str, kind: &str, fraction: f64, card_hours: f64, effective: f64) -> HeldDay {
        HeldDay {
            cluster: "c".into(),
            node: node.into(),
            day: day(),
            gpu_model: "L40S".into(),
            kind: kind.into(),
            fraction,
            mig_profile: None,
            memory_share: crate::metering::unit_memory_share(kind, fraction, None, "L40S"),
            gpu_seconds: card_hours * 3600.0,
            effective_gpu_seconds: effective * 3600.0,
            unmetered_gpu_seconds: 0.0,
        }
    }

    /// A row of `units` units held for `hours` on an A100-80GB, with its stored memory share.
    fn a100(node: &str, kind: &str, fraction: f64, units_hours: f64, memory_share: Option<f64>) -> HeldDay {
        HeldDay { gpu_model: A100.into(), memory_share, ..held(node, kind, fraction, units_hours * fraction, 0.0) }
    }

    fn cap(node: &str, card_hours: f64) -> CapacityDay {
        CapacityDay {
            cluster: "c".into(),
            node: node.into(),
            day: day(),
            gpu_model: "L40S".into(),
            card_seconds: card_hours * 3600.0,
        }
    }

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    #[test]
    fn a_small_case_by_hand() {
        // node ts: 2 cards × 24 h = 48 card-hours, time-sliced 4 ways. Over the day pods held 6 replicas for
        // 20 h (6 × 1/4 × 20 = 30 card-hours held); each replica promises a whole card: 6 × 20 = 120 card-hours,
        // ratio 120 / 48 = 2.5. They used 12 card-hours: busy 12 / 48 = 0.25, utilization 12 / 30 = 0.4.
        // node mps: 1 card, 24 card-hours, 4 MPS replicas for 24 h hold and promise 4 × 1/4 × 24 = 24: ratio 1.
        // node whole: 1 card idle all day: ratio 0, busy 0, utilization unknown.
        let h = [held("ts", "timeslice", 0.25, 30.0, 12.0), held("mps", "mps", 0.25, 24.0, 6.0)];
        let c = [cap("ts", 48.0), cap("mps", 24.0), cap("whole", 24.0)];
        let r = oversubscription(&h, &c);
        let node = |n: &str| r.nodes.iter().find(|x| x.node.as_deref() == Some(n)).unwrap();
        assert_eq!(node("ts").promised_card_hours, 120.0);
        assert_eq!(node("ts").compute_ratio, Some(2.5));
        assert_eq!((node("ts").busy, node("ts").utilization), (Some(0.25), Some(0.4)));
        assert_eq!(node("mps").compute_ratio, Some(1.0));
        assert_eq!((node("whole").compute_ratio, node("whole").utilization), (Some(0.0), None));
        // the model and the cluster: (120 + 24 + 0) / (48 + 24 + 24) = 1.5, busy 18 / 96
        assert_eq!(r.gpu_models.len(), 1);
        assert_eq!(r.clusters[0].compute_ratio, Some(1.5));
        assert_eq!(r.clusters[0].busy, Some(18.0 / 96.0));
        assert_eq!(r.gpu_models[0].compute_ratio, r.clusters[0].compute_ratio);
    }

    #[test]
    fn memory_promised_by_hand() {
        // node hami: 2 A100-80GB × 24 h = 48 card-hours. gpumem 20480 MiB (¼ of 81920) with 30 cores for 24 h:
        // 6 card-memory-hours; gpumem 40960 (½) with 50 cores for 24 h: 12; cores alone (20) for 12 h, no gpumem
        // (HAMi's default, the whole memory): 12. Memory 30 / 48 = 0.625; compute (7.2 + 12 + 2.4) / 48 = 0.45.
        // A HAMi row stored before the memory share (NULL) held 3 card-hours: unknown, not guessed.
        // node ts: 1 L40S × 24 h, 4 replicas held for 24 replica-hours (6 card-hours); a replica may use the
        // whole memory: 24 / 24 = 1, as its compute promise. node mps: 1 card, 4 replicas for 24 h, each capped at ¼: 24 / 24 = 1.
        // node mig: 1 A100-80GB, two 3g.40gb for 24 h, each ½ of the memory (3/7 of the compute): 24 / 24 = 1,
        // compute 6/7; one of them stored before the memory share: derived from its profile, the same ½.
        let hami = |f: f64, hours: f64, m: Option<f64>| a100("hami", "hami", f, hours, m);
        let h = [
            hami(0.3, 24.0, Some(0.25)),
            hami(0.5, 24.0, Some(0.5)),
            hami(0.2, 12.0, Some(1.0)),
            hami(0.3, 10.0, None),
            HeldDay { gpu_model: "L40S".into(), ..a100("ts", "timeslice", 0.25, 24.0, Some(1.0)) },
            HeldDay { gpu_model: "L40S".into(), ..a100("mps", "mps", 0.25, 96.0, Some(0.25)) },
            HeldDay { mig_profile: Some("3g.40gb".into()), ..a100("mig", "mig", 3.0 / 7.0, 24.0, Some(0.5)) },
            HeldDay { mig_profile: Some("3g.40gb".into()), ..a100("mig", "mig", 3.0 / 7.0, 24.0, None) },
        ];
        let c = [cap("hami", 48.0), cap("ts", 24.0), cap("mps", 24.0), cap("mig", 24.0)];
        let r = oversubscription(&h, &c);
        let node = |n: &str| r.nodes.iter().find(|x| x.node.as_deref() == Some(n)).unwrap();
        let hn = node("hami");
        close(hn.promised_memory_card_hours, 30.0);
        close(hn.memory_ratio.unwrap(), 0.625);
        close(hn.compute_ratio.unwrap(), (7.2 + 12.0 + 2.4 + 3.0) / 48.0);
        close(hn.unknown_memory_card_hours, 3.0);
        for n in ["ts", "mps", "mig"] {
            close(node(n).memory_ratio.unwrap(), 1.0);
            close(node(n).unknown_memory_card_hours, 0.0);
        }
        close(node("ts").compute_ratio.unwrap(), 1.0);
        close(node("ts").held_card_hours, 6.0);
        close(node("mig").compute_ratio.unwrap(), 6.0 / 7.0);
        // the cluster: (30 + 24 + 24 + 24) / (48 + 24 + 24 + 24) = 0.85, with the 3 unknown card-hours beside it
        close(r.clusters[0].promised_memory_card_hours, 102.0);
        close(r.clusters[0].memory_ratio.unwrap(), 102.0 / 120.0);
        close(r.clusters[0].unknown_memory_card_hours, 3.0);
    }

    #[test]
    fn memory_of_rows_stored_before_the_share() {
        let old = |kind: &str, f: f64, profile: Option<&str>, model: &str| HeldDay {
            mig_profile: profile.map(str::to_string),
            gpu_model: model.into(),
            memory_share: None,
            ..held("n", kind, f, 3.0, 0.0)
        };
        // 3 card-hours held: a whole card 3 of memory, time-slicing ¼ → 12 units' hours × 1, MPS its share 3,
        // MIG 1g.10gb on an 80 GB card 21 units' hours × ⅛; HAMi and MIG on an unknown card: unknown
        let got = |h: HeldDay| promised_memory_seconds(&h).map(|s| s / 3600.0);
        assert_eq!(got(old("whole", 1.0, None, A100)), Some(3.0));
        assert_eq!(got(old("timeslice", 0.25, None, "L40S")), Some(12.0));
        assert_eq!(got(old("mps", 0.25, None, "L40S")), Some(3.0));
        close(got(old("mig", 1.0 / 7.0, Some("1g.10gb"), A100)).unwrap(), 21.0 / 8.0);
        assert_eq!(got(old("hami", 0.3, None, A100)), None);
        assert_eq!(got(old("mig", 1.0 / 7.0, Some("1g.10gb"), "unknown")), None);
    }

    #[test]
    fn what_each_kind_promises() {
        assert_eq!(promised_seconds("timeslice", 0.1, 36.0), 360.0);
        for kind in ["whole", "mig", "hami", "mps"] {
            assert_eq!(promised_seconds(kind, 0.25, 36.0), 36.0);
        }
    }
}
