//! Serving engines' token and request counters (SPEC §9): which series count, and what each adds to an hour by
//! the counter rule — raw samples only, resets counted, a new pod's first sample whole, any other first sample a
//! baseline.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Anomaly, AnomalyKind, Sample};

/// Two samples of a counter further apart than this are not a pair: the later one starts the series anew. Hours
/// are read this far back so an hour's first pair is seen whichever batch the hour is in.
pub const COUNTER_LOOKBACK_MS: i64 = 3_600_000;

/// A serving engine whose counters cardhour reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    Vllm,
    Sglang,
    Tgi,
    Triton,
}

impl Engine {
    pub const ALL: [Engine; 4] = [Engine::Vllm, Engine::Sglang, Engine::Tgi, Engine::Triton];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Vllm => "vllm",
            Self::Sglang => "sglang",
            Self::Tgi => "tgi",
            Self::Triton => "triton",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == s)
    }

    /// Whether the engine counts tokens (Triton counts requests only: ¥ per 1,000 requests, no ¥ per token).
    pub fn has_tokens(self) -> bool {
        self != Self::Triton
    }
}

/// What a counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Counter {
    InputTokens,
    OutputTokens,
    Requests,
}

/// A metric name read from the serving selector, classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServingMetric {
    Known(Engine, Counter),
    /// Looks like an engine's token or request counter under a name no known version uses: reported, not counted.
    Unknown,
}

/// The metric names the ingest reads (a regular expression on `__name__`): the known counters and their near
/// variants, so that a renamed one is seen and reported rather than silently missed.
pub const SERVING_METRICS_RE: &str = "(vllm|sglang)[:_](prompt_tokens|generation_tokens|request_success|num_requests)(_total)?\
|tgi_request_(input_length_sum|generated_tokens_sum|success(_total)?)|nv_inference_request_success(_total)?";

impl ServingMetric {
    /// The known names, with a colon or an underscore after vLLM's and SGLang's prefix (SPEC §9).
    pub fn classify(name: &str) -> Option<Self> {
        use Counter::*;
        use Engine::*;
        let prefixed = |prefix: &str| {
            name.strip_prefix(prefix).and_then(|rest| rest.strip_prefix(':').or_else(|| rest.strip_prefix('_')))
        };
        let known = if let Some(rest) = prefixed("vllm") {
            match rest {
                "prompt_tokens_total" => Some((Vllm, InputTokens)),
                "generation_tokens_total" => Some((Vllm, OutputTokens)),
                "request_success_total" => Some((Vllm, Requests)),
                _ => None,
            }
        } else if let Some(rest) = prefixed("sglang") {
            match rest {
                "prompt_tokens_total" => Some((Sglang, InputTokens)),
                "generation_tokens_total" => Some((Sglang, OutputTokens)),
                "num_requests_total" => Some((Sglang, Requests)),
                _ => None,
            }
        } else {
            match name {
                "tgi_request_input_length_sum" => Some((Tgi, InputTokens)),
                "tgi_request_generated_tokens_sum" => Some((Tgi, OutputTokens)),
                "tgi_request_success" | "tgi_request_success_total" => Some((Tgi, Requests)),
                "nv_inference_request_success" | "nv_inference_request_success_total" => Some((Triton, Requests)),
                _ => None,
            }
        };
        match known {
            Some((e, c)) => Some(Self::Known(e, c)),
            None if name.starts_with("vllm")
                || name.starts_with("sglang")
                || name.starts_with("tgi_")
                || name.starts_with("nv_inference") =>
            {
                Some(Self::Unknown)
            }
            None => None,
        }
    }
}

/// Where a row of served tokens belongs: a pod's model on an engine.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct ServingKey {
    pub namespace: String,
    pub pod: String,
    pub model: String,
    pub engine: Engine,
}

/// One counter series (one label set) of a serving pod: its samples of the hour `[h, h + 1 h)` and, before them,
/// its last sample within [`COUNTER_LOOKBACK_MS`] before `h` (the only earlier one the counter rule reads).
#[derive(Debug, Clone)]
pub struct CounterSeries {
    pub namespace: String,
    pub pod: String,
    /// The series' own model label; `None` for TGI, whose model is its pod's (a pod label).
    pub model: Option<String>,
    pub engine: Engine,
    pub counter: Counter,
    pub samples: Vec<Sample>,
}

/// A pod (namespace, name) whose object became Running at `t_ms` (per kube-state-metrics).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PodStart {
    pub namespace: String,
    pub pod: String,
    pub t_ms: i64,
}

/// The model a pod serves per its pod label (for engines whose series name none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodModel {
    pub namespace: String,
    pub pod: String,
    pub model: String,
}

