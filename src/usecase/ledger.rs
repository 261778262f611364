//! The ledger's use cases on the database: a month's bills computed from stored usage, the rate history and
//! capacity; a month's statement (a closed month as frozen, an open one computed now with the restatements of the
//! closed months right before it); closing a month into its immutable snapshot; a closed month checked against its
//! content hash. The types and the pure rules are [`crate::ledger`]'s.

use std::collections::BTreeMap;

use chrono::Utc;
use sqlx::PgPool;

use crate::access::Scope;
use crate::billing::{
    BillMode, BillPolicy, CapacityLine, FinanceCodeBook, FinanceCodes, Month, MonthBills, PolicyChoice, ReplicaBilling,
    ReplicaPolicyBook, ReservationBook, ReservationCredit, ReservationLine, Reservations, RestatementLine,
    UnallocatedPolicy, UsageLine, compute_month_reserved, restate_month,
};
use crate::db;
use crate::ledger::{
    CloseOverride, CloseRequest, FrozenExtras, Layout, LedgerError, MonthStatus, OVERRIDE_REASON_MAX, SNAPSHOT_VERSION,
    Snapshot, Statement, TeamInfo, check_frozen_policy, from_closed, integrity, read_snapshot,
};
use crate::money::{Money, card_hours_from_seconds};
use crate::validate::TeamId;

/// The bill policy configured as the default (settings `bill_mode`, `unallocated_policy`).
pub async fn default_policy(pool: &PgPool) -> Result<BillPolicy, LedgerError> {
    let mut conn = pool.acquire().await?;
    let mode = db::bills::setting(&mut conn, "bill_mode").await?;
    let unallocated = db::bills::setting(&mut conn, "unallocated_policy").await?;
    Ok(BillPolicy {
        mode: mode.as_deref().and_then(BillMode::parse).unwrap_or_default(),
        unallocated: if unallocated.as_deref() == Some("spread_proportionally") {
            UnallocatedPolicy::SpreadProportionally
        } else {
            UnallocatedPolicy::KeptByPlatform
        },
    })
}

