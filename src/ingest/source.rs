//! Where an ingest reads raw samples: Prometheus remote read (streamed XOR chunks), VictoriaMetrics' export API
//! or the query API (any backend), behind one metering path; chosen by `--source` or probed once per cluster and
//! remembered.

use std::str::FromStr;

use serde::Serialize;
use sqlx::PgPool;

use crate::db;
use crate::prom::{PromClient, PromError, RawSeries};

/// How raw samples are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// `POST /api/v1/read`, `STREAMED_XOR_CHUNKS` (Prometheus ≥ 2.13, Mimir, Cortex).
    RemoteRead,
    /// `POST /api/v1/export`, JSON lines of raw samples (VictoriaMetrics).
    VmExport,
    /// `GET /api/v1/query` of range selectors (Prometheus, Thanos, VictoriaMetrics …).
    Query,
}

impl SourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RemoteRead => "remote-read",
            Self::VmExport => "vm-export",
            Self::Query => "query",
        }
    }
}

/// `--source`: one kind, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceRequest {
    Auto,
    Only(SourceKind),
}

impl FromStr for SourceRequest {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "remote-read" => Ok(Self::Only(SourceKind::RemoteRead)),
            "vm-export" => Ok(Self::Only(SourceKind::VmExport)),
            "query" => Ok(Self::Only(SourceKind::Query)),
            _ => Err(format!("unknown source `{s}`: use remote-read, vm-export, query or auto")),
        }
    }
}

impl FromStr for SourceKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.parse::<SourceRequest>()? {
            SourceRequest::Only(k) => Ok(k),
            SourceRequest::Auto => Err("`auto` is not a source kind".into()),
        }
    }
}

/// A cluster's sample source and why it was chosen.
#[derive(Debug, Clone)]
pub struct SampleSource {
    client: PromClient,
    kind: SourceKind,
    reason: String,
    /// Chosen by `auto` (probed now or remembered): a remote read or export that fails for good falls back to the
    /// query API.
    auto: bool,
    /// The probe's answer is worth keeping with the cluster (it did not merely fail to reach the server).
    remember: bool,
    /// Taken from what an earlier probe found for this cluster and URL.
    remembered: bool,
}

impl SampleSource {
    /// The query API, the universal fallback (what the library's [`super::backfill`] reads with).
    pub fn query(client: PromClient) -> Self {
        Self::new(client, SourceKind::Query, "the query API (library default)", false)
    }

    pub fn new(client: PromClient, kind: SourceKind, reason: impl Into<String>, auto: bool) -> Self {
        Self { client, kind, reason: reason.into(), auto, remember: auto, remembered: false }
    }

    pub fn kind(&self) -> SourceKind {
        self.kind
    }

    /// Why this source, as found (without the note that it was remembered).
    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// Why this source, for logs and summaries.
    pub fn describe(&self) -> String {
        if self.remembered { format!("{} (remembered)", self.reason) } else { self.reason.clone() }
    }

    /// The choice is a probe's, to be remembered with the cluster.
    pub fn probed(&self) -> bool {
        self.auto && self.remember
    }

    pub fn base_url(&self) -> &str {
        self.client.base_url()
    }

    /// Time spent decoding answers so far.
    pub fn decode_time(&self) -> std::time::Duration {
        self.client.decode_time()
    }

    /// A PromQL range query by the query API, whatever the source of raw samples (a server that streams remote
    /// reads answers PromQL too): for small aggregates such as the devices each hour saw.
    pub async fn query_range(
        &self,
        query: &str,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
    ) -> Result<Vec<RawSeries>, PromError> {
        self.client.query_range(query, start_ms, end_ms, step_ms).await
    }

    /// Which ends of a range selector the server includes (for PromQL over raw samples, such as the devices each
    /// hour saw): a VictoriaMetrics read by its export excludes the left one; otherwise its build info says.
    pub async fn range_ends(&self) -> Result<crate::prom::RangeEnds, PromError> {
        self.client.range_ends(self.kind == SourceKind::VmExport).await
    }

