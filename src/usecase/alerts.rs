//! Budget alerts: each threshold the forecast or the actual spend crosses is recorded once per team and month,
//! and POSTed as JSON to a webhook until it is delivered (a receiver that was down gets it on a later run).
//!
//! Budgets are checked whenever the figures they depend on change: after every ingest (CLI and worker), a rate
//! change, a mapping change or import, and a budget change ([`check_after_change`]), besides `cardhour budgets`.
//! A crossing is one row (team, month, threshold, basis): recording it again is nothing, and each POST carries
//! `Idempotency-Key: <team>/<month>/<threshold>/<basis>`, so a receiver can drop the one repeat that remains
//! possible (a POST that arrived whose delivery could not be recorded).

use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use sqlx::PgPool;

use super::ledger;
use crate::access::Scope;
use crate::billing::Month;
use crate::db;
use crate::ledger::LedgerError;
use crate::money::Money;
use crate::waste::{crossings, forecast};

/// Why a budget check failed: the ledger or the database behind it, or the HTTP client that delivers to the
/// webhook (which is no database failure).
#[derive(Debug, thiserror::Error)]
pub enum AlertError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("database: {0}")]
    Database(#[from] sqlx::Error),
    /// The webhook's HTTP client cannot be built (no TLS backend, no resolver): nothing was delivered.
    #[error("cannot build the webhook client: {0}")]
    WebhookClient(String),
}

#[derive(Debug, Default, Serialize)]
pub struct AlertRun {
    /// Crossings seen for the first time.
    pub raised: usize,
    pub delivered: usize,
    pub failed: usize,
}

/// The part of `month` gone at `at`, in (0, 1].
pub fn elapsed(month: Month, tz: chrono_tz::Tz, at: DateTime<Utc>) -> Decimal {
    let (start, end) = month.bounds(tz);
    let total = (end - start).num_seconds().max(1);
    let gone = (at.min(end) - start).num_seconds().clamp(1, total);
    Decimal::from(gone) / Decimal::from(total)
}

/// After an ingest of `[from, to)`: checks the budgets of every billing month the span touched, as of `to` (what
/// is stored is complete up to there), and delivers what is undelivered.
pub async fn check_after_ingest(
    pool: &PgPool,
    tz: chrono_tz::Tz,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    webhook: Option<&str>,
) -> Result<AlertRun, AlertError> {
    let mut run = AlertRun::default();
    let last = Month::containing(to - chrono::Duration::milliseconds(1), tz);
    let mut month = Month::containing(from, tz).min(last);
    loop {
        let r = check_budgets(pool, month, tz, to, webhook).await?;
        run.raised += r.raised;
        run.delivered += r.delivered;
        run.failed += r.failed;
        if month >= last {
            return Ok(run);
        }
        month = month.next();
    }
}

/// The oldest month a change re-checks: a rate or mapping dated years back must not re-check decades of budgets.
const RECHECK_MONTHS: u32 = 13;

/// After a change to what bills are made of (a rate, a mapping, a budget) effective from day `since` (in the
/// billing time zone; `None`: from the oldest month re-checked): checks the
/// budgets of every month from `since`'s (at most [`RECHECK_MONTHS`] back) to the current one, as of now. The
/// API has no webhook: crossings are recorded at once (the budgets list shows them) and delivered by the next
/// worker cycle or `cardhour budgets --webhook`. Never fails the change, which is committed already: an error is
/// logged, and the next check finds the crossing.
pub async fn check_after_change(pool: &PgPool, tz: chrono_tz::Tz, since: Option<NaiveDate>) -> AlertRun {
    let now = Utc::now();
    let mut oldest = Month::containing(now, tz);
    for _ in 0..RECHECK_MONTHS {
        oldest = oldest.prev();
    }
    let since = since.map_or(oldest.first_day(), |d| d.max(oldest.first_day()));
    let from = crate::billing::month::start_of_day(tz, since).min(now - chrono::Duration::milliseconds(1));
    let last = Month::containing(now - chrono::Duration::milliseconds(1), tz);
    let mut month = Month::containing(from, tz).min(last);
    let mut run = AlertRun::default();
    loop {
        match coalesced::check(pool, month, tz).await {
            Ok(r) => {
                run.raised += r.raised;
                run.delivered += r.delivered;
                run.failed += r.failed;
            }
            Err(e) => {
                tracing::error!(error = %e, %month, "budget check after a change failed; the next check records the crossings");
            }
        }
        if month >= last {
            return run;
        }
        month = month.next();
    }
}

