//! Metering one hour window: the grid walk of docs/metering.md.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use super::Edges;
use super::capacity::{capacity_rows, count_held_cards_as_offered};
use super::config::MeterConfig;
use super::cover::{Source, integrate};
use super::gap::{Gap, stamp};
use super::grid::{Anomalies, Grid};
use super::input::{ContainerKey, DeviceSeries, HourInput, RequestSeries, RunningSeries, UtilMetric};
use super::memory::{hami_memory_share, unit_memory_share};
use super::node::{CardsSource, ModelSource, Nodes, Sharing};
use super::output::{AnomalyKind, HourOutput, UsageRow, UtilSource};
use super::queue::{PendingRow, hour_phases};
use super::quota::{QuotaScope, meter_quota};
use super::resource::{HamiPolicy, ResourceKind, card_memory_mib, classify_resource, mig_compute_slices};
use super::sample::{Sample, infer_interval_ms, match_at, min_spacing_ms};

/// Meters one hour window. Pure: the same input gives the same output, row order included.
pub fn meter_hour(input: &HourInput, cfg: &MeterConfig) -> HourOutput {
    let mut anomalies = Anomalies::default();
    let spacing = infer_interval_ms(input.running.iter().map(|s| s.samples.as_slice()))
        .or_else(|| infer_interval_ms(input.requests.iter().map(|s| s.samples.as_slice())))
        .or_else(|| infer_interval_ms(input.capacity.iter().map(|s| s.samples.as_slice())));
    let Some(interval_ms) = cfg.scrape_interval_ms.or(spacing) else {
        return HourOutput::default();
    };
    let grid = Grid {
        start: input.start_ms,
        end: input.end_ms,
        interval_ms,
        half: interval_ms / 2,
        bridge_ms: cfg.ksm_gap_bridge_ms(),
        // a gap is an exception to the scrape grid: under a configured interval shorter than the samples' own
        // spacing every pair of samples would look like one, so none is bridged or reported (as before bridging).
        // The shortest spacing tells, not the median: an hour that an outage took most of has few samples, and
        // their median spacing is the outage's (one pair of scrapes an interval apart confirms the interval).
        gaps: min_spacing_ms(
            input
                .running
                .iter()
                .map(|s| s.samples.as_slice())
                .chain(input.requests.iter().map(|s| s.samples.as_slice()))
                .chain(input.capacity.iter().map(|s| s.samples.as_slice())),
        )
        .is_none_or(|s| 2 * s < 3 * interval_ms),
        // utilization is scraped on its own grid: each source's samples cover their own interval (SPEC §3)
        dcgm_interval_ms: infer_interval_ms(input.devices.iter().map(|d| d.samples.as_slice())).unwrap_or(interval_ms),
        hami_interval_ms: infer_interval_ms(input.hami.iter().map(|h| h.samples.as_slice())).unwrap_or(interval_ms),
    };
    let silent = Silence::of(input, &grid);
    let nodes = Nodes::new(input, cfg);
    for (node, facts) in nodes.iter() {
        // a unit taken as a card: only plain units say nothing of their sharing (renamed replicas are reported
        // with the replica count assumed for them)
        if facts.cards_source == CardsSource::FaceValue && !matches!(facts.sharing, Sharing::MigSingle { .. }) {
            let plain = input.capacity.iter().any(|c| c.node == node && c.resource == "nvidia_com_gpu")
                || input.requests.iter().any(|r| r.node == node && r.resource == "nvidia_com_gpu");
            if plain {
                anomalies.add(AnomalyKind::UnverifiedNode, node.to_string(), 1);
            }
        }
        if let Some(trusted) = facts.evidence.conflict {
            let devices = facts.cards.unwrap_or_default();
            anomalies.add(
                AnomalyKind::NodeEvidenceConflict,
                format!("{node}: DCGM {devices} devices, {trusted} cards by GFD or configuration"),
                1,
            );
        }
        if facts.cards_source == CardsSource::FaceValue && matches!(facts.sharing, Sharing::MigSingle { .. }) {
            anomalies.add(AnomalyKind::UnverifiedNode, node.to_string(), 1);
        }
    }
    let devices = DeviceIndex::new(&input.devices);
    let running: HashMap<&str, &RunningSeries> = input.running.iter().map(|r| (r.uid.as_str(), r)).collect();
    let pending: HashMap<&str, &RunningSeries> = input.pending.iter().map(|r| (r.uid.as_str(), r)).collect();
    // GPU pods by uid: a container's key and model, and the card-ms at which the pod was Pending (SPEC §10)
    let mut waiting: BTreeMap<&str, (&ContainerKey, String, f64, f64)> = BTreeMap::new();
    let hami_util: HashMap<&ContainerKey, Vec<&[Sample]>> = input.hami.iter().fold(HashMap::new(), |mut m, h| {
        m.entry(&h.workload).or_insert_with(Vec::new).push(h.samples.as_slice());
        m
    });

    // A pod's containers, by uid: HAMi is a property of the container (its requests together), not of one series.
    let mut containers: BTreeMap<(&str, &ContainerKey), Vec<&RequestSeries>> = BTreeMap::new();
    for r in &input.requests {
        containers.entry((r.uid.as_str(), &r.key)).or_default().push(r);
    }

    let mut rows: BTreeMap<(ContainerKey, String, String), UsageRow> = BTreeMap::new();
    // KSM gaps (kind, subject) → the pods met in them
    let mut gap_pods: BTreeMap<(AnomalyKind, String), BTreeSet<&str>> = BTreeMap::new();
    for ((uid, key), series) in &containers {
        let running = running.get(uid).copied();
        let plans = plan_container(key, series, &nodes, cfg, &mut anomalies);
        for plan in plans {
            let Some(plan) = plan.resolve(&nodes, &devices, cfg, &mut anomalies) else { continue };
            let hami = hami_util.get(key).map(Vec::as_slice).unwrap_or(&[]);
            let acc = walk(&plan, running, &devices, hami, &grid, &silent);
            if plan.kind != Kind::Unknown {
                let ms = pending_ms(&plan, pending.get(uid).copied(), &grid);
                let w = waiting.entry(uid).or_insert_with(|| (*key, plan.gpu_model.clone(), 0.0, 0.0));
                w.2 += ms;
                w.3 += plan.units.last().map_or(0.0, |s| s.v.max(0.0) * plan.fraction);
            }
            for gap in acc.gaps {
                gap_pods.entry(gap).or_default().insert(uid);
            }
            if plan.kind == Kind::Unknown {
                if acc.grid_points > 0 {
                    anomalies.add(
                        AnomalyKind::UnknownResource,
                        format!("{}/{}/{}: {}", key.namespace, key.pod, key.container, plan.resource),
                        acc.grid_points,
                    );
                }
                continue;
            }
            if acc.grid_points + acc.bridged_points == 0 {
                continue;
            }
            let row = rows
                .entry((ContainerKey::clone(key), plan.resource.to_string(), plan.gpu_model.clone()))
                .or_insert_with(|| UsageRow {
                    key: ContainerKey::clone(key),
                    resource: plan.resource.to_string(),
                    kind: plan.kind.as_str(),
                    gpu_model: plan.gpu_model.clone(),
                    mig_profile: plan.mig_profile.clone(),
                    node: plan.node.to_string(),
                    units: 0.0,
                    fraction: plan.fraction,
                    memory_share: plan.memory_share,
                    gpu_seconds: 0.0,
                    effective_gpu_seconds: 0.0,
                    unmetered_gpu_seconds: 0.0,
                    bridged_gpu_seconds: 0.0,
                    util_source: UtilSource::None,
                    peak_fb_used_mib: None,
                    label_team: None,
                });
            row.units = row.units.max(acc.max_units);
            row.gpu_seconds += acc.gpu_ms / 1000.0;
            row.effective_gpu_seconds += acc.effective_ms / 1000.0;
            row.unmetered_gpu_seconds += acc.unmetered_ms / 1000.0;
            row.bridged_gpu_seconds += acc.bridged_ms / 1000.0;
            row.util_source = row.util_source.merge(acc.source);
            row.peak_fb_used_mib = match (row.peak_fb_used_mib, acc.peak_fb) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
        }
    }

    for ((kind, subject), pods) in gap_pods {
        anomalies.add(kind, subject, pods.len() as u64);
    }

    let teams = namespace_teams(input);
    let rows: Vec<UsageRow> = rows
        .into_values()
        .map(|mut r| {
            r.label_team = teams.get(r.key.namespace.as_str()).cloned().flatten();
            r
        })
        .collect();
    let capacity = capacity_rows(input, &nodes, cfg, &grid, &mut anomalies);
    let hour_seconds = (grid.end - grid.start) as f64 / 1000.0;
    let capacity =
        count_held_cards_as_offered(capacity, &rows, hour_seconds, |n| nodes.model(n).to_string(), &mut anomalies);
    // a model nothing names (no DCGM, no GFD product, no configuration) on a node with cards or usage
    let unnamed: BTreeSet<&str> = capacity
        .iter()
        .map(|c| c.node.as_str())
        .chain(rows.iter().map(|r| r.node.as_str()))
        .filter(|n| nodes.get(n).is_some_and(|f| f.model_source == ModelSource::Unknown))
        .collect();
    for node in unnamed {
        anomalies.add(AnomalyKind::UnknownGpuModel, node.to_string(), 1);
    }
    let (serving, serving_anomalies) =
        super::meter_serving(&input.serving, (input.start_ms, input.end_ms), interval_ms);
    for a in serving_anomalies {
        anomalies.add(a.kind, a.subject, a.count);
    }
    let hour = (input.start_ms, input.end_ms);
    let queues = input.quota.queues();
    let pending = waiting
        .into_iter()
        .filter_map(|(uid, (key, gpu_model, ms, cards))| {
            let (p, r) = (pending.get(uid).copied(), running.get(uid).copied());
            let phases = hour_phases(
                p.map(|p| (p.samples.as_slice(), &p.edges)),
                r.map(|r| (r.samples.as_slice(), &r.edges)),
                hour,
            );
            let seen = phases.first_pending_ms.is_some() || phases.first_running_ms.is_some() || ms > 0.0;
            seen.then(|| PendingRow {
                namespace: key.namespace.clone(),
                pod: key.pod.clone(),
                uid: uid.to_string(),
                gpu_model,
                phases,
                cards,
                queue: queues.get(&(key.namespace.as_str(), key.pod.as_str())).map(|q| QuotaScope::clone(q)),
                pending_card_seconds: ms / 1000.0,
                label_team: teams.get(key.namespace.as_str()).cloned().flatten(),
            })
        })
        .collect();
    let cards_per_unit = |resource: &str| match classify_resource(resource) {
        ResourceKind::Whole => Some(1.0),
        ResourceKind::Mig { slices, .. } => Some(f64::from(slices) / 7.0),
        ResourceKind::TimeSlice => Some(1.0 / f64::from(cfg.default_timeslice_replicas.max(1))),
        _ => None,
    };
    let quota =
        meter_quota(&input.quota, &rows, hour, interval_ms, cards_per_unit, |ns| teams.get(ns).cloned().flatten());
    HourOutput {
        interval_ms: Some(interval_ms),
        rows,
        capacity,
        anomalies: anomalies.into_vec(),
        serving,
        pending,
        quota,
    }
}