/// Computes a month's bills from what is stored now (closed or not). Time-sliced replicas are billed per the
/// dated settings of their cluster or node pool, or all under `replicas` when given (a draft's preview); each
/// line's days under the teams' finance codes of `codes` (the live ones for an open month, a closed month's own).
pub async fn compute(
    pool: &PgPool,
    month: Month,
    policy: BillPolicy,
    replicas: Option<ReplicaBilling>,
    codes: &FinanceCodeBook,
) -> Result<MonthBills, LedgerError> {
    let (from, to) = (month.first_day(), month.next().first_day());
    let usage = db::bills::usage_by_day(pool, from, to, &Scope::all()).await?;
    let unverified_kinds: Vec<String> =
        crate::ledger::readiness::UNVERIFIED_NODE_ANOMALIES.iter().map(|k| k.to_string()).collect();
    let per_node = db::replica_policy::node_usage_by_day(pool, from, to, &unverified_kinds).await?;
    let capacity = db::bills::capacity_by_day(pool, from, to).await?;
    let mut conn = pool.acquire().await?;
    let crate::pricing::RateBook { catalog, history } = db::rates::rate_book(&mut conn).await?;
    let book = ReplicaPolicyBook::new(db::replica_policy::list(&mut conn).await?);
    let mut keys: BTreeMap<String, String> = BTreeMap::new();
    let mut key = |m: &str| keys.entry(m.to_string()).or_insert_with(|| catalog.key_for(m)).clone();
    // Seconds are summed per bill line and rate period first and turned into card-hours once, so a line's hours
    // are exactly its stored seconds / 3600 (to 6 decimals), whatever the number of days behind it. Hours billed
    // as whole cards are lines of their own (`true`), moved out of the fraction-billed line of the same key.
    type Key = (String, String, String, String, Option<crate::money::RatePerCardHour>, bool, Option<FinanceCodes>);
    let mut lines: BTreeMap<Key, Seconds> = BTreeMap::new();
    let mut has_timeslice = false;
    for u in usage {
        let model = key(&u.gpu_model);
        let rate = history.rate_at(&model, u.day);
        has_timeslice |= u.kind == "timeslice";
        let finance = codes.at(&u.team, u.day).cloned();
        let e = lines.entry((u.team, u.namespace, model, u.kind, rate, false, finance)).or_default();
        e.gpu += u.gpu_seconds;
        e.effective += u.effective_gpu_seconds;
        e.unmetered += u.unmetered_gpu_seconds;
    }
    for n in per_node {
        let model = key(&n.gpu_model);
        let rate = history.rate_at(&model, n.day);
        let billing = replicas.unwrap_or_else(|| book.at(&n.cluster, n.pool.as_deref(), n.day)).for_kind(&n.kind);
        let finance = codes.at(&n.team, n.day).cloned();
        let base = (n.team, n.namespace, model, n.kind, rate, false, finance);
        if billing == ReplicaBilling::WholeCard {
            let fraction = lines.entry(base.clone()).or_default();
            fraction.gpu -= n.gpu_seconds;
            fraction.effective -= n.effective_gpu_seconds;
            fraction.unmetered -= n.unmetered_gpu_seconds;
            fraction.moved = true;
            let whole = lines.entry((base.0, base.1, base.2, base.3, base.4, true, base.6)).or_default();
            whole.gpu += n.gpu_seconds;
            whole.effective += n.effective_gpu_seconds;
            whole.unmetered += n.unmetered_gpu_seconds;
            whole.replica += n.replica_seconds;
            whole.unverified |= n.unverified;
        } else if n.unverified {
            lines.entry(base).or_default().unverified = true;
        }
    }
    // a fraction line emptied by the move is float residue of the same seconds summed twice, not usage
    lines.retain(|k, s| k.5 || !s.moved || s.gpu.abs() > 1e-6 || s.effective.abs() > 1e-6 || s.unmetered.abs() > 1e-6);
    let usage: Vec<UsageLine> = lines
        .into_iter()
        .map(|((team, namespace, gpu_model, kind, rate, whole, finance), s)| UsageLine {
            team,
            namespace,
            gpu_model,
            kind,
            card_hours: card_hours_from_seconds(s.gpu.max(0.0)),
            effective_card_hours: card_hours_from_seconds(s.effective.max(0.0)),
            unmetered_card_hours: card_hours_from_seconds(s.unmetered.max(0.0)),
            rate,
            whole_card_hours: whole.then(|| card_hours_from_seconds(s.replica)),
            unverified_node: s.unverified,
            finance,
        })
        .collect();
    // capacity and the part of it offered to workloads, in seconds per line, hours once (as for usage)
    let mut cap: BTreeMap<(String, Option<crate::money::RatePerCardHour>), [f64; 2]> = BTreeMap::new();
    for c in capacity {
        let model = key(&c.gpu_model);
        let e = cap.entry((model.clone(), history.rate_at(&model, c.day))).or_default();
        e[0] += c.card_seconds;
        e[1] += c.offered_card_seconds;
    }
    let capacity: Vec<CapacityLine> = cap
        .into_iter()
        .map(|((gpu_model, rate), s)| CapacityLine {
            gpu_model,
            card_hours: card_hours_from_seconds(s[0]),
            offered_card_hours: card_hours_from_seconds(s[1]),
            rate,
        })
        .collect();
    let reservations = match policy.mode {
        BillMode::Reserved => reservation_lines(pool, &mut conn, (from, to), (&history, codes), &mut key).await?,
        _ => Reservations::default(),
    };
    let mut bills = compute_month_reserved(&usage, &reservations, &capacity, policy);
    // the settings are printed wherever replicas were time-sliced or a setting applies to the month
    let in_effect = match replicas {
        Some(p) => vec![crate::billing::ReplicaPolicyVersion { cluster: "*".into(), pool: None, from, policy: p }],
        None => book.in_effect(from, to),
    };
    if has_timeslice || !in_effect.is_empty() {
        bills.replica_policies = Some(in_effect);
    }
    Ok(bills)
}

