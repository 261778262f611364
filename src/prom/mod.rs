//! Prometheus HTTP API client (also Thanos, Mimir, VictoriaMetrics): raw samples in, typed errors out — by the
//! query API, by remote read with streamed XOR chunks, or by VictoriaMetrics' export API.

pub mod auth;
pub mod backend;
mod client;
mod model;
pub mod proto;
pub mod remote_read;
mod retry;
pub mod selector;
pub mod vm_export;
pub mod xor;

pub use auth::SourceAuth;
pub use backend::RangeEnds;
pub use client::{PromClient, QUERY_RANGE_MAX_POINTS, trim};
pub use model::{RawSeries, parse_response};
pub use retry::{RetryPolicy, with_retry};

/// Why a Prometheus call failed. Every variant says what to check; none carries a secret.
#[derive(Debug, thiserror::Error)]
pub enum PromError {
    #[error("Prometheus at {url} is unreachable: {reason}")]
    Unreachable { url: String, reason: String },
    #[error("Prometheus at {url} did not answer within {seconds} s")]
    Timeout { url: String, seconds: u64 },
    #[error("Prometheus answered HTTP {status}: {body}")]
    Status { status: u16, body: String },
    #[error("Prometheus rejected the query ({error_type}): {error}")]
    Query { error_type: String, error: String },
    #[error("Prometheus sent a malformed answer: {0}")]
    Malformed(String),
    #[error("invalid Prometheus URL `{0}`: expected http(s)://host:port[/path]")]
    BadUrl(String),
    /// The remote-read source failed: absent, disabled, or a stream that does not decode.
    #[error("remote read at {url}: {reason}")]
    RemoteRead { url: String, reason: String, transient: bool },
    /// The VictoriaMetrics export source failed: absent, or an answer that does not decode.
    #[error("vm export at {url}: {reason}")]
    VmExport { url: String, reason: String, transient: bool },
    /// The source (or the proxy in front of it) refused who asks: HTTP 401 or 403.
    #[error(
        "Prometheus at {url} refused the request: HTTP {status} {}: {body} (check the cluster's bearer token, \
         basic auth, client certificate or tenant header)",
        denial(.status)
    )]
    Denied { url: String, status: u16, body: String },
    /// The TLS handshake failed: an unknown CA, a name that does not match, a client certificate missing or refused.
    #[error("TLS handshake with {url} failed: {reason} (check the cluster's CA file and client certificate)")]
    Tls { url: String, reason: String },
    /// A credential could not be read, or a certificate or key does not parse.
    #[error("credentials for {url}: {reason}")]
    Credentials { url: String, reason: String },
}

/// The reason phrase of a refusal's status.
fn denial(status: &u16) -> &'static str {
    if *status == 401 { "Unauthorized" } else { "Forbidden" }
}

impl PromError {
    /// Worth trying again: the server may come back; a rejected query or a bad URL will not change.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Unreachable { .. } | Self::Timeout { .. } | Self::Malformed(_) => true,
            Self::Status { status, .. } => *status >= 500 || *status == 429,
            Self::Query { error_type, .. } => error_type == "timeout" || error_type == "unavailable",
            Self::BadUrl(_) | Self::Denied { .. } | Self::Tls { .. } | Self::Credentials { .. } => false,
            Self::RemoteRead { transient, .. } | Self::VmExport { transient, .. } => *transient,
        }
    }

    /// The error as one of a few fixed kinds (the `kind` label of the source-error metrics): bounded, and each says
    /// where to look.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unreachable { .. } => "unreachable",
            Self::Timeout { .. } => "timeout",
            Self::Status { .. } => "http_status",
            Self::Query { .. } => "query_rejected",
            Self::Malformed(_) => "bad_answer",
            Self::BadUrl(_) => "bad_url",
            Self::RemoteRead { .. } => "remote_read",
            Self::VmExport { .. } => "vm_export",
            Self::Denied { .. } => "denied",
            Self::Tls { .. } => "tls",
            Self::Credentials { .. } => "credentials",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_error_has_a_fixed_kind() {
        let url = || "http://p".to_string();
        let kinds = [
            PromError::Unreachable { url: url(), reason: String::new() },
            PromError::Timeout { url: url(), seconds: 1 },
            PromError::Status { status: 503, body: String::new() },
            PromError::Query { error_type: "bad_data".into(), error: String::new() },
            PromError::Malformed(String::new()),
            PromError::BadUrl(url()),
            PromError::RemoteRead { url: url(), reason: String::new(), transient: false },
            PromError::VmExport { url: url(), reason: String::new(), transient: true },
            PromError::Denied { url: url(), status: 401, body: String::new() },
            PromError::Tls { url: url(), reason: String::new() },
            PromError::Credentials { url: url(), reason: String::new() },
        ]
        .iter()
        .map(PromError::kind)
        .collect::<Vec<_>>();
        assert_eq!(
            kinds,
            [
                "unreachable",
                "timeout",
                "http_status",
                "query_rejected",
                "bad_answer",
                "bad_url",
                "remote_read",
                "vm_export",
                "denied",
                "tls",
                "credentials"
            ]
        );
        // the catalogue's help names them all
        let help = crate::telemetry::CATALOGUE.iter().find(|f| f.name == crate::telemetry::SOURCE_ERRORS).unwrap().help;
        for k in kinds {
            assert!(help.contains(k), "{k}");
        }
    }
}
