//! Tests of the simulator: parameter validation, determinism, internal consistency of the truth,
//! well-formedness of the OpenMetrics file, and a small reference meter that re-derives every
//! pod's figures from the written file per docs/metering.md and must agree with the truth.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use chrono::{DateTime, TimeZone, Utc};

use super::*;

fn end() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 11, 30, 8, 0, 0).unwrap()
}

fn params(dir: &Path, gpus: u32, hours: u32, step: u32, seed: u64) -> SimParams {
    SimParams {
        gpus,
        hours,
        scrape_interval_s: step,
        seed,
        end: end(),
        out: dir.to_path_buf(),
        profile: Profile::Standard,
        ksm_gaps: false,
        util_interval_s: None,
    }
}

struct Run {
    _dir: tempfile::TempDir,
    summary: SimSummary,
    truth: Truth,
    metrics: String,
    truth_raw: String,
}

fn sim(gpus: u32, hours: u32, step: u32, seed: u64) -> Run {
    sim_with(gpus, hours, step, seed, false)
}

fn sim_with(gpus: u32, hours: u32, step: u32, seed: u64, ksm_gaps: bool) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let summary = run(&SimParams { ksm_gaps, ..params(dir.path(), gpus, hours, step, seed) }).unwrap();
    let metrics = std::fs::read_to_string(&summary.metrics_path).unwrap();
    let truth_raw = std::fs::read_to_string(&summary.truth_path).unwrap();
    let truth = serde_json::from_str(&truth_raw).unwrap();
    Run { _dir: dir, summary, truth, metrics, truth_raw }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn assert_fig(a: &Figures, b: &Figures, what: &str) {
    assert!(close(a.gpu_hours, b.gpu_hours), "{what}: gpu {} vs {}", a.gpu_hours, b.gpu_hours);
    assert!(
        close(a.effective_gpu_hours, b.effective_gpu_hours),
        "{what}: effective {} vs {}",
        a.effective_gpu_hours,
        b.effective_gpu_hours
    );
    assert!(
        close(a.unmetered_gpu_hours, b.unmetered_gpu_hours),
        "{what}: unmetered {} vs {}",
        a.unmetered_gpu_hours,
        b.unmetered_gpu_hours
    );
}

fn sum<'a>(it: impl Iterator<Item = &'a Figures>) -> Figures {
    let mut s = Figures::default();
    for f in it {
        s.gpu_hours += f.gpu_hours;
        s.effective_gpu_hours += f.effective_gpu_hours;
        s.unmetered_gpu_hours += f.unmetered_gpu_hours;
    }
    s
}

#[test]
fn rejects_bad_params() {
    let dir = tempfile::tempdir().unwrap();
    let ok = params(dir.path(), 8, 1, 60, 1);
    let bad = |f: &dyn Fn(&mut SimParams)| {
        let mut p = ok.clone();
        f(&mut p);
        run(&p).unwrap_err()
    };
    assert!(matches!(bad(&|p| p.gpus = 0), SimError::Gpus(0)));
    assert!(matches!(bad(&|p| p.gpus = 12), SimError::Gpus(12)));
    assert!(matches!(bad(&|p| p.hours = 0), SimError::Hours(0)));
    assert!(matches!(bad(&|p| p.scrape_interval_s = 4), SimError::ScrapeInterval(4)));
    assert!(matches!(bad(&|p| p.scrape_interval_s = 601), SimError::ScrapeInterval(601)));
    let e = bad(&|p| p.end = end() + chrono::Duration::minutes(30));
    assert!(matches!(e, SimError::EndNotOnHour(_)));
    assert!(e.to_string().contains("whole hour"));
    let e = bad(&|p| p.end = end() + chrono::Duration::milliseconds(1));
    assert!(matches!(e, SimError::EndNotOnHour(_)));
    let e = bad(&|p| p.end = Utc.with_ymd_and_hms(1970, 1, 1, 0, 0, 0).unwrap());
    assert!(matches!(e, SimError::OutOfRange { .. }));
    assert!(!dir.path().join(METRICS_FILE).exists(), "nothing written on invalid params");
}

#[test]
fn same_seed_same_bytes_other_seed_differs() {
    let a = sim(16, 2, 60, 7);
    let b = sim(16, 2, 60, 7);
    let c = sim(16, 2, 60, 8);
    assert!(a.metrics == b.metrics, "metrics differ for the same seed");
    assert!(a.truth_raw == b.truth_raw, "truth differs for the same seed");
    assert!(a.metrics != c.metrics);
    assert!(a.truth_raw != c.truth_raw);
}

#[test]
fn truth_sums_are_consistent() {
    let r = sim(56, 6, 60, 3);
    let t = &r.truth;
    assert_fig(&sum(t.by_team.iter().map(|x| &x.figures)), &t.totals, "by_team vs totals");
    assert_fig(&sum(t.by_namespace.iter().map(|x| &x.figures)), &t.totals, "by_namespace vs totals");
    assert_fig(&sum(t.by_kind.iter().map(|x| &x.figures)), &t.totals, "by_kind vs totals");
    assert_fig(&sum(t.by_hour_namespace.iter().map(|x| &x.figures)), &t.totals, "by_hour_namespace vs totals");
    assert_fig(&sum(t.by_pod.iter().map(|x| &x.figures)), &t.totals, "by_pod vs totals");
    for team in &t.by_team {
        let ns = sum(t.by_namespace.iter().filter(|n| n.team == team.team).map(|n| &n.figures));
        assert_fig(&ns, &team.figures, &team.team);
    }
    let step_h = 60.0 / 3600.0;
    for p in &t.by_pod {
        let qf = p.units as f64 * p.fraction;
        let slack = p.segments as f64 * qf * step_h + 1e-9;
        assert!(
            (p.figures.gpu_hours - p.continuous_gpu_hours).abs() <= slack,
            "{}/{}: grid {} vs continuous {}",
            p.namespace,
            p.pod,
            p.figures.gpu_hours,
            p.continuous_gpu_hours
        );
        let metered = p.figures.gpu_hours - p.figures.unmetered_gpu_hours;
        assert!(p.figures.effective_gpu_hours <= metered + 1e-9, "{}: effective above metered", p.pod);
        assert!(p.figures.effective_gpu_hours >= 0.0 && p.figures.unmetered_gpu_hours >= 0.0);
    }
    let cap: f64 = t.capacity.iter().map(|c| c.card_hours).sum();
    assert!(close(cap, 56.0 * 6.0));
    assert!(t.capacity.iter().all(|c| c.offered_card_hours == c.card_hours), "the simulated cluster offers every card");
    assert!(t.totals.gpu_hours > 0.0 && t.totals.gpu_hours <= cap);
}

#[test]
fn every_node_type_and_feature_present() {
    let r = sim(56, 8, 60, 11);
    let t = &r.truth;
    let types: HashSet<&str> = t.nodes.iter().map(|n| n.node_type.as_str()).collect();
    assert_eq!(types.len(), 7, "{types:?}");
    for k in &t.by_kind {
        assert!(k.figures.gpu_hours > 0.0, "no {} usage", k.kind);
    }
    // Pods on the node without DCGM are entirely unmetered; elsewhere most time is metered.
    let dark: Vec<_> = t.by_pod.iter().filter(|p| p.gpu_model.is_none()).collect();
    assert!(!dark.is_empty());
    for p in dark {
        assert!(close(p.figures.unmetered_gpu_hours, p.figures.gpu_hours));
        assert_eq!(p.util_source, "none");
    }
    let sources: HashSet<&str> = t.by_pod.iter().map(|p| p.util_source.as_str()).collect();
    for s in ["sm_active", "gr_engine_active", "gpu_util", "hami", "none"] {
        assert!(sources.contains(s), "no pod with source {s}");
    }
    // Squatters: at least one per 64 GPUs, holding 20–70 GiB while nearly idle.
    let squatters: Vec<_> = t.by_pod.iter().filter(|p| p.squatter).collect();
    assert!(!squatters.is_empty());
    for s in &squatters {
        let fb = s.peak_fb_used_mib.expect("squatter memory visible");
        assert!((20_000.0..=72_000.0).contains(&fb), "{fb}");
        let metered = s.figures.gpu_hours - s.figures.unmetered_gpu_hours;
        assert!(s.figures.effective_gpu_hours <= 0.031 * metered + 1e-9);
    }
    assert!(t.by_pod.iter().any(|p| p.segments >= 2), "no restart");
    assert!(t.by_pod.iter().any(|p| p.continuous_gpu_hours < 1.0 && p.segments == 1), "no short pod");
    assert!(t.by_pod.iter().any(|p| p.kind == "whole" && p.units >= 4), "no multi-card pod");
    assert!(t.by_pod.iter().any(|p| p.kind == "hami" && p.units == 1));
    assert_eq!(t.unknown_resources.len(), 1);
    assert_eq!(t.unknown_resources[0].resource, "example_com_gpu");
    assert!(t.by_pod.iter().all(|p| p.resource != "example_com_gpu"));
    assert!(!t.exporter_gaps.is_empty());
    let nans = r.metrics.lines().filter(|l| l.starts_with("DCGM_FI_PROF_SM_ACTIVE{") && l.contains(" NaN ")).count();
    assert_eq!(nans as u64, t.non_finite_samples);
    assert!(t.non_finite_samples > 0);
    assert_eq!(r.summary.start, end() - chrono::Duration::hours(8));
}

