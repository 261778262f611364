//! The `cardhour` command line: parses arguments, wires the library together, prints results.
//!
//! Stable contract relied on by automation: `migrate`, `ingest`, `usage`, `DATABASE_URL`.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use chrono::{DateTime, Utc};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use crate::billing::Month;
use crate::config::{DatabaseArgs, SourceArgs, parse_duration, parse_webhook_url};
use crate::db;
use crate::db::usage::{GroupBy, Scope};
use crate::ingest::{self, IngestOptions, WorkerOptions, window};
use crate::prom::{PromClient, RetryPolicy};
use crate::simulate;
use crate::usage::{self, Format};
use crate::validate;

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
    /// Ingest health per cluster: watermark and lag, hours kept over smaller reads, recent anomalies.
    Health(HealthArgs),
    /// The idle-waste list: pods holding GPUs and memory while barely using them.
    Idle(IdleArgs),
    /// Check the month's budgets: record thresholds crossed and POST them to the webhook until delivered.
    Budgets(BudgetsArgs),
    /// Export a month's bills: the lines as CSV, or the statements as PDF.
    Export(ExportArgs),
    /// What stands in the way of closing a month (exits 1 when something does).
    Readiness(ReadinessArgs),
    /// Close an ended month: its statements become immutable. A month that is not complete is refused with what
    /// stands in the way, unless `--override REASON` is given (audited and printed on the statements).
    Close(CloseArgs),
    /// Serve the REST API (and Swagger UI).
    Serve(ServeArgs),
    /// Issue, list or revoke API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Namespace → team mappings: import a CMDB export.
    #[command(subcommand)]
    Mappings(MappingsCommand),
    /// Configure nodes whose cards, replicas or model nothing on the node tells.
    #[command(subcommand)]
    Nodes(crate::node_cli::NodesCommand),
    /// Oversubscription per node, GPU model and cluster per day, with the cards' utilization beside it.
    Oversubscription(crate::oversub_cli::OversubscriptionArgs),
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

#[derive(Debug, clap::Args)]
pub struct BudgetsArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The month, YYYY-MM (default: the current one in the billing time zone).
    #[arg(long, value_parser = valid_month)]
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
    #[arg(long, value_parser = valid_month)]
    pub month: Month,
    #[arg(long, value_enum, default_value = "csv")]
    pub format: ExportFormat,
    /// Only this team (an unknown team is an error; a known team without lines exports no lines).
    #[arg(long, value_parser = valid_team)]
    pub team: Option<String>,
    /// An open month's draft under this bill mode (default: the configured one). A closed month exports as
    /// closed: a mode other than its own is an error.
    #[arg(long, value_enum)]
    pub mode: Option<CliBillMode>,
    /// An open month's draft under this unallocated-capacity policy (default: the configured one). A closed month
    /// exports as closed: a policy other than its own is an error.
    #[arg(long, value_enum, visible_alias = "policy")]
    pub unallocated: Option<CliUnallocated>,
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
    #[arg(long, value_parser = valid_month)]
    pub month: Month,
    /// Print the readiness as JSON (as `GET /api/v1/bills/{month}/readiness` answers).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct CloseArgs {
    #[command(flatten)]
    pub db: DatabaseArgs,
    /// The month, YYYY-MM in the billing time zone.
    #[arg(long, value_parser = valid_month)]
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
}

