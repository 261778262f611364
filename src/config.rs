//! Configuration shared by the subcommands: flags with `DATABASE_URL` / `CARDHOUR_*` environment fallbacks, and
//! the parsers for the times and durations they take.

use std::time::Duration;

use clap::Args;

use crate::ingest::{FetchSpec, SourceRequest};
use crate::metering::{HamiPolicy, MeterConfig};

#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// Postgres connection URL.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Longest one SQL statement may run before PostgreSQL cancels it (`migrate` has no limit), so no request or
    /// report holds the database for minutes.
    #[arg(long, env = "CARDHOUR_STATEMENT_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub statement_timeout: Duration,
}

impl DatabaseArgs {
    /// A pool of at most `max_connections`, every statement bounded by `--statement-timeout`.
    pub async fn connect(&self, max_connections: u32) -> Result<sqlx::PgPool, sqlx::Error> {
        crate::db::connect_bounded(&self.database_url, max_connections, Some(self.statement_timeout)).await
    }
}

/// How to read one cluster's Prometheus.
#[derive(Debug, Clone, Args)]
pub struct SourceArgs {
    /// Name the cluster's usage is stored under.
    #[arg(long, env = "CARDHOUR_CLUSTER")]
    pub cluster: String,
    /// Prometheus (or Thanos, Mimir, VictoriaMetrics) base URL, e.g. http://127.0.0.1:9090.
    #[arg(long, env = "CARDHOUR_PROMETHEUS_URL")]
    pub prometheus: String,
    /// Scrape interval of kube-state-metrics (e.g. 30s); inferred from the samples when not given.
    #[arg(long, env = "CARDHOUR_SCRAPE_INTERVAL", value_parser = parse_duration)]
    pub scrape_interval: Option<Duration>,
    /// Extra label matchers for every query, e.g. 'cluster="gpu-a"' when several clusters share one Prometheus.
    #[arg(long = "match", env = "CARDHOUR_MATCH")]
    pub matchers: Option<String>,
    /// Namespace label that names the team (KSM exports it as label_<name>).
    #[arg(long, env = "CARDHOUR_TEAM_LABEL", default_value = "team")]
    pub team_label: String,
    /// Time-slicing replicas assumed where a node has no DCGM to count its cards.
    #[arg(long, env = "CARDHOUR_TIMESLICE_REPLICAS", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub timeslice_replicas: u32,
    /// HAMi's deviceSplitCount: virtual GPUs advertised per card.
    #[arg(long, env = "CARDHOUR_HAMI_SPLIT", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub hami_split: u32,
    /// HAMi card share: cores, memory, or max.
    #[arg(long, env = "CARDHOUR_HAMI_POLICY", default_value = "cores")]
    pub hami_policy: HamiPolicy,
    /// Per-request timeout for Prometheus.
    #[arg(long, env = "CARDHOUR_PROMETHEUS_TIMEOUT", default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Where raw samples are read: remote-read (Prometheus ≥ 2.13 streamed chunks), query (the query API, any
    /// backend), or auto (a remote-read probe once per cluster, remembered; falls back to the query API).
    #[arg(long = "source", env = "CARDHOUR_SOURCE", default_value = "auto", value_parser = parse_source)]
    pub sample_source: SourceRequest,
    /// Hours read per round of queries.
    #[arg(long, env = "CARDHOUR_CHUNK_HOURS", default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=168))]
    pub chunk_hours: u32,
}

fn parse_source(s: &str) -> Result<SourceRequest, String> {
    s.parse()
}

impl SourceArgs {
    pub fn fetch_spec(&self) -> FetchSpec {
        FetchSpec { matchers: self.matchers.clone(), team_label: format!("label_{}", self.team_label) }
    }

    pub fn meter_config(&self) -> MeterConfig {
        MeterConfig {
            scrape_interval_ms: self.scrape_interval.map(|d| d.as_millis() as i64),
            default_timeslice_replicas: self.timeslice_replicas,
            hami_split: self.hami_split,
            hami_policy: self.hami_policy,
            nodes: Default::default(),
        }
    }
}

/// `90s`, `10m`, `1h30m` (humantime), or a bare number of seconds; zero is refused.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = match s.trim().parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => humantime::parse_duration(s.trim())
            .map_err(|e| format!("`{s}` is not a duration ({e}); e.g. 60s, 10m, 1h"))?,
    };
    if d.is_zero() { Err(format!("`{s}` must be longer than zero")) } else { Ok(d) }
}

/// A webhook address: an absolute http(s) URL with a host.
pub fn parse_webhook_url(s: &str) -> Result<String, String> {
    let ok = url::Url::parse(s).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!("`{s}` is not an http(s) URL, e.g. https://hooks.example/cardhour"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("60"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn webhooks() {
        assert!(parse_webhook_url("http://127.0.0.1:9/hook").is_ok());
        assert!(parse_webhook_url("ftp://x/hook").is_err());
        assert!(parse_webhook_url("/hook").is_err());
    }
}
