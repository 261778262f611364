//! Inference serving-engine counters (SPEC §9) of the serving pods (`Class::Inference`) and their truth.
//!
//! Every pod name of the inference class serves with one engine — vLLM (V1), SGLang, HuggingFace TGI or NVIDIA
//! Triton — and exports the engine's token and request counters on the KSM grid while one of its pod objects is
//! Running. The plan draws nothing from the schedule's random streams: engines, models and traffic come from a
//! hash of the seed and the pod name, so every other series and every other truth figure stays as it was.
//!
//! The counters cover what the ingest must meter by SPEC §9's rule, each in at least one pod when the cluster
//! has serving pods enough:
//! - a vLLM pod serving two models, one with two data-parallel engines (`engine="0"`, `"1"`: summed), requests
//!   split by `finished_reason` (`stop`, `length`: summed);
//! - an SGLang pod under the drifted underscore names (`sglang_prompt_tokens_total`, …);
//! - TGI's series without a model label (the model is the pod's `kube_pod_labels{label_model}`), Triton's
//!   requests without token counters;
//! - a pod whose series carry `exported_namespace`/`exported_pod`/`exported_container` beside the scraper's own
//!   `namespace`/`pod` (Prometheus without honor_labels);
//! - a vLLM pod also exporting an unknown drifted name, `vllm:prompt_tokens` (never counted);
//! - a counter reset in the middle of an hour (the process restarted: the sample holds the increments since);
//! - pods restarted under the same name (new uid, same series, counters from 0 again);
//! - a long-running pod scraped only from some hours after it started: its first sample is a baseline;
//! - idle hours (samples, no traffic) and a pod that never serves a token.
//!
//! Counter values are running sums of per-step increments that are pure functions of (pod, model, engine, time),
//! so each series streams with constant memory; the truth adds the same increments over the samples the rule
//! counts, never reading the written series back.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use super::clock::{HOUR_MS, rfc3339};
use super::layout::{NAMESPACES, team_of};
use super::model::{Cluster, Grid};
use super::om::{OmWriter, ksm_samples};
use super::workload::{Class, base_util, hash2, hash3, mix64, unit};

const MIN_MS: i64 = 60_000;
/// Salt of every serving hash: none of the schedule's streams (`hash3(seed, a, 1..=8)`) collides with it.
const SALT_SERVING: u64 = 0x5E41_11CE;
const SALT_ORDER: u64 = 1;
const SALT_SERVER: u64 = 2;
const SALT_IDLE: u64 = 3;
const SALT_PRE: u64 = 4;
/// Kube-state-metrics saw a pod become Running at `t_r` when it has no Running sample in the 15 minutes before.
const FRESH_MS: i64 = 15 * MIN_MS;
/// The late-scraped pod's first hours without samples.
const LATE_HOURS: i64 = 2;
/// What the scraper's own labels are when the serving pod's move to `exported_*`.
const SCRAPER_NAMESPACE: &str = "monitoring";
const SCRAPER_POD: &str = "prometheus-adapter-x";

/// A serving engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Engine {
    Vllm,
    Sglang,
    Tgi,
    Triton,
}

impl Engine {
    /// The truth's `engine` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::Tgi => "tgi",
            Engine::Triton => "triton",
        }
    }

    /// Whether the engine exports token counters (Triton counts requests only).
    pub fn has_tokens(self) -> bool {
        self != Engine::Triton
    }
}

/// A model a server may load, with its mean tokens per request (an embedding model generates none).
#[derive(Debug)]
pub struct ModelSpec {
    pub name: &'static str,
    mean_in: f64,
    mean_out: f64,
}

const fn spec(name: &'static str, mean_in: f64, mean_out: f64) -> ModelSpec {
    ModelSpec { name, mean_in, mean_out }
}

/// Models of the token-counting engines.
static LLM_MODELS: [ModelSpec; 4] = [
    spec("qwen2.5-7b-instruct", 900.0, 320.0),
    spec("llama-3.1-8b", 650.0, 240.0),
    spec("deepseek-r1-distill-32b", 1400.0, 1800.0),
    spec("bge-m3", 380.0, 0.0),
];
/// Triton's models (requests only).
static TRITON_MODELS: [ModelSpec; 2] = [spec("resnet50", 0.0, 0.0), spec("bge-reranker", 0.0, 0.0)];

/// One counted quantity of a series.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quantity {
    Input,
    Output,
    /// All requests (SGLang, TGI, Triton).
    Requests,
    /// vLLM's requests with `finished_reason="stop"`.
    Stop,
    /// vLLM's requests with `finished_reason="length"`.
    Length,
}

