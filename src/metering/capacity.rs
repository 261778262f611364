//! Node capacity of one hour: physical cards per node and card-seconds, and the part of them offered to
//! workloads (SPEC §3: not cordoned, allocatable), integrated over the same grid points.

use std::collections::{BTreeMap, HashMap};

use super::config::MeterConfig;
use super::gap::{Edges, Gap};
use super::grid::{Anomalies, Grid};
use super::input::{CapacitySeries, HourInput, UnschedulableSeries};
use super::node::{NodeFacts, Nodes, Sharing};
use super::output::{AnomalyKind, CapacityRow, OfferedSource, UsageRow};
use super::resource::{ResourceKind, classify_resource, mig_compute_slices};
use super::sample::Sample;

/// The cards `v` advertised units of `resource` are on a node; `None` for a resource that is not a GPU. Units
/// of a shared node are its replicas (or HAMi's virtual GPUs, or MIG instances of the single strategy).
fn advertised_cards(resource: &str, v: f64, facts: Option<&NodeFacts>, cfg: &MeterConfig) -> Option<f64> {
    let model = facts.map_or("unknown", |f| f.model.as_str());
    Some(match classify_resource(resource) {
        ResourceKind::Whole => v / facts.map_or(1.0, |f| f.plain_per_card),
        ResourceKind::TimeSlice => {
            let default = f64::from(cfg.default_timeslice_replicas.max(1));
            v / facts.and_then(|f| f.shared_replicas).filter(|r| *r >= 1.0).unwrap_or(default)
        }
        ResourceKind::Mig { slices, .. } => v * f64::from(slices) / f64::from(mig_compute_slices(model).unwrap_or(7)),
        _ => return None,
    })
}
/// A node's advertised GPU capacity in one hour.
#[derive(Default)]
struct Advertised<'a> {
    /// Σ over its GPU resources of the last capacity sample, in cards.
    cards: f64,
    /// The most grid points one of its capacity series was seen at, and that series' samples: the instants its
    /// capacity counts at (and its edges, for the KSM gaps bridged).
    points: u64,
    instants: &'a [Sample],
    edges: Edges,
    /// (resource, last capacity sample) per GPU resource, in input order.
    resources: Vec<(&'a str, f64)>,
}

pub(super) fn capacity_rows(
    input: &HourInput,
    nodes: &Nodes,
    cfg: &MeterConfig,
    grid: &Grid,
    anomalies: &mut Anomalies,
) -> Vec<CapacityRow> {
    // per node: advertised GPU units converted to physical cards, and the grid points the node was seen at
    let mut advertised: BTreeMap<&str, Advertised> = BTreeMap::new();
    for c in &input.capacity {
        let Some(last) = c.samples.last() else { continue };
        let node = c.node.as_str();
        let Some(cards) = advertised_cards(&c.resource, last.v, nodes.get(node), cfg) else { continue };
        let points = c.samples.iter().filter(|s| grid.contains(s.t_ms)).count() as u64;
        let e = advertised.entry(node).or_default();
        e.cards += cards;
        e.resources.push((c.resource.as_str(), last.v));
        if points > e.points {
            e.points = points;
            e.instants = &c.samples;
            e.edges = c.edges;
        }
    }
    let offered = Offered::new(input, nodes, cfg, grid);
    let mut rows = Vec::new();
    for (node, adv) in advertised {
        let (advertised_cards, points) = (adv.cards, adv.points);
        let facts = nodes.get(node);
        let cards = match facts.and_then(|f| f.cards) {
            Some(n) => {
                // Replicas are inferred from this very count; MIG partitions that leave slices unused advertise
                // fewer slices than the card has. Whole cards must agree exactly.
                let shared = adv.resources.iter().any(|(r, _)| *r == "nvidia_com_gpu_shared")
                    || facts.is_some_and(|f| f.sharing != Sharing::Exclusive);
                let mig = adv.resources.iter().any(|(r, _)| matches!(classify_resource(r), ResourceKind::Mig { .. }));
                let disagrees = if mig { advertised_cards > n + 1e-9 } else { (n - advertised_cards).abs() > 1e-9 };
                if !shared && disagrees {
                    anomalies.add(
                        AnomalyKind::CapacityMismatch,
                        format!("{node}: DCGM {n} cards, capacity {advertised_cards}"),
                        1,
                    );
                }
                n
            }
            None => advertised_cards,
        };
        if cards <= 0.0 || points == 0 {
            continue;
        }
        let seconds = |points: f64| cards * points * grid.interval_ms as f64 / 1000.0;
        let (bridged, bridged_offered) = offered.bridged(node, &adv);
        let card_seconds = seconds(points as f64 + bridged);
        // the same product, so a node that offered every card stores exactly its capacity
        let (offered_points, offered_source) = offered.points(node, &adv);
        let offered_card_seconds = seconds(offered_points + bridged_offered).min(card_seconds);
        rows.push(CapacityRow {
            node: node.to_string(),
            gpu_model: nodes.model(node).to_string(),
            cards,
            card_seconds,
            offered_card_seconds,
            offered_source,
        });
    }
    rows
}