/// The card-ms of a plan's request samples of the hour at which its pod was Pending (SPEC §10: ∫ q·f while
/// Pending, by sample like GPU-hours).
fn pending_ms(plan: &ResolvedPlan, pending: Option<&RunningSeries>, grid: &Grid) -> f64 {
    let Some(p) = pending else { return 0.0 };
    plan.units
        .iter()
        .filter(|s| grid.contains(s.t_ms) && s.v.is_finite() && s.v > 0.0)
        .filter(|s| p.edges.match_at(&p.samples, s.t_ms, grid.half).is_some_and(|v| v >= 0.5))
        .map(|s| s.v * plan.fraction * grid.interval_ms as f64)
        .sum()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Whole,
    Mig,
    TimeSlice,
    Mps,
    Hami,
    Unknown,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Whole => "whole",
            Kind::Mig => "mig",
            Kind::TimeSlice => "timeslice",
            Kind::Mps => "mps",
            Kind::Hami => "hami",
            Kind::Unknown => "unknown",
        }
    }
}

/// One metered resource of one container, before its fraction is known.
struct Plan<'a> {
    key: &'a ContainerKey,
    resource: &'a str,
    node: &'a str,
    kind: Kind,
    /// The series giving `q` at each grid point, and its samples just outside the window.
    units: &'a [Sample],
    edges: Edges,
    /// For MIG: the profile and its compute slices; for HAMi: the fraction and the memory share already known
    /// (the memory share `None` where the card's memory is unknown).
    mig: Option<(String, u32)>,
    hami_fraction: Option<f64>,
    hami_memory_share: Option<f64>,
}

