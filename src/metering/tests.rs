//! Metering against hand-computed figures, and properties that must hold for any input.

use proptest::prelude::*;

use super::*;

const H: i64 = 1_764_547_200_000; // 2025-12-01T00:00:00Z
const DT: i64 = 60_000;

fn key(pod: &str) -> ContainerKey {
    ContainerKey { namespace: "ns".into(), pod: pod.into(), container: "main".into() }
}

fn grid(from_min: i64, to_min: i64, v: f64) -> Vec<Sample> {
    (from_min..to_min).map(|m| Sample::new(H + m * DT, v)).collect()
}

fn request(pod: &str, resource: &str, q: f64, node: &str) -> RequestSeries {
    RequestSeries {
        key: key(pod),
        uid: format!("uid-{pod}"),
        node: node.into(),
        resource: resource.into(),
        samples: grid(0, 60, q),
        edges: Edges::default(),
    }
}

/// Running during minutes [a, b) of the hour, Pending before, Succeeded after.
fn running(pod: &str, a: i64, b: i64) -> RunningSeries {
    let samples = (0..60).map(|m| Sample::new(H + m * DT, if m >= a && m < b { 1.0 } else { 0.0 })).collect();
    RunningSeries { uid: format!("uid-{pod}"), samples, edges: Edges::default() }
}

fn device(pod: Option<&str>, metric: UtilMetric, uuid: &str, host: &str, offset_ms: i64, v: f64) -> DeviceSeries {
    DeviceSeries {
        metric,
        workload: pod.map(key),
        host: Some(host.into()),
        uuid: uuid.into(),
        model: Some("NVIDIA A100-SXM4-80GB".into()),
        mig_profile: None,
        mig_instance: None,
        vgpu: None,
        per_process: false,
        samples: (-5..65).map(|m| Sample::new(H + m * DT + offset_ms, v)).collect(),
    }
}

fn input() -> HourInput {
    HourInput { start_ms: H, end_ms: H + 3_600_000, ..HourInput::default() }
}

fn only_row(out: &HourOutput) -> &UsageRow {
    assert_eq!(out.rows.len(), 1, "{:#?}", out.rows);
    &out.rows[0]
}

fn close(a: f64, b: f64) {
    assert!((a - b).abs() < 1e-6, "{a} != {b}");
}

#[test]
fn whole_cards_count_running_time_and_sum_device_utilization() {
    let mut i = input();
    i.requests.push(request("train", "nvidia_com_gpu", 2.0, "n1"));
    i.running.push(running("train", 10, 40));
    // DCGM scraped 7 s after KSM; SM_ACTIVE beats GR_ENGINE_ACTIVE
    i.devices.push(device(Some("train"), UtilMetric::SmActive, "GPU-a", "n1", 7_000, 0.5));
    i.devices.push(device(Some("train"), UtilMetric::GrEngineActive, "GPU-a", "n1", 7_000, 0.9));
    i.devices.push(device(Some("train"), UtilMetric::GpuUtil, "GPU-b", "n1", 7_000, 25.0));
    let out = meter_hour(&i, &MeterConfig::default());
    let r = only_row(&out);
    assert_eq!(out.interval_ms, Some(DT));
    close(r.gpu_seconds, 2.0 * 30.0 * 60.0);
    close(r.effective_gpu_seconds, (0.5 + 0.25) * 30.0 * 60.0);
    close(r.unmetered_gpu_seconds, 0.0);
    assert_eq!(r.util_source, UtilSource::Mixed);
    assert_eq!(r.kind, "whole");
    assert_eq!(r.gpu_model, "NVIDIA A100-SXM4-80GB");
}

#[test]
fn pending_and_finished_pods_hold_nothing() {
    let mut i = input();
    i.requests.push(request("done", "nvidia_com_gpu", 8.0, "n1"));
    i.running.push(running("done", 0, 0));
    i.requests.push(request("orphan", "nvidia_com_gpu", 8.0, "n1"));
    let out = meter_hour(&i, &MeterConfig { scrape_interval_ms: Some(DT), ..MeterConfig::default() });
    assert!(out.rows.is_empty(), "{:#?}", out.rows);
}

