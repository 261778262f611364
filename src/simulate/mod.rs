//! `cardhour simulate`: a deterministic (seeded) synthetic Kubernetes GPU cluster, written as
//! OpenMetrics text for `promtool tsdb create-blocks-from openmetrics`, plus `truth.json`
//! computed independently from the simulation's own events (pod schedule and utilization
//! functions), never by reading back the written series.
//!
//! The cluster mixes every case the ingest must handle (see `layout`): whole cards with the
//! three DCGM utilization sources and both workload-label styles, MIG, time-slicing with
//! virtual-GPU copies, HAMi, a node without DCGM, exporter gaps, NaN samples, restarts, squatters
//! and an unknown GPU-like resource; with `ksm_gaps`, kube-state-metrics outages too. Values are pure functions of (pod, device, time), so the
//! writer streams series one after another with constant memory.
//!
//! The inference pods also serve (`serving`, SPEC §9): vLLM, SGLang, TGI and Triton counters of tokens and
//! requests with their label and naming variants, counter resets, restarts, a late-scraped baseline and idle
//! hours, written after every other family; their truth is `truth.json`'s `serving` and `serving_pods`.
//!
//! Quotas and queues (`quota`, SPEC §10): namespaces' GPU ResourceQuotas as kube-state-metrics writes them (one raised
//! mid-window, a namespace with two objects whose least is its guarantee, a `limits.` entry to ignore, a queued
//! namespace whose quota is only a ceiling), Kueue's ClusterQueues (nominal quota, `+Inf` borrowing and lending
//! limits, usage; every series also from a follower replica with other values, to be dropped, and an extra label on
//! a leader that must not split its scope) and LocalQueues, the pods' queue labels in `kube_pod_labels`, and a few
//! GPU pods that stay Pending until deleted (never Running, holding no card); their truth is `truth.json`'s `quota`
//! (per hour and scope: guaranteed, used within, borrowed, reserved idle) and `pending` (per GPU pod object: its
//! queue wait, Pending card-seconds, whether it never ran). Drawn from a salted hash, never the schedule's streams,
//! so every other series and truth figure stays as it was.

mod bridge;
mod clock;
mod emit;
mod layout;
mod model;
mod om;
mod quota;
mod schedule;
mod serving;
mod truth;
mod values;
mod workload;

#[cfg(test)]
mod tests;

use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use chrono::{DateTime, SecondsFormat, Timelike, Utc};

pub use layout::Profile;
pub use truth::{Figures, Truth};

/// Parameters of a simulation run.
#[derive(Clone, Debug)]
pub struct SimParams {
    /// Number of cards; a positive multiple of 8 (nodes have 8 GPUs).
    pub gpus: u32,
    /// Length of the simulated window in hours (≥ 1).
    pub hours: u32,
    /// Scrape interval Δ in seconds (5..=600).
    pub scrape_interval_s: u32,
    pub seed: u64,
    /// End of the window (exclusive), on a whole hour; start = end − hours.
    pub end: DateTime<Utc>,
    /// Output directory (created if missing).
    pub out: PathBuf,
    /// Which cluster: every feature (`standard`) or shared cards as clusters run them (`shared`).
    pub profile: Profile,
    /// kube-state-metrics outages (restarts), some short enough for cardhour's default bridge, some longer,
    /// some across an hour's end; off by default, so the standard profile's samples stay as they were.
    pub ksm_gaps: bool,
    /// Scrape interval of the utilization exporters (DCGM, HAMi's monitor) in seconds, each node on its own phase;
    /// `None`: the profile's default (the KSM interval; the exactness profile's 1.5 times it).
    pub util_interval_s: Option<u32>,
}

/// What a run wrote.
#[derive(Clone, Debug)]
pub struct SimSummary {
    pub series: u64,
    pub samples: u64,
    /// Pod objects (uids) present in the window.
    pub pods: u64,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub metrics_path: PathBuf,
    pub truth_path: PathBuf,
}

/// Why a simulation could not run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("gpus must be a positive multiple of 8 (nodes have 8 GPUs), got {0}")]
    Gpus(u32),
    #[error("the simulated window must be at least 1 hour, got {0} hours")]
    Hours(u32),
    #[error("scrape interval must be between 5 and 600 seconds, got {0}")]
    ScrapeInterval(u32),
    #[error("utilization scrape interval must be between 5 and 600 seconds, got {0}")]
    UtilInterval(u32),
    #[error("end must be on a whole hour (minutes, seconds and fractions zero), got {0}")]
    EndNotOnHour(DateTime<Utc>),
    #[error("the simulated window of {hours} hours ending {end} starts before 1970 or is out of range")]
    OutOfRange { hours: u32, end: DateTime<Utc> },
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot serialize the truth: {0}")]
    Json(#[from] serde_json::Error),
}

