//! The simulation's event model: the scrape grid, pods with their lifecycle times, the devices
//! ("emitters") that dcgm-exporter reports, the lanes pods occupy on them, and per-emitter
//! segments of constant holders on the grid.
//!
//! Both the OpenMetrics writer and the ground truth read only this model, so they see the same
//! events; values are pure functions of (pod, device, sample time) in `values`.

use super::clock::HOUR_MS;
use super::layout::{MigProfile, NodeType};
use super::workload::{Class, Pattern};

/// The KSM scrape grid `g_k = start + k·step`, `k < len` (all `g_k < end`).
#[derive(Clone, Copy, Debug)]
pub struct Grid {
    pub start_ms: i64,
    pub end_ms: i64,
    pub step_ms: i64,
    pub len: u64,
}

impl Grid {
    /// Grid over `[start, end)` with the given step (all in ms; `end > start`, `step > 0`).
    pub fn new(start_ms: i64, end_ms: i64, step_ms: i64) -> Self {
        let span = end_ms - start_ms;
        let len = (span + step_ms - 1) / step_ms;
        Grid { start_ms, end_ms, step_ms, len: len as u64 }
    }

    /// The grid point `g_k`.
    pub fn at(&self, k: u64) -> i64 {
        self.start_ms + k as i64 * self.step_ms
    }

    /// Number of indices `k` (clamped to `len`) whose sample time `g_k + off` is before `t`.
    pub fn count_before(&self, t: i64, off: i64) -> u64 {
        let x = t - off - self.start_ms;
        if x <= 0 {
            0
        } else {
            let n = (x + self.step_ms - 1) / self.step_ms;
            (n as u64).min(self.len)
        }
    }

    /// Index range of the samples `g_k + off` that fall in `[a, b)`.
    pub fn range(&self, a: i64, b: i64, off: i64) -> (u64, u64) {
        let ka = self.count_before(a, off);
        let kb = self.count_before(b, off);
        (ka, kb.max(ka))
    }

    /// Hour index (from `start`) of grid point `k`.
    pub fn hour_of(&self, k: u64) -> usize {
        ((self.at(k) - self.start_ms) / HOUR_MS) as usize
    }
}

/// The phases kube-state-metrics writes a series of for every pod (`kube_pod_status_phase{phase}`).
pub const PHASES: [&str; 5] = ["Pending", "Running", "Succeeded", "Failed", "Unknown"];

/// How a pod's GPU request is metered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Whole,
    Mig(MigProfile),
    TimeSlice,
    /// MPS replicas (capped at their share of the card).
    Mps,
    Hami,
    /// A GPU-like resource cardhour does not know (`example_com_gpu`): reported, never metered.
    Unknown,
}

impl Kind {
    /// The `kind` column of the truth (`whole`, `mig`, `timeslice`, `hami`).
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Whole => "whole",
            Kind::Mig(_) => "mig",
            Kind::TimeSlice => "timeslice",
            Kind::Mps => "mps",
            Kind::Hami => "hami",
            Kind::Unknown => "unknown",
        }
    }
}