/// Pending during minutes [0, a) of the hour.
fn pending(pod: &str, a: i64) -> RunningSeries {
    let samples = (0..60).map(|m| Sample::new(H + m * DT, if m < a { 1.0 } else { 0.0 })).collect();
    RunningSeries { uid: format!("uid-{pod}"), samples, edges: Edges::default() }
}

/// SPEC §10: a pod waits from its first Pending sample to its first Running one; its Pending card-seconds are its
/// request samples at which it was Pending × q·f × the interval. A pod Running since before the hour (its edge
/// Running) is no start; a pod never Running in the hour has no first Running; a pod without a GPU is no row.
#[test]
fn pending_pods_count_their_wait_in_cards() {
    let mut i = input();
    // waits 20 minutes for 2 MIG 3g slices (3/7 of a card each on an A100)
    i.requests.push(request("w", "nvidia_com_mig_3g_40gb", 2.0, "n1"));
    i.pending.push(pending("w", 20));
    i.running.push(running("w", 20, 60));
    // Pending the whole hour for 4 cards, on no node yet
    i.requests.push(request("stuck", "nvidia_com_gpu", 4.0, ""));
    i.pending.push(pending("stuck", 60));
    // Running since before the hour
    i.requests.push(request("old", "nvidia_com_gpu", 1.0, "n1"));
    let mut old = running("old", 0, 60);
    old.edges.before = Some(Sample::new(H - DT, 1.0));
    i.running.push(old);
    i.pending.push(pending("old", 0));
    // no GPU
    i.requests.push(request("cpu", "cpu", 4.0, "n1"));
    i.pending.push(pending("cpu", 60));
    let mut d = device(Some("w"), UtilMetric::GrEngineActive, "GPU-a", "n1", 0, 0.5);
    d.mig_profile = Some("3g.40gb".into());
    i.devices.push(d);
    let out = meter_hour(&i, &MeterConfig { scrape_interval_ms: Some(DT), ..MeterConfig::default() });
    let by: std::collections::BTreeMap<&str, &PendingRow> = out.pending.iter().map(|p| (p.pod.as_str(), p)).collect();
    assert_eq!(by.keys().copied().collect::<Vec<_>>(), ["stuck", "w"], "{:#?}", out.pending);
    let w = by["w"];
    assert_eq!(
        w.phases,
        PodPhases { first_pending_ms: Some(H), first_running_ms: Some(H + 20 * DT), last_seen_ms: H + 59 * DT }
    );
    close(w.pending_card_seconds, 20.0 * 60.0 * 2.0 * 3.0 / 7.0);
    close(w.cards, 6.0 / 7.0);
    assert_eq!(w.gpu_model, "NVIDIA A100-SXM4-80GB");
    let stuck = by["stuck"];
    assert_eq!((stuck.phases.first_pending_ms, stuck.phases.first_running_ms), (Some(H), None));
    close(stuck.pending_card_seconds, 3600.0 * 4.0);
    assert_eq!(stuck.gpu_model, "unknown");
    // an unbound pod's empty node is no node to report
    assert!(out.anomalies.iter().all(|a| !a.subject.is_empty()), "{:#?}", out.anomalies);
}

#[test]
fn no_utilization_sample_means_unmetered_not_zero() {
    let mut i = input();
    i.requests.push(request("dark", "nvidia_com_gpu", 1.0, "n1"));
    i.running.push(running("dark", 0, 60));
    let mut d = device(Some("dark"), UtilMetric::SmActive, "GPU-a", "n1", 0, 0.8);
    // the exporter is down for minutes 20..30
    d.samples.retain(|s| !(s.t_ms >= H + 20 * DT && s.t_ms < H + 30 * DT));
    i.devices.push(d);
    let r = meter_hour(&i, &MeterConfig::default()).rows.remove(0);
    close(r.gpu_seconds, 3600.0);
    close(r.unmetered_gpu_seconds, 600.0);
    close(r.effective_gpu_seconds, 0.8 * 3000.0);
}

