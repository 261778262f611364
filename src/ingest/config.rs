//! The clusters a worker ingests: many from one TOML file (with `CARDHOUR_CLUSTERS__<NAME>__<KEY>` environment
//! overrides), or one from the single-cluster flags; each resolved into how it is read and metered.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use serde::Deserialize;

use super::flags::{SourceArgs, SourceAuthArgs, parse_bridge};
use super::{FetchSpec, IngestOptions, SourceRequest};
use crate::metering::{HamiPolicy, MeterConfig};
use crate::prom::RetryPolicy;
use crate::prom::auth::{Authorization, ClientTls, Credential, Header, Secret, SourceAuth};
use crate::validate::duration::parse_duration;

/// One cluster as the file writes it: every key but `prometheus` may be left to `[defaults]` or to the flags
/// (and their environment variables) the worker was started with.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClusterEntry {
    pub prometheus: Option<String>,
    pub source: Option<String>,
    #[serde(rename = "match")]
    pub matchers: Option<String>,
    pub scrape_interval: Option<String>,
    pub team_label: Option<String>,
    pub timeslice_replicas: Option<u32>,
    pub hami_split: Option<u32>,
    pub hami_policy: Option<String>,
    pub timeout: Option<String>,
    pub batch_hours: Option<u32>,
    pub ksm_gap_bridge: Option<String>,
    /// `Authorization: Bearer …` from a file read at every request (a mounted, rotating token).
    pub bearer_token_file: Option<PathBuf>,
    /// `Authorization: Bearer …` given here (better from an environment override than in the file).
    pub bearer_token: Option<Secret>,
    pub basic_auth: Option<BasicAuthEntry>,
    pub tls: Option<TlsEntry>,
    /// Headers sent with every request, e.g. `X-Scope-OrgID` (Mimir, Cortex); merged over `[defaults]`' by name.
    pub headers: Option<BTreeMap<String, String>>,
}

/// `basic_auth = { username = "…", password_file = "…" }` (or `password`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BasicAuthEntry {
    pub username: String,
    pub password: Option<Secret>,
    pub password_file: Option<PathBuf>,
}

/// `tls = { ca_file = "…", cert_file = "…", key_file = "…" }`: PEM files.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TlsEntry {
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClustersFile {
    #[serde(default)]
    defaults: ClusterEntry,
    #[serde(default)]
    clusters: BTreeMap<String, ClusterEntry>,
}

/// A cluster resolved: its name, where it is read and who asks, how it is metered.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub prometheus: String,
    pub timeout: Duration,
    pub auth: SourceAuth,
    pub source: SourceRequest,
    pub ingest: IngestOptions,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{0}")]
    File(#[from] Box<figment::Error>),
    #[error("{path}: cluster `{cluster}`: {message}")]
    Cluster { path: String, cluster: String, message: String },
    #[error("{0}")]
    Flags(String),
}

impl ClusterEntry {
    /// `self`'s keys, else `fallback`'s. The credentials of the Authorization header (a bearer token or basic
    /// auth) and the TLS settings are taken whole from one side; headers are merged by name, `self`'s winning.
    fn or(self, fallback: &ClusterEntry) -> ClusterEntry {
        let f = fallback.clone();
        let (bearer_token_file, bearer_token, basic_auth) = if self.has_authorization() {
            (self.bearer_token_file, self.bearer_token, self.basic_auth)
        } else {
            (f.bearer_token_file, f.bearer_token, f.basic_auth)
        };
        ClusterEntry {
            bearer_token_file,
            bearer_token,
            basic_auth,
            tls: self.tls.or(f.tls),
            headers: merge_headers(f.headers, self.headers),
            prometheus: self.prometheus.or(f.prometheus),
            source: self.source.or(f.source),
            matchers: self.matchers.or(f.matchers),
            scrape_interval: self.scrape_interval.or(f.scrape_interval),
            team_label: self.team_label.or(f.team_label),
            timeslice_replicas: self.timeslice_replicas.or(f.timeslice_replicas),
            hami_split: self.hami_split.or(f.hami_split),
            hami_policy: self.hami_policy.or(f.hami_policy),
            timeout: self.timeout.or(f.timeout),
            batch_hours: self.batch_hours.or(f.batch_hours),
            ksm_gap_bridge: self.ksm_gap_bridge.or(f.ksm_gap_bridge),
        }
    }

