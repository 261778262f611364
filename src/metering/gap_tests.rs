//! KSM scrape gaps against hand-computed figures, and the properties that must hold for any gaps: metering hour by
//! hour equals metering the whole span, and what is bridged is exactly the gaps short enough, never more.

use std::time::Duration;

use proptest::prelude::*;

use super::*;

const H: i64 = 1_764_547_200_000; // 2025-12-01T00:00:00Z
const DT: i64 = 60_000;
const HOUR: i64 = 3_600_000;

fn key(pod: &str) -> ContainerKey {
    ContainerKey { namespace: "ns".into(), pod: pod.into(), container: "main".into() }
}

/// A series' samples at minutes `[from, to)` from `H` (on the grid plus `phase` ms), none at `missing`.
fn minutes(from: i64, to: i64, missing: &[(i64, i64)], v: impl Fn(i64) -> f64) -> Vec<Sample> {
    (from..to)
        .filter(|m| !missing.iter().any(|(a, b)| a <= m && m < b))
        .map(|m| Sample::new(H + m * DT, v(m)))
        .collect()
}

/// The part of a whole-span series an hour `[lo, hi)` gets, with its edges within `margin` (as the ingest splits).
fn cut(all: &[Sample], lo: i64, hi: i64, margin: i64) -> (Vec<Sample>, Edges) {
    let inside: Vec<Sample> = all.iter().filter(|s| s.t_ms >= lo && s.t_ms < hi).copied().collect();
    let before = all.iter().rev().find(|s| s.t_ms < lo && s.t_ms >= lo - margin).copied();
    let after = all.iter().find(|s| s.t_ms >= hi && s.t_ms < hi + margin).copied();
    (inside, Edges { before, after })
}

/// Whole-span series of one cluster: pods (request and phase), nodes' capacity, utilization.
#[derive(Clone, Default)]
struct Span {
    requests: Vec<RequestSeries>,
    running: Vec<RunningSeries>,
    capacity: Vec<CapacitySeries>,
    devices: Vec<DeviceSeries>,
}

impl Span {
    fn pod(&mut self, pod: &str, q: impl Fn(i64) -> f64, run: (i64, i64), span: (i64, i64), missing: &[(i64, i64)]) {
        let uid = format!("uid-{pod}");
        self.requests.push(RequestSeries {
            key: key(pod),
            uid: uid.clone(),
            node: "n1".into(),
            resource: "nvidia_com_gpu".into(),
            samples: minutes(span.0, span.1, missing, q),
            edges: Edges::default(),
        });
        let running = |m: i64| if m >= run.0 && m < run.1 { 1.0 } else { 0.0 };
        self.running.push(RunningSeries {
            uid,
            samples: minutes(span.0, span.1, missing, running),
            edges: Edges::default(),
        });
    }

    fn node(&mut self, cards: f64, span: (i64, i64), missing: &[(i64, i64)]) {
        self.capacity.push(CapacitySeries {
            node: "n1".into(),
            resource: "nvidia_com_gpu".into(),
            samples: minutes(span.0, span.1, missing, |_| cards),
            edges: Edges::default(),
        });
    }

    fn util(&mut self, pod: &str, v: f64, span: (i64, i64)) {
        self.devices.push(DeviceSeries {
            metric: UtilMetric::SmActive,
            workload: Some(key(pod)),
            host: Some("n1".into()),
            uuid: format!("GPU-{pod}"),
            model: Some("NVIDIA A100-SXM4-80GB".into()),
            mig_profile: None,
            mig_instance: None,
            vgpu: None,
            per_process: false,
            samples: (span.0 * 60..span.1 * 60).map(|s| Sample::new(H + s * 1000 + 7_000, v)).step_by(60).collect(),
        });
    }

    /// The input of `[lo, hi)` (ms from `H`) with KSM edges within `margin`.
    fn input(&self, lo: i64, hi: i64, margin: i64) -> HourInput {
        let (lo, hi) = (H + lo, H + hi);
        let mut i = HourInput { start_ms: lo, end_ms: hi, ..HourInput::default() };
        for r in &self.requests {
            let (samples, edges) = cut(&r.samples, lo, hi, margin);
            if !samples.is_empty() {
                i.requests.push(RequestSeries { samples, edges, ..r.clone() });
            }
        }
        for r in &self.running {
            let (samples, edges) = cut(&r.samples, lo, hi, margin);
            if !samples.is_empty() {
                i.running.push(RunningSeries { samples, edges, ..r.clone() });
            }
        }
        for c in &self.capacity {
            let (samples, edges) = cut(&c.samples, lo, hi, margin);
            if !samples.is_empty() {
                i.capacity.push(CapacitySeries { samples, edges, ..c.clone() });
            }
        }
        for d in &self.devices {
            let samples: Vec<Sample> =
                d.samples.iter().filter(|s| s.t_ms >= lo - 300_000 && s.t_ms < hi + 300_000).copied().collect();
            i.devices.push(DeviceSeries { samples, ..d.clone() });
        }
        i
    }
}

