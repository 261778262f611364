//! The metering's knobs that depend on the cluster, not on the data: scrape interval, sharing defaults, per-node
//! settings and how long a kube-state-metrics gap may be bridged.

use std::collections::BTreeMap;
use std::time::Duration;

use super::node::NodeSettings;
use super::resource::HamiPolicy;

/// The longest kube-state-metrics gap that may be bridged: a restart or an upgrade takes seconds to minutes; an
/// outage longer than this is not billed by assumption, and no hour can then lie wholly inside a bridged gap.
pub const MAX_KSM_GAP_BRIDGE: Duration = Duration::from_secs(30 * 60);

/// Knobs of the metering that depend on the cluster, not on the data.
#[derive(Debug, Clone)]
pub struct MeterConfig {
    /// The scrape interval; inferred from the KSM samples when `None`.
    pub scrape_interval_ms: Option<i64>,
    /// Time-slicing replicas where a node's physical cards are unknown (no DCGM).
    pub default_timeslice_replicas: u32,
    /// Virtual GPUs per card on a HAMi node (its `deviceSplitCount`).
    pub hami_split: u32,
    pub hami_policy: HamiPolicy,
    /// Per-node configuration (cards, replicas, model, sharing) where nothing on the node tells it.
    pub nodes: BTreeMap<String, NodeSettings>,
    /// The longest kube-state-metrics scrape gap counted through when a pod is Running on both sides of it (and
    /// a node has capacity on both sides); zero bridges nothing; at most [`MAX_KSM_GAP_BRIDGE`].
    pub ksm_gap_bridge: Duration,
}

impl Default for MeterConfig {
    fn default() -> Self {
        Self {
            scrape_interval_ms: None,
            default_timeslice_replicas: 4,
            hami_split: 10,
            hami_policy: HamiPolicy::Cores,
            nodes: BTreeMap::new(),
            ksm_gap_bridge: Duration::from_secs(15 * 60),
        }
    }
}

impl MeterConfig {
    /// The bridge span in ms, capped at [`MAX_KSM_GAP_BRIDGE`].
    pub fn ksm_gap_bridge_ms(&self) -> i64 {
        self.ksm_gap_bridge.min(MAX_KSM_GAP_BRIDGE).as_millis() as i64
    }
}
