//! Ground truth (`truth.json`), computed from the simulation's own events — the pod schedule,
//! the holders of each device and the value functions — never from the written series.
//!
//! It follows SPEC §3 to the sample: at each grid point `g` where kube-state-metrics sees a pod's
//! container Running it holds `q·f·Δ` over `[g, g + Δ)`; a utilization sample of the pod (the
//! exporter's, at `u + offset` on its own interval, unless the exporter is down, the node has none,
//! or the value is NaN) covers `[s, s + interval)` of that span and adds `min(u, q·f)` times the
//! overlap to effective; the span no sample covers is unmetered (intersection rule).
//!
//! Serving (SPEC §9, `serving`): `serving` has one row per hour × namespace × pod name × model × engine in which
//! the pod's series of the model have a sample (a row may hold zeros: an idle serving hour, or only a baseline):
//! `input_tokens` and `output_tokens` (null for Triton, which counts requests only) and `requests`, summed over
//! vLLM's data-parallel engines and `finished_reason`s. A sample counts its increase over the sample before it
//! (its whole value after a counter reset, or after a restart of the pod under the same name at most an hour
//! before); a pod object's first sample counts whole when kube-state-metrics saw the pod become Running within one
//! scrape interval before it, and is otherwise a baseline that counts nothing (the late-scraped pod; with KSM
//! outages, a pod that started Running unseen). The unknown `vllm:prompt_tokens` never counts. `serving_pods` has
//! one row per serving pod name: its engine, models (TGI's from `kube_pod_labels{label_model}`), data-parallel
//! engines, workload labels (`plain` or `exported`), the families it writes (`metrics`, `unknown_metrics`), its
//! uids, the cases it carries (`cases`: `two_models`, `two_engines`, `underscore_names`, `exported_labels`,
//! `unknown_name`, `counter_reset`, `same_name_restart`, `cold_restart`, `late_scrape`, `baseline`, `idle_hours`,
//! `silent`), the times of its mid-hour counter resets, of its late scrape's first sample and of every baseline
//! sample, its idle hours (rows of zeros), and its totals over the window (the sums of its `serving` rows). Both are
//! empty in truth files written before serving was simulated.
//!
//! Quotas (SPEC §10, `quota`): `quota` has one row per hour × scope with a sample of its guarantee: `scope_kind`
//! `namespace` for the namespaces guaranteed by their ResourceQuota (`vision-dev`, `recsys`, `sandbox`; not
//! `vision-train`, whose queue guarantees it) and `cluster_queue` for `cq-nlp` and `cq-vision`, with the scope's
//! `team` (a namespace's as elsewhere, `unassigned` without a label; `nlp` and `vision` for the queues).
//! `guaranteed_card_seconds` sums, over the hour's KSM scrapes, the least `requests.nvidia.com/gpu` hard of the
//! namespace's objects (the queue's leader nominal quota) times the scrape interval; `used_card_seconds` is the
//! GPU-seconds the rows above count for the scope's pods in the hour (a queue's: its namespaces' pods except the
//! inference servers), bridged seconds included; `used_within_card_seconds` = min(used, guaranteed),
//! `borrowed_card_seconds` = max(0, used − guaranteed), `reserved_idle_card_seconds` = guaranteed − used within;
//! `models` splits the used card-seconds by the GPU model of the pods' nodes (`unknown` where cardhour cannot know
//! it), each with its share of the used-within (used × within ÷ the scope's used: pro rata).
//! `pending` has one row per GPU pod object with a KSM sample (the unknown resource's aside, the never-ran pods
//! among them), by namespace, pod name and creation: its first scrape seen Pending and first seen Running (null when
//! none), its last scrape, `pending_card_seconds` (its cards `q·f` × the interval over its Pending scrapes; a
//! never-ran pod's whole cards) and `never_ran` (no Running scrape in the window: also a pod still Pending at its end
//! or seen only after it ended). Both are empty in truth files written before quotas were simulated.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::bridge::{across, bridgeable, bridged};
use super::clock::{HOUR_MS, rfc3339};
use super::layout::{Exporter, NAMESPACES, NodeType, TEAMS, team_of};
use super::model::{Cluster, Grid, Kind};
use super::quota::{PendingPodRow, Plan, QuotaHourRow};
use super::serving::{Server, ServingPodRow, ServingRow};
use super::values::{Metric, best_metric, exclusive_value, hami_percent, per_pod_fb, per_pod_percent, shared_value};