/// One counter series of a server: a quantity of one model on one data-parallel engine.
#[derive(Clone, Copy, Debug)]
pub struct Counter {
    pub model: u8,
    pub dp: u8,
    pub q: Quantity,
}

/// How a family's name relates to the engine's current names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Naming {
    Current,
    /// SGLang's underscore variant (accepted like the current names).
    Underscore,
    /// A drifted name cardhour does not know (reported, never counted).
    Unknown,
}

/// A metric family of the serving counters.
struct Family {
    name: &'static str,
    engine: Engine,
    naming: Naming,
    quantities: &'static [Quantity],
}

const fn family(name: &'static str, engine: Engine, naming: Naming, quantities: &'static [Quantity]) -> Family {
    Family { name, engine, naming, quantities }
}

const IN: &[Quantity] = &[Quantity::Input];
const OUT: &[Quantity] = &[Quantity::Output];
const REQ: &[Quantity] = &[Quantity::Requests];

/// The families in the order they are written.
static FAMILIES: [Family; 14] = [
    family("vllm:prompt_tokens_total", Engine::Vllm, Naming::Current, IN),
    family("vllm:generation_tokens_total", Engine::Vllm, Naming::Current, OUT),
    family("vllm:request_success_total", Engine::Vllm, Naming::Current, &[Quantity::Stop, Quantity::Length]),
    family("vllm:prompt_tokens", Engine::Vllm, Naming::Unknown, IN),
    family("sglang:prompt_tokens_total", Engine::Sglang, Naming::Current, IN),
    family("sglang:generation_tokens_total", Engine::Sglang, Naming::Current, OUT),
    family("sglang:num_requests_total", Engine::Sglang, Naming::Current, REQ),
    family("sglang_prompt_tokens_total", Engine::Sglang, Naming::Underscore, IN),
    family("sglang_generation_tokens_total", Engine::Sglang, Naming::Underscore, OUT),
    family("sglang_num_requests_total", Engine::Sglang, Naming::Underscore, REQ),
    family("tgi_request_input_length_sum", Engine::Tgi, Naming::Current, IN),
    family("tgi_request_generated_tokens_sum", Engine::Tgi, Naming::Current, OUT),
    family("tgi_request_success", Engine::Tgi, Naming::Current, REQ),
    family("nv_inference_request_success", Engine::Triton, Naming::Current, REQ),
];

/// The pod labels family written for every serving pod object (TGI's model is only known from it).
pub const POD_LABELS: &str = "kube_pod_labels";

/// One pod object's stretch of samples.
#[derive(Clone, Debug)]
pub struct Run {
    pub pod: usize,
    /// First grid index the pod is Running at: where its counters began at 0.
    pub k1: u64,
    /// First grid index written (after `k1` when scraping began late).
    pub ka: u64,
    /// End of the written indices (exclusive): the pod stopped Running.
    pub kb: u64,
    /// The process restarted just after the sample before this index: the counters begin again at 0.
    pub reset: Option<u64>,
    /// No traffic in the first scrape interval (the model still loading), so that the first sample stays below
    /// the last one of the same name's previous pod object, paired with it.
    pub cold: bool,
}

/// One serving pod name; restarts (new pod objects of the name) continue its series.
#[derive(Clone, Debug)]
pub struct Server {
    pub name_id: usize,
    pub ns: usize,
    pub container: &'static str,
    pub engine: Engine,
    pub models: Vec<&'static ModelSpec>,
    /// Data-parallel engines (vLLM V1's `engine` label); 1 elsewhere.
    pub dp: u8,
    /// Workload labels as `exported_*` beside the scraper's own `namespace`/`pod`.
    pub exported: bool,
    /// SGLang under its underscore names.
    pub underscore: bool,
    /// Also exports the unknown `vllm:prompt_tokens`.
    pub unknown_name: bool,
    /// Never serves a token.
    pub silent: bool,
    /// Probability of a whole hour without traffic.
    pub idle_p: f64,
    /// Requests per second at full load, over all models and engines.
    pub rps: f64,
    pub instance: String,
    key: u64,
    /// Its pod objects with samples, in time order.
    pub runs: Vec<Run>,
    /// Every pod object of the name (for `kube_pod_labels`), in time order.
    pub pods: Vec<usize>,
}

/// One scrape interval's increments of one model on one engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Step {
    pub input: i64,
    pub output: i64,
    pub requests: i64,
    pub stop: i64,
    pub length: i64,
}

impl Step {
    pub fn get(&self, q: Quantity) -> i64 {
        match q {
            Quantity::Input => self.input,
            Quantity::Output => self.output,
            Quantity::Requests => self.requests,
            Quantity::Stop => self.stop,
            Quantity::Length => self.length,
        }
    }
}

