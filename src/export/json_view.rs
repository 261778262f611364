//! The JSON views of bills: a month at a glance and a team's statement, as the API answers them (and the OpenAPI
//! document describes them). Outside the API because the close event hashes a team's statement exactly as the API
//! serves it ([`team_statement_json`]): one function makes those bytes for both.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;

use super::{Layout, since};
use crate::access::Scope;
use crate::billing::{BillMode, BillPolicy, UnallocatedPolicy};
use crate::ledger::readiness::Blocker;
use crate::ledger::{CloseOverride, MonthStatus, Statement, UnitCostLine};
use crate::money::{Money, RatePerCardHour};

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PolicyView {
    pub mode: BillModeView,
    pub unallocated: UnallocatedView,
    /// How time-sliced replicas are billed: the settings in effect during the month (per cluster, or node pool,
    /// from a date; `fraction` where none is listed; cluster `*` in a draft previewed under one policy). Absent
    /// when the month has no time-sliced usage and no setting, and for a month closed before the policy existed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replicas: Option<Vec<crate::billing::ReplicaPolicyVersion>>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BillModeView {
    Showback,
    Chargeback,
    /// Reserved-quota billing (SPEC §10): each team's quota guarantees billed whether used or not.
    Reserved,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum UnallocatedView {
    KeptByPlatform,
    SpreadProportionally,
}

pub fn policy_view(b: &crate::billing::MonthBills) -> PolicyView {
    PolicyView { replicas: b.replica_policies.clone(), ..b.policy.into() }
}

impl From<BillPolicy> for PolicyView {
    fn from(p: BillPolicy) -> Self {
        PolicyView {
            replicas: None,
            mode: match p.mode {
                BillMode::Showback => BillModeView::Showback,
                BillMode::Chargeback => BillModeView::Chargeback,
                BillMode::Reserved => BillModeView::Reserved,
            },
            unallocated: match p.unallocated {
                UnallocatedPolicy::KeptByPlatform => UnallocatedView::KeptByPlatform,
                UnallocatedPolicy::SpreadProportionally => UnallocatedView::SpreadProportionally,
            },
        }
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TeamSummary {
    pub team: String,
    pub name: String,
    pub owner: Option<String>,
    #[schema(value_type = String)]
    pub card_hours: Decimal,
    #[schema(value_type = String)]
    pub effective_card_hours: Decimal,
    #[schema(value_type = String)]
    pub unmetered_card_hours: Decimal,
    /// Σ line amounts.
    pub allocated: Money,
    pub unallocated_share: Money,
    /// Σ restatement amounts of earlier closed months shown on this statement.
    pub restated: Money,
    /// Σ the team's approved adjustments on this statement (SPEC §11); absent from a statement without any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adjusted: Option<Money>,
    /// allocated + unallocated_share + restated + adjusted.
    pub total: Money,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct CapacityView {
    pub gpu_model: String,
    #[schema(value_type = String)]
    pub card_hours: Decimal,
    pub rate: Option<RatePerCardHour>,
    pub amount: Money,
    pub unpriced: bool,
    /// Of `card_hours`, those offered to workloads. Absent for a month closed before offered capacity was
    /// recorded (every card counted as offered then).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub offered_card_hours: Option<Decimal>,
    /// Those not offered: on cordoned nodes or unhealthy cards (absent as `offered_card_hours` is).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub not_offered_card_hours: Option<Decimal>,
    /// `rate × not_offered_card_hours`, kept by the platform (absent as `offered_card_hours` is).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_offered_amount: Option<Money>,
}

/// The month at a glance. Cluster-wide figures are absent for a team lead.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct MonthView {
    pub month: String,
    pub status: MonthStatus,
    pub closed_at: Option<DateTime<Utc>>,
    pub closed_by: Option<String>,
    /// The layout of this answer (2 on); absent for a month closed under layout 1, whose answer is exactly what
    /// it was then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout: Option<u32>,
    pub policy: PolicyView,
    pub teams: Vec<TeamSummary>,
    pub capacity: Option<Vec<CapacityView>>,
    pub capacity_cost: Option<Money>,
    pub allocated: Option<Money>,
    /// capacity_cost − not_offered − allocated: offered capacity no team used, never negative (usage above the
    /// counted capacity is `capacity_shortfall`; a month closed before it existed shows what it froze). What the
    /// policy spreads.
    pub unallocated: Option<Money>,
    /// What no team carries: not_offered, plus unallocated unless it is spread.
    pub platform_kept: Option<Money>,
    /// The cost of capacity not offered to workloads (cordoned nodes, unhealthy cards): kept by the platform,
    /// never spread; allocated + unallocated + not_offered = capacity_cost. Absent for a team lead and for a
    /// month closed before offered capacity was recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_offered: Option<Money>,
    /// What billing time-sliced replicas as whole cards recovered above their cards' cost: the platform's
    /// over-recovery, its own figure (never a negative `unallocated`). Absent when nothing was billed so, and for
    /// a team lead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over_recovery: Option<Money>,
    /// What the teams' usage cost above the counted capacity (usage on capacity never counted, or the rounding of
    /// many lines): its own figure, so `unallocated` is never negative and a spread never credits the teams their
    /// bills away. Teams carry their usage: Σ totals + platform_kept = capacity_cost + over_recovery +
    /// capacity_shortfall. Absent when there is none, and for a team lead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_shortfall: Option<Money>,
    /// Reserved-quota billing: what the reservations billed above the offered capacity's cost beyond any
    /// shortfall (guarantees promised over the cards there are): its own figure, never spread; Σ totals +
    /// platform_kept = capacity_cost + over_recovery + capacity_shortfall + over_commitment. Absent when there is
    /// none, and for a team lead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub over_commitment: Option<Money>,
    /// Σ the approved adjustments on this statement (the teams' `adjusted`): outside the capacity's
    /// reconciliation — Σ totals + platform_kept = capacity_cost + over_recovery + capacity_shortfall +
    /// over_commitment + Σ restated + adjusted. Absent from a statement without any, and for a team lead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adjusted: Option<Money>,
    /// A month closed although it was not complete: the reason, who closed it, and (global readers only) what
    /// stood in the way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub close_override: Option<OverrideView>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct OverrideView {
    pub reason: String,
    pub by: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blockers: Option<Vec<Blocker>>,
}

pub fn override_view(o: &CloseOverride, global: bool) -> OverrideView {
    OverrideView { reason: o.reason.clone(), by: o.by.clone(), blockers: global.then(|| o.blockers.clone()) }
}

pub fn team_summary(st: &Statement, team: &str) -> TeamSummary {
    let bill = st.bills.teams.iter().find(|t| t.team == team);
    let info = st.teams.get(team);
    TeamSummary {
        team: team.to_string(),
        name: info.map_or_else(|| team.to_string(), |i| i.name.clone()),
        owner: info.and_then(|i| i.owner.clone()),
        card_hours: bill.map_or(Decimal::ZERO, |b| b.card_hours),
        effective_card_hours: bill.map_or(Decimal::ZERO, |b| b.effective_card_hours),
        unmetered_card_hours: bill.map_or(Decimal::ZERO, |b| b.unmetered_card_hours),
        allocated: bill.map_or(Money::ZERO, |b| b.allocated),
        unallocated_share: bill.map_or(Money::ZERO, |b| b.unallocated_share),
        restated: st.team_restated(team),
        adjusted: st.adjusted_among(std::iter::once(team)).then(|| st.team_adjusted(team)),
        total: st.team_total(team),
    }
}

/// `layout` of a JSON view: from layout 2 on. A field added to a view in a later layout is filled the same way
/// ([`since`]), so a month frozen under an earlier layout keeps its bytes.
pub fn layout_field(st: &Statement) -> Option<u32> {
    since(st.layout, Layout::V2, || st.layout.number())
}

/// A JSON field of layout 2 on: `None` (absent) for a month frozen under layout 1.
pub fn layout2<T>(st: &Statement, value: Option<T>) -> Option<T> {
    since(st.layout, Layout::V2, || value).flatten()
}

/// Every team on a statement: with a bill or with restatements.
pub fn month_view(st: &Statement, scope: &Scope) -> MonthView {
    let global = scope.teams.is_none();
    let b = &st.bills;
    MonthView {
        month: st.month.to_string(),
        status: st.status,
        closed_at: st.closed_at,
        closed_by: st.closed_by.clone(),
        layout: layout_field(st),
        policy: policy_view(b),
        teams: st.team_ids().into_iter().filter(|t| scope.allows(t)).map(|t| team_summary(st, t)).collect(),
        capacity: global.then(|| {
            b.capacity
                .iter()
                .map(|c| CapacityView {
                    gpu_model: c.gpu_model.clone(),
                    card_hours: c.card_hours,
                    rate: c.rate,
                    amount: c.amount,
                    unpriced: c.unpriced,
                    // layout 2 on: absent from a month frozen under layout 1, whose bytes never change
                    offered_card_hours: layout2(st, c.not_offered_card_hours.map(|_| c.offered_card_hours())),
                    not_offered_card_hours: layout2(st, c.not_offered_card_hours),
                    not_offered_amount: layout2(st, c.not_offered_amount),
                })
                .collect()
        }),
        capacity_cost: global.then_some(b.capacity_cost),
        allocated: global.then_some(b.allocated),
        unallocated: global.then_some(b.unallocated),
        platform_kept: global.then_some(b.platform_kept),
        not_offered: layout2(st, b.not_offered.filter(|_| global)),
        over_recovery: b.over_recovery.filter(|_| global),
        capacity_shortfall: b.capacity_shortfall.filter(|_| global),
        over_commitment: b.over_commitment.filter(|_| global),
        adjusted: (global && st.has_adjustments()).then(|| st.adjustments.iter().map(|a| a.amount).sum()),
        close_override: st.close_override.as_ref().map(|o| override_view(o, global)),
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct LineView {
    /// The line's stable id (layout 6 on: `L-…`, the same on every face, in every render and after the close).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub namespace: String,
    pub gpu_model: String,
    /// whole, mig, timeslice, mps or hami; under reserved-quota billing also `reservation` (a quota scope's
    /// guarantee; `namespace` is the scope: a namespace, or `cluster_queue/<name>`, `volcano_queue/<name>`) and
    /// `reservation_use` (the card-hours used within it, credited back at the rate of the model that ran them —
    /// `gpu_model` is that model; a scope over its guarantee on several models shares the within pro rata).
    pub kind: String,
    #[schema(value_type = String)]
    pub card_hours: Decimal,
    #[schema(value_type = String)]
    pub effective_card_hours: Decimal,
    #[schema(value_type = String)]
    pub unmetered_card_hours: Decimal,
    /// The rate used (yuan per card-hour); `null` when the model has no rate (then `unpriced`).
    pub rate: Option<RatePerCardHour>,
    pub amount: Money,
    pub unpriced: bool,
    /// Time-sliced replicas billed as whole cards: the replica-hours `amount` is for (`card_hours` stays the
    /// physical share). Absent when billed by fraction.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub whole_card_hours: Option<Decimal>,
    /// Held on a node whose cards could not be counted (taken at face value, a unit a card): the hours are as
    /// the node advertised them until its configuration settles it. Absent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unverified_node: bool,
    /// A reservation line: the guaranteed card-hours it bills (`reservation`), or minus the card-hours used within
    /// the guarantee it credits (`reservation_use`); its GPU-hour fields are 0. Absent on usage lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub reserved_card_hours: Option<Decimal>,
    /// A `reservation` line's factor on the model's rate (`rate` = the model's rate × this, to 4 decimals).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub reservation_factor: Option<Decimal>,
    /// The team's finance codes on the line's days (SPEC §11): a change mid-month makes two lines. Absent without
    /// codes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finance_codes: Option<crate::billing::FinanceCodes>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct RestatementView {
    /// The line's stable id (layout 6 on: `R-…`, made of the month restated and the line it corrects).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The closed month restated.
    pub original_month: Option<String>,
    pub namespace: String,
    pub gpu_model: String,
    pub kind: String,
    pub rate: Option<RatePerCardHour>,
    #[schema(value_type = String)]
    pub card_hours_delta: Decimal,
    #[schema(value_type = String)]
    pub effective_card_hours_delta: Decimal,
    pub amount_delta: Money,
}

/// One model's unit cost of inference in the month for the team (layout 5 on): the figures of the unit-cost report
/// grouped by model (`GET /reports/unit-cost?group_by=model` over the month's billing days, the team's serving
/// pods), frozen with a closed month.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct UnitCostView {
    pub model: String,
    /// vllm, sglang, tgi or triton.
    pub engine: String,
    /// Cost of the hours that served tokens or requests, ¥ to the fen.
    pub serving_cost: Money,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub total_tokens: i64,
    pub requests: i64,
    /// ¥ per million input tokens, to 4 decimals; null without tokens.
    #[schema(value_type = Option<String>)]
    pub cost_per_million_input_tokens: Option<Decimal>,
    /// ¥ per million output tokens, to 4 decimals; null without tokens.
    #[schema(value_type = Option<String>)]
    pub cost_per_million_output_tokens: Option<Decimal>,
    /// ¥ per million tokens, input and output together, to 4 decimals; null without tokens (Triton counts none).
    #[schema(value_type = Option<String>)]
    pub cost_per_million_tokens: Option<Decimal>,
    /// ¥ per 1,000 successful requests, to 4 decimals.
    #[schema(value_type = Option<String>)]
    pub cost_per_thousand_requests: Option<Decimal>,
    /// Tokens served per GPU-hour of serving that served them, to 2 decimals.
    #[schema(value_type = Option<String>)]
    pub tokens_per_gpu_hour: Option<Decimal>,
    /// Cost of serving hours without traffic, ¥ to the fen: apart, never in the unit costs.
    pub idle_cost: Money,
    /// GPU-hours of serving without traffic.
    #[schema(value_type = String)]
    pub idle_gpu_hours: Decimal,
    /// Some hour held a GPU model without a rate: its cost is counted as 0.
    pub unpriced: bool,
}

impl From<&UnitCostLine> for UnitCostView {
    fn from(u: &UnitCostLine) -> Self {
        UnitCostView {
            model: u.model.clone(),
            engine: u.engine.clone(),
            serving_cost: u.serving_cost,
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            total_tokens: u.total_tokens,
            requests: u.requests,
            cost_per_million_input_tokens: u.cost_per_million_input_tokens,
            cost_per_million_output_tokens: u.cost_per_million_output_tokens,
            cost_per_million_tokens: u.cost_per_million_tokens,
            cost_per_thousand_requests: u.cost_per_thousand_requests,
            tokens_per_gpu_hour: u.tokens_per_gpu_hour,
            idle_cost: u.idle_cost,
            idle_gpu_hours: u.idle_gpu_hours,
            unpriced: u.unpriced,
        }
    }
}

/// One team's statement for a month.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct TeamStatementView {
    /// The statement's stable id, `<month>/<team>` (layout 6 on; the close event names it so).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "2026-11/nlp")]
    pub id: Option<String>,
    pub month: String,
    pub status: MonthStatus,
    pub closed_at: Option<DateTime<Utc>>,
    /// The layout of this answer (2 on); absent for a month closed under layout 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layout: Option<u32>,
    pub policy: PolicyView,
    #[serde(flatten)]
    pub summary: TeamSummary,
    /// The team's finance codes on the month's last day (SPEC §11): those of its lines not computed per day (its
    /// unallocated share, restatements and adjustments); each usage and reservation line has its own. Absent
    /// without codes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finance_codes: Option<crate::billing::FinanceCodes>,
    pub lines: Vec<LineView>,
    pub restatements: Vec<RestatementView>,
    /// The team's unit cost of inference of the month per model served (layout 5 on; frozen with the close).
    /// Absent for a team without serving pods and for a month closed before layout 5.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit_cost: Option<Vec<UnitCostView>>,
    /// The team's approved adjustments on this statement (SPEC §11), in `total`: each with its stable id
    /// (`ADJ-<n>`), the month it corrects (an earlier closed month: a restatement of it), reason, maker and
    /// checker. Absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub adjustments: Vec<AdjustmentView>,
    /// An open month's adjustments of the team awaiting approval: shown, in no total. Absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pending_adjustments: Vec<AdjustmentView>,
}

/// An adjustment on a statement.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AdjustmentView {
    /// Stable across renders and closes: `ADJ-<n>`.
    #[schema(example = "ADJ-12")]
    pub id: String,
    /// The month corrected.
    #[schema(example = "2026-11")]
    pub month: String,
    /// Yuan: negative a credit, positive a debit.
    pub amount: Money,
    pub reason: String,
    pub entered_by: String,
    pub entered_at: DateTime<Utc>,
    /// The checker (absent while pending).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approved_at: Option<DateTime<Utc>>,
}

impl From<&crate::ledger::Adjustment> for AdjustmentView {
    fn from(a: &crate::ledger::Adjustment) -> Self {
        AdjustmentView {
            id: a.line_id(),
            month: a.month.to_string(),
            amount: a.amount,
            reason: a.reason.clone(),
            entered_by: a.entered_by.clone(),
            entered_at: a.entered_at,
            approved_by: a.decided_by.clone().filter(|_| a.status == crate::ledger::AdjustmentStatus::Approved),
            approved_at: a.decided_at.filter(|_| a.status == crate::ledger::AdjustmentStatus::Approved),
        }
    }
}

/// The bytes of a team's statement as `GET /bills/{month}/teams/{team}` answers them (and the close event hashes).
pub fn team_statement_json(st: &Statement, team: &str) -> Result<Vec<u8>, serde_json::Error> {
    serde_json::to_vec(&team_statement_view(st, team))
}

pub fn team_statement_view(st: &Statement, team: &str) -> TeamStatementView {
    let bill = st.bills.teams.iter().find(|t| t.team == team);
    TeamStatementView {
        id: since(st.layout, Layout::V6, || format!("{}/{team}", st.month)),
        month: st.month.to_string(),
        status: st.status,
        closed_at: st.closed_at,
        layout: layout_field(st),
        policy: policy_view(&st.bills),
        summary: team_summary(st, team),
        finance_codes: st.month_end_codes(team).cloned(),
        lines: bill
            .map(|b| {
                b.lines
                    .iter()
                    .map(|l| LineView {
                        id: since(st.layout, Layout::V6, || crate::ledger::line_id::bill_line(team, l)),
                        namespace: l.namespace.clone(),
                        gpu_model: l.gpu_model.clone(),
                        kind: l.kind.clone(),
                        card_hours: l.card_hours,
                        effective_card_hours: l.effective_card_hours,
                        unmetered_card_hours: l.unmetered_card_hours,
                        rate: l.rate,
                        amount: l.amount,
                        unpriced: l.unpriced,
                        whole_card_hours: l.whole_card_hours,
                        unverified_node: l.unverified_node,
                        reserved_card_hours: l.reserved_card_hours,
                        reservation_factor: l.reservation_factor,
                        finance_codes: l.finance.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        restatements: st
            .restatements_of(team)
            .map(|r| RestatementView {
                id: since(st.layout, Layout::V6, || crate::ledger::line_id::restatement(r)),
                original_month: r.original_month.map(|m| m.to_string()),
                namespace: r.namespace.clone(),
                gpu_model: r.gpu_model.clone(),
                kind: r.kind.clone(),
                rate: r.rate,
                card_hours_delta: r.card_hours_delta,
                effective_card_hours_delta: r.effective_card_hours_delta,
                amount_delta: r.amount_delta,
            })
            .collect(),
        unit_cost: since(st.layout, Layout::V5, || st.unit_cost_of(team).iter().map(Into::into).collect::<Vec<_>>())
            .filter(|rows| !rows.is_empty()),
        adjustments: st.adjustments_of(team).map(Into::into).collect(),
        pending_adjustments: st.pending_adjustments_of(team).map(Into::into).collect(),
    }
}
