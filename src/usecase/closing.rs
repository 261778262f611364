//! Closing a month: what stands in the way of it, and the close itself, which freezes the statement with every
//! figure its representations print.

use chrono::Utc;

use super::statements::statement;
use super::{Error, Services, global_only};
use crate::access::{Scope, Writer};
use crate::billing::{BillPolicy, Month, PolicyChoice};
use crate::ledger::readiness::Readiness;
use crate::ledger::{CloseRequest, Statement};

/// What stands in the way of closing `month` now (global readers).
pub async fn readiness(s: &Services, scope: &Scope, month: Month) -> Result<Readiness, Error> {
    global_only(scope)?;
    let st = statement(s, month, PolicyChoice::NONE).await?;
    Ok(crate::usecase::readiness::readiness(&s.pool, month, s.billing_tz, &st.bills, Utc::now()).await?)
}

/// Closes an ended month under `policy` (finance decides it: always named), by writer `by`, freezing with it the
/// extras its representations print ([`super::extras::month_extras`]).
pub async fn close(
    s: &Services,
    month: Month,
    policy: BillPolicy,
    override_reason: Option<String>,
    by: &Writer,
) -> Result<Statement, Error> {
    let actor = &by.actor();
    let req = CloseRequest { policy, override_reason };
    super::ledger::close(&s.pool, month, req, s.billing_tz, actor, async || super::extras::month_extras(s, month).await)
        .await
}
