//! Sample values: which metrics a device publishes, how each metric derives from a base
//! utilization, and the device values at a sample time.
//!
//! This is the single place both the OpenMetrics writer and the truth take values from, so the
//! truth uses exactly the numbers that were written.

use super::layout::NodeType;
use super::model::{Cluster, EmitterKind, Holder, Pod};
use super::workload::{base_util, hash3, q4, unit};

/// A DCGM metric family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    SmActive,
    GrEngineActive,
    GpuUtil,
    FbUsed,
}

/// DCGM families in the order they are written.
pub const DCGM_METRICS: [Metric; 4] = [Metric::SmActive, Metric::GrEngineActive, Metric::GpuUtil, Metric::FbUsed];

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::SmActive => "DCGM_FI_PROF_SM_ACTIVE",
            Metric::GrEngineActive => "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            Metric::GpuUtil => "DCGM_FI_DEV_GPU_UTIL",
            Metric::FbUsed => "DCGM_FI_DEV_FB_USED",
        }
    }

    /// The written value for base utilization `u` (not for FB_USED).
    pub fn value_for(self, u: f64) -> f64 {
        match self {
            Metric::SmActive => u,
            // to the 5 decimals it has, as an exporter prints it: the float noise of `1.1 · u` in the 17th digit is
            // not a value every backend keeps (VictoriaMetrics stores 12 to 14 significant digits)
            Metric::GrEngineActive => ((1.1 * u + 0.02).min(1.0) * 1e5).round() / 1e5,
            Metric::GpuUtil => (100.0 * (1.3 * u + 0.05)).min(100.0).round(),
            Metric::FbUsed => unreachable!("FB_USED is not a utilization"),
        }
    }

    /// A written utilization value as a ratio in `[0, 1]` (GPU_UTIL is a percent).
    pub fn as_ratio(self, v: f64) -> f64 {
        let r = if self == Metric::GpuUtil { v / 100.0 } else { v };
        r.clamp(0.0, 1.0)
    }
}

/// The DCGM families an emitter publishes (empty on the node without DCGM).
pub fn published(ty: NodeType, kind: &EmitterKind) -> &'static [Metric] {
    use Metric::*;
    match (ty, kind) {
        _ if !ty.has_dcgm() => &[],
        (NodeType::WholeA100, _) => &[SmActive, GrEngineActive, GpuUtil, FbUsed],
        (NodeType::WholeH100, _) => &[GrEngineActive, GpuUtil, FbUsed],
        (NodeType::WholeL40S, _) => &[GpuUtil, FbUsed],
        (NodeType::MigA100, EmitterKind::MigInstance { .. }) => &[SmActive, GrEngineActive, FbUsed],
        (NodeType::MigA100, _) => &[SmActive, GrEngineActive, GpuUtil, FbUsed],
        (NodeType::MigMixedA30, EmitterKind::MigInstance { .. }) => &[GrEngineActive, FbUsed],
        (NodeType::MigMixedA30, _) => &[GrEngineActive, GpuUtil, FbUsed],
        (NodeType::MigSingleA100 | NodeType::MigSingleDcgmA100, _) => &[SmActive, GrEngineActive, FbUsed],
        (NodeType::TsPodSeriesA100 | NodeType::TsRenamedPodL40S, _) => &[GrEngineActive, GpuUtil, FbUsed],
        _ => &[GrEngineActive, FbUsed],
    }
}

/// The best utilization metric an emitter publishes (SM_ACTIVE → GR_ENGINE_ACTIVE → GPU_UTIL).
pub fn best_metric(ty: NodeType, kind: &EmitterKind) -> Option<Metric> {
    published(ty, kind).iter().copied().find(|m| *m != Metric::FbUsed)
}

/// A pod's own demand on device `dev` at `t`: its base utilization times its scale, as a
/// fraction of the unit for whole cards and MIG, of the physical card for time-slicing and HAMi.
pub fn demand(pod: &Pod, dev: u8, t: i64) -> f64 {
    let b = base_util(&pod.pattern, pod.seed, dev, pod.t1, t);
    q4((pod.scale * b).min(1.0))
}

/// A pod's framebuffer use (MiB, integer) on device `dev` at `t`; it drifts once a minute.
pub fn pod_fb(pod: &Pod, dev: u8, t: i64) -> f64 {
    let n = (unit(hash3(pod.seed ^ 0xFB, dev as u64, (t / 60_000) as u64)) - 0.5) * 512.0;
    (pod.fb_base_mib + n).round().clamp(0.0, pod.fb_cap_mib)
}

/// Utilization value of `metric` on an exclusively held device (whole card, MIG instance).
pub fn exclusive_value(c: &Cluster, h: &Holder, t: i64, metric: Metric) -> f64 {
    let pod = &c.pods[h.pod];
    match metric {
        Metric::FbUsed => pod_fb(pod, h.dev, t),
        m => m.value_for(demand(pod, h.dev, t)),
    }
}

/// Base utilization of a shared card (time-slicing, HAMi): the sum of the sharing pods' own
/// demands (each pod once, even with several replicas on the card), capped at 1.
pub fn shared_util(c: &Cluster, holders: &[Holder], t: i64) -> f64 {
    let mut sum = 0.0;
    for (i, h) in holders.iter().enumerate() {
        if holders[..i].iter().any(|o| o.pod == h.pod) {
            continue;
        }
        sum += demand(&c.pods[h.pod], h.dev, t);
    }
    q4(sum.min(1.0))
}

/// Framebuffer of a shared card: the sharing pods' use, capped at the card's memory.
pub fn shared_fb(c: &Cluster, holders: &[Holder], t: i64, card_mem_mib: u32) -> f64 {
    let mut sum = 0.0;
    for (i, h) in holders.iter().enumerate() {
        if holders[..i].iter().any(|o| o.pod == h.pod) {
            continue;
        }
        sum += pod_fb(&c.pods[h.pod], h.dev, t);
    }
    sum.min(card_mem_mib as f64)
}

/// Value of `metric` on a shared card with the given holders (0 when idle).
pub fn shared_value(c: &Cluster, holders: &[Holder], t: i64, metric: Metric, card_mem_mib: u32) -> f64 {
    if holders.is_empty() {
        return 0.0;
    }
    match metric {
        Metric::FbUsed => shared_fb(c, holders, t, card_mem_mib),
        m => m.value_for(shared_util(c, holders, t)),
    }
}

/// dcgm-exporter ≥ 4.8.2's per-process `DCGM_FI_DEV_GPU_UTIL` of a pod on a shared card: the pod's own demand
/// in integer percent of the card (the same on each of its replicas' series).
pub fn per_pod_percent(pod: &Pod, t: i64) -> i64 {
    (demand(pod, 0, t) * 100.0).round() as i64
}

/// The per-process `DCGM_FI_DEV_FB_USED` of a pod on a shared card (MiB).
pub fn per_pod_fb(pod: &Pod, t: i64) -> f64 {
    pod_fb(pod, 0, t)
}

/// `hami_container_device_utilization_ratio` of a pod on a device: integer percent of the whole
/// card. Bursting pods go above their `gpucores`.
pub fn hami_percent(c: &Cluster, h: &Holder, t: i64) -> i64 {
    (demand(&c.pods[h.pod], h.dev, t) * 100.0).round() as i64
}
