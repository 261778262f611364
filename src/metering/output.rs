//! What metering one hour produces: usage rows, node capacity and the anomalies met on the way.

use super::ContainerKey;
use serde::Serialize;

/// Which measure a row's utilization came from (SPEC §2: SM_ACTIVE → GR_ENGINE_ACTIVE → GPU_UTIL/100).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UtilSource {
    SmActive,
    GrEngineActive,
    GpuUtil,
    Hami,
    /// dcgm-exporter ≥ 4.8.2's per-process `DCGM_FI_DEV_GPU_UTIL` of the pod itself.
    DcgmPod,
    Mixed,
    #[default]
    None,
}

impl UtilSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SmActive => "sm_active",
            Self::GrEngineActive => "gr_engine_active",
            Self::GpuUtil => "gpu_util",
            Self::Hami => "hami",
            Self::DcgmPod => "dcgm_pod",
            Self::Mixed => "mixed",
            Self::None => "none",
        }
    }

    /// The source of a row that has seen `self` so far and now `other`.
    pub fn merge(self, other: Self) -> Self {
        match (self, other) {
            (Self::None, o) => o,
            (s, Self::None) => s,
            (s, o) if s == o => s,
            _ => Self::Mixed,
        }
    }
}

/// One container × resource × GPU model in one hour.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UsageRow {
    pub key: ContainerKey,
    pub resource: String,
    /// `whole`, `mig`, `timeslice`, `mps` or `hami`.
    pub kind: &'static str,
    pub gpu_model: String,
    pub mig_profile: Option<String>,
    pub node: String,
    /// Units requested (`q`), the largest seen in the hour.
    pub units: f64,
    /// Card fraction of one unit (`f`).
    pub fraction: f64,
    /// The share of a card's memory one unit is promised, 0–1 (SPEC §7; see `metering::memory`): `None` where
    /// it cannot be known (a HAMi `gpumem` or a MIG profile on a card of unknown memory).
    pub memory_share: Option<f64>,
    pub gpu_seconds: f64,
    pub effective_gpu_seconds: f64,
    pub unmetered_gpu_seconds: f64,
    /// The part of `gpu_seconds` bridged over kube-state-metrics scrape gaps (the pod Running on both sides of a
    /// gap no longer than `MeterConfig::ksm_gap_bridge`), counted as Running time.
    pub bridged_gpu_seconds: f64,
    pub util_source: UtilSource,
    pub peak_fb_used_mib: Option<f64>,
    /// The namespace's team label at the end of the hour.
    pub label_team: Option<String>,
}

/// Where a node's offered cards came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OfferedSource {
    /// `kube_node_status_allocatable` was read for the node.
    Allocatable,
    /// No allocatable series (an old kube-state-metrics): the capacity taken as offered.
    #[default]
    Capacity,
}

impl OfferedSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allocatable => "allocatable",
            Self::Capacity => "capacity",
        }
    }
}

/// Physical cards of one node in one hour.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CapacityRow {
    pub node: String,
    pub gpu_model: String,
    pub cards: f64,
    pub card_seconds: f64,
    /// The part of `card_seconds` offered to workloads: allocatable cards while the node is schedulable, none
    /// while it is cordoned. At most `card_seconds`, and equal to it when the node offered everything.
    pub offered_card_seconds: f64,
    /// Whether allocatable was read; cordons count either way (`kube_node_spec_unschedulable`, absent = schedulable).
    pub offered_source: OfferedSource,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AnomalyKind {
    /// NaN or ±Inf samples, skipped.
    NonFiniteSample,
    /// A GPU-like resource cardhour cannot meter; its time is not in any figure.
    UnknownResource,
    /// A MIG resource on a model of unknown slice count; 7 slices assumed.
    UnknownMigModel,
    /// A time-slicing node without DCGM devices; the configured replica count used.
    DefaultReplicas,
    /// HAMi memory policy without a known card memory; the cores share used.
    HamiMemoryUnknown,
    /// DCGM's device count and the node's advertised capacity disagree.
    CapacityMismatch,
    /// A node whose cards nothing counts (no DCGM device, no GFD label, no configuration): a unit taken as a card.
    UnverifiedNode,
    /// A node whose GPU model neither DCGM, GFD nor configuration names.
    UnknownGpuModel,
    /// A kube-state-metrics scrape gap longer than the bridge span (or not bridged at all), pods Running on both
    /// sides: their time in it is not billed. Subject `<last sample before>..<first after>` (either side left
    /// out where the hour cannot see it), count the pods.
    KsmGap,
    /// A kube-state-metrics scrape gap bridged: pods Running on both sides counted through it. Subject as
    /// `KsmGap`, count the pods bridged in the hour.
    KsmGapBridged,
    /// DCGM shows more devices on a node than GFD's labels or its configuration count cards: the devices were
    /// taken (DCGM is a lower bound), the labels or the configuration are wrong.
    NodeEvidenceConflict,
    /// A serving engine's counter went backwards with no new pod object under its name in between (its process
    /// restarted inside the pod, or the counter is wrong): counted from 0 again (SPEC §9). Subject
    /// `<namespace>/<pod>`, count the resets. A pod recreated under its name resets its counters silently.
    ServingCounterReset,
    /// A series named like a serving engine's token or request counter under a name no known version uses: not
    /// counted. Subject the metric name, count its samples in the hour.
    UnknownServingSeries,
}

impl AnomalyKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NonFiniteSample => "non_finite_sample",
            Self::UnknownResource => "unknown_resource",
            Self::UnknownMigModel => "unknown_mig_model",
            Self::DefaultReplicas => "default_replicas",
            Self::HamiMemoryUnknown => "hami_memory_unknown",
            Self::CapacityMismatch => "capacity_mismatch",
            Self::UnverifiedNode => "unverified_node",
            Self::UnknownGpuModel => "unknown_gpu_model",
            Self::KsmGap => "ksm_gap",
            Self::KsmGapBridged => "ksm_gap_bridged",
            Self::NodeEvidenceConflict => "node_evidence_conflict",
            Self::ServingCounterReset => "serving_counter_reset",
            Self::UnknownServingSeries => "unknown_serving_series",
        }
    }
}

/// Something worth a human's look, with how often it happened in the hour.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Anomaly {
    pub kind: AnomalyKind,
    pub subject: String,
    pub count: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HourOutput {
    /// The scrape interval used; `None` when the hour had no KSM samples.
    pub interval_ms: Option<i64>,
    pub rows: Vec<UsageRow>,
    pub capacity: Vec<CapacityRow>,
    pub anomalies: Vec<Anomaly>,
    /// Tokens and requests served per pod, model and engine (SPEC §9).
    pub serving: Vec<super::ServingRow>,
    /// GPU pods' hours of waiting: seen Pending, or started (SPEC §10).
    pub pending: Vec<super::PendingRow>,
    /// Quota scopes' guarantees split by their use (SPEC §10).
    pub quota: Vec<super::QuotaRow>,
}