/// A plan with its fraction, model and devices resolved.
struct ResolvedPlan<'a> {
    resource: &'a str,
    node: &'a str,
    kind: Kind,
    units: &'a [Sample],
    edges: Edges,
    fraction: f64,
    /// The share of a card's memory one unit is promised (SPEC §7); `None` where unknown.
    memory_share: Option<f64>,
    gpu_model: String,
    mig_profile: Option<String>,
    devices: Vec<&'a Device<'a>>,
}

fn last_value(s: &[Sample]) -> Option<f64> {
    s.last().map(|s| s.v)
}

fn plan_container<'a>(
    key: &'a ContainerKey,
    series: &[&'a RequestSeries],
    nodes: &Nodes<'a>,
    cfg: &MeterConfig,
    anomalies: &mut Anomalies,
) -> Vec<Plan<'a>> {
    let find = |kind: ResourceKind| series.iter().find(|s| classify_resource(&s.resource) == kind).copied();
    let cores = find(ResourceKind::HamiCores);
    let mem = find(ResourceKind::HamiMem);
    let mem_pct = find(ResourceKind::HamiMemPercent);
    let mut plans = Vec::new();
    if let Some(anchor) = cores.or(mem).or(mem_pct) {
        let whole = find(ResourceKind::Whole);
        let model = Some(nodes.model(anchor.node.as_str())).filter(|m| *m != "unknown");
        // HAMi reads 0 (and nothing) as "no limit": a request of 0 asks for no share, the default applies; a
        // fraction of 0 would bill a held card as nothing
        let asked =
            |s: Option<&&RequestSeries>| s.and_then(|s| last_value(&s.samples)).filter(|v| v.is_finite() && *v > 0.0);
        let cores_share = asked(cores.as_ref()).map(|c| c / 100.0);
        let (mib, pct) = (asked(mem.as_ref()), asked(mem_pct.as_ref()));
        let memory_share = hami_memory_share(mib, pct, model.and_then(card_memory_mib));
        // the memory policy counts a share only where the container asks for memory
        let mem_share = memory_share.filter(|_| mib.is_some() || pct.is_some());
        let fraction = match cfg.hami_policy {
            HamiPolicy::Cores => cores_share.or(mem_share),
            HamiPolicy::Memory => mem_share.or(cores_share),
            HamiPolicy::Max => match (cores_share, mem_share) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
        };
        if cfg.hami_policy != HamiPolicy::Cores && mem_share.is_none() {
            anomalies.add(AnomalyKind::HamiMemoryUnknown, format!("{}/{}", key.namespace, key.pod), 1);
        }
        plans.push(Plan {
            key,
            resource: "nvidia_com_gpu",
            node: anchor.node.as_str(),
            kind: Kind::Hami,
            // q is the number of vGPUs; a container asking only for cores holds one.
            units: whole.map(|w| w.samples.as_slice()).unwrap_or(&anchor.samples),
            edges: whole.map_or(anchor.edges, |w| w.edges),
            mig: None,
            hami_fraction: Some(fraction.unwrap_or(1.0).clamp(0.0, 1.0)),
            hami_memory_share: memory_share,
        });
    }
    let hami = !plans.is_empty();
    for s in series {
        let kind = match classify_resource(&s.resource) {
            ResourceKind::Whole if hami => continue,
            ResourceKind::Whole => (Kind::Whole, None),
            ResourceKind::Mig { profile, slices } => (Kind::Mig, Some((profile, slices))),
            ResourceKind::TimeSlice => (Kind::TimeSlice, None),
            ResourceKind::UnknownGpu => (Kind::Unknown, None),
            ResourceKind::HamiCores | ResourceKind::HamiMem | ResourceKind::HamiMemPercent | ResourceKind::NotGpu => {
                continue;
            }
        };
        plans.push(Plan {
            key,
            resource: s.resource.as_str(),
            node: s.node.as_str(),
            kind: kind.0,
            units: &s.samples,
            edges: s.edges,
            mig: kind.1,
            hami_fraction: None,
            hami_memory_share: None,
        });
    }
    plans
}