impl Server {
    /// Its counter series, model by model and engine by engine (the unknown name's copies aside).
    pub fn counters(&self) -> Vec<Counter> {
        let qs: &[Quantity] = match self.engine {
            Engine::Vllm => &[Quantity::Input, Quantity::Output, Quantity::Stop, Quantity::Length],
            Engine::Sglang | Engine::Tgi => &[Quantity::Input, Quantity::Output, Quantity::Requests],
            Engine::Triton => &[Quantity::Requests],
        };
        let mut out = Vec::new();
        for model in 0..self.models.len() as u8 {
            for dp in 0..self.dp {
                out.extend(qs.iter().map(|&q| Counter { model, dp, q }));
            }
        }
        out
    }

    fn exports(&self, f: &Family) -> bool {
        f.engine == self.engine
            && match f.naming {
                Naming::Current => !self.underscore,
                Naming::Underscore => self.underscore,
                Naming::Unknown => self.unknown_name,
            }
    }

    /// Whether the whole hour of `t` has no traffic.
    fn idle_hour(&self, t: i64) -> bool {
        unit(hash3(self.key, SALT_IDLE, t.div_euclid(HOUR_MS) as u64)) < self.idle_p
    }

    /// Whether the server takes traffic in the scrape interval ending at grid index `k` of `run`.
    fn active(&self, grid: &Grid, run: &Run, k: u64) -> bool {
        !(self.silent || (run.cold && k == run.k1) || self.idle_hour(grid.at(k)))
    }

    /// The increments of `model` on engine `dp` in the scrape interval ending at grid index `k` of `run`: requests
    /// follow the pod's GPU load, tokens follow the requests (none without one).
    pub fn step(&self, c: &Cluster, grid: &Grid, run: &Run, model: u8, dp: u8, k: u64) -> Step {
        if !self.active(grid, run, k) {
            return Step::default();
        }
        let pod = &c.pods[run.pod];
        let t = grid.at(k);
        let load = base_util(&pod.pattern, pod.seed, 0, pod.t1, t);
        let share = match (self.models.len(), model) {
            (1, _) => 1.0,
            (_, 0) => 0.7,
            _ => 0.3,
        };
        let per_step = self.rps * share / f64::from(self.dp) * grid.step_ms as f64 / 1000.0;
        let h = hash3(self.key, u64::from(model) << 8 | u64::from(dp), t as u64);
        let u = |i: u64| unit(hash2(h, i));
        // floor(λ + u) has mean λ and stays an integer
        let requests = (per_step * (0.25 + load) + u(0)).floor() as i64;
        let spec = self.models[model as usize];
        let tokens = |mean: f64, i: u64| (requests as f64 * mean * (0.7 + 0.6 * u(i))).round() as i64;
        let length = ((requests as f64 * 0.1 + u(3)).floor() as i64).min(requests);
        Step {
            input: tokens(spec.mean_in, 1),
            output: tokens(spec.mean_out, 2),
            requests,
            stop: requests - length,
            length,
        }
    }

    fn inc(&self, c: &Cluster, grid: &Grid, run: &Run, ctr: Counter, k: u64) -> i64 {
        self.step(c, grid, run, ctr.model, ctr.dp, k).get(ctr.q)
    }

    /// The counter's value before `run`'s first written sample: zero, or what it counted while nobody scraped
    /// it (with a pre-window share when the pod began before the window).
    fn unobserved(&self, c: &Cluster, grid: &Grid, run: &Run, ctr: Counter) -> i64 {
        if run.ka == run.k1 {
            return 0;
        }
        let pre = if c.pods[run.pod].t1 < grid.start_ms {
            let scale = if matches!(ctr.q, Quantity::Input | Quantity::Output) { 1_000_000 } else { 1_000 };
            let h = hash3(self.key, SALT_PRE, u64::from(ctr.model) << 16 | u64::from(ctr.dp) << 8 | ctr.q as u64);
            (1 + (h % 900) as i64) * scale
        } else {
            0
        };
        pre + (run.k1..run.ka).map(|k| self.inc(c, grid, run, ctr, k)).sum::<i64>()
    }