/// Cards held by running pods are in use, hence offered, whatever the node says: a node cordoned for a drain still
/// runs its pods, and counting their cards as not offered as well as allocated would bill them twice (unallocated
/// would go negative). Per node-hour the offered card-seconds are raised to the card-seconds its pods held.
///
/// And a node-hour's capacity is never below the cards its pods held (SPEC §3, issue 33): a node whose capacity
/// series is missing while its pods hold cards gets a capacity row of what they held — taken at face value and
/// flagged `unverified_node` (a close blocker until configuration settles it). Else the pods' cards would be
/// billed with no capacity behind them and a spread of the negative unallocated cost would cancel every bill.
/// (A node advertising fewer units than its pods request is left as it is: the scheduler does not place them,
/// and billing keeps any excess as the capacity shortfall, never a negative unallocated.)
pub(super) fn count_held_cards_as_offered(
    mut capacity: Vec<CapacityRow>,
    usage: &[UsageRow],
    hour_seconds: f64,
    model: impl Fn(&str) -> String,
    anomalies: &mut Anomalies,
) -> Vec<CapacityRow> {
    let mut held: BTreeMap<&str, f64> = BTreeMap::new();
    for r in usage {
        *held.entry(r.node.as_str()).or_default() += r.gpu_seconds;
    }
    for c in &mut capacity {
        if let Some(&h) = held.get(c.node.as_str()) {
            c.offered_card_seconds = c.offered_card_seconds.max(h.min(c.card_seconds));
        }
    }
    for (node, h) in held {
        if h <= 0.0 || capacity.iter().any(|c| c.node == node) {
            continue;
        }
        anomalies.add(AnomalyKind::UnverifiedNode, node.to_string(), 1);
        capacity.push(CapacityRow {
            node: node.to_string(),
            gpu_model: model(node),
            cards: h / hour_seconds,
            card_seconds: h,
            offered_card_seconds: h,
            offered_source: OfferedSource::Capacity,
        });
    }
    capacity
}

/// What the scheduler may hand out of each node (SPEC §3): `kube_node_status_allocatable` while the node is
/// schedulable, nothing while `kube_node_spec_unschedulable` is 1 (cordoned).
struct Offered<'a> {
    allocatable: HashMap<(&'a str, &'a str), &'a CapacitySeries>,
    cordoned: HashMap<&'a str, Vec<&'a UnschedulableSeries>>,
    nodes: &'a Nodes<'a>,
    cfg: &'a MeterConfig,
    grid: &'a Grid,
}

impl<'a> Offered<'a> {
    fn new(input: &'a HourInput, nodes: &'a Nodes<'a>, cfg: &'a MeterConfig, grid: &'a Grid) -> Self {
        let allocatable = input.allocatable.iter().map(|a| ((a.node.as_str(), a.resource.as_str()), a)).collect();
        let mut cordoned: HashMap<&str, Vec<&UnschedulableSeries>> = HashMap::new();
        for u in &input.unschedulable {
            cordoned.entry(u.node.as_str()).or_default().push(u);
        }
        Self { allocatable, cordoned, nodes, cfg, grid }
    }

