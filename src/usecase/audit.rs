//! The audit log: every close, rate, team and mapping change, newest first (global readers).

use super::{Error, Services, global_only};
use crate::access::Scope;
use crate::db::audit::AuditEntry;

/// At most `limit` entries older than id `before` (all when `None`), newest first.
pub async fn entries(s: &Services, scope: &Scope, limit: i64, before: Option<i64>) -> Result<Vec<AuditEntry>, Error> {
    global_only(scope)?;
    Ok(crate::db::audit::list(&s.pool, limit, before).await?)
}