impl From<CliBillMode> for crate::billing::BillMode {
    fn from(m: CliBillMode) -> Self {
        match m {
            CliBillMode::Showback => crate::billing::BillMode::Showback,
            CliBillMode::Chargeback => crate::billing::BillMode::Chargeback,
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
    crate::billing::PolicyChoice { mode: mode.map(Into::into), unallocated: unallocated.map(Into::into) }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    Csv,
    Pdf,
    Xlsx,
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
    pub profile: simulate::Profile,
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
    /// Run one cycle and exit.
    #[arg(long)]
    pub once: bool,
    /// Where budget alerts are POSTed as JSON: after each cycle the budgets of the months it touched are checked
    /// (without it crossings are only recorded).
    #[arg(long, env = "CARDHOUR_WEBHOOK_URL", value_parser = parse_webhook_url)]
    pub webhook: Option<String>,
    /// After SIGTERM or SIGINT: how long the hour being stored may take before the process exits anyway (its
    /// transaction then rolls back; the hour is ingested again by the next run).
    #[arg(long, env = "CARDHOUR_SHUTDOWN_GRACE", default_value = "8s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
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
    #[arg(long, value_parser = valid_cluster)]
    pub cluster: Option<String>,
}

/// A time argument ([`validate::TimeInput`]), resolved in the billing time zone once the settings are read.
fn valid_time(s: &str) -> Result<validate::TimeInput, String> {
    validate::TimeInput::parse("time", s).map_err(|e| e.message)
}

/// A time argument in the billing time zone.
fn resolve_time(flag: &str, t: validate::TimeInput, tz: chrono_tz::Tz) -> anyhow::Result<DateTime<Utc>> {
    t.resolve(flag, tz).map_err(|e| anyhow::anyhow!("{}: {}", e.field, e.message))
}

/// A month argument: `YYYY-MM` from 2000-01 to 2100-12.
fn valid_month(s: &str) -> Result<Month, String> {
    validate::month("month", s).map_err(|e| e.message)
}

fn valid_team(s: &str) -> Result<String, String> {
    validate::TeamId::parse("team", s).map(validate::TeamId::into_string).map_err(|e| e.message)
}

fn valid_cluster(s: &str) -> Result<String, String> {
    validate::cluster("cluster", s).map_err(|e| e.message)
}

/// Runs the command line; the error is printed by `main` with a non-zero exit.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Migrate(a) => {
            let pool = db::connect(&a.db.database_url, 2).await.context("cannot connect to the database")?;
            db::migrate(&pool).await.context("migration failed")?;
            println!("database schema is up to date");
            if let Some(role) = &a.grant_app_role {
                db::roles::grant_app_role(&pool, role).await.context("granting the service role failed")?;
                println!(
                    "role {role} may run ingest, serve and worker (set its password: ALTER ROLE {role} PASSWORD …)"
                );
            }
        }
        Command::Simulate(a) => simulate_cmd(a)?,
        Command::Ingest(a) => ingest_cmd(a).await?,
        Command::IngestUndo(u) => undo_cmd(u).await?,
        Command::Health(a) => health_cmd(a).await?,
        Command::Worker(a) => worker_cmd(a).await?,
        Command::Usage(a) => usage_cmd(a).await?,
        Command::Idle(a) => idle_cmd(a).await?,
        Command::Export(a) => export_cmd(a).await?,
        Command::Readiness(a) => readiness_cmd(a).await?,
        Command::Close(a) => close_cmd(a).await?,
        Command::Budgets(a) => budgets_cmd(a).await?,
        Command::Serve(a) => serve_cmd(a).await?,
        Command::Token(t) => token_cmd(t).await?,
        Command::Mappings(m) => mappings_cmd(m).await?,
        Command::Nodes(n) => crate::node_cli::run(n).await?,
        Command::Oversubscription(a) => crate::oversub_cli::run(a).await?,
        Command::Openapi => print!("{}", crate::api::openapi_json()),
    }
    Ok(())
}

fn simulate_cmd(a: SimulateArgs) -> anyhow::Result<()> {
    let end = match a.end {
        Some(t) => resolve_time("--end", t, crate::billing::DEFAULT_BILLING_TZ)?,
        None => window::floor_hour(Utc::now() - chrono::Duration::hours(4)),
    };
    let hours = a.hours.unwrap_or(a.days.saturating_mul(24));
    let secs = a.scrape_interval.as_secs();
    if a.scrape_interval.subsec_nanos() != 0 || secs > u64::from(u32::MAX) {
        bail!("--scrape-interval must be a whole number of seconds");
    }
    let params = simulate::SimParams {
        gpus: a.gpus,
        hours,
        scrape_interval_s: secs as u32,
        seed: a.seed,
        end,
        out: a.out,
        profile: a.profile,
    };
    let s = simulate::run(&params)?;
    println!(
        "simulated {} GPUs, {} pods, {} series, {} samples, {} .. {}\n  metrics: {}\n  truth:   {}",
        params.gpus,
        s.pods,
        s.series,
        s.samples,
        s.start.to_rfc3339(),
        s.end.to_rfc3339(),
        s.metrics_path.display(),
        s.truth_path.display()
    );
    Ok(())
}