#[test]
fn mig_slices_are_fractions_of_the_model_slices() {
    let mut i = input();
    i.requests.push(request("m", "nvidia_com_mig_3g_40gb", 1.0, "n1"));
    i.running.push(running("m", 0, 60));
    let mut d = device(Some("m"), UtilMetric::GrEngineActive, "GPU-a", "n1", 0, 0.7);
    d.mig_profile = Some("3g.40gb".into());
    d.mig_instance = Some("2".into());
    i.devices.push(d);
    // a 1g instance of someone else on the same card must not be picked up
    let mut other = device(Some("x"), UtilMetric::GrEngineActive, "GPU-a", "n1", 0, 1.0);
    other.mig_profile = Some("1g.10gb".into());
    i.devices.push(other);
    let r = meter_hour(&i, &MeterConfig::default()).rows.remove(0);
    close(r.fraction, 3.0 / 7.0);
    close(r.gpu_seconds, 3.0 / 7.0 * 3600.0);
    close(r.effective_gpu_seconds, 3.0 / 7.0 * 0.7 * 3600.0);
    assert_eq!(r.mig_profile.as_deref(), Some("3g.40gb"));
}

#[test]
fn time_slicing_copies_are_split_not_summed() {
    let mut i = input();
    for p in ["a", "b"] {
        i.requests.push(request(p, "nvidia_com_gpu_shared", 1.0, "ts"));
        i.running.push(running(p, 0, 60));
        let mut d = device(Some(p), UtilMetric::GrEngineActive, "GPU-s", "ts", 0, 0.3);
        d.vgpu = Some(format!("0-{p}"));
        i.devices.push(d);
    }
    // a second card on the node, idle: 2 cards advertising 8 units → 4 replicas
    i.devices.push(device(None, UtilMetric::GrEngineActive, "GPU-t", "ts", 0, 0.0));
    i.capacity.push(CapacitySeries {
        node: "ts".into(),
        resource: "nvidia_com_gpu_shared".into(),
        samples: grid(0, 60, 8.0),
        edges: Edges::default(),
    });
    let out = meter_hour(&i, &MeterConfig::default());
    assert_eq!(out.rows.len(), 2);
    for r in &out.rows {
        close(r.fraction, 0.25);
        close(r.gpu_seconds, 900.0);
        // each copy carries the whole card's 0.3; two pods share it: 0.15 each (under the 0.25 they hold)
        close(r.effective_gpu_seconds, 0.15 * 3600.0);
    }
    assert_eq!(out.capacity.len(), 1);
    close(out.capacity[0].cards, 2.0);
    close(out.capacity[0].card_seconds, 2.0 * 3600.0);
}

#[test]
fn hami_shares_come_from_cores_and_usage_is_clamped() {
    let mut i = input();
    i.requests.push(request("h", "nvidia_com_gpu", 1.0, "hn"));
    i.requests.push(request("h", "nvidia_com_gpucores", 30.0, "hn"));
    i.requests.push(request("h", "nvidia_com_gpumem", 40960.0, "hn"));
    i.running.push(running("h", 0, 30));
    i.hami.push(HamiSeries { workload: key("h"), device: "GPU-h".into(), samples: grid(0, 60, 50.0) });
    i.devices.push(device(None, UtilMetric::GrEngineActive, "GPU-h", "hn", 0, 0.5));
    let out = meter_hour(&i, &MeterConfig::default());
    let r = only_row(&out);
    assert_eq!(r.kind, "hami");
    close(r.fraction, 0.3);
    close(r.gpu_seconds, 0.3 * 1800.0);
    close(r.effective_gpu_seconds, 0.3 * 1800.0);
    assert_eq!(r.util_source, UtilSource::Hami);
    let mem = meter_hour(&i, &MeterConfig { hami_policy: HamiPolicy::Memory, ..MeterConfig::default() });
    close(mem.rows[0].fraction, 0.5);
}