fn cfg(bridge_min: u64) -> MeterConfig {
    MeterConfig {
        scrape_interval_ms: Some(DT),
        ksm_gap_bridge: Duration::from_secs(bridge_min * 60),
        ..MeterConfig::default()
    }
}

const MARGIN: i64 = 20 * DT;

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-6, "{a} != {b}");
}

/// The KSM gaps an hour reports.
fn anomalies(out: &HourOutput) -> Vec<(&str, &str, u64)> {
    out.anomalies
        .iter()
        .filter(|a| matches!(a.kind, AnomalyKind::KsmGap | AnomalyKind::KsmGapBridged))
        .map(|a| (a.kind.as_str(), a.subject.as_str(), a.count))
        .collect()
}

#[test]
fn a_short_gap_is_bridged_with_its_utilization_and_reported() {
    // a restart: no KSM sample at minutes 20..30 (the pod's last before at :19, first after at :30)
    let mut s = Span::default();
    s.pod("train", |_| 2.0, (0, 60), (0, 60), &[(20, 30)]);
    s.util("train", 0.5, (0, 60));
    let out = meter_hour(&s.input(0, HOUR, MARGIN), &cfg(15));
    let r = &out.rows[0];
    close(r.gpu_seconds, 2.0 * 3600.0);
    close(r.bridged_gpu_seconds, 2.0 * 600.0);
    // DCGM kept running: the bridged span is measured like any Running time; its first sample, 7 s into the
    // hour, leaves the hour's first 7 s uncovered (the intersection rule, SPEC §3)
    close(r.effective_gpu_seconds, 0.5 * (3600.0 - 7.0));
    close(r.unmetered_gpu_seconds, 2.0 * 7.0);
    assert_eq!(anomalies(&out), [("ksm_gap_bridged", "2025-12-01T00:19:00Z..2025-12-01T00:30:00Z", 1)]);
    // the bridge off: the 10 minutes are lost, and reported as a gap not billed
    let off = meter_hour(&s.input(0, HOUR, MARGIN), &cfg(0));
    close(off.rows[0].gpu_seconds, 2.0 * 3000.0);
    close(off.rows[0].bridged_gpu_seconds, 0.0);
    assert_eq!(anomalies(&off), [("ksm_gap", "2025-12-01T00:19:00Z..2025-12-01T00:30:00Z", 1)]);
    // without DCGM in the span the bridged time is unmetered, not 0 % or 100 %
    s.devices[0].samples.retain(|x| x.t_ms < H + 20 * DT || x.t_ms >= H + 30 * DT);
    let dark = meter_hour(&s.input(0, HOUR, MARGIN), &cfg(15));
    close(dark.rows[0].unmetered_gpu_seconds, 2.0 * (600.0 + 7.0));
    close(dark.rows[0].effective_gpu_seconds, 0.5 * (3000.0 - 7.0));
}

#[test]
fn a_gap_longer_than_the_bridge_bills_nothing_inside_it() {
    let mut s = Span::default();
    s.pod("p", |_| 1.0, (0, 60), (0, 60), &[(10, 30)]);
    let out = meter_hour(&s.input(0, HOUR, MARGIN), &cfg(15));
    close(out.rows[0].gpu_seconds, 40.0 * 60.0);
    close(out.rows[0].bridged_gpu_seconds, 0.0);
    assert_eq!(anomalies(&out), [("ksm_gap", "2025-12-01T00:09:00Z..2025-12-01T00:30:00Z", 1)]);
    // exactly the bridge span is bridged
    assert_eq!(meter_hour(&s.input(0, HOUR, MARGIN), &cfg(20)).rows[0].bridged_gpu_seconds, 20.0 * 60.0);
}