/// GPU-hours, effective GPU-hours and unmetered GPU-hours; with kube-state-metrics outages also the GPU-hours
/// bridged over them (part of `gpu_hours`) and those lost in them (not in `gpu_hours`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    pub gpu_hours: f64,
    pub effective_gpu_hours: f64,
    pub unmetered_gpu_hours: f64,
    /// Held through a KSM outage the pod was Running across, no longer than cardhour's default bridge: counted.
    #[serde(default)]
    pub bridged_gpu_hours: f64,
    /// Held in a KSM outage and not counted: a longer outage, or a pod that started or stopped Running in it.
    #[serde(default)]
    pub unbilled_gap_gpu_hours: f64,
}

/// The simulation parameters as echoed in the truth.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamsOut {
    pub gpus: u32,
    pub hours: u32,
    pub scrape_interval_s: u32,
    pub seed: u64,
    #[serde(default)]
    pub profile: String,
    #[serde(default)]
    pub ksm_gaps: bool,
    /// Scrape interval of the utilization exporters (DCGM, HAMi's monitor), each node on its own phase.
    #[serde(default)]
    pub util_interval_s: u32,
    pub start: String,
    pub end: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TeamRow {
    pub team: String,
    #[serde(flatten)]
    pub figures: Figures,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NamespaceRow {
    pub namespace: String,
    pub team: String,
    #[serde(flatten)]
    pub figures: Figures,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindRow {
    pub kind: String,
    #[serde(flatten)]
    pub figures: Figures,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HourNamespaceRow {
    pub hour: String,
    pub namespace: String,
    #[serde(flatten)]
    pub figures: Figures,
}

/// One hour × namespace × GPU model × resource kind: what a bill line is summed from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HourLineRow {
    pub hour: String,
    pub namespace: String,
    pub team: String,
    /// DCGM `modelName` as metered; null on the node without DCGM (stored as `unknown`).
    pub gpu_model: Option<String>,
    pub kind: String,
    #[serde(flatten)]
    pub figures: Figures,
}

/// One hour of one pod name in one namespace (its restarts together): what the stored rows of the hour sum to.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PodHourRow {
    pub hour: String,
    pub namespace: String,
    pub pod: String,
    pub node: String,
    /// The node's type (`NodeRow::node_type`): the setup the pod ran in.
    pub node_type: String,
    pub kind: String,
    #[serde(flatten)]
    pub figures: Figures,
}

/// One pod name in one namespace (its restarts are further segments).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PodRow {
    pub namespace: String,
    pub pod: String,
    pub team: String,
    pub kind: String,
    /// Workload class (train, short_job, inference, dev, squatter).
    pub workload: String,
    /// KSM resource; HAMi pods are reported under `nvidia_com_gpu` (f from `nvidia_com_gpucores`).
    pub resource: String,
    /// DCGM `modelName` of its node; null on the node without DCGM.
    pub gpu_model: Option<String>,
    pub node: String,
    pub units: u32,
    pub fraction: f64,
    #[serde(flatten)]
    pub figures: Figures,
    /// Σ over run segments (clipped to the window) of (t2 − t1)·q·f, in hours.
    pub continuous_gpu_hours: f64,
    /// Card-memory-hours promised (SPEC §7): the running samples × Δ × q × the memory one unit is promised (a
    /// whole card 1, MIG its profile's memory over the card's, a time-slicing replica 1, MPS 1/replicas, HAMi
    /// its `gpumem` over the card's memory).
    #[serde(default)]
    pub promised_memory_card_hours: f64,
    pub segments: u32,
    pub squatter: bool,
    pub peak_fb_used_mib: Option<f64>,
    /// `sm_active`, `gr_engine_active`, `gpu_util`, `hami`, `dcgm_pod`, or `none` without device data.
    pub util_source: String,
    pub uids: Vec<String>,
    /// Its node's cards cannot be counted: cardhour takes a unit as a card until the node is configured (the
    /// figures here are the physical ones, at `fraction`).
    #[serde(default)]
    pub unverified: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityRow {
    pub node: String,
    /// DCGM `modelName`; null on the node without DCGM.
    pub gpu_model: Option<String>,
    /// The physical model, also where no exporter tells it.
    pub hardware_model: String,
    pub cards: u32,
    /// What the node advertises (`kube_node_status_capacity`, all GPU resources).
    #[serde(default)]
    pub advertised_units: u32,
    /// Nothing counts its cards: until configured, cardhour counts `advertised_units` cards.
    #[serde(default)]
    pub unverified: bool,
    pub card_hours: f64,
    /// The part of `card_hours` offered to workloads: all of it (no node is cordoned, every card allocatable).
    pub offered_card_hours: f64,
    /// The part of `card_hours` bridged over KSM outages.
    #[serde(default)]
    pub bridged_card_hours: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnknownRow {
    pub namespace: String,
    pub pod: String,
    pub resource: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeRow {
    pub node: String,
    pub node_type: String,
    pub hardware_model: String,
    pub dcgm: bool,
    pub exporter_offset_ms: i64,
    pub host_label: String,
    pub workload_labels: String,
}

/// One kube-state-metrics outage (`--ksm-gaps`): every KSM series missing between two scrapes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KsmGapRow {
    /// The last scrape before and the first after (cardhour's anomaly subject is `<from>..<to>`).
    pub from: String,
    pub to: String,
    pub missing_scrapes: u64,
    /// Missing time `to − from − Δ`, in seconds.
    pub missing_s: i64,
    /// At most cardhour's default bridge (15 min): counted for the pods Running on both sides.
    pub bridged: bool,
    /// The anomaly cardhour records in each hour the missing scrapes fall in: `ksm_gap_bridged` or `ksm_gap`.
    pub anomaly: String,
    pub hours: Vec<KsmGapHour>,
    pub bridged_gpu_hours: f64,
    pub unbilled_gap_gpu_hours: f64,
}

/// An hour a KSM outage's missing scrapes fall in, and the pods Running on both sides of it (the anomaly's count).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KsmGapHour {
    pub hour: String,
    pub pods: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GapRow {
    pub node: String,
    pub from: String,
    pub to: String,
}

/// `truth.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Truth {
    pub params: ParamsOut,
    pub start: String,
    pub end: String,
    pub scrape_interval_s: u32,
    pub totals: Figures,
    pub by_team: Vec<TeamRow>,
    pub by_namespace: Vec<NamespaceRow>,
    pub by_kind: Vec<KindRow>,
    pub by_hour_namespace: Vec<HourNamespaceRow>,
    pub by_hour_line: Vec<HourLineRow>,
    pub by_pod: Vec<PodRow>,
    /// Per hour and pod (hours it held nothing in are left out).
    #[serde(default)]
    pub by_pod_hour: Vec<PodHourRow>,
    pub capacity: Vec<CapacityRow>,
    pub unknown_resources: Vec<UnknownRow>,
    pub non_finite_samples: u64,
    pub nodes: Vec<NodeRow>,
    pub exporter_gaps: Vec<GapRow>,
    /// kube-state-metrics outages (empty unless simulated with `--ksm-gaps`).
    #[serde(default)]
    pub ksm_gaps: Vec<KsmGapRow>,
    /// Tokens and requests the serving counters count, per hour × namespace × pod × model × engine.
    #[serde(default)]
    pub serving: Vec<ServingRow>,
    /// The serving pods: engine, models and the cases each carries.
    #[serde(default)]
    pub serving_pods: Vec<ServingPodRow>,
    /// Per hour and quota scope (a namespace's ResourceQuota, a Kueue ClusterQueue): guaranteed card-seconds and
    /// the scope's use split into used within the guarantee, borrowed and reserved idle.
    #[serde(default)]
    pub quota: Vec<QuotaHourRow>,
    /// Per GPU pod object with a sample: its first Pending and first Running scrape, Pending card-seconds, and
    /// whether it never ran.
    #[serde(default)]
    pub pending: Vec<PendingPodRow>,
}

/// Accumulated seconds.
#[derive(Clone, Copy, Debug, Default)]
struct Acc {
    gpu: f64,
    eff: f64,
    unm: f64,
    bridged: f64,
    unbilled: f64,
}

impl Acc {
    fn add(&mut self, o: &Acc) {
        self.gpu += o.gpu;
        self.eff += o.eff;
        self.unm += o.unm;
        self.bridged += o.bridged;
        self.unbilled += o.unbilled;
    }

    fn hours(&self) -> Figures {
        Figures {
            gpu_hours: self.gpu / 3600.0,
            effective_gpu_hours: self.eff / 3600.0,
            unmetered_gpu_hours: self.unm / 3600.0,
            bridged_gpu_hours: self.bridged / 3600.0,
            unbilled_gap_gpu_hours: self.unbilled / 3600.0,
        }
    }
}

/// What a pod's devices report at one grid point.
struct Measured {
    present: bool,
    u: f64,
    fb: Option<f64>,
}

/// The utilization samples `j` of a node's exporter (at `util.at(j) + off`, each covering one utilization
/// interval) that meet `[a, b)`, with the length of the overlap in ms.
fn util_samples_over(util: &Grid, off: i64, a: i64, b: i64) -> impl Iterator<Item = (u64, i64)> + '_ {
    let (ja, jb) = util.range(a - util.step_ms + 1, b, off);
    (ja..jb).map(move |j| {
        let s = util.at(j) + off;
        (j, (s + util.step_ms).min(b) - s.max(a))
    })
}

