//! The flags that say how to read one cluster's Prometheus (its address, its metering settings, its credentials),
//! with `CARDHOUR_*` environment fallbacks: a worker's `--config` file takes its defaults from them
//! ([`super::config`]).

use std::time::Duration;

use clap::Args;

use super::SourceRequest;
use crate::metering::{HamiPolicy, MAX_KSM_GAP_BRIDGE};
use crate::prom::auth::{Header, Secret};
use crate::validate::duration::parse_duration;

/// How to read one cluster's Prometheus.
#[derive(Debug, Clone, Args)]
pub struct SourceArgs {
    /// Name the cluster's usage is stored under (required unless a worker's --config lists the clusters).
    #[arg(long, env = "CARDHOUR_CLUSTER")]
    pub cluster: Option<String>,
    /// Prometheus (or Thanos, Mimir, VictoriaMetrics) base URL, e.g. http://127.0.0.1:9090; with --config, the
    /// default of clusters that name none.
    #[arg(long, env = "CARDHOUR_PROMETHEUS_URL")]
    pub prometheus: Option<String>,
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
    /// Where raw samples are read: remote-read (Prometheus ≥ 2.13 streamed chunks), vm-export (VictoriaMetrics'
    /// /api/v1/export), query (the query API, any backend), or auto (a remote-read probe, then an export probe, once
    /// per cluster, remembered; falls back to the query API).
    #[arg(long = "source", env = "CARDHOUR_SOURCE", default_value = "auto", value_parser = parse_source)]
    pub sample_source: SourceRequest,
    /// The most hours read and stored in one transaction (a batch). `ingest` sizes its batches by
    /// --batch-samples within it (default 744, a month); the worker claims at most this many hours at once
    /// (default 6, at most 168).
    #[arg(long, env = "CARDHOUR_CHUNK_HOURS", value_parser = clap::value_parser!(u32).range(1..=744))]
    pub chunk_hours: Option<u32>,
    /// About how many raw samples one batch of `ingest` reads: batches are as long as fit it at the density the
    /// last one showed (one hour at least), so memory follows the samples, not the hours.
    #[arg(long, env = "CARDHOUR_BATCH_SAMPLES", default_value_t = super::plan::DEFAULT_BATCH_SAMPLES, value_parser = clap::value_parser!(u64).range(super::plan::MIN_BATCH_SAMPLES..))]
    pub batch_samples: u64,
    /// The longest kube-state-metrics scrape gap (a restart, an upgrade) counted through for pods Running on both
    /// sides of it, reported apart as bridged GPU-hours; longer gaps are not billed and are reported. 0 bridges
    /// nothing; at most 30m.
    #[arg(long, env = "CARDHOUR_KSM_GAP_BRIDGE", default_value = "15m", value_parser = parse_bridge)]
    pub ksm_gap_bridge: Duration,
    #[command(flatten)]
    pub auth: SourceAuthArgs,
}

/// How a cluster's Prometheus is told who asks (with --config, the default of clusters that set none). Secrets
/// belong in files or the environment, not on a command line others can read; `Debug` redacts them.
#[derive(Debug, Clone, Default, Args)]
pub struct SourceAuthArgs {
    /// A file holding the bearer token sent as `Authorization: Bearer …`, read at every request (a mounted
    /// Kubernetes service-account token rotates).
    #[arg(long = "prometheus-bearer-token-file", value_name = "FILE", env = "CARDHOUR_PROMETHEUS_BEARER_TOKEN_FILE")]
    pub bearer_token_file: Option<std::path::PathBuf>,
    /// The bearer token itself (prefer the file or the environment variable).
    #[arg(long = "prometheus-bearer-token", value_name = "TOKEN", env = "CARDHOUR_PROMETHEUS_BEARER_TOKEN", hide_env_values = true, value_parser = Secret::parse)]
    pub bearer_token: Option<Secret>,
    /// The basic-auth user name (its password by --prometheus-password-file or CARDHOUR_PROMETHEUS_PASSWORD).
    #[arg(long = "prometheus-username", value_name = "USER", env = "CARDHOUR_PROMETHEUS_USERNAME")]
    pub username: Option<String>,
    /// A file holding the basic-auth password, read at every request.
    #[arg(long = "prometheus-password-file", value_name = "FILE", env = "CARDHOUR_PROMETHEUS_PASSWORD_FILE")]
    pub password_file: Option<std::path::PathBuf>,
    /// The basic-auth password itself (prefer the file or the environment variable).
    #[arg(long = "prometheus-password", value_name = "PASSWORD", env = "CARDHOUR_PROMETHEUS_PASSWORD", hide_env_values = true, value_parser = Secret::parse)]
    pub password: Option<Secret>,
    /// The CA certificate (PEM) that signed the server's certificate, trusted instead of the system's roots.
    #[arg(long = "prometheus-ca-file", value_name = "FILE", env = "CARDHOUR_PROMETHEUS_CA_FILE")]
    pub ca_file: Option<std::path::PathBuf>,
    /// A client certificate (PEM) for servers that require one (mTLS), with --prometheus-key-file.
    #[arg(long = "prometheus-cert-file", value_name = "FILE", env = "CARDHOUR_PROMETHEUS_CERT_FILE")]
    pub cert_file: Option<std::path::PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long = "prometheus-key-file", value_name = "FILE", env = "CARDHOUR_PROMETHEUS_KEY_FILE")]
    pub key_file: Option<std::path::PathBuf>,
    /// A header sent with every request, `Name: value`, e.g. 'X-Scope-OrgID: team-a' for a Mimir or Cortex
    /// tenant; repeat the flag (in the environment, one header per line).
    #[arg(long = "prometheus-header", value_name = "NAME: VALUE", env = "CARDHOUR_PROMETHEUS_HEADERS", value_delimiter = '\n', hide_env_values = true, value_parser = Header::parse)]
    pub headers: Vec<Header>,
}

fn parse_source(s: &str) -> Result<SourceRequest, String> {
    s.parse()
}

/// A KSM gap bridge span: a duration as [`parse_duration`], or `0` (bridge nothing), at most
/// [`MAX_KSM_GAP_BRIDGE`].
pub fn parse_bridge(s: &str) -> Result<Duration, String> {
    let d = if s.trim().parse::<u64>() == Ok(0) { Duration::ZERO } else { parse_duration(s)? };
    if d > MAX_KSM_GAP_BRIDGE {
        return Err(format!(
            "`{s}` is longer than {}: an outage that long is not billed by assumption",
            humantime::format_duration(MAX_KSM_GAP_BRIDGE)
        ));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bridges() {
        assert_eq!(parse_bridge("0"), Ok(Duration::ZERO));
        assert_eq!(parse_bridge("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_bridge("30m"), Ok(Duration::from_secs(1800)));
        assert!(parse_bridge("31m").unwrap_err().contains("longer than 30m"));
        assert!(parse_bridge("-1").is_err());
    }
}