#[test]
fn a_pod_that_stops_or_starts_running_inside_a_gap_is_not_bridged() {
    let mut s = Span::default();
    // Succeeded at :25 (its series go on), Running from :25 (Pending before)
    s.pod("done", |_| 1.0, (0, 25), (0, 60), &[(20, 30)]);
    s.pod("late", |_| 1.0, (25, 60), (0, 60), &[(20, 30)]);
    let out = meter_hour(&s.input(0, HOUR, MARGIN), &cfg(15));
    let gpu: Vec<f64> = out.rows.iter().map(|r| r.gpu_seconds).collect();
    assert_eq!(gpu, [20.0 * 60.0, 30.0 * 60.0]);
    assert!(out.rows.iter().all(|r| r.bridged_gpu_seconds == 0.0));
    assert!(anomalies(&out).is_empty(), "{:?}", out.anomalies);
}

#[test]
fn a_request_that_differs_across_a_gap_is_bridged_at_the_smaller() {
    let mut s = Span::default();
    s.pod("p", |m| if m < 30 { 4.0 } else { 2.0 }, (0, 60), (0, 60), &[(20, 30)]);
    let r = meter_hour(&s.input(0, HOUR, MARGIN), &cfg(15)).rows.remove(0);
    close(r.bridged_gpu_seconds, 2.0 * 600.0);
    close(r.gpu_seconds, (4.0 * 20.0 + 2.0 * 10.0 + 2.0 * 30.0) * 60.0);
    assert_eq!(r.units, 4.0);
}

#[test]
fn a_gap_across_the_hour_end_is_split_between_the_hours() {
    // minutes 55..65 of two hours missing; a node of 8 cards beside the pod
    let mut s = Span::default();
    s.pod("p", |_| 1.0, (0, 120), (0, 120), &[(55, 65)]);
    s.node(8.0, (0, 120), &[(55, 65)]);
    let a = meter_hour(&s.input(0, HOUR, MARGIN), &cfg(15));
    let b = meter_hour(&s.input(HOUR, 2 * HOUR, MARGIN), &cfg(15));
    for (out, bridged) in [(&a, 5.0 * 60.0), (&b, 5.0 * 60.0)] {
        close(out.rows[0].gpu_seconds, 3600.0);
        close(out.rows[0].bridged_gpu_seconds, bridged);
        close(out.capacity[0].card_seconds, 8.0 * 3600.0);
        assert_eq!(out.capacity[0].offered_card_seconds.to_bits(), out.capacity[0].card_seconds.to_bits());
        assert_eq!(anomalies(out), [("ksm_gap_bridged", "2025-12-01T00:54:00Z..2025-12-01T01:05:00Z", 1)]);
    }
    // an hour that cannot see the far side (no edges): nothing bridged, nothing invented
    let blind = meter_hour(&s.input(0, HOUR, 0), &cfg(15));
    close(blind.rows[0].gpu_seconds, 55.0 * 60.0);
}

#[test]
fn kube_state_metrics_silent_beyond_the_margin_is_reported_open() {
    // KSM dies at :40 and is not back within the margin: the hour reports what it saw
    let mut s = Span::default();
    s.pod("p", |_| 1.0, (0, 180), (0, 180), &[(41, 125)]);
    s.pod("q", |_| 1.0, (0, 30), (0, 180), &[(41, 125)]);
    let out = meter_hour(&s.input(0, HOUR, MARGIN), &cfg(15));
    assert_eq!(anomalies(&out), [("ksm_gap", "2025-12-01T00:40:00Z..", 1)]);
    // and the hour it comes back in, from the other side
    let back = meter_hour(&s.input(2 * HOUR, 3 * HOUR, MARGIN), &cfg(15));
    assert_eq!(anomalies(&back), [("ksm_gap", "..2025-12-01T02:05:00Z", 1)]);
    // an hour wholly inside the outage has nothing to meter
    assert!(meter_hour(&s.input(HOUR, 2 * HOUR, MARGIN), &cfg(15)).rows.is_empty());
    // a span whose data simply starts or ends on the hour reports nothing
    let mut whole = Span::default();
    whole.pod("p", |_| 1.0, (0, 60), (0, 60), &[]);
    assert!(anomalies(&meter_hour(&whole.input(0, HOUR, MARGIN), &cfg(15))).is_empty());
}