impl<'a> Plan<'a> {
    fn resolve(
        self,
        nodes: &Nodes<'a>,
        devices: &'a DeviceIndex<'a>,
        cfg: &MeterConfig,
        anomalies: &mut Anomalies,
    ) -> Option<ResolvedPlan<'a>> {
        let facts = nodes.get(self.node);
        let mut kind = self.kind;
        let mut mig = self.mig.clone();
        // what the node advertises decides what a plain `nvidia_com_gpu` is, not the resource's name
        if kind == Kind::Whole {
            match facts.map(|f| &f.sharing) {
                Some(Sharing::Replicas { mps, .. }) => kind = if *mps { Kind::Mps } else { Kind::TimeSlice },
                Some(Sharing::MigSingle { profile, g }) => {
                    kind = Kind::Mig;
                    mig = Some((profile.clone(), *g));
                }
                _ => {}
            }
        }
        if self.kind == Kind::TimeSlice && facts.is_some_and(|f| f.shared_mps) {
            kind = Kind::Mps;
        }
        let own = devices.by_workload.get(self.key).map(Vec::as_slice).unwrap_or(&[]);
        let mig_profile = mig.as_ref().map(|(p, _)| p.clone());
        let mut devices: Vec<&Device> = match kind {
            Kind::Whole | Kind::TimeSlice | Kind::Mps => own.iter().filter(|d| d.mig_profile.is_none()).collect(),
            Kind::Mig => own.iter().filter(|d| d.mig_profile == mig_profile.as_deref()).collect(),
            Kind::Hami | Kind::Unknown => Vec::new(),
        };
        // a pod's own per-process series of a card wins over the copies of the card's value
        let per_process: HashSet<&str> = devices.iter().filter(|d| d.per_process).map(|d| d.uuid).collect();
        devices.retain(|d| d.per_process || !per_process.contains(d.uuid));
        let gpu_model = devices.iter().find_map(|d| d.model).unwrap_or_else(|| nodes.model(self.node)).to_string();
        let fraction = match kind {
            Kind::Whole | Kind::Unknown => 1.0,
            Kind::Hami => self.hami_fraction.unwrap_or(1.0),
            Kind::Mig => {
                let (_, g) = mig.as_ref()?;
                let slices = mig_compute_slices(&gpu_model).unwrap_or_else(|| {
                    anomalies.add(AnomalyKind::UnknownMigModel, format!("{}: {gpu_model}", self.node), 1);
                    7
                });
                f64::from(*g) / f64::from(slices)
            }
            Kind::TimeSlice | Kind::Mps => {
                let replicas = match (self.kind, facts.map(|f| &f.sharing)) {
                    (Kind::Whole, Some(Sharing::Replicas { replicas, .. })) => Some(*replicas),
                    _ => facts.and_then(|f| f.shared_replicas),
                };
                1.0 / replicas.filter(|r| *r >= 1.0).unwrap_or_else(|| {
                    anomalies.add(AnomalyKind::DefaultReplicas, self.node.to_string(), 1);
                    f64::from(cfg.default_timeslice_replicas.max(1))
                })
            }
        };
        let memory_share = match kind {
            Kind::Hami => self.hami_memory_share,
            _ => unit_memory_share(kind.as_str(), fraction, mig_profile.as_deref(), &gpu_model),
        };
        Some(ResolvedPlan {
            resource: self.resource,
            node: self.node,
            kind,
            units: self.units,
            edges: self.edges,
            fraction,
            memory_share,
            gpu_model,
            mig_profile,
            devices,
        })
    }
}