/// Name of the OpenMetrics file in the output directory.
pub const METRICS_FILE: &str = "metrics.om";
/// Name of the truth file in the output directory.
pub const TRUTH_FILE: &str = "truth.json";

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SimError + '_ {
    move |source| SimError::Io { path: path.to_path_buf(), source }
}

/// The utilization exporters' scrape interval of a run (seconds).
pub fn util_interval_s(p: &SimParams) -> u32 {
    p.util_interval_s.unwrap_or(match p.profile {
        Profile::Exactness => p.scrape_interval_s * 3 / 2,
        _ => p.scrape_interval_s,
    })
}

/// Check the parameters; returns the window's start.
fn validate(p: &SimParams) -> Result<DateTime<Utc>, SimError> {
    if p.gpus == 0 || !p.gpus.is_multiple_of(layout::GPUS_PER_NODE) {
        return Err(SimError::Gpus(p.gpus));
    }
    if p.hours == 0 {
        return Err(SimError::Hours(p.hours));
    }
    if !(5..=600).contains(&p.scrape_interval_s) {
        return Err(SimError::ScrapeInterval(p.scrape_interval_s));
    }
    if !(5..=600).contains(&util_interval_s(p)) {
        return Err(SimError::UtilInterval(util_interval_s(p)));
    }
    if p.end.minute() != 0 || p.end.second() != 0 || p.end.nanosecond() != 0 {
        return Err(SimError::EndNotOnHour(p.end));
    }
    let out_of_range = || SimError::OutOfRange { hours: p.hours, end: p.end };
    let start = p.end.checked_sub_signed(chrono::Duration::hours(p.hours as i64)).ok_or_else(out_of_range)?;
    if start.timestamp_millis() < 0 {
        return Err(out_of_range());
    }
    Ok(start)
}

/// Simulate and write `<out>/metrics.om` and `<out>/truth.json`.
pub fn run(params: &SimParams) -> Result<SimSummary, SimError> {
    run_with(params, true)
}

/// [`run`], with the quota families, the never-ran pods and their truth left out unless `quotas`.
fn run_with(params: &SimParams, quotas: bool) -> Result<SimSummary, SimError> {
    let start = validate(params)?;
    let grid = model::Grid::new(
        start.timestamp_millis(),
        params.end.timestamp_millis(),
        params.scrape_interval_s as i64 * 1000,
    );
    let util = model::Grid::new(
        start.timestamp_millis(),
        params.end.timestamp_millis(),
        util_interval_s(params) as i64 * 1000,
    );
    let cluster = schedule::build(params.profile, params.gpus, params.seed, grid, util, params.ksm_gaps);
    let servers = serving::plan(&cluster, &grid, params.seed);
    let quotas = if quotas { quota::plan(&cluster, &grid, params.seed) } else { quota::Plan::disabled() };

    fs::create_dir_all(&params.out).map_err(io_err(&params.out))?;
    let metrics_path = params.out.join(METRICS_FILE);
    let file = File::create(&metrics_path).map_err(io_err(&metrics_path))?;
    let out = BufWriter::with_capacity(1 << 20, file);
    let (counts, _) = emit::write_metrics(&cluster, &grid, &servers, &quotas, out).map_err(io_err(&metrics_path))?;

    let fmt = |d: DateTime<Utc>| d.to_rfc3339_opts(SecondsFormat::Secs, true);
    let echo = truth::ParamsOut {
        gpus: params.gpus,
        hours: params.hours,
        scrape_interval_s: params.scrape_interval_s,
        seed: params.seed,
        profile: params.profile.as_str().to_string(),
        ksm_gaps: params.ksm_gaps,
        util_interval_s: util_interval_s(params),
        start: fmt(start),
        end: fmt(params.end),
    };
    let t = truth::compute(&cluster, &grid, &servers, &quotas, echo);
    let truth_path = params.out.join(TRUTH_FILE);
    let mut json = serde_json::to_vec_pretty(&t)?;
    json.push(b'\n');
    fs::write(&truth_path, json).map_err(io_err(&truth_path))?;

    Ok(SimSummary {
        series: counts.series,
        samples: counts.samples,
        pods: counts.pods,
        start,
        end: params.end,
        metrics_path,
        truth_path,
    })
}