#[test]
fn a_configured_interval_shorter_than_the_samples_bridges_nothing() {
    // 60 s samples metered as 30 s ones (a wrong --scrape-interval): every pair of samples is no gap, each
    // sample counts its 30 s as it always did, nothing is reported
    let mut s = Span::default();
    s.pod("p", |_| 1.0, (0, 60), (0, 60), &[(20, 30)]);
    let half = MeterConfig { scrape_interval_ms: Some(DT / 2), ..cfg(15) };
    let out = meter_hour(&s.input(0, HOUR, MARGIN), &half);
    close(out.rows[0].gpu_seconds, 50.0 * 30.0);
    close(out.rows[0].bridged_gpu_seconds, 0.0);
    assert!(anomalies(&out).is_empty(), "{:?}", out.anomalies);
}

#[test]
fn a_phase_shifted_restart_bridges_exactly_the_missing_time() {
    // KSM comes back 25 s off its old phase: 2.5 intervals between the samples around the gap
    let mut s = Span::default();
    s.pod("p", |_| 1.0, (0, 60), (0, 10), &[]);
    let after: Vec<Sample> = (0..48).map(|m| Sample::new(H + 11 * DT + 30_000 + m * DT, 1.0)).collect();
    s.requests[0].samples.extend(&after);
    s.running[0].samples.extend(&after);
    let r = meter_hour(&s.input(0, HOUR, MARGIN), &cfg(15)).rows.remove(0);
    // 10 + 48 samples and the 90 s between :09 and :11:30 no sample covers
    close(r.bridged_gpu_seconds, 90.0);
    close(r.gpu_seconds, 58.0 * 60.0 + 90.0);
}

/// One random cluster-wide outage pattern over three hours.
fn outages() -> impl Strategy<Value = Vec<(i64, i64)>> {
    prop::collection::vec((1i64..170, 1i64..40), 0..5).prop_map(|mut gs| {
        gs.sort_unstable();
        let mut out: Vec<(i64, i64)> = Vec::new();
        for (a, len) in gs {
            let b = (a + len).min(179);
            if out.last().is_none_or(|l| l.1 < a) && a < b {
                out.push((a, b));
            }
        }
        out
    })
}

