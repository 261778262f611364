//! `usage`, `idle` and `unit-cost`: stored GPU-hours, the idle-waste list and the unit cost of inference, as text,
//! JSON or CSV.

use anyhow::bail;
use chrono::Utc;

use super::usage_report;
use super::{IdleArgs, SummaryFormat, UnitCostArgs, UsageArgs, resolve_time, services};
use crate::access::Scope;
use crate::ingest::window;
use crate::usecase;

pub(super) async fn idle_cmd(a: IdleArgs) -> anyhow::Result<()> {
    let base = if a.short_term { crate::waste::IdleRule::SHORT_TERM } else { crate::waste::IdleRule::WEEKLY };
    let rule = crate::waste::IdleRule {
        max_utilization: a.max_utilization.unwrap_or(base.max_utilization),
        min_memory_mib: a.min_memory_mib,
    }
    .validate()
    .map_err(|(field, message)| anyhow::anyhow!("--{}: {message}", field.replace('_', "-")))?;
    let hours = a.hours.unwrap_or(if a.short_term { 2 } else { 168 });
    let sv = services(&a.db, 2).await?;
    let tz = sv.billing_tz;
    let to = match a.to {
        Some(t) => resolve_time("--to", t, tz)?,
        None => window::floor_hour(Utc::now()),
    };
    if window::floor_hour(to) != to {
        bail!("--to {} is not on a whole hour", to.to_rfc3339());
    }
    let list = usecase::idle::idle_report(&sv, to, hours, rule, !a.include_ended, &Scope::all()).await?;
    match a.format {
        SummaryFormat::Json => println!("{}", serde_json::to_string_pretty(&list)?),
        SummaryFormat::Text => {
            println!(
                "{} idle pods over the {hours} h before {} (utilization < {:.0} %, memory > {} MiB)",
                list.len(),
                to.to_rfc3339(),
                rule.max_utilization * 100.0,
                rule.min_memory_mib
            );
            let (spent, projected) = crate::waste::idle_totals(&list);
            println!(
                "spent idle in the window: {spent} yuan; projected for the pods still running: {projected} yuan/month"
            );
            for p in &list {
                println!(
                    "{:>10} yuan spent idle, {:>10} yuan/month projected  {:<12} {}/{}  {} × {:.3} cards, {:.1} h, {:.1} %, {:.0} MiB{}",
                    p.idle_spend.to_string(),
                    p.monthly_projection.map_or_else(|| "-".to_string(), |m| m.to_string()),
                    p.team,
                    p.namespace,
                    p.pod,
                    p.gpu_model,
                    p.cards_held,
                    p.hours_held,
                    p.average_utilization * 100.0,
                    p.peak_fb_used_mib,
                    if p.still_running { "" } else { " (ended)" }
                );
            }
        }
    }
    Ok(())
}

pub(super) async fn usage_cmd(a: UsageArgs) -> anyhow::Result<()> {
    let sv = services(&a.db, 2).await?;
    let tz = sv.billing_tz;
    let (from, to) = (resolve_time("--from", a.from, tz)?, resolve_time("--to", a.to, tz)?);
    if to <= from {
        bail!("--to {} must be after --from {}", to.to_rfc3339(), from.to_rfc3339());
    }
    let rows = usecase::usage::usage(&sv, &Scope::all(), from, to, a.group_by.into(), a.cluster.as_ref()).await?;
    print!("{}", usage_report::render(&rows, a.group_by.into(), a.format)?);
    Ok(())
}

pub(super) async fn unit_cost_cmd(a: UnitCostArgs) -> anyhow::Result<()> {
    let sv = services(&a.db, 2).await?;
    let (from, to) = usecase::unit_cost::range(a.from, a.to, sv.billing_tz, Utc::now())
        .map_err(|e| anyhow::anyhow!("--{}: {}", e.field, e.message))?;
    let report = usecase::unit_cost::report(&sv, &Scope::all(), from, to, a.group_by).await?;
    match a.format {
        SummaryFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        SummaryFormat::Text => {
            println!("unit cost of inference, billing days {from} .. {to} (exclusive), by {}", a.group_by.as_str());
            let f = |d: Option<rust_decimal::Decimal>| d.map_or_else(|| "-".to_string(), |d| d.to_string());
            for r in report.rows.iter().chain([&report.total]) {
                println!(
                    "{:<32} {:>14} tokens {:>10} requests  {:>12} yuan  {:>12} yuan/1M tokens  {:>12} yuan/1k requests  idle {} yuan",
                    match &r.engine {
                        Some(e) => format!("{}/{}", e, r.key),
                        None => r.key.clone(),
                    },
                    r.total_tokens,
                    r.requests,
                    r.serving_cost.to_string(),
                    f(r.cost_per_million_tokens),
                    f(r.cost_per_thousand_requests),
                    r.idle_cost
                );
            }
        }
    }
    Ok(())
}