#[test]
fn boundary_samples_belong_to_one_hour_only() {
    let mut i = input();
    i.requests.push(request("p", "nvidia_com_gpu", 1.0, "n1"));
    i.requests[0].samples.push(Sample::new(H + 3_600_000, 1.0));
    i.running.push(running("p", 0, 60));
    i.running[0].samples.push(Sample::new(H + 3_600_000, 1.0));
    let r = meter_hour(&i, &MeterConfig::default()).rows.remove(0);
    close(r.gpu_seconds, 3600.0);
}

#[test]
fn unknown_gpu_resources_are_reported_not_metered() {
    let mut i = input();
    i.requests.push(request("u", "example_com_gpu", 1.0, "n1"));
    i.running.push(running("u", 0, 60));
    let out = meter_hour(&i, &MeterConfig::default());
    assert!(out.rows.is_empty());
    assert_eq!(
        out.anomalies,
        vec![Anomaly { kind: AnomalyKind::UnknownResource, subject: "ns/u/main: example_com_gpu".into(), count: 60 }]
    );
}

#[test]
fn team_label_comes_from_the_latest_namespace_series() {
    let mut i = input();
    i.requests.push(request("p", "nvidia_com_gpu", 1.0, "n1"));
    i.running.push(running("p", 0, 60));
    i.namespaces.push(NamespaceSeries { namespace: "ns".into(), team: Some("old".into()), samples: grid(0, 30, 1.0) });
    i.namespaces.push(NamespaceSeries { namespace: "ns".into(), team: Some("new".into()), samples: grid(30, 60, 1.0) });
    assert_eq!(meter_hour(&i, &MeterConfig::default()).rows[0].label_team.as_deref(), Some("new"));
}

proptest! {
    /// GPU-seconds are exactly q·Δ per running sample, whatever the utilization; effective never exceeds what
    /// is held and metered; the order of series does not matter.
    #[test]
    fn gpu_seconds_are_running_samples_times_interval(
        pods in prop::collection::vec((1u32..=8, 0i64..60, 0i64..60, 0.0f64..=1.0, any::<bool>()), 1..6)
    ) {
        let mut i = input();
        let mut expected = 0.0;
        for (idx, (q, a, len, u, has_dcgm)) in pods.into_iter().enumerate() {
            let pod = format!("p{idx}");
            let b = (a + len).min(60);
            expected += f64::from(q) * (b - a) as f64 * 60.0;
            i.requests.push(request(&pod, "nvidia_com_gpu", f64::from(q), "n1"));
            i.running.push(running(&pod, a, b));
            if has_dcgm {
                i.devices.push(device(Some(&pod), UtilMetric::SmActive, &format!("GPU-{idx}"), "n1", 3_000, u));
            }
        }
        let cfg = MeterConfig { scrape_interval_ms: Some(DT), ..MeterConfig::default() };
        let out = meter_hour(&i, &cfg);
        let total: f64 = out.rows.iter().map(|r| r.gpu_seconds).sum();
        prop_assert!((total - expected).abs() < 1e-6);
        for r in &out.rows {
            prop_assert!(r.effective_gpu_seconds <= r.gpu_seconds - r.unmetered_gpu_seconds + 1e-9);
        }
        i.requests.reverse();
        i.devices.reverse();
        prop_assert_eq!(meter_hour(&i, &cfg), out);
    }
}

fn capacity(node: &str, resource: &str, v: f64) -> CapacitySeries {
    CapacitySeries { node: node.into(), resource: resource.into(), samples: grid(0, 60, v), edges: Default::default() }
}

fn gfd(node: &str, labels: GfdLabels) -> NodeLabelSeries {
    NodeLabelSeries { node: node.into(), gfd: labels, samples: grid(0, 60, 1.0) }
}