    /// The written samples (grid index, value) of one counter over one run, streamed.
    pub fn samples<'a>(
        &'a self,
        c: &'a Cluster,
        grid: &'a Grid,
        run: &'a Run,
        ctr: Counter,
    ) -> impl Iterator<Item = (u64, i64)> + 'a {
        let mut acc = self.unobserved(c, grid, run, ctr);
        (run.ka..run.kb).map(move |k| {
            if run.reset == Some(k) {
                acc = 0;
            }
            acc += self.inc(c, grid, run, ctr, k);
            (k, acc)
        })
    }

    /// Each counter's last value over `run`.
    fn finals(&self, c: &Cluster, grid: &Grid, run: &Run) -> Vec<i64> {
        self.counters().into_iter().map(|ctr| self.samples(c, grid, run, ctr).last().map_or(0, |s| s.1)).collect()
    }

    /// Whether the first sample of run `i` pairs with the last one of the run before (at most an hour apart).
    fn paired(&self, grid: &Grid, i: usize) -> bool {
        i > 0 && grid.at(self.runs[i].ka) - grid.at(self.runs[i - 1].kb - 1) <= HOUR_MS
    }

    /// Whether the rule counts run `i`'s first sample (its later samples always count): paired with the run before,
    /// or the pod became Running within one scrape interval before it.
    pub fn first_counts(&self, c: &Cluster, grid: &Grid, i: usize) -> bool {
        let run = &self.runs[i];
        self.paired(grid, i) || became_running(c, grid, run.pod, grid.at(run.ka))
    }
}

/// SPEC §9 per kube-state-metrics: pod `p` has a Running sample at some `t_r` in `[t − Δ, t]` with none in
/// `[t_r − 15 min, t_r)`.
pub fn became_running(c: &Cluster, grid: &Grid, p: usize, t: i64) -> bool {
    let pod = &c.pods[p];
    let running = |k: u64| c.ksm_up(k) && pod.running_at(grid.at(k));
    let (ka, kb) = grid.range(t - grid.step_ms, t + 1, 0);
    (ka..kb).filter(|&k| running(k)).any(|k| {
        let (a, b) = grid.range(grid.at(k) - FRESH_MS, grid.at(k), 0);
        !(a..b).any(running)
    })
}

/// The serving pods of the cluster with every case placed (see the module doc), deterministic per seed.
pub fn plan(c: &Cluster, grid: &Grid, seed: u64) -> Vec<Server> {
    let salt = hash2(seed, SALT_SERVING);
    let mut by_name: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (p, pod) in c.pods.iter().enumerate() {
        if pod.class == Class::Inference {
            by_name.entry(pod.name_id).or_default().push(p);
        }
    }
    let mut servers: Vec<Server> = by_name
        .into_iter()
        .filter_map(|(name_id, mut pods)| {
            pods.sort_by_key(|&p| c.pods[p].t1);
            let runs: Vec<Run> = pods.iter().filter_map(|&p| run_of(c, grid, p)).collect();
            (!runs.is_empty()).then(|| server(c, salt, name_id, pods, runs))
        })
        .collect();
    // the cases go to names in a seeded order, each case to its own name while names last
    servers.sort_by_key(|s| (hash2(salt ^ SALT_ORDER, s.name_id as u64), s.name_id));
    place_cases(c, grid, &mut servers);
    for s in &mut servers {
        settle_cold_starts(c, grid, s);
    }
    servers.sort_by_key(|s| s.name_id);
    servers
}

/// The written stretch of pod `p`: every grid point it is Running at.
fn run_of(c: &Cluster, grid: &Grid, p: usize) -> Option<Run> {
    let pod = &c.pods[p];
    let (ka, kb) = grid.range(pod.t1, pod.t2, 0);
    (ka < kb).then_some(Run { pod: p, k1: ka, ka, kb, reset: None, cold: false })
}

/// A pod name's engine and everyday setup; the cases are placed afterwards.
fn server(c: &Cluster, salt: u64, name_id: usize, pods: Vec<usize>, runs: Vec<Run>) -> Server {
    let key = hash2(salt ^ SALT_SERVER, name_id as u64);
    let name = &c.names[name_id];
    let stem = name.rsplit_once('-').map_or(name.as_str(), |x| x.0);
    let engine = match stem {
        "vllm-serve" => Engine::Vllm,
        "triton-infer" => Engine::Triton,
        _ => [Engine::Sglang, Engine::Tgi, Engine::Vllm][(key % 3) as usize],
    };
    let r = |i: u64| mix64(key ^ i);
    let models = match engine {
        // Triton usually hosts a model repository: one or both
        Engine::Triton if r(1) % 2 == 0 => TRITON_MODELS.iter().collect(),
        Engine::Triton => vec![&TRITON_MODELS[(r(2) % 2) as usize]],
        _ => vec![&LLM_MODELS[(r(2) % LLM_MODELS.len() as u64) as usize]],
    };
    let first = &c.pods[pods[0]];
    let ip = r(3);
    Server {
        name_id,
        ns: first.ns,
        container: first.container,
        engine,
        models,
        dp: 1,
        exported: false,
        underscore: false,
        unknown_name: false,
        silent: false,
        idle_p: [0.0, 0.0, 0.08, 0.2][(r(4) % 4) as usize],
        rps: 0.3 + 5.7 * unit(r(5)),
        instance: format!("10.{}.{}.{}:8000", 64 + ip % 64, (ip >> 8) % 256, 2 + (ip >> 16) % 250),
        key,
        runs,
        pods,
    }
}