/// One device (or MIG instance, or time-slicing copy, or per-process series) held by one workload, with its
/// chosen source.
struct Device<'a> {
    uuid: &'a str,
    model: Option<&'a str>,
    mig_profile: Option<&'a str>,
    /// A `--kubernetes-virtual-gpus` copy of the whole card's value.
    copy: bool,
    /// dcgm-exporter ≥ 4.8.2's per-process series of this workload alone.
    per_process: bool,
    source: UtilMetric,
    /// The series of `source` (several for a per-process device: one per replica, or per restart of the pod
    /// name within the hour; the first matching a grid point counts, once).
    util: Vec<&'a [Sample]>,
    fb: Vec<&'a [Sample]>,
}

/// The value of the first of `series` with a sample matching `t`.
fn first_match(series: &[&[Sample]], t: i64, half: i64) -> Option<f64> {
    series.iter().find_map(|s| match_at(s, t, half))
}

struct DeviceIndex<'a> {
    by_workload: HashMap<&'a ContainerKey, Vec<Device<'a>>>,
    /// Per physical card, the utilization samples of every copy on it: `n(t)` counts them. Every copy is one
    /// replica, so splitting the card's value by copies splits it in proportion to the pods' fractions.
    holders: HashMap<&'a str, Vec<&'a [Sample]>>,
}

