//! Nodes finance can fix without the command line (issue 33): the nodes a month's data marks — a GPU model nothing
//! names (its cards billed at nothing), cards that could not be counted (taken at face value) — and assigning a
//! node's model, cards or replicas (what `cardhour nodes set` does), audited; with what the change will move —
//! GPU-hours and ¥ per team, the capacity cost and the unallocated part — computed before anything is saved
//! ([`preview`]). A setting takes effect when the node's hours are metered again: an open month's bills move then;
//! a closed month stays as frozen and the difference appears as restatements on the next open month.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::{Error, Services, global_only};
use crate::access::{Scope, Writer};
use crate::billing::rebill::{CapacityMove, LineMove, rebill};
use crate::billing::{Month, PolicyChoice};
use crate::db;
use crate::ledger::MonthStatus;
use crate::metering::NodeSettings;
use crate::money::{Money, RatePerCardHour, card_hours_from_seconds};
use crate::validate::{self, ClusterName, Invalid};

/// The anomaly kinds that mark a node finance can settle by its settings.
pub const MARKS: [&str; 3] = ["unknown_gpu_model", "unverified_node", "default_replicas"];

/// A node a month's data marks.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct MarkedNode {
    pub cluster: String,
    pub node: String,
    /// `unknown_gpu_model`, `unverified_node` or `default_replicas` (the glossary's `anomaly.*` says it in words).
    pub kind: String,
    pub hours: i64,
    /// The model its capacity was stored under last in the month (`unknown` when nothing named it).
    pub gpu_model: Option<String>,
    /// GPU-hours held on it and its capacity card-hours in the month.
    #[schema(value_type = String)]
    pub held_card_hours: Decimal,
    #[schema(value_type = String)]
    pub capacity_card_hours: Decimal,
    /// What configuration says of it now.
    pub settings: Option<NodeSettingsView>,
}

/// A node's settings by their API names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeSettingsView {
    #[schema(minimum = 1, maximum = 1024)]
    #[serde(default, deserialize_with = "whole_number")]
    pub cards: Option<u32>,
    #[schema(minimum = 1, maximum = 1024)]
    #[serde(default, deserialize_with = "whole_number")]
    pub replicas: Option<u32>,
    #[schema(max_length = 100)]
    pub gpu_model: Option<String>,
    /// `none`, `time-slicing`, `mps` or `hami` (empty: not set).
    #[schema(pattern = "^(none|time-slicing|mps|hami)?$")]
    pub sharing: Option<String>,
}

/// A count as JSON Schema's `integer` means it: any number without a fraction, `8` or `8.0` alike.
fn whole_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    use serde::de::Error as _;
    let Some(n) = Option::<f64>::deserialize(d)? else { return Ok(None) };
    if n.fract() != 0.0 || !(0.0..=f64::from(u32::MAX)).contains(&n) {
        return Err(D::Error::custom(format!("must be a whole number from 0 to {}, got {n}", u32::MAX)));
    }
    Ok(Some(n as u32))
}

impl From<&NodeSettings> for NodeSettingsView {
    fn from(s: &NodeSettings) -> Self {
        NodeSettingsView {
            cards: s.cards,
            replicas: s.replicas,
            gpu_model: s.gpu_model.clone(),
            sharing: s.sharing.map(|x| x.as_str().to_string()),
        }
    }
}

/// The nodes `month`'s data marks, with what configuration says of each (global readers).
pub async fn marked(s: &Services, scope: &Scope, month: Month) -> Result<Vec<MarkedNode>, Error> {
    global_only(scope)?;
    let (from, to) = month.bounds(s.billing_tz);
    let kinds: Vec<String> = MARKS.iter().map(|k| k.to_string()).collect();
    let rows = db::nodes::marked(&s.pool, from, to, &kinds).await?;
    let mut conn = s.pool.acquire().await?;
    let settings = db::nodes::list(&mut conn, None).await?;
    Ok(rows
        .into_iter()
        .map(|r| MarkedNode {
            settings: settings
                .iter()
                .find(|x| x.cluster == r.cluster && x.node == r.node)
                .map(|x| NodeSettingsView::from(&x.settings())),
            held_card_hours: card_hours_from_seconds(r.held_card_seconds),
            capacity_card_hours: card_hours_from_seconds(r.capacity_card_seconds),
            cluster: r.cluster,
            node: r.node,
            kind: r.kind,
            hours: r.hours,
            gpu_model: r.gpu_model,
        })
        .collect())
}

