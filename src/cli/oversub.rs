//! `cardhour oversubscription`: the cards' worth and the card memory promised over the physical cards per node,
//! GPU model and cluster per day, with the same cards' utilization beside it (SPEC §7; the API's
//! `/reports/oversubscription`), through the same use case and its range (with its bounds).

use super::config::DatabaseArgs;
use super::services;
use crate::access::Scope;
use crate::usecase::reports;
use crate::validate;
use crate::waste::OversubscriptionRow;

#[derive(Debug, clap::Args)]
pub struct OversubscriptionArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// Start, inclusive: a date (a day in the billing time zone) or a time with or without seconds and offset;
    /// without an offset, billing time zone.
    #[arg(long, value_parser = valid_time)]
    pub from: validate::TimeInput,
    /// End, exclusive; read as `--from`.
    #[arg(long, value_parser = valid_time)]
    pub to: validate::TimeInput,
    /// Only this cluster (default: all).
    #[arg(long)]
    pub cluster: Option<validate::ClusterName>,
    /// `text` (one line per node and day, then per model and per cluster: compute and memory promised and their
    /// ratios, busy, utilization, and the card-hours of unknown memory where any) or `json`.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
}

fn valid_time(s: &str) -> Result<validate::TimeInput, String> {
    validate::TimeInput::parse("time", s).map_err(|e| e.message)
}

fn line(r: &OversubscriptionRow) -> String {
    let pct = |x: Option<f64>| x.map_or_else(|| "—".to_string(), |x| format!("{:.1} %", 100.0 * x));
    let what = match (&r.node, &r.gpu_model) {
        (Some(n), Some(m)) => format!("{} {n} ({m})", r.cluster),
        (None, Some(m)) => format!("{} {m}", r.cluster),
        _ => r.cluster.clone(),
    };
    let ratio = |x: Option<f64>| x.map_or_else(|| "—".to_string(), |x| format!("{x:.2}"));
    let unknown = if r.unknown_memory_card_hours > 0.0 {
        format!("  memory unknown for {:.3} h", r.unknown_memory_card_hours)
    } else {
        String::new()
    };
    format!(
        "{}  {what:<50} cards {:>9.3} h  promised {:>9.3} h  ratio {:>6}  memory {:>9.3} h  ratio {:>6}  busy {:>7}  \
         utilization {:>7}{unknown}",
        r.day,
        r.card_hours,
        r.promised_card_hours,
        ratio(r.compute_ratio),
        r.promised_memory_card_hours,
        ratio(r.memory_ratio),
        pct(r.busy),
        pct(r.utilization),
    )
}

pub async fn run(a: OversubscriptionArgs) -> anyhow::Result<()> {
    let sv = services(&a.db, 2).await?;
    let (from, to) = reports::oversubscription_range(Some(a.from), Some(a.to), sv.billing_tz, chrono::Utc::now())
        .map_err(|e| anyhow::anyhow!("--{}: {}", e.field, e.message))?;
    let report = reports::oversubscription(&sv, &Scope::all(), from, to, a.cluster.as_ref()).await?;
    if a.format == "json" {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for r in report.nodes.iter().chain(&report.gpu_models).chain(&report.clusters) {
            println!("{}", line(r));
        }
    }
    Ok(())
}