impl<'a> DeviceIndex<'a> {
    fn new(series: &'a [DeviceSeries]) -> Self {
        // a per-process series is the pod's own, whichever replica (`vgpu`) it is labelled with: one per card
        type Id<'a> = (&'a ContainerKey, &'a str, Option<&'a str>, Option<&'a str>, bool);
        let mut grouped: BTreeMap<Id<'a>, Vec<&'a DeviceSeries>> = BTreeMap::new();
        for s in series {
            if let Some(w) = &s.workload {
                let vgpu = if s.per_process { None } else { s.vgpu.as_deref() };
                grouped.entry((w, &s.uuid, s.mig_instance.as_deref(), vgpu, s.per_process)).or_default().push(s);
            }
        }
        let mut by_workload: HashMap<&ContainerKey, Vec<Device>> = HashMap::new();
        let mut holders: HashMap<&str, Vec<&[Sample]>> = HashMap::new();
        for ((workload, uuid, _, vgpu, per_process), metrics) in grouped {
            let best = metrics
                .iter()
                .filter(|s| s.metric != UtilMetric::FbUsed && !s.samples.is_empty())
                .min_by_key(|s| s.metric);
            let Some(best) = best else { continue };
            let of = |m: UtilMetric| -> Vec<&[Sample]> {
                metrics.iter().filter(|s| s.metric == m).map(|s| s.samples.as_slice()).collect()
            };
            if best.mig_profile.is_none() && !per_process {
                holders.entry(uuid).or_default().push(&best.samples);
            }
            by_workload.entry(workload).or_default().push(Device {
                uuid,
                model: metrics.iter().find_map(|s| s.model.as_deref()),
                mig_profile: best.mig_profile.as_deref(),
                copy: vgpu.is_some(),
                per_process,
                source: best.metric,
                util: if per_process { of(best.metric) } else { vec![best.samples.as_slice()] },
                fb: of(UtilMetric::FbUsed),
            });
        }
        Self { by_workload, holders }
    }

    /// How many copies on card `uuid` have a sample matching `t`.
    fn holders_at(&self, uuid: &str, t: i64, half: i64) -> usize {
        self.holders.get(uuid).map_or(0, |hs| hs.iter().filter(|s| match_at(s, t, half).is_some()).count())
    }
}

#[derive(Default)]
struct Walk {
    /// Running samples of the window counted.
    grid_points: u64,
    /// Missing grid points counted through a bridged KSM gap.
    bridged_points: u64,
    max_units: f64,
    gpu_ms: f64,
    effective_ms: f64,
    unmetered_ms: f64,
    bridged_ms: f64,
    source: UtilSource,
    peak_fb: Option<f64>,
    /// The KSM gaps of the window this plan was Running across: bridged, or not billed.
    gaps: Vec<(AnomalyKind, String)>,
}

fn source_of(d: &Device) -> UtilSource {
    if d.per_process {
        return UtilSource::DcgmPod;
    }
    match d.source {
        UtilMetric::SmActive => UtilSource::SmActive,
        UtilMetric::GrEngineActive => UtilSource::GrEngineActive,
        UtilMetric::GpuUtil | UtilMetric::FbUsed => UtilSource::GpuUtil,
    }
}

/// Where the whole of kube-state-metrics fell silent at an edge of what an hour reads, its far side out of sight
/// (beyond the KSM margin): an outage longer than any bridge, reported for the pods Running on the side seen.
pub(super) struct Silence {
    /// No KSM sample before this one, the first of the hour, though grid points of the hour precede it.
    since: Option<i64>,
    /// No KSM sample after this one, the last of the hour, though grid points of the hour follow it.
    until: Option<i64>,
}