/// The quota scopes' guarantees of days `[from, to)` as reservation lines — each day's terms (model and factor)
/// and the model's rate that day — and their use within as credits at the rate of the model that ran it that day;
/// the seconds summed per line and turned into card-hours once (like usage).
async fn reservation_lines(
    pool: &PgPool,
    conn: &mut sqlx::PgConnection,
    (from, to): (chrono::NaiveDate, chrono::NaiveDate),
    (history, codes): (&crate::pricing::RateHistory, &FinanceCodeBook),
    key: &mut impl FnMut(&str) -> String,
) -> Result<Reservations, LedgerError> {
    use crate::money::RatePerCardHour;
    let book = ReservationBook::new(db::reservations::list(conn).await?.iter().map(|t| t.term()).collect());
    // a namespace's quota prints as the namespace; a queue with its kind, so the two never read alike
    let printed = |kind: &str, scope: String| if kind == "namespace" { scope } else { format!("{kind}/{scope}") };
    type Key =
        (String, String, Option<String>, Option<RatePerCardHour>, Option<rust_decimal::Decimal>, Option<FinanceCodes>);
    let mut guaranteed: BTreeMap<Key, f64> = BTreeMap::new();
    for d in db::reservations::scope_days(pool, from, to).await? {
        let term = book.at(&d.cluster, &d.scope_kind, &d.scope, d.day);
        let model = term.map(|t| key(&t.gpu_model));
        let rate = model.as_deref().and_then(|m| history.rate_at(m, d.day));
        let scope = printed(&d.scope_kind, d.scope);
        let finance = codes.at(&d.team, d.day).cloned();
        *guaranteed.entry((d.team, scope, model, rate, term.map(|t| t.factor), finance)).or_default() += d.guaranteed;
    }
    type Within = (String, String, String, Option<RatePerCardHour>, Option<FinanceCodes>);
    let mut within: BTreeMap<Within, f64> = BTreeMap::new();
    for d in db::reservations::scope_model_days(pool, from, to).await? {
        let term = book.at(&d.cluster, &d.scope_kind, &d.scope, d.day);
        let model = match (d.gpu_model.as_deref(), term) {
            (Some(model), _) => key(model),
            // hours stored before the models were recorded: the terms' model, as they were billed then
            (None, Some(t)) => key(&t.gpu_model),
            (None, None) => crate::billing::reserved::NO_TERMS_MODEL.to_string(),
        };
        // without terms the guarantee bills nothing, and its credit takes nothing back
        let rate = term.and_then(|_| history.rate_at(&model, d.day));
        let finance = codes.at(&d.team, d.day).cloned();
        *within.entry((d.team, printed(&d.scope_kind, d.scope), model, rate, finance)).or_default() += d.used_within;
    }
    Ok(Reservations {
        guarantees: guaranteed
            .into_iter()
            .map(|((team, scope, gpu_model, rate, factor, finance), seconds)| ReservationLine {
                team,
                scope,
                gpu_model,
                guaranteed_card_hours: card_hours_from_seconds(seconds),
                rate,
                factor,
                finance,
            })
            .collect(),
        credits: within
            .into_iter()
            .map(|((team, scope, gpu_model, rate, finance), seconds)| ReservationCredit {
                team,
                scope,
                gpu_model,
                used_within_card_hours: card_hours_from_seconds(seconds),
                rate,
                finance,
            })
            .collect(),
    })
}

/// A bill line's seconds while they are summed.
#[derive(Default)]
struct Seconds {
    gpu: f64,
    effective: f64,
    unmetered: f64,
    replica: f64,
    /// Some of it moved to the whole-card line of the same key.
    moved: bool,
    unverified: bool,
}

/// The statement of a month: a closed month exactly as closed (a `choice` other than its frozen policy is
/// [`LedgerError::PolicyMismatch`]); an open one computed now under `choice`, what it leaves out taken from the
/// default policy (a draft), with the restatements of the closed months right before it.
pub async fn statement(pool: &PgPool, month: Month, choice: PolicyChoice) -> Result<Statement, LedgerError> {
    let mut conn = pool.acquire().await?;
    if let Some(c) = db::bills::closed(&mut conn, month).await? {
        let st = from_closed(month, &c)?;
        check_frozen_policy(month, st.bills.policy, choice)?;
        return Ok(st);
    }
    drop(conn);
    let policy = match choice.complete() {
        Some(p) => p,
        None => choice.or(default_policy(pool).await?),
    };
    // a line's days carry the team's finance codes of those days (a change mid-month splits its lines there); the
    // versions the month is computed with are kept with it, and a close freezes them
    let codes = super::finance_codes::book(&mut *pool.acquire().await?).await?;
    let bills = compute(pool, month, policy, choice.replicas, &codes).await?;
    let restatements = pending_restatements(pool, month).await?;
    let (adjustments, pending_adjustments) = {
        let mut conn = pool.acquire().await?;
        super::adjustments::for_open_month(&mut conn, month).await?
    };
    let all = db::teams::list(pool, &Scope::all()).await?;
    let last_day = month.next().first_day().pred_opt().unwrap_or(month.first_day());
    let teams = all
        .into_iter()
        .filter(|t| {
            bills.teams.iter().any(|b| b.team == t.id)
                || restatements.iter().any(|r| r.team == t.id)
                || adjustments.iter().chain(&pending_adjustments).any(|a| a.team == t.id)
        })
        .map(|t| (t.id, TeamInfo { name: t.name, owner: t.owner }))
        .collect();
    Ok(Statement {
        month,
        status: MonthStatus::Open,
        closed_at: None,
        closed_by: None,
        bills,
        restatements,
        teams,
        content_hash: None,
        close_override: None,
        layout: Layout::CURRENT,
        frozen: None,
        // the month's unit cost of inference is the statement cache's to add (it prices serving pod-hours with the
        // services' billing time zone: `crate::usecase::statements`)
        unit_cost: None,
        adjustments,
        pending_adjustments,
        finance_codes: codes.versions_for(month.first_day(), last_day),
    })
}

