//! A closed month's integrity: its snapshot against the content hash stored at close. A mismatch is logged loudly
//! (someone altered a closed month in the database, bypassing its triggers) and raises this process's alarm for the
//! month, so that no answer cached before the alteration is served after it ([`crate::usecase::statements`]
//! verifies a cached closed month again while its alarm is up, and whenever the data version moved).

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

use sqlx::PgPool;

use super::LedgerError;
use crate::billing::Month;
use crate::db;

/// Months whose snapshot was found altered by this process (of any database it serves: an alarm only makes the
/// cache verify again, it refuses nothing by itself).
static ALARMED: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Default::default);

fn alarms() -> std::sync::MutexGuard<'static, HashSet<String>> {
    ALARMED.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether this process found `month`'s snapshot altered (in some database) since it started.
pub fn alarmed(month: Month) -> bool {
    alarms().contains(&month.to_string())
}

/// Logs a closed month whose snapshot hashes to `actual`, not to the `stored` hash, raises its alarm, and is the
/// error to answer with.
pub(super) fn mismatch(month: &str, stored: &str, actual: &str) -> LedgerError {
    tracing::error!(
        month = %month, stored = %stored, actual = %actual,
        "INTEGRITY: a closed month's snapshot does not match its content hash; refusing to serve it"
    );
    alarms().insert(month.to_string());
    LedgerError::Integrity { month: month.to_string(), stored: stored.to_string(), actual: actual.to_string() }
}

/// Verifies `month`'s stored snapshot against its content hash in the database (the snapshot is hashed there, not
/// sent): `Ok` when it is intact or the month is not closed.
pub async fn verify_closed(pool: &PgPool, month: Month) -> Result<(), LedgerError> {
    match db::bills::closed_hashes(pool, month).await? {
        Some((stored, actual)) if stored != actual => Err(mismatch(&month.to_string(), &stored, &actual)),
        _ => Ok(()),
    }
}