/// A case and the names it may go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    TwoModels,
    TwoEngines,
    UnknownName,
    Underscore,
    Exported,
    IdleHours,
    Silent,
    Reset,
    Late,
}

const CASES: [Case; 9] = [
    Case::TwoModels,
    Case::TwoEngines,
    Case::UnknownName,
    Case::Underscore,
    Case::Exported,
    Case::IdleHours,
    Case::Silent,
    Case::Reset,
    Case::Late,
];

/// Give each case to the first name (in the seeded order) that can take it and has no case yet.
fn place_cases(c: &Cluster, grid: &Grid, servers: &mut [Server]) {
    let mut taken = vec![false; servers.len()];
    for case in CASES {
        for (i, s) in servers.iter_mut().enumerate() {
            if !taken[i] && apply(c, grid, s, case) {
                taken[i] = true;
                break;
            }
        }
    }
}

/// Put `case` on `s` if it fits; whether it did.
fn apply(c: &Cluster, grid: &Grid, s: &mut Server, case: Case) -> bool {
    // a reset or a late start needs the name's only pod object: a restart's first sample pairs with the run before
    let single = s.runs.len() == 1;
    let tokens = s.engine.has_tokens();
    match case {
        Case::TwoModels if s.engine == Engine::Vllm => {
            let first = LLM_MODELS.iter().position(|m| std::ptr::eq(m, s.models[0])).unwrap_or(0);
            s.models.push(&LLM_MODELS[(first + 1) % LLM_MODELS.len()]);
        }
        Case::TwoEngines if s.engine == Engine::Vllm => s.dp = 2,
        Case::UnknownName if s.engine == Engine::Vllm => s.unknown_name = true,
        Case::Underscore if s.engine == Engine::Sglang => s.underscore = true,
        // the cases of the rule's own go to pods counting tokens, where they show most
        Case::Exported if tokens => s.exported = true,
        Case::IdleHours => s.idle_p = 0.3,
        Case::Silent if tokens => s.silent = true,
        Case::Reset if single && tokens => match find_reset(c, grid, s) {
            Some(k) => s.runs[0].reset = Some(k),
            None => return false,
        },
        Case::Late if single && tokens => match find_late_start(c, grid, &s.runs[0]) {
            Some(k) => s.runs[0].ka = k,
            None => return false,
        },
        _ => return false,
    }
    true
}

/// Grid points per hour (rounded up).
fn per_hour(grid: &Grid) -> u64 {
    ((HOUR_MS + grid.step_ms - 1) / grid.step_ms) as u64
}

/// A grid point 20 to 40 minutes into an hour, at least an hour after the run's first sample and before its last,
/// where every counter's increment is below its value one sample before (so the reset shows as a drop).
fn find_reset(c: &Cluster, grid: &Grid, s: &Server) -> Option<u64> {
    let run = &s.runs[0];
    let counters = s.counters();
    let mut value: Vec<i64> = counters.iter().map(|&x| s.unobserved(c, grid, run, x)).collect();
    for k in run.ka..run.kb {
        let inc: Vec<i64> = counters.iter().map(|&x| s.inc(c, grid, run, x, k)).collect();
        let minute = (grid.at(k) - grid.start_ms).rem_euclid(HOUR_MS) / MIN_MS;
        let candidate = k >= run.ka + per_hour(grid) && k + 1 < run.kb && (20..40).contains(&minute);
        if candidate && inc.iter().zip(&value).all(|(i, v)| i < v) {
            return Some(k);
        }
        for (v, i) in value.iter_mut().zip(inc) {
            *v += i;
        }
    }
    None
}

/// The first hour's start at least `LATE_HOURS` after the run began Running, with an hour of samples after it,
/// where kube-state-metrics saw the pod Running the two scrapes before (so nothing says it just started).
fn find_late_start(c: &Cluster, grid: &Grid, run: &Run) -> Option<u64> {
    let from = grid.at(run.k1) + LATE_HOURS * HOUR_MS;
    let first_hour = grid.start_ms + (from - grid.start_ms + HOUR_MS - 1).div_euclid(HOUR_MS) * HOUR_MS;
    (0..)
        .map(|h| grid.count_before(first_hour + h * HOUR_MS, 0))
        .take_while(|&k| k + per_hour(grid) <= run.kb)
        .find(|&k| k >= 2 && (k - 2..=k).all(|j| c.ksm_up(j)) && !became_running(c, grid, run.pod, grid.at(k)))
}