fn ingest_options(source: &SourceArgs, retry: RetryPolicy) -> IngestOptions {
    IngestOptions {
        cluster: source.cluster.clone(),
        fetch: source.fetch_spec(),
        meter: source.meter_config(),
        chunk_hours: source.chunk_hours as usize,
        retry,
    }
}

async fn ingest_cmd(a: IngestArgs) -> anyhow::Result<()> {
    ingest::validate_cluster_name(&a.source.cluster)?;
    let client = PromClient::new(&a.source.prometheus, a.source.timeout)?;
    let pool = a.db.connect(4).await.context("cannot connect to the database")?;
    let tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
    let (from, to) = (resolve_time("--from", a.from, tz)?, resolve_time("--to", a.to, tz)?);
    let hours = window::hours(from, to)?;
    let opts = ingest_options(&a.source, RetryPolicy::cli());
    let source = ingest::source::choose(&pool, client, &opts.cluster, a.source.sample_source).await?;
    let bar =
        if std::io::stderr().is_terminal() { ProgressBar::new(hours.len() as u64) } else { ProgressBar::hidden() };
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg} [{bar:40}] {pos}/{len} h  {elapsed} (eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_message(format!("ingesting {}", opts.cluster));
    // a signal ends the ingest after the hour being stored; the hours before it stay stored
    let stop = crate::shutdown::on_signals("the ingest", Duration::from_secs(8));
    let mode = ingest::WriteMode { replace_smaller: a.replace_smaller, ..ingest::WriteMode::ingest(cli_actor()) };
    let result = ingest::backfill_until(&pool, &source, &opts, from, to, |_| bar.inc(1), &mode, &stop).await;
    bar.finish_and_clear();
    let summary = result.with_context(|| {
        format!("ingest of {} [{from} .. {to}) stopped; hours before the watermark are stored", opts.cluster)
    })?;
    // the ingested hours change the budgets' spend: check them now, not only at the next worker cycle
    if summary.hours_changed > 0 || summary.hours > 0 {
        match crate::alerts::check_after_ingest(&pool, tz, from, to, a.webhook.as_deref()).await {
            Ok(run) if run.failed > 0 => {
                eprintln!("warning: {} budget alerts could not be delivered; they are retried later", run.failed)
            }
            Ok(_) => {}
            Err(e) => eprintln!("warning: the budget check failed ({e}); the next check records the crossings"),
        }
    }
    match a.format {
        SummaryFormat::Json => println!("{}", serde_json::to_string_pretty(&summary)?),
        SummaryFormat::Text => {
            println!(
                "ingested {} hours of {} ({} rows, {} samples): {:.3} GPU-hours, {:.3} effective, {:.3} unmetered",
                summary.hours,
                summary.cluster,
                summary.usage_rows,
                summary.samples_read,
                summary.gpu_hours,
                summary.effective_gpu_hours,
                summary.unmetered_gpu_hours
            );
            let intervals: Vec<String> =
                summary.scrape_intervals_s.iter().map(|(s, n)| format!("{s} s ({n} h)")).collect();
            println!("scrape interval: {}", intervals.join(", "));
            if let Some(w) = summary.watermark {
                println!("watermark: {}", w.to_rfc3339());
            }
            for (kind, subjects) in &summary.anomalies {
                let total: u64 = subjects.values().sum();
                println!("warning: {kind}: {total} in all");
                for (subject, n) in subjects.iter().take(20) {
                    println!("  {subject}: {n}");
                }
                if subjects.len() > 20 {
                    println!("  … and {} more", subjects.len() - 20);
                }
            }
        }
    }
    if let (SummaryFormat::Text, Some(run)) = (a.format, summary.run_id) {
        match summary.hours_changed {
            0 => println!("run: {run} (no stored hour changed)"),
            n => println!("run: {run} ({n} stored hours changed; `cardhour ingest undo {run}` puts them back)"),
        }
    }
    if summary.stopped {
        bail!(
            "stopped by a signal after {} of {} hours; run the same command again to ingest the rest",
            summary.hours + summary.kept.len() as u64,
            hours.len()
        );
    }
    if !summary.kept.is_empty() {
        eprintln!(
            "kept {} stored hours: this read holds less than what is stored (stored vs read):",
            summary.kept.len()
        );
        for k in &summary.kept {
            eprintln!(
                "  {}",
                stored_vs_read(k.hour, k.stored_rows, k.stored_samples, k.read_rows as i64, k.read_samples as i64)
            );
        }
        bail!(
            "{} hours were kept, not replaced (is the source past its retention, restarted without its data, or the \
             wrong URL?); --replace-smaller replaces them anyway",
            summary.kept.len()
        );
    }
    Ok(())
}

