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
    }
}

/// Running during minutes [a, b) of the hour, Pending before, Succeeded after.
fn running(pod: &str, a: i64, b: i64) -> RunningSeries {
    let samples = (0..60).map(|m| Sample::new(H + m * DT, if m >= a && m < b { 1.0 } else { 0.0 })).collect();
    RunningSeries { uid: format!("uid-{pod}"), samples }
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
