//! Adjustments with maker-checker (SPEC §11): finance enters a credit or debit of a team with a reason; another
//! finance or admin user approves or rejects it. Pending ones show on the draft and count in no total; an approved
//! one is a line of the statement it is booked to — the month it corrects while open, else the first open month
//! after it (a restatement of the closed month) — and a close freezes it. Every step is audited.

use serde::Deserialize;

use super::{Error, Services};
use crate::access::{Scope, Writer};
use crate::billing::Month;
use crate::db;
use crate::ledger::adjustment::{self, Adjustment, AdjustmentStatus, NewAdjustment, REASON_MAX};
use crate::validate;

/// An adjustment as entered (the API's body; the page's form has the same fields).
#[derive(Debug, Clone, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdjustmentInput {
    /// The month corrected, `YYYY-MM`, begun already: open, or closed (then booked, once approved, to the first
    /// open month after it).
    #[schema(example = "2026-11")]
    pub month: String,
    /// The team credited or debited.
    #[schema(example = "nlp")]
    pub team: String,
    /// Yuan to the fen, as text: negative a credit, positive a debit; not zero, at most 10,000,000,000 either way.
    #[schema(example = "-1200.50")]
    pub amount: String,
    /// Why (printed on every statement that carries it), 1–500 characters.
    #[schema(example = "GPU node down 2026-11-03, SLA credit", min_length = 1, max_length = 500)]
    pub reason: String,
}

/// A decision (approve or reject) with an optional note.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionInput {
    /// The checker's note, at most 500 characters.
    #[schema(max_length = 500)]
    pub note: Option<String>,
}

/// Enters an adjustment (finance, admin): pending until another finance or admin user decides it. The team must
/// exist; the month must have begun. Audited.
pub async fn enter(s: &Services, by: &Writer, input: &AdjustmentInput) -> Result<Adjustment, Error> {
    let new = NewAdjustment::parse(&input.month, &input.team, &input.amount, &input.reason).map_err(Error::Invalid)?;
    let this_month = Month::containing(chrono::Utc::now(), s.billing_tz);
    if new.month > this_month {
        return Err(Error::invalid("month", format!("{} has not begun (this month is {this_month})", new.month)));
    }
    let actor = by.actor();
    let mut tx = s.pool.begin().await?;
    if db::teams::get(&mut tx, &new.team).await?.is_none() {
        return Err(Error::NotFoundField { field: "team".into(), message: format!("unknown team {}", new.team) });
    }
    let row = (new.month, new.team.as_str(), new.amount.as_decimal(), new.reason.as_str());
    let a = read(db::adjustments::insert(&mut tx, row, &actor).await?)?;
    db::audit::record(&mut tx, &actor, "adjustment.enter", &entity(a.id), None, serde_json::to_value(&a).ok()).await?;
    tx.commit().await?;
    Ok(a)
}

/// Approves pending adjustment `id` (finance, admin; never whoever entered it): booked to its month while open,
/// else to the first open month after it — fixed under the close's lock of that month, so a close running at the
/// same moment either freezes it or leaves it to the next month, never half. Audited.
pub async fn approve(s: &Services, by: &Writer, id: i64, input: &DecisionInput) -> Result<Adjustment, Error> {
    decide(s, by, id, AdjustmentStatus::Approved, input).await
}

/// Rejects pending adjustment `id` (finance, admin; never whoever entered it): kept as a record, never a line.
/// Audited.
pub async fn reject(s: &Services, by: &Writer, id: i64, input: &DecisionInput) -> Result<Adjustment, Error> {
    decide(s, by, id, AdjustmentStatus::Rejected, input).await
}