    /// Raw samples of `selector` in `[start_ms, end_ms)`, each sample in exactly one window by its own timestamp.
    pub async fn raw_samples(&self, selector: &str, start_ms: i64, end_ms: i64) -> Result<Vec<RawSeries>, PromError> {
        match self.kind {
            SourceKind::Query => self.client.raw_samples(selector, start_ms, end_ms).await,
            SourceKind::RemoteRead => match self.client.remote_read(selector, start_ms, end_ms).await {
                Err(e @ PromError::RemoteRead { transient: false, .. }) if self.auto => {
                    tracing::warn!(error = %e, selector, "remote read failed; reading this window by the query API");
                    self.client.raw_samples(selector, start_ms, end_ms).await
                }
                other => other,
            },
            SourceKind::VmExport => match self.client.vm_export(selector, start_ms, end_ms).await {
                Err(e @ PromError::VmExport { transient: false, .. }) if self.auto => {
                    tracing::warn!(error = %e, selector, "vm export failed; reading this window by the query API");
                    self.client.raw_samples(selector, start_ms, end_ms).await
                }
                other => other,
            },
        }
    }
}

/// The probe: a remote read of a series that does not exist over the last minute — a streamed answer (of no
/// frames) says remote read works; if it is not streamed, an export of the same series — an answer (of no lines)
/// says VictoriaMetrics' export works. Returns the kind, the reason, and whether the answer is worth remembering
/// (an unreachable server says nothing about what it serves).
pub async fn probe(client: &PromClient) -> (SourceKind, String, bool) {
    const PROBE: &str = r#"{__name__="cardhour_source_probe"}"#;
    let now = chrono::Utc::now().timestamp_millis();
    match client.remote_read(PROBE, now - 60_000, now).await {
        Ok(_) => (SourceKind::RemoteRead, "auto: remote read answered the probe with streamed XOR chunks".into(), true),
        Err(rr @ PromError::RemoteRead { transient: false, .. }) => match client
            .vm_export(PROBE, now - 60_000, now)
            .await
        {
            Ok(_) => (SourceKind::VmExport, format!("auto: {rr}; the VictoriaMetrics export answered the probe"), true),
            Err(e @ PromError::VmExport { transient: false, .. }) => {
                (SourceKind::Query, format!("auto: {rr}; {e}; reading by the query API"), true)
            }
            Err(e) => (
                SourceKind::Query,
                format!("auto: {rr}; the export probe failed ({e}); reading by the query API"),
                false,
            ),
        },
        Err(e) => {
            (SourceKind::Query, format!("auto: the remote-read probe failed ({e}); reading by the query API"), false)
        }
    }
}

/// The source for `cluster`: the one asked for, or with `auto` the one remembered for this cluster and URL, or
/// else what a probe finds. The choice and its reason are logged.
pub async fn choose(
    pool: &PgPool,
    client: PromClient,
    cluster: &str,
    request: SourceRequest,
) -> Result<SampleSource, sqlx::Error> {
    let source = match request {
        SourceRequest::Only(kind) => SampleSource::new(client, kind, format!("--source {}", kind.as_str()), false),
        SourceRequest::Auto => {
            let mut conn = pool.acquire().await?;
            let remembered = db::clusters::probed_source(&mut conn, cluster, client.base_url()).await?;
            drop(conn);
            match remembered.and_then(|(kind, reason)| Some((kind.parse::<SourceKind>().ok()?, reason))) {
                Some((kind, reason)) => {
                    SampleSource { remembered: true, ..SampleSource::new(client, kind, reason, true) }
                }
                None => {
                    let (kind, reason, remember) = probe(&client).await;
                    SampleSource { remember, ..SampleSource::new(client, kind, reason, true) }
                }
            }
        }
    };
    tracing::info!(%cluster, source = source.kind.as_str(), reason = %source.describe(), "sample source");
    Ok(source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_names_parse() {
        assert_eq!("auto".parse(), Ok(SourceRequest::Auto));
        assert_eq!("remote-read".parse(), Ok(SourceRequest::Only(SourceKind::RemoteRead)));
        assert_eq!("query".parse::<SourceKind>(), Ok(SourceKind::Query));
        assert_eq!("vm-export".parse(), Ok(SourceRequest::Only(SourceKind::VmExport)));
        assert!("remote_read".parse::<SourceRequest>().unwrap_err().contains("remote-read, vm-export, query or auto"));
        for k in [SourceKind::RemoteRead, SourceKind::VmExport, SourceKind::Query] {
            assert_eq!(k.as_str().parse::<SourceKind>(), Ok(k));
        }
    }
}