#[test]
fn squatters_scale_with_gpus() {
    let r = sim(128, 1, 300, 5);
    assert!(r.truth.by_pod.iter().filter(|p| p.squatter).count() >= 2);
}

/// SPEC §7's idle rule (utilization over metered time < 10 % with more than 1 GiB of memory) picks exactly the
/// squatters out of every other workload, so an idle list can be checked against them.
#[test]
fn only_squatters_are_idle_by_the_spec_rule() {
    for (gpus, hours, seed) in [(56, 48, 3), (64, 24, 1), (128, 12, 7), (32, 36, 21)] {
        let r = sim(gpus, hours, 60, seed);
        let idle: Vec<(&str, bool)> = r
            .truth
            .by_pod
            .iter()
            .filter(|p| {
                let metered = p.figures.gpu_hours - p.figures.unmetered_gpu_hours;
                metered > 0.0
                    && p.figures.effective_gpu_hours / metered < 0.10
                    && p.peak_fb_used_mib.is_some_and(|fb| fb > 1024.0)
            })
            .map(|p| (p.pod.as_str(), p.squatter))
            .collect();
        let squatters = r.truth.by_pod.iter().filter(|p| p.squatter).count();
        assert!(idle.iter().all(|(_, squatter)| *squatter), "seed {seed}: {idle:?}");
        assert_eq!(idle.len(), squatters, "seed {seed}");
    }
}

/// A parsed series.
struct PSeries {
    name: String,
    labels: BTreeMap<String, String>,
    samples: Vec<(i64, f64)>,
}

impl PSeries {
    fn l(&self, k: &str) -> Option<&str> {
        self.labels.get(k).map(String::as_str)
    }
}

fn parse_labels(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s;
    while !rest.is_empty() {
        let (k, r) = rest.split_once("=\"").expect("label name");
        let mut v = String::new();
        let mut chars = r.char_indices();
        let end = loop {
            let (i, ch) = chars.next().expect("unterminated label value");
            match ch {
                '\\' => v.push(chars.next().unwrap().1),
                '"' => break i,
                c => v.push(c),
            }
        };
        assert!(out.insert(k.to_string(), v).is_none(), "duplicate label {k}");
        rest = r[end + 1..].strip_prefix(',').unwrap_or(&r[end + 1..]);
    }
    out
}

/// Parse the file, asserting it is well-formed for promtool: `# TYPE` once per family, all
/// samples of a family contiguous, each series contiguous with strictly increasing timestamps
/// in seconds with three decimals, `# EOF` last.
fn parse_checked(text: &str) -> Vec<PSeries> {
    let mut families: Vec<String> = Vec::new();
    let mut out: Vec<PSeries> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    let mut last_key = String::new();
    let mut lines = text.lines().peekable();
    let mut eof = false;
    while let Some(line) = lines.next() {
        if line == "# EOF" {
            assert!(lines.peek().is_none(), "content after # EOF");
            eof = true;
            break;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap();
            assert_eq!(ty, "gauge");
            assert!(!families.iter().any(|f| f == name), "family {name} not contiguous");
            families.push(name.to_string());
            continue;
        }
        assert!(!line.starts_with('#'), "unexpected comment {line}");
        let (head, ts) = line.rsplit_once(' ').unwrap();
        let (key, value) = head.rsplit_once(' ').unwrap();
        let (secs, ms) = ts.split_once('.').expect("timestamp with decimals");
        assert_eq!(ms.len(), 3, "millisecond precision: {ts}");
        let t = secs.parse::<i64>().unwrap() * 1000 + ms.parse::<i64>().unwrap();
        let v = if value == "NaN" { f64::NAN } else { value.parse::<f64>().expect(value) };
        if key != last_key {
            assert!(seen.insert(key.to_string()), "series {key} not contiguous");
            let (name, labels) = match key.split_once('{') {
                Some((n, l)) => (n, parse_labels(l.strip_suffix('}').unwrap())),
                None => (key, BTreeMap::new()),
            };
            assert_eq!(Some(name), families.last().map(String::as_str), "sample outside its family");
            out.push(PSeries { name: name.to_string(), labels, samples: Vec::new() });
            last_key = key.to_string();
        }
        let s = out.last_mut().unwrap();
        if let Some(&(prev, _)) = s.samples.last() {
            assert!(t > prev, "timestamps not increasing in {key}");
        }
        s.samples.push((t, v));
    }
    assert!(eof, "missing # EOF");
    out
}

#[test]
fn openmetrics_is_well_formed() {
    let r = sim(56, 2, 30, 9);
    let series = parse_checked(&r.metrics);
    assert_eq!(series.len() as u64, r.summary.series);
    assert_eq!(series.iter().map(|s| s.samples.len() as u64).sum::<u64>(), r.summary.samples);
    let start = r.summary.start.timestamp_millis();
    let step = 30_000;
    for s in &series {
        let dcgm = s.name.starts_with("DCGM_") || s.name.starts_with("hami_");
        for &(t, _) in &s.samples {
            let off = (t - start).rem_euclid(step);
            if dcgm {
                assert!(off > 0 && off < step / 2, "{} offset {off}", s.name);
            } else {
                assert_eq!(off, 0, "{} off the grid", s.name);
            }
        }
        if s.name.starts_with("DCGM_") {
            for l in ["gpu", "UUID", "modelName", "device"] {
                assert!(s.l(l).is_some(), "{} lacks {l}", s.name);
            }
            assert!(s.l("Hostname").is_some() || s.l("hostname").is_some());
            if s.l("GPU_I_ID").is_some() {
                assert_ne!(s.name, "DCGM_FI_DEV_GPU_UTIL", "GPU_UTIL on a MIG instance");
            }
        }
    }
    let fams: HashSet<&str> = series.iter().map(|s| s.name.as_str()).collect();
    for f in [
        "kube_namespace_labels",
        "kube_node_status_capacity",
        "kube_node_status_allocatable",
        "kube_node_spec_unschedulable",
        "kube_pod_container_resource_requests",
        "kube_pod_status_phase",
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "hami_container_device_utilization_ratio",
    ] {
        assert!(fams.contains(f), "missing {f}");
    }
    // At every DCGM timestamp a device emits one series, except time-slicing copies.
    let mut per_instant: HashMap<(String, String, String, i64), usize> = HashMap::new();
    for s in series.iter().filter(|s| s.name.starts_with("DCGM_") && s.l("vgpu").is_none()) {
        let dev = format!("{}/{}", s.l("UUID").unwrap(), s.l("GPU_I_ID").unwrap_or(""));
        let vgpu_card = series.iter().any(|o| o.l("vgpu").is_some() && o.l("UUID") == s.l("UUID"));
        if vgpu_card {
            continue;
        }
        for &(t, _) in &s.samples {
            *per_instant.entry((s.name.clone(), dev.clone(), String::new(), t)).or_default() += 1;
        }
    }
    assert!(per_instant.values().all(|&n| n == 1));
}

/// Figures of one (namespace, pod) from the reference meter, in seconds.
#[derive(Default, Debug)]
struct RefPod {
    gpu: f64,
    eff: f64,
    unm: f64,
    bridged: f64,
    peak_fb: Option<f64>,
}