/// One pod object (one `uid`). A restart is a new `Pod` with the same `name_id`.
#[derive(Clone, Debug)]
pub struct Pod {
    pub ns: usize,
    /// Index into `Cluster::names`; restarts share it (same name, new uid).
    pub name_id: usize,
    pub uid: String,
    pub container: &'static str,
    pub node: usize,
    /// Created (KSM series appear; phase Pending).
    pub t0: i64,
    /// Running from here.
    pub t1: i64,
    /// Running until here (exclusive); then Succeeded or Failed.
    pub t2: i64,
    /// Deleted (KSM series end).
    pub t3: i64,
    pub failed: bool,
    pub kind: Kind,
    /// The resource the truth reports the pod under.
    pub resource: &'static str,
    /// Units requested (`q`); for HAMi the requested `nvidia_com_gpu`.
    pub q: u32,
    /// Card fraction of one unit (`f`).
    pub f: f64,
    /// HAMi `nvidia_com_gpucores` (0 elsewhere).
    pub cores: u32,
    /// HAMi `nvidia_com_gpumem` in MiB (0 elsewhere).
    pub gpumem_mib: u32,
    /// The lanes it holds while Running; index = device number within the pod.
    pub devices: Vec<LaneRef>,
    pub class: Class,
    pub pattern: Pattern,
    /// Multiplies the pattern into the pod's own demand (1 for whole cards and MIG).
    pub scale: f64,
    /// Per-pod seed of its noise and bursts.
    pub seed: u64,
    /// Mean framebuffer used per device (MiB) and its cap.
    pub fb_base_mib: f64,
    pub fb_cap_mib: f64,
    pub squatter: bool,
}

impl Pod {
    /// Whether the pod's container is Running at time `t`.
    pub fn running_at(&self, t: i64) -> bool {
        self.t1 <= t && t < self.t2
    }
}

/// A lane on an emitter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneRef {
    pub emitter: usize,
    pub lane: u8,
}

/// A period during which a pod holds a lane (its Running period).
#[derive(Clone, Copy, Debug)]
pub struct Hold {
    pub pod: usize,
    pub dev: u8,
    pub t1: i64,
    pub t2: i64,
}

/// One unit slot of an emitter: the whole device, a MIG instance, a time-slicing replica or a
/// HAMi core budget. Holds on a lane never overlap.
#[derive(Clone, Debug, Default)]
pub struct Lane {
    pub free_at: i64,
    /// HAMi core budget of the lane (0 elsewhere).
    pub budget: u32,
    pub holds: Vec<Hold>,
}

/// What an emitter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmitterKind {
    Whole,
    MigInstance { profile: MigProfile, gi_id: u32 },
    TimeSlice,
    Hami,
}

/// One device identity dcgm-exporter reports (a card, or a MIG instance of a card).
#[derive(Clone, Debug)]
pub struct Emitter {
    pub node: usize,
    /// The `gpu` label (physical card index).
    pub gpu: u32,
    pub uuid: String,
    pub kind: EmitterKind,
    pub lanes: Vec<Lane>,
    /// Segments of constant holders covering `[0, grid.len)`, in sample-index space.
    pub segs: Vec<Seg>,
}

/// A lane holder over a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    pub lane: u8,
    pub pod: usize,
    pub dev: u8,
}

/// Sample indices `[ka, kb)` over which an emitter's holders do not change. Holder of a sample
/// `k` means the pod is Running at the sample time `g_k + node offset`.
#[derive(Clone, Debug)]
pub struct Seg {
    pub ka: u64,
    pub kb: u64,
    pub holders: Vec<Holder>,
}

impl Emitter {
    /// The segment containing sample index `k` (`k < grid.len`).
    pub fn seg_at(&self, k: u64) -> &Seg {
        let i = self.segs.partition_point(|s| s.kb <= k);
        &self.segs[i]
    }

    /// Compute `segs` from the lanes' holds for a node whose exporter samples at `g_k + off`.
    pub fn build_segs(&mut self, grid: &Grid, off: i64) {
        let ranges: Vec<Vec<(u64, u64, Holder)>> = self
            .lanes
            .iter()
            .enumerate()
            .map(|(li, lane)| {
                lane.holds
                    .iter()
                    .filter_map(|h| {
                        let (ka, kb) = grid.range(h.t1, h.t2, off);
                        let holder = Holder { lane: li as u8, pod: h.pod, dev: h.dev };
                        (ka < kb).then_some((ka, kb, holder))
                    })
                    .collect()
            })
            .collect();
        let mut bounds = vec![0, grid.len];
        for r in ranges.iter().flatten() {
            bounds.push(r.0);
            bounds.push(r.1);
        }
        bounds.sort_unstable();
        bounds.dedup();
        let mut cursors = vec![0usize; ranges.len()];
        self.segs.clear();
        for w in bounds.windows(2) {
            let (a, b) = (w[0], w[1]);
            let mut holders = Vec::new();
            for (li, lane_ranges) in ranges.iter().enumerate() {
                let c = &mut cursors[li];
                while *c < lane_ranges.len() && lane_ranges[*c].1 <= a {
                    *c += 1;
                }
                if let Some(&(ka, _, h)) = lane_ranges.get(*c)
                    && ka <= a
                {
                    holders.push(h);
                }
            }
            self.segs.push(Seg { ka: a, kb: b, holders });
        }
    }
}