/// The checks after changes, one database and month at a time per process: a change waits for a check that
/// started after its commit — the one running when it came sees the database as it was before, so the next one
/// — and the changes that came meanwhile share that next check. A burst of 20 budget writes costs two checks, not
/// 20 in a row, and a change waiting for its check holds no database connection.
mod coalesced {
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, LazyLock, Mutex};

    use sqlx::PgPool;

    use super::{AlertError, AlertRun, Month};

    #[derive(Default)]
    struct Flight {
        /// Changes that asked for a check so far (each after its commit).
        requested: AtomicU64,
        /// How many of them the last completed check covered; held by the check running.
        covered: tokio::sync::Mutex<u64>,
    }

    static FLIGHTS: LazyLock<Mutex<HashMap<String, Arc<Flight>>>> = LazyLock::new(Default::default);

    /// The flight of `month` of the database `pool` connects to (a process may serve several, e.g. tests).
    fn flight(pool: &PgPool, month: Month) -> Arc<Flight> {
        let o = pool.connect_options();
        let key = format!("{}:{}/{}/{month}", o.get_host(), o.get_port(), o.get_database().unwrap_or(""));
        FLIGHTS.lock().unwrap_or_else(|e| e.into_inner()).entry(key).or_default().clone()
    }

    /// Checks `month` for a change committed before this call, unless a check that started after the call
    /// completes meanwhile (then it has seen the change: nothing is left to do).
    pub(super) async fn check(pool: &PgPool, month: Month, tz: chrono_tz::Tz) -> Result<AlertRun, AlertError> {
        let flight = flight(pool, month);
        let mine = flight.requested.fetch_add(1, Ordering::SeqCst) + 1;
        let mut covered = flight.covered.lock().await;
        if *covered >= mine {
            return Ok(AlertRun::default());
        }
        // every change that asked so far has committed: this check sees them all
        let upto = flight.requested.load(Ordering::SeqCst);
        let run = super::check_budgets(pool, month, tz, chrono::Utc::now(), None).await?;
        *covered = upto;
        Ok(run)
    }
}

/// The key a receiver deduplicates deliveries by: one per crossing.
pub fn idempotency_key(a: &db::budgets::Alert) -> String {
    format!("{}/{}/{}/{}", a.team_id, a.month, a.threshold.normalize(), a.basis)
}

/// Checks every budget of `month` as of `at`, records new crossings, and delivers what is undelivered to
/// `webhook` (when given). Several processes (a worker per cluster, a cron job) may run it at once: they take
/// turns, so an alert is POSTed by one of them only.
pub async fn check_budgets(
    pool: &PgPool,
    month: Month,
    tz: chrono_tz::Tz,
    at: DateTime<Utc>,
    webhook: Option<&str>,
) -> Result<AlertRun, AlertError> {
    // held until the end of this call; a crash rolls the transaction back and frees it. While another check holds
    // it, the connection goes back to the pool between tries: a waiting check must not hold one the check running
    // (or anything else the service does) needs.
    let turn = db::turns::begin_holding(pool, "cardhour:budget-alerts").await?;
    let run = check_budgets_locked(pool, month, tz, at, webhook).await;
    turn.rollback().await?;
    run
}

async fn check_budgets_locked(
    pool: &PgPool,
    month: Month,
    tz: chrono_tz::Tz,
    at: DateTime<Utc>,
    webhook: Option<&str>,
) -> Result<AlertRun, AlertError> {
    let mut run = AlertRun::default();
    let budgets = db::budgets::for_month(pool, month, &Scope::all()).await?;
    if !budgets.is_empty() {
        let st = ledger::statement(pool, month, crate::billing::PolicyChoice::NONE).await?;
        let part = elapsed(month, tz, at);
        for b in &budgets {
            let spent = st.team_total(&b.team_id);
            // restatements and adjustments are fixed amounts: the forecast extrapolates the month's usage only
            let fixed = st.team_restated(&b.team_id) + st.team_adjusted(&b.team_id);
            let budget = Money::round_fen(b.amount);
            for (threshold, basis) in crossings(budget, &b.thresholds, (spent, fixed), part) {
                let payload = serde_json::json!({
                    "kind": "budget_threshold",
                    "team": b.team_id,
                    "month": month.to_string(),
                    "basis": basis,
                    "threshold": threshold,
                    "budget": budget,
                    "spent": spent,
                    "forecast": forecast(spent, fixed, part),
                    "as_of": at,
                });
                if db::budgets::raise(pool, &b.team_id, month, threshold, basis.as_str(), &payload).await? {
                    run.raised += 1;
                }
            }
        }
    }
    let Some(url) = webhook else { return Ok(run) };
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| AlertError::WebhookClient(e.to_string()))?;
    for alert in db::budgets::alerts(pool, month, true).await? {
        let mut error = None;
        // a few quick tries now; whatever still fails is tried again on the next run
        for attempt in 0..3u32 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
            }
            let post = client.post(url).header("Idempotency-Key", idempotency_key(&alert)).json(&alert.payload);
            error = match post.send().await {
                Ok(r) if r.status().is_success() => None,
                Ok(r) => Some(format!("HTTP {}", r.status().as_u16())),
                Err(e) => Some(e.to_string()),
            };
            if error.is_none() {
                break;
            }
        }
        db::budgets::attempted(pool, &alert, error.as_deref()).await?;
        match error {
            None => run.delivered += 1,
            Some(e) => {
                tracing::warn!(team = %alert.team_id, month = %alert.month, error = %e, "budget alert not delivered");
                run.failed += 1;
            }
        }
    }
    Ok(run)
}
