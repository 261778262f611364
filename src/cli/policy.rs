//! `cardhour policy`: how time-sliced replicas are billed, per cluster or node pool, from a date on (fraction, the
//! default, or whole-card), and which pool a node is in. Open months' drafts follow at once.

use clap::Subcommand;

use super::config::DatabaseArgs;
use super::{operator, services};
use crate::access::Scope;
use crate::billing::ReplicaBilling;
use crate::usecase;

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Bill a cluster's (or one node pool's) time-sliced replicas so from a date on. MPS replicas are always
    /// billed by fraction.
    Set {
        #[command(flatten)]
        db: DatabaseArgs,
        #[arg(long)]
        cluster: String,
        /// A node pool of the cluster (nodes join one with `policy pool`); its setting wins over the cluster's.
        #[arg(long)]
        pool: Option<String>,
        /// The first billing day it applies to (YYYY-MM-DD), like a rate's effective-from date.
        #[arg(long, value_parser = valid_date)]
        from: chrono::NaiveDate,
        /// fraction (a replica is 1/replicas of a card) or whole-card (each replica billed as a card).
        #[arg(long, value_parser = valid_replicas)]
        replicas: ReplicaBilling,
        /// Who sets it (the audit log's actor).
        #[arg(long, default_value = "cli")]
        actor: String,
    },
    /// Put a node into a node pool (or, without --pool, out of any).
    Pool {
        #[command(flatten)]
        db: DatabaseArgs,
        #[arg(long)]
        cluster: String,
        #[arg(long)]
        node: String,
        #[arg(long)]
        pool: Option<String>,
        #[arg(long, default_value = "cli")]
        actor: String,
    },
    /// List the replica billing settings.
    List {
        #[command(flatten)]
        db: DatabaseArgs,
    },
}

fn valid_date(s: &str) -> Result<chrono::NaiveDate, String> {
    crate::validate::parse_date("from", s).map_err(|e| e.message)
}

fn valid_replicas(s: &str) -> Result<ReplicaBilling, String> {
    ReplicaBilling::parse(s).map_err(|e| e.to_string())
}

pub async fn run(cmd: PolicyCommand) -> anyhow::Result<()> {
    match cmd {
        PolicyCommand::Set { db, cluster, pool, from, replicas, actor } => {
            let s = services(&db, 2).await?;
            let v = usecase::replicas::set(&s, &operator(actor).writer(), &cluster, pool.as_deref(), from, replicas)
                .await?;
            println!("{}", serde_json::to_string(&v)?);
        }
        PolicyCommand::Pool { db, cluster, node, pool, actor } => {
            let s = services(&db, 2).await?;
            usecase::replicas::set_node_pool(&s, &operator(actor).writer(), &cluster, &node, pool.as_deref()).await?;
            println!("{cluster}/{node}: pool {}", pool.as_deref().unwrap_or("(none)"));
        }
        PolicyCommand::List { db } => {
            let s = services(&db, 2).await?;
            let rows = usecase::replicas::list(&s, &Scope::all()).await?;
            println!("{}", serde_json::to_string_pretty(&rows)?);
        }
    }
    Ok(())
}
