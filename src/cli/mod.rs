//! The `cardhour` command line: the arguments (clap) and the dispatch to one module per command group, each of
//! which calls the use cases and prints their answers.
//!
//! Stable contract relied on by automation: `migrate`, `ingest`, `usage`, `DATABASE_URL`.

mod admin;
mod bills;
pub mod config;
mod ingest;
pub mod nodes;
pub mod oversub;
pub mod policy;
mod reports;
mod serve;
mod usage_report;
mod users;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use chrono::{DateTime, Utc};
use clap::{Parser, Subcommand};

use crate::billing::Month;
use crate::db;
use crate::ingest::flags::SourceArgs;
use crate::usecase::Services;
use crate::validate;
use crate::validate::duration::parse_duration;
use config::{DatabaseArgs, parse_webhook_url};
use usage_report::{Format, GroupBy};

#[derive(Debug, Parser)]
#[command(name = "cardhour", version, about = "GPU FinOps cost accounting: exact GPU-hours from Prometheus")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses the process's arguments. `ingest undo RUN` is `ingest-undo RUN` underneath: clap cannot give a
    /// command both required flags and a subcommand, and `ingest --cluster … --from … --to …` is a stable
    /// contract.
    pub fn parse_args() -> Cli {
        let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
        if args.get(1).is_some_and(|a| a == "ingest") && args.get(2).is_some_and(|a| a == "undo") {
            args.splice(1..3, [std::ffi::OsString::from("ingest-undo")]);
        }
        Cli::parse_from(args)
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create or update the database schema (run as the role that owns the tables).
    Migrate(MigrateArgs),
    /// Write a deterministic simulated GPU cluster as OpenMetrics, with its ground truth.
    Simulate(SimulateArgs),
    /// Ingest whole hours [from, to) of one cluster from Prometheus (`ingest undo RUN` puts back what a run
    /// replaced).
    Ingest(IngestArgs),
    /// Put back the rows an ingest run replaced: `cardhour ingest undo RUN` (its id is printed by `ingest`).
    #[command(name = "ingest-undo", hide = true)]
    IngestUndo(UndoArgs),
    /// Ingest continuously: each hour once complete, re-processing a recent span.
    Worker(WorkerArgs),
    /// Print stored usage totals.
    Usage(UsageArgs),
    /// What a million tokens and a thousand requests of inference cost, per team, namespace, model, engine or day.
    UnitCost(UnitCostArgs),
    /// Ingest health per cluster: watermark and lag, hours kept over smaller reads, recent anomalies.
    Health(HealthArgs),
    /// The idle-waste list: pods holding GPUs and memory while barely using them.
    Idle(IdleArgs),
    /// Check the month's budgets: record thresholds crossed and POST them to the webhook until delivered.
    Budgets(BudgetsArgs),
    /// The signed close event: POST what is due to the endpoints finance configured (the worker and `serve` do it
    /// too).
    #[command(subcommand)]
    CloseEvents(CloseEventsCommand),
    /// Export a month's bills: the lines as CSV, or the statements as PDF.
    Export(ExportArgs),
    /// What stands in the way of closing a month (exits 1 when something does).
    Readiness(ReadinessArgs),
    /// Close an ended month: its statements become immutable. A month that is not complete is refused with what
    /// stands in the way, unless `--override REASON` is given (audited and printed on the statements).
    Close(CloseArgs),
    /// Drop the raw hourly rows (per container, and the kept replaced rows of ingest runs) of months that are
    /// closed and more than --keep-months before the current one; rollups and closed statements are kept. Run as
    /// the role that owns the tables.
    Retention(RetentionArgs),
    /// Serve the REST API (and Swagger UI).
    Serve(ServeArgs),
    /// Issue, list or revoke API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// The portal's users: create, list, disable, set a password.
    #[command(subcommand)]
    User(users::UserCommand),
    /// Namespace → team mappings: import a CMDB export.
    #[command(subcommand)]
    Mappings(MappingsCommand),
    /// Queue → team mappings (Kueue ClusterQueues, Volcano queues): import a CSV file.
    #[command(subcommand)]
    QueueMappings(QueueMappingsCommand),
    /// Configure nodes whose cards, replicas or model nothing on the node tells.
    #[command(subcommand)]
    Nodes(nodes::NodesCommand),
    /// Oversubscription (compute and memory) per node, GPU model and cluster per day, with the cards' utilization beside it.
    Oversubscription(oversub::OversubscriptionArgs),
    /// How time-sliced replicas are billed (fraction or whole-card), per cluster or node pool, from a date on.
    #[command(subcommand)]
    Policy(policy::PolicyCommand),
    /// Print the OpenAPI document (as committed in openapi/openapi.json).
    Openapi,
}