    /// The grid points of `adv` weighted by the share of the node's cards offered at each (1 at a point where
    /// every card was offered, 0 while cordoned), and where that share came from. Without an allocatable sample
    /// a resource's capacity is taken as offered.
    fn points(&self, node: &str, adv: &Advertised) -> (f64, OfferedSource) {
        let source = if adv.resources.iter().any(|(r, _)| self.allocatable.contains_key(&(node, *r))) {
            OfferedSource::Allocatable
        } else {
            OfferedSource::Capacity
        };
        let mut points = 0.0;
        for t in adv.instants.iter().map(|s| s.t_ms).filter(|t| self.grid.contains(*t)) {
            points += self.share_at(node, adv, t);
        }
        (points, source)
    }

    /// The grid points of the KSM gaps bridged in the window (the node's capacity seen on both sides of a gap
    /// no longer than the bridge span), in grid points, and the same weighted by the share offered before the
    /// gap.
    fn bridged(&self, node: &str, adv: &Advertised) -> (f64, f64) {
        let (mut points, mut offered) = (0.0, 0.0);
        if !self.grid.gaps {
            return (points, offered);
        }
        let mut prev = None;
        for s in adv.edges.with(adv.instants) {
            if let Some(a) = prev.replace(*s)
                && let Some(gap) = Gap::between(a, *s, self.grid.interval_ms)
                && gap.missing_ms() <= self.grid.bridge_ms
            {
                let share = self.share_at(node, adv, a.t_ms);
                let point = gap.weight_ms() / self.grid.interval_ms as f64;
                for _ in gap.points().filter(|t| self.grid.contains(*t)) {
                    points += point;
                    offered += share * point;
                }
            }
        }
        (points, offered)
    }

