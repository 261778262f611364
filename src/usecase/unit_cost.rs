//! What a million tokens and a thousand requests cost (SPEC §9), over billing days, grouped by team, namespace,
//! model, engine, day or month, within the caller's scope: each serving pod-hour priced as bills price it (its
//! GPU-hours × the rate of its GPU model on the hour's billing day; time-sliced replicas per the replica billing
//! in force), then [`crate::billing::unit_cost`]'s ratios of sums.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use rust_decimal::prelude::FromPrimitive;
use serde::Serialize;

use super::{Error, Services};
use crate::access::Scope;
use crate::billing::unit_cost::{ModelHour, PodHour, UnitCostRow, UnitGroup, unit_costs};
use crate::billing::{Month, ReplicaPolicyBook};
use crate::db;

/// The most days one report covers (a year and a day: a year-to-date report of a leap year).
pub const MAX_DAYS: i64 = 366;

/// A unit-cost report: its range of billing days `[from, to)`, its grouping, one row per group and the total.
#[derive(Debug, Clone, Serialize, PartialEq, utoipa::ToSchema)]
pub struct UnitCostReport {
    #[schema(value_type = String, format = Date)]
    pub from: NaiveDate,
    /// Exclusive.
    #[schema(value_type = String, format = Date)]
    pub to: NaiveDate,
    pub group_by: UnitGroup,
    pub currency: &'static str,
    pub rows: Vec<UnitCostRow>,
    pub total: UnitCostRow,
}

/// Hours are turned into yuan with this many decimals (finer than any figure printed from them).
const HOURS_DP: u32 = 12;

fn hours(seconds: f64) -> Decimal {
    Decimal::from_f64(seconds / 3600.0).unwrap_or_default().round_dp(HOURS_DP)
}

/// The serving pod-hours of billing days `[from, to)` within `scope`, each with its GPU cost (unrounded).
pub async fn pod_hours(s: &Services, scope: &Scope, from: NaiveDate, to: NaiveDate) -> Result<Vec<PodHour>, Error> {
    let served = db::serving::served_hours(&s.pool, from, to, scope).await?;
    if served.is_empty() {
        return Ok(Vec::new());
    }
    let usage = db::serving::serving_pod_usage(&s.pool, from, to).await?;
    let mut conn = s.pool.acquire().await?;
    let book = db::rates::rate_book(&mut conn).await?;
    let replicas = ReplicaPolicyBook::new(db::replica_policy::list(&mut conn).await?);
    type PodKey = (String, DateTime<Utc>, String, String);
    // each pod-hour's cost and GPU-hours, and whether a GPU model it held has no rate
    let mut cost: BTreeMap<PodKey, (Decimal, Decimal, bool)> = BTreeMap::new();
    let tz = s.billing_tz;
    for u in usage {
        let day = u.day;
        let (_, rate) = book.price(&u.gpu_model, day);
        let card_hours = hours(u.gpu_seconds);
        let billed =
            replicas.at(&u.cluster, u.pool.as_deref(), day).billed_hours(&u.kind, card_hours, hours(u.replica_seconds));
        let e = cost.entry((u.cluster, u.hour, u.namespace, u.pod)).or_default();
        match rate {
            Some(r) => e.0 += billed * r.as_decimal(),
            None => e.2 = true,
        }
        e.1 += card_hours;
    }
    let mut out: Vec<PodHour> = Vec::new();
    let mut last: Option<PodKey> = None;
    for r in served {
        let key = (r.cluster, r.hour, r.namespace, r.pod);
        let model = ModelHour {
            model: r.model,
            engine: r.engine,
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            requests: r.requests,
        };
        // rows come ordered by pod-hour: a new pod-hour starts a new entry
        if last.as_ref() == Some(&key)
            && let Some(h) = out.last_mut()
        {
            h.models.push(model);
            continue;
        }
        // a pod that held no GPU in the hour (a CPU-only server, or one KSM did not see Running) has no cost of
        // serving: its tokens would lower every unit cost they were summed into
        let Some(&(c, g, unpriced)) = cost.get(&key) else {
            continue;
        };
        out.push(PodHour {
            team: r.team,
            namespace: key.2.clone(),
            pod: key.3.clone(),
            day: r.day.to_string(),
            month: Month::containing(key.1, tz).to_string(),
            cost: c,
            unpriced,
            gpu_hours: g,
            models: vec![model],
        });
        last = Some(key);
    }
    Ok(out)
}

/// The unit-cost report of billing days `[from, to)` grouped by `group`, within `scope`.
pub async fn report(
    s: &Services,
    scope: &Scope,
    from: NaiveDate,
    to: NaiveDate,
    group: UnitGroup,
) -> Result<UnitCostReport, Error> {
    let hours = pod_hours(s, scope, from, to).await?;
    let (rows, total) = unit_costs(&hours, group);
    Ok(UnitCostReport { from, to, group_by: group, currency: "CNY", rows, total })
}

/// The billing days a report covers: `from` (default: the first day of the month `now` is in) to `to` (exclusive,
/// default: the day after `now`'s), `from` before `to`, at most [`MAX_DAYS`] apart.
pub fn range(
    from: Option<NaiveDate>,
    to: Option<NaiveDate>,
    tz: chrono_tz::Tz,
    now: DateTime<Utc>,
) -> Result<(NaiveDate, NaiveDate), crate::validate::FieldError> {
    use crate::validate::FieldError;
    let today = now.with_timezone(&tz).date_naive();
    let to = match to {
        Some(t) => t,
        None => today.succ_opt().ok_or_else(|| FieldError::new("to", "out of range"))?,
    };
    let from = from.unwrap_or_else(|| Month::containing(now, tz).first_day());
    // 2000-01-01 ..= 2100-12-31, as every date the API takes
    let (from, to) = (crate::validate::date("from", from)?, crate::validate::date("to", to)?);
    if from >= to {
        return Err(FieldError::new("from", "must be before `to`"));
    }
    if (to - from).num_days() > MAX_DAYS {
        return Err(FieldError::new("to", format!("at most {MAX_DAYS} days after `from`")));
    }
    Ok((from, to))
}