#[derive(Debug, clap::Args)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// After migrating, create (if needed) and grant the service's least-privilege role NAME: what ingest, serve
    /// and worker need, no TRUNCATE, no UPDATE/DELETE of the audit log or closed months, owning nothing.
    /// Idempotent; repeat it after every migration (docs/database.md).
    #[arg(long, value_name = "NAME")]
    pub grant_app_role: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct IdleArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// Window end, a whole hour (default: the current hour): a date (its midnight in the billing time zone) or a
    /// time with or without seconds and offset (2026-11-01T08:00, 2026-11-01 08:00:00+08:00); without an offset,
    /// billing time zone.
    #[arg(long, value_parser = valid_time)]
    pub to: Option<validate::TimeInput>,
    /// Use the short-term rule (2 hours under 15 %) instead of the weekly one (7 days under 10 %).
    #[arg(long)]
    pub short_term: bool,
    /// Window length in hours (default from the rule).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=2160))]
    pub hours: Option<u32>,
    /// Utilization threshold, 0–1 (default from the rule).
    #[arg(long)]
    pub max_utilization: Option<f64>,
    /// Memory a pod must hold to count, in MiB.
    #[arg(long, default_value_t = 1024.0)]
    pub min_memory_mib: f64,
    /// Also list pods that no longer hold cards at the window's end.
    #[arg(long)]
    pub include_ended: bool,
    #[arg(long, value_enum, default_value = "text")]
    pub format: SummaryFormat,
}

#[derive(Debug, Subcommand)]
pub enum CloseEventsCommand {
    /// POST every close-event delivery that is due (not acknowledged, its retry time reached) once; exits 1 when
    /// one was not acknowledged (it is retried later, with backoff).
    Deliver(CloseEventsDeliverArgs),
}

#[derive(Debug, clap::Args)]
pub struct CloseEventsDeliverArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
}

#[derive(Debug, clap::Args)]
pub struct BudgetsArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The month, YYYY-MM (default: the current one in the billing time zone).
    #[arg(long)]
    pub month: Option<Month>,
    /// Judge as of this time (default: now): a date or a time with or without seconds and offset; without an
    /// offset, billing time zone.
    #[arg(long, value_parser = valid_time)]
    pub at: Option<validate::TimeInput>,
    /// Where alerts are POSTed as JSON; without it they are only recorded.
    #[arg(long, env = "CARDHOUR_WEBHOOK_URL", value_parser = parse_webhook_url)]
    pub webhook: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The month, YYYY-MM in the billing time zone.
    #[arg(long)]
    pub month: Month,
    #[arg(long, value_enum, default_value = "csv")]
    pub format: ExportFormat,
    /// Only this team (an unknown team is an error; a known team without lines exports no lines).
    #[arg(long)]
    pub team: Option<validate::TeamId>,
    /// An open month's draft under this bill mode (default: the configured one). A closed month exports as
    /// closed: a mode other than its own is an error.
    #[arg(long, value_enum)]
    pub mode: Option<CliBillMode>,
    /// An open month's draft under this unallocated-capacity policy (default: the configured one). A closed month
    /// exports as closed: a policy other than its own is an error.
    #[arg(long, value_enum, visible_alias = "policy")]
    pub unallocated: Option<CliUnallocated>,
    /// An open month's draft with every time-sliced replica billed so: fraction or whole-card (default: each
    /// cluster's or node pool's dated setting, `cardhour policy set`). A closed month refuses it.
    #[arg(long, value_parser = valid_replicas)]
    pub replicas: Option<crate::billing::ReplicaBilling>,
    /// The PDF's language from layout 3 on: zh (zh-CN) or en. A month closed under layout 1 or 2 prints as it
    /// did then, in English.
    #[arg(long, value_parser = valid_lang, default_value = "zh")]
    pub lang: crate::export::Lang,
    /// Write to this file instead of standard output.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn valid_lang(s: &str) -> Result<crate::export::Lang, String> {
    crate::export::Lang::parse(s).ok_or_else(|| format!("`{}`: use zh or en", s.escape_debug()))
}