/// Independent reading of docs/metering.md over the written samples (whole window as one
/// window; the simulator's devices use one source throughout, so per-hour source selection
/// gives the same result). KSM gaps of at most `bridge_ms` a pod was Running across count their
/// missing grid points (the simulated outages keep KSM's phase).
fn reference_meter(
    series: &[PSeries],
    step: i64,
    util_step: i64,
    bridge_ms: i64,
) -> BTreeMap<(String, String), RefPod> {
    let mut running: HashMap<&str, HashSet<i64>> = HashMap::new();
    for s in series.iter().filter(|s| s.name == "kube_pod_status_phase" && s.l("phase") == Some("Running")) {
        let set = running.entry(s.l("uid").unwrap()).or_default();
        set.extend(s.samples.iter().filter(|x| x.1 == 1.0).map(|x| x.0));
    }
    // Physical cards and shared capacity per node.
    let mut uuids: HashMap<&str, HashSet<&str>> = HashMap::new();
    for s in series.iter().filter(|s| s.name.starts_with("DCGM_")) {
        let host = s.l("Hostname").or(s.l("hostname")).unwrap();
        uuids.entry(host).or_default().insert(s.l("UUID").unwrap());
    }
    let mut shared_cap: HashMap<&str, f64> = HashMap::new();
    for s in series.iter().filter(|s| s.name == "kube_node_status_capacity") {
        if s.l("resource") == Some("nvidia_com_gpu_shared") {
            shared_cap.insert(s.l("node").unwrap(), s.samples[0].1);
        }
    }
    // Device samples by workload, and time-slicing copies present per (UUID, grid point).
    // (UUID, GPU_I_ID, vgpu) → metric → grid point → value; keyed by workload (ns, pod, container).
    type DevKey = (String, String, String);
    type Workload = (String, String, String);
    type BySeries<'a> = BTreeMap<DevKey, HashMap<&'a str, HashMap<i64, f64>>>;
    let mut devs: HashMap<Workload, BySeries> = HashMap::new();
    let mut copies: HashMap<(&str, &str, i64), usize> = HashMap::new();
    for s in series.iter().filter(|s| s.name.starts_with("DCGM_") || s.name.starts_with("hami_")) {
        let w = |a: &str, b: &str| s.l(a).or(s.l(b)).map(str::to_string);
        let (ns, pod, ctr) = if s.name.starts_with("hami_") {
            (w("namespace", "podnamespace"), w("pod", "podname"), w("container", "ctrname"))
        } else {
            (w("namespace", "exported_namespace"), w("pod", "exported_pod"), w("container", "exported_container"))
        };
        let (Some(ns), Some(pod), Some(ctr)) = (ns, pod, ctr) else { continue };
        let uuid = s.l("UUID").or(s.l("deviceuuid")).unwrap();
        if let Some(_v) = s.l("vgpu") {
            for &(t, v) in &s.samples {
                if !v.is_nan() {
                    *copies.entry((uuid, s.name.as_str(), t)).or_default() += 1;
                }
            }
        }
        let key = (uuid.to_string(), s.l("GPU_I_ID").unwrap_or("").to_string(), s.l("vgpu").unwrap_or("").to_string());
        let m = devs.entry((ns, pod, ctr)).or_default().entry(key).or_default().entry(s.name.as_str()).or_default();
        for &(t, v) in &s.samples {
            if !v.is_nan() {
                m.insert(t, v);
            }
        }
    }
    // Requests by (uid, container).
    let mut containers: BTreeMap<(&str, &str), Vec<&PSeries>> = BTreeMap::new();
    for s in series.iter().filter(|s| s.name == "kube_pod_container_resource_requests") {
        containers.entry((s.l("uid").unwrap(), s.l("container").unwrap())).or_default().push(s);
    }
    let mut out: BTreeMap<(String, String), RefPod> = BTreeMap::new();
    let step_s = step as f64 / 1000.0;
    for ((uid, ctr), reqs) in containers {
        let first = reqs[0];
        let (ns, pod, node) = (first.l("namespace").unwrap(), first.l("pod").unwrap(), first.l("node").unwrap());
        let res = |r: &str| reqs.iter().find(|s| s.l("resource") == Some(r));
        let (kind, f, qs): (&str, f64, &PSeries) = if let Some(cores) = res("nvidia_com_gpucores") {
            ("hami", cores.samples[0].1 / 100.0, res("nvidia_com_gpu").unwrap())
        } else if let Some(s) = res("nvidia_com_gpu") {
            ("whole", 1.0, *s)
        } else if let Some(s) = res("nvidia_com_gpu_shared") {
            ("timeslice", 1.0 / (shared_cap[node] / uuids[node].len() as f64), *s)
        } else if let Some(s) = reqs.iter().find(|s| s.l("resource").unwrap().starts_with("nvidia_com_mig_")) {
            let g: f64 =
                s.l("resource").unwrap()["nvidia_com_mig_".len()..].split('g').next().unwrap().parse().unwrap();
            ("mig", g / 7.0, *s)
        } else {
            continue;
        };
        let no_devs = BTreeMap::new();
        let my_devs = devs.get(&(ns.to_string(), pod.to_string(), ctr.to_string())).unwrap_or(&no_devs);
        let acc = out.entry((ns.to_string(), pod.to_string())).or_default();
        let runs = |t: i64| running.get(uid).is_some_and(|r| r.contains(&t));
        // (grid point, q, bridged): the samples, then the points missing in a short gap run across
        let mut points: Vec<(i64, f64, bool)> = qs.samples.iter().map(|&(t, q)| (t, q, false)).collect();
        for w in qs.samples.windows(2) {
            let ((a, qa), (b, qb)) = (w[0], w[1]);
            if b - a >= 2 * step && b - a - step <= bridge_ms && runs(a) && runs(b) && qa > 0.0 && qb > 0.0 {
                points.extend((1..(b - a) / step).map(|k| (a + k * step, qa.min(qb), true)));
            }
        }
        for (t, q, bridged) in points {
            if q <= 0.0 || !(bridged || runs(t)) {
                continue;
            }
            let qf = q * f;
            acc.gpu += qf * step_s;
            if bridged {
                acc.bridged += qf * step_s;
            }
            // the intersection rule: each utilization sample covers [ts, ts + util_step) of [t, t + step)
            let (lo, hi) = (t, t + step);
            let mut times: BTreeSet<i64> = BTreeSet::new();
            for metrics in my_devs.values() {
                for m in metrics.values() {
                    times.extend(m.keys().filter(|&&ts| ts < hi && ts + util_step > lo));
                }
            }
            let mut covered = 0;
            for ts in times {
                let (mut u, mut present, mut fb): (f64, bool, Option<f64>) = (0.0, false, None);
                for ((uuid, _, vgpu), metrics) in my_devs {
                    if kind == "hami" {
                        if let Some(v) = metrics.get("hami_container_device_utilization_ratio").and_then(|m| m.get(&ts))
                        {
                            u += v / 100.0;
                            present = true;
                        }
                        continue;
                    }
                    if let Some(v) = metrics.get("DCGM_FI_DEV_FB_USED").and_then(|m| m.get(&ts)) {
                        fb = Some(if kind == "timeslice" { fb.unwrap_or(0.0).max(*v) } else { fb.unwrap_or(0.0) + v });
                    }
                    let src = ["DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"]
                        .into_iter()
                        .find(|m| metrics.get(m).is_some_and(|x| !x.is_empty()));
                    let Some(src) = src else { continue };
                    let Some(&raw) = metrics[src].get(&ts) else { continue };
                    let v = if src == "DCGM_FI_DEV_GPU_UTIL" { raw / 100.0 } else { raw }.clamp(0.0, 1.0);
                    present = true;
                    u += match kind {
                        "mig" => f * v,
                        "timeslice" => {
                            assert!(!vgpu.is_empty());
                            v / copies[&(uuid.as_str(), src, ts)] as f64
                        }
                        _ => v,
                    };
                }
                if !present {
                    continue;
                }
                let ov = hi.min(ts + util_step) - lo.max(ts);
                covered += ov;
                acc.eff += u.min(qf) * ov as f64 / 1000.0;
                if let Some(fb) = fb {
                    acc.peak_fb = Some(acc.peak_fb.map_or(fb, |p: f64| p.max(fb)));
                }
            }
            acc.unm += qf * (step - covered) as f64 / 1000.0;
        }
    }
    out
}

#[test]
fn truth_matches_reference_meter_on_written_samples() {
    for (gpus, hours, step, seed) in [(56, 3, 60, 21), (56, 2, 15, 22)] {
        let r = sim(gpus, hours, step, seed);
        let series = parse_checked(&r.metrics);
        let meter = reference_meter(&series, step as i64 * 1000, step as i64 * 1000, 0);
        let truth: BTreeMap<(String, String), &truth::PodRow> =
            r.truth.by_pod.iter().map(|p| ((p.namespace.clone(), p.pod.clone()), p)).collect();
        for ((ns, pod), m) in &meter {
            let Some(t) = truth.get(&(ns.clone(), pod.clone())) else {
                assert_eq!(m.gpu, 0.0, "{ns}/{pod} metered but not in truth");
                continue;
            };
            let f = Figures {
                gpu_hours: m.gpu / 3600.0,
                effective_gpu_hours: m.eff / 3600.0,
                unmetered_gpu_hours: m.unm / 3600.0,
                ..Figures::default()
            };
            assert_fig(&f, &t.figures, &format!("{ns}/{pod} ({})", t.kind));
            assert_eq!(m.peak_fb, t.peak_fb_used_mib, "{ns}/{pod} peak fb");
        }
        for (k, p) in &truth {
            if p.figures.gpu_hours > 0.0 {
                assert!(meter.contains_key(k), "{k:?} in truth but not metered");
            }
        }
    }
}