proptest! {
    /// Metering three hours one by one (each with its edges) gives what metering the three hours as one window
    /// gives: no second counted twice or lost at an hour's edge, for any outages and any bridge span.
    #[test]
    fn hour_by_hour_equals_the_whole_span(
        gaps in outages(),
        pods in prop::collection::vec((1u32..=4, 0i64..180, 1i64..180, 0.0f64..=1.0), 1..5),
        bridge in prop::sample::select(vec![0u64, 5, 15, 30]),
    ) {
        // an hour with no two consecutive scrapes cannot tell its outages from a slower scrape interval (it bridges
        // none, as under a configured interval shorter than the samples' spacing): only whole spans can
        let present = |m: i64| !gaps.iter().any(|(a, b)| *a <= m && m < *b);
        prop_assume!((0..3).all(|h| (h * 60..h * 60 + 59).any(|m| present(m) && present(m + 1))));
        let mut s = Span::default();
        for (i, (q, a, len, u)) in pods.iter().enumerate() {
            let pod = format!("p{i}");
            s.pod(&pod, |_| f64::from(*q), (*a, a + len), (0, 180), &gaps);
            s.util(&pod, *u, (0, 180));
        }
        s.node(8.0, (0, 180), &gaps);
        let margin = cfg(bridge).ksm_gap_bridge_ms() + 5 * DT;
        let whole = meter_hour(&s.input(0, 3 * HOUR, margin), &cfg(bridge));
        let hours: Vec<HourOutput> =
            (0..3).map(|h| meter_hour(&s.input(h * HOUR, (h + 1) * HOUR, margin), &cfg(bridge))).collect();
        let sum = |outs: &[&HourOutput], f: fn(&UsageRow) -> f64| -> f64 {
            outs.iter().flat_map(|o| o.rows.iter()).map(f).sum()
        };
        let parts: Vec<&HourOutput> = hours.iter().collect();
        for f in [
            (|r: &UsageRow| r.gpu_seconds) as fn(&UsageRow) -> f64,
            |r| r.bridged_gpu_seconds,
            |r| r.effective_gpu_seconds,
            |r| r.unmetered_gpu_seconds,
        ] {
            let (a, b) = (sum(&parts, f), sum(&[&whole], f));
            prop_assert!((a - b).abs() < 1e-6, "hours {a} vs span {b}");
        }
        let cap = |outs: &[&HourOutput]| -> f64 { outs.iter().flat_map(|o| &o.capacity).map(|c| c.card_seconds).sum() };
        prop_assert!((cap(&parts) - cap(&[&whole])).abs() < 1e-6);
        // and no hour holds more than the hour: a pod's cards for 3600 s at most
        for (h, out) in hours.iter().enumerate() {
            for r in &out.rows {
                prop_assert!(r.gpu_seconds <= r.units * 3600.0 + 1e-6, "hour {h}: {r:?}");
                prop_assert!(r.effective_gpu_seconds <= r.gpu_seconds - r.unmetered_gpu_seconds + 1e-9);
            }
            for c in &out.capacity {
                prop_assert!(c.card_seconds <= c.cards * 3600.0 + 1e-6);
            }
        }
    }

    /// What is bridged is exactly the missing time of the gaps no longer than the bridge span that a pod was
    /// Running across — never more than a gap, nothing of a longer one — whatever phase KSM comes back with.
    #[test]
    fn bridged_is_exactly_the_short_gaps_a_pod_ran_across(
        gaps in prop::collection::vec((0i64..60_000, 1i64..25), 0..3),
        run in (0i64..40, 20i64..60),
        q in 1u32..=8,
        bridge in prop::sample::select(vec![0u64, 3, 10, 15, 30]),
    ) {
        // a series of one hour from :00 that pauses after each of its first gaps and comes back shifted
        let (mut t, mut samples, mut expect) = (H, Vec::new(), 0.0);
        let running = |t: i64| t >= H + run.0 * DT && t < H + (run.0 + run.1) * DT;
        for (k, (shift, len)) in gaps.iter().enumerate() {
            for _ in 0..(5 + k as i64) {
                if t < H + HOUR {
                    samples.push(t);
                }
                t += DT;
            }
            if t >= H + HOUR {
                break;
            }
            let a = t - DT;
            t = a + (len + 1) * DT + shift;
            let missing = t - a - DT;
            if t < H + HOUR && missing <= bridge as i64 * 60_000 && 2 * missing >= DT && running(a) && running(t) {
                expect += f64::from(q) * missing as f64 / 1000.0;
            }
        }
        while t < H + HOUR {
            samples.push(t);
            t += DT;
        }
        let mut s = Span::default();
        s.pod("p", |_| f64::from(q), (0, 0), (0, 0), &[]);
        s.requests[0].samples = samples.iter().map(|t| Sample::new(*t, f64::from(q))).collect();
        s.running[0].samples = samples.iter().map(|t| Sample::new(*t, if running(*t) { 1.0 } else { 0.0 })).collect();
        let out = meter_hour(&s.input(0, HOUR, MARGIN + 30 * DT), &cfg(bridge));
        let bridged: f64 = out.rows.iter().map(|r| r.bridged_gpu_seconds).sum();
        prop_assert!((bridged - expect).abs() < 1e-6, "bridged {bridged} vs {expect}");
        let counted = samples.iter().filter(|t| running(**t)).count() as f64 * f64::from(q) * 60.0;
        let gpu: f64 = out.rows.iter().map(|r| r.gpu_seconds).sum();
        prop_assert!((gpu - counted - expect).abs() < 1e-6, "gpu {gpu} vs {counted} + {expect}");
    }
}

/// The case the property above found: the last hour is mostly two outages (34 and 23 minutes), with three
/// scrapes in it; the second outage is bridged there as in the whole span, though the hour's median spacing is the
/// outage's.
#[test]
fn an_hour_mostly_in_outages_still_bridges_the_short_one() {
    let gaps = [(120, 154), (155, 178)];
    let mut s = Span::default();
    s.pod("p0", |_| 1.0, (0, 180), (0, 180), &gaps);
    s.util("p0", 0.5, (0, 180));
    s.node(8.0, (0, 180), &gaps);
    let margin = cfg(30).ksm_gap_bridge_ms() + 5 * DT;
    let last = meter_hour(&s.input(2 * HOUR, 3 * HOUR, margin), &cfg(30));
    // 154, 178 and 179 scraped (3 min), 155..178 bridged (23 min), 120..154 (34 min) not (the pod shares the
    // node's one DCGM card: a time-sliced fraction of it)
    let row = &last.rows[0];
    close(row.gpu_seconds, row.units * row.fraction * 26.0 * 60.0);
    close(row.bridged_gpu_seconds, row.units * row.fraction * 23.0 * 60.0);
    close(last.capacity[0].card_seconds, last.capacity[0].cards * 26.0 * 60.0);
}