/// A restarted pod's first sample pairs with the last of the pod object before it when they are at most an hour
/// apart; the rule then counts it whole only if it is below that one (or that one is 0). Where the first step's
/// traffic would not be, the new pod takes none in its first interval.
fn settle_cold_starts(c: &Cluster, grid: &Grid, s: &mut Server) {
    for i in 1..s.runs.len() {
        if !s.paired(grid, i) {
            continue;
        }
        let last = s.finals(c, grid, &s.runs[i - 1]);
        let run = &s.runs[i];
        let too_big = s.counters().iter().zip(&last).any(|(&x, &v)| v > 0 && s.inc(c, grid, run, x, run.k1) >= v);
        s.runs[i].cold = too_big;
    }
}

/// The workload and scrape labels of a server's series.
fn target_labels<'a>(c: &'a Cluster, s: &'a Server) -> Vec<(&'static str, &'a str)> {
    let (ns, pod) = (NAMESPACES[s.ns].0, c.names[s.name_id].as_str());
    let mut l = if s.exported {
        vec![
            ("exported_namespace", ns),
            ("exported_pod", pod),
            ("exported_container", s.container),
            ("namespace", SCRAPER_NAMESPACE),
            ("pod", SCRAPER_POD),
        ]
    } else {
        vec![("namespace", ns), ("pod", pod), ("container", s.container)]
    };
    l.extend([("instance", s.instance.as_str()), ("job", "serving")]);
    l
}

const DP_LABELS: [&str; 2] = ["0", "1"];

/// The engine's own labels of one counter.
fn counter_labels(s: &Server, ctr: Counter) -> Vec<(&'static str, &'static str)> {
    let model = s.models[ctr.model as usize].name;
    let mut l = match s.engine {
        Engine::Vllm => vec![("model_name", model), ("engine", DP_LABELS[ctr.dp as usize])],
        Engine::Sglang => vec![("model_name", model)],
        // TGI's model is the pod's (kube_pod_labels)
        Engine::Tgi => vec![],
        Engine::Triton => vec![("model", model), ("version", "1")],
    };
    match ctr.q {
        Quantity::Stop => l.push(("finished_reason", "stop")),
        Quantity::Length => l.push(("finished_reason", "length")),
        _ => {}
    }
    l
}