#[test]
fn shared_profile_is_deterministic_well_formed_and_covers_its_setups() {
    let run = |seed: u64| {
        let dir = tempfile::tempdir().unwrap();
        let p = SimParams { profile: Profile::Shared, ..params(dir.path(), 72, 6, 60, seed) };
        run(&p).unwrap();
        (
            std::fs::read_to_string(dir.path().join(METRICS_FILE)).unwrap(),
            std::fs::read_to_string(dir.path().join(TRUTH_FILE)).unwrap(),
        )
    };
    let (metrics, truth_raw) = run(3);
    assert_eq!(run(3), (metrics.clone(), truth_raw.clone()), "same seed, same bytes");
    let series = parse_checked(&metrics);
    let truth: Truth = serde_json::from_str(&truth_raw).unwrap();
    assert_eq!(truth.params.profile, "shared");
    // GFD labels, per-pod series with pod_uid beside the device series, copies, HAMi's own series
    let has = |name: &str, label: &str| series.iter().any(|s| s.name == name && s.l(label).is_some());
    assert!(has("kube_node_labels", "label_nvidia_com_gpu_replicas"));
    assert!(has("kube_node_labels", "label_nvidia_com_mig_strategy"));
    assert!(has("DCGM_FI_DEV_GPU_UTIL", "pod_uid"));
    assert!(has("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "vgpu"));
    assert!(has("hami_container_device_utilization_ratio", "deviceuuid"));
    for kind in ["whole", "mig", "timeslice", "mps", "hami"] {
        assert!(truth.by_pod.iter().any(|p| p.kind == kind), "kind {kind}");
    }
    assert!(truth.by_pod.iter().any(|p| p.unverified) && truth.capacity.iter().any(|c| c.unverified));
    assert!(truth.by_pod.iter().any(|p| p.kind == "whole" && p.util_source == "hami"), "HAMi whole-card requests");
    // an exporter before 4.8.2 drops an idle card's series while another card of its node is busy
    let ts4: Vec<&PSeries> = series
        .iter()
        .filter(|s| s.name == "DCGM_FI_DEV_FB_USED" && s.l("Hostname") == Some("gpu-l40s-ts4-00"))
        .collect();
    let plain_samples: usize = ts4.iter().filter(|s| s.l("vgpu").is_none()).map(|s| s.samples.len()).sum();
    assert!(plain_samples > 0 && plain_samples < 8 * 6 * 60, "idle cards' series dropped: {plain_samples}");
}

#[test]
fn ksm_outages_are_written_and_the_truth_bridges_the_short_ones() {
    const HOURS: u32 = 6;
    let r = sim_with(56, HOURS, 60, 31, true);
    let plain = sim(56, HOURS, 60, 31);
    let t = &r.truth;
    assert!(t.params.ksm_gaps);
    // one outage an hour from the second to the fifth: short inside, short across the hour's end, long inside, long
    // across
    let shape: Vec<(bool, usize)> = t.ksm_gaps.iter().map(|g| (g.bridged, g.hours.len())).collect();
    assert_eq!(shape, [(true, 1), (true, 2), (false, 1), (false, 2)], "{:#?}", t.ksm_gaps);
    for g in &t.ksm_gaps {
        assert_eq!(g.bridged, g.missing_s <= 900, "{g:?}");
        assert_eq!(g.anomaly, if g.bridged { "ksm_gap_bridged" } else { "ksm_gap" });
        assert!(g.missing_s + 60 <= 20 * 60, "both sides within cardhour's read margin: {g:?}");
        assert!(g.hours.iter().all(|h| h.pods > 0), "{g:?}");
    }
    // the KSM families miss the outages' scrapes, the exporters do not
    let series = parse_checked(&r.metrics);
    let start = r.summary.start.timestamp_millis();
    let missing: Vec<i64> = r
        .truth
        .ksm_gaps
        .iter()
        .flat_map(|g| {
            let a = DateTime::parse_from_rfc3339(&g.from).unwrap().timestamp_millis();
            (1..=g.missing_scrapes as i64).map(move |k| a + k * 60_000)
        })
        .collect();
    assert!(!missing.is_empty());
    let in_outage =
        |s: &PSeries| s.samples.iter().any(|(t, _)| missing.contains(&(t - (t - start).rem_euclid(60_000))));
    for s in series.iter().filter(|s| s.name.starts_with("kube_")) {
        assert!(!in_outage(s), "{} sampled in an outage", s.name);
    }
    assert!(series.iter().filter(|s| s.name.starts_with("DCGM_")).any(in_outage), "DCGM is scraped on");
    // the same cluster without outages: every pod's GPU-hours are those counted plus those lost
    let p_plain: BTreeMap<(&str, &str), &truth::PodRow> =
        plain.truth.by_pod.iter().map(|p| ((p.namespace.as_str(), p.pod.as_str()), p)).collect();
    assert_eq!(p_plain.len(), t.by_pod.len());
    for p in &t.by_pod {
        let q = p_plain[&(p.namespace.as_str(), p.pod.as_str())];
        let f = &p.figures;
        assert!(close(f.gpu_hours + f.unbilled_gap_gpu_hours, q.figures.gpu_hours), "{}/{}", p.namespace, p.pod);
        assert!(
            f.bridged_gpu_hours <= f.gpu_hours + 1e-12
                && f.effective_gpu_hours <= q.figures.effective_gpu_hours + 1e-12
        );
    }
    let (bridged, unbilled) = (t.totals.bridged_gpu_hours, t.totals.unbilled_gap_gpu_hours);
    assert!(bridged > 0.0 && unbilled > 0.0, "{:?}", t.totals);
    assert!(close(t.totals.gpu_hours + unbilled, plain.truth.totals.gpu_hours));
    let by_gap: (f64, f64) =
        t.ksm_gaps.iter().fold((0.0, 0.0), |a, g| (a.0 + g.bridged_gpu_hours, a.1 + g.unbilled_gap_gpu_hours));
    assert!(close(by_gap.0, bridged) && close(by_gap.1, unbilled), "{by_gap:?} vs {bridged} {unbilled}");
    assert_fig(&sum(t.by_team.iter().map(|x| &x.figures)), &t.totals, "by_team vs totals");
    assert_fig(&sum(t.by_hour_namespace.iter().map(|x| &x.figures)), &t.totals, "by_hour_namespace vs totals");
    let team_bridged: f64 = t.by_team.iter().map(|x| x.figures.bridged_gpu_hours).sum();
    assert!(close(team_bridged, bridged));
    // capacity: the long outages' scrapes are lost, the short ones' bridged
    let lost: u64 = t.ksm_gaps.iter().filter(|g| !g.bridged).map(|g| g.missing_scrapes).sum();
    let cap: f64 = t.capacity.iter().map(|c| c.card_hours).sum();
    assert!(close(cap, 56.0 * (f64::from(HOURS) - lost as f64 / 60.0)), "{cap}");
    // and the written samples, metered independently with the default bridge, agree pod by pod
    let meter = reference_meter(&series, 60_000, 60_000, 15 * 60_000);
    for p in &t.by_pod {
        let m = meter.get(&(p.namespace.clone(), p.pod.clone()));
        let m = m.map_or((0.0, 0.0, 0.0, 0.0), |m| (m.gpu, m.eff, m.unm, m.bridged));
        let f = Figures {
            gpu_hours: m.0 / 3600.0,
            effective_gpu_hours: m.1 / 3600.0,
            unmetered_gpu_hours: m.2 / 3600.0,
            ..Figures::default()
        };
        assert_fig(&f, &p.figures, &format!("{}/{}", p.namespace, p.pod));
        assert!(close(m.3 / 3600.0, p.figures.bridged_gpu_hours), "{}/{} bridged", p.namespace, p.pod);
    }
}

#[test]
fn exactness_profile_scrapes_the_exporters_on_their_own_grid_and_its_truth_holds() {
    let dir = tempfile::tempdir().unwrap();
    let p = SimParams { profile: Profile::Exactness, ksm_gaps: true, ..params(dir.path(), 152, 4, 30, 34) };
    run(&p).unwrap();
    let metrics = std::fs::read_to_string(dir.path().join(METRICS_FILE)).unwrap();
    let truth: Truth = serde_json::from_str(&std::fs::read_to_string(dir.path().join(TRUTH_FILE)).unwrap()).unwrap();
    assert_eq!((truth.params.profile.as_str(), truth.params.util_interval_s), ("exactness", 45));
    let series = parse_checked(&metrics);
    // every one of the 19 node types, once
    let types: BTreeSet<&str> = truth.nodes.iter().map(|n| n.node_type.as_str()).collect();
    assert_eq!(types.len(), 19, "{types:?}");
    // KSM every 30 s, the exporters every 45 s
    let spacing = |name: &str| {
        let s = series.iter().filter(|s| s.name == name).max_by_key(|s| s.samples.len()).unwrap();
        s.samples[1].0 - s.samples[0].0
    };
    assert_eq!(spacing("kube_node_status_capacity"), 30_000);
    assert_eq!(spacing("DCGM_FI_DEV_FB_USED"), 45_000);
    assert_eq!(spacing("hami_container_device_utilization_ratio"), 45_000);
    // MIG mixed on an A30: slices of 4, and whole cards beside them
    let a30: Vec<&truth::PodRow> = truth.by_pod.iter().filter(|p| p.node.contains("a30-mig-")).collect();
    assert!(a30.iter().any(|p| p.kind == "mig" && [0.25, 0.5, 1.0].contains(&p.fraction)));
    assert!(a30.iter().any(|p| p.kind == "whole" && p.fraction == 1.0));
    assert!(a30.iter().any(|p| p.resource == "nvidia_com_mig_1g_6gb"));
    // pods shorter than an interval, and the KSM outages
    assert!(
        truth
            .by_pod
            .iter()
            .any(|p| p.continuous_gpu_hours > 0.0
                && p.continuous_gpu_hours * 3600.0 < 30.0 * p.units as f64 * p.fraction)
    );
    assert!(!truth.ksm_gaps.is_empty());
    // per pod-hour sums to per pod
    let mut per_pod: BTreeMap<(&str, &str), Figures> = BTreeMap::new();
    for r in &truth.by_pod_hour {
        let e = per_pod.entry((r.namespace.as_str(), r.pod.as_str())).or_default();
        e.gpu_hours += r.figures.gpu_hours;
        e.effective_gpu_hours += r.figures.effective_gpu_hours;
        e.unmetered_gpu_hours += r.figures.unmetered_gpu_hours;
    }
    for p in &truth.by_pod {
        let got = per_pod.get(&(p.namespace.as_str(), p.pod.as_str())).copied().unwrap_or_default();
        assert_fig(&got, &p.figures, &format!("{}/{} by hour", p.namespace, p.pod));
    }
    // the written samples, metered independently on the two grids, agree pod by pod where the reference meter knows
    // the setup (whole cards, MIG of 7 slices, renamed time-slicing copies, HAMi)
    let meter = reference_meter(&series, 30_000, 45_000, 15 * 60_000);
    let known = ["a100", "h100", "l40s", "h100-nodcgm", "a100-mig", "l40s-ts", "a100-hami"];
    let type_of: BTreeMap<&str, &str> = truth.nodes.iter().map(|n| (n.node.as_str(), n.node_type.as_str())).collect();
    let mut checked = 0;
    for p in truth.by_pod.iter().filter(|p| known.contains(&type_of[p.node.as_str()])) {
        let Some(m) = meter.get(&(p.namespace.clone(), p.pod.clone())) else {
            assert_eq!(p.figures.gpu_hours, 0.0, "{}/{} not metered", p.namespace, p.pod);
            continue;
        };
        let f = Figures {
            gpu_hours: m.gpu / 3600.0,
            effective_gpu_hours: m.eff / 3600.0,
            unmetered_gpu_hours: m.unm / 3600.0,
            ..Figures::default()
        };
        assert_fig(&f, &p.figures, &format!("{}/{} on {}", p.namespace, p.pod, p.node));
        checked += 1;
    }
    assert!(checked > 50, "{checked} pods checked");
}

/// (hour, namespace, pod, model, engine) → (input tokens, output tokens, requests).
type ServingTally = BTreeMap<(String, String, String, String, String), (i64, i64, i64)>;

/// The serving families cardhour counts: engine and quantity (0 input, 1 output, 2 requests).
const SERVING_FAMILIES: [(&str, &str, usize); 13] = [
    ("vllm:prompt_tokens_total", "vllm", 0),
    ("vllm:generation_tokens_total", "vllm", 1),
    ("vllm:request_success_total", "vllm", 2),
    ("sglang:prompt_tokens_total", "sglang", 0),
    ("sglang:generation_tokens_total", "sglang", 1),
    ("sglang:num_requests_total", "sglang", 2),
    ("sglang_prompt_tokens_total", "sglang", 0),
    ("sglang_generation_tokens_total", "sglang", 1),
    ("sglang_num_requests_total", "sglang", 2),
    ("tgi_request_input_length_sum", "tgi", 0),
    ("tgi_request_generated_tokens_sum", "tgi", 1),
    ("tgi_request_success", "tgi", 2),
    ("nv_inference_request_success", "triton", 2),
];

/// SPEC §9's counter rule over the written series, independently of the simulator: per series, each sample's
/// increase over the one before (its whole value when lower: a reset) unless they are more than an hour apart; a
/// series' first sample (or one starting anew) counts whole when a uid of its pod has a Running sample within one
/// KSM interval before it with none in the 15 minutes before that, else nothing. A row per hour with a sample.
fn serving_rule_meter(series: &[PSeries], start: i64, step: i64) -> ServingTally {
    const HOUR: i64 = 3_600_000;
    let pod_of = |s: &PSeries| {
        let ns = s.l("exported_namespace").or(s.l("namespace")).unwrap().to_string();
        (ns, s.l("exported_pod").or(s.l("pod")).unwrap().to_string())
    };
    let mut running: HashMap<(String, String), HashMap<&str, Vec<i64>>> = HashMap::new();
    for s in series.iter().filter(|s| s.name == "kube_pod_status_phase" && s.l("phase") == Some("Running")) {
        let times = s.samples.iter().filter(|x| x.1 == 1.0).map(|x| x.0).collect();
        running.entry(pod_of(s)).or_default().insert(s.l("uid").unwrap(), times);
    }
    let mut label_model: HashMap<(String, String), String> = HashMap::new();
    for s in series.iter().filter(|s| s.name == "kube_pod_labels") {
        label_model.insert(pod_of(s), s.l("label_model").unwrap().to_string());
    }
    let became_running = |pod: &(String, String), t: i64| {
        running.get(pod).is_some_and(|uids| {
            uids.values().any(|ts| {
                ts.iter()
                    .filter(|&&tr| t - step <= tr && tr <= t)
                    .any(|&tr| !ts.iter().any(|&x| tr - 15 * 60_000 <= x && x < tr))
            })
        })
    };
    let mut out = ServingTally::new();
    for s in series {
        let Some(&(_, engine, q)) = SERVING_FAMILIES.iter().find(|f| f.0 == s.name) else { continue };
        let pod = pod_of(s);
        let model = s.l("model_name").or(s.l("model")).map(str::to_string).unwrap_or_else(|| label_model[&pod].clone());
        let mut prev: Option<(i64, i64)> = None;
        for &(t, v) in &s.samples {
            assert_eq!(v, v.trunc(), "{} writes integers", s.name);
            let v = v as i64;
            let counted = match prev {
                Some((tp, vp)) if t - tp <= HOUR => Some(if v < vp { v } else { v - vp }),
                _ => became_running(&pod, t).then_some(v),
            };
            prev = Some((t, v));
            let hour = start + (t - start).div_euclid(HOUR) * HOUR;
            let hour =
                DateTime::from_timestamp_millis(hour).unwrap().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let e = out.entry((hour, pod.0.clone(), pod.1.clone(), model.clone(), engine.to_string())).or_default();
            *[&mut e.0, &mut e.1, &mut e.2][q] += counted.unwrap_or(0);
        }
    }
    out
}

fn serving_truth(t: &Truth) -> ServingTally {
    t.serving
        .iter()
        .map(|r| {
            assert_eq!(r.input_tokens.is_none(), r.engine == "triton", "{r:?}");
            assert_eq!(r.output_tokens.is_none(), r.engine == "triton", "{r:?}");
            let key = (r.hour.clone(), r.namespace.clone(), r.pod.clone(), r.model.clone(), r.engine.clone());
            (key, (r.input_tokens.unwrap_or(0), r.output_tokens.unwrap_or(0), r.requests))
        })
        .collect()
}

#[test]
fn serving_truth_follows_the_counter_rule_on_written_samples() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let runs = [
        ("standard", params(&d.join("standard"), 64, 30, 60, 1_425_061_055)),
        ("15 s", params(&d.join("15s"), 56, 5, 15, 22)),
        ("ksm gaps", SimParams { ksm_gaps: true, ..params(&d.join("gaps"), 56, 12, 60, 31) }),
        ("shared", SimParams { profile: Profile::Shared, ..params(&d.join("shared"), 72, 8, 60, 3) }),
    ];
    for (what, p) in runs {
        let summary = run(&p).unwrap();
        let metrics = std::fs::read_to_string(&summary.metrics_path).unwrap();
        let truth: Truth = serde_json::from_str(&std::fs::read_to_string(&summary.truth_path).unwrap()).unwrap();
        let series = parse_checked(&metrics);
        let step = i64::from(p.scrape_interval_s) * 1000;
        let metered = serving_rule_meter(&series, summary.start.timestamp_millis(), step);
        let expected = serving_truth(&truth);
        assert!(!expected.is_empty(), "{what}: no serving rows");
        for (k, v) in &expected {
            assert_eq!(metered.get(k), Some(v), "{what}: {k:?}");
        }
        assert_eq!(metered.len(), expected.len(), "{what}: rows the truth lacks");
        // the pods' totals are their rows' sums
        for pod in &truth.serving_pods {
            let rows = truth.serving.iter().filter(|r| r.namespace == pod.namespace && r.pod == pod.pod);
            let sum = rows.fold((0, 0, 0), |a, r| {
                (a.0 + r.input_tokens.unwrap_or(0), a.1 + r.output_tokens.unwrap_or(0), a.2 + r.requests)
            });
            assert_eq!(sum, (pod.input_tokens.unwrap_or(0), pod.output_tokens.unwrap_or(0), pod.requests), "{what}");
        }
    }
}

#[test]
fn serving_cases_are_all_present_and_written_as_described() {
    let r = sim(64, 30, 60, 1_425_061_055);
    let t = &r.truth;
    let series = parse_checked(&r.metrics);
    let pod_with = |case: &str| {
        t.serving_pods.iter().find(|p| p.cases.iter().any(|c| c == case)).unwrap_or_else(|| panic!("no {case}"))
    };
    for case in [
        "two_models",
        "two_engines",
        "underscore_names",
        "exported_labels",
        "unknown_name",
        "counter_reset",
        "same_name_restart",
        "late_scrape",
        "baseline",
        "idle_hours",
        "silent",
    ] {
        pod_with(case);
    }
    for engine in ["vllm", "sglang", "tgi", "triton"] {
        assert!(t.serving_pods.iter().any(|p| p.engine == engine), "no {engine}");
    }
    // the serving families come after every other one, so the rest of the file is as before them
    let first_serving = series.iter().position(|s| s.l("job") == Some("serving")).unwrap();
    assert!(series[first_serving..].iter().all(|s| s.l("job") == Some("serving") || s.name == "kube_pod_labels"));
    let of = |pod: &str| -> Vec<&PSeries> {
        series
            .iter()
            .filter(|s| s.l("job") == Some("serving") && s.l("exported_pod").or(s.l("pod")) == Some(pod))
            .collect()
    };
    // every series of the reset pod drops at the reset
    let reset = pod_with("counter_reset");
    let at = DateTime::parse_from_rfc3339(&reset.counter_resets[0]).unwrap().timestamp_millis();
    for s in of(&reset.pod) {
        let i = s.samples.iter().position(|x| x.0 == at).unwrap();
        assert!(s.samples[i].1 < s.samples[i - 1].1, "{}: no drop at the reset", s.name);
        assert!(r.summary.start.timestamp_millis() + 3_600_000 <= at);
    }
    // the late-scraped pod: the first sample is a large baseline, after the pod ran for hours
    let late = pod_with("late_scrape");
    let from = DateTime::parse_from_rfc3339(late.scrape_from.as_deref().unwrap()).unwrap().timestamp_millis();
    for s in of(&late.pod) {
        assert_eq!(s.samples[0].0, from);
    }
    assert_eq!(late.baseline_samples, [late.scrape_from.clone().unwrap()]);
    // vLLM's engines and finished reasons, SGLang's underscore names, the scraper's labels beside exported_*
    let two = pod_with("two_engines");
    assert!(of(&two.pod).iter().any(|s| s.l("engine") == Some("1")));
    let reasons: BTreeSet<&str> = series.iter().filter_map(|s| s.l("finished_reason")).collect();
    assert_eq!(reasons, BTreeSet::from(["length", "stop"]));
    assert!(of(&pod_with("underscore_names").pod).iter().all(|s| s.name.starts_with("sglang_")));
    for s in of(&pod_with("exported_labels").pod) {
        assert_eq!((s.l("namespace"), s.l("pod")), (Some("monitoring"), Some("prometheus-adapter-x")));
        assert!(s.l("exported_namespace").is_some() && s.l("exported_container").is_some());
    }
    assert!(of(&pod_with("unknown_name").pod).iter().any(|s| s.name == "vllm:prompt_tokens"));
    assert_eq!(pod_with("two_models").models.len(), 2);
    // TGI's series have no model label: the model is the pod's label
    for s in series.iter().filter(|s| s.name.starts_with("tgi_")) {
        assert!(s.l("model_name").is_none() && s.l("model").is_none());
        let pod = s.l("exported_pod").or(s.l("pod"));
        assert!(
            series.iter().any(|l| l.name == "kube_pod_labels" && l.l("pod") == pod && l.l("label_model").is_some())
        );
    }
    // an idle hour is a row of zeros; a silent pod's rows are all zeros
    let idle = pod_with("idle_hours");
    assert!(t.serving.iter().any(|x| x.pod == idle.pod && x.hour == idle.idle_hours[0] && x.requests == 0));
    let silent = pod_with("silent");
    assert_eq!(silent.requests, 0);
    // a restarted pod's series continue under the same labels, from 0 again
    let restarted = pod_with("same_name_restart");
    assert!(restarted.uids.len() >= 2);
}

/// The quota families, the queue labels and the never-ran pods taken out of a file: what is left is the file as
/// written without them.
fn without_quotas(text: &str) -> String {
    let added = [
        quota::RESOURCE_QUOTA,
        quota::CQ_NOMINAL,
        quota::CQ_BORROWING,
        quota::CQ_LENDING,
        quota::CQ_USAGE,
        quota::LQ_USAGE,
    ];
    let mut family = "";
    let mut kept: Vec<&str> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            family = rest.split_once(' ').unwrap().0;
        }
        let stuck = line.contains("-stuck-") && !line.starts_with('#');
        if added.contains(&family) || line.contains(quota::CQ_LABEL) || stuck {
            continue;
        }
        kept.push(line);
    }
    // the pod labels' header written for the queued pods alone (no serving pods)
    let header = "# TYPE kube_pod_labels gauge";
    let lone = |i: usize| kept[i] == header && !kept.get(i + 1).is_some_and(|n| n.starts_with("kube_pod_labels"));
    let out: Vec<&str> = (0..kept.len()).filter(|&i| !lone(i)).map(|i| kept[i]).collect();
    out.join("\n") + "\n"
}