#[derive(Debug, clap::Args)]
pub struct ReadinessArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The month, YYYY-MM in the billing time zone.
    #[arg(long)]
    pub month: Month,
    /// Print the readiness as JSON (as `GET /api/v1/bills/{month}/readiness` answers).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct RetentionArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// Keep the raw rows of this many months before the current billing month (0 to 1200); older ones go once
    /// closed.
    #[arg(long, value_parser = clap::value_parser!(u16).range(0..=1200))]
    pub keep_months: u16,
    /// Print what would be dropped and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The current instant (RFC 3339; tests pin it). Default: now.
    #[arg(long, hide = true)]
    pub now: Option<DateTime<Utc>>,
}

#[derive(Debug, clap::Args)]
pub struct CloseArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The month, YYYY-MM in the billing time zone.
    #[arg(long)]
    pub month: Month,
    /// Bill mode frozen with the month (required: look at the draft first, `cardhour export --mode …`).
    #[arg(long, value_enum)]
    pub mode: Option<CliBillMode>,
    /// What happens to capacity no team used, frozen with the month (required).
    #[arg(long, value_enum, visible_alias = "policy")]
    pub unallocated: Option<CliUnallocated>,
    /// Close although the month is not complete, for this reason (kept in the audit log and on the statements).
    #[arg(long = "override", value_name = "REASON")]
    pub override_reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CliBillMode {
    Showback,
    Chargeback,
    /// Reserved-quota billing: each team's quota guarantees billed whether used or not (SPEC §10).
    Reserved,
}

