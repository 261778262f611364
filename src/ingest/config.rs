//! The clusters a worker ingests: many from one TOML file (with `CARDHOUR_CLUSTERS__<NAME>__<KEY>` environment
//! overrides), or one from the single-cluster flags; each resolved into how it is read and metered.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use figment::Figment;
use figment::providers::{Env, Format, Toml};
use serde::Deserialize;

use super::{FetchSpec, IngestOptions, SourceRequest};
use crate::config::{SourceArgs, parse_bridge, parse_duration};
use crate::metering::{HamiPolicy, MeterConfig};
use crate::prom::RetryPolicy;

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
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClustersFile {
    #[serde(default)]
    defaults: ClusterEntry,
    #[serde(default)]
    clusters: BTreeMap<String, ClusterEntry>,
}

/// A cluster resolved: its name, where it is read, how it is metered.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    pub prometheus: String,
    pub timeout: Duration,
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
    /// `self`'s keys, else `fallback`'s.
    fn or(self, fallback: &ClusterEntry) -> ClusterEntry {
        let f = fallback.clone();
        ClusterEntry {
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

    /// Resolves an entry whose missing keys come from `flags`.
    fn resolve(self, name: &str, flags: &SourceArgs) -> Result<ClusterConfig, String> {
        super::validate_cluster_name(name).map_err(|e| e.to_string())?;
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
        let batch_hours = in_range("batch_hours", self.batch_hours, flags.chunk_hours, 168)?;
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
                retry: RetryPolicy::worker(),
            },
        })
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
                "`batch_hours` 0: must be between 1 and 168",
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
        assert_eq!(names, ["gpu-a", "gpu-b", "infer-bj", "infer-sh"]);
        let bj = &all[2];
        assert_eq!(bj.ingest.fetch.matchers.as_deref(), Some(r#"cluster="infer-bj""#));
        assert_eq!(bj.source, SourceRequest::Only(super::super::SourceKind::VmExport));
        assert_eq!(bj.ingest.meter.hami_policy, HamiPolicy::Max);
        assert_eq!(all[0].ingest.meter.scrape_interval_ms, Some(30_000));
        assert!(all.iter().all(|c| c.ingest.chunk_hours == 6 && c.timeout == Duration::from_secs(60)));
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