/// The nodes whose settings configuration holds (of `cluster`, else every cluster's); cluster-wide readers only.
pub async fn configured(
    s: &Services,
    scope: &Scope,
    cluster: Option<&ClusterName>,
) -> Result<Vec<db::nodes::StoredNodeSettings>, Error> {
    global_only(scope)?;
    let mut conn = s.pool.acquire().await?;
    Ok(db::nodes::list(&mut conn, cluster.map(ClusterName::as_str)).await?)
}

/// A node's settings as asked (a form or a JSON body, every field text or absent), checked: cluster and node
/// names, cards and replicas 1–1024, a model that is not `unknown`, a sharing of `none`, `time-slicing`, `mps`,
/// `hami`. Every bad field is listed.
pub fn check(
    cluster: &str,
    node: &str,
    asked: &NodeSettingsView,
) -> Result<(ClusterName, String, NodeSettings), Error> {
    let mut problems = Vec::new();
    let cluster = ClusterName::parse("cluster", cluster).map_err(|e| problems.push(e)).ok();
    let node = validate::node_name("node", node).map_err(|e| problems.push(e)).ok();
    for (field, v) in [("cards", asked.cards), ("replicas", asked.replicas)] {
        if let Some(v) = v
            && !(1..=1024).contains(&v)
        {
            problems.push(Invalid::new(field, format!("must be between 1 and 1024, got {v}")));
        }
    }
    let gpu_model = match asked.gpu_model.as_deref().map(str::trim).filter(|m| !m.is_empty()) {
        Some(m) if m.eq_ignore_ascii_case("unknown") => {
            problems.push(Invalid::new("gpu_model", "name the model (e.g. NVIDIA L40S), not `unknown`"));
            None
        }
        Some(m) => validate::model_name("gpu_model", m).map_err(|e| problems.push(e)).ok(),
        None => None,
    };
    let sharing = match asked.sharing.as_deref().filter(|s| !s.is_empty()) {
        Some(s) => s.parse().map_err(|e: String| problems.push(Invalid::new("sharing", e))).ok(),
        None => None,
    };
    match (cluster, node, problems.is_empty()) {
        (Some(c), Some(n), true) => {
            Ok((c, n, NodeSettings { cards: asked.cards, replicas: asked.replicas, gpu_model, sharing }))
        }
        _ => Err(Error::Invalid(problems)),
    }
}

/// One team's figures before and after a node's change.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TeamMove {
    pub team: String,
    pub name: String,
    #[schema(value_type = String)]
    pub card_hours_before: Decimal,
    #[schema(value_type = String)]
    pub card_hours_after: Decimal,
    pub total_before: Money,
    pub total_after: Money,
    pub delta: Money,
}

/// What a node's change will move in one month, before it is saved.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct NodePreview {
    pub cluster: String,
    pub node: String,
    #[schema(value_type = String, example = "2026-11")]
    pub month: Month,
    pub settings: NodeSettingsView,
    /// A closed month stays as frozen: these moves become restatements on the next open month once its hours are
    /// metered again.
    pub closed: bool,
    /// The teams whose figures move (GPU-hours or ¥).
    pub teams: Vec<TeamMove>,
    #[schema(value_type = String)]
    pub capacity_card_hours_before: Decimal,
    #[schema(value_type = String)]
    pub capacity_card_hours_after: Decimal,
    pub capacity_cost_before: Money,
    pub capacity_cost_after: Money,
    pub unallocated_before: Money,
    pub unallocated_after: Money,
    pub platform_kept_before: Money,
    pub platform_kept_after: Money,
}

