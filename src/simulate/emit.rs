//! Writes the simulated cluster as OpenMetrics: kube-state-metrics families on the grid (the never-ran pods of
//! `quota` at the end of the requests and phases), then the DCGM families and HAMi's per-container utilization on
//! the utilization grid at each node's exporter offset, then the ResourceQuotas and Kueue's queues (`quota`), then
//! the serving engines' counters (`serving`), and last `kube_pod_labels`: the serving pods', then the queued pods'.
//!
//! Families are written one after another (each contiguous), and within a family one series at
//! a time in increasing time, which is what `promtool tsdb create-blocks-from openmetrics`
//! needs. Values come from `values`, pure functions of the model, so nothing is buffered.

use std::collections::BTreeMap;
use std::io::{self, Write};

use super::layout::{Exporter, NAMESPACES, NodeType};
use super::model::{Cluster, Emitter, EmitterKind, Grid, Holder, Kind, Node, PHASES, Pod};
use super::om::{OmWriter, ksm_samples};
use super::quota::{self, Plan};
use super::serving::{self, POD_LABELS, Server};
use super::values::{
    DCGM_METRICS, Metric, exclusive_value, hami_percent, per_pod_fb, per_pod_percent, published, shared_value,
};

/// What was written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub series: u64,
    pub samples: u64,
    /// Pod objects (uids) with at least one KSM sample.
    pub pods: u64,
}

/// Name of HAMi's per-container device utilization family.
pub const HAMI_UTIL: &str = "hami_container_device_utilization_ratio";

/// Write all families and `# EOF`; returns the counts and the (flushed) writer. The serving counters and the quota
/// families come after the others, and the never-ran pods after the cluster's pods, so every other series is written
/// as before they existed. The never-ran pods are not counted in `Counts::pods`.
pub fn write_metrics<W: Write>(
    c: &Cluster,
    grid: &Grid,
    servers: &[Server],
    quotas: &Plan,
    out: W,
) -> io::Result<(Counts, W)> {
    let mut w = OmWriter::new(out);
    namespace_labels(&mut w, c, grid)?;
    node_labels(&mut w, c, grid)?;
    node_capacity(&mut w, c, grid)?;
    let pods = requests(&mut w, c, grid)?;
    quota::write_stuck_requests(&mut w, c, grid, quotas)?;
    phases(&mut w, c, grid)?;
    quota::write_stuck_phases(&mut w, c, grid, quotas)?;
    for m in DCGM_METRICS {
        dcgm_family(&mut w, c, m)?;
    }
    hami_family(&mut w, c)?;
    // before the serving counters: from their first series on, a file holds only serving series and pod labels
    quota::write_families(&mut w, c, grid, quotas)?;
    serving::write_families(&mut w, c, grid, servers)?;
    if !servers.is_empty() || quota::has_pod_labels(c, grid, quotas) {
        w.family(POD_LABELS)?;
    }
    serving::write_pod_labels(&mut w, c, grid, servers)?;
    quota::write_pod_labels(&mut w, c, grid, quotas)?;
    let counts = Counts { series: w.series, samples: w.samples, pods };
    let out = w.finish()?;
    Ok((counts, out))
}

/// A KSM series' value at every grid point kube-state-metrics was scraped at.
fn every_grid_point<W: Write>(w: &mut OmWriter<W>, c: &Cluster, grid: &Grid, v: i64) -> io::Result<()> {
    ksm_samples(w, c, grid, 0, grid.len, v)
}

fn namespace_labels<W: Write>(w: &mut OmWriter<W>, c: &Cluster, grid: &Grid) -> io::Result<()> {
    const NAME: &str = "kube_namespace_labels";
    w.family(NAME)?;
    for (ns, team) in NAMESPACES {
        match team {
            Some(t) => w.series(NAME, [("namespace", ns), ("label_team", t)]),
            None => w.series(NAME, [("namespace", ns)]),
        }
        every_grid_point(w, c, grid, 1)?;
    }
    Ok(())
}

