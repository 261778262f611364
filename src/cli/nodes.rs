//! `cardhour nodes`: what configuration says of a node whose cards, replicas, model or sharing nothing on the
//! node tells (no DCGM device, no GPU feature discovery label). The next ingest of an hour meters it so:
//! re-ingest an open month's hours to restate them; a closed month stays as it was frozen. Through the use cases
//! ([`usecase::nodes`]): the API's checks and audit, the operator as the writer.

use clap::Subcommand;

use super::config::DatabaseArgs;
use super::{operator, services};
use crate::access::Scope;
use crate::metering::SharingSetting;
use crate::usecase::{self, nodes::NodeSettingsView};
use crate::validate;

#[derive(Debug, Subcommand)]
pub enum NodesCommand {
    /// Set a node's cards, replicas, GPU model or sharing (flags left out are cleared; none at all removes it).
    Set {
        #[command(flatten)]
        db: DatabaseArgs,
        #[arg(long)]
        cluster: validate::ClusterName,
        /// The node's name as kube-state-metrics writes it.
        #[arg(long, value_parser = valid_node)]
        node: String,
        /// Physical cards.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
        cards: Option<u32>,
        /// Time-slicing or MPS replicas per card (cards = advertised units ÷ replicas).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
        replicas: Option<u32>,
        /// The GPU model (as DCGM names it, e.g. "NVIDIA L40S"; the API's rule: not `unknown`, at most 100
        /// characters).
        #[arg(long)]
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
        #[arg(long)]
        cluster: Option<validate::ClusterName>,
    },
}

fn valid_node(s: &str) -> Result<String, String> {
    validate::node_name("node", s).map_err(|e| e.message)
}

pub async fn run(cmd: NodesCommand) -> anyhow::Result<()> {
    match cmd {
        NodesCommand::Set { db: d, cluster, node, cards, replicas, gpu_model, sharing, actor } => {
            let sv = services(&d, 2).await?;
            let asked =
                NodeSettingsView { cards, replicas, gpu_model, sharing: sharing.map(|s| s.as_str().to_string()) };
            let saved = usecase::nodes::assign(&sv, &operator(actor).writer(), cluster.as_str(), &node, &asked).await?;
            println!(
                "{cluster}/{node}: {}; ingest its hours again to restate an open month",
                serde_json::to_string(&saved)?
            );
        }
        NodesCommand::List { db: d, cluster } => {
            let sv = services(&d, 2).await?;
            let rows = usecase::nodes::configured(&sv, &Scope::all(), cluster.as_ref()).await?;
            println!("{}", serde_json::to_string_pretty(&rows)?);
        }
    }
    Ok(())
}
