//! Configuration shared by the subcommands: the database, SSO and monitoring flags with `DATABASE_URL` /
//! `CARDHOUR_*` environment fallbacks, and the parsers of the values they take (how a cluster is read is the
//! ingest's own flags, `crate::ingest::flags`; durations are parsed by [`crate::validate::duration`]).

use std::time::Duration;

use clap::Args;

use crate::validate::duration::parse_duration;

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
    let local = crate::auth::session::local_next(Some(s)) == s;
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

/// A webhook address: an absolute http(s) URL with a host.
pub fn parse_webhook_url(s: &str) -> Result<String, String> {
    crate::validate::http_url("url", s).map_err(|e| e.message)
}

#[cfg(test)]
mod tests {
    use super::*;

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