#[test]
fn plain_units_above_the_cards_are_replicas_counted_over_the_trailing_day() {
    // 2 cards × 4 replicas advertised as plain nvidia_com_gpu (the device plugin's default names); this hour
    // only card a has series (an exporter before 4.8.2 drops the idle card b), the trailing day saw both
    let mut i = input();
    i.capacity.push(capacity("ts", "nvidia_com_gpu", 8.0));
    i.trailing_devices.push(SeenDevice { host: "ts".into(), uuid: "GPU-b".into() });
    i.requests.push(request("p", "nvidia_com_gpu", 2.0, "ts"));
    i.running.push(running("p", 0, 60));
    let mut copy = |vgpu: &str| {
        let mut d = device(Some("p"), UtilMetric::GrEngineActive, "GPU-a", "ts", 0, 0.6);
        d.vgpu = Some(vgpu.into());
        i.devices.push(d);
    };
    copy("0-0");
    copy("0-1");
    let out = meter_hour(&i, &MeterConfig::default());
    let r = only_row(&out);
    assert_eq!((r.kind, r.fraction), ("timeslice", 0.25));
    close(r.gpu_seconds, 2.0 * 0.25 * 3600.0);
    // two copies, the only ones on the card: the card's 0.6 is the pod's, once
    close(r.effective_gpu_seconds, 0.5 * 3600.0);
    assert_eq!(out.capacity[0].cards, 2.0);
    assert!(out.anomalies.is_empty(), "{:?}", out.anomalies);
    // without the trailing day the hour's one card would double the replicas and halve the share
    i.trailing_devices.clear();
    assert_eq!(meter_hour(&i, &MeterConfig::default()).rows[0].fraction, 0.125);
}

#[test]
fn per_process_series_win_and_the_device_series_is_never_added() {
    let mut i = input();
    i.capacity.push(capacity("n", "nvidia_com_gpu", 10.0));
    i.requests.push(request("p", "nvidia_com_gpu", 2.0, "n"));
    i.running.push(running("p", 0, 60));
    // the card's own series (90 % busy) and the pod's per-process series on each of its two replicas (30 %)
    i.devices.push(device(None, UtilMetric::GrEngineActive, "GPU-a", "n", 0, 0.9));
    for vgpu in ["0-3", "0-4"] {
        let mut d = device(Some("p"), UtilMetric::GpuUtil, "GPU-a", "n", 0, 30.0);
        d.vgpu = Some(vgpu.into());
        d.per_process = true;
        i.devices.push(d);
    }
    let r = meter_hour(&i, &MeterConfig::default()).rows.remove(0);
    assert_eq!((r.kind, r.util_source), ("timeslice", UtilSource::DcgmPod));
    close(r.fraction, 0.1);
    close(r.effective_gpu_seconds, 0.2 * 3600.0); // 0.3 clamped to the 2 × 0.1 it holds
    i.requests[0].samples = grid(0, 60, 4.0);
    close(meter_hour(&i, &MeterConfig::default()).rows[0].effective_gpu_seconds, 0.3 * 3600.0);
}