/// `kube_node_labels` of the nodes GPU feature discovery labels (none in the standard profile: the family is left
/// out).
fn node_labels<W: Write>(w: &mut OmWriter<W>, c: &Cluster, grid: &Grid) -> io::Result<()> {
    const NAME: &str = "kube_node_labels";
    if c.nodes.iter().all(|n| n.ty.gfd_labels().is_empty()) {
        return Ok(());
    }
    w.family(NAME)?;
    for node in &c.nodes {
        let gfd = node.ty.gfd_labels();
        if gfd.is_empty() {
            continue;
        }
        let mut labels = vec![("node", node.name.as_str())];
        labels.extend(gfd.iter().map(|(k, v)| (*k, v.as_str())));
        w.series(NAME, labels);
        every_grid_point(w, c, grid, 1)?;
    }
    Ok(())
}

/// `kube_node_status_capacity` and `kube_node_status_allocatable` (every card healthy: allocatable = capacity),
/// and `kube_node_spec_unschedulable` (no node cordoned): the simulated cluster offers all its cards.
fn node_capacity<W: Write>(w: &mut OmWriter<W>, c: &Cluster, grid: &Grid) -> io::Result<()> {
    for name in ["kube_node_status_capacity", "kube_node_status_allocatable"] {
        w.family(name)?;
        for node in &c.nodes {
            for &(res, n) in node.ty.capacity() {
                w.series(name, [("node", node.name.as_str()), ("resource", res), ("unit", "integer")]);
                every_grid_point(w, c, grid, n as i64)?;
            }
        }
    }
    const UNSCHEDULABLE: &str = "kube_node_spec_unschedulable";
    w.family(UNSCHEDULABLE)?;
    for node in &c.nodes {
        w.series(UNSCHEDULABLE, [("node", node.name.as_str())]);
        every_grid_point(w, c, grid, 0)?;
    }
    Ok(())
}

/// The `kube_pod_container_resource_requests` series of a pod: (resource, value).
fn requests_of(pod: &Pod) -> Vec<(&'static str, i64)> {
    match pod.kind {
        Kind::Hami => vec![
            ("nvidia_com_gpu", pod.q as i64),
            ("nvidia_com_gpucores", pod.cores as i64),
            ("nvidia_com_gpumem", pod.gpumem_mib as i64),
        ],
        _ => vec![(pod.resource, pod.q as i64)],
    }
}

fn requests<W: Write>(w: &mut OmWriter<W>, c: &Cluster, grid: &Grid) -> io::Result<u64> {
    const NAME: &str = "kube_pod_container_resource_requests";
    w.family(NAME)?;
    let mut visible = 0;
    for (p, pod) in c.pods.iter().enumerate() {
        let (ka, kb) = grid.range(pod.t0, pod.t3, 0);
        if ka >= kb {
            continue;
        }
        if (ka..kb).any(|k| c.ksm_up(k)) {
            visible += 1;
        }
        for (res, q) in requests_of(pod) {
            w.series(
                NAME,
                [
                    ("namespace", NAMESPACES[pod.ns].0),
                    ("pod", c.pod_name(p)),
                    ("uid", pod.uid.as_str()),
                    ("container", pod.container),
                    ("node", c.nodes[pod.node].name.as_str()),
                    ("resource", res),
                    ("unit", "integer"),
                ],
            );
            ksm_samples(w, c, grid, ka, kb, q)?;
        }
    }
    Ok(visible)
}

fn phases<W: Write>(w: &mut OmWriter<W>, c: &Cluster, grid: &Grid) -> io::Result<()> {
    const NAME: &str = "kube_pod_status_phase";
    w.family(NAME)?;
    for (p, pod) in c.pods.iter().enumerate() {
        let (ka, kb) = grid.range(pod.t0, pod.t3, 0);
        if ka >= kb {
            continue;
        }
        // Pending [t0, t1), Running [t1, t2), Succeeded/Failed [t2, t3).
        let k1 = grid.count_before(pod.t1, 0).clamp(ka, kb);
        let k2 = grid.count_before(pod.t2, 0).clamp(k1, kb);
        let ended = if pod.failed { "Failed" } else { "Succeeded" };
        for phase in PHASES {
            w.series(
                NAME,
                [
                    ("namespace", NAMESPACES[pod.ns].0),
                    ("pod", c.pod_name(p)),
                    ("uid", pod.uid.as_str()),
                    ("phase", phase),
                ],
            );
            let runs = [(ka, k1, "Pending"), (k1, k2, "Running"), (k2, kb, ended)];
            for (a, b, cur) in runs {
                ksm_samples(w, c, grid, a, b, (cur == phase) as i64)?;
            }
        }
    }
    Ok(())
}