#[test]
fn quotas_leave_every_other_series_and_truth_figure_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let runs = [
        ("standard", params(&d.join("standard"), 64, 4, 60, 5)),
        ("ksm gaps", SimParams { ksm_gaps: true, ..params(&d.join("gaps"), 56, 6, 60, 31) }),
        ("shared", SimParams { profile: Profile::Shared, ..params(&d.join("shared"), 72, 3, 60, 3) }),
        ("one node, one hour", params(&d.join("one"), 8, 1, 30, 2)),
    ];
    for (what, p) in runs {
        let read = |quotas: bool, sub: &str| {
            let p = SimParams { out: p.out.join(sub), ..p.clone() };
            let summary = run_with(&p, quotas).unwrap();
            let metrics = std::fs::read_to_string(&summary.metrics_path).unwrap();
            let mut truth: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&summary.truth_path).unwrap()).unwrap();
            let added = ["quota", "pending"].map(|k| truth.as_object_mut().unwrap().remove(k).unwrap());
            (summary, metrics, truth, added)
        };
        let (on, on_metrics, on_truth, added) = read(true, "on");
        let (off, off_metrics, off_truth, none) = read(false, "off");
        assert!(none.iter().all(|v| v.as_array().unwrap().is_empty()), "{what}");
        assert!(added.iter().all(|v| !v.as_array().unwrap().is_empty()), "{what}");
        assert!(on_metrics.len() > off_metrics.len() && on.series > off.series, "{what}");
        assert!(without_quotas(&on_metrics) == off_metrics, "{what}: the other series changed");
        assert_eq!(on_truth, off_truth, "{what}: the other truth figures changed");
        assert_eq!(on.pods, off.pods, "{what}: the never-ran pods are not counted");
        parse_checked(&on_metrics);
    }
}