#[test]
fn mig_single_strategy_by_gfd_alone_and_hami_whole_cards() {
    // an A30 node known only by GFD: 4 cards × two 2g.12gb advertised as 8 nvidia_com_gpu
    let mut i = input();
    i.capacity.push(capacity("mig", "nvidia_com_gpu", 8.0));
    let labels = GfdLabels {
        product: Some("NVIDIA-A30-MIG-2g.12gb".into()),
        count: Some(8),
        mig_strategy: Some("single".into()),
        ..GfdLabels::default()
    };
    i.node_labels.push(gfd("mig", labels));
    i.requests.push(request("m", "nvidia_com_gpu", 1.0, "mig"));
    i.running.push(running("m", 0, 60));
    // a HAMi node (cards × 10): one container asks for cores, one for nvidia_com_gpu alone
    i.capacity.push(capacity("hami", "nvidia_com_gpu", 20.0));
    for g in ["GPU-h0", "GPU-h1"] {
        i.devices.push(device(None, UtilMetric::GrEngineActive, g, "hami", 0, 0.5));
    }
    i.requests.push(request("c", "nvidia_com_gpucores", 30.0, "hami"));
    i.requests.push(request("c", "nvidia_com_gpu", 1.0, "hami"));
    i.running.push(running("c", 0, 60));
    i.requests.push(request("w", "nvidia_com_gpu", 1.0, "hami"));
    i.running.push(running("w", 0, 60));
    i.hami.push(HamiSeries { workload: key("w"), device: "GPU-h1".into(), samples: grid(0, 60, 70.0) });
    let out = meter_hour(&i, &MeterConfig::default());
    let row = |pod: &str| out.rows.iter().find(|r| r.key.pod == pod).unwrap();
    assert_eq!((row("m").kind, row("m").gpu_model.as_str()), ("mig", "NVIDIA A30"));
    assert_eq!((row("m").mig_profile.as_deref(), row("m").fraction), (Some("2g.12gb"), 0.5));
    assert_eq!((row("c").kind, row("c").fraction), ("hami", 0.3));
    assert_eq!((row("w").kind, row("w").fraction, row("w").util_source), ("whole", 1.0, UtilSource::Hami));
    close(row("w").effective_gpu_seconds, 0.7 * 3600.0);
    let cards: Vec<(&str, f64)> = out.capacity.iter().map(|c| (c.node.as_str(), c.cards)).collect();
    assert_eq!(cards, [("hami", 2.0), ("mig", 4.0)]);
    assert!(out.anomalies.is_empty(), "{:?}", out.anomalies);
}

#[test]
fn each_row_carries_the_memory_its_unit_is_promised() {
    let mut i = input();
    // HAMi on two A100-80GB (cards × 10): 20 GiB of 80, half the memory, cores alone (the whole memory, HAMi's
    // default), a whole card
    i.capacity.push(capacity("hami", "nvidia_com_gpu", 20.0));
    for g in ["GPU-h0", "GPU-h1"] {
        i.devices.push(device(None, UtilMetric::GrEngineActive, g, "hami", 0, 0.5));
    }
    for (pod, res) in [
        ("mib", vec![("nvidia_com_gpucores", 30.0), ("nvidia_com_gpumem", 20480.0)]),
        ("pct", vec![("nvidia_com_gpucores", 20.0), ("nvidia_com_gpumem_percentage", 50.0)]),
        ("cores", vec![("nvidia_com_gpucores", 40.0)]),
        ("card", vec![("nvidia_com_gpu", 1.0)]),
        // 0 is HAMi's "no limit": the defaults, a whole card and its whole memory, never a fraction of 0
        ("zero", vec![("nvidia_com_gpu", 1.0), ("nvidia_com_gpucores", 0.0), ("nvidia_com_gpumem", 0.0)]),
    ] {
        for (r, v) in res {
            i.requests.push(request(pod, r, v, "hami"));
        }
        i.running.push(running(pod, 0, 60));
    }
    // HAMi MiB on a node whose model nothing names: unknown, not guessed
    i.requests.push(request("blind", "nvidia_com_gpumem", 8192.0, "dark"));
    i.running.push(running("blind", 0, 60));
    // MPS: one L40S, 4 replicas by GFD; time-slicing renamed: 4 replicas; MIG 3g.40gb on an A100-80GB
    i.capacity.push(capacity("mps", "nvidia_com_gpu", 4.0));
    let labels = GfdLabels {
        product: Some("NVIDIA-L40S".into()),
        count: Some(1),
        replicas: Some(4),
        sharing_strategy: Some("mps".into()),
        ..GfdLabels::default()
    };
    i.node_labels.push(gfd("mps", labels));
    i.requests.push(request("m", "nvidia_com_gpu", 1.0, "mps"));
    i.running.push(running("m", 0, 60));
    i.capacity.push(capacity("ts", "nvidia_com_gpu_shared", 4.0));
    i.devices.push(device(None, UtilMetric::GrEngineActive, "GPU-t", "ts", 0, 0.0));
    i.requests.push(request("t", "nvidia_com_gpu_shared", 2.0, "ts"));
    i.running.push(running("t", 0, 60));
    i.requests.push(request("g", "nvidia_com_mig_3g_40gb", 1.0, "mig"));
    i.running.push(running("g", 0, 60));
    let mut d = device(Some("g"), UtilMetric::GrEngineActive, "GPU-g", "mig", 0, 0.7);
    d.mig_profile = Some("3g.40gb".into());
    i.devices.push(d);
    let out = meter_hour(&i, &MeterConfig::default());
    let row = |pod: &str| out.rows.iter().find(|r| r.key.pod == pod).unwrap_or_else(|| panic!("{pod}"));
    let shares: Vec<(&str, &str, f64, Option<f64>)> = ["mib", "pct", "cores", "card", "zero", "blind", "m", "t", "g"]
        .iter()
        .map(|p| (*p, row(p).kind, row(p).fraction, row(p).memory_share))
        .collect();
    assert_eq!(
        shares,
        [
            ("mib", "hami", 0.3, Some(0.25)),
            ("pct", "hami", 0.2, Some(0.5)),
            ("cores", "hami", 0.4, Some(1.0)),
            ("card", "whole", 1.0, Some(1.0)),
            ("zero", "hami", 1.0, Some(1.0)),
            ("blind", "hami", 1.0, None),
            ("m", "mps", 0.25, Some(0.25)),
            ("t", "timeslice", 0.25, Some(1.0)),
            ("g", "mig", 3.0 / 7.0, Some(0.5)),
        ]
    );
}