/// What setting `settings` on `cluster`/`node` will move in `month` once its hours are metered again, under the
/// month's policy (an open month: `choice`, the draft's; a closed one: its frozen policy), computed from the
/// stored hours of the node before anything is saved (global readers). A model is set where nothing named one
/// (`unknown`: DCGM and GPU feature discovery win over configuration); cards and replicas re-count a node whose
/// whole-card and time-sliced units were taken at face value (a unit = 1 / replicas of a card, or cards /
/// advertised units); MIG and HAMi units keep their fractions.
pub async fn preview(
    s: &Services,
    scope: &Scope,
    month: Month,
    choice: PolicyChoice,
    cluster: &str,
    node: &str,
    asked: &NodeSettingsView,
) -> Result<NodePreview, Error> {
    global_only(scope)?;
    let (cluster, node, settings) = check(cluster, node, asked)?;
    let st = super::statements::statement(s, month, choice).await?;
    let (from, to) = month.bounds(s.billing_tz);
    let usage = db::nodes::usage(&s.pool, &cluster, &node, from, to).await?;
    let capacity = db::nodes::capacity(&s.pool, &cluster, &node, from, to).await?;
    let book = super::idle::rate_book(s).await?;
    // the codes the statement's lines were computed with (a closed month's own)
    let codes = crate::billing::FinanceCodeBook::new(st.finance_codes.iter().cloned());
    let day = |t: DateTime<Utc>| t.with_timezone(&s.billing_tz).date_naive();
    // advertised units per hour at face value: the cards stored for the node in that hour
    let stored_cards: BTreeMap<DateTime<Utc>, f64> = capacity.iter().map(|c| (c.hour, c.cards)).collect();
    let model_after = |m: &str| match (&settings.gpu_model, m) {
        (Some(set), "unknown") => set.clone(),
        _ => m.to_string(),
    };

    // (team, namespace, key, kind, rate) before → (key, kind, rate) after: card-seconds before and after
    type Priced = (String, String, Option<RatePerCardHour>);
    // (and the team's finance codes those days: the line of those codes moves)
    type MoveKey = (String, String, Priced, Priced, Option<crate::billing::FinanceCodes>);
    let mut usage_moves: BTreeMap<MoveKey, (f64, f64)> = BTreeMap::new();
    for u in &usage {
        let (key_before, rate_before) = book.price(&u.gpu_model, day(u.hour));
        let (key_after, rate_after) = book.price(&model_after(&u.gpu_model), day(u.hour));
        let shareable = matches!(u.kind.as_str(), "whole" | "timeslice");
        let fraction = match (shareable, settings.replicas, settings.cards, stored_cards.get(&u.hour)) {
            (true, Some(r), _, _) => 1.0 / f64::from(r),
            (true, None, Some(c), Some(&advertised)) if f64::from(c) < advertised => f64::from(c) / advertised,
            _ => u.fraction,
        };
        let kind_after = if shareable && fraction < 1.0 { "timeslice" } else { u.kind.as_str() };
        let seconds_after = u.gpu_seconds * fraction / u.fraction;
        let key = (
            u.team.clone(),
            u.namespace.clone(),
            (key_before, u.kind.clone(), rate_before),
            (key_after, kind_after.to_string(), rate_after),
            codes.at(&u.team, day(u.hour)).cloned(),
        );
        let e = usage_moves.entry(key).or_default();
        e.0 += u.gpu_seconds;
        e.1 += seconds_after;
    }
    let line_moves: Vec<LineMove> = usage_moves
        .into_iter()
        .map(|((team, namespace, from, to, finance), (before, after))| LineMove {
            team,
            namespace,
            from,
            to,
            card_hours_before: card_hours_from_seconds(before),
            card_hours_after: card_hours_from_seconds(after),
            finance,
        })
        .collect();

    type CapKey = (String, Option<RatePerCardHour>, String, Option<RatePerCardHour>);
    let mut cap_moves: BTreeMap<CapKey, [f64; 4]> = BTreeMap::new();
    for c in &capacity {
        let (kb, rb) = book.price(&c.gpu_model, day(c.hour));
        let (ka, ra) = book.price(&model_after(&c.gpu_model), day(c.hour));
        let cards_after = match (settings.cards, settings.replicas) {
            (Some(n), _) => f64::from(n),
            (None, Some(r)) => c.cards / f64::from(r),
            (None, None) => c.cards,
        };
        let scale = if c.cards > 0.0 { cards_after / c.cards } else { 1.0 };
        let e = cap_moves.entry((kb, rb, ka, ra)).or_default();
        e[0] += c.card_seconds;
        e[1] += c.card_seconds * scale;
        e[2] += c.offered_card_seconds;
        e[3] += c.offered_card_seconds * scale;
    }
    let capacity_moves: Vec<CapacityMove> = cap_moves
        .into_iter()
        .map(|((kb, rb, ka, ra), [before, after, offered_before, offered_after])| CapacityMove {
            from: (kb, rb),
            to: (ka, ra),
            card_hours_before: card_hours_from_seconds(before),
            card_hours_after: card_hours_from_seconds(after),
            offered_before: card_hours_from_seconds(offered_before),
            offered_after: card_hours_from_seconds(offered_after),
        })
        .collect();

    let before = &st.bills;
    let after = rebill(before, &line_moves, &capacity_moves);
    let hours = |b: &crate::billing::MonthBills, t: &str| {
        b.teams.iter().find(|x| x.team == t).map_or(Decimal::ZERO, |x| x.card_hours)
    };
    let total =
        |b: &crate::billing::MonthBills, t: &str| b.teams.iter().find(|x| x.team == t).map_or(Money::ZERO, |x| x.total);
    let mut teams: Vec<&str> = before.teams.iter().chain(&after.teams).map(|t| t.team.as_str()).collect();
    teams.sort_unstable();
    teams.dedup();
    let moves = teams
        .into_iter()
        .map(|t| TeamMove {
            team: t.to_string(),
            name: st.teams.get(t).map_or_else(|| t.to_string(), |i| i.name.clone()),
            card_hours_before: hours(before, t),
            card_hours_after: hours(&after, t),
            total_before: total(before, t),
            total_after: total(&after, t),
            delta: total(&after, t) - total(before, t),
        })
        .filter(|m| m.card_hours_before != m.card_hours_after || !m.delta.is_zero())
        .collect();
    let cap_hours = |b: &crate::billing::MonthBills| b.capacity.iter().map(|c| c.card_hours).sum::<Decimal>();
    Ok(NodePreview {
        cluster: cluster.into_string(),
        node,
        month,
        settings: NodeSettingsView::from(&settings),
        closed: st.status == MonthStatus::Closed,
        teams: moves,
        capacity_card_hours_before: cap_hours(before),
        capacity_card_hours_after: cap_hours(&after),
        capacity_cost_before: before.capacity_cost,
        capacity_cost_after: after.capacity_cost,
        unallocated_before: before.unallocated,
        unallocated_after: after.unallocated,
        platform_kept_before: before.platform_kept,
        platform_kept_after: after.platform_kept,
    })
}

