//! Which kube-state-metrics outages the truth counts a pod's cards through (cardhour's default bridge): read by
//! the truth of GPU-hours and by the quotas' truth of use alike.

use super::model::{Grid, Pod};

/// Whether the KSM outage `[ga, gb)` is counted through for `pod`: Running at the scrapes on both sides (one pod
/// object, one uid) and missing no more than cardhour's default bridge.
pub fn bridged(grid: &Grid, pod: &Pod, (ga, gb): (u64, u64)) -> bool {
    bridgeable(grid, (ga, gb)) && across(grid, pod, (ga, gb))
}

/// An outage short enough to bridge.
pub fn bridgeable(grid: &Grid, (ga, gb): (u64, u64)) -> bool {
    (gb - ga) as i64 * grid.step_ms <= super::schedule::KSM_BRIDGE_MS
}

/// A pod Running on both sides of the outage `[ga, gb)`, so Running throughout it.
pub fn across(grid: &Grid, pod: &Pod, (ga, gb): (u64, u64)) -> bool {
    ga > 0 && gb < grid.len && pod.running_at(grid.at(ga - 1)) && pod.running_at(grid.at(gb))
}
