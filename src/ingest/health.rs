//! Ingest health: per cluster, whether the stored numbers are complete — how far the hours reach and how late
//! they are, what was kept over smaller reads, reads that failed and were not made good, and the anomalies of the
//! last day; and, once for all clusters, team labels written differently that make one team.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use sqlx::PgPool;

use crate::db;

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ClusterHealth {
    pub cluster: String,
    pub prometheus_url: String,
    /// Every hour from the first stored one up to here is stored.
    pub watermark: Option<DateTime<Utc>>,
    /// Whole hours between the watermark and the newest hour that has ended.
    pub lag_hours: Option<i64>,
    pub first_hour: Option<DateTime<Utc>>,
    pub last_hour: Option<DateTime<Utc>>,
    pub hours_stored: i64,
    pub last_ingested_at: Option<DateTime<Utc>>,
    /// How the last run read the cluster (`remote-read`, `vm-export`, `query`) and why (`--source`, an `auto` probe).
    pub sample_source: Option<String>,
    pub sample_source_reason: Option<String>,
    /// Stored hours a later read held less for, left as they were (newest first).
    pub kept_hours: Vec<KeptHour>,
    /// Reads that failed and whose hours have not all been stored since (a close of their months waits).
    pub failed_windows: Vec<FailedWindow>,
    /// Anomalies of the hours of the last 24 h (unknown resources, non-finite samples …).
    pub anomalies: Vec<AnomalyCount>,
    /// Of the GPU-hours of the cluster's newest 24 stored hours, the share no utilization series covered (their
    /// effective GPU-hours are unknown, not zero); `None` when those hours hold no GPU-hours.
    pub unmetered_share_24h: Option<f64>,
    /// Of the GPU-hours of the cluster's newest 24 stored hours, those counted through kube-state-metrics scrape
    /// gaps (`--ksm-gap-bridge`: pods Running on both sides of a short gap).
    pub bridged_gpu_hours_24h: f64,
    /// The kube-state-metrics scrape gaps of the hours of the last 24 h, oldest first: bridged ones, and longer
    /// ones whose time is not billed.
    pub ksm_gaps: Vec<KsmGap>,
    /// Nodes of the last 31 days whose cards nothing counts (a unit taken as a card: `unverified_node`, or
    /// renamed replicas at the assumed count: `default_replicas`) or whose GPU model nothing names
    /// (`unknown_gpu_model`), with their hours and card-hours: configure them (`cardhour nodes set`).
    pub node_issues: Vec<NodeIssue>,
    /// What the workers see of it: hours queued and held, failed reads waiting for their retry, the batch size
    /// they read with, failures in a row, the last error and when reads recovered (absent before any worker ran).
    pub worker: Option<QueueHealth>,
}

/// An hour kept because a read held less than what is stored.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct KeptHour {
    pub cluster: String,
    pub hour: DateTime<Utc>,
    pub run_id: i64,
    pub stored_rows: i32,
    pub stored_samples: Option<i64>,
    pub read_rows: i32,
    pub read_samples: i64,
    pub at: DateTime<Utc>,
}

impl From<&db::history::KeptHour> for KeptHour {
    fn from(k: &db::history::KeptHour) -> Self {
        Self {
            cluster: k.cluster.clone(),
            hour: k.hour,
            run_id: k.run_id,
            stored_rows: k.stored_rows,
            stored_samples: k.stored_samples,
            read_rows: k.read_rows,
            read_samples: k.read_samples,
            at: k.at,
        }
    }
}

/// One cluster's queue and worker state, for ingest health.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct QueueHealth {
    pub cluster: String,
    /// Hours queued (due or not), and of them held by a worker now.
    pub queued_hours: i64,
    pub leased_hours: i64,
    /// The workers holding hours of it.
    pub workers: Vec<String>,
    /// Hours whose last read failed, and when the next try is due.
    pub failing_hours: i64,
    pub next_retry_at: Option<DateTime<Utc>>,
    pub batch_hours: Option<i32>,
    pub failures_in_row: i32,
    pub last_success_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub last_error_kind: Option<String>,
    pub last_error_at: Option<DateTime<Utc>>,
    pub recovered_at: Option<DateTime<Utc>>,
}

impl From<&db::queue::QueueHealth> for QueueHealth {
    fn from(q: &db::queue::QueueHealth) -> Self {
        Self {
            cluster: q.cluster.clone(),
            queued_hours: q.queued_hours,
            leased_hours: q.leased_hours,
            workers: q.workers.clone(),
            failing_hours: q.failing_hours,
            next_retry_at: q.next_retry_at,
            batch_hours: q.batch_hours,
            failures_in_row: q.failures_in_row,
            last_success_at: q.last_success_at,
            last_error: q.last_error.clone(),
            last_error_kind: q.last_error_kind.clone(),
            last_error_at: q.last_error_at,
            recovered_at: q.recovered_at,
        }
    }
}

/// One node with a problem that its bills carry until configuration settles it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct NodeIssue {
    pub node: String,
    /// `unverified_node`, `default_replicas` or `unknown_gpu_model`.
    pub kind: String,
    pub hours: i64,
    /// The node's capacity card-hours over those hours (as counted: at face value where unverified).
    pub card_hours: Option<f64>,
}