/// Identity of one series of an emitter within a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    /// No workload labels.
    Plain,
    /// Workload labels of a pod name (restarts with the same name share the series); `lane` is
    /// the time-slicing replica (`vgpu`), 0 elsewhere.
    Held { lane: u8, name_id: usize },
    /// A per-process series of one pod object (its `pod_uid`) on one replica.
    Pod { lane: u8, pod: usize },
}

/// How an emitter's samples split into series.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    /// One series per instant: the holder's labels, or plain when idle.
    Exclusive,
    /// `--kubernetes-virtual-gpus`: a copy per held replica, plain when no replica is held.
    Copies,
    /// Device-level only (HAMi node's DCGM).
    DeviceOnly,
    /// HAMi per-container series.
    HamiPods,
    /// dcgm-exporter ≥ 4.8.2's per-process series, one per pod object and replica.
    PerPod,
}

/// Series of an emitter in `style`, each with the segments it has samples in (in time order).
fn plan(c: &Cluster, e: &Emitter, style: Style) -> BTreeMap<Key, Vec<usize>> {
    let mut m: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    for (i, seg) in e.segs.iter().enumerate() {
        let name = |h: &Holder| c.pods[h.pod].name_id;
        match style {
            Style::DeviceOnly => m.entry(Key::Plain).or_default().push(i),
            Style::Exclusive | Style::Copies if seg.holders.is_empty() => m.entry(Key::Plain).or_default().push(i),
            Style::Exclusive => {
                let h = &seg.holders[0];
                m.entry(Key::Held { lane: 0, name_id: name(h) }).or_default().push(i);
            }
            Style::Copies => {
                for h in &seg.holders {
                    m.entry(Key::Held { lane: h.lane, name_id: name(h) }).or_default().push(i);
                }
            }
            Style::HamiPods => {
                // a container holding every lane of a card (a whole-card request) has one series
                for (j, h) in seg.holders.iter().enumerate() {
                    if seg.holders[..j].iter().all(|o| o.pod != h.pod) {
                        m.entry(Key::Held { lane: 0, name_id: name(h) }).or_default().push(i);
                    }
                }
            }
            Style::PerPod => {
                for h in &seg.holders {
                    m.entry(Key::Pod { lane: h.lane, pod: h.pod }).or_default().push(i);
                }
            }
        }
    }
    m
}

/// The holder a `Held` key refers to in a segment.
fn holder_for<'a>(c: &Cluster, holders: &'a [Holder], key: Key, style: Style) -> Option<&'a Holder> {
    match key {
        Key::Plain => None,
        Key::Pod { lane, pod } => holders.iter().find(|h| h.lane == lane && h.pod == pod),
        Key::Held { lane, name_id } => holders.iter().find(|h| match style {
            Style::Copies => h.lane == lane,
            _ => c.pods[h.pod].name_id == name_id,
        }),
    }
}

/// Labels every DCGM series of an emitter carries.
fn device_labels(node: &Node, e: &Emitter) -> Vec<(&'static str, String)> {
    let mut l = vec![
        ("gpu", e.gpu.to_string()),
        ("UUID", e.uuid.clone()),
        ("device", format!("nvidia{}", e.gpu)),
        ("modelName", node.ty.model().to_string()),
        (node.ty.host_label(), node.name.clone()),
    ];
    if let EmitterKind::MigInstance { profile, gi_id } = e.kind {
        l.push(("GPU_I_PROFILE", profile.name.to_string()));
        l.push(("GPU_I_ID", gi_id.to_string()));
    }
    l
}

