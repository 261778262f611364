//! `cardhour nodes`: what configuration says of a node whose cards, replicas, model or sharing nothing on the
//! node tells (no DCGM device, no GPU feature discovery label). The next ingest of an hour meters it so:
//! re-ingest an open month's hours to restate them; a closed month stays as it was frozen.

use anyhow::Context;
use clap::Subcommand;

use crate::config::DatabaseArgs;
use crate::db;
use crate::metering::{NodeSettings, SharingSetting};
use crate::validate;

#[derive(Debug, Subcommand)]
pub enum NodesCommand {
    /// Set a node's cards, replicas, GPU model or sharing (flags left out are cleared; none at all removes it).
    Set {
        #[command(flatten)]
        db: DatabaseArgs,
        #[arg(long, value_parser = valid_cluster)]
        cluster: String,
        /// The node's name as kube-state-metrics writes it.
        #[arg(long, value_parser = valid_node)]
        node: String,
        /// Physical cards.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
        cards: Option<u32>,
        /// Time-slicing or MPS replicas per card (cards = advertised units ÷ replicas).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
        replicas: Option<u32>,
        /// The GPU model (as DCGM names it, e.g. "NVIDIA L40S").
        #[arg(long, value_parser = valid_model)]
        gpu_model: Option<String>,
        /// none, time-slicing, mps or hami.
        #[arg(long)]
        sharing: Option<SharingSetting>,
        /// Who sets it (the audit log's actor).
        #[arg(long, default_value = "cli")]
        actor: String,
    },
    /// List the configured nodes.
    List {
        #[command(flatten)]
        db: DatabaseArgs,
        #[arg(long, value_parser = valid_cluster)]
        cluster: Option<String>,
    },
}

fn valid_cluster(s: &str) -> Result<String, String> {
    validate::cluster("cluster", s).map_err(|e| e.message)
}

fn valid_node(s: &str) -> Result<String, String> {
    let t = s.trim();
    if t.is_empty() || t.len() > 253 || t.chars().any(char::is_control) {
        return Err(format!("`{s}` is not a node name (1–253 characters, no control characters)"));
    }
    Ok(t.to_string())
}

fn valid_model(s: &str) -> Result<String, String> {
    let t = s.trim();
    if t.is_empty() || t.len() > 200 || t.eq_ignore_ascii_case("unknown") {
        return Err(format!("`{s}` is not a GPU model (1–200 characters, not `unknown`)"));
    }
    Ok(t.to_string())
}

pub async fn run(cmd: NodesCommand) -> anyhow::Result<()> {
    match cmd {
        NodesCommand::Set { db: d, cluster, node, cards, replicas, gpu_model, sharing, actor } => {
            let pool = d.connect(2).await.context("cannot connect to the database")?;
            let settings = NodeSettings { cards, replicas, gpu_model, sharing };
            let mut tx = pool.begin().await?;
            db::nodes::set(&mut tx, &cluster, &node, &settings, &actor).await?;
            tx.commit().await?;
            println!(
                "{cluster}/{node}: {}; ingest its hours again to restate an open month",
                serde_json::to_string(&settings)?
            );
        }
        NodesCommand::List { db: d, cluster } => {
            let pool = d.connect(2).await.context("cannot connect to the database")?;
            let mut conn = pool.acquire().await?;
            let rows = db::nodes::list(&mut conn, cluster.as_deref()).await?;
            println!("{}", serde_json::to_string_pretty(&rows)?);
        }
    }
    Ok(())
}