/// Saves `cluster`/`node`'s settings by writer `by` (finance or admin: only a writer has one), audited in the
/// same transaction (`node.settings`, before and after); every field left out is cleared, none at all removes
/// them. The hours of the node take them when metered again (`cardhour ingest` over the month's hours, or the
/// worker's re-processing cycle).
pub async fn assign(
    s: &Services,
    by: &Writer,
    cluster: &str,
    node: &str,
    asked: &NodeSettingsView,
) -> Result<NodeSettingsView, Error> {
    let actor = &by.actor();
    let (cluster, node, settings) = check(cluster, node, asked)?;
    let mut tx = s.pool.begin().await?;
    db::nodes::set(&mut tx, &cluster, &node, &settings, actor).await?;
    tx.commit().await?;
    Ok(NodeSettingsView::from(&settings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked_field_by_field() {
        let asked = NodeSettingsView {
            cards: Some(0),
            replicas: Some(4),
            gpu_model: Some(" unknown ".into()),
            sharing: Some("slices".into()),
        };
        let Err(Error::Invalid(problems)) = check("c 1", "n1", &asked) else { panic!("refused") };
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(fields, ["cluster", "cards", "gpu_model", "sharing"]);
        let ok = NodeSettingsView {
            cards: Some(8),
            replicas: None,
            gpu_model: Some(" NVIDIA L40S ".into()),
            sharing: Some("time-slicing".into()),
        };
        let (c, n, s) = check("c1", "gpu-node-1", &ok).unwrap();
        assert_eq!(
            (c.as_str(), n.as_str(), s.gpu_model.as_deref(), s.cards),
            ("c1", "gpu-node-1", Some("NVIDIA L40S"), Some(8))
        );
        // one model rule for the API, the portal and `cardhour nodes set`: at most 100 characters
        let model = |m: String| NodeSettingsView { gpu_model: Some(m), ..ok.clone() };
        assert!(check("c1", "n1", &model("G".repeat(validate::MODEL_NAME_MAX))).is_ok());
        let Err(Error::Invalid(p)) = check("c1", "n1", &model("G".repeat(validate::MODEL_NAME_MAX + 1))) else {
            panic!("a 101-character model is refused")
        };
        assert_eq!(p[0].field, "gpu_model");
        assert_eq!(validate::MODEL_NAME_MAX, 100);
    }
}