    /// The share of the node's cards offered at grid point `t`.
    fn share_at(&self, node: &str, adv: &Advertised, t: i64) -> f64 {
        let half = self.grid.half;
        let cordons = self.cordoned.get(node).map(Vec::as_slice).unwrap_or(&[]);
        if cordons.iter().any(|c| c.edges.match_at(&c.samples, t, half).is_some_and(|v| v >= 0.5)) {
            return 0.0;
        }
        if adv.cards <= 0.0 {
            return 1.0;
        }
        let facts = self.nodes.get(node);
        // summed in the order `adv.cards` was, so a node offering all it has gives exactly 1
        let mut offered = 0.0;
        for &(resource, capacity) in &adv.resources {
            let units = self
                .allocatable
                .get(&(node, resource))
                .and_then(|a| a.edges.match_at(&a.samples, t, half))
                .filter(|v| v.is_finite())
                .map_or(capacity, |v| v.clamp(0.0, capacity));
            offered += advertised_cards(resource, units, facts, self.cfg).unwrap_or(0.0);
        }
        (offered / adv.cards).clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use crate::metering::{
        CapacitySeries, ContainerKey, DeviceSeries, HamiSeries, HourInput, MeterConfig, OfferedSource, RequestSeries,
        RunningSeries, Sample, UnschedulableSeries, UtilMetric, meter_hour,
    };

    const H: i64 = 1_764_547_200_000; // 2025-12-01T00:00:00Z
    const DT: i64 = 60_000;

    fn grid(from_min: i64, to_min: i64, v: f64) -> Vec<Sample> {
        (from_min..to_min).map(|m| Sample::new(H + m * DT, v)).collect()
    }

    fn series(node: &str, resource: &str, v: f64) -> CapacitySeries {
        CapacitySeries {
            node: node.into(),
            resource: resource.into(),
            samples: grid(0, 60, v),
            edges: Default::default(),
        }
    }

    /// `cards` idle DCGM devices on `node`, so its physical cards are known.
    fn devices(node: &str, cards: usize) -> Vec<DeviceSeries> {
        (0..cards)
            .map(|g| DeviceSeries {
                metric: UtilMetric::GpuUtil,
                workload: None,
                host: Some(node.into()),
                uuid: format!("GPU-{node}-{g}"),
                model: Some("NVIDIA H100 80GB HBM3".into()),
                mig_profile: None,
                mig_instance: None,
                vgpu: None,
                per_process: false,
                samples: grid(-5, 65, 0.0),
            })
            .collect()
    }

    /// Cordoned (1) during minutes [a, b) of the hour.
    fn cordoned(node: &str, a: i64, b: i64) -> UnschedulableSeries {
        let samples = (0..60).map(|m| Sample::new(H + m * DT, if m >= a && m < b { 1.0 } else { 0.0 })).collect();
        UnschedulableSeries { node: node.into(), samples, edges: Default::default() }
    }

    fn input() -> HourInput {
        HourInput { start_ms: H, end_ms: H + 3_600_000, ..HourInput::default() }
    }

    fn meter(i: &HourInput) -> Vec<(String, f64, f64, OfferedSource)> {
        let cfg = MeterConfig { scrape_interval_ms: Some(DT), ..MeterConfig::default() };
        meter_hour(i, &cfg)
            .capacity
            .into_iter()
            .map(|c| (c.node, c.card_seconds, c.offered_card_seconds, c.offered_source))
            .collect()
    }

    #[test]
    fn cards_held_on_a_cordoned_node_count_as_offered() {
        let mut i = input();
        i.capacity.push(series("draining", "nvidia_com_gpu", 8.0));
        i.devices.extend(devices("draining", 8));
        i.allocatable.push(series("draining", "nvidia_com_gpu", 8.0));
        // cordoned the whole hour while one pod keeps 2 cards for its first 30 minutes
        i.unschedulable.push(cordoned("draining", 0, 60));
        let key = ContainerKey { namespace: "ns".into(), pod: "p".into(), container: "c".into() };
        i.requests.push(RequestSeries {
            key,
            uid: "u".into(),
            node: "draining".into(),
            resource: "nvidia_com_gpu".into(),
            samples: grid(0, 30, 2.0),
            edges: Default::default(),
        });
        i.running.push(RunningSeries { uid: "u".into(), samples: grid(0, 30, 1.0), edges: Default::default() });
        assert_eq!(meter(&i), [("draining".to_string(), 8.0 * 3600.0, 2.0 * 1800.0, OfferedSource::Allocatable)]);
    }

    #[test]
    fn unhealthy_cards_and_cordons_are_not_offered() {
        let mut i = input();
        for node in ["full", "sick", "cordoned", "old"] {
            i.capacity.push(series(node, "nvidia_com_gpu", 8.0));
            i.devices.extend(devices(node, 8));
        }
        i.allocatable.push(series("full", "nvidia_com_gpu", 8.0));
        // 2 of 8 cards unhealthy
        i.allocatable.push(series("sick", "nvidia_com_gpu", 6.0));
        i.allocatable.push(series("cordoned", "nvidia_com_gpu", 8.0));
        i.unschedulable.push(cordoned("full", 0, 0));
        i.unschedulable.push(cordoned("cordoned", 45, 60));
        // `old` has no allocatable series (an old kube-state-metrics): its capacity is taken as offered
        let full = 8.0 * 3600.0;
        assert_eq!(
            meter(&i),
            [
                ("cordoned".to_string(), full, 8.0 * 45.0 * 60.0, OfferedSource::Allocatable),
                ("full".to_string(), full, full, OfferedSource::Allocatable),
                ("old".to_string(), full, full, OfferedSource::Capacity),
                ("sick".to_string(), full, 6.0 * 3600.0, OfferedSource::Allocatable),
            ]
        );
    }

    #[test]
    fn allocatable_changes_are_integrated_over_the_samples() {
        // a card turns unhealthy at minute 20 and a second at minute 40: 8 × 20 + 7 × 20 + 6 × 20 minutes
        let mut i = input();
        i.capacity.push(series("n", "nvidia_com_gpu", 8.0));
        i.devices.extend(devices("n", 8));
        let samples = (0..60).map(|m| Sample::new(H + m * DT, 8.0 - (m / 20) as f64)).collect();
        i.allocatable.push(CapacitySeries {
            node: "n".into(),
            resource: "nvidia_com_gpu".into(),
            samples,
            edges: Default::default(),
        });
        let rows = meter(&i);
        assert_eq!(rows[0].2, (8.0 + 7.0 + 6.0) * 20.0 * 60.0);
        // a missing allocatable sample counts the capacity; one above capacity counts no more than it
        let mut gaps = input();
        gaps.capacity.push(series("n", "nvidia_com_gpu", 8.0));
        gaps.devices.extend(devices("n", 8));
        let samples =
            (0..60).filter(|m| m % 2 == 0).map(|m| Sample::new(H + m * DT, if m < 30 { 4.0 } else { 9.0 })).collect();
        gaps.allocatable.push(CapacitySeries {
            node: "n".into(),
            resource: "nvidia_com_gpu".into(),
            samples,
            edges: Default::default(),
        });
        // minutes 0..30: 15 samples at 4 cards, 15 without a sample (8); 30..60: 8 throughout
        assert_eq!(meter(&gaps)[0].2, (15.0 * 4.0 + 15.0 * 8.0 + 30.0 * 8.0) * 60.0);
    }

    #[test]
    fn shared_nodes_offer_physical_cards() {
        // time-slicing: 8 cards × 4 replicas = 32 units, 24 allocatable → 6 of 8 cards offered
        let mut i = input();
        i.capacity.push(series("ts", "nvidia_com_gpu_shared", 32.0));
        i.allocatable.push(series("ts", "nvidia_com_gpu_shared", 24.0));
        i.devices.extend(devices("ts", 8));
        // HAMi: 8 cards split 10 ways = 80 units, 60 allocatable → 6 of 8 cards offered
        i.capacity.push(series("hami", "nvidia_com_gpu", 80.0));
        i.allocatable.push(series("hami", "nvidia_com_gpu", 60.0));
        i.devices.extend(devices("hami", 8));
        let key = ContainerKey { namespace: "ns".into(), pod: "h".into(), container: "main".into() };
        for (resource, q) in [("nvidia_com_gpu", 1.0), ("nvidia_com_gpucores", 30.0)] {
            i.requests.push(RequestSeries {
                key: key.clone(),
                uid: "uid-h".into(),
                node: "hami".into(),
                resource: resource.into(),
                samples: grid(0, 60, q),
                edges: Default::default(),
            });
        }
        i.running.push(RunningSeries { uid: "uid-h".into(), samples: grid(0, 60, 1.0), edges: Default::default() });
        i.hami.push(HamiSeries { workload: key, device: "GPU-hami-0".into(), samples: grid(0, 60, 10.0) });
        let rows = meter(&i);
        assert_eq!(
            rows.iter().map(|r| (r.0.as_str(), r.1, r.2)).collect::<Vec<_>>(),
            [("hami", 8.0 * 3600.0, 6.0 * 3600.0), ("ts", 8.0 * 3600.0, 6.0 * 3600.0),]
        );
    }

    proptest! {
        /// Offered card-seconds are never negative and never above capacity; with every unit allocatable and no
        /// cordon they equal capacity bit for bit (what stored rows compare on).
        #[test]
        fn offered_is_within_capacity_and_exact_when_full(
            units in 1u32..=80,
            allocatable in prop::collection::vec(0u32..=90, 60),
            cordon in (0i64..60, 0i64..60),
            dcgm_cards in 0usize..=8,
            resource in prop::sample::select(vec!["nvidia_com_gpu", "nvidia_com_gpu_shared", "nvidia_com_mig_1g_10gb"]),
        ) {
            let mut i = input();
            i.capacity.push(series("n", resource, f64::from(units)));
            i.devices.extend(devices("n", dcgm_cards));
            let samples = allocatable.iter().enumerate().map(|(m, a)| Sample::new(H + m as i64 * DT, f64::from(*a))).collect();
            i.allocatable.push(CapacitySeries { node: "n".into(), resource: resource.into(), samples, edges: Default::default() });
            i.unschedulable.push(cordoned("n", cordon.0, cordon.0 + cordon.1));
            for (_, card_seconds, offered, _) in meter(&i) {
                prop_assert!(offered >= 0.0 && offered <= card_seconds, "{offered} of {card_seconds}");
            }
            let mut full = input();
            full.capacity.push(series("n", resource, f64::from(units)));
            full.allocatable.push(series("n", resource, f64::from(units)));
            full.devices.extend(devices("n", dcgm_cards));
            for (_, card_seconds, offered, source) in meter(&full) {
                prop_assert_eq!(offered.to_bits(), card_seconds.to_bits());
                prop_assert_eq!(source, OfferedSource::Allocatable);
            }
        }
    }
}
