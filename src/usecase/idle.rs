//! The idle-waste list: per-pod sums of a window, priced at the rates in force at its end, judged by a rule —
//! within the caller's scope, served from memory until the data behind it changes.

use chrono::{DateTime, Duration, Utc};

use super::{Error, Services};
use crate::access::Scope;
use crate::pricing::RateBook;
use crate::waste::{IdlePod, IdleRule, PodUsage, idle_list};

/// What an idle list depends on besides the stored data: window, rule (as bits), running only, the caller's teams.
pub type IdleKey = (DateTime<Utc>, u32, u64, u64, bool, Option<Vec<String>>);

/// The billing day whose rates price a window ending at `to`: the day of its last instant.
pub(super) fn pricing_day(to: DateTime<Utc>, billing_tz: chrono_tz::Tz) -> chrono::NaiveDate {
    (to - Duration::milliseconds(1)).with_timezone(&billing_tz).date_naive()
}

/// The stored rate book (the one loader, [`crate::db::rates::rate_book`]).
pub(super) async fn rate_book(s: &Services) -> Result<RateBook, Error> {
    let mut conn = s.pool.acquire().await?;
    Ok(crate::db::rates::rate_book(&mut conn).await?)
}

/// The idle pods of the `hours` before `to` (a whole hour), within `scope`, priced in the billing time zone.
pub async fn idle_report(
    s: &Services,
    to: DateTime<Utc>,
    hours: u32,
    rule: IdleRule,
    only_running: bool,
    scope: &Scope,
) -> Result<Vec<IdlePod>, Error> {
    let from = to - Duration::hours(i64::from(hours));
    let pods = crate::db::waste::pods(&s.pool, from, to, scope).await?;
    let book = rate_book(s).await?;
    let day = pricing_day(to, s.billing_tz);
    let usage: Vec<PodUsage> = pods
        .into_iter()
        .map(|p| {
            let (model, rate) = book.price(&p.gpu_model, day);
            PodUsage {
                rate,
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

/// [`idle_report`] served from memory until the data behind it changes (dashboards repeat it).
pub async fn idle_pods(
    s: &Services,
    scope: &Scope,
    to: DateTime<Utc>,
    hours: u32,
    rule: IdleRule,
    only_running: bool,
) -> Result<std::sync::Arc<Vec<IdlePod>>, Error> {
    let key =
        (to, hours, rule.max_utilization.to_bits(), rule.min_memory_mib.to_bits(), only_running, scope.teams.clone());
    s.idle.get_or_compute(&s.pool, key, async || idle_report(s, to, hours, rule, only_running, scope).await).await
}
