//! Replica billing settings (SPEC §3): how a cluster's or node pool's time-sliced replicas are billed from a date
//! on, and which node pool a node is in. Open months follow at once (their drafts are computed from the
//! settings); a closed month keeps what it froze, a difference shows as restatements on the next open month.

use chrono::NaiveDate;

use super::{Error, Services, global_only};
use crate::access::{Scope, Writer};
use crate::billing::{ReplicaBilling, ReplicaPolicyVersion};
use crate::db;
use crate::validate;

/// A node pool's name: 1–253 characters without control characters, as written (trimmed).
pub fn pool_name(field: &str, s: &str) -> Result<String, validate::Invalid> {
    let t = s.trim();
    if t.is_empty() || t.len() > 253 || t.chars().any(char::is_control) {
        return Err(validate::Invalid::new(field, "a node pool is 1–253 characters without control characters"));
    }
    Ok(t.to_string())
}

/// Every setting (any global reader).
pub async fn list(s: &Services, scope: &Scope) -> Result<Vec<ReplicaPolicyVersion>, Error> {
    global_only(scope)?;
    let mut conn = s.pool.acquire().await?;
    Ok(db::replica_policy::list(&mut conn).await?)
}

/// Sets how `cluster`'s (or its pool `pool`'s) time-sliced replicas are billed from `from` on (finance, admin:
/// the caller checks the role). Every field is checked before anything is written; audited.
pub async fn set(
    s: &Services,
    by: &Writer,
    cluster: &str,
    pool: Option<&str>,
    from: NaiveDate,
    policy: ReplicaBilling,
) -> Result<ReplicaPolicyVersion, Error> {
    let actor = &by.actor();
    let cluster = validate::cluster("cluster", cluster);
    let pool = pool.map(|p| pool_name("pool", p)).transpose();
    let from = validate::date("from", from);
    let errors: Vec<validate::Invalid> =
        [cluster.as_ref().err(), pool.as_ref().err(), from.as_ref().err()].into_iter().flatten().cloned().collect();
    if !errors.is_empty() {
        return Err(Error::Invalid(errors));
    }
    let v = ReplicaPolicyVersion { cluster: cluster?, pool: pool?, from: from?, policy };
    let mut tx = s.pool.begin().await?;
    db::replica_policy::set(&mut tx, &v, actor).await?;
    tx.commit().await?;
    Ok(v)
}

/// Puts node `node` of `cluster` into node pool `pool` (or out of any with `None`); audited.
pub async fn set_node_pool(
    s: &Services,
    by: &Writer,
    cluster: &str,
    node: &str,
    pool: Option<&str>,
) -> Result<(), Error> {
    let actor = &by.actor();
    let cluster = validate::ClusterName::parse("cluster", cluster)?;
    let pool = pool.map(|p| pool_name("pool", p)).transpose()?;
    let mut tx = s.pool.begin().await?;
    db::replica_policy::set_node_pool(&mut tx, &cluster, node, pool.as_deref(), actor).await?;
    tx.commit().await?;
    Ok(())
}