#[test]
fn a_node_nothing_counts_is_taken_at_face_value_until_configured() {
    let mut i = input();
    i.capacity.push(capacity("dark", "nvidia_com_gpu", 16.0));
    i.requests.push(request("p", "nvidia_com_gpu", 1.0, "dark"));
    i.running.push(running("p", 0, 60));
    let out = meter_hour(&i, &MeterConfig::default());
    assert_eq!((out.rows[0].kind, out.rows[0].fraction, out.capacity[0].cards), ("whole", 1.0, 16.0));
    let kinds: Vec<AnomalyKind> = out.anomalies.iter().map(|a| a.kind).collect();
    assert_eq!(kinds, [AnomalyKind::UnverifiedNode, AnomalyKind::UnknownGpuModel]);
    let settings = NodeSettings { replicas: Some(4), gpu_model: Some("NVIDIA L40S".into()), ..NodeSettings::default() };
    let cfg = MeterConfig { nodes: [("dark".to_string(), settings)].into(), ..MeterConfig::default() };
    let out = meter_hour(&i, &cfg);
    assert_eq!((out.rows[0].kind, out.rows[0].fraction, out.capacity[0].cards), ("timeslice", 0.25, 4.0));
    assert_eq!(out.rows[0].gpu_model, "NVIDIA L40S");
    assert!(out.anomalies.is_empty(), "{:?}", out.anomalies);
}

proptest! {
    /// Whatever a node advertises and however its cards are known, a pod's GPU-seconds are its units × the
    /// physical share of each, and a node's capacity its physical cards.
    #[test]
    fn replicas_are_advertised_units_over_physical_cards(cards in 1u32..=8, replicas in 1u32..=10, q in 1u32..=3, by_gfd in any::<bool>()) {
        let mut i = input();
        i.capacity.push(capacity("n", "nvidia_com_gpu", f64::from(cards * replicas)));
        if by_gfd {
            i.node_labels.push(gfd("n", GfdLabels { count: Some(cards), ..GfdLabels::default() }));
        } else {
            for c in 0..cards {
                i.trailing_devices.push(SeenDevice { host: "n".into(), uuid: format!("GPU-{c}") });
            }
        }
        i.requests.push(request("p", "nvidia_com_gpu", f64::from(q), "n"));
        i.running.push(running("p", 0, 60));
        let out = meter_hour(&i, &MeterConfig::default());
        let r = &out.rows[0];
        prop_assert!((r.gpu_seconds - f64::from(q) / f64::from(replicas) * 3600.0).abs() < 1e-6);
        prop_assert_eq!(r.kind, if replicas > 1 { "timeslice" } else { "whole" });
        prop_assert_eq!(out.capacity[0].cards, f64::from(cards));
    }
}