    fn has_authorization(&self) -> bool {
        self.bearer_token.is_some() || self.bearer_token_file.is_some() || self.basic_auth.is_some()
    }

    /// Who asks: this entry's credentials, TLS settings and headers, each else the flags'.
    fn auth(&self, flags: &SourceAuthArgs) -> Result<SourceAuth, String> {
        let authorization = if self.has_authorization() {
            let basic =
                self.basic_auth.as_ref().map(|b| (b.username.clone(), b.password.clone(), b.password_file.clone()));
            let keys = [
                "`bearer_token`",
                "`bearer_token_file`",
                "`basic_auth`",
                "`basic_auth.password`",
                "`basic_auth.password_file`",
            ];
            authorization(self.bearer_token.clone(), self.bearer_token_file.clone(), basic, keys)?
        } else {
            let basic = flags.username.clone().map(|u| (u, flags.password.clone(), flags.password_file.clone()));
            if basic.is_none() && (flags.password.is_some() || flags.password_file.is_some()) {
                return Err("a basic-auth password needs --prometheus-username".into());
            }
            let keys = [
                "--prometheus-bearer-token",
                "--prometheus-bearer-token-file",
                "--prometheus-username",
                "--prometheus-password",
                "--prometheus-password-file",
            ];
            authorization(flags.bearer_token.clone(), flags.bearer_token_file.clone(), basic, keys)?
        };
        let tls = match &self.tls {
            Some(t) => {
                ClientTls { ca_file: t.ca_file.clone(), cert_file: t.cert_file.clone(), key_file: t.key_file.clone() }
            }
            None => ClientTls {
                ca_file: flags.ca_file.clone(),
                cert_file: flags.cert_file.clone(),
                key_file: flags.key_file.clone(),
            },
        };
        // the flags' headers first, then the file's by name (which replace them)
        let mut headers: Vec<Header> = flags.headers.clone();
        for (name, value) in self.headers.iter().flatten() {
            let h = Header::new(name, value).map_err(|e| format!("`headers`: {e}"))?;
            headers.retain(|old| old.name() != h.name());
            headers.push(h);
        }
        // the files are read when the client is built (`PromClient::with_auth`), so a worker fails at its start
        Ok(SourceAuth { authorization, tls, headers })
    }

    /// Resolves an entry whose missing keys come from `flags`.
    fn resolve(self, name: &str, flags: &SourceArgs) -> Result<ClusterConfig, String> {
        super::validate_cluster_name(name).map_err(|e| e.to_string())?;
        let auth = self.auth(&flags.auth)?;
        let prometheus = self
            .prometheus
            .or_else(|| flags.prometheus.clone())
            .ok_or("`prometheus` is missing (the base URL of its Prometheus-compatible API)")?;
        crate::prom::PromClient::check_url(&prometheus).map_err(|e| format!("`prometheus`: {e}"))?;
        let duration = |key: &str, v: Option<String>| -> Result<Option<Duration>, String> {
            v.map(|s| parse_duration(&s).map_err(|e| format!("`{key}`: {e}"))).transpose()
        };
        let source = match self.source {
            Some(s) => s.parse().map_err(|e| format!("`source`: {e}"))?,
            None => flags.sample_source,
        };
        let hami_policy = match self.hami_policy {
            Some(p) => p.parse::<HamiPolicy>().map_err(|_| format!("`hami_policy` {p:?}: use cores, memory or max"))?,
            None => flags.hami_policy,
        };
        let in_range = |key: &str, v: Option<u32>, default: u32, max: u32| match v.unwrap_or(default) {
            n if (1..=max).contains(&n) => Ok(n),
            n => Err(format!("`{key}` {n}: must be between 1 and {max}")),
        };
        let timeslice_replicas = in_range("timeslice_replicas", self.timeslice_replicas, flags.timeslice_replicas, 64)?;
        let hami_split = in_range("hami_split", self.hami_split, flags.hami_split, 1000)?;
        let batch_hours = in_range(
            "batch_hours",
            self.batch_hours,
            flags.chunk_hours.unwrap_or(super::plan::WORKER_BATCH_HOURS),
            super::plan::MAX_BATCH_HOURS as u32,
        )?;
        let scrape_interval = duration("scrape_interval", self.scrape_interval)?.or(flags.scrape_interval);
        let timeout = duration("timeout", self.timeout)?.unwrap_or(flags.timeout);
        let ksm_gap_bridge = match self.ksm_gap_bridge {
            Some(b) => parse_bridge(&b).map_err(|e| format!("`ksm_gap_bridge`: {e}"))?,
            None => flags.ksm_gap_bridge,
        };
        let team_label = self.team_label.unwrap_or_else(|| flags.team_label.clone());
        let matchers = self.matchers.or_else(|| flags.matchers.clone());
        Ok(ClusterConfig {
            prometheus,
            timeout,
            auth,
            source,
            ingest: IngestOptions {
                cluster: name.to_string(),
                fetch: FetchSpec { matchers, team_label: format!("label_{team_label}") },
                meter: MeterConfig {
                    scrape_interval_ms: scrape_interval.map(|d| d.as_millis() as i64),
                    default_timeslice_replicas: timeslice_replicas,
                    hami_split,
                    hami_policy,
                    ksm_gap_bridge,
                    ..MeterConfig::default()
                },
                chunk_hours: batch_hours as usize,
                batch_samples: Some(flags.batch_samples),
                retry: RetryPolicy::worker(),
            },
        })
    }
}

