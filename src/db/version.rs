//! The data version: one number, bumped once by every committing transaction that changed what answers depend
//! on, in commit order (migrations/20261201000005_integrity.sql says why). Caches compare it, not timestamps.

use crate::billing::Month;
use sqlx::PgPool;

/// A value of the data version. Two reads give the same one only if no transaction that changed data committed
/// in between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DataVersion(pub i64);

pub async fn current(pool: &PgPool) -> Result<DataVersion, sqlx::Error> {
    Ok(DataVersion(sqlx::query_scalar!("SELECT version FROM data_version").fetch_one(pool).await?))
}

/// The data version and, when `month` is closed, the content hash of its statement: one round trip, one snapshot.
pub async fn with_closed_hash(pool: &PgPool, month: Month) -> Result<(DataVersion, Option<String>), sqlx::Error> {
    let r = sqlx::query!(
        r#"SELECT (SELECT version FROM data_version) AS "version!",
                  (SELECT content_hash FROM closed_months WHERE month = $1) AS content_hash"#,
        month.to_string()
    )
    .fetch_one(pool)
    .await?;
    Ok((DataVersion(r.version), r.content_hash))
}