/// Whether `team` is a team of this statement or of the ledger at all: an export or statement asked for a team that
/// is neither is an unknown team (a typo), not a team without lines.
pub async fn team_known(pool: &PgPool, st: &Statement, team: &TeamId) -> Result<bool, LedgerError> {
    if st.team_ids().contains(&team.as_str()) {
        return Ok(true);
    }
    let mut conn = pool.acquire().await?;
    Ok(db::teams::get(&mut conn, team).await?.is_some())
}

type RestateKey = (String, String, String, String, Option<crate::money::RatePerCardHour>);

fn restate_key(r: &RestatementLine) -> RestateKey {
    (r.team.clone(), r.namespace.clone(), r.gpu_model.clone(), r.kind.clone(), r.rate)
}

/// Restatements on open month `month`: for each closed month in the unbroken run of closed months right before
/// it, what it would bill now minus what it billed when closed, minus what later closed statements already
/// carried.
async fn pending_restatements(pool: &PgPool, month: Month) -> Result<Vec<RestatementLine>, LedgerError> {
    let mut conn = pool.acquire().await?;
    let closed = db::bills::closed_before(&mut conn, month).await?;
    let mut chain = Vec::new();
    let mut expect = month.prev();
    for c in &closed {
        if c.month != expect.to_string() {
            break;
        }
        chain.push((expect, read_snapshot(c)?));
        expect = expect.prev();
    }
    let mut out = Vec::new();
    for (i, (c_month, snap)) in chain.iter().enumerate() {
        // under the codes it was closed with: a version dated into it later moves no line of it (none, for a month
        // closed before codes existed)
        let frozen_codes = FinanceCodeBook::new(snap.finance_codes.iter().cloned());
        let recomputed = compute(pool, *c_month, snap.bills.policy, None, &frozen_codes).await?;
        let mut delta: BTreeMap<RestateKey, RestatementLine> =
            restate_month(&snap.bills, &recomputed).into_iter().map(|r| (restate_key(&r), r)).collect();
        // statements closed after c_month (earlier in `chain`) froze part of the difference already
        for (_, later) in &chain[..i] {
            for frozen in later.restatements.iter().filter(|r| r.original_month == Some(*c_month)) {
                let e = delta.entry(restate_key(frozen)).or_insert_with(|| RestatementLine {
                    card_hours_delta: Default::default(),
                    effective_card_hours_delta: Default::default(),
                    unmetered_card_hours_delta: Default::default(),
                    amount_delta: Money::ZERO,
                    ..frozen.clone()
                });
                e.card_hours_delta -= frozen.card_hours_delta;
                e.effective_card_hours_delta -= frozen.effective_card_hours_delta;
                e.unmetered_card_hours_delta -= frozen.unmetered_card_hours_delta;
                e.amount_delta = e.amount_delta - frozen.amount_delta;
            }
        }
        out.extend(delta.into_values().filter(|r| !(r.amount_delta.is_zero() && r.card_hours_delta.is_zero())).map(
            |mut r| {
                r.original_month = Some(*c_month);
                r
            },
        ));
    }
    Ok(out)
}

