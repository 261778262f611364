//! Monthly budgets per team: the month's budgets with the spend so far, the forecast at the current run rate and
//! the alerts raised; setting one (finance).

use chrono::Utc;
use rust_decimal::Decimal;
use serde::Serialize;

use super::{Error, Services};
use crate::access::{Scope, Writer};
use crate::billing::{Month, PolicyChoice};
use crate::db::{self, audit, budgets::Alert, budgets::Budget};
use crate::money::Money;
use crate::validate::{self, Invalid, TeamId};

/// A budget with its spend so far, forecast and alerts (the API answers it as `api::views::BudgetStatus`).
#[derive(Debug, Serialize)]
pub struct BudgetStatus {
    #[serde(flatten)]
    pub budget: Budget,
    /// The team's statement total so far.
    pub spent: Money,
    /// At the current run rate, for the whole month.
    pub forecast: Money,
    pub alerts: Vec<Alert>,
}

/// The month's budgets of the teams of `scope`, with spend, forecast and alerts.
pub async fn budgets(s: &Services, scope: &Scope, month: Month) -> Result<Vec<BudgetStatus>, Error> {
    let budgets = db::budgets::for_month(&s.pool, month, scope).await?;
    let st = super::statements::statement(s, month, PolicyChoice::NONE).await?;
    let part = crate::usecase::alerts::elapsed(month, s.billing_tz, Utc::now());
    let alerts = db::budgets::alerts(&s.pool, month, false).await?;
    Ok(budgets
        .into_iter()
        .map(|b| {
            let spent = st.team_total(&b.team_id);
            let fixed = st.team_restated(&b.team_id) + st.team_adjusted(&b.team_id);
            BudgetStatus {
                spent,
                forecast: crate::waste::forecast(spent, fixed, part),
                alerts: alerts.iter().filter(|a| a.team_id == b.team_id).cloned().collect(),
                budget: b,
            }
        })
        .collect())
}

/// Sets `team`'s budget for `month` (finance): `amount` yuan, alerting at the `thresholds` shares (default 0.8
/// and 1.0). Audited; a budget set below what is spent already alerts now.
pub async fn set_budget(
    s: &Services,
    by: &Writer,
    month: Month,
    team: &TeamId,
    amount: Decimal,
    thresholds: Option<Vec<Decimal>>,
) -> Result<Budget, Error> {
    let actor = &by.actor();
    let mut errors = Vec::new();
    if !validate::BUDGET_AMOUNT.contains(amount) {
        errors.push(Invalid::new("amount", format!("must be {}", validate::BUDGET_AMOUNT.describe())));
    }
    let mut thresholds = thresholds.unwrap_or_else(|| vec![Decimal::new(8, 1), Decimal::ONE]);
    thresholds.sort();
    thresholds.dedup();
    if thresholds.is_empty() || thresholds.iter().any(|t| !validate::BUDGET_THRESHOLD.contains(*t)) {
        errors.push(Invalid::new("thresholds", format!("each must be {}", validate::BUDGET_THRESHOLD.describe())));
    }
    if !errors.is_empty() {
        return Err(Error::Invalid(errors));
    }
    let mut tx = s.pool.begin().await?;
    if db::teams::get(&mut tx, team).await?.is_none() {
        return Err(Error::NotFound(format!("team {team}")));
    }
    let budget = Budget { team_id: team.to_string(), month: month.to_string(), amount, thresholds };
    // the audit entry holds the rows as stored, so each entry's `before` is the `after` of the one before it;
    // a put of the values stored writes nothing, audits nothing and has nothing to check again
    let change = db::budgets::put(&mut tx, &budget, actor).await?;
    if !audit::record_change(&mut tx, actor, "budget.put", &format!("budget:{team}:{month}"), &change).await? {
        return Ok(budget);
    }
    tx.commit().await?;
    crate::usecase::alerts::check_after_change(&s.pool, s.billing_tz, Some(month.first_day())).await;
    Ok(budget)
}

/// Checks every budget of `month` as of `at`: records the thresholds crossed and delivers what is undelivered to
/// `webhook` (when given).
pub async fn check(
    s: &Services,
    month: Month,
    at: chrono::DateTime<Utc>,
    webhook: Option<&str>,
) -> Result<crate::usecase::alerts::AlertRun, Error> {
    Ok(crate::usecase::alerts::check_budgets(&s.pool, month, s.billing_tz, at, webhook).await?)
}