/// A series name that looks like a serving counter and is none cardhour knows, with its samples in the hour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownServingSeries {
    pub name: String,
    pub samples: u64,
}

/// Tokens and requests one pod served of one model in one hour. Triton counts no tokens (`None`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServingRow {
    pub key: ServingKey,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub requests: i64,
}

/// The model of a pod without a model label of its own.
pub const UNKNOWN_MODEL: &str = "unknown";

/// The times a pod object became Running, from its `kube_pod_status_phase{phase="Running"}` samples (ascending):
/// a 1 with no 1 in the `gap_ms` before it (a scrape gap up to the bridge span is not a new start, as it is not
/// a stop in metering).
pub fn running_starts(samples: &[Sample], gap_ms: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut last_running: Option<i64> = None;
    for s in samples {
        if s.v >= 0.5 {
            if last_running.is_none_or(|t| s.t_ms - t > gap_ms) {
                out.push(s.t_ms);
            }
            last_running = Some(s.t_ms);
        }
    }
    out
}

/// What a counter series adds to `[start_ms, end_ms)` (SPEC §9): for each sample in the hour and the one before
/// it (no more than [`COUNTER_LOOKBACK_MS`] earlier), `v₂ − v₁`, or `v₂` when `v₂ < v₁` (the process restarted at 0);
/// a sample without one before counts whole when `began(t)` (its pod became Running within a scrape interval
/// before it), else it is the baseline. Also returns the resets seen (`v₂ < v₁`), as the pairs' times.
pub fn increase(
    samples: &[Sample],
    (start_ms, end_ms): (i64, i64),
    began: impl Fn(i64) -> bool,
) -> (f64, Vec<(i64, i64)>) {
    let (mut sum, mut resets) = (0.0, Vec::new());
    let first = samples.partition_point(|s| s.t_ms < start_ms);
    for i in first..samples.len() {
        let s = samples[i];
        if s.t_ms >= end_ms {
            break;
        }
        let before = i.checked_sub(1).map(|j| samples[j]).filter(|p| s.t_ms - p.t_ms <= COUNTER_LOOKBACK_MS);
        match before {
            Some(p) if s.v >= p.v => sum += s.v - p.v,
            Some(p) => {
                resets.push((p.t_ms, s.t_ms));
                sum += s.v;
            }
            None if began(s.t_ms) => sum += s.v,
            None => {}
        }
    }
    (sum, resets)
}

/// Everything the serving counters of one hour need.
#[derive(Debug, Clone, Default)]
pub struct ServingInput {
    pub series: Vec<CounterSeries>,
    /// Pod objects that became Running in `[start − margin, end)`.
    pub starts: Vec<PodStart>,
    /// The model pod label of pods with a sample within [`COUNTER_LOOKBACK_MS`] of the hour, either side (a pod
    /// started in a kube-state-metrics outage serves before KSM sees it).
    pub models: Vec<PodModel>,
    pub unknown: Vec<UnknownServingSeries>,
}

