//! The raw series of one hour window, already normalised from Prometheus' label variants by `ingest`.

use super::{Edges, Sample};

/// A container of a pod: the unit usage is attributed to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct ContainerKey {
    pub namespace: String,
    pub pod: String,
    pub container: String,
}

/// `kube_pod_container_resource_requests{unit="integer"}` of one container and resource.
#[derive(Debug, Clone)]
pub struct RequestSeries {
    pub key: ContainerKey,
    pub uid: String,
    pub node: String,
    pub resource: String,
    pub samples: Vec<Sample>,
    /// The samples just outside the window (KSM is read with a margin, so gaps across its edges are seen whole).
    pub edges: Edges,
}

/// `kube_pod_status_phase{phase="Running"}` of one pod (1 while Running, 0 otherwise); also its `Pending` series.
#[derive(Debug, Clone)]
pub struct RunningSeries {
    pub uid: String,
    pub samples: Vec<Sample>,
    pub edges: Edges,
}

/// The DCGM fields cardhour reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UtilMetric {
    /// `DCGM_FI_PROF_SM_ACTIVE`, ratio: the best measure of work.
    SmActive,
    /// `DCGM_FI_PROF_GR_ENGINE_ACTIVE`, ratio: on by default, relative to the instance on MIG.
    GrEngineActive,
    /// `DCGM_FI_DEV_GPU_UTIL`, percent: coarse, absent on MIG instances.
    GpuUtil,
    /// `DCGM_FI_DEV_FB_USED`, MiB: memory held, not utilization.
    FbUsed,
}

impl UtilMetric {
    pub fn from_metric_name(name: &str) -> Option<Self> {
        match name {
            "DCGM_FI_PROF_SM_ACTIVE" => Some(Self::SmActive),
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE" => Some(Self::GrEngineActive),
            "DCGM_FI_DEV_GPU_UTIL" => Some(Self::GpuUtil),
            "DCGM_FI_DEV_FB_USED" => Some(Self::FbUsed),
            _ => None,
        }
    }

    /// A sample of this metric as a share of the device, in [0, 1].
    pub fn to_ratio(self, v: f64) -> f64 {
        let r = if self == Self::GpuUtil { v / 100.0 } else { v };
        r.clamp(0.0, 1.0)
    }
}

/// One DCGM series of a device, a MIG instance or a time-slicing copy.
#[derive(Debug, Clone)]
pub struct DeviceSeries {
    pub metric: UtilMetric,
    /// The workload holding the device; `None` for a device-level series.
    pub workload: Option<ContainerKey>,
    pub host: Option<String>,
    pub uuid: String,
    pub model: Option<String>,
    pub mig_profile: Option<String>,
    pub mig_instance: Option<String>,
    pub vgpu: Option<String>,
    /// dcgm-exporter ≥ 4.8.2's per-process series of one pod (it carries `pod_uid`), beside the device's own.
    pub per_process: bool,
    pub samples: Vec<Sample>,
}

/// `hami_container_device_utilization_ratio` (percent of the whole device) of one container on one device.
#[derive(Debug, Clone)]
pub struct HamiSeries {
    pub workload: ContainerKey,
    pub device: String,
    pub samples: Vec<Sample>,
}

/// `kube_namespace_labels` of one namespace, with its team label if it has one.
#[derive(Debug, Clone)]
pub struct NamespaceSeries {
    pub namespace: String,
    pub team: Option<String>,
    pub samples: Vec<Sample>,
}

/// `kube_node_status_capacity{unit="integer"}` (or `kube_node_status_allocatable`) of one node and resource.
#[derive(Debug, Clone)]
pub struct CapacitySeries {
    pub node: String,
    pub resource: String,
    pub samples: Vec<Sample>,
    pub edges: Edges,
}

/// `kube_node_spec_unschedulable` of one node: 1 while it is cordoned, 0 otherwise.
#[derive(Debug, Clone)]
pub struct UnschedulableSeries {
    pub node: String,
    pub samples: Vec<Sample>,
    pub edges: Edges,
}

/// The GPU feature discovery labels of one node as kube-state-metrics exports them in `kube_node_labels`
/// (`label_nvidia_com_gpu_product`, `_count`, `_replicas`, `_sharing_strategy`, `label_nvidia_com_mig_strategy`;
/// present only where KSM's `--metric-labels-allowlist` lets them through).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GfdLabels {
    /// `nvidia.com/gpu.product`, e.g. `NVIDIA-A100-SXM4-80GB`, `…-SHARED` when replicas are renamed, or
    /// `…-MIG-3g.40gb` under MIG's single strategy.
    pub product: Option<String>,
    /// `nvidia.com/gpu.count`: physical cards, or under MIG's single strategy the MIG devices.
    pub count: Option<u32>,
    /// `nvidia.com/gpu.replicas`: time-slicing or MPS replicas per card.
    pub replicas: Option<u32>,
    /// `nvidia.com/gpu.sharing-strategy`: `time-slicing`, `mps` or `none`.
    pub sharing_strategy: Option<String>,
    /// `nvidia.com/mig.strategy`: `single`, `mixed` or `none`.
    pub mig_strategy: Option<String>,
}

impl GfdLabels {
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// `kube_node_labels` of one node that carries GPU feature discovery labels.
#[derive(Debug, Clone)]
pub struct NodeLabelSeries {
    pub node: String,
    pub gfd: GfdLabels,
    pub samples: Vec<Sample>,
}

/// A DCGM device (its `UUID`) seen on a node (its `Hostname`) somewhere in the trailing day before an hour's end:
/// dcgm-exporter before 4.8.2 drops an idle card's series while another card of the node is busy, so the cards a
/// node has are counted over a day, never from one hour's series.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeenDevice {
    pub host: String,
    pub uuid: String,
}

/// Everything one hour window `[start_ms, end_ms)` needs. KSM series hold the window's samples only (requests,
/// phases, capacity, allocatable and cordons also their [`Edges`]); utilization series may reach a few minutes
/// beyond either edge so edge grid points find their match.
#[derive(Debug, Clone, Default)]
pub struct HourInput {
    pub start_ms: i64,
    pub end_ms: i64,
    pub requests: Vec<RequestSeries>,
    pub running: Vec<RunningSeries>,
    pub devices: Vec<DeviceSeries>,
    pub hami: Vec<HamiSeries>,
    pub namespaces: Vec<NamespaceSeries>,
    pub capacity: Vec<CapacitySeries>,
    /// What of the capacity the scheduler may hand out (below capacity when devices are unhealthy); empty from a
    /// kube-state-metrics that does not export it.
    pub allocatable: Vec<CapacitySeries>,
    pub unschedulable: Vec<UnschedulableSeries>,
    /// GFD labels of the nodes that have them (empty where KSM does not export them).
    pub node_labels: Vec<NodeLabelSeries>,
    /// Devices seen over the trailing day ending with this hour (besides this hour's own series).
    pub trailing_devices: Vec<SeenDevice>,
    /// Serving engines' counters and what judging them needs (SPEC §9).
    pub serving: super::ServingInput,
    /// `kube_pod_status_phase{phase="Pending"}` of the pods (1 while Pending), with edges like `running`.
    pub pending: Vec<RunningSeries>,
    /// Quotas and queues (SPEC §10).
    pub quota: super::QuotaInput,
}