/// A node.
#[derive(Clone, Debug)]
pub struct Node {
    pub name: String,
    pub ty: NodeType,
    /// Exporter sample offset after each grid point (ms, < step/2).
    pub offset_ms: i64,
    pub emitters: std::ops::Range<usize>,
    /// Exporter scrape gaps as sample-index ranges (sorted, disjoint).
    pub gaps_k: Vec<(u64, u64)>,
    /// The same gaps as sample-time ranges, for the truth report.
    pub gaps_t: Vec<(i64, i64)>,
    /// The emitter whose SM_ACTIVE carries NaN at `nan_ks` (sorted).
    pub nan_emitter: Option<usize>,
    pub nan_ks: Vec<u64>,
}

impl Node {
    /// Whether the node's exporter is scraped at sample index `k`.
    pub fn up(&self, k: u64) -> bool {
        self.ty.has_dcgm() && !self.gaps_k.iter().any(|&(a, b)| a <= k && k < b)
    }

    /// Sub-ranges of `[ka, kb)` outside the scrape gaps.
    pub fn up_ranges(&self, ka: u64, kb: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut k = ka;
        for &(ga, gb) in &self.gaps_k {
            if gb <= k {
                continue;
            }
            if ga >= kb {
                break;
            }
            if ga > k {
                out.push((k, ga));
            }
            k = k.max(gb);
        }
        if k < kb {
            out.push((k, kb));
        }
        out
    }

    /// Whether SM_ACTIVE of emitter `e` is NaN at sample index `k`.
    pub fn is_nan(&self, e: usize, k: u64) -> bool {
        self.nan_emitter == Some(e) && self.nan_ks.binary_search(&k).is_ok()
    }
}

/// The whole simulated cluster.
#[derive(Clone, Debug)]
pub struct Cluster {
    pub nodes: Vec<Node>,
    pub emitters: Vec<Emitter>,
    pub pods: Vec<Pod>,
    /// Pod names by `name_id`.
    pub names: Vec<String>,
    /// kube-state-metrics outages (`--ksm-gaps`): every KSM series misses the sample indices `[ka, kb)` (sorted,
    /// disjoint, never the first or the last grid point). DCGM and HAMi are scraped on.
    pub ksm_gaps: Vec<(u64, u64)>,
    /// The utilization scrape grid (DCGM, HAMi's monitor): sample `j` of a node is at `util.at(j)` + its offset.
    /// Exporter sample indices (`Seg`, `Node::gaps_k`, `Node::nan_ks`) are indices of this grid.
    pub util: Grid,
}

impl Cluster {
    /// Whether kube-state-metrics is scraped at grid index `k`.
    pub fn ksm_up(&self, k: u64) -> bool {
        self.ksm_gap_at(k).is_none()
    }

    /// The KSM outage grid index `k` falls in.
    pub fn ksm_gap_at(&self, k: u64) -> Option<(u64, u64)> {
        let i = self.ksm_gaps.partition_point(|g| g.1 <= k);
        self.ksm_gaps.get(i).copied().filter(|g| g.0 <= k)
    }

    /// The name of a pod.
    pub fn pod_name(&self, p: usize) -> &str {
        &self.names[self.pods[p].name_id]
    }
}