/// Write the serving families. `kube_pod_labels` of the serving pods follow them ([`write_pod_labels`]).
pub fn write_families<W: Write>(w: &mut OmWriter<W>, c: &Cluster, grid: &Grid, servers: &[Server]) -> io::Result<()> {
    for f in &FAMILIES {
        if !servers.iter().any(|s| s.exports(f)) {
            continue;
        }
        w.family(f.name)?;
        for s in servers.iter().filter(|s| s.exports(f)) {
            let target = target_labels(c, s);
            for ctr in s.counters().into_iter().filter(|x| f.quantities.contains(&x.q)) {
                w.series(f.name, target.iter().copied().chain(counter_labels(s, ctr)));
                for run in &s.runs {
                    for (k, v) in s.samples(c, grid, run, ctr) {
                        w.sample_int(v, grid.at(k))?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// The serving pods' `kube_pod_labels` series (on the KSM grid while they exist), in the family the caller opened
/// (`emit` writes its header once, for these and the queued pods' series after them).
pub fn write_pod_labels<W: Write>(w: &mut OmWriter<W>, c: &Cluster, grid: &Grid, servers: &[Server]) -> io::Result<()> {
    for s in servers {
        for &p in &s.pods {
            let pod = &c.pods[p];
            let (ka, kb) = grid.range(pod.t0, pod.t3, 0);
            w.series(
                POD_LABELS,
                [
                    ("namespace", NAMESPACES[s.ns].0),
                    ("pod", c.names[s.name_id].as_str()),
                    ("uid", pod.uid.as_str()),
                    ("label_model", s.models[0].name),
                ],
            );
            ksm_samples(w, c, grid, ka, kb, 1)?;
        }
    }
    Ok(())
}

/// Tokens and requests of one hour of one model of a server.
#[derive(Clone, Copy, Debug, Default)]
struct Tally {
    input: i64,
    output: i64,
    requests: i64,
}

impl Tally {
    fn add(&mut self, s: &Step, vllm: bool) {
        self.input += s.input;
        self.output += s.output;
        // vLLM's requests are its two finished_reason series
        self.requests += if vllm { s.stop + s.length } else { s.requests };
    }
}

/// The serving truth: hour × pod × model rows of what the rule counts (a row for every hour with a sample), and one
/// row per serving pod.
pub fn truth(c: &Cluster, grid: &Grid, servers: &[Server]) -> (Vec<ServingRow>, Vec<ServingPodRow>) {
    let mut rows = Vec::new();
    let mut pods = Vec::with_capacity(servers.len());
    for s in servers {
        let hourly = tally(c, grid, s);
        let mut total = Tally::default();
        let mut idle_hours = Vec::new();
        let mut hour_total: BTreeMap<usize, i64> = BTreeMap::new();
        for (&(h, m), t) in &hourly {
            total.input += t.input;
            total.output += t.output;
            total.requests += t.requests;
            *hour_total.entry(h).or_default() += t.input + t.output + t.requests;
            rows.push(row(c, grid, s, h, m, t));
        }
        for (h, n) in hour_total {
            if n == 0 {
                idle_hours.push(rfc3339(grid.start_ms + h as i64 * HOUR_MS));
            }
        }
        pods.push(pod_row(c, grid, s, total, idle_hours));
    }
    // as the other hourly rows: by hour, then namespace and pod
    rows.sort_by(|a, b| (&a.hour, &a.namespace, &a.pod, &a.model).cmp(&(&b.hour, &b.namespace, &b.pod, &b.model)));
    pods.sort_by(|a, b| (&a.namespace, &a.pod).cmp(&(&b.namespace, &b.pod)));
    (rows, pods)
}

/// Per (hour, model) with a sample: the increments of every sample the rule counts (a baseline counts nothing);
/// engines and finished reasons summed.
fn tally(c: &Cluster, grid: &Grid, s: &Server) -> BTreeMap<(usize, u8), Tally> {
    let mut out: BTreeMap<(usize, u8), Tally> = BTreeMap::new();
    for (i, run) in s.runs.iter().enumerate() {
        let baseline = !s.first_counts(c, grid, i);
        for k in run.ka..run.kb {
            for model in 0..s.models.len() as u8 {
                let t = out.entry((grid.hour_of(k), model)).or_default();
                if baseline && k == run.ka {
                    continue;
                }
                for dp in 0..s.dp {
                    t.add(&s.step(c, grid, run, model, dp, k), s.engine == Engine::Vllm);
                }
            }
        }
    }
    out
}

fn row(c: &Cluster, grid: &Grid, s: &Server, h: usize, model: u8, t: &Tally) -> ServingRow {
    let tokens = |n: i64| s.engine.has_tokens().then_some(n);
    ServingRow {
        hour: rfc3339(grid.start_ms + h as i64 * HOUR_MS),
        namespace: NAMESPACES[s.ns].0.to_string(),
        pod: c.names[s.name_id].clone(),
        team: team_of(s.ns).to_string(),
        model: s.models[model as usize].name.to_string(),
        engine: s.engine.as_str().to_string(),
        input_tokens: tokens(t.input),
        output_tokens: tokens(t.output),
        requests: t.requests,
    }
}

/// The families a server writes, the counted and the unknown ones.
fn family_names(s: &Server, naming: impl Fn(Naming) -> bool) -> Vec<String> {
    FAMILIES.iter().filter(|f| s.exports(f) && naming(f.naming)).map(|f| f.name.to_string()).collect()
}

fn pod_row(c: &Cluster, grid: &Grid, s: &Server, total: Tally, idle_hours: Vec<String>) -> ServingPodRow {
    let restarts = s.runs.len() - 1;
    let resets: Vec<String> = s.runs.iter().filter_map(|r| r.reset).map(|k| rfc3339(grid.at(k))).collect();
    let baselines: Vec<String> =
        (0..s.runs.len()).filter(|&i| !s.first_counts(c, grid, i)).map(|i| rfc3339(grid.at(s.runs[i].ka))).collect();
    let late: Vec<String> = s.runs.iter().filter(|r| r.ka > r.k1).map(|r| rfc3339(grid.at(r.ka))).collect();
    let flags = [
        (s.models.len() > 1, "two_models"),
        (s.dp > 1, "two_engines"),
        (s.underscore, "underscore_names"),
        (s.exported, "exported_labels"),
        (s.unknown_name, "unknown_name"),
        (!resets.is_empty(), "counter_reset"),
        (restarts > 0, "same_name_restart"),
        (s.runs.iter().any(|r| r.cold), "cold_restart"),
        (!late.is_empty(), "late_scrape"),
        (!baselines.is_empty(), "baseline"),
        (!idle_hours.is_empty(), "idle_hours"),
        (s.silent, "silent"),
    ];
    let tokens = |n: i64| s.engine.has_tokens().then_some(n);
    ServingPodRow {
        namespace: NAMESPACES[s.ns].0.to_string(),
        pod: c.names[s.name_id].clone(),
        team: team_of(s.ns).to_string(),
        engine: s.engine.as_str().to_string(),
        models: s.models.iter().map(|m| m.name.to_string()).collect(),
        dp_engines: u32::from(s.dp),
        workload_labels: if s.exported { "exported" } else { "plain" }.to_string(),
        instance: s.instance.clone(),
        metrics: family_names(s, |n| n != Naming::Unknown),
        unknown_metrics: family_names(s, |n| n == Naming::Unknown),
        uids: s.runs.iter().map(|r| c.pods[r.pod].uid.clone()).collect(),
        cases: flags.iter().filter(|f| f.0).map(|f| f.1.to_string()).collect(),
        counter_resets: resets,
        scrape_from: late.into_iter().next(),
        baseline_samples: baselines,
        idle_hours,
        input_tokens: tokens(total.input),
        output_tokens: tokens(total.output),
        requests: total.requests,
    }
}

/// One hour of one model served by one pod name (its restarts together), as SPEC §9 stores it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServingRow {
    pub hour: String,
    pub namespace: String,
    pub pod: String,
    pub team: String,
    pub model: String,
    /// `vllm`, `sglang`, `tgi` or `triton`.
    pub engine: String,
    /// Null for Triton (no token counters).
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub requests: i64,
}

/// One serving pod name and what its counters exercise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServingPodRow {
    pub namespace: String,
    pub pod: String,
    pub team: String,
    pub engine: String,
    /// The models it serves (the first is its `kube_pod_labels{label_model}`).
    pub models: Vec<String>,
    /// vLLM's data-parallel engines (`engine` label values `0`..); 1 elsewhere.
    pub dp_engines: u32,
    /// `plain` (`namespace`, `pod`, `container`) or `exported` (`exported_*`, beside the scraper's own labels).
    pub workload_labels: String,
    pub instance: String,
    /// The families it writes that count.
    pub metrics: Vec<String>,
    /// The families it writes that cardhour does not know (never counted).
    pub unknown_metrics: Vec<String>,
    /// Its pod objects with samples, in time order.
    pub uids: Vec<String>,
    pub cases: Vec<String>,
    /// Samples where the process restarted (the counter's value drops to the increments since).
    pub counter_resets: Vec<String>,
    /// The first sample of a pod scraped only from some hours after it started Running.
    pub scrape_from: Option<String>,
    /// Samples that count nothing (baselines).
    pub baseline_samples: Vec<String>,
    /// Hours with counted samples and no traffic.
    pub idle_hours: Vec<String>,
    /// Totals over the window; tokens null for Triton.
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub requests: i64,
}

#[cfg(test)]
mod tests {
    use super::super::layout::Profile;
    use super::super::schedule;
    use super::*;

    /// A pod object back under its name within the hour pairs its first sample with the last of the one before: it
    /// must start below it (or that one be 0), which a cold first interval ensures where the traffic would not.
    #[test]
    fn a_restart_within_the_hour_starts_below_the_pod_object_before() {
        let start = 1_795_000_000_000 - 1_795_000_000_000 % HOUR_MS;
        let grid = Grid::new(start, start + 6 * HOUR_MS, 60_000);
        let c = schedule::build(Profile::Standard, 64, 7, grid, grid, false);
        let mut servers = plan(&c, &grid, 7);
        let mut cold = 0;
        for s in servers.iter_mut().filter(|s| !s.silent && s.runs.len() == 1 && s.runs[0].kb > s.runs[0].ka + 40) {
            // the pod's first sample alone, then the pod again half an hour later
            let r = Run { reset: None, cold: false, ..s.runs[0].clone() };
            let again = r.ka + 31;
            s.runs = vec![Run { kb: r.ka + 1, ..r.clone() }, Run { k1: again, ka: again, ..r }];
            settle_cold_starts(&c, &grid, s);
            assert!(s.paired(&grid, 1));
            let last = s.finals(&c, &grid, &s.runs[0]);
            for (x, v) in s.counters().into_iter().zip(last) {
                let first = s.samples(&c, &grid, &s.runs[1], x).next().map_or(0, |p| p.1);
                assert!(v == 0 || first < v, "{}: {x:?} {first} after {v}", c.names[s.name_id]);
            }
            cold += usize::from(s.runs[1].cold);
        }
        assert!(cold > 0, "no cold restart");
    }
}