impl From<CliBillMode> for crate::billing::BillMode {
    fn from(m: CliBillMode) -> Self {
        match m {
            CliBillMode::Showback => crate::billing::BillMode::Showback,
            CliBillMode::Chargeback => crate::billing::BillMode::Chargeback,
            CliBillMode::Reserved => crate::billing::BillMode::Reserved,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CliUnallocated {
    KeptByPlatform,
    SpreadProportionally,
}

impl From<CliUnallocated> for crate::billing::UnallocatedPolicy {
    fn from(u: CliUnallocated) -> Self {
        match u {
            CliUnallocated::KeptByPlatform => crate::billing::UnallocatedPolicy::KeptByPlatform,
            CliUnallocated::SpreadProportionally => crate::billing::UnallocatedPolicy::SpreadProportionally,
        }
    }
}

/// `--mode` and `--unallocated` as asked (either may be absent).
fn policy_choice(mode: Option<CliBillMode>, unallocated: Option<CliUnallocated>) -> crate::billing::PolicyChoice {
    crate::billing::PolicyChoice {
        mode: mode.map(Into::into),
        unallocated: unallocated.map(Into::into),
        replicas: None,
    }
}

fn valid_replicas(s: &str) -> Result<crate::billing::ReplicaBilling, String> {
    crate::billing::ReplicaBilling::parse(s).map_err(|e| e.to_string())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    Csv,
    Pdf,
    Xlsx,
}

/// A client timeout: a duration of at least 100 ms (a zero would cut every client off).
fn parse_client_timeout(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d < Duration::from_millis(100) {
        return Err(format!("`{s}` is too short: at least 100ms"));
    }
    Ok(d)
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// Address to listen on.
    #[arg(long, env = "CARDHOUR_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: std::net::SocketAddr,
    /// After SIGTERM or SIGINT: how long in-flight requests may take before the process exits anyway.
    #[arg(long, env = "CARDHOUR_SHUTDOWN_GRACE", default_value = "8s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    /// Mark the portal's session cookie Secure (sent over HTTPS only): set it whenever users reach the portal
    /// over TLS, e.g. behind a TLS-terminating proxy.
    #[arg(long, env = "CARDHOUR_SECURE_COOKIES")]
    pub secure_cookies: bool,
    /// A portal session unused this long ends (the user signs in again).
    #[arg(long, env = "CARDHOUR_SESSION_IDLE", default_value = "2h", value_parser = parse_duration)]
    pub session_idle: Duration,
    /// A client must send a request's whole head (request line and headers) within this long, or its connection
    /// is closed (also the longest a kept-alive connection waits idle for its next request).
    #[arg(long, env = "CARDHOUR_HEADER_TIMEOUT", default_value = "30s", value_parser = parse_client_timeout)]
    pub header_timeout: Duration,
    /// A client must send a request's whole body within this long of its head, whatever the method, or it is
    /// answered 408 and its connection closed.
    #[arg(long, env = "CARDHOUR_BODY_TIMEOUT", default_value = "30s", value_parser = parse_client_timeout)]
    pub body_timeout: Duration,
    #[command(flatten)]
    pub proxy: config::ProxyArgs,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Issue a token; it is printed once and stored only as a digest.
    Create {
        #[command(flatten)]
        db: DatabaseArgs,
        /// Who or what holds the token.
        #[arg(long)]
        name: String,
        #[arg(long, value_enum)]
        role: crate::auth::Role,
        /// A team lead's team (repeat for several).
        #[arg(long = "team")]
        teams: Vec<String>,
        /// Refused after this long, e.g. 90d, 12h (default: never expires).
        #[arg(long, value_parser = parse_duration, conflicts_with = "expires_at")]
        expires_in: Option<Duration>,
        /// Refused from this time on: a date (its midnight in the billing time zone) or a time with or without
        /// seconds and offset; without an offset, billing time zone.
        #[arg(long, value_parser = valid_time)]
        expires_at: Option<validate::TimeInput>,
    },
    /// Every token: role, teams, expiry, last use and whether it is active (never the secret).
    List {
        #[command(flatten)]
        db: DatabaseArgs,
        #[arg(long, value_enum, default_value = "text")]
        format: SummaryFormat,
    },
    /// Revoke a token by id.
    Revoke {
        #[command(flatten)]
        db: DatabaseArgs,
        id: i64,
    },
}

#[derive(Debug, Subcommand)]
pub enum MappingsCommand {
    /// Import a CMDB export as CSV (header `namespace,team,valid_from`, optional `team_name`, `owner`, `cluster`),
    /// as `POST /api/v1/mappings/import` does: UTF-8 (with or without BOM) or GBK/GB18030, dates as 2026-11-01,
    /// 2026/11/01, 2026/11/1 or 20261101; idempotent (equal rows are unchanged); all rows or none. Prints what each
    /// row did as JSON; refused rows are printed as JSON on standard error (non-zero exit).
    Import {
        #[command(flatten)]
        db: DatabaseArgs,
        /// The CSV file.
        file: PathBuf,
        /// Report what each row would do (insert, update, unchanged) and write nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum QueueMappingsCommand {
    /// Import queue → team mappings as CSV (header `queue_kind,queue,team,valid_from`, optional `cluster`;
    /// `queue_kind` cluster_queue or volcano_queue), as `POST /api/v1/queue-mappings/import` does: UTF-8 (with or
    /// without BOM) or GBK/GB18030, dates as 2026-11-01, 2026/11/01, 2026/11/1 or 20261101; every team must exist;
    /// idempotent (equal rows are unchanged); all rows or none. Prints what each row did as JSON; refused rows are
    /// printed as JSON on standard error (non-zero exit).
    Import {
        #[command(flatten)]
        db: DatabaseArgs,
        /// The CSV file.
        file: PathBuf,
        /// Report what each row would do (insert, update, unchanged) and write nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// GPUs in the cluster (a multiple of 8; 56 or more covers every node type).
    #[arg(long, default_value_t = 64)]
    pub gpus: u32,
    /// Days simulated, ending at --end.
    #[arg(long, default_value_t = 2, conflicts_with = "hours")]
    pub days: u32,
    /// Hours simulated instead of days.
    #[arg(long)]
    pub hours: Option<u32>,
    /// Scrape interval of every exporter.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub scrape_interval: Duration,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// End of the simulation, a whole hour; default: the whole hour at least 4 h ago (backfills must stay out of
    /// the last 3 hours). A date or a time with or without seconds and offset; without an offset, the default
    /// billing time zone (Asia/Shanghai: simulate reads no settings).
    #[arg(long, value_parser = valid_time)]
    pub end: Option<validate::TimeInput>,
    /// Output directory (metrics.om and truth.json).
    #[arg(long, default_value = "sim")]
    pub out: PathBuf,
    /// `standard` (every feature, 7 node types) or `shared` (shared cards as clusters run them, 9 node types).
    #[arg(long, default_value = "standard")]
    pub profile: crate::simulate::Profile,
    /// Add kube-state-metrics outages (restarts): short ones the default --ksm-gap-bridge bridges, longer ones it
    /// does not, some across an hour's end; the truth gains the bridged and the unbilled GPU-hours and the gaps.
    #[arg(long)]
    pub ksm_gaps: bool,
    /// Scrape interval of DCGM and HAMi's monitor, each node on its own phase (default: --scrape-interval; with
    /// --profile exactness 1.5 times it).
    #[arg(long, value_parser = parse_duration)]
    pub util_interval: Option<Duration>,
}

#[derive(Debug, clap::Args)]
pub struct IngestArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    #[command(flatten)]
    pub source: SourceArgs,
    /// First hour, a whole hour: a date (its midnight in the billing time zone) or a time with or without
    /// seconds and offset (2026-11-01T08:00, 2026-11-01 08:00:00+08:00, 2026-11-01T00:00:00Z); without an
    /// offset, billing time zone.
    #[arg(long, value_parser = valid_time)]
    pub from: validate::TimeInput,
    /// End of the range, exclusive, a whole hour; read as `--from`.
    #[arg(long, value_parser = valid_time)]
    pub to: validate::TimeInput,
    /// Summary format.
    #[arg(long, value_enum, default_value = "text")]
    pub format: SummaryFormat,
    /// Replace stored hours even where this read holds fewer rows or samples (e.g. usage that was wrong); without
    /// it such hours are kept and listed. Audited; `ingest undo RUN` puts the replaced rows back.
    #[arg(long)]
    pub replace_smaller: bool,
    /// Where budget alerts are POSTed as JSON: after the ingest the budgets of the months it touched are checked
    /// (without it crossings are only recorded, and delivered by the worker or `cardhour budgets`).
    #[arg(long, env = "CARDHOUR_WEBHOOK_URL", value_parser = parse_webhook_url)]
    pub webhook: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    #[arg(long, value_enum, default_value = "text")]
    pub format: SummaryFormat,
}

/// `cardhour ingest undo RUN`.
#[derive(Debug, clap::Args)]
pub struct UndoArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The run whose replacements to undo.
    pub run: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SummaryFormat {
    Text,
    Json,
}

#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The clusters to ingest, from a TOML file (`[clusters.<name>]` tables with `prometheus`, `match`,
    /// `scrape_interval`, `team_label`, `source` …; `[defaults]` for all of them; the flags below are the defaults
    /// of what neither sets). Without it, the one cluster of --cluster and --prometheus.
    #[arg(long, env = "CARDHOUR_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Wait after an hour ends before ingesting it.
    #[arg(long, env = "CARDHOUR_LATENESS", default_value = "10m", value_parser = parse_duration)]
    pub lateness: Duration,
    /// Recent hours ingested again every cycle, for late samples.
    #[arg(long, env = "CARDHOUR_REPROCESS_HOURS", default_value_t = 3)]
    pub reprocess_hours: u32,
    /// Hours back a cluster without a watermark starts from.
    #[arg(long, env = "CARDHOUR_INITIAL_HOURS", default_value_t = 24)]
    pub initial_hours: u32,
    /// Ingest the hours [from, to) not stored yet instead of following the clock: a backfill that any number of
    /// workers share (with --once, each exits when none is left). Times as `ingest` takes them.
    #[arg(long, requires = "to", value_parser = valid_time)]
    pub from: Option<validate::TimeInput>,
    /// End of --from's span, exclusive.
    #[arg(long, requires = "from", value_parser = valid_time)]
    pub to: Option<validate::TimeInput>,
    /// How long a worker holds the hours it took without renewing the lease (renewed every third of it); a
    /// worker that dies holds them at most this long.
    #[arg(long, env = "CARDHOUR_LEASE", default_value = "2m", value_parser = parse_duration)]
    pub lease: Duration,
    /// The longest wait before hours whose read failed are read again (the wait doubles from 1 s up to it).
    #[arg(long, env = "CARDHOUR_MAX_BACKOFF", default_value = "5m", value_parser = parse_duration)]
    pub max_backoff: Duration,
    /// Exit once nothing due is left for this worker (a failed read then exits non-zero).
    #[arg(long)]
    pub once: bool,
    /// Where budget alerts are POSTed as JSON: after each cycle the budgets of the months it touched are checked
    /// (without it crossings are only recorded).
    #[arg(long, env = "CARDHOUR_WEBHOOK_URL", value_parser = parse_webhook_url)]
    pub webhook: Option<String>,
    /// After SIGTERM or SIGINT: how long the batch being stored may take before the process exits anyway (its
    /// transaction then rolls back; its hours are ingested again).
    #[arg(long, env = "CARDHOUR_SHUTDOWN_GRACE", default_value = "8s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
    #[command(flatten)]
    pub monitoring: config::MonitoringArgs,
}

#[derive(Debug, clap::Args)]
pub struct UsageArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// Start, inclusive: a date (a day in the billing time zone, as bills count days) or a time with or without
    /// seconds and offset (2026-11-01T08:00, 2026-11-01 08:00:00+08:00, 2026-11-01T00:00:00Z); without an offset,
    /// billing time zone. `--from 2026-11-01 --to 2026-12-01` is the billing month 2026-11.
    #[arg(long, value_parser = valid_time)]
    pub from: validate::TimeInput,
    /// End, exclusive; read as `--from`.
    #[arg(long, value_parser = valid_time)]
    pub to: validate::TimeInput,
    #[arg(long, value_enum, default_value = "team")]
    pub group_by: GroupBy,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Only this cluster (default: all).
    #[arg(long)]
    pub cluster: Option<validate::ClusterName>,
}

#[derive(Debug, clap::Args)]
pub struct UnitCostArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// First billing day, YYYY-MM-DD (default: the first day of the current month).
    #[arg(long)]
    pub from: Option<chrono::NaiveDate>,
    /// The billing day after the last, YYYY-MM-DD (default: tomorrow).
    #[arg(long)]
    pub to: Option<chrono::NaiveDate>,
    /// team, namespace, model, engine, day or month.
    #[arg(long, default_value = "model", value_parser = parse_unit_group)]
    pub group_by: crate::billing::UnitGroup,
    #[arg(long, value_enum, default_value = "text")]
    pub format: SummaryFormat,
}

fn parse_unit_group(s: &str) -> Result<crate::billing::UnitGroup, String> {
    crate::billing::UnitGroup::parse(s)
        .ok_or_else(|| format!("`{s}`: use team, namespace, model, engine, day or month"))
}

/// A time argument ([`validate::TimeInput`]), resolved in the billing time zone once the settings are read.
fn valid_time(s: &str) -> Result<validate::TimeInput, String> {
    validate::TimeInput::parse("time", s).map_err(|e| e.message)
}

/// A time argument in the billing time zone.
fn resolve_time(flag: &str, t: validate::TimeInput, tz: chrono_tz::Tz) -> anyhow::Result<DateTime<Utc>> {
    t.resolve(flag, tz).map_err(|e| anyhow::anyhow!("{}: {}", e.field, e.message))
}

/// Runs the command line; the error is printed by `main` with a non-zero exit.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Migrate(a) => admin::migrate_cmd(a).await?,
        Command::Simulate(a) => ingest::simulate_cmd(a)?,
        Command::Ingest(a) => ingest::ingest_cmd(a).await?,
        Command::IngestUndo(u) => ingest::undo_cmd(u).await?,
        Command::Health(a) => ingest::health_cmd(a).await?,
        Command::Worker(a) => ingest::worker_cmd(a).await?,
        Command::Usage(a) => reports::usage_cmd(a).await?,
        Command::UnitCost(a) => reports::unit_cost_cmd(a).await?,
        Command::Idle(a) => reports::idle_cmd(a).await?,
        Command::Export(a) => bills::export_cmd(a).await?,
        Command::Readiness(a) => bills::readiness_cmd(a).await?,
        Command::Close(a) => bills::close_cmd(a).await?,
        Command::Retention(a) => admin::retention_cmd(a).await?,
        Command::Budgets(a) => bills::budgets_cmd(a).await?,
        Command::CloseEvents(c) => bills::close_events_cmd(c).await?,
        Command::Serve(a) => serve::serve_cmd(a).await?,
        Command::Token(t) => admin::token_cmd(t).await?,
        Command::User(u) => users::user_cmd(u).await?,
        Command::Mappings(m) => admin::mappings_cmd(m).await?,
        Command::QueueMappings(m) => admin::queue_mappings_cmd(m).await?,
        Command::Nodes(n) => nodes::run(n).await?,
        Command::Oversubscription(a) => oversub::run(a).await?,
        Command::Policy(p) => policy::run(p).await?,
        Command::Openapi => print!("{}", crate::api::openapi_json()),
    }
    Ok(())
}

/// The use cases over `pool`, in the billing time zone its settings name.
async fn services_on(pool: sqlx::PgPool) -> anyhow::Result<Services> {
    let tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
    Ok(Services::new(pool, tz))
}

/// The use cases over a pool of at most `max_connections` (every statement bounded by `--statement-timeout`).
async fn services(db: &DatabaseArgs, max_connections: u32) -> anyhow::Result<Services> {
    let pool = db.connect(max_connections).await.context("cannot connect to the database")?;
    services_on(pool).await
}

/// The operator of the command line (it holds the database's credentials: an admin), audited as `actor`.
fn operator(actor: impl Into<String>) -> crate::access::Administrator {
    crate::access::Administrator::of(&crate::access::Principal::operator(actor))
        .expect("the command line's operator is an admin")
}

/// Who runs a command, for the audit log: the login name.
fn cli_actor() -> String {
    format!("cli:{}", std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_else(|_| "unknown".into()))
}
