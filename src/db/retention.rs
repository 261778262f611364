//! Retention of raw hourly rows (`cardhour retention`): the partitions of closed, old months dropped, rollups and
//! closed statements kept (migrations/20261210000100_month_partitions.sql, `apply_raw_retention`).

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

/// One thing retention drops or deletes (or would): a whole partition, or the rows of a table before the horizon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// `horizon` (relation: the first instant whose raw rows are kept), `drop`, `delete`, or `nothing` (relation:
    /// why).
    pub action: String,
    pub relation: String,
    pub rows: i64,
    pub bytes: i64,
}

/// Drops (`apply`) or lists the raw hourly rows of the billing months that are closed and more than `keep_months`
/// before the month of `now`, in the caller's transaction. Run as the tables' owner (it drops partitions).
pub async fn apply(
    conn: &mut PgConnection,
    keep_months: i32,
    now: DateTime<Utc>,
    apply: bool,
) -> Result<Vec<Step>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT action AS "action!", relation AS "relation!", row_count AS "rows!", bytes AS "bytes!"
           FROM apply_raw_retention($1, $2, $3)"#,
        keep_months,
        now,
        apply
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut steps: Vec<Step> = rows
        .into_iter()
        .map(|r| Step { action: r.action, relation: r.relation, rows: r.rows, bytes: r.bytes })
        .collect();
    // the node facts of the hours whose raw rows went (issue 34), once the horizon moved,
    if apply && steps.first().is_some_and(|s| s.action == "horizon") {
        let n = super::node_facts::delete_before_retention(conn).await?;
        steps.push(Step { action: "delete".into(), relation: "node_facts_hourly".into(), rows: n as i64, bytes: 0 });
        // and their tokens and requests served (issue 36)
        let (stored, replaced) = super::serving::delete_before_retention(conn).await?;
        let (quota, replaced_quota) = super::quota::delete_before_retention(conn).await?;
        // and their quotas and waits (issue 29)
        let (waits, replaced_waits) = super::waits::delete_before_retention(conn).await?;
        for (relation, n) in [
            ("serving_hourly", stored),
            ("replaced_serving_hourly", replaced),
            ("quota_hourly", quota),
            ("replaced_quota_hourly", replaced_quota),
            ("pod_wait_hourly", waits),
            ("replaced_pod_wait_hourly", replaced_waits),
        ] {
            steps.push(Step { action: "delete".into(), relation: relation.into(), rows: n as i64, bytes: 0 });
        }
    }
    Ok(steps)
}

/// Where raw hourly rows start once retention dropped some (None: nothing dropped yet).
pub async fn kept_from(conn: &mut PgConnection) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
    sqlx::query_scalar!("SELECT kept_from FROM raw_retention").fetch_optional(conn).await
}
