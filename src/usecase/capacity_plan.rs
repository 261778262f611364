//! Capacity planning (SPEC §10, seed 000 §31.5 用数据支撑采购): per GPU model in a month, the capacity, the
//! allocation rate, the Pending card-hours and waits seen, and the what-if — the month's GPU pods replayed on
//! the capacity plus N cards — labelled an estimate. For global readers.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Error, Services, global_only};
use crate::access::Scope;
use crate::billing::Month;
use crate::db;
use crate::metering::{PodPhases, wait_stats};
use crate::waste::{ReplayOutcome, ReplayPod, what_if};

/// The most cards a what-if adds.
pub const MAX_EXTRA_CARDS: u32 = 10_000;

/// One GPU model's month.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ModelPlan {
    pub gpu_model: String,
    /// The cards the model had on average over the hours it had any.
    pub capacity_cards: f64,
    pub capacity_card_hours: f64,
    pub gpu_hours: f64,
    /// GPU-hours ÷ capacity card-hours.
    pub allocation_rate: Option<f64>,
    /// ∫ q·f while Pending of the pods on the model (pods not yet bound to a node are under `unknown`).
    pub pending_card_hours: f64,
    /// Pods first Running in the month on the model.
    pub pods_started: u64,
    pub pods_waited: u64,
    pub median_wait_seconds: Option<f64>,
    pub p90_wait_seconds: Option<f64>,
    /// The month replayed on the capacity and on N more cards.
    pub what_if: WhatIfView,
}

/// One replay of the month, waits in seconds like the figures seen.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ReplayView {
    /// The capacity replayed on, in cards.
    pub capacity_cards: f64,
    /// Σ cards × wait over the replayed pods.
    pub pending_card_hours: f64,
    pub pods_started: u64,
    pub pods_waited: u64,
    pub median_wait_seconds: Option<f64>,
    pub p90_wait_seconds: Option<f64>,
    /// Pods larger than the capacity: they never start.
    pub never_ran: u64,
}

impl From<&ReplayOutcome> for ReplayView {
    fn from(o: &ReplayOutcome) -> Self {
        let seconds = |ms: Option<i64>| ms.map(|ms| ms as f64 / 1000.0);
        ReplayView {
            capacity_cards: o.capacity_cards,
            pending_card_hours: o.pending_card_hours,
            pods_started: o.waits.pods_started,
            pods_waited: o.waits.pods_waited,
            median_wait_seconds: seconds(o.waits.median_wait_ms),
            p90_wait_seconds: seconds(o.waits.p90_wait_ms),
            never_ran: o.waits.never_ran,
        }
    }
}

/// The replay on the capacity beside the replay on N more cards.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct WhatIfView {
    pub extra_cards: u32,
    pub today: ReplayView,
    pub with_extra: ReplayView,
    /// today's Pending card-hours − with the extra cards'.
    pub saved_pending_card_hours: f64,
}

/// `GET /reports/capacity-plan`.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct CapacityPlan {
    pub month: String,
    pub extra_cards: u32,
    /// Always true: the replay knows nothing of nodes, priorities or preemption; pods restarted under one name
    /// run as one.
    pub estimate: bool,
    pub models: Vec<ModelPlan>,
}

/// The month's capacity plan with `extra` more cards per model.
pub async fn capacity_plan(s: &Services, scope: &Scope, month: Month, extra: u32) -> Result<CapacityPlan, Error> {
    global_only(scope)?;
    if extra > MAX_EXTRA_CARDS {
        return Err(Error::invalid("extra_cards", format!("at most {MAX_EXTRA_CARDS}")));
    }
    let bounds = month.bounds(s.billing_tz);
    let mut conn = s.pool.acquire().await?;
    let capacity = db::waits::model_capacity(&mut conn, bounds).await?;
    let pending: BTreeMap<String, f64> = db::waits::pending_by_model(&mut conn, bounds).await?.into_iter().collect();
    let mut waits: BTreeMap<String, Vec<PodPhases>> = BTreeMap::new();
    for p in db::waits::pod_waits(&mut conn, bounds).await? {
        waits.entry(p.gpu_model).or_default().push(PodPhases {
            first_pending_ms: p.first_pending.map(|t| t.timestamp_millis()),
            first_running_ms: p.first_running.map(|t| t.timestamp_millis()),
            last_seen_ms: p.last_seen.timestamp_millis(),
        });
    }
    let mut pods: BTreeMap<String, Vec<ReplayPod>> = BTreeMap::new();
    for u in db::waits::replay_use(&mut conn, bounds).await? {
        if u.cards <= 0.0 {
            continue;
        }
        pods.entry(u.gpu_model).or_default().push(ReplayPod {
            queue: u.queue.unwrap_or_else(|| format!("namespace/{}", u.namespace)),
            arrival_ms: u.arrival.timestamp_millis(),
            cards: u.cards,
            run_ms: (u.gpu_seconds / u.cards * 1000.0).round() as i64,
        });
    }
    let models = capacity
        .into_iter()
        .map(|(gpu_model, card_seconds, hours, gpu_seconds)| {
            let capacity_cards = if hours > 0 { card_seconds / 3600.0 / hours as f64 } else { 0.0 };
            let stats = wait_stats(waits.get(&gpu_model).into_iter().flatten().filter_map(PodPhases::wait));
            let replay = pods.get(&gpu_model).map(Vec::as_slice).unwrap_or(&[]);
            ModelPlan {
                capacity_cards,
                capacity_card_hours: card_seconds / 3600.0,
                gpu_hours: gpu_seconds / 3600.0,
                allocation_rate: (card_seconds > 0.0).then(|| gpu_seconds / card_seconds),
                pending_card_hours: pending.get(&gpu_model).copied().unwrap_or(0.0) / 3600.0,
                pods_started: stats.pods_started,
                pods_waited: stats.pods_waited,
                median_wait_seconds: stats.median_wait_ms.map(|ms| ms as f64 / 1000.0),
                p90_wait_seconds: stats.p90_wait_ms.map(|ms| ms as f64 / 1000.0),
                what_if: {
                    let w = what_if(replay, capacity_cards, extra);
                    WhatIfView {
                        extra_cards: w.extra_cards,
                        today: (&w.today).into(),
                        with_extra: (&w.with_extra).into(),
                        saved_pending_card_hours: w.saved_pending_card_hours,
                    }
                },
                gpu_model,
            }
        })
        .collect();
    Ok(CapacityPlan { month: month.to_string(), extra_cards: extra, estimate: true, models })
}