#[test]
fn dcgm_is_a_lower_bound_gfd_counts_first_and_a_conflict_is_reported() {
    // 2 cards × 4 replicas by GFD; DCGM saw one card over the day: GFD's count wins
    let mut i = input();
    i.capacity.push(capacity("ts", "nvidia_com_gpu", 8.0));
    i.node_labels.push(gfd("ts", GfdLabels { count: Some(2), replicas: Some(4), ..GfdLabels::default() }));
    i.requests.push(request("p", "nvidia_com_gpu", 1.0, "ts"));
    i.running.push(running("p", 0, 60));
    i.devices.push(device(None, UtilMetric::GrEngineActive, "GPU-a", "ts", 0, 0.6));
    let out = meter_hour(&i, &MeterConfig::default());
    assert_eq!((only_row(&out).kind, only_row(&out).fraction), ("timeslice", 0.25));
    assert!(out.anomalies.is_empty(), "{:?}", out.anomalies);
    let facts = crate::metering::node_facts(&i, &MeterConfig::default());
    assert_eq!(
        (facts[0].cards, facts[0].cards_source, facts[0].strategy),
        (Some(2.0), CardsSource::GfdCount, "time-slicing")
    );
    assert_eq!(facts[0].evidence, "dcgm=1,dcgm_hour=1,gfd_count=2,gfd_replicas=4");
    // DCGM shows three devices: the labels are wrong, the devices real (a lower bound), the conflict reported
    for u in ["GPU-b", "GPU-c"] {
        i.devices.push(device(None, UtilMetric::GrEngineActive, u, "ts", 0, 0.0));
    }
    let out = meter_hour(&i, &MeterConfig::default());
    close(out.rows[0].fraction, 3.0 / 8.0);
    assert_eq!(out.anomalies.iter().map(|a| a.kind).collect::<Vec<_>>(), [AnomalyKind::NodeEvidenceConflict]);
    assert!(crate::metering::node_facts(&i, &MeterConfig::default())[0].conflict);
}

#[test]
fn mig_single_needs_positive_evidence_and_any_mig_request_makes_a_node_mixed() {
    let mut i = input();
    i.capacity.push(capacity("m", "nvidia_com_gpu", 1.0));
    i.requests.push(request("w", "nvidia_com_gpu", 1.0, "m"));
    i.running.push(running("w", 0, 60));
    let mut slice = device(None, UtilMetric::GrEngineActive, "GPU-a", "m", 0, 0.5);
    slice.mig_profile = Some("3g.40gb".into());
    i.devices.push(slice);
    // the one card DCGM shows is partitioned into one profile and nothing says otherwise: single strategy
    assert_eq!(only_row(&meter_hour(&i, &MeterConfig::default())).kind, "mig");
    // a whole card beside it: not every card is partitioned, so not single
    i.devices.push(device(Some("w"), UtilMetric::GrEngineActive, "GPU-b", "m", 0, 0.8));
    let r = meter_hour(&i, &MeterConfig::default()).rows.remove(0);
    assert_eq!((r.kind, r.fraction), ("whole", 1.0));
    // every card partitioned but a pod asks for a MIG resource: mixed, a plain unit is a whole card
    i.devices.pop();
    i.requests.push(request("s", "nvidia_com_mig_3g_40gb", 1.0, "m"));
    let out = meter_hour(&i, &MeterConfig::default());
    let w = out.rows.iter().find(|r| r.key.pod == "w").unwrap();
    assert_eq!((w.kind, w.fraction), ("whole", 1.0));
    assert_eq!(crate::metering::node_facts(&i, &MeterConfig::default())[0].strategy, "mig-mixed");
}
