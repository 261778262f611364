//! Stored GPU-hours over a range, grouped by team, namespace, pod or GPU model, within the caller's scope: the
//! `usage` report's rows (the API's JSON, the pages' and the command line's tables).

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::{Error, Services};
use crate::access::Scope;
use crate::db::usage::{GroupBy, UsageTotal};
use crate::validate::ClusterName;

/// One report row. The group key is named after the grouping; a pod row also names its namespace.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct UsageRow {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_model: Option<String>,
    pub gpu_hours: f64,
    pub effective_gpu_hours: f64,
    pub unmetered_gpu_hours: f64,
    /// effective ÷ metered GPU-hours; `null` when nothing was metered.
    pub utilization: Option<f64>,
}

impl From<UsageTotal> for UsageRow {
    fn from(t: UsageTotal) -> Self {
        let metered = t.gpu_seconds - t.unmetered_gpu_seconds;
        Self {
            team: t.team,
            namespace: t.namespace,
            pod: t.pod,
            gpu_model: t.gpu_model,
            gpu_hours: t.gpu_seconds / 3600.0,
            effective_gpu_hours: t.effective_gpu_seconds / 3600.0,
            unmetered_gpu_hours: t.unmetered_gpu_seconds / 3600.0,
            utilization: (metered > 1e-9).then(|| t.effective_gpu_seconds / metered),
        }
    }
}

/// What a usage answer depends on besides the stored data: range, grouping, cluster, the caller's teams.
pub type UsageKey = (DateTime<Utc>, DateTime<Utc>, GroupBy, Option<String>, Option<Vec<String>>);

/// The usage rows of `[from, to)` grouped by `group_by`, optionally of one cluster, within `scope`. Kept in
/// memory until the data changes, except a row per pod (large over long ranges, and not what dashboards repeat).
pub async fn usage(
    s: &Services,
    scope: &Scope,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    group_by: GroupBy,
    cluster: Option<&ClusterName>,
) -> Result<Vec<UsageRow>, Error> {
    let compute = async || {
        let totals = crate::db::usage::totals(&s.pool, from, to, group_by, cluster, scope, s.billing_tz).await?;
        Ok::<_, Error>(totals.into_iter().map(Into::into).collect::<Vec<UsageRow>>())
    };
    if group_by == GroupBy::Pod {
        return compute().await;
    }
    let key = (from, to, group_by, cluster.map(ClusterName::to_string), scope.teams.clone());
    Ok(s.usage.get_or_compute(&s.pool, key, compute).await?.as_ref().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> UsageRow {
        UsageRow::from(UsageTotal {
            team: None,
            namespace: Some("=cmd".into()),
            pod: Some("p-0".into()),
            gpu_model: None,
            gpu_seconds: 7200.0,
            effective_gpu_seconds: 1800.0,
            unmetered_gpu_seconds: 3600.0,
        })
    }

    #[test]
    fn utilization_leaves_unmetered_time_out() {
        let r = row();
        assert_eq!(r.gpu_hours, 2.0);
        assert_eq!(r.utilization, Some(0.5));
    }
}