/// Closes an ended month: its statement (with the restatements it carries) becomes immutable. A month that is not
/// complete ([`crate::usecase::readiness`]) is refused with what stands in the way, unless the request overrides it with a
/// reason: the reason and the blockers are then audited and frozen onto the statement. `extras` computes what the
/// close freezes besides the bills (the PDF's idle list, utilization, coverage, budgets, previous month), once the
/// month is known to close.
pub(super) async fn close<E: From<LedgerError> + From<sqlx::Error>>(
    pool: &PgPool,
    month: Month,
    req: CloseRequest,
    tz: chrono_tz::Tz,
    actor: &str,
    extras: impl AsyncFnOnce() -> Result<FrozenExtras, E>,
) -> Result<Statement, E> {
    if month.bounds(tz).1 > Utc::now() {
        return Err(LedgerError::NotEnded(month).into());
    }
    let reason = match req.override_reason.as_deref() {
        Some(r) => Some(
            crate::validate::text("override.reason", r.trim(), OVERRIDE_REASON_MAX)
                .map_err(LedgerError::OverrideReason)?,
        ),
        None => None,
    };
    // one close of a month at a time; a concurrent one waits without holding a connection this one needs
    let mut tx = db::turns::begin_holding(pool, &format!("close:{month}")).await?;
    if db::bills::closed(&mut tx, month).await?.is_some() {
        return Err(LedgerError::AlreadyClosed(month).into());
    }
    let st = statement(pool, month, PolicyChoice::exactly(req.policy)).await?;
    let ready = crate::usecase::readiness::readiness(pool, month, tz, &st.bills, Utc::now()).await?;
    let close_override = match (ready.ready, reason) {
        (true, _) => None,
        (false, None) => return Err(LedgerError::NotReady(Box::new(ready)).into()),
        (false, Some(reason)) => Some(CloseOverride { reason, by: actor.to_string(), blockers: ready.blockers }),
    };
    // every figure the representations print besides the bills, frozen with them
    let extras = extras().await?;
    let snapshot = Snapshot {
        version: SNAPSHOT_VERSION,
        layout: Some(Layout::CURRENT),
        bills: st.bills.clone(),
        restatements: st.restatements.clone(),
        teams: st.teams.clone(),
        close_override: close_override.clone(),
        extras: Some(extras),
        // approvals booked to this month wait for this close's lock: these are all of them
        adjustments: st.adjustments.clone(),
        finance_codes: st.finance_codes.clone(),
    };
    let value = serde_json::to_value(&snapshot).map_err(|e| LedgerError::Snapshot(month.to_string(), e))?;
    // what is stored must read back: a figure JSON cannot hold (a NaN is written as null) would leave the month
    // unreadable for good
    serde_json::from_value::<Snapshot>(value.clone()).map_err(|e| LedgerError::Snapshot(month.to_string(), e))?;
    let mut summary = serde_json::json!({
        "policy": st.bills.policy, "capacity_cost": st.bills.capacity_cost, "allocated": st.bills.allocated,
        "not_offered": st.bills.not_offered,
        "teams": st.bills.teams.iter().map(|t| (t.team.clone(), t.total)).collect::<BTreeMap<_, _>>(),
    });
    if st.has_adjustments() {
        summary["adjustments"] =
            serde_json::json!(st.adjustments.iter().map(|a| (a.line_id(), a.amount)).collect::<BTreeMap<_, _>>());
    }
    if let Some(o) = &close_override {
        summary["override"] = serde_json::json!({"reason": o.reason, "blockers": o.blockers});
    }
    let action = if close_override.is_some() { "month.close_override" } else { "month.close" };
    // the one door into closed_months: the row and its audit entry, together (close_month, SECURITY DEFINER)
    if !db::bills::insert_closed(&mut tx, month, actor, &value, action, &summary).await? {
        return Err(LedgerError::AlreadyClosed(month).into());
    }
    let closed = db::bills::closed(&mut tx, month).await?.ok_or(LedgerError::AlreadyClosed(month))?;
    let st = from_closed(month, &closed)?;
    // the signed close event and its deliveries, in this transaction (an outbox: no close without its event, no
    // event of a close rolled back); built from the statement as it reads back, so its hashes are of what is served
    super::close_events::record(&mut tx, &st).await?;
    tx.commit().await?;
    Ok(st)
}

/// Verifies `month`'s stored snapshot against its content hash in the database (the snapshot is hashed there, not
/// sent): `Ok` when it is intact or the month is not closed.
pub async fn verify_closed(pool: &PgPool, month: Month) -> Result<(), LedgerError> {
    match db::bills::closed_hashes(pool, month).await? {
        Some((stored, actual)) if stored != actual => Err(integrity::mismatch(&month.to_string(), &stored, &actual)),
        _ => Ok(()),
    }
}