/// `# TYPE` lines per family name.
fn type_lines(text: &str) -> BTreeMap<&str, usize> {
    let mut n = BTreeMap::new();
    for l in text.lines().filter_map(|l| l.strip_prefix("# TYPE ")) {
        *n.entry(l.split_once(' ').unwrap().0).or_default() += 1;
    }
    n
}

/// Per uid, the times its phase series say Pending or Running, and Running alone.
fn phase_times(series: &[PSeries]) -> HashMap<&str, (BTreeSet<i64>, BTreeSet<i64>)> {
    let mut out: HashMap<&str, (BTreeSet<i64>, BTreeSet<i64>)> = HashMap::new();
    for s in series.iter().filter(|s| s.name == "kube_pod_status_phase") {
        let e = out.entry(s.l("uid").unwrap()).or_default();
        let on = s.samples.iter().filter(|x| x.1 == 1.0).map(|x| x.0);
        match s.l("phase") {
            Some("Pending") => e.0.extend(on),
            Some("Running") => {
                let on: Vec<i64> = on.collect();
                e.0.extend(&on);
                e.1.extend(on);
            }
            _ => {}
        }
    }
    out
}

#[test]
fn quota_families_are_written_once_each_with_leaders_followers_and_never_ran_pods() {
    // every family one `# TYPE` in the whole file, also with a single node (few or no serving pods) and shared
    for (gpus, hours, profile) in [(8, 1, Profile::Standard), (16, 2, Profile::Standard), (72, 2, Profile::Shared)] {
        let dir = tempfile::tempdir().unwrap();
        let s = run(&SimParams { profile, ..params(dir.path(), gpus, hours, 60, 4) }).unwrap();
        let text = std::fs::read_to_string(&s.metrics_path).unwrap();
        let types = type_lines(&text);
        assert!(types.values().all(|&n| n == 1), "{types:?}");
        for f in [quota::RESOURCE_QUOTA, quota::CQ_NOMINAL, quota::CQ_USAGE, quota::LQ_USAGE, "kube_pod_labels"] {
            assert!(types.contains_key(f), "{gpus} cards: no {f}");
        }
        parse_checked(&text);
    }

    let r = sim(64, 6, 60, 5);
    let series = parse_checked(&r.metrics);
    let start = r.summary.start.timestamp_millis();
    let mid = start + 3 * 3_600_000;
    let find = |name: &str, labels: &[(&str, &str)]| -> Vec<&PSeries> {
        series.iter().filter(|s| s.name == name && labels.iter().all(|(k, v)| s.l(k) == Some(*v))).collect()
    };
    let one = |name: &str, labels: &[(&str, &str)]| -> &PSeries {
        let found = find(name, labels);
        assert_eq!(found.len(), 1, "{name} {labels:?}");
        found[0]
    };
    let values = |s: &PSeries| {
        let mut v: Vec<f64> = s.samples.iter().map(|x| x.1).collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v
    };
    let rq = |ns: &str, obj: &str, res: &str, ty: &str| {
        one("kube_resourcequota", &[("namespace", ns), ("resourcequota", obj), ("resource", res), ("type", ty)])
    };
    const REQ: &str = "requests.nvidia.com/gpu";
    // vision-dev raised from 4 to 8 at the midpoint hour, over the whole window
    let vd = rq("vision-dev", "gpu", REQ, "hard");
    assert_eq!(vd.samples.len(), 6 * 60);
    assert!(vd.samples.iter().all(|&(t, v)| v == if t < mid { 4.0 } else { 8.0 }));
    assert_eq!(values(rq("recsys", "gpu", REQ, "hard")), [8.0]);
    assert_eq!(values(rq("recsys", "gpu-cap", REQ, "hard")), [12.0]);
    assert_eq!(values(rq("recsys", "gpu", "limits.nvidia.com/gpu", "hard")), [8.0]);
    assert_eq!(values(rq("vision-train", "gpu", REQ, "hard")), [16.0]);
    assert_eq!(values(rq("sandbox", "gpu", REQ, "hard")), [2.0]);
    assert!(find("kube_resourcequota", &[("namespace", "nlp-prod")]).is_empty());

    // `used`: the requests of the namespace's GPU pods Pending or Running, read from the written series
    let phases = phase_times(&series);
    let requests: Vec<&PSeries> = series
        .iter()
        .filter(|s| s.name == "kube_pod_container_resource_requests")
        .filter(|s| {
            !["example_com_gpu", "nvidia_com_gpucores", "nvidia_com_gpumem"].contains(&s.l("resource").unwrap())
        })
        .collect();
    let requested = |ns: &str, t: i64, running: bool| -> f64 {
        requests
            .iter()
            .filter(|s| s.l("namespace") == Some(ns))
            .filter(|s| {
                let p = &phases[s.l("uid").unwrap()];
                if running { p.1.contains(&t) } else { p.0.contains(&t) }
            })
            .filter_map(|s| s.samples.iter().find(|x| x.0 == t).map(|x| x.1))
            .sum()
    };
    for (ns, obj) in [("vision-train", "gpu"), ("vision-dev", "gpu"), ("recsys", "gpu"), ("recsys", "gpu-cap")] {
        let used = rq(ns, obj, REQ, "used");
        assert_eq!(used.samples.len(), 6 * 60);
        for &(t, v) in &used.samples {
            assert_eq!(v, requested(ns, t, false), "{ns}/{obj} used at {t}");
        }
        assert!(used.samples.iter().any(|x| x.1 > 0.0), "{ns}: nothing requested");
    }

    // Kueue: leader and follower, the leader's extra label, no cohort on cq-vision, +Inf limits
    for family in [quota::CQ_NOMINAL, quota::CQ_BORROWING, quota::CQ_LENDING, quota::CQ_USAGE] {
        assert_eq!(find(family, &[]).len(), 4, "{family}");
        for cq in ["cq-nlp", "cq-vision"] {
            let leader = one(family, &[("cluster_queue", cq), ("replica_role", "leader")]);
            let follower = one(family, &[("cluster_queue", cq), ("replica_role", "follower")]);
            assert_eq!(values(follower), [999.0], "{family} {cq}");
            assert_eq!(leader.samples.len(), 6 * 60);
            assert_eq!(leader.l("cohort"), if cq == "cq-nlp" { Some("research") } else { None });
            assert_eq!(leader.l("custom_team"), if cq == "cq-nlp" { Some("nlp") } else { None });
            assert!(follower.l("custom_team").is_none());
            assert_eq!((leader.l("flavor"), leader.l("resource")), (Some("default-flavor"), Some("nvidia.com/gpu")));
        }
    }
    let leader = |family: &str, cq: &str| one(family, &[("cluster_queue", cq), ("replica_role", "leader")]);
    assert_eq!(values(leader(quota::CQ_NOMINAL, "cq-nlp")), [16.0]);
    assert_eq!(values(leader(quota::CQ_NOMINAL, "cq-vision")), [8.0]);
    assert_eq!(values(leader(quota::CQ_BORROWING, "cq-nlp")), [f64::INFINITY]);
    assert_eq!(values(leader(quota::CQ_BORROWING, "cq-vision")), [4.0]);
    assert_eq!(values(leader(quota::CQ_LENDING, "cq-vision")), [f64::INFINITY]);
    assert!(r.metrics.contains(
        "kueue_cluster_queue_borrowing_limit{cohort=\"research\",cluster_queue=\"cq-nlp\",flavor=\"default-flavor\",\
         resource=\"nvidia.com/gpu\",replica_role=\"leader\",custom_team=\"nlp\"} +Inf "
    ));

    // queue labels: the namespaces' pods except the inference servers, while they exist
    let labelled: Vec<&PSeries> = series.iter().filter(|s| s.l(quota::CQ_LABEL).is_some()).collect();
    assert!(labelled.iter().all(|s| s.name == "kube_pod_labels" && s.l("label_model") == Some("")));
    let servers: HashSet<&str> = r.truth.serving_pods.iter().map(|p| p.pod.as_str()).collect();
    for s in &labelled {
        let ns = s.l("namespace").unwrap();
        let cq = if ns == "vision-train" { "cq-vision" } else { "cq-nlp" };
        assert!(["vision-train", "nlp-prod", "nlp-research"].contains(&ns));
        assert_eq!(s.l(quota::CQ_LABEL), Some(cq));
        assert_eq!(s.l(quota::LQ_LABEL), Some(format!("lq-{ns}").as_str()));
        assert!(!servers.contains(s.l("pod").unwrap()), "an inference server queued");
    }
    for p in r.truth.by_pod.iter().filter(|p| p.namespace == "vision-train" || p.namespace == "nlp-research") {
        assert_ne!(p.workload, "inference");
        assert!(labelled.iter().any(|s| s.l("pod") == Some(p.pod.as_str())), "{} unlabelled", p.pod);
    }
    // usage: the requests of the queue's Running labelled pods, read from the written series
    let queued: HashMap<&str, &str> =
        labelled.iter().map(|s| (s.l("uid").unwrap(), s.l(quota::CQ_LABEL).unwrap())).collect();
    let queue_running = |cq: &str, ns: Option<&str>, t: i64| -> f64 {
        requests
            .iter()
            .filter(|s| queued.get(s.l("uid").unwrap()) == Some(&cq) && ns.is_none_or(|n| s.l("namespace") == Some(n)))
            .filter(|s| phases[s.l("uid").unwrap()].1.contains(&t))
            .filter_map(|s| s.samples.iter().find(|x| x.0 == t).map(|x| x.1))
            .sum()
    };
    for cq in ["cq-nlp", "cq-vision"] {
        let usage = leader(quota::CQ_USAGE, cq);
        assert!(usage.samples.iter().all(|&(t, v)| v == queue_running(cq, None, t)), "{cq} usage");
        assert!(usage.samples.iter().any(|x| x.1 > 0.0), "{cq}: nothing running");
    }
    for (ns, cq) in [("nlp-prod", "cq-nlp"), ("nlp-research", "cq-nlp"), ("vision-train", "cq-vision")] {
        let lq = format!("lq-{ns}");
        let usage = one(quota::LQ_USAGE, &[("name", lq.as_str()), ("namespace", ns), ("replica_role", "leader")]);
        assert!(usage.samples.iter().all(|&(t, v)| v == queue_running(cq, Some(ns), t)), "{lq} usage");
    }

    // the never-ran pods: 2 + 64/64, Pending throughout 1 to 6 hours (the window), requesting whole cards, no node
    let stuck: Vec<&&PSeries> = requests.iter().filter(|s| s.l("pod").unwrap().contains("-stuck-")).collect();
    assert_eq!(stuck.len(), 3);
    let stuck_ns: BTreeSet<&str> = stuck.iter().map(|s| s.l("namespace").unwrap()).collect();
    assert!(stuck_ns.contains("nlp-research") && stuck_ns.contains("sandbox"), "{stuck_ns:?}");
    for s in &stuck {
        let uid = s.l("uid").unwrap();
        assert_eq!((s.l("node"), s.l("resource"), s.l("unit")), (Some(""), Some("nvidia_com_gpu"), Some("integer")));
        assert!([1.0, 2.0, 4.0].contains(&s.samples[0].1));
        assert!(s.samples.len() >= 60 && s.samples.len() <= 6 * 60, "{}", s.samples.len());
        let phase = |p: &str| one("kube_pod_status_phase", &[("uid", uid), ("phase", p)]);
        assert!(phase("Pending").samples.iter().all(|x| x.1 == 1.0));
        assert_eq!(phase("Pending").samples.len(), s.samples.len());
        for p in ["Running", "Succeeded", "Failed", "Unknown"] {
            assert!(phase(p).samples.iter().all(|x| x.1 == 0.0), "{p}");
        }
        assert!(!series.iter().any(|d| d.name.starts_with("DCGM_") && d.labels.values().any(|v| v == uid)));
    }
    // at the end of their families: after every pod of the cluster
    let last_of = |name: &str| series.iter().rposition(|s| s.name == name).unwrap();
    let first_stuck =
        |name: &str| series.iter().position(|s| s.name == name && s.l("pod").unwrap().contains("-stuck-")).unwrap();
    assert_eq!(
        first_stuck("kube_pod_container_resource_requests"),
        last_of("kube_pod_container_resource_requests") - 2
    );
    assert_eq!(first_stuck("kube_pod_status_phase"), last_of("kube_pod_status_phase") - 14);
}