/// One kube-state-metrics scrape gap (a restart, an upgrade): every series of its pods missing between two scrapes.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct KsmGap {
    /// `<last sample before>..<first sample after>` (RFC 3339, UTC); a side the ingest could not see is left
    /// out (`<last>..`: silent beyond what the hour reads).
    pub span: String,
    /// Counted through for the pods Running on both sides (at most `--ksm-gap-bridge`); otherwise their time in it
    /// is not billed.
    pub bridged: bool,
    /// The stored hours it falls in.
    pub hours: i64,
    /// The pods Running across it (the most of any of those hours).
    pub pods: i64,
}

/// The anomaly kinds listed per node in health.
pub const NODE_ISSUE_KINDS: &[&str] = &["unverified_node", "default_replicas", "unknown_gpu_model"];

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct FailedWindow {
    pub from: DateTime<Utc>,
    pub to: DateTime<Utc>,
    pub error: String,
    pub failed_at: DateTime<Utc>,
    pub hours_not_read_since: i64,
}

/// Team label values that make one team id (SPEC §4): counted as one team, listed here once.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct MergedLabels {
    pub team_id: String,
    pub labels: Vec<String>,
}

/// Ingest health of every cluster, and what concerns them all.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct IngestHealth {
    pub clusters: Vec<ClusterHealth>,
    pub merged_team_labels: Vec<MergedLabels>,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct AnomalyCount {
    pub kind: String,
    /// Distinct series, resources or nodes concerned.
    pub subjects: i64,
    pub count: i64,
}

/// The health of every cluster at `now`.
pub async fn health(pool: &PgPool, now: DateTime<Utc>) -> Result<IngestHealth, sqlx::Error> {
    let ended = super::window::floor_hour(now);
    let anomalies = db::health::anomalies(pool, ended - Duration::hours(24)).await?;
    let kept = db::history::kept_hours(pool, None).await?;
    let failures = db::readiness::open_failures(pool, DateTime::<Utc>::UNIX_EPOCH, now).await?;
    let clusters = db::health::clusters(pool).await?;
    let workers = db::queue::health(pool).await?;
    let shares = db::health::metered_share(pool, 24).await?;
    let bridged = db::health::bridged(pool, 24).await?;
    let gaps = db::health::ksm_gaps(pool, ended - Duration::hours(24)).await?;
    let kinds: Vec<String> = NODE_ISSUE_KINDS.iter().map(|k| (*k).to_string()).collect();
    let node_issues = db::health::node_issues(pool, ended - Duration::days(31), &kinds).await?;
    let merged_team_labels = db::health::merged_team_labels(pool)
        .await?
        .into_iter()
        .map(|m| MergedLabels { team_id: m.team_id, labels: m.labels })
        .collect();
    let clusters = clusters
        .into_iter()
        .map(|c| ClusterHealth {
            lag_hours: c.watermark.map(|w| (ended - w).num_hours().max(0)),
            kept_hours: kept.iter().filter(|k| k.cluster == c.cluster).map(KeptHour::from).collect(),
            failed_windows: failures
                .iter()
                .filter(|f| f.cluster == c.cluster)
                .map(|f| FailedWindow {
                    from: f.hour_from,
                    to: f.hour_to,
                    error: f.error.clone(),
                    failed_at: f.failed_at,
                    hours_not_read_since: f.hours_not_read_since,
                })
                .collect(),
            anomalies: anomalies
                .iter()
                .filter(|a| a.cluster == c.cluster)
                .map(|a| AnomalyCount { kind: a.kind.clone(), subjects: a.subjects, count: a.count })
                .collect(),
            unmetered_share_24h: shares
                .iter()
                .find(|s| s.cluster == c.cluster && s.gpu_seconds > 0.0)
                .map(|s| s.unmetered_gpu_seconds / s.gpu_seconds),
            bridged_gpu_hours_24h: bridged
                .iter()
                .find(|b| b.cluster == c.cluster)
                .map_or(0.0, |b| b.bridged_gpu_seconds / 3600.0),
            ksm_gaps: gaps
                .iter()
                .filter(|g| g.cluster == c.cluster)
                .map(|g| KsmGap {
                    span: g.subject.clone(),
                    bridged: g.kind == "ksm_gap_bridged",
                    hours: g.hours,
                    pods: g.pods,
                })
                .collect(),
            node_issues: node_issues
                .iter()
                .filter(|n| n.cluster == c.cluster)
                .map(|n| NodeIssue {
                    node: n.node.clone(),
                    kind: n.kind.clone(),
                    hours: n.hours,
                    card_hours: n.card_hours,
                })
                .collect(),
            worker: workers.iter().find(|w| w.cluster == c.cluster).map(QueueHealth::from),
            cluster: c.cluster,
            prometheus_url: c.prometheus_url,
            watermark: c.watermark,
            first_hour: c.first_hour,
            last_hour: c.last_hour,
            hours_stored: c.hours_stored,
            last_ingested_at: c.last_ingested_at,
            sample_source: c.sample_source,
            sample_source_reason: c.sample_source_reason,
        })
        .collect();
    Ok(IngestHealth { clusters, merged_team_labels })
}