/// The serving rows of `[start_ms, end_ms)`: per pod, model and engine the counters' increases summed over their
/// series (vLLM's engines and finish reasons are series of one counter), integers; a pod-model with a sample in
/// the hour has a row even when nothing was served (an idle serving hour). `interval_ms` is the scrape interval a
/// new pod's first sample may follow its start by.
pub fn meter_serving(
    input: &ServingInput,
    (start_ms, end_ms): (i64, i64),
    interval_ms: i64,
) -> (Vec<ServingRow>, Vec<Anomaly>) {
    let mut starts: BTreeMap<(&str, &str), Vec<i64>> = BTreeMap::new();
    for s in &input.starts {
        starts.entry((&s.namespace, &s.pod)).or_default().push(s.t_ms);
    }
    let models: BTreeMap<(&str, &str), &str> =
        input.models.iter().map(|m| ((m.namespace.as_str(), m.pod.as_str()), m.model.as_str())).collect();
    // per key: input, output, requests (f64 sums of integer counters are exact below 2^53)
    let mut sums: BTreeMap<ServingKey, [f64; 3]> = BTreeMap::new();
    let mut resets: BTreeMap<String, u64> = BTreeMap::new();
    for s in &input.series {
        if !s.samples.iter().any(|p| p.t_ms >= start_ms && p.t_ms < end_ms) {
            continue;
        }
        let pod_starts = starts.get(&(s.namespace.as_str(), s.pod.as_str()));
        let began = |t: i64| pod_starts.is_some_and(|v| v.iter().any(|&r| r <= t && t - r <= interval_ms));
        let (added, reset) = increase(&s.samples, (start_ms, end_ms), began);
        // a reset where the pod became Running again (a new pod object under its name) is expected; one without
        // is a process restarting inside the pod, or a counter that went backwards: worth a look, counted either way
        let unexplained = reset.iter().filter(|(a, b)| !pod_starts.is_some_and(|v| v.iter().any(|r| a < r && r <= b)));
        let unexplained = unexplained.count() as u64;
        if unexplained > 0 {
            *resets.entry(format!("{}/{}", s.namespace, s.pod)).or_default() += unexplained;
        }
        let model = match &s.model {
            Some(m) if !m.is_empty() => m.clone(),
            _ => models.get(&(s.namespace.as_str(), s.pod.as_str())).unwrap_or(&UNKNOWN_MODEL).to_string(),
        };
        let key = ServingKey { namespace: s.namespace.clone(), pod: s.pod.clone(), model, engine: s.engine };
        let slot = match s.counter {
            Counter::InputTokens => 0,
            Counter::OutputTokens => 1,
            Counter::Requests => 2,
        };
        sums.entry(key).or_default()[slot] += added;
    }
    let rows = sums
        .into_iter()
        .map(|(key, [i, o, r])| {
            let tokens = key.engine.has_tokens();
            ServingRow {
                input_tokens: tokens.then_some(i.round() as i64),
                output_tokens: tokens.then_some(o.round() as i64),
                requests: r.round() as i64,
                key,
            }
        })
        .collect();
    let mut anomalies: Vec<Anomaly> = resets
        .into_iter()
        .map(|(subject, count)| Anomaly { kind: AnomalyKind::ServingCounterReset, subject, count })
        .collect();
    anomalies.extend(input.unknown.iter().filter(|u| u.samples > 0).map(|u| Anomaly {
        kind: AnomalyKind::UnknownServingSeries,
        subject: u.name.clone(),
        count: u.samples,
    }));
    (rows, anomalies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const H: i64 = 3_600_000;

    fn samples(points: &[(i64, f64)]) -> Vec<Sample> {
        points.iter().map(|&(t, v)| Sample { t_ms: t, v }).collect()
    }

    #[test]
    fn names_and_their_variants() {
        use Counter::*;
        use Engine::*;
        let known = |n: &str| ServingMetric::classify(n);
        assert_eq!(known("vllm:prompt_tokens_total"), Some(ServingMetric::Known(Vllm, InputTokens)));
        assert_eq!(known("vllm_generation_tokens_total"), Some(ServingMetric::Known(Vllm, OutputTokens)));
        assert_eq!(known("sglang_num_requests_total"), Some(ServingMetric::Known(Sglang, Requests)));
        assert_eq!(known("tgi_request_input_length_sum"), Some(ServingMetric::Known(Tgi, InputTokens)));
        assert_eq!(known("nv_inference_request_success"), Some(ServingMetric::Known(Triton, Requests)));
        assert_eq!(known("vllm:prompt_tokens"), Some(ServingMetric::Unknown));
        assert_eq!(known("sglang:request_success_total"), Some(ServingMetric::Unknown));
        assert_eq!(known("DCGM_FI_DEV_GPU_UTIL"), None);
    }

    /// The selector reads every known name and the near variants `classify` reports (Prometheus anchors it).
    #[test]
    fn the_selector_reads_what_classify_knows() {
        let re = regex::Regex::new(&format!("^(?:{SERVING_METRICS_RE})$")).unwrap();
        let names = [
            "vllm:prompt_tokens_total",
            "vllm_prompt_tokens_total",
            "vllm:generation_tokens_total",
            "vllm:request_success_total",
            "sglang:prompt_tokens_total",
            "sglang_generation_tokens_total",
            "sglang:num_requests_total",
            "tgi_request_input_length_sum",
            "tgi_request_generated_tokens_sum",
            "tgi_request_success",
            "nv_inference_request_success",
            "vllm:prompt_tokens",
        ];
        for n in names {
            assert!(re.is_match(n), "{n}");
            assert!(ServingMetric::classify(n).is_some(), "{n}");
        }
        for n in ["vllm:request_prompt_tokens_sum", "tgi_request_input_length_count", "vllm:num_preemptions_total"] {
            assert!(!re.is_match(n), "{n}");
        }
    }

    #[test]
    fn pairs_resets_and_first_samples() {
        let hour = (10 * H, 11 * H);
        // before the hour 100, then 130, 150, a restart (20), 50: 30 + 20 + 20 + 30
        let s = samples(&[
            (10 * H - 60_000, 100.0),
            (10 * H, 130.0),
            (10 * H + 60_000, 150.0),
            (10 * H + 120_000, 20.0),
            (10 * H + 180_000, 50.0),
        ]);
        assert_eq!(increase(&s, hour, |_| false), (100.0, vec![(10 * H + 60_000, 10 * H + 120_000)]));
        // a series beginning in the hour: its first sample a baseline unless the pod just began
        let s = samples(&[(10 * H + 60_000, 40.0), (10 * H + 120_000, 45.0)]);
        assert_eq!(increase(&s, hour, |_| false), (5.0, vec![]));
        assert_eq!(increase(&s, hour, |t| t == 10 * H + 60_000), (45.0, vec![]));
        // the sample on the hour's end belongs to the next hour; one on its start to this one
        let s = samples(&[(10 * H - 30_000, 1.0), (10 * H, 3.0), (11 * H, 10.0)]);
        assert_eq!(increase(&s, hour, |_| false), (2.0, vec![]));
        assert_eq!(increase(&s, (11 * H, 12 * H), |_| false), (7.0, vec![]));
        // more than the look-back apart: not a pair
        let s = samples(&[(10 * H - 30_000 - COUNTER_LOOKBACK_MS, 1.0), (10 * H - 29_999, 3.0), (10 * H + 5, 9.0)]);
        assert_eq!(increase(&s, hour, |_| false).0, 6.0);
        let s = samples(&[(9 * H - 1, 1.0), (10 * H, 3.0)]);
        assert_eq!(increase(&s, hour, |_| false).0, 0.0);
    }

    #[test]
    fn starts_ignore_short_gaps() {
        let s = samples(&[(0, 0.0), (60_000, 1.0), (120_000, 1.0), (600_000, 1.0), (3_000_000, 1.0), (3_060_000, 0.0)]);
        assert_eq!(running_starts(&s, 900_000), vec![60_000, 3_000_000]);
    }

    #[test]
    fn rows_sum_series_and_name_models() {
        let series = |model: Option<&str>, engine, counter, pts: &[(i64, f64)]| CounterSeries {
            namespace: "ns".into(),
            pod: "p".into(),
            model: model.map(str::to_string),
            engine,
            counter,
            samples: samples(pts),
        };
        let input = ServingInput {
            series: vec![
                series(Some("m"), Engine::Vllm, Counter::InputTokens, &[(H - 60_000, 10.0), (H, 15.0)]),
                // a second engine of the same model adds up
                series(Some("m"), Engine::Vllm, Counter::InputTokens, &[(H - 60_000, 1.0), (H + 5, 2.0)]),
                series(Some("m"), Engine::Vllm, Counter::Requests, &[(H - 60_000, 1.0), (H + 5, 1.0)]),
                series(None, Engine::Tgi, Counter::OutputTokens, &[(H + 60_000, 7.0)]),
                series(Some("r"), Engine::Triton, Counter::Requests, &[(H + 60_000, 7.0), (H + 120_000, 9.0)]),
                // a series with no sample in the hour has no row
                series(Some("old"), Engine::Vllm, Counter::Requests, &[(H - 60_000, 1.0)]),
            ],
            starts: vec![PodStart { namespace: "ns".into(), pod: "p".into(), t_ms: H + 30_000 }],
            models: vec![PodModel { namespace: "ns".into(), pod: "p".into(), model: "tgi-model".into() }],
            unknown: vec![UnknownServingSeries { name: "vllm:prompt_tokens".into(), samples: 60 }],
        };
        let (rows, anomalies) = meter_serving(&input, (H, 2 * H), 60_000);
        let got: Vec<_> =
            rows.iter().map(|r| (r.key.model.as_str(), r.input_tokens, r.output_tokens, r.requests)).collect();
        assert_eq!(got, vec![("m", Some(6), Some(0), 0), ("r", None, None, 9), ("tgi-model", Some(0), Some(7), 0)]);
        assert_eq!(anomalies.len(), 1);
        assert_eq!(anomalies[0].kind, AnomalyKind::UnknownServingSeries);
    }

    proptest! {
        /// Split anywhere, the hours add up to the whole: every increment counted once, resets included.
        #[test]
        fn hours_tile(steps in proptest::collection::vec((0u32..50, any::<bool>()), 1..200), cut in 1i64..5) {
            let mut v = 0.0;
            let mut pts = Vec::new();
            for (k, (inc, reset)) in steps.iter().enumerate() {
                v = if *reset && v > 0.0 { (*inc as f64).min(v - 1.0).max(0.0) } else { v + *inc as f64 };
                pts.push(Sample { t_ms: k as i64 * 60_000, v });
            }
            let whole = increase(&pts, (0, i64::MAX), |t| t == 0).0;
            let edge = cut * 600_000;
            let parts = increase(&pts, (0, edge), |t| t == 0).0 + increase(&pts, (edge, i64::MAX), |t| t == 0).0;
            prop_assert_eq!(whole, parts);
        }
    }
}