/// What pod `p`'s devices report at utilization sample `k` (at `c.util.at(k)` + the node's offset).
fn measure(c: &Cluster, p: usize, k: u64) -> Measured {
    let pod = &c.pods[p];
    let node = &c.nodes[pod.node];
    let s = c.util.at(k) + node.offset_ms;
    let mut m = Measured { present: false, u: 0.0, fb: None };
    // each card a pod holds, once (a pod may hold several replicas, or all HAMi lanes, of one card)
    let mut cards: Vec<usize> = pod.devices.iter().map(|r| r.emitter).collect();
    cards.dedup();
    if matches!(node.ty, NodeType::HamiA100 | NodeType::HamiWholeA100) {
        // HAMi's own per-container series (one per container and card); the node's DCGM has no workload labels.
        for &e in &cards {
            let seg = c.emitters[e].seg_at(k);
            if let Some(h) = seg.holders.iter().find(|h| h.pod == p) {
                m.present = true;
                m.u += hami_percent(c, h, s) as f64 / 100.0;
            }
        }
        return m;
    }
    if !node.up(k) {
        return m;
    }
    if matches!(pod.kind, Kind::TimeSlice | Kind::Mps) && node.ty.exporter() != Exporter::Copies {
        // 4.8.2's per-process series are the pod's own (the same on each replica: counted once per card);
        // without copies the card's value cannot be attributed at all
        if node.ty.exporter() == Exporter::PerPod {
            for &e in &cards {
                if c.emitters[e].seg_at(k).holders.iter().any(|h| h.pod == p) {
                    m.present = true;
                    m.u += Metric::GpuUtil.as_ratio(per_pod_percent(pod, s) as f64);
                    let fb = per_pod_fb(pod, s);
                    m.fb = Some(m.fb.unwrap_or(0.0) + fb);
                }
            }
        }
        if node.ty.exporter() != Exporter::CopiesDropIdle {
            return m;
        }
    }
    for r in &pod.devices {
        let e = &c.emitters[r.emitter];
        let seg = e.seg_at(k);
        let Some(h) = seg.holders.iter().find(|h| h.pod == p && h.lane == r.lane) else { continue };
        let Some(best) = best_metric(node.ty, &e.kind) else { continue };
        match pod.kind {
            Kind::TimeSlice | Kind::Mps => {
                let card_mem = node.ty.card_mem_mib();
                let fb = shared_value(c, &seg.holders, s, Metric::FbUsed, card_mem);
                m.fb = Some(m.fb.map_or(fb, |x| x.max(fb)));
                // Each copy carries the whole-device value: split it over the copies present.
                let v = best.as_ratio(shared_value(c, &seg.holders, s, best, card_mem));
                m.u += v / seg.holders.len() as f64;
                m.present = true;
            }
            _ => {
                let fb = exclusive_value(c, h, s, Metric::FbUsed);
                m.fb = Some(m.fb.unwrap_or(0.0) + fb);
                if best == Metric::SmActive && node.is_nan(r.emitter, k) {
                    continue;
                }
                let v = best.as_ratio(exclusive_value(c, h, s, best));
                m.u += if matches!(pod.kind, Kind::Mig(_)) { pod.f * v } else { v };
                m.present = true;
            }
        }
    }
    m
}