impl Silence {
    pub(super) fn of(input: &HourInput, grid: &Grid) -> Self {
        let mut first = i64::MAX;
        let mut last = i64::MIN;
        let mut see = |samples: &[Sample], edges: Option<&Edges>| {
            let ends = [samples.first(), samples.last()];
            let edges = edges.map_or([None, None], |e| [e.before.as_ref(), e.after.as_ref()]);
            for s in ends.into_iter().chain(edges).flatten() {
                first = first.min(s.t_ms);
                last = last.max(s.t_ms);
            }
        };
        input.requests.iter().for_each(|s| see(&s.samples, Some(&s.edges)));
        input.running.iter().for_each(|s| see(&s.samples, Some(&s.edges)));
        input.capacity.iter().chain(&input.allocatable).for_each(|s| see(&s.samples, Some(&s.edges)));
        input.unschedulable.iter().for_each(|s| see(&s.samples, Some(&s.edges)));
        input.namespaces.iter().for_each(|s| see(&s.samples, None));
        input.node_labels.iter().for_each(|s| see(&s.samples, None));
        if first > last || !grid.gaps {
            return Silence { since: None, until: None };
        }
        Silence {
            since: (first - grid.interval_ms >= grid.start).then_some(first),
            until: (last + grid.interval_ms < grid.end).then_some(last),
        }
    }
}

/// The grid walk: every KSM sample of the plan's units at which the pod is Running counts `q·f·Δ`, and so does
/// every grid point missing in a KSM gap the pod was Running across, when the gap is short enough to bridge. A
/// container's own HAMi series win over any DCGM device of it (HAMi's DCGM carries no workload labels).
fn walk(
    plan: &ResolvedPlan,
    running: Option<&RunningSeries>,
    devices: &DeviceIndex,
    hami: &[&[Sample]],
    grid: &Grid,
    silent: &Silence,
) -> Walk {
    let mut w = Walk::default();
    let running_at =
        |t: i64| running.and_then(|r| r.edges.match_at(&r.samples, t, grid.half)).is_some_and(|v| v >= 0.5);
    let held = |s: &Sample| s.v.is_finite() && s.v > 0.0 && running_at(s.t_ms);
    // an unknown resource is reported by its Running samples, never bridged
    let metered = plan.kind != Kind::Unknown && grid.gaps;
    let mut prev: Option<Sample> = None;
    for s in plan.edges.with(plan.units) {
        if let Some(a) = prev.replace(*s)
            && metered
            && let Some(gap) = Gap::between(a, *s, grid.interval_ms)
        {
            w.gap(plan, &gap, held(&a) && held(s), devices, hami, grid);
        }
        if !(grid.contains(s.t_ms) && s.v.is_finite() && s.v > 0.0 && running_at(s.t_ms)) {
            continue;
        }
        w.grid_points += 1;
        w.max_units = w.max_units.max(s.v);
        w.point(plan, s.t_ms, s.v * plan.fraction, grid.interval_ms as f64, devices, hami, grid);
    }
    if metered {
        if let Some(first) = silent.since
            && plan.edges.before.is_none()
            && plan.units.first().is_some_and(|s| s.t_ms == first && held(s))
        {
            w.gaps.push((AnomalyKind::KsmGap, format!("..{}", stamp(first))));
        }
        if let Some(last) = silent.until
            && plan.edges.after.is_none()
            && plan.units.last().is_some_and(|s| s.t_ms == last && held(s))
        {
            w.gaps.push((AnomalyKind::KsmGap, format!("{}..", stamp(last))));
        }
    }
    w
}

impl Walk {
    /// A KSM gap between two samples of the plan's units: its missing grid points inside the window are counted
    /// when the pod held cards on both sides (`across`) and the gap is at most the bridge span, at the request
    /// before the gap (the smaller one, should the request after it differ). A pod that stopped Running, or
    /// started, inside the gap is neither counted nor reported: when is unknown.
    fn gap(
        &mut self,
        plan: &ResolvedPlan,
        gap: &Gap,
        across: bool,
        devices: &DeviceIndex,
        hami: &[&[Sample]],
        grid: &Grid,
    ) {
        if !across || !gap.points().any(|t| grid.contains(t)) {
            return;
        }
        if gap.missing_ms() > grid.bridge_ms {
            self.gaps.push((AnomalyKind::KsmGap, gap.subject()));
            return;
        }
        let held = gap.a.v.min(gap.b.v) * plan.fraction;
        let dt = gap.weight_ms();
        for t in gap.points().filter(|t| grid.contains(*t)) {
            self.bridged_points += 1;
            self.bridged_ms += held * dt;
            self.point(plan, t, held, dt, devices, hami, grid);
        }
        self.gaps.push((AnomalyKind::KsmGapBridged, gap.subject()));
    }

