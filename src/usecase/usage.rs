//! Stored GPU-hours over a range, grouped by team, namespace, pod or GPU model, within the caller's scope.

use chrono::{DateTime, Utc};

use super::{Error, Services};
use crate::access::Scope;
use crate::db::usage::GroupBy;
use crate::usage::UsageRow;
use crate::validate::ClusterName;

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