/// The share of a card's memory one unit of `pod` is promised.
fn memory_per_unit(c: &Cluster, pod: &super::model::Pod) -> f64 {
    let ty = c.nodes[pod.node].ty;
    match pod.kind {
        Kind::Whole | Kind::TimeSlice | Kind::Unknown => 1.0,
        Kind::Mig(p) => f64::from(p.mem_gb) / f64::from(ty.card_mem_gb()),
        // MPS caps a replica at its share of the card
        Kind::Mps => 1.0 / f64::from(ty.replicas()),
        Kind::Hami => f64::from(pod.gpumem_mib) / f64::from(ty.card_mem_mib()),
    }
}

/// Per pod name: accumulated figures and facts.
struct PodAcc {
    first: usize,
    acc: Acc,
    continuous_s: f64,
    memory_s: f64,
    segments: u32,
    peak_fb: Option<f64>,
    any_device: bool,
    uids: Vec<String>,
}

/// Compute the truth for the cluster on `grid` with its serving pods and quotas.
pub fn compute(c: &Cluster, grid: &Grid, servers: &[Server], quotas: &Plan, params: ParamsOut) -> Truth {
    let step_s = grid.step_ms as f64 / 1000.0;
    let hours = ((grid.end_ms - grid.start_ms + HOUR_MS - 1) / HOUR_MS) as usize;
    let n_ns = NAMESPACES.len();
    let mut by_hour = vec![Acc::default(); hours * n_ns];
    let mut by_pod: BTreeMap<(&str, &str), PodAcc> = BTreeMap::new();
    let mut by_line: BTreeMap<(usize, usize, Option<&str>, &str), Acc> = BTreeMap::new();
    let mut by_pod_hour: BTreeMap<(usize, &str, &str), (usize, Acc)> = BTreeMap::new();
    let mut unknown = Vec::new();

    for (p, pod) in c.pods.iter().enumerate() {
        let ns = NAMESPACES[pod.ns].0;
        if pod.kind == Kind::Unknown {
            let (ka, kb) = grid.range(pod.t0, pod.t3, 0);
            if ka < kb {
                unknown.push(UnknownRow {
                    namespace: ns.to_string(),
                    pod: c.pod_name(p).to_string(),
                    resource: pod.resource.to_string(),
                });
            }
            continue;
        }
        let run = (pod.t2.min(grid.end_ms) - pod.t1.max(grid.start_ms)).max(0);
        if run == 0 {
            continue;
        }
        let qf = pod.q as f64 * pod.f;
        let entry = by_pod.entry((ns, c.pod_name(p))).or_insert_with(|| PodAcc {
            first: p,
            acc: Acc::default(),
            continuous_s: 0.0,
            memory_s: 0.0,
            segments: 0,
            peak_fb: None,
            any_device: false,
            uids: Vec::new(),
        });
        entry.segments += 1;
        entry.continuous_s += run as f64 / 1000.0 * qf;
        entry.uids.push(pod.uid.clone());
        let (ka, kb) = grid.range(pod.t1, pod.t2, 0);
        for k in ka..kb {
            let gap = c.ksm_gap_at(k);
            let ty = c.nodes[pod.node].ty;
            let line = (grid.hour_of(k), pod.ns, ty.known_model(), pod.kind.as_str());
            if let Some(g) = gap
                && !bridged(grid, pod, g)
            {
                // not seen by kube-state-metrics, and not counted through: lost
                let a = Acc { unbilled: qf * step_s, ..Acc::default() };
                entry.acc.add(&a);
                by_pod_hour.entry((grid.hour_of(k), ns, c.pod_name(p))).or_insert((p, Acc::default())).1.add(&a);
                by_hour[grid.hour_of(k) * n_ns + pod.ns].add(&a);
                by_line.entry(line).or_default().add(&a);
                continue;
            }
            entry.memory_s += step_s * pod.q as f64 * memory_per_unit(c, pod);
            let mut a = Acc { gpu: qf * step_s, ..Acc::default() };
            if gap.is_some() {
                a.bridged = a.gpu;
            }
            // SPEC §3's intersection rule: each utilization sample covers [s, s + interval) of this KSM sample's
            // [g, g + Δ); what no sample of the pod covers is unmetered
            let (g0, g1) = (grid.at(k), grid.at(k) + grid.step_ms);
            let mut covered_ms = 0i64;
            for (j, ov_ms) in util_samples_over(&c.util, c.nodes[pod.node].offset_ms, g0, g1) {
                let m = measure(c, p, j);
                if !m.present {
                    continue;
                }
                covered_ms += ov_ms;
                a.eff += m.u.min(qf) * ov_ms as f64 / 1000.0;
                entry.any_device = true;
                if let Some(fb) = m.fb {
                    entry.peak_fb = Some(entry.peak_fb.map_or(fb, |x| x.max(fb)));
                }
            }
            a.unm = qf * (grid.step_ms - covered_ms) as f64 / 1000.0;
            entry.acc.add(&a);
            by_pod_hour.entry((grid.hour_of(k), ns, c.pod_name(p))).or_insert((p, Acc::default())).1.add(&a);
            by_hour[grid.hour_of(k) * n_ns + pod.ns].add(&a);
            by_line.entry(line).or_default().add(&a);
        }
    }

    let mut ns_acc = vec![Acc::default(); n_ns];
    let mut kind_acc: BTreeMap<&str, Acc> = BTreeMap::new();
    let mut totals = Acc::default();
    let mut pod_rows = Vec::with_capacity(by_pod.len());
    for ((ns, name), pa) in &by_pod {
        let pod = &c.pods[pa.first];
        let node = &c.nodes[pod.node];
        ns_acc[pod.ns].add(&pa.acc);
        kind_acc.entry(pod.kind.as_str()).or_default().add(&pa.acc);
        totals.add(&pa.acc);
        let hami_node = matches!(node.ty, NodeType::HamiA100 | NodeType::HamiWholeA100);
        let source = match (pod.kind, pa.any_device) {
            (_, false) => "none",
            _ if hami_node => "hami",
            (Kind::TimeSlice | Kind::Mps, true) if node.ty.exporter() == Exporter::PerPod => "dcgm_pod",
            _ => {
                let kind = c.emitters[pod.devices[0].emitter].kind;
                match best_metric(node.ty, &kind) {
                    Some(Metric::SmActive) => "sm_active",
                    Some(Metric::GrEngineActive) => "gr_engine_active",
                    Some(Metric::GpuUtil) => "gpu_util",
                    _ => "none",
                }
            }
        };
        pod_rows.push(PodRow {
            namespace: ns.to_string(),
            pod: name.to_string(),
            team: team_of(pod.ns).to_string(),
            kind: pod.kind.as_str().to_string(),
            workload: pod.class.as_str().to_string(),
            resource: pod.resource.to_string(),
            gpu_model: node.ty.known_model().map(str::to_string),
            node: node.name.clone(),
            units: pod.q,
            fraction: pod.f,
            figures: pa.acc.hours(),
            continuous_gpu_hours: pa.continuous_s / 3600.0,
            promised_memory_card_hours: pa.memory_s / 3600.0,
            segments: pa.segments,
            squatter: pod.squatter,
            peak_fb_used_mib: pa.peak_fb,
            util_source: source.to_string(),
            uids: pa.uids.clone(),
            unverified: node.ty == NodeType::UncountableL40S,
        });
    }

    let by_namespace: Vec<NamespaceRow> = NAMESPACES
        .iter()
        .enumerate()
        .map(|(i, (ns, _))| NamespaceRow {
            namespace: ns.to_string(),
            team: team_of(i).to_string(),
            figures: ns_acc[i].hours(),
        })
        .collect();
    let by_team = TEAMS
        .iter()
        .map(|t| {
            let mut a = Acc::default();
            for (i, acc) in ns_acc.iter().enumerate() {
                if team_of(i) == *t {
                    a.add(acc);
                }
            }
            TeamRow { team: t.to_string(), figures: a.hours() }
        })
        .collect();
    let by_kind = ["whole", "mig", "timeslice", "mps", "hami"]
        .iter()
        .filter(|k| **k != "mps" || kind_acc.contains_key("mps"))
        .map(|k| KindRow { kind: k.to_string(), figures: kind_acc.get(k).copied().unwrap_or_default().hours() })
        .collect();
    let mut by_hour_namespace = Vec::new();
    for h in 0..hours {
        for (i, (ns, _)) in NAMESPACES.iter().enumerate() {
            let a = &by_hour[h * n_ns + i];
            if a.gpu > 0.0 {
                by_hour_namespace.push(HourNamespaceRow {
                    hour: rfc3339(grid.start_ms + h as i64 * HOUR_MS),
                    namespace: ns.to_string(),
                    figures: a.hours(),
                });
            }
        }
    }

    let by_hour_line = by_line
        .into_iter()
        .map(|((h, ns, model, kind), a)| HourLineRow {
            hour: rfc3339(grid.start_ms + h as i64 * HOUR_MS),
            namespace: NAMESPACES[ns].0.to_string(),
            team: team_of(ns).to_string(),
            gpu_model: model.map(str::to_string),
            kind: kind.to_string(),
            figures: a.hours(),
        })
        .collect();

    let by_pod_hour = by_pod_hour
        .into_iter()
        .filter(|(_, (_, a))| a.gpu > 0.0 || a.unbilled > 0.0)
        .map(|((h, ns, pod), (p, a))| {
            let node = &c.nodes[c.pods[p].node];
            PodHourRow {
                hour: rfc3339(grid.start_ms + h as i64 * HOUR_MS),
                namespace: ns.to_string(),
                pod: pod.to_string(),
                node: node.name.clone(),
                node_type: node.ty.slug().to_string(),
                kind: c.pods[p].kind.as_str().to_string(),
                figures: a.hours(),
            }
        })
        .collect();

    let cards = super::layout::GPUS_PER_NODE;
    // every node has capacity on both sides of each outage: the short ones are bridged, the long ones lost
    let scrapes =
        |short: bool| -> u64 { c.ksm_gaps.iter().filter(|g| bridgeable(grid, **g) == short).map(|(a, b)| b - a).sum() };
    let (bridged_scrapes, lost_scrapes) = (scrapes(true), scrapes(false));
    let card_hours = cards as f64 * (grid.len - lost_scrapes) as f64 * step_s / 3600.0;
    let capacity = c
        .nodes
        .iter()
        .map(|n| CapacityRow {
            node: n.name.clone(),
            gpu_model: n.ty.known_model().map(str::to_string),
            hardware_model: n.ty.model().to_string(),
            cards,
            advertised_units: n.ty.capacity().iter().map(|(_, u)| u).sum(),
            unverified: n.ty == NodeType::UncountableL40S,
            card_hours,
            offered_card_hours: card_hours,
            bridged_card_hours: cards as f64 * bridged_scrapes as f64 * step_s / 3600.0,
        })
        .collect();
    let nodes = c
        .nodes
        .iter()
        .map(|n| NodeRow {
            node: n.name.clone(),
            node_type: n.ty.slug().to_string(),
            hardware_model: n.ty.model().to_string(),
            dcgm: n.ty.has_dcgm(),
            exporter_offset_ms: n.offset_ms,
            host_label: n.ty.host_label().to_string(),
            workload_labels: if n.ty.workload_labels()[1] == "pod" { "plain" } else { "exported" }.to_string(),
        })
        .collect();
    let exporter_gaps = c
        .nodes
        .iter()
        .flat_map(|n| n.gaps_t.iter().map(|&(a, b)| GapRow { node: n.name.clone(), from: rfc3339(a), to: rfc3339(b) }))
        .collect();

    let ksm_gaps = ksm_gap_rows(c, grid);
    let (serving, serving_pods) = super::serving::truth(c, grid, servers);
    let (quota, pending) = super::quota::truth(c, grid, quotas);

    Truth {
        start: params.start.clone(),
        end: params.end.clone(),
        scrape_interval_s: params.scrape_interval_s,
        params,
        totals: totals.hours(),
        by_team,
        by_namespace,
        by_kind,
        by_hour_namespace,
        by_hour_line,
        by_pod: pod_rows,
        by_pod_hour,
        capacity,
        unknown_resources: unknown,
        non_finite_samples: c.nodes.iter().map(|n| n.nan_ks.len() as u64).sum(),
        nodes,
        exporter_gaps,
        ksm_gaps,
        serving,
        serving_pods,
        quota,
        pending,
    }
}

