//! Pure metering math: raw Prometheus samples of one hour in, GPU-seconds per container out (docs/metering.md).
//!
//! Nothing here does I/O; `ingest` fetches and stores, this module only counts.

mod capacity;
mod config;
mod cover;
mod gap;
mod grid;
mod hour;
mod input;
mod memory;
mod node;
mod output;
mod queue;
mod quota;
mod resource;
mod sample;
mod serving;

pub use config::{MAX_KSM_GAP_BRIDGE, MeterConfig};
pub use gap::Edges;
pub use hour::meter_hour;
pub use input::{
    CapacitySeries, ContainerKey, DeviceSeries, GfdLabels, HamiSeries, HourInput, NamespaceSeries, NodeLabelSeries,
    RequestSeries, RunningSeries, SeenDevice, UnschedulableSeries, UtilMetric,
};
pub use memory::{hami_memory_share, mig_profile_memory_gb, unit_memory_share};
pub use node::{
    CardsSource, ModelSource, NodeFact, NodeSettings, SharingSetting, gfd_mig_profile, gfd_model,
    mig_instances_per_card, node_facts,
};
pub use output::{Anomaly, AnomalyKind, CapacityRow, HourOutput, OfferedSource, UsageRow, UtilSource};
pub use queue::{PendingRow, PodPhases, Wait, WaitStats, hour_phases, nearest_rank, wait_stats};
pub use quota::{
    ModelUse, QueueMember, QuotaInput, QuotaRow, QuotaScope, QuotaSeries, QuotaUse, ScopeKind, gauge_seconds,
    meter_quota, split_by_model, split_use,
};
pub use resource::{
    HamiPolicy, ResourceKind, card_memory_mib, classify_resource, mig_compute_slices, mig_profile_slices,
};
pub use sample::{Sample, infer_interval_ms, match_at};
pub use serving::{
    COUNTER_LOOKBACK_MS, Counter, CounterSeries, Engine, PodModel, PodStart, SERVING_METRICS_RE, ServingInput,
    ServingKey, ServingMetric, ServingRow, UNKNOWN_MODEL, UnknownServingSeries, increase, meter_serving,
    running_starts,
};

#[cfg(test)]
mod gap_tests;
#[cfg(test)]
mod tests;
