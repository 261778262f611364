//! Read results served until the data behind them changes: each entry carries the data version it was computed
//! under, and every read compares it with the current one (one cheap query), so several API processes stay
//! correct without talking to each other. The version orders commits (see `db::version`), so an entry can only be
//! newer than its version says, never older: a write committed after the version was read bumps it again.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use sqlx::PgPool;

use crate::db::version::{self, DataVersion};

pub struct StampedCache<K, V> {
    entries: Mutex<HashMap<K, (DataVersion, Arc<V>)>>,
}

impl<K, V> Default for StampedCache<K, V> {
    fn default() -> Self {
        Self { entries: Mutex::new(HashMap::new()) }
    }
}

impl<K: Eq + Hash, V> StampedCache<K, V> {
    /// Entries kept at most; past that the cache starts over (keys are months, windows and scopes: a handful are
    /// hot at a time).
    const MAX_ENTRIES: usize = 64;

    /// The value of `key` computed under the current data version: from the cache, or by `compute` (not held
    /// across the lock; two callers missing at once both compute, and the later one's value stays).
    pub async fn get_or_compute<E: From<sqlx::Error>>(
        &self,
        pool: &PgPool,
        key: K,
        compute: impl AsyncFnOnce() -> Result<V, E>,
    ) -> Result<Arc<V>, E> {
        let now = version::current(pool).await?;
        self.get_or_compute_at(now, key, compute).await
    }

    /// [`Self::get_or_compute`] with the data version read by the caller, before `compute` reads anything.
    pub async fn get_or_compute_at<E>(
        &self,
        now: DataVersion,
        key: K,
        compute: impl AsyncFnOnce() -> Result<V, E>,
    ) -> Result<Arc<V>, E> {
        if let Some((s, v)) = self.lock().get(&key)
            && *s == now
        {
            return Ok(v.clone());
        }
        let v = Arc::new(compute().await?);
        let mut entries = self.lock();
        if entries.len() >= Self::MAX_ENTRIES {
            entries.clear();
        }
        entries.insert(key, (now, v.clone()));
        Ok(v)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, (DataVersion, Arc<V>)>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}