    /// One counted KSM sample (or bridged grid point) `t` holding `held` cards for `[t, t + dt)`: its
    /// utilization from the samples whose own interval meets that span (the intersection rule), the rest
    /// unmetered.
    #[allow(clippy::too_many_arguments)]
    fn point(
        &mut self,
        plan: &ResolvedPlan,
        t: i64,
        held: f64,
        dt: f64,
        devices: &DeviceIndex,
        hami: &[&[Sample]],
        grid: &Grid,
    ) {
        let own_hami = plan.kind == Kind::Hami || !hami.is_empty();
        self.gpu_ms += held * dt;
        let span = (t as f64, t as f64 + dt);
        if own_hami {
            let percent = |_: i64, v: f64| (v / 100.0).clamp(0.0, 1.0);
            let sources: Vec<Source> = hami
                .iter()
                .map(|s| Source { series: vec![*s], interval_ms: grid.hami_interval_ms, share: &percent })
                .collect();
            let c = integrate(span.0, span.1, held, &sources);
            if c.covering != 0 {
                self.source = self.source.merge(UtilSource::Hami);
            }
            self.effective_ms += c.effective_ms;
            self.unmetered_ms += c.unmetered_ms;
            return;
        }
        let interval = grid.dcgm_interval_ms;
        // each copy carries the whole card's value: split over the copies on the card at that sample
        let shares: Vec<Box<dyn Fn(i64, f64) -> f64 + '_>> = plan
            .devices
            .iter()
            .map(|d| -> Box<dyn Fn(i64, f64) -> f64 + '_> {
                let (metric, uuid, fraction) = (d.source, d.uuid, plan.fraction);
                if d.mig_profile.is_some() {
                    Box::new(move |_, v| fraction * metric.to_ratio(v))
                } else if d.per_process {
                    Box::new(move |_, v| metric.to_ratio(v))
                } else {
                    Box::new(move |u, v| metric.to_ratio(v) / devices.holders_at(uuid, u, interval / 2).max(1) as f64)
                }
            })
            .collect();
        let sources: Vec<Source> = plan
            .devices
            .iter()
            .zip(&shares)
            .map(|(d, share)| Source { series: d.util.clone(), interval_ms: interval, share: share.as_ref() })
            .collect();
        let c = integrate(span.0, span.1, held, &sources);
        self.effective_ms += c.effective_ms;
        self.unmetered_ms += c.unmetered_ms;
        let mut fb: Option<f64> = None;
        for (i, d) in plan.devices.iter().enumerate() {
            if i >= 64 || c.covering & (1 << i) == 0 {
                continue;
            }
            self.source = self.source.merge(source_of(d));
            if let Some(m) = first_match(&d.fb, t, grid.half) {
                // a time-slicing copy carries the whole card's memory: copies overlap, they do not add up
                fb = Some(match fb {
                    Some(acc) if d.copy => acc.max(m),
                    Some(acc) => acc + m,
                    None => m,
                });
            }
        }
        if let Some(m) = fb {
            self.peak_fb = Some(self.peak_fb.map_or(m, |p: f64| p.max(m)));
        }
    }
}

/// The team label of each namespace, from its series with the latest sample.
fn namespace_teams(input: &HourInput) -> HashMap<&str, Option<String>> {
    let mut latest: HashMap<&str, (i64, Option<String>)> = HashMap::new();
    for ns in &input.namespaces {
        let Some(last) = ns.samples.last() else { continue };
        let e = latest.entry(ns.namespace.as_str()).or_insert((i64::MIN, None));
        if last.t_ms >= e.0 {
            *e = (last.t_ms, ns.team.clone().filter(|t| !t.is_empty()));
        }
    }
    latest.into_iter().map(|(k, (_, t))| (k, t)).collect()
}