fn dcgm_family<W: Write>(w: &mut OmWriter<W>, c: &Cluster, metric: Metric) -> io::Result<()> {
    w.family(metric.name())?;
    for node in &c.nodes {
        let card_mem = node.ty.card_mem_mib();
        for ei in node.emitters.clone() {
            let e = &c.emitters[ei];
            if !published(node.ty, &e.kind).contains(&metric) {
                continue;
            }
            let style = match (e.kind, node.ty.exporter()) {
                (EmitterKind::Whole | EmitterKind::MigInstance { .. }, _) => Style::Exclusive,
                (EmitterKind::TimeSlice, Exporter::Copies | Exporter::CopiesDropIdle) => Style::Copies,
                _ => Style::DeviceOnly,
            };
            let base = device_labels(node, e);
            // before 4.8.2 an idle card has no series while another card of its node is busy
            let drop_idle = node.ty.exporter() == Exporter::CopiesDropIdle;
            let mut series = plan(c, e, style);
            if node.ty.exporter() == Exporter::PerPod && matches!(metric, Metric::GpuUtil | Metric::FbUsed) {
                series.extend(plan(c, e, Style::PerPod));
            }
            for (key, segs) in series {
                let style = if matches!(key, Key::Pod { .. }) { Style::PerPod } else { style };
                let mut labels = base.clone();
                if let Key::Pod { lane, pod } = key {
                    let p = &c.pods[pod];
                    labels.push(("vgpu", format!("{}-{}", e.gpu, lane)));
                    labels.push(("namespace", NAMESPACES[p.ns].0.to_string()));
                    labels.push(("pod", c.pod_name(pod).to_string()));
                    labels.push(("container", p.container.to_string()));
                    labels.push(("pod_uid", p.uid.clone()));
                }
                if let Key::Held { lane, name_id } = key {
                    let h = segs.iter().find_map(|&si| holder_for(c, &e.segs[si].holders, key, style));
                    let pod = &c.pods[h.map_or(0, |h| h.pod)];
                    if style == Style::Copies {
                        labels.push(("vgpu", format!("{}-{}", e.gpu, lane)));
                    }
                    let [ns_l, pod_l, ctr_l] = node.ty.workload_labels();
                    labels.push((ns_l, NAMESPACES[pod.ns].0.to_string()));
                    labels.push((pod_l, c.names[name_id].clone()));
                    labels.push((ctr_l, pod.container.to_string()));
                }
                w.series(metric.name(), labels.iter().map(|(k, v)| (*k, v.as_str())));
                for &si in &segs {
                    let seg = &e.segs[si];
                    let h = holder_for(c, &seg.holders, key, style);
                    for (a, b) in node.up_ranges(seg.ka, seg.kb) {
                        for k in a..b {
                            if drop_idle && key == Key::Plain && node_busy(c, node, k) {
                                continue;
                            }
                            let s = c.util.at(k) + node.offset_ms;
                            let v = match (style, h) {
                                (Style::PerPod, Some(h)) => {
                                    let pod = &c.pods[h.pod];
                                    if metric == Metric::FbUsed {
                                        per_pod_fb(pod, s)
                                    } else {
                                        per_pod_percent(pod, s) as f64
                                    }
                                }
                                (Style::Exclusive, Some(h)) => {
                                    if metric == Metric::SmActive && node.is_nan(ei, k) {
                                        f64::NAN
                                    } else {
                                        exclusive_value(c, h, s, metric)
                                    }
                                }
                                (Style::Exclusive, None) => 0.0,
                                _ => shared_value(c, &seg.holders, s, metric, card_mem),
                            };
                            w.sample_f64(v, s)?;
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// Whether some card of `node` is held at sample `k`.
fn node_busy(c: &Cluster, node: &Node, k: u64) -> bool {
    node.emitters.clone().any(|e| !c.emitters[e].seg_at(k).holders.is_empty())
}

fn hami_family<W: Write>(w: &mut OmWriter<W>, c: &Cluster) -> io::Result<()> {
    w.family(HAMI_UTIL)?;
    for node in c.nodes.iter().filter(|n| matches!(n.ty, NodeType::HamiA100 | NodeType::HamiWholeA100)) {
        for ei in node.emitters.clone() {
            let e = &c.emitters[ei];
            for (key, segs) in plan(c, e, Style::HamiPods) {
                let Key::Held { name_id, .. } = key else { continue };
                let Some(first) = segs.iter().find_map(|&si| holder_for(c, &e.segs[si].holders, key, Style::HamiPods))
                else {
                    continue;
                };
                let pod = &c.pods[first.pod];
                w.series(
                    HAMI_UTIL,
                    [
                        ("namespace", NAMESPACES[pod.ns].0),
                        ("pod", c.names[name_id].as_str()),
                        ("container", pod.container),
                        ("deviceuuid", e.uuid.as_str()),
                    ],
                );
                for &si in &segs {
                    let seg = &e.segs[si];
                    let Some(h) = holder_for(c, &seg.holders, key, Style::HamiPods) else { continue };
                    for k in seg.ka..seg.kb {
                        let s = c.util.at(k) + node.offset_ms;
                        w.sample_int(hami_percent(c, h, s), s)?;
                    }
                }
            }
        }
    }
    Ok(())
}
