//! What each node was taken to be in each stored hour, with its evidence (`node_facts_hourly`, issue 34).

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use crate::metering::NodeFact;

/// Stores the node facts of some hours of a cluster as metered, in the caller's transaction (the one storing the
/// hours' rows: [`super::usage::replace_hours`] has already removed the hours' earlier facts with their rows).
pub async fn insert(
    conn: &mut PgConnection,
    cluster: &str,
    hours: &[(DateTime<Utc>, &[NodeFact])],
) -> Result<(), sqlx::Error> {
    let facts = || hours.iter().flat_map(|(h, f)| f.iter().map(move |f| (*h, f)));
    let hour: Vec<DateTime<Utc>> = facts().map(|(h, _)| h).collect();
    let text = |f: fn(&NodeFact) -> String| facts().map(|(_, n)| f(n)).collect::<Vec<String>>();
    let cards: Vec<Option<f64>> = facts().map(|(_, n)| n.cards).collect();
    let replicas: Vec<Option<f64>> = facts().map(|(_, n)| n.replicas).collect();
    let conflict: Vec<bool> = facts().map(|(_, n)| n.conflict).collect();
    sqlx::query!(
        r#"INSERT INTO node_facts_hourly (cluster, hour, node, gpu_model, cards, replicas, strategy, cards_source,
               evidence, conflict)
           SELECT $1, * FROM UNNEST($2::timestamptz[], $3::text[], $4::text[], $5::float8[], $6::float8[],
               $7::text[], $8::text[], $9::text[], $10::bool[])"#,
        cluster,
        &hour,
        &text(|n| n.node.clone()),
        &text(|n| n.gpu_model.clone()),
        &cards as &[Option<f64>],
        &replicas as &[Option<f64>],
        &text(|n| n.strategy.to_string()),
        &text(|n| n.cards_source.as_str().to_string()),
        &text(|n| n.evidence.clone()),
        &conflict,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// Removes the node facts of some hours (an undo, a replacement).
pub async fn delete(conn: &mut PgConnection, cluster: &str, hours: &[DateTime<Utc>]) -> Result<(), sqlx::Error> {
    sqlx::query!("DELETE FROM node_facts_hourly WHERE cluster = $1 AND hour = ANY($2)", cluster, hours)
        .execute(conn)
        .await?;
    Ok(())
}

/// Removes the node facts before the raw rows' retention horizon (`cardhour retention`); the rows removed.
pub async fn delete_before_retention(conn: &mut PgConnection) -> Result<u64, sqlx::Error> {
    let done = sqlx::query!(
        "DELETE FROM node_facts_hourly WHERE hour < (SELECT kept_from FROM raw_retention WHERE kept_from IS NOT NULL)"
    )
    .execute(conn)
    .await?;
    Ok(done.rows_affected())
}