async fn decide(
    s: &Services,
    by: &Writer,
    id: i64,
    status: AdjustmentStatus,
    input: &DecisionInput,
) -> Result<Adjustment, Error> {
    // blank is no note; anything else follows the text rule as sent (its length counted before trimming, as the
    // document's maxLength counts it)
    let note = match input.note.as_deref() {
        Some(n) if n.chars().count() > REASON_MAX => {
            return Err(Error::invalid("note", format!("must be at most {REASON_MAX} characters")));
        }
        Some(n) if !n.trim().is_empty() || n.contains(|c: char| c.is_control()) => {
            Some(validate::text("note", n, REASON_MAX)?)
        }
        _ => None,
    };
    let actor = by.actor();
    // A close of the booked month between reading where it goes and taking that month's lock moves it on: read
    // again under the lock, and try the next month then (months close one at a time, so a few tries suffice).
    for _ in 0..8 {
        let booked = {
            let mut conn = s.pool.acquire().await?;
            let a = pending(&mut conn, id, &actor).await?;
            adjustment::booking_month(a.month, &db::adjustments::closed_from(&mut conn, a.month).await?)
        };
        let mut tx = match status {
            AdjustmentStatus::Approved => db::turns::begin_holding(&s.pool, &format!("close:{booked}")).await?,
            _ => s.pool.begin().await?,
        };
        let before = pending(&mut tx, id, &actor).await?;
        let booked = match status {
            AdjustmentStatus::Approved => {
                let now = adjustment::booking_month(
                    before.month,
                    &db::adjustments::closed_from(&mut tx, before.month).await?,
                );
                if now != booked {
                    continue;
                }
                Some(booked)
            }
            _ => None,
        };
        let after =
            read(db::adjustments::decide(&mut tx, id, status.as_str(), &actor, note.as_deref(), booked).await?)?;
        let action = if booked.is_some() { "adjustment.approve" } else { "adjustment.reject" };
        db::audit::record(
            &mut tx,
            &actor,
            action,
            &entity(id),
            serde_json::to_value(&before).ok(),
            serde_json::to_value(&after).ok(),
        )
        .await?;
        tx.commit().await?;
        return Ok(after);
    }
    Err(Error::Conflict { field: None, message: "months kept closing while this was approved; try again".into() })
}

/// Adjustment `id` under its lock, still pending and decidable by `actor`.
async fn pending(conn: &mut sqlx::PgConnection, id: i64, actor: &str) -> Result<Adjustment, Error> {
    let row = db::adjustments::get_for_update(conn, id).await?;
    let a = read(row.ok_or_else(|| Error::NotFound(format!("adjustment {id}")))?)?;
    if a.status != AdjustmentStatus::Pending {
        return Err(Error::Conflict {
            field: None,
            message: format!("adjustment {id} is {} already (decided once)", a.status.as_str()),
        });
    }
    if !adjustment::may_decide(&a.entered_by, actor) {
        return Err(Error::Conflict {
            field: None,
            message: format!(
                "adjustment {id} was entered by you: another finance or admin user approves or rejects it (maker-checker)"
            ),
        });
    }
    Ok(a)
}

/// The adjustments of the teams of `scope` (a team lead: its own teams'), the newest first: of `month` (corrected
/// or booked to it) and in `status` when given, at most `limit`.
pub async fn list(
    s: &Services,
    scope: &Scope,
    month: Option<Month>,
    status: Option<AdjustmentStatus>,
    limit: i64,
) -> Result<Vec<Adjustment>, Error> {
    let mut conn = s.pool.acquire().await?;
    let status = status.map(AdjustmentStatus::as_str);
    Ok(read_all(db::adjustments::list(&mut conn, scope, month, status, limit).await?)?)
}

/// A stored row as the ledger reads it; the table's checks make every field parse.
fn read(r: db::adjustments::Row) -> Result<Adjustment, sqlx::Error> {
    let bad = |what: &str| sqlx::Error::Decode(format!("adjustment {}: bad {what}", r.id).into());
    Ok(Adjustment {
        id: r.id,
        month: r.month.parse().map_err(|_| bad("month"))?,
        amount: crate::money::Money::from_decimal(r.amount),
        status: AdjustmentStatus::parse(&r.status).ok_or_else(|| bad("status"))?,
        booked_month: match &r.booked_month {
            Some(m) => Some(m.parse().map_err(|_| bad("booked month"))?),
            None => None,
        },
        team: r.team_id,
        reason: r.reason,
        entered_by: r.entered_by,
        entered_at: r.entered_at,
        decided_by: r.decided_by,
        decided_at: r.decided_at,
        decision_note: r.decision_note,
    })
}

fn read_all(rows: Vec<db::adjustments::Row>) -> Result<Vec<Adjustment>, sqlx::Error> {
    rows.into_iter().map(read).collect()
}

fn entity(id: i64) -> String {
    format!("adjustment:{id}")
}

/// What a statement of open month `month` carries: the approved adjustments booked to it, and the pending ones an
/// approval now would book to it.
pub(super) async fn for_open_month(
    conn: &mut sqlx::PgConnection,
    month: Month,
) -> Result<(Vec<Adjustment>, Vec<Adjustment>), sqlx::Error> {
    let approved = read_all(db::adjustments::booked_to(conn, month).await?)?;
    let pending = read_all(db::adjustments::pending_through(conn, month).await?)?;
    let pending = match pending.iter().map(|a| a.month).min() {
        Some(first) => {
            let closed = db::adjustments::closed_from(conn, first).await?;
            pending.into_iter().filter(|a| adjustment::booking_month(a.month, &closed) == month).collect()
        }
        None => pending,
    };
    Ok((approved, pending))
}
