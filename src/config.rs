//! Configuration shared by the subcommands: flags with `DATABASE_URL` / `CARDHOUR_*` environment fallbacks, and
//! the parsers for the times and durations they take.

use std::time::Duration;

use clap::Args;

use crate::ingest::SourceRequest;
use crate::metering::{HamiPolicy, MAX_KSM_GAP_BRIDGE};
use crate::prom::auth::{Header, Secret};

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

/// SSO mode for `serve`: believe an authenticating proxy's user and groups headers (e.g. oauth2-proxy's).
#[derive(Debug, Clone, Args)]
pub struct ProxyArgs {
    /// The authenticating proxy's addresses (IPs or networks, e.g. 10.0.0.5, 10.0.0.0/24; repeat the flag, or
    /// comma-separate in the environment). Turns SSO mode on: the pages take their user from the proxy's headers,
    /// believed only on connections from these addresses (the peer address, never X-Forwarded-For); no login
    /// form.
    #[arg(long = "proxy-trusted", value_name = "ADDR", env = "CARDHOUR_PROXY_TRUSTED", value_delimiter = ',', value_parser = crate::auth::proxy::parse_trusted)]
    pub trusted: Vec<ipnet::IpNet>,
    /// The header naming the signed-in user.
    #[arg(long = "proxy-user-header", value_name = "HEADER", env = "CARDHOUR_PROXY_USER_HEADER", default_value = "X-Forwarded-User", value_parser = parse_header_name)]
    pub user_header: axum::http::HeaderName,
    /// The header listing the user's groups, comma-separated.
    #[arg(long = "proxy-groups-header", value_name = "HEADER", env = "CARDHOUR_PROXY_GROUPS_HEADER", default_value = "X-Forwarded-Groups", value_parser = parse_header_name)]
    pub groups_header: axum::http::HeaderName,
    /// What a group grants: GROUP=ROLE (admin, finance, viewer) or GROUP=team_lead:TEAM; repeat the flag (or
    /// comma-separate in the environment). The highest role of a user's groups wins; a team lead gets the teams
    /// of all its groups. A user whose groups grant nothing is refused (403).
    #[arg(long = "proxy-group", value_name = "GROUP=ROLE", env = "CARDHOUR_PROXY_GROUPS", value_delimiter = ',', value_parser = crate::auth::proxy::GroupGrant::parse)]
    pub groups: Vec<crate::auth::proxy::GroupGrant>,
    /// Where logging out sends the browser: the proxy's sign-out (e.g. /oauth2/sign_out). Without it, logging
    /// out ends only the portal's session.
    #[arg(long = "proxy-sign-out-url", value_name = "URL", env = "CARDHOUR_PROXY_SIGN_OUT_URL", value_parser = parse_sign_out_url)]
    pub sign_out_url: Option<String>,
}

impl ProxyArgs {
    /// The proxy to believe; `None` without `--proxy-trusted` (SSO off). Group mappings without a trusted
    /// address, or SSO without any mapping (everyone refused), are configuration errors.
    pub fn config(&self) -> Result<Option<crate::auth::ProxyConfig>, String> {
        if self.trusted.is_empty() {
            if !self.groups.is_empty() || self.sign_out_url.is_some() {
                return Err(
                    "--proxy-group and --proxy-sign-out-url need --proxy-trusted (the proxy's addresses)".into()
                );
            }
            return Ok(None);
        }
        if self.groups.is_empty() {
            return Err("SSO mode (--proxy-trusted) needs at least one --proxy-group GROUP=ROLE: without one every user is refused".into());
        }
        Ok(Some(crate::auth::ProxyConfig {
            user_header: self.user_header.clone(),
            groups_header: self.groups_header.clone(),
            trusted: self.trusted.clone(),
            grants: self.groups.clone(),
            sign_out_url: self.sign_out_url.clone(),
        }))
    }
}

fn parse_header_name(s: &str) -> Result<axum::http::HeaderName, String> {
    axum::http::HeaderName::from_bytes(s.trim().as_bytes())
        .map_err(|_| format!("`{}` is not a header name (e.g. X-Forwarded-User)", s.escape_debug()))
}

/// A sign-out address: a path of this site (`/oauth2/sign_out`) or an absolute http(s) URL.
fn parse_sign_out_url(s: &str) -> Result<String, String> {
    let local = crate::auth::local_next(Some(s)) == s;
    if local || parse_webhook_url(s).is_ok() {
        Ok(s.to_string())
    } else {
        Err(format!("`{}` is neither a path (/oauth2/sign_out) nor an http(s) URL", s.escape_debug()))
    }
}

/// A worker's own monitoring port.
#[derive(Debug, Clone, Args)]
pub struct MonitoringArgs {
    /// Serve /metrics (Prometheus text format), /healthz and /readyz on this address, e.g. 127.0.0.1:9465
    /// (default: no port; several workers on one host each need their own).
    #[arg(long, value_name = "ADDR", env = "CARDHOUR_METRICS_LISTEN")]
    pub metrics_listen: Option<std::net::SocketAddr>,
}

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
    /// Hours read per round of queries and stored per transaction (a batch).
    #[arg(long, env = "CARDHOUR_CHUNK_HOURS", default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=168))]
    pub chunk_hours: u32,
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

/// `90s`, `10m`, `1h30m` (humantime), or a bare number of seconds; zero is refused.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = match s.trim().parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => humantime::parse_duration(s.trim())
            .map_err(|e| format!("`{s}` is not a duration ({e}); e.g. 60s, 10m, 1h"))?,
    };
    if d.is_zero() { Err(format!("`{s}` must be longer than zero")) } else { Ok(d) }
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
        assert_eq!(parse_bridge("0"), Ok(Duration::ZERO));
        assert_eq!(parse_bridge("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_bridge("30m"), Ok(Duration::from_secs(1800)));
        assert!(parse_bridge("31m").unwrap_err().contains("longer than 30m"));
        assert!(parse_bridge("-1").is_err());
    }

    #[test]
    fn sso_needs_its_proxy_and_a_mapping() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            proxy: ProxyArgs,
        }
        let parse =
            |args: &[&str]| Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map(|c| c.proxy);
        let off = parse(&[]).unwrap();
        assert!(off.config().unwrap().is_none());
        assert_eq!(off.user_header.as_str(), "x-forwarded-user");
        let on = parse(&[
            "--proxy-trusted",
            "10.0.0.0/24,::1",
            "--proxy-group",
            "fin=finance",
            "--proxy-group",
            "ml=team_lead:vision",
        ])
        .unwrap()
        .config()
        .unwrap()
        .unwrap();
        assert_eq!((on.trusted.len(), on.grants.len()), (2, 2));
        assert!(parse(&["--proxy-group", "fin=finance"]).unwrap().config().is_err());
        assert!(parse(&["--proxy-trusted", "10.0.0.1"]).unwrap().config().is_err());
        assert!(parse(&["--proxy-trusted", "proxy.local"]).is_err());
        assert!(parse(&["--proxy-trusted", "10.0.0.1", "--proxy-group", "x=boss"]).is_err());
        assert!(parse(&["--proxy-sign-out-url", "//evil.example"]).is_err());
        assert!(parse(&["--proxy-sign-out-url", "/oauth2/sign_out"]).is_ok());
    }

    #[test]
    fn webhooks() {
        assert!(parse_webhook_url("http://127.0.0.1:9/hook").is_ok());
        assert!(parse_webhook_url("ftp://x/hook").is_err());
        assert!(parse_webhook_url("/hook").is_err());
    }
}