/// Headers of `[defaults]` and of a cluster, merged by name (case-insensitive), the cluster's winning.
fn merge_headers(
    defaults: Option<BTreeMap<String, String>>,
    own: Option<BTreeMap<String, String>>,
) -> Option<BTreeMap<String, String>> {
    if defaults.is_none() && own.is_none() {
        return None;
    }
    let mut merged: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in defaults.into_iter().flatten().chain(own.into_iter().flatten()) {
        merged.retain(|k, _| !k.eq_ignore_ascii_case(&name));
        merged.insert(name, value);
    }
    Some(merged)
}

/// The Authorization header's credentials from one side's settings: a bearer token (inline or a file) or basic
/// auth (a user and a password, inline or a file), at most one of them. `keys` name the settings for errors:
/// bearer token, bearer token file, basic auth, its password, its password file.
fn authorization(
    bearer: Option<Secret>,
    bearer_file: Option<PathBuf>,
    basic: Option<(String, Option<Secret>, Option<PathBuf>)>,
    keys: [&str; 5],
) -> Result<Option<Authorization>, String> {
    let one_of = |inline: Option<Secret>, file: Option<PathBuf>, inline_key: &str, file_key: &str| match (inline, file)
    {
        (Some(_), Some(_)) => Err(format!("{inline_key} and {file_key}: set one of them")),
        (Some(s), None) => Ok(Some(Credential::Inline(s))),
        (None, Some(f)) => Ok(Some(Credential::File(f))),
        (None, None) => Ok(None),
    };
    let bearer = one_of(bearer, bearer_file, keys[0], keys[1])?;
    match (bearer, basic) {
        (Some(_), Some(_)) => Err(format!(
            "a bearer token ({} or {}) and {}: set one of them (both are the Authorization header)",
            keys[0], keys[1], keys[2]
        )),
        (Some(b), None) => Ok(Some(Authorization::Bearer(b))),
        (None, Some((username, password, password_file))) => {
            let password = one_of(password, password_file, keys[3], keys[4])?
                .ok_or_else(|| format!("{} needs a password ({} or {})", keys[2], keys[3], keys[4]))?;
            Ok(Some(Authorization::Basic { username, password }))
        }
        (None, None) => Ok(None),
    }
}

/// The clusters of a file, each key missing in it taken from `[defaults]`, then from the flags. Environment
/// variables `CARDHOUR_CLUSTERS__<NAME>__<KEY>` (and `CARDHOUR_DEFAULTS__<KEY>`) override the file; figment reads
/// their names in lower case, so they reach clusters named in lower case.
pub fn from_file(path: &Path, flags: &SourceArgs) -> Result<Vec<ClusterConfig>, ConfigError> {
    if !path.is_file() {
        return Err(ConfigError::Flags(format!("{}: no such file", path.display())));
    }
    let file: ClustersFile = Figment::from(Toml::file(path))
        .merge(Env::prefixed("CARDHOUR_").filter(|k| k.as_str().contains("__")).split("__"))
        .extract()
        .map_err(Box::new)?;
    if file.clusters.is_empty() {
        return Err(ConfigError::Flags(format!("{}: no [clusters.<name>] table", path.display())));
    }
    file.clusters
        .into_iter()
        .map(|(name, entry)| {
            entry.or(&file.defaults).resolve(&name, flags).map_err(|message| ConfigError::Cluster {
                path: path.display().to_string(),
                cluster: name,
                message,
            })
        })
        .collect()
}

