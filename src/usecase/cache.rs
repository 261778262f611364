//! Read results served until the data behind them changes: each entry carries the data version it was computed
//! under, and every read compares it with the current one (one cheap query), so several API processes stay
//! correct without talking to each other. The version orders commits (see `db::version`), so an entry can only be
//! newer than its version says, never older: a write committed after the version was read bumps it again.
//! Callers missing the same key at once compute it once: under steady writes (a worker committing every few
//! seconds) every request would otherwise recompute, and 16 of them at once exhaust the pool.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};

use sqlx::PgPool;

use crate::db::version::{self, DataVersion};

pub struct StampedCache<K, V> {
    entries: Mutex<HashMap<K, (DataVersion, Arc<V>)>>,
    /// One lock per key being computed: the callers that missed wait for the one computing.
    computing: Mutex<HashMap<K, Arc<tokio::sync::Mutex<()>>>>,
}

impl<K, V> Default for StampedCache<K, V> {
    fn default() -> Self {
        Self { entries: Mutex::new(HashMap::new()), computing: Mutex::new(HashMap::new()) }
    }
}

impl<K: Eq + Hash + Clone, V> StampedCache<K, V> {
    /// Entries kept at most; past that the cache starts over (keys are months, windows and scopes: a handful are
    /// hot at a time).
    const MAX_ENTRIES: usize = 64;

    /// The value of `key` computed under the current data version (or a newer one): from the cache, or by
    /// `compute`, which runs once for the callers that miss the same key at the same time.
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
        if let Some(v) = self.fresh(&key, now) {
            return Ok(v);
        }
        let gate = self.lock_computing().entry(key.clone()).or_default().clone();
        let _computing = gate.lock().await;
        // computed meanwhile by the caller that held the gate, under this version or a newer one
        if let Some(v) = self.fresh(&key, now) {
            return Ok(v);
        }
        let result = compute().await.map(Arc::new);
        if let Ok(v) = &result {
            let mut entries = self.lock();
            if entries.len() >= Self::MAX_ENTRIES {
                entries.clear();
            }
            entries.insert(key.clone(), (now, v.clone()));
        }
        // after the entry is in: a caller arriving now finds it rather than a gate of its own
        self.lock_computing().remove(&key);
        result
    }

    fn fresh(&self, key: &K, now: DataVersion) -> Option<Arc<V>> {
        self.lock().get(key).filter(|(s, _)| *s >= now).map(|(_, v)| v.clone())
    }

    fn lock_computing(&self) -> std::sync::MutexGuard<'_, HashMap<K, Arc<tokio::sync::Mutex<()>>>> {
        self.computing.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, (DataVersion, Arc<V>)>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn callers_missing_one_key_at_once_compute_it_once() {
        let cache: Arc<StampedCache<&'static str, usize>> = Arc::default();
        let runs = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let (cache, runs) = (cache.clone(), runs.clone());
                tokio::spawn(async move {
                    cache
                        .get_or_compute_at(DataVersion(7), "month", async || {
                            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                            Ok::<_, ()>(runs.fetch_add(1, Ordering::SeqCst) + 1)
                        })
                        .await
                        .unwrap()
                })
            })
            .collect();
        for t in tasks {
            assert_eq!(*t.await.unwrap(), 1, "every caller gets the one computed value");
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        // a newer version computes again; an older caller is served the newer value
        let v = cache.get_or_compute_at(DataVersion(8), "month", async || Ok::<_, ()>(2)).await.unwrap();
        assert_eq!(*v, 2);
        let v = cache.get_or_compute_at(DataVersion(7), "month", async || Ok::<_, ()>(99)).await.unwrap();
        assert_eq!(*v, 2);
    }
}