fn rfc(t: i64) -> String {
    DateTime::from_timestamp_millis(t).unwrap().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[test]
fn quota_and_pending_truth_add_up_and_follow_the_written_series() {
    const HOURS: usize = 6;
    for (what, r) in
        [("standard", sim(64, HOURS as u32, 60, 5)), ("ksm gaps", sim_with(56, HOURS as u32, 60, 31, true))]
    {
        let t = &r.truth;
        let series = parse_checked(&r.metrics);
        let start = r.summary.start.timestamp_millis();
        // every row splits its use: within + reserved idle = guaranteed, within + borrowed = used
        for q in &t.quota {
            let w = q.used_within_card_seconds;
            assert!((w + q.reserved_idle_card_seconds - q.guaranteed_card_seconds).abs() <= 1e-6, "{what}: {q:?}");
            assert!((w + q.borrowed_card_seconds - q.used_card_seconds).abs() <= 1e-6, "{what}: {q:?}");
            assert!(q.borrowed_card_seconds == 0.0 || q.reserved_idle_card_seconds == 0.0, "{what}: {q:?}");
            assert!(q.borrowed_card_seconds >= 0.0 && q.reserved_idle_card_seconds >= 0.0);
        }
        let scopes: BTreeSet<(&str, &str, &str)> =
            t.quota.iter().map(|q| (q.scope_kind.as_str(), q.scope.as_str(), q.team.as_str())).collect();
        let expected = [
            ("cluster_queue", "cq-nlp", "nlp"),
            ("cluster_queue", "cq-vision", "vision"),
            ("namespace", "recsys", "recsys"),
            ("namespace", "sandbox", "unassigned"),
            ("namespace", "vision-dev", "vision"),
        ];
        assert_eq!(scopes, BTreeSet::from(expected), "{what}");
        assert_eq!(t.quota.len(), HOURS * 5, "{what}");
        // guarantees: the hard quota (the least of a namespace's objects) over the hour's KSM scrapes
        let scrapes: Vec<f64> = (0..HOURS)
            .map(|h| {
                let s = series.iter().find(|s| s.name == "kube_namespace_labels").unwrap();
                let from = start + h as i64 * 3_600_000;
                s.samples.iter().filter(|x| (from..from + 3_600_000).contains(&x.0)).count() as f64
            })
            .collect();
        let row = |scope: &str, h: usize| {
            t.quota.iter().find(|q| q.scope == scope && q.hour == rfc(start + h as i64 * 3_600_000)).unwrap()
        };
        for (h, scrapes) in scrapes.iter().enumerate() {
            let vd = if h < HOURS / 2 { 4.0 } else { 8.0 };
            for (scope, cards) in
                [("vision-dev", vd), ("recsys", 8.0), ("sandbox", 2.0), ("cq-nlp", 16.0), ("cq-vision", 8.0)]
            {
                assert_eq!(row(scope, h).guaranteed_card_seconds, cards * scrapes * 60.0, "{what}: {scope} {h}");
            }
        }
        if what == "standard" {
            let g = |h| row("vision-dev", h).guaranteed_card_seconds;
            assert_eq!(g(HOURS / 2), 2.0 * g(HOURS / 2 - 1), "raised at the midpoint");
            assert_eq!(g(0), 4.0 * 3600.0);
        }
        // use: the truth's own GPU-seconds of the namespace's pods, of the queue's non-inference pods
        for q in &t.quota {
            let used = if q.scope_kind == "namespace" {
                let r = t.by_hour_namespace.iter().find(|r| r.hour == q.hour && r.namespace == q.scope);
                r.map_or(0.0, |r| r.figures.gpu_hours * 3600.0)
            } else {
                let ns: &[&str] = if q.scope == "cq-nlp" { &["nlp-prod", "nlp-research"] } else { &["vision-train"] };
                let queued = |r: &truth::PodHourRow| {
                    ns.contains(&r.namespace.as_str())
                        && t.by_pod
                            .iter()
                            .any(|p| p.namespace == r.namespace && p.pod == r.pod && p.workload != "inference")
                };
                t.by_pod_hour
                    .iter()
                    .filter(|r| r.hour == q.hour && queued(r))
                    .map(|r| r.figures.gpu_hours * 3600.0)
                    .sum()
            };
            assert!(close(used, q.used_card_seconds), "{what}: {q:?} vs {used}");
        }
        assert!(t.quota.iter().any(|q| q.borrowed_card_seconds > 0.0), "{what}: no scope borrows");
        assert!(t.quota.iter().any(|q| q.reserved_idle_card_seconds > 0.0), "{what}: no scope idles");

        // pending: one row per GPU pod object with a sample, following its written phases
        let phases = phase_times(&series);
        // uid → (first, last sample, cards, whether the cards are known from the requests: whole cards, HAMi)
        let mut seen: BTreeMap<&str, (i64, i64, f64, bool)> = BTreeMap::new();
        for s in series.iter().filter(|s| s.name == "kube_pod_container_resource_requests") {
            let res = s.l("resource").unwrap();
            if res == "example_com_gpu" || res == "nvidia_com_gpumem" {
                continue;
            }
            let e = seen.entry(s.l("uid").unwrap()).or_insert((i64::MAX, i64::MIN, 1.0, false));
            e.0 = e.0.min(s.samples[0].0);
            e.1 = e.1.max(s.samples.last().unwrap().0);
            e.2 *= if res == "nvidia_com_gpucores" { s.samples[0].1 / 100.0 } else { s.samples[0].1 };
            e.3 |= res == "nvidia_com_gpu";
        }
        let uids: BTreeSet<&str> = t.pending.iter().map(|p| p.uid.as_str()).collect();
        assert_eq!(uids.len(), t.pending.len(), "{what}: a uid twice");
        assert_eq!(uids, seen.keys().copied().collect(), "{what}");
        for p in &t.pending {
            let (pending, running) = &phases[p.uid.as_str()];
            let running_first = running.first().copied();
            let pending_only: Vec<i64> = pending.iter().copied().filter(|x| !running.contains(x)).collect();
            assert_eq!(p.first_running, running_first.map(rfc), "{what}: {p:?}");
            assert_eq!(p.first_pending, pending_only.first().copied().map(rfc), "{what}: {p:?}");
            assert_eq!(p.last_seen, rfc(seen[p.uid.as_str()].1), "{what}: {p:?}");
            assert_eq!(p.never_ran, p.first_running.is_none());
            assert_eq!(p.team, t.by_namespace.iter().find(|n| n.namespace == p.namespace).unwrap().team);
            // q·f: from the truth's own rows (MIG and time-slicing fractions), else whole cards or HAMi's cores
            let cards = match t.by_pod.iter().find(|b| b.namespace == p.namespace && b.pod == p.pod) {
                Some(b) => b.units as f64 * b.fraction,
                None => match seen[p.uid.as_str()] {
                    (_, _, cards, true) => cards,
                    _ => continue,
                },
            };
            assert!(close(p.pending_card_seconds, cards * pending_only.len() as f64 * 60.0), "{what}: {p:?}");
        }
        let never: Vec<&quota::PendingPodRow> = t.pending.iter().filter(|p| p.pod.contains("-stuck-")).collect();
        assert_eq!(never.len(), 2 + r.truth.params.gpus as usize / 64, "{what}");
        for p in &never {
            assert!(p.never_ran && p.first_running.is_none() && p.first_pending.is_some(), "{p:?}");
            assert!(p.pending_card_seconds >= 3600.0, "{p:?}");
            assert!(!t.by_pod.iter().any(|b| b.pod == p.pod), "a never-ran pod in by_pod");
        }
        assert!(t.pending.iter().any(|p| p.first_pending.is_some() && p.first_running.is_some()), "{what}: no wait");
    }
}