/// A kept hour's line: "<hour>: 120 rows / 5000 samples stored, 0 rows / 0 samples read".
fn stored_vs_read(
    hour: DateTime<Utc>,
    stored_rows: i64,
    stored_samples: Option<i64>,
    read_rows: i64,
    read_samples: i64,
) -> String {
    let stored_samples = stored_samples.map_or_else(|| "?".to_string(), |s| s.to_string());
    format!(
        "{}: {stored_rows} rows / {stored_samples} samples stored, {read_rows} rows / {read_samples} samples read",
        hour.to_rfc3339()
    )
}

/// Who runs a command, for the audit log: the login name.
fn cli_actor() -> String {
    format!("cli:{}", std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_else(|_| "unknown".into()))
}

async fn health_cmd(a: HealthArgs) -> anyhow::Result<()> {
    let pool = a.db.connect(2).await.context("cannot connect to the database")?;
    let health = ingest::health::health(&pool, Utc::now()).await?;
    if a.format == SummaryFormat::Json {
        println!("{}", serde_json::to_string_pretty(&health)?);
        return Ok(());
    }
    let clusters = &health.clusters;
    if clusters.is_empty() {
        println!("no cluster ingested yet");
    }
    let t = |t: Option<DateTime<Utc>>| t.map_or_else(|| "-".to_string(), |t| t.to_rfc3339());
    for c in clusters {
        println!(
            "{}: watermark {}, lag {} h, {} hours stored ({} .. {}), last written {}",
            c.cluster,
            t(c.watermark),
            c.lag_hours.map_or_else(|| "-".to_string(), |l| l.to_string()),
            c.hours_stored,
            t(c.first_hour),
            t(c.last_hour),
            t(c.last_ingested_at)
        );
        if let Some(s) = &c.sample_source {
            println!("  read by {s}: {}", c.sample_source_reason.as_deref().unwrap_or("-"));
        }
        if !c.kept_hours.is_empty() {
            println!("  kept {} stored hours over smaller reads (stored vs read):", c.kept_hours.len());
            for k in c.kept_hours.iter().take(10) {
                let figures =
                    stored_vs_read(k.hour, k.stored_rows.into(), k.stored_samples, k.read_rows.into(), k.read_samples);
                println!("    {figures} (run {})", k.run_id);
            }
        }
        for f in &c.failed_windows {
            println!(
                "  failed read {} .. {} at {}: {} ({} hours not read since)",
                f.from.to_rfc3339(),
                f.to.to_rfc3339(),
                f.failed_at.to_rfc3339(),
                f.error,
                f.hours_not_read_since
            );
        }
        for an in &c.anomalies {
            println!("  anomaly (24 h): {}: {} subjects, {} in all", an.kind, an.subjects, an.count);
        }
    }
    for m in &health.merged_team_labels {
        println!("team labels {} make one team: {}", m.labels.join(", "), m.team_id);
    }
    Ok(())
}