/// The one cluster the flags name (`--cluster`, `--prometheus`).
pub fn from_flags(flags: &SourceArgs) -> Result<ClusterConfig, ConfigError> {
    let name = flags.cluster.as_deref().ok_or_else(|| {
        ConfigError::Flags("name the cluster: --cluster NAME --prometheus URL, or --config FILE for many".into())
    })?;
    if flags.prometheus.is_none() {
        return Err(ConfigError::Flags(format!("--prometheus URL is missing for cluster `{name}`")));
    }
    ClusterEntry::default().resolve(name, flags).map_err(ConfigError::Flags)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        source: SourceArgs,
    }

    fn flags(args: &[&str]) -> SourceArgs {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied())).unwrap().source
    }

    fn write(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    #[test]
    fn clusters_take_their_keys_then_the_defaults_then_the_flags() {
        let f = write(
            r#"
            [defaults]
            team_label = "owner"
            scrape_interval = "30s"
            [clusters.gpu-a]
            prometheus = "http://prom-a:9090"
            match = 'cluster="gpu-a"'
            source = "remote-read"
            [clusters.gpu-b]
            prometheus = "http://prom-b:9090"
            team_label = "team"
            batch_hours = 24
            ksm_gap_bridge = "0"
            "#,
        );
        let all = from_file(f.path(), &flags(&["--hami-split", "8"])).unwrap();
        assert_eq!(all.len(), 2);
        let (a, b) = (&all[0], &all[1]);
        assert_eq!(a.ingest.cluster, "gpu-a");
        assert_eq!(a.prometheus, "http://prom-a:9090");
        assert_eq!(a.ingest.fetch.matchers.as_deref(), Some(r#"cluster="gpu-a""#));
        assert_eq!(a.ingest.fetch.team_label, "label_owner");
        assert_eq!(a.ingest.meter.scrape_interval_ms, Some(30_000));
        assert_eq!(a.ingest.meter.hami_split, 8);
        assert_eq!(a.source, SourceRequest::Only(super::super::SourceKind::RemoteRead));
        assert_eq!(a.ingest.chunk_hours, 6);
        assert_eq!(b.ingest.fetch.team_label, "label_team");
        assert_eq!(b.ingest.fetch.matchers, None);
        assert_eq!(b.ingest.chunk_hours, 24);
        assert_eq!(b.ingest.meter.ksm_gap_bridge, Duration::ZERO);
        assert_eq!(a.ingest.meter.ksm_gap_bridge, Duration::from_secs(15 * 60));
        assert_eq!(b.source, SourceRequest::Auto);
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let cases = [
            ("[clusters.a]\nprometheus = \"http://p:9090\"\nscrape = \"30s\"\n", "unknown field: found `scrape`"),
            ("[clusters.a]\nsource = \"query\"\n", "cluster `a`: `prometheus` is missing"),
            ("[clusters.a]\nprometheus = \"p:9090\"\n", "`prometheus`: invalid Prometheus URL `p:9090`"),
            ("[clusters.a]\nprometheus = \"http://p\"\nsource = \"grpc\"\n", "unknown source `grpc`"),
            (
                "[clusters.a]\nprometheus = \"http://p\"\nbatch_hours = 0\n",
                "`batch_hours` 0: must be between 1 and 744",
            ),
            ("[clusters.\"a b\"]\nprometheus = \"http://p\"\n", "cluster `a b`: cluster name `a b` is invalid"),
            ("[clusters.a]\nprometheus = \"http://p\"\ntimeout = \"soon\"\n", "`timeout`: `soon` is not a duration"),
            ("[clusters.a]\nprometheus = \"http://p\"\nhami_policy = \"most\"\n", "use cores, memory or max"),
            ("[clusters.a]\nprometheus = \"http://p\"\nksm_gap_bridge = \"2h\"\n", "`ksm_gap_bridge`: `2h` is longer"),
            ("[defaults]\nteam_label = \"t\"\n", "no [clusters.<name>] table"),
            ("[clusters.a\n", "TOML"),
        ];
        for (text, needle) in cases {
            let f = write(text);
            let err = from_file(f.path(), &flags(&[])).unwrap_err().to_string();
            assert!(err.to_lowercase().contains(&needle.to_lowercase()), "{text:?}: expected {needle:?} in {err}");
        }
        let missing = from_file(Path::new("/nonexistent/clusters.toml"), &flags(&[])).unwrap_err().to_string();
        assert!(missing.contains("no such file"), "{missing}");
    }

    #[test]
    // figment's Jail closure returns figment's own (large) error type; it is not ours to box.
    #[allow(clippy::result_large_err)]
    fn the_environment_overrides_the_file() {
        figment::Jail::expect_with(|jail| {
            jail.create_file(
                "clusters.toml",
                "[defaults]\nbatch_hours = 6\n[clusters.gpu_a]\nprometheus = \"http://old:9090\"\n",
            )?;
            jail.set_env("CARDHOUR_CLUSTERS__GPU_A__PROMETHEUS", "http://new:9090");
            jail.set_env("CARDHOUR_DEFAULTS__BATCH_HOURS", "24");
            jail.set_env("CARDHOUR_CLUSTERS__GPU_A__MATCH", r#"cluster="a""#);
            let all = from_file(Path::new("clusters.toml"), &flags(&[])).map_err(|e| e.to_string())?;
            assert_eq!(all[0].prometheus, "http://new:9090");
            assert_eq!(all[0].ingest.chunk_hours, 24);
            assert_eq!(all[0].ingest.fetch.matchers.as_deref(), Some(r#"cluster="a""#));
            // a typo in an override is as clear as one in the file
            jail.set_env("CARDHOUR_CLUSTERS__GPU_A__PROMETEUS", "http://x:9090");
            let err = from_file(Path::new("clusters.toml"), &flags(&[])).unwrap_err().to_string();
            assert!(err.contains("prometeus"), "{err}");
            Ok(())
        });
    }

    #[test]
    fn the_example_file_reads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/clusters.example.toml");
        let all = from_file(&path, &flags(&[])).unwrap();
        let names: Vec<&str> = all.iter().map(|c| c.ingest.cluster.as_str()).collect();
        assert_eq!(names, ["gpu-a", "gpu-b", "infer-bj", "infer-sh", "train-mimir", "train-thanos"]);
        assert!(all[..4].iter().all(|c| c.auth.is_empty()));
        let (mimir, thanos) = (&all[4].auth, &all[5].auth);
        assert_eq!(
            mimir.authorization,
            Some(Authorization::Bearer(Credential::File("/etc/cardhour/auth/token".into())))
        );
        assert_eq!(mimir.describe(), "bearer token (file /etc/cardhour/auth/token); headers x-scope-orgid");
        assert_eq!(
            thanos.describe(),
            "basic auth as `cardhour` (password file /etc/cardhour/auth/password); CA /etc/cardhour/auth/ca.crt; \
             client certificate /etc/cardhour/auth/tls.crt"
        );
        assert_eq!(thanos.tls.key_file.as_deref(), Some(Path::new("/etc/cardhour/auth/tls.key")));
        let bj = &all[2];
        assert_eq!(bj.ingest.fetch.matchers.as_deref(), Some(r#"cluster="infer-bj""#));
        assert_eq!(bj.source, SourceRequest::Only(super::super::SourceKind::VmExport));
        assert_eq!(bj.ingest.meter.hami_policy, HamiPolicy::Max);
        assert_eq!(all[0].ingest.meter.scrape_interval_ms, Some(30_000));
        assert!(all.iter().all(|c| c.ingest.chunk_hours == 6 && c.timeout == Duration::from_secs(60)));
    }

    #[test]
    fn credentials_come_from_the_cluster_then_the_defaults_then_the_flags() {
        let f = write(
            r#"
            [defaults]
            bearer_token_file = "/run/default-token"
            headers = { "X-Scope-OrgID" = "default-tenant", "X-Team" = "ml" }
            [clusters.own]
            prometheus = "https://p:9090"
            basic_auth = { username = "u", password = "pw-inline" }
            headers = { "x-scope-orgid" = "own-tenant" }
            tls = { ca_file = "/ca.pem" }
            [clusters.inherits]
            prometheus = "http://q:9090"
            "#,
        );
        let cli_flags = flags(&[
            "--prometheus-header",
            "X-Flag: f",
            "--prometheus-header",
            "X-Team: flag-team",
            "--prometheus-ca-file",
            "/flag-ca.pem",
        ]);
        let all = from_file(f.path(), &cli_flags).unwrap();
        let (inherits, own) = (&all[0].auth, &all[1].auth);
        // a cluster's own basic auth replaces the defaults' bearer token (both are the Authorization header)
        assert_eq!(
            own.authorization,
            Some(Authorization::Basic { username: "u".into(), password: Credential::Inline(Secret::new("pw-inline")) })
        );
        assert_eq!(own.tls.ca_file.as_deref(), Some(Path::new("/ca.pem")));
        let header = |a: &SourceAuth| -> Vec<String> { a.headers.iter().map(|h| format!("{h:?}")).collect() };
        // headers by name: the flags', then the defaults', then the cluster's (case-insensitive)
        assert_eq!(header(own), ["x-flag: <redacted>", "x-team: <redacted>", "x-scope-orgid: <redacted>"]);
        assert_eq!(inherits.authorization, Some(Authorization::Bearer(Credential::File("/run/default-token".into()))));
        assert_eq!(inherits.tls.ca_file.as_deref(), Some(Path::new("/flag-ca.pem")));
        assert_eq!(header(inherits).len(), 3);
        // nothing secret in what a log or a panic could print
        let printed = format!("{all:?}");
        for secret in ["pw-inline", "own-tenant", "default-tenant", "flag-team"] {
            assert!(!printed.contains(secret), "{secret} printed: {printed}");
        }

        // the flags alone: one cluster
        let one = from_flags(&flags(&[
            "--cluster",
            "c",
            "--prometheus",
            "http://p:9090",
            "--prometheus-username",
            "reader",
            "--prometheus-password-file",
            "/run/pw",
        ]))
        .unwrap();
        assert_eq!(
            one.auth.authorization,
            Some(Authorization::Basic { username: "reader".into(), password: Credential::File("/run/pw".into()) })
        );
    }

    #[test]
    fn conflicting_credentials_are_clear_errors() {
        let cases = [
            (
                "bearer_token = \"t\"\nbasic_auth = { username = \"u\", password = \"p\" }\n",
                "a bearer token (`bearer_token` or `bearer_token_file`) and `basic_auth`: set one of them",
            ),
            ("bearer_token = \"t\"\nbearer_token_file = \"/t\"\n", "`bearer_token` and `bearer_token_file`: set one"),
            ("basic_auth = { username = \"u\" }\n", "`basic_auth` needs a password"),
            ("basic_auth = { username = \"u\", pass = \"p\" }\n", "unknown field"),
            ("tls = { ca = \"/x\" }\n", "unknown field"),
            (
                "headers = { \"Authorization\" = \"Bearer x\" }\n",
                "`headers`: header `authorization` is set by cardhour",
            ),
            ("headers = { \"Bad Name\" = \"x\" }\n", "`headers`: `Bad Name` is not a header name"),
        ];
        for (keys, needle) in cases {
            let f = write(&format!("[clusters.a]\nprometheus = \"http://p:9090\"\n{keys}"));
            let err = from_file(f.path(), &flags(&[])).unwrap_err().to_string();
            assert!(err.contains(needle), "{keys:?}: expected {needle:?} in {err}");
        }
        let err = |args: &[&str]| {
            let mut all = vec!["--cluster", "c", "--prometheus", "http://p:9090"];
            all.extend(args);
            from_flags(&flags(&all)).unwrap_err().to_string()
        };
        assert!(err(&["--prometheus-password", "p"]).contains("needs --prometheus-username"));
        assert!(
            err(&["--prometheus-username", "u", "--prometheus-bearer-token", "t", "--prometheus-password", "p"])
                .contains("set one of them")
        );
        assert!(err(&["--prometheus-username", "u"]).contains("--prometheus-username needs a password"));
        assert!(Cli::try_parse_from(["x", "--prometheus-header", "nocolon"]).is_err());
        assert!(Cli::try_parse_from(["x", "--prometheus-bearer-token", " "]).is_err());
    }

    #[test]
    fn the_flags_make_one_cluster() {
        let one =
            from_flags(&flags(&["--cluster", "prod", "--prometheus", "http://p:9090", "--source", "query"])).unwrap();
        assert_eq!(one.ingest.cluster, "prod");
        assert_eq!(one.source, SourceRequest::Only(super::super::SourceKind::Query));
        assert!(from_flags(&flags(&["--prometheus", "http://p:9090"])).unwrap_err().to_string().contains("--cluster"));
        assert!(from_flags(&flags(&["--cluster", "prod"])).unwrap_err().to_string().contains("--prometheus"));
    }
}
