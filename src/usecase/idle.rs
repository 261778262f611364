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

/// The idle list as a page and its exports show it: its window stated, its rule, the pods most money spent idle
/// first, the money spent idle in the window (what ranks and totals the list: SPEC §7) and, labelled a projection,
/// what the pods still running cost a month.
#[derive(Debug, Clone)]
pub struct IdleView {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub hours: u32,
    pub rule: IdleRule,
    pub only_running: bool,
    pub pods: std::sync::Arc<Vec<IdlePod>>,
    /// Σ money spent idle in the window.
    pub spent: crate::money::Money,
    /// Σ monthly projections of the pods still running (a projection, not money spent).
    pub projected: crate::money::Money,
}

/// What an idle list is asked for: `rule` (`weekly`, default, or `short_term`), and the window, thresholds and
/// ended pods as the API's `/idle` takes them. Checked here, so the API, the pages and the exports agree.
#[derive(Debug, Clone, Default)]
pub struct IdleAsk {
    pub rule: Option<String>,
    pub to: Option<crate::validate::TimeInput>,
    pub hours: Option<u32>,
    pub max_utilization: Option<f64>,
    pub min_memory_mib: Option<f64>,
    pub include_ended: Option<bool>,
}

impl IdleAsk {
    /// The window's end (a whole hour; default the hour `now` is in), its length, the rule and whether ended pods
    /// are left out; a bad value is refused naming its field.
    pub fn resolve(
        &self,
        tz: chrono_tz::Tz,
        now: DateTime<Utc>,
    ) -> Result<(DateTime<Utc>, u32, IdleRule, bool), crate::validate::Invalid> {
        use crate::validate::{self, Invalid};
        let (base, default_hours) = match self.rule.as_deref() {
            None | Some("weekly") => (IdleRule::WEEKLY, 168),
            Some("short_term") => (IdleRule::SHORT_TERM, 2),
            Some(other) => {
                return Err(Invalid::new("rule", format!("`{}`: use weekly or short_term", other.escape_debug())));
            }
        };
        let rule = IdleRule {
            max_utilization: self.max_utilization.unwrap_or(base.max_utilization),
            min_memory_mib: self.min_memory_mib.unwrap_or(base.min_memory_mib),
        }
        .validate()
        .map_err(|(field, message)| Invalid::new(field, message))?;
        let hours = self.hours.unwrap_or(default_hours);
        validate::bounded("hours", i64::from(hours), 1, i64::from(validate::IDLE_HOURS_MAX))?;
        let to = match self.to {
            Some(t) => validate::instant("to", t.resolve("to", tz)?)?,
            None => crate::ingest::window::floor_hour(now),
        };
        if crate::ingest::window::floor_hour(to) != to {
            return Err(Invalid::new("to", "must be a whole hour"));
        }
        Ok((to, hours, rule, !self.include_ended.unwrap_or(false)))
    }
}

/// The idle list of `ask` within `scope` at `now`, with its window and totals: what a page and an export call.
pub async fn idle_view(s: &Services, scope: &Scope, ask: &IdleAsk, now: DateTime<Utc>) -> Result<IdleView, Error> {
    let (to, hours, rule, only_running) = ask.resolve(s.billing_tz, now)?;
    let pods = idle_pods(s, scope, to, hours, rule, only_running).await?;
    let (spent, projected) = crate::waste::idle_totals(&pods);
    Ok(IdleView { from: to - Duration::hours(i64::from(hours)), to, hours, rule, only_running, pods, spent, projected })
}