async fn undo_cmd(a: UndoArgs) -> anyhow::Result<()> {
    let pool = a.db.connect(2).await.context("cannot connect to the database")?;
    let s = ingest::undo(&pool, a.run, &cli_actor()).await?;
    println!(
        "put back {} hours of {} replaced by run {} (as run {}; `cardhour ingest undo {}` reverses this)",
        s.hours.len(),
        s.cluster,
        s.run_id,
        s.undo_run_id,
        s.undo_run_id
    );
    Ok(())
}

async fn worker_cmd(a: WorkerArgs) -> anyhow::Result<()> {
    ingest::validate_cluster_name(&a.source.cluster)?;
    let client = PromClient::new(&a.source.prometheus, a.source.timeout)?;
    let pool = a.db.connect(4).await.context("cannot connect to the database")?;
    // probed once per worker start (and remembered with the cluster), not per cycle
    let source = ingest::source::choose(&pool, client, &a.source.cluster, a.source.sample_source).await?;
    let opts = WorkerOptions {
        ingest: ingest_options(&a.source, RetryPolicy::worker()),
        lateness: a.lateness,
        reprocess_hours: a.reprocess_hours,
        initial_hours: a.initial_hours,
        once: a.once,
    };
    let tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
    let webhook = a.webhook.as_deref();
    let check_budgets = async |from, to| match crate::alerts::check_after_ingest(&pool, tz, from, to, webhook).await {
        Ok(run) if run.raised + run.delivered + run.failed > 0 => {
            tracing::info!(raised = run.raised, delivered = run.delivered, not_delivered = run.failed, "budget alerts")
        }
        Ok(_) => {}
        Err(e) => tracing::error!(error = %e, "budget check failed; it runs again after the next cycle"),
    };
    let stop = crate::shutdown::on_signals("the worker", a.shutdown_grace);
    ingest::run_worker(&pool, &source, &opts, check_budgets, stop.requested()).await?;
    if stop.is_requested() {
        tracing::info!("worker stopped");
    }
    Ok(())
}

async fn usage_cmd(a: UsageArgs) -> anyhow::Result<()> {
    let pool = a.db.connect(2).await.context("cannot connect to the database")?;
    let tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
    let (from, to) = (resolve_time("--from", a.from, tz)?, resolve_time("--to", a.to, tz)?);
    if to <= from {
        bail!("--to {} must be after --from {}", to.to_rfc3339(), from.to_rfc3339());
    }
    let totals = db::usage::totals(&pool, from, to, a.group_by, a.cluster.as_deref(), &Scope::default(), tz).await?;
    let rows: Vec<usage::UsageRow> = totals.into_iter().map(Into::into).collect();
    print!("{}", usage::render(&rows, a.group_by, a.format)?);
    Ok(())
}

async fn serve_cmd(a: ServeArgs) -> anyhow::Result<()> {
    let pool = a.db.connect(16).await.context("cannot connect to the database")?;
    let billing_tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
    let app = crate::api::app(crate::api::AppState::new(pool, billing_tz));
    let listener =
        tokio::net::TcpListener::bind(a.listen).await.with_context(|| format!("cannot listen on {}", a.listen))?;
    // PDF statements need the CJK font: say so at start-up rather than on finance's first download
    match crate::export::FontChain::installed() {
        Ok(fonts) => tracing::info!(fonts = %fonts.describe(), "PDF statements are set in"),
        Err(e) => tracing::error!("{e}; PDF exports will fail until it is installed"),
    }
    tracing::info!("serving on http://{} (Swagger UI at /swagger-ui)", a.listen);
    let stop = crate::shutdown::on_signals("the server", a.shutdown_grace);
    // stops accepting at once, then waits for the requests in flight
    axum::serve(listener, app).with_graceful_shutdown(async move { stop.requested().await }).await?;
    tracing::info!("server stopped");
    Ok(())
}

