//! Loading the idle-waste list: per-pod sums from the database, priced at the rate in force at the window's end.

use chrono::{DateTime, Duration, Utc};
use sqlx::PgPool;

use super::{IdlePod, IdleRule, PodUsage, idle_list};
use crate::db::{self, usage::Scope};
use crate::pricing::{ModelCatalog, RateHistory};

/// The idle pods of the `hours` before `to` (a whole hour), within `scope`, priced in `billing_tz`.
pub async fn idle_report(
    pool: &PgPool,
    to: DateTime<Utc>,
    hours: u32,
    rule: IdleRule,
    only_running: bool,
    scope: &Scope,
    billing_tz: chrono_tz::Tz,
) -> Result<Vec<IdlePod>, sqlx::Error> {
    let from = to - Duration::hours(i64::from(hours));
    let pods = db::waste::pods(pool, from, to, scope).await?;
    let mut conn = pool.acquire().await?;
    let catalog = ModelCatalog::with_overrides(db::rates::aliases(&mut conn).await?);
    // a stored history that no longer validates prices nothing rather than failing the list
    let history = RateHistory::new(db::rates::versions(&mut conn).await?).unwrap_or_default();
    let day = (to - Duration::milliseconds(1)).with_timezone(&billing_tz).date_naive();
    let usage: Vec<PodUsage> = pods
        .into_iter()
        .map(|p| {
            let model = catalog.key_for(&p.gpu_model);
            PodUsage {
                rate: history.rate_at(&model, day),
                cluster: p.cluster,
                namespace: p.namespace,
                pod: p.pod,
                team: p.team,
                owner: p.owner,
                gpu_model: model,
                cards: p.cards,
                gpu_seconds: p.gpu_seconds,
                effective_gpu_seconds: p.effective_gpu_seconds,
                unmetered_gpu_seconds: p.unmetered_gpu_seconds,
                peak_fb_used_mib: p.peak_fb_used_mib,
                still_running: p.still_running,
            }
        })
        .collect();
    Ok(idle_list(&usage, rule, only_running))
}