/// Each KSM outage with the hours its missing scrapes fall in, the pods Running across it, and what they held in
/// it (bridged or lost; pods that started or stopped Running inside it lose their time there too).
fn ksm_gap_rows(c: &Cluster, grid: &Grid) -> Vec<KsmGapRow> {
    let step_s = grid.step_ms as f64 / 3600.0 / 1000.0;
    c.ksm_gaps
        .iter()
        .map(|&(ga, gb)| {
            let short = bridgeable(grid, (ga, gb));
            let metered = || c.pods.iter().filter(|p| p.kind != Kind::Unknown);
            let pods = metered().filter(|p| across(grid, p, (ga, gb))).count() as u64;
            let mut hours: Vec<usize> = (ga..gb).map(|k| grid.hour_of(k)).collect();
            hours.dedup();
            let (mut bridged_h, mut unbilled_h) = (0.0, 0.0);
            for p in metered() {
                let held = (ga..gb).filter(|k| p.running_at(grid.at(*k))).count() as f64 * p.q as f64 * p.f * step_s;
                if short && across(grid, p, (ga, gb)) {
                    bridged_h += held;
                } else {
                    unbilled_h += held;
                }
            }
            KsmGapRow {
                from: rfc3339(grid.at(ga - 1)),
                to: rfc3339(grid.at(gb)),
                missing_scrapes: gb - ga,
                missing_s: (gb - ga) as i64 * grid.step_ms / 1000,
                bridged: short,
                anomaly: if short { "ksm_gap_bridged" } else { "ksm_gap" }.to_string(),
                hours: hours
                    .into_iter()
                    .map(|h| KsmGapHour { hour: rfc3339(grid.start_ms + h as i64 * HOUR_MS), pods })
                    .collect(),
                bridged_gpu_hours: bridged_h,
                unbilled_gap_gpu_hours: unbilled_h,
            }
        })
        .collect()
}