async fn token_cmd(t: TokenCommand) -> anyhow::Result<()> {
    match t {
        TokenCommand::Create { db: d, name, role, teams, expires_in, expires_at } => {
            if name.trim().is_empty() {
                bail!("--name must not be empty");
            }
            if (role == crate::auth::Role::TeamLead) == teams.is_empty() {
                bail!("--team is required for a team_lead token, and only for one");
            }
            let pool = db::connect(&d.database_url, 2).await.context("cannot connect to the database")?;
            let tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
            let expires_at = expires_at.map(|t| resolve_time("--expires-at", t, tz)).transpose()?;
            let now = Utc::now();
            let expires_at = match (expires_in, expires_at) {
                (Some(d), _) => Some(
                    chrono::Duration::from_std(d)
                        .ok()
                        .and_then(|d| now.checked_add_signed(d))
                        .filter(|t| chrono::Datelike::year(t) <= 9999)
                        .with_context(|| {
                            format!("--expires-in {}: too far in the future", humantime::format_duration(d))
                        })?,
                ),
                (None, Some(t)) if t <= now => bail!("--expires-at {} is not in the future", t.to_rfc3339()),
                (None, t) => t,
            };
            let mut tx = pool.begin().await?;
            for team in &teams {
                if db::teams::get(&mut tx, team).await?.is_none() {
                    bail!("unknown team `{team}` (create it first: PUT /api/v1/teams/{team} or a mapping import)");
                }
            }
            let token = crate::auth::new_token();
            let id = db::tokens::insert_expiring(&mut tx, name.trim(), &token.hash, role, &teams, expires_at).await?;
            let after = serde_json::json!({ "id": id, "name": name.trim(), "role": role.as_str(), "teams": teams,
                                            "expires_at": expires_at });
            db::audit::record(&mut tx, "cli", "token.create", &format!("token:{id}"), None, Some(after)).await?;
            tx.commit().await?;
            let until = expires_at.map_or_else(
                || "does not expire".to_string(),
                |t| format!("expires {}", t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
            );
            eprintln!("token {id} for {} ({}, {until}); shown only now:", name.trim(), role.as_str());
            println!("{}", token.secret);
        }
        TokenCommand::List { db: d, format } => {
            let pool = db::connect(&d.database_url, 2).await.context("cannot connect to the database")?;
            let tokens = db::tokens::list(&pool).await?;
            match format {
                SummaryFormat::Json => println!("{}", serde_json::to_string_pretty(&tokens)?),
                SummaryFormat::Text => print!("{}", token_table(&tokens, Utc::now())),
            }
        }
        TokenCommand::Revoke { db: d, id } => {
            let pool = db::connect(&d.database_url, 2).await.context("cannot connect to the database")?;
            let mut tx = pool.begin().await?;
            if !db::tokens::revoke(&mut tx, id).await? {
                bail!("no active token {id}");
            }
            db::audit::record(&mut tx, "cli", "token.revoke", &format!("token:{id}"), None, None).await?;
            tx.commit().await?;
            println!("token {id} revoked");
        }
    }
    Ok(())
}

async fn mappings_cmd(m: MappingsCommand) -> anyhow::Result<()> {
    let MappingsCommand::Import { db: d, file, dry_run } = m;
    let bytes = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
    let refused = |errors: Vec<validate::Invalid>| {
        let errors: Vec<_> =
            errors.iter().map(|e| serde_json::json!({"field": e.field, "message": e.message})).collect();
        eprintln!("{}", serde_json::json!({ "errors": errors }));
        anyhow::anyhow!("{}: {} problem(s); nothing imported", file.display(), errors.len())
    };
    let text = crate::mappings::decode(&bytes).map_err(|e| refused(vec![e]))?;
    let rows = crate::mappings::parse(&text).map_err(refused)?;
    let pool = db::connect(&d.database_url, 2).await.context("cannot connect to the database")?;
    let mut tx = pool.begin().await?;
    let report = match crate::mappings::import(&mut tx, &rows, &cli_actor(), dry_run).await {
        Ok(r) => r,
        Err(crate::mappings::ImportError::Invalid(errors)) => return Err(refused(errors)),
        Err(crate::mappings::ImportError::Database(e)) => return Err(e.into()),
    };
    if dry_run {
        tx.rollback().await?;
    } else {
        tx.commit().await?;
        let changed = report.rows.iter().filter(|r| r.action != crate::mappings::RowAction::Unchanged);
        if let Some(since) = changed.map(|r| r.valid_from).min() {
            let tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
            crate::alerts::check_after_change(&pool, tz, Some(since)).await;
        }
    }
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// `token list` as text: one line per token, with its state now.
fn token_table(tokens: &[db::tokens::TokenInfo], now: DateTime<Utc>) -> String {
    let time = |t: Option<DateTime<Utc>>, none: &str| {
        t.map_or_else(|| none.to_string(), |t| t.format("%Y-%m-%d %H:%M UTC").to_string())
    };
    let mut out = format!(
        "{:>5}  {:<20} {:<9} {:<16} {:<8} {:<20} {:<20} {}\n",
        "id", "name", "role", "teams", "state", "expires", "last used", "created"
    );
    for t in tokens {
        let state = match (t.revoked_at, t.expires_at) {
            (Some(_), _) => "revoked",
            (None, Some(e)) if e <= now => "expired",
            _ => "active",
        };
        out.push_str(&format!(
            "{:>5}  {:<20} {:<9} {:<16} {:<8} {:<20} {:<20} {}\n",
            t.id,
            t.name,
            t.role,
            if t.teams.is_empty() { "-".to_string() } else { t.teams.join(",") },
            state,
            time(t.expires_at, "never"),
            time(t.last_used_at, "never"),
            time(Some(t.created_at), "")
        ));
    }
    out
}

async fn idle_cmd(a: IdleArgs) -> anyhow::Result<()> {
    let base = if a.short_term { crate::waste::IdleRule::SHORT_TERM } else { crate::waste::IdleRule::WEEKLY };
    let rule = crate::waste::IdleRule {
        max_utilization: a.max_utilization.unwrap_or(base.max_utilization),
        min_memory_mib: a.min_memory_mib,
    }
    .validate()
    .map_err(|(field, message)| anyhow::anyhow!("--{}: {message}", field.replace('_', "-")))?;
    let hours = a.hours.unwrap_or(if a.short_term { 2 } else { 168 });
    let pool = a.db.connect(2).await.context("cannot connect to the database")?;
    let tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
    let to = match a.to {
        Some(t) => resolve_time("--to", t, tz)?,
        None => window::floor_hour(Utc::now()),
    };
    if window::floor_hour(to) != to {
        bail!("--to {} is not on a whole hour", to.to_rfc3339());
    }
    let list = crate::waste::idle_report(&pool, to, hours, rule, !a.include_ended, &Scope::default(), tz).await?;
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

async fn export_cmd(a: ExportArgs) -> anyhow::Result<()> {
    let month = a.month;
    let pool = a.db.connect(2).await.context("cannot connect to the database")?;
    let st = crate::ledger::statement(&pool, month, policy_choice(a.mode, a.unallocated)).await?;
    if let Some(team) = &a.team
        && !crate::ledger::team_known(&pool, &st, team).await?
    {
        bail!("unknown team {team}");
    }
    let include = |t: &str| a.team.as_deref().is_none_or(|only| only == t);
    let bytes = match a.format {
        // the whole month (no --team) ends with the cluster rows from layout 2 on, as the API's export does
        ExportFormat::Csv => crate::export::bill_csv(&st, include, a.team.is_none())?,
        ExportFormat::Pdf => {
            let fonts = crate::export::FontChain::installed()?;
            let tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
            // one team's statement is what goes to its lead: no cluster-wide summary then
            let scope = a.team.clone().map_or_else(Scope::all, |t| Scope::teams(vec![t]));
            let mut extras = crate::waste::extras_for(&pool, &st, tz, &scope).await?;
            // a draft names who ran the export (a closed month's preparer is its close)
            let user = std::env::var("USER").unwrap_or_else(|_| "cli".into());
            let now = Utc::now();
            let at = chrono::DurationRound::duration_trunc(now, chrono::TimeDelta::minutes(1)).unwrap_or(now);
            extras.prepared = Some(crate::export::Prepared { by: format!("cli:{user}"), at });
            crate::export::statement_pdf(&st, include, &fonts, &extras, a.lang)?
        }
        ExportFormat::Xlsx => crate::export::bill_xlsx(&st, include, a.team.is_none())?,
    };
    match a.out {
        Some(path) => {
            // written next to the target and renamed: a failed export leaves no half-written file
            let tmp = path.with_extension("partial");
            std::fs::write(&tmp, &bytes).with_context(|| format!("writing {}", tmp.display()))?;
            std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {} ({} bytes)", path.display(), bytes.len());
        }
        None => {
            use std::io::Write;
            std::io::stdout().write_all(&bytes)?;
        }
    }
    Ok(())
}

async fn readiness_cmd(a: ReadinessArgs) -> anyhow::Result<()> {
    let pool = a.db.connect(2).await.context("cannot connect to the database")?;
    let tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
    let st = crate::ledger::statement(&pool, a.month, crate::billing::PolicyChoice::NONE).await?;
    let r = crate::readiness::readiness(&pool, a.month, tz, &st.bills, Utc::now()).await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else if r.ready {
        println!("{}: ready to close", a.month);
    } else {
        println!("{}: not ready to close ({} blocker(s))", a.month, r.blockers.len());
        for b in &r.blockers {
            println!("  - {b}");
        }
    }
    if !r.ready {
        std::process::exit(1);
    }
    Ok(())
}

async fn close_cmd(a: CloseArgs) -> anyhow::Result<()> {
    // finance names the policy it freezes; a configured default decided by someone else earlier is not enough
    let Some(policy) = policy_choice(a.mode, a.unallocated).complete() else {
        bail!(
            "closing freezes a bill policy: give --mode (showback or chargeback) and --unallocated \
             (kept-by-platform or spread-proportionally); see the draft first with `cardhour export --month {} \
             --mode … --unallocated …`",
            a.month
        );
    };
    let pool = a.db.connect(4).await.context("cannot connect to the database")?;
    let tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
    let req = crate::ledger::CloseRequest { policy, override_reason: a.override_reason };
    match crate::ledger::close(&pool, a.month, req, tz, &cli_actor()).await {
        Ok(st) => {
            println!(
                "closed {} (content hash {}){}",
                a.month,
                st.content_hash.as_deref().unwrap_or("?"),
                if st.close_override.is_some() { ", incomplete, by override" } else { "" }
            );
            Ok(())
        }
        Err(crate::ledger::LedgerError::NotReady(r)) => {
            eprintln!("{} is not ready to close ({} blocker(s)):", a.month, r.blockers.len());
            for b in &r.blockers {
                eprintln!("  - {b}");
            }
            bail!("not closed: complete the month (ingest the hours, set the rates) or give --override REASON")
        }
        Err(e) => Err(e.into()),
    }
}

async fn budgets_cmd(a: BudgetsArgs) -> anyhow::Result<()> {
    // one connection holds the turn at alerting (alerts::check_budgets) while the others read
    let pool = a.db.connect(4).await.context("cannot connect to the database")?;
    let tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
    let at = match a.at {
        Some(t) => resolve_time("--at", t, tz)?,
        None => Utc::now(),
    };
    let month = a.month.unwrap_or_else(|| crate::billing::Month::containing(at, tz));
    let run = crate::alerts::check_budgets(&pool, month, tz, at, a.webhook.as_deref()).await?;
    println!("{month}: {} new alerts, {} delivered, {} not delivered", run.raised, run.delivered, run.failed);
    if run.failed > 0 {
        bail!("{} alerts could not be delivered; they are retried on the next run", run.failed);
    }
    Ok(())
}
