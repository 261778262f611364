//! One round of Prometheus queries for a run of hours, normalised from every label variant into metering input.

use std::collections::BTreeMap;

use crate::metering::{
    COUNTER_LOOKBACK_MS, CapacitySeries, ContainerKey, CounterSeries, DeviceSeries, Edges, GfdLabels, HamiSeries,
    HourInput, MeterConfig, NamespaceSeries, NodeLabelSeries, PodModel, PodStart, QueueMember, QuotaScope, QuotaSeries,
    RequestSeries, RunningSeries, SERVING_METRICS_RE, Sample, ScopeKind, SeenDevice, ServingMetric,
    UnknownServingSeries, UnschedulableSeries, UtilMetric, running_starts,
};
use futures_util::TryStreamExt;
use futures_util::stream::FuturesUnordered;

use crate::prom::{PromError, RangeEnds, RawSeries, RetryPolicy, with_retry};

use super::carry::{CarriedDevices, DevicesByHour, TRAILING_HOURS};
use super::source::SampleSource;
use super::window::{HOUR_MS, slice};

/// Utilization series are read this far beyond a window so its edge grid points find their match.
pub const UTIL_MARGIN_MS: i64 = 5 * 60_000;

/// How far beyond a window the KSM series that gaps are bridged on (requests, phases, capacity, allocatable,
/// cordons) are read: the bridge span — at least the default 15 minutes, so gaps are seen whole and reported alike
/// with a shorter bridge or none — and a scrape interval (taken as 5 minutes where it is inferred). Both sides of
/// every gap that may be bridged into an hour are seen, and those of somewhat longer ones, to report them.
pub fn ksm_margin_ms(meter: &MeterConfig) -> i64 {
    let seen = meter.ksm_gap_bridge_ms().max(MeterConfig::default().ksm_gap_bridge_ms());
    seen + meter.scrape_interval_ms.unwrap_or(0).max(UTIL_MARGIN_MS)
}

const DCGM_METRICS: &str =
    "DCGM_FI_PROF_SM_ACTIVE|DCGM_FI_PROF_GR_ENGINE_ACTIVE|DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_FB_USED";
const HAMI_UTIL: &str = "hami_container_device_utilization_ratio";
/// The pod label naming the model a pod serves, as kube-state-metrics exports it (`--metric-labels-allowlist`
/// `pods=[model]`): the model of engines whose series name none (TGI).
const MODEL_POD_LABEL: &str = "label_model";
/// Quota and queue resources read as GPUs, as ResourceQuota (after `requests.`), Kueue and Volcano name them:
/// the raw Kubernetes name (`nvidia.com/gpu`), not kube-state-metrics' sanitised pod-label form.
const GPU_QUOTA_RESOURCES: &str = "(nvidia[.]com|amd[.]com|habana[.]ai)/.+";
/// The pod labels naming a pod's queue, as kube-state-metrics exports them (`--metric-labels-allowlist`):
/// Kueue's ClusterQueue (v0.17+ labels admitted pods) and Volcano's queue.
const KUEUE_QUEUE_LABEL: &str = "label_kueue_x_k8s_io_cluster_queue_name";
const VOLCANO_QUEUE_LABEL: &str = "label_volcano_sh_queue_name";
/// The node resources read as GPU capacity (and allocatable).
const GPU_RESOURCES: &str = r#"resource=~"nvidia_com_.+|amd_com_.+|habana_ai_.+|.*gpu.*""#;

/// What to read and how to read the labels.
#[derive(Debug, Clone)]
pub struct FetchSpec {
    /// Extra label matchers added to every selector, e.g. `cluster="gpu-a"` on a shared Thanos.
    pub matchers: Option<String>,
    /// The namespace label carrying the team, as KSM exports it (`label_team`).
    pub team_label: String,
}

impl FetchSpec {
    fn selector(&self, metric: &str, matchers: &str) -> String {
        let extra = self.matchers.as_deref().filter(|m| !m.trim().is_empty());
        let all: Vec<&str> = [Some(matchers).filter(|m| !m.is_empty()), extra].into_iter().flatten().collect();
        format!("{metric}{{{}}}", all.join(","))
    }
}

/// Labels that name a DCGM series' node and device, in the order they are tried.
const HOST_LABELS: [&str; 4] = ["Hostname", "hostname", "kubernetes_node", "node"];

/// The normalised series of `[start_ms, end_ms)` (utilization with its margin).
#[derive(Debug, Default)]
pub struct Fetched {
    input: HourInput,
    /// DCGM devices seen in each hour of the trailing day before the window, where it was read with the window
    /// ([`Fetched::absorb_seen`]); without it, the hours before the window come from a [`CarriedDevices`] that
    /// reaches the window.
    trailing: Option<DevicesByHour>,
    /// DCGM devices with a NaN or ±Inf sample, at its timestamp: a device whose samples of an hour are all
    /// non-finite was still there (the trailing day's `count_over_time` counts it).
    non_finite_devices: Vec<(SeenDevice, i64)>,
    /// (metric, timestamp) of every NaN/±Inf sample dropped.
    non_finite: Vec<(String, i64)>,
    pub samples_read: u64,
    /// The margin the KSM series were read with ([`ksm_margin_ms`]); each hour keeps their samples within it as
    /// its edges.
    ksm_margin_ms: i64,
    /// A pod Running again after no Running sample for longer than this started anew (the KSM gap bridge).
    start_gap_ms: i64,
    /// Serving counters, the pod starts their first samples are judged by, model pod labels, unknown names.
    counters: Vec<CounterSeries>,
    starts: Vec<PodStart>,
    models: Vec<(PodModel, Vec<Sample>)>,
    unknown: Vec<(String, Vec<i64>)>,
}

/// How many selectors one window reads.
pub const SELECTORS: usize = 17;

/// The selectors one window reads, each with the margins it is read with before and after the window
/// (`ksm_margin_ms` from [`ksm_margin_ms`]).
pub fn selectors(spec: &FetchSpec, ksm_margin_ms: i64) -> [(String, i64, i64); SELECTORS] {
    // Kueue ≥ 0.16 in HA: every replica exports its gauges, followers too (pre-0.16 series lack the label)
    let leader = r#"replica_role!="follower""#;
    let both = |selector: String, margin: i64| (selector, margin, margin);
    [
        both(spec.selector("kube_pod_container_resource_requests", r#"unit="integer""#), ksm_margin_ms),
        both(spec.selector("kube_pod_status_phase", r#"phase="Running""#), ksm_margin_ms),
        both(spec.selector("kube_namespace_labels", ""), 0),
        both(spec.selector("kube_node_status_capacity", GPU_RESOURCES), ksm_margin_ms),
        both(spec.selector("", &format!(r#"__name__=~"{DCGM_METRICS}""#)), UTIL_MARGIN_MS),
        both(spec.selector(HAMI_UTIL, ""), UTIL_MARGIN_MS),
        both(spec.selector("kube_node_status_allocatable", GPU_RESOURCES), ksm_margin_ms),
        both(spec.selector("kube_node_spec_unschedulable", ""), ksm_margin_ms),
        both(spec.selector("kube_node_labels", ""), 0),
        // a counter's increase in an hour needs the sample before the hour's first (SPEC §9)
        (spec.selector("", &format!(r#"__name__=~"{SERVING_METRICS_RE}""#)), COUNTER_LOOKBACK_MS, 0),
        // a pod's model label is looked up up to an hour either side of the hour: a pod that started in a KSM
        // outage serves before KSM sees it
        both(spec.selector("kube_pod_labels", &format!(r#"{MODEL_POD_LABEL}!="""#)), COUNTER_LOOKBACK_MS),
        // quotas and queues (SPEC §10): a pod's wait is read like its Running phase
        both(spec.selector("kube_pod_status_phase", r#"phase="Pending""#), ksm_margin_ms),
        both(
            spec.selector("kube_resourcequota", &format!(r#"type="hard",resource=~"requests[.]{GPU_QUOTA_RESOURCES}""#)),
            0,
        ),
        both(
            spec.selector(
                "",
                &format!(
                    r#"__name__=~"kueue_cluster_queue_nominal_quota|volcano_queue_deserved_scalar_resources",resource=~"{GPU_QUOTA_RESOURCES}",{leader}"#
                ),
            ),
            0,
        ),
        both(spec.selector("kueue_local_queue_resource_usage", leader), 0),
        // a pod's queue is looked up like its model
        both(spec.selector("kube_pod_labels", &format!(r#"{KUEUE_QUEUE_LABEL}!="""#)), COUNTER_LOOKBACK_MS),
        both(spec.selector("kube_pod_labels", &format!(r#"{VOLCANO_QUEUE_LABEL}!="""#)), COUNTER_LOOKBACK_MS),
    ]
}

/// The query giving, at `h + 1 h − 1 ms`, the DCGM devices (node and UUID) with a sample in hour `[h, h + 1 h)`:
/// a range of `3599999ms` where the backend includes both ends (Prometheus 2.x), `3600000ms` where it excludes the
/// left one (Prometheus 3, VictoriaMetrics).
fn seen_devices_query(spec: &FetchSpec, ends: RangeEnds) -> String {
    let labels = [HOST_LABELS.as_slice(), &["UUID", "uuid", "gpu"]].concat().join(",");
    let range = ends.range_ms(HOUR_MS);
    // one metric at a time: a range function drops the name, and series of two metrics would collide
    DCGM_METRICS
        .split('|')
        .map(|m| format!("group by ({labels}) (count_over_time({}[{range}ms]))", spec.selector(m, "")))
        .collect::<Vec<_>>()
        .join(" or ")
}

fn seen_device(s: &RawSeries) -> Option<SeenDevice> {
    let host = s.label_any(&HOST_LABELS)?.to_string();
    let uuid = s
        .label_any(&["UUID", "uuid"])
        .map(str::to_string)
        .unwrap_or_else(|| format!("{host}:{}", s.label("gpu").unwrap_or("")));
    Some(SeenDevice { host, uuid })
}

/// Reads `[start_ms, end_ms)` from `source`: the eleven selectors, concurrently, each retried per `policy`, KSM's
/// with `ksm_margin_ms` either side (pods that became Running judged with `start_gap_ms`); with `trailing`, also the devices seen in each hour of the day before (a
/// window that follows the last one of its ingest takes them from its [`CarriedDevices`] instead).
pub async fn fetch(
    source: &SampleSource,
    spec: &FetchSpec,
    (ksm_margin_ms, start_gap_ms): (i64, i64),
    (start_ms, end_ms): (i64, i64),
    trailing: bool,
    policy: RetryPolicy,
) -> Result<Fetched, PromError> {
    let q = |(selector, before, after): (String, i64, i64)| async move {
        with_retry(policy, "Prometheus read", || source.raw_samples(&selector, start_ms - before, end_ms + after)).await
    };
    // Each answer is normalised as soon as it arrives and its JSON and label maps dropped: peak memory is one
    // window's compact series plus the answers in flight, not all raw answers at once.
    let mut pending: FuturesUnordered<_> = selectors(spec, ksm_margin_ms)
        .into_iter()
        .enumerate()
        .map(|(i, sel)| {
            let answer = q(sel);
            async move { answer.await.map(|series| (i, series)) }
        })
        .collect();
    let seen = async {
        match trailing {
            true => Fetched::trailing_seen(source, spec, start_ms, policy).await.map(Some),
            false => Ok(None),
        }
    };
    let mut out = Fetched { ksm_margin_ms, start_gap_ms, ..Fetched::default() };
    let ((), seen) = futures_util::future::try_join(
        async {
            while let Some((i, series)) = pending.try_next().await? {
                out.absorb(spec, i, series);
            }
            Ok::<(), PromError>(())
        },
        seen,
    )
    .await?;
    if let Some(seen) = seen {
        out.absorb_seen(seen);
    }
    Ok(out)
}

fn workload(s: &RawSeries, ns: &[&str], pod: &[&str], container: &[&str]) -> Option<ContainerKey> {
    Some(ContainerKey {
        namespace: s.label_any(ns)?.to_string(),
        pod: s.label_any(pod)?.to_string(),
        container: s.label_any(container).unwrap_or("").to_string(),
    })
}

/// A guarantee series (a ResourceQuota's `hard`, a ClusterQueue's nominal quota, a Volcano queue's deserved
/// share) in units of its resource, the resource named as pods' requests name it; `None` for other series.
fn quota_series(s: &mut RawSeries) -> Option<QuotaSeries> {
    // kube-state-metrics sanitises a pod's resource names, not a quota's: `requests.nvidia.com/gpu`
    let resource = |raw: &str| raw.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    let (scope, object, resource, milli) = match s.name() {
        "kube_resourcequota" => {
            let raw = s.label("resource")?.strip_prefix("requests.")?;
            let scope = QuotaScope { kind: ScopeKind::Namespace, name: s.label("namespace")?.to_string() };
            (scope, s.label("resourcequota").unwrap_or("").to_string(), resource(raw), false)
        }
        "kueue_cluster_queue_nominal_quota" => {
            let scope = QuotaScope { kind: ScopeKind::ClusterQueue, name: s.label("cluster_queue")?.to_string() };
            (scope, s.label("flavor").unwrap_or("").to_string(), resource(s.label("resource")?), false)
        }
        "volcano_queue_deserved_scalar_resources" => {
            let scope = QuotaScope { kind: ScopeKind::VolcanoQueue, name: s.label("queue_name")?.to_string() };
            (scope, String::new(), resource(s.label("resource")?), true)
        }
        _ => return None,
    };
    let mut samples = std::mem::take(&mut s.samples);
    if milli {
        // Volcano's scalar resources are milli-units: 1 GPU reads 1000
        samples.iter_mut().for_each(|p| p.v /= 1000.0);
    }
    Some(QuotaSeries { scope, object, resource, samples })
}

fn pod_uid(s: &RawSeries) -> String {
    s.label("uid")
        .map(str::to_string)
        .unwrap_or_else(|| format!("{}/{}", s.label("namespace").unwrap_or(""), s.label("pod").unwrap_or("")))
}

impl Fetched {
    /// Normalises the answer to selector number `which` of [`selectors`] (the Prometheus label variants) into
    /// this window's metering input.
    pub fn absorb(&mut self, spec: &FetchSpec, which: usize, answer: Vec<RawSeries>) {
        let (mut requests, mut running, mut namespaces, mut capacity, mut dcgm, mut hami) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut allocatable, mut unschedulable, mut node_labels) = (Vec::new(), Vec::new(), Vec::new());
        let (mut counters, mut pod_labels) = (Vec::new(), Vec::new());
        let (mut pending, mut quotas, mut local_queues, mut members) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        match which {
            0 => requests = answer,
            1 => running = answer,
            2 => namespaces = answer,
            3 => capacity = answer,
            4 => dcgm = answer,
            5 => hami = answer,
            6 => allocatable = answer,
            7 => unschedulable = answer,
            8 => node_labels = answer,
            9 => counters = answer,
            10 => pod_labels = answer,
            11 => pending = answer,
            12 | 13 => quotas = answer,
            14 => local_queues = answer,
            _ => members = answer,
        }
        let mut nan_devices = Vec::new();
        let out = self;
        let mut note = |s: &RawSeries, fallback: &str| {
            out.samples_read += (s.samples.len() + s.non_finite.len()) as u64;
            let name = if s.name().is_empty() { fallback } else { s.name() };
            out.non_finite.extend(s.non_finite.iter().map(|t| (name.to_string(), *t)));
        };
        let input = &mut out.input;
        for s in requests {
            note(&s, "kube_pod_container_resource_requests");
            let (Some(key), Some(resource)) =
                (workload(&s, &["namespace"], &["pod"], &["container"]), s.label("resource"))
            else {
                continue;
            };
            input.requests.push(RequestSeries {
                uid: pod_uid(&s),
                node: s.label("node").unwrap_or("").to_string(),
                resource: resource.to_string(),
                key,
                samples: s.samples,
                edges: Default::default(),
            });
        }
        for s in running {
            note(&s, "kube_pod_status_phase");
            if let (Some(namespace), Some(pod)) = (s.label("namespace"), s.label("pod")) {
                out.starts.extend(running_starts(&s.samples, out.start_gap_ms).into_iter().map(|t_ms| PodStart {
                    namespace: namespace.to_string(),
                    pod: pod.to_string(),
                    t_ms,
                }));
            }
            input.running.push(RunningSeries { uid: pod_uid(&s), samples: s.samples, edges: Default::default() });
        }
        for s in counters {
            note(&s, "serving");
            let Some(metric) = ServingMetric::classify(s.name()) else { continue };
            let ServingMetric::Known(engine, counter) = metric else {
                out.unknown.push((s.name().to_string(), s.samples.iter().map(|p| p.t_ms).collect()));
                continue;
            };
            // without honor_labels the engine's own labels are exported_*, the scraper's are plain
            let Some(key) = workload(&s, &["exported_namespace", "namespace"], &["exported_pod", "pod"], &[]) else {
                continue;
            };
            out.counters.push(CounterSeries {
                namespace: key.namespace,
                pod: key.pod,
                model: s.label_any(&["model_name", "model"]).map(str::to_string),
                engine,
                counter,
                samples: s.samples,
            });
        }
        for s in pending {
            note(&s, "kube_pod_status_phase");
            input.pending.push(RunningSeries { uid: pod_uid(&s), samples: s.samples, edges: Default::default() });
        }
        for mut s in quotas {
            note(&s, "kube_resourcequota");
            let Some(quota) = quota_series(&mut s) else { continue };
            input.quota.guarantees.push(quota);
        }
        for s in local_queues {
            note(&s, "kueue_local_queue_resource_usage");
            let Some(namespace) = s.label("namespace") else { continue };
            input.quota.local_queues.push((namespace.to_string(), s.samples));
        }
        for s in members {
            note(&s, "kube_pod_labels");
            let (Some(namespace), Some(pod)) = (s.label("namespace"), s.label("pod")) else { continue };
            let queue = match (s.label(KUEUE_QUEUE_LABEL), s.label(VOLCANO_QUEUE_LABEL)) {
                (Some(q), _) if !q.is_empty() => QuotaScope { kind: ScopeKind::ClusterQueue, name: q.to_string() },
                (_, Some(q)) if !q.is_empty() => QuotaScope { kind: ScopeKind::VolcanoQueue, name: q.to_string() },
                _ => continue,
            };
            let member = QueueMember { namespace: namespace.to_string(), pod: pod.to_string(), queue };
            input.quota.members.push((member, s.samples));
        }
        for s in pod_labels {
            note(&s, "kube_pod_labels");
            let (Some(namespace), Some(pod), Some(model)) =
                (s.label("namespace"), s.label("pod"), s.label(MODEL_POD_LABEL))
            else {
                continue;
            };
            let model = PodModel { namespace: namespace.to_string(), pod: pod.to_string(), model: model.to_string() };
            out.models.push((model, s.samples));
        }
        let team_label = spec.team_label.as_str();
        for s in namespaces {
            note(&s, "kube_namespace_labels");
            let Some(namespace) = s.label("namespace") else { continue };
            input.namespaces.push(NamespaceSeries {
                namespace: namespace.to_string(),
                team: s.label(team_label).map(str::to_string),
                samples: s.samples,
            });
        }
        for (series, name, into) in [
            (capacity, "kube_node_status_capacity", &mut input.capacity),
            (allocatable, "kube_node_status_allocatable", &mut input.allocatable),
        ] {
            for s in series {
                note(&s, name);
                let (Some(node), Some(resource)) = (s.label("node"), s.label("resource")) else { continue };
                into.push(CapacitySeries {
                    node: node.to_string(),
                    resource: resource.to_string(),
                    samples: s.samples,
                    edges: Default::default(),
                });
            }
        }
        for s in unschedulable {
            note(&s, "kube_node_spec_unschedulable");
            let Some(node) = s.label("node") else { continue };
            input.unschedulable.push(UnschedulableSeries {
                node: node.to_string(),
                samples: s.samples,
                edges: Default::default(),
            });
        }
        for s in node_labels {
            note(&s, "kube_node_labels");
            let Some(node) = s.label("node") else { continue };
            let number = |l: &str| s.label(l).and_then(|v| v.trim().parse::<u32>().ok());
            let gfd = GfdLabels {
                product: s.label("label_nvidia_com_gpu_product").map(str::to_string),
                count: number("label_nvidia_com_gpu_count"),
                replicas: number("label_nvidia_com_gpu_replicas"),
                sharing_strategy: s.label("label_nvidia_com_gpu_sharing_strategy").map(str::to_string),
                mig_strategy: s.label("label_nvidia_com_mig_strategy").map(str::to_string),
            };
            // a node without GPU feature discovery says nothing of its cards
            if !gfd.is_empty() {
                input.node_labels.push(NodeLabelSeries { node: node.to_string(), gfd, samples: s.samples });
            }
        }
        for s in dcgm {
            note(&s, "DCGM");
            let Some(metric) = UtilMetric::from_metric_name(s.name()) else { continue };
            // Without honor_labels Prometheus renames the exporter's own labels to exported_*: those name the workload.
            let workload = workload(
                &s,
                &["exported_namespace", "namespace"],
                &["exported_pod", "pod"],
                &["exported_container", "container"],
            );
            let host = s.label_any(&HOST_LABELS).map(str::to_string);
            let uuid = s
                .label_any(&["UUID", "uuid"])
                .map(str::to_string)
                .unwrap_or_else(|| format!("{}:{}", host.as_deref().unwrap_or(""), s.label("gpu").unwrap_or("")));
            if let Some(host) = host.as_deref() {
                let device = SeenDevice { host: host.to_string(), uuid: uuid.clone() };
                nan_devices.extend(s.non_finite.iter().map(|t| (device.clone(), *t)));
            }
            input.devices.push(DeviceSeries {
                metric,
                workload,
                uuid,
                model: s.label("modelName").map(str::to_string),
                mig_profile: s.label("GPU_I_PROFILE").map(str::to_string),
                mig_instance: s.label("GPU_I_ID").map(str::to_string),
                vgpu: s.label("vgpu").map(str::to_string),
                per_process: s.label("pod_uid").is_some(),
                host,
                samples: s.samples,
            });
        }
        for s in hami {
            note(&s, HAMI_UTIL);
            let Some(workload) =
                workload(&s, &["podnamespace", "namespace"], &["podname", "pod"], &["ctrname", "container"])
            else {
                continue;
            };
            let device = s.label_any(&["deviceuuid", "vdeviceid", "deviceid"]).unwrap_or("").to_string();
            input.hami.push(HamiSeries { workload, device, samples: s.samples });
        }
        out.non_finite_devices.extend(nan_devices);
    }

    /// The answer of the trailing day's device query for a window starting at `start_ms`: one sample per device
    /// and hour of `[start − 23 h, start)` it was seen in, at the hour's last millisecond.
    pub async fn trailing_seen(
        source: &SampleSource,
        spec: &FetchSpec,
        start_ms: i64,
        policy: RetryPolicy,
    ) -> Result<Vec<RawSeries>, PromError> {
        let (start, end) = (start_ms - TRAILING_HOURS * HOUR_MS, start_ms - 1);
        with_retry(policy, "Prometheus read", || async {
            let q = seen_devices_query(spec, source.range_ends().await?);
            source.query_range(&q, start + HOUR_MS - 1, end, HOUR_MS).await
        })
        .await
    }

    /// Whether the trailing day's devices were read with this window.
    pub fn has_trailing(&self) -> bool {
        self.trailing.is_some()
    }

    /// Takes the answer of the trailing day's device query (one sample per hour the device was seen in).
    pub fn absorb_seen(&mut self, answer: Vec<RawSeries>) {
        let seen = self.trailing.get_or_insert_with(DevicesByHour::new);
        for s in answer {
            let Some(device) = seen_device(&s) else { continue };
            for p in &s.samples {
                seen.entry(p.t_ms + 1 - HOUR_MS).or_default().insert(device.clone());
            }
        }
    }

    /// Splits the window into the metering inputs of its hours (each `[h, h + 1 h)`), moving the samples out
    /// series by series so the window is never held twice. Utilization samples within the margin of an hour's
    /// edge go to both hours; of a KSM series read with a margin, an hour keeps the nearest sample on either side
    /// within it (its edges).
    pub fn into_hours(self, hours_ms: &[i64]) -> Vec<(HourInput, BTreeMap<String, u64>)> {
        self.into_hours_carrying(hours_ms, &mut CarriedDevices::default())
    }

    /// [`Fetched::into_hours`] of consecutive `hours_ms` (ascending), with `carry`: the trailing day comes from
    /// it where this window did not read its own, and it is left holding the day before the next window.
    pub fn into_hours_carrying(
        self,
        hours_ms: &[i64],
        carry: &mut CarriedDevices,
    ) -> Vec<(HourInput, BTreeMap<String, u64>)> {
        let mut out: Vec<(HourInput, BTreeMap<String, u64>)> = hours_ms
            .iter()
            .map(|&h| (HourInput { start_ms: h, end_ms: h + HOUR_MS, ..HourInput::default() }, BTreeMap::new()))
            .collect();
        let Fetched {
            input,
            non_finite,
            trailing,
            non_finite_devices,
            ksm_margin_ms: margin,
            counters,
            starts,
            models,
            unknown,
            ..
        } = self;
        if hours_ms.is_empty() {
            return out;
        }
        // the devices seen in each hour of the window (a sample, finite or not, in the hour itself)
        let mut own = DevicesByHour::new();
        // hours_ms ascending: the hour a timestamp falls in, by bisection (a batch may hold hundreds of hours)
        let hour_of = |t: i64| {
            let i = hours_ms.partition_point(|&h| h + HOUR_MS <= t);
            hours_ms.get(i).copied().filter(|&h| t >= h)
        };
        for d in &input.devices {
            let Some(host) = d.host.as_deref() else { continue };
            let mut last = None;
            for p in &d.samples {
                let h = hour_of(p.t_ms);
                if h.is_some() && h != last {
                    let device = SeenDevice { host: host.to_string(), uuid: d.uuid.clone() };
                    own.entry(h.unwrap_or_default()).or_default().insert(device);
                    last = h;
                }
            }
        }
        for (device, t) in non_finite_devices {
            if let Some(h) = hour_of(t) {
                own.entry(h).or_default().insert(device);
            }
        }
        for ((i, _), devices) in out.iter_mut().zip(carry.window(hours_ms, trailing, own)) {
            i.trailing_devices = devices;
        }
        let ksm = |h: i64| (h, h + HOUR_MS);
        let util = |h: i64| (h - UTIL_MARGIN_MS, h + HOUR_MS + UTIL_MARGIN_MS);
        split_ksm(input.requests, &mut out, margin, |r| (&mut r.samples, &mut r.edges), |i, r| i.requests.push(r));
        split_ksm(input.running, &mut out, margin, |r| (&mut r.samples, &mut r.edges), |i, r| i.running.push(r));
        split_ksm(input.pending, &mut out, margin, |r| (&mut r.samples, &mut r.edges), |i, r| i.pending.push(r));
        let quota = input.quota;
        split(quota.guarantees, &mut out, ksm, |q| &mut q.samples, |i, q| i.quota.guarantees.push(q));
        split(quota.local_queues, &mut out, ksm, |q| &mut q.1, |i, q| i.quota.local_queues.push(q));
        split(input.namespaces, &mut out, ksm, |n| &mut n.samples, |i, n| i.namespaces.push(n));
        split_ksm(input.capacity, &mut out, margin, |c| (&mut c.samples, &mut c.edges), |i, c| i.capacity.push(c));
        split_ksm(
            input.allocatable,
            &mut out,
            margin,
            |c| (&mut c.samples, &mut c.edges),
            |i, c| i.allocatable.push(c),
        );
        split_ksm(
            input.unschedulable,
            &mut out,
            margin,
            |u| (&mut u.samples, &mut u.edges),
            |i, u| i.unschedulable.push(u),
        );
        split(input.devices, &mut out, util, |d| &mut d.samples, |i, d| i.devices.push(d));
        split(input.hami, &mut out, util, |h| &mut h.samples, |i, h| i.hami.push(h));
        split(input.node_labels, &mut out, ksm, |n| &mut n.samples, |i, n| i.node_labels.push(n));
        split_counters(counters, &mut out, COUNTER_LOOKBACK_MS);
        let labelled = |h: i64| (h - COUNTER_LOOKBACK_MS, h + HOUR_MS + COUNTER_LOOKBACK_MS);
        split(models, &mut out, labelled, |m| &mut m.1, |i, m| i.serving.models.push(m.0));
        split(quota.members, &mut out, labelled, |m| &mut m.1, |i, m| i.quota.members.push(m));
        for (name, times) in unknown {
            for (input, _) in out.iter_mut() {
                let samples = slice_times(&times, input.start_ms, input.end_ms);
                if samples > 0 {
                    input.serving.unknown.push(UnknownServingSeries { name: name.clone(), samples });
                }
            }
        }
        // a pod start matters to an hour's counters up to a scrape interval (within the margin) before it; sorted
        // once and bisected per hour, since a long batch holds hundreds of hours and thousands of starts
        let mut starts = starts;
        starts.sort_unstable_by_key(|s| s.t_ms);
        for (input, _) in out.iter_mut() {
            let (lo, hi) = (input.start_ms - margin, input.end_ms);
            let from = starts.partition_point(|s| s.t_ms < lo);
            let to = starts.partition_point(|s| s.t_ms < hi);
            input.serving.starts.extend_from_slice(&starts[from..to]);
        }
        for (metric, t) in non_finite {
            let i = out.partition_point(|(input, _)| input.end_ms <= t);
            if let Some((input, counts)) = out.get_mut(i)
                && t >= input.start_ms
            {
                *counts.entry(metric).or_default() += 1;
            }
        }
        out
    }
}

/// How many of `times` (ascending) fall in `[lo, hi)`.
fn slice_times(times: &[i64], lo: i64, hi: i64) -> u64 {
    (times.partition_point(|&t| t < hi) - times.partition_point(|&t| t < lo)) as u64
}

/// The hours (ascending) whose `range` (ascending with the hour) may hold a sample of `[first, last]`: a series
/// is cut only into the hours it spans, not tried against every hour of a long batch.
fn overlapping<'h>(
    hours: &'h mut [(HourInput, BTreeMap<String, u64>)],
    range: &impl Fn(i64) -> (i64, i64),
    first: i64,
    last: i64,
) -> &'h mut [(HourInput, BTreeMap<String, u64>)] {
    let from = hours.partition_point(|(i, _)| range(i.start_ms).1 <= first);
    let to = hours.partition_point(|(i, _)| range(i.start_ms).0 <= last);
    let to = to.max(from);
    &mut hours[from..to]
}

/// Moves each series' samples into the hours whose `range` they fall in; a series is dropped once distributed
/// (its labels are cloned per hour, its samples never held twice).
fn split<T: Clone>(
    series: Vec<T>,
    hours: &mut [(HourInput, BTreeMap<String, u64>)],
    range: impl Fn(i64) -> (i64, i64),
    samples: impl Fn(&mut T) -> &mut Vec<Sample>,
    push: impl Fn(&mut HourInput, T),
) {
    for mut s in series {
        let all = std::mem::take(samples(&mut s));
        let (Some(first), Some(last)) = (all.first(), all.last()) else { continue };
        for (input, _) in overlapping(hours, &range, first.t_ms, last.t_ms) {
            let (lo, hi) = range(input.start_ms);
            let part = slice(&all, lo, hi);
            if !part.is_empty() {
                let mut one = s.clone();
                *samples(&mut one) = part.to_vec();
                push(input, one);
            }
        }
    }
}

/// [`split`] for the serving counters: an hour takes its samples in `[h, h + 1 h)` and, before them, the last
/// sample within `lookback` before `h` — the only earlier sample the counter rule reads (its first pair's) — not
/// the whole look-back; an hour without a sample of its own takes none (nothing of it is counted).
fn split_counters(series: Vec<CounterSeries>, hours: &mut [(HourInput, BTreeMap<String, u64>)], lookback: i64) {
    for mut s in series {
        let all = std::mem::take(&mut s.samples);
        let (Some(first), Some(last)) = (all.first(), all.last()) else { continue };
        for (input, _) in overlapping(hours, &|h| (h, h + HOUR_MS), first.t_ms, last.t_ms) {
            let (lo, hi) = (input.start_ms, input.end_ms);
            let own = slice(&all, lo, hi);
            if own.is_empty() {
                continue;
            }
            let mut one = CounterSeries { samples: Vec::with_capacity(own.len() + 1), ..s.clone() };
            one.samples.extend(slice(&all, lo - lookback, lo).last().copied());
            one.samples.extend_from_slice(own);
            input.serving.series.push(one);
        }
    }
}

/// [`split`] for a KSM series read with `margin` either side: an hour takes its samples in `[h, h + 1 h)` and, as
/// its edges, the last sample in `[h − margin, h)` and the first in `[h + 1 h, h + 1 h + margin)` — the same
/// whether its neighbours were read in this window or the next, so chunking never changes an hour.
fn split_ksm<T: Clone>(
    series: Vec<T>,
    hours: &mut [(HourInput, BTreeMap<String, u64>)],
    margin: i64,
    parts: impl Fn(&mut T) -> (&mut Vec<Sample>, &mut Edges),
    push: impl Fn(&mut HourInput, T),
) {
    for mut s in series {
        let all = std::mem::take(parts(&mut s).0);
        let (Some(first), Some(last)) = (all.first(), all.last()) else { continue };
        // an hour without a sample of its own takes none (its edges only come with one)
        for (input, _) in overlapping(hours, &|h| (h, h + HOUR_MS), first.t_ms, last.t_ms) {
            let (lo, hi) = (input.start_ms, input.end_ms);
            let part = slice(&all, lo, hi);
            if !part.is_empty() {
                let mut one = s.clone();
                let (samples, edges) = parts(&mut one);
                *samples = part.to_vec();
                *edges = Edges {
                    before: slice(&all, lo - margin, lo).last().copied(),
                    after: slice(&all, hi, hi + margin).first().copied(),
                };
                push(input, one);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_carry_extra_matchers() {
        let spec = FetchSpec { matchers: Some(r#"cluster="a""#.into()), team_label: "label_team".into() };
        assert_eq!(spec.selector("up", ""), r#"up{cluster="a"}"#);
        assert_eq!(spec.selector("x", r#"unit="integer""#), r#"x{unit="integer",cluster="a"}"#);
        let plain = FetchSpec { matchers: None, team_label: "label_team".into() };
        assert_eq!(plain.selector("up", ""), "up{}");
    }

    /// A DCGM series of `uuid` on host `n1` with a sample every 10 minutes in `[from_h, to_h)` hours.
    fn dcgm(uuid: &str, from_h: i64, to_h: i64) -> RawSeries {
        let labels = [("__name__", "DCGM_FI_DEV_GPU_UTIL"), ("Hostname", "n1"), ("UUID", uuid)];
        RawSeries {
            labels: labels.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            samples: (from_h * 6..to_h * 6).map(|i| Sample { t_ms: i * 600_000, v: 50.0 }).collect(),
            non_finite: Vec::new(),
        }
    }

    /// The read of hours `[from_h, to_h)`: the series' samples within it (and its margin).
    fn window(series: &[RawSeries], from_h: i64, to_h: i64, trailing: Option<i64>) -> Fetched {
        let spec = FetchSpec { matchers: None, team_label: "label_team".into() };
        let mut f = Fetched::default();
        let part = |s: &RawSeries, lo: i64, hi: i64| RawSeries {
            samples: s.samples.iter().filter(|p| p.t_ms >= lo && p.t_ms < hi).copied().collect(),
            ..s.clone()
        };
        let (lo, hi) = (from_h * HOUR_MS - UTIL_MARGIN_MS, to_h * HOUR_MS + UTIL_MARGIN_MS);
        f.absorb(&spec, 4, series.iter().map(|s| part(s, lo, hi)).collect());
        if let Some(days_before) = trailing {
            // what the trailing query answers: one sample, at the hour's last millisecond, per hour a device was seen
            let answer = series
                .iter()
                .map(|s| {
                    let mut hours: Vec<i64> = s.samples.iter().map(|p| p.t_ms / HOUR_MS).collect();
                    hours.dedup();
                    let samples = hours
                        .into_iter()
                        .filter(|h| *h >= from_h - days_before && *h < from_h)
                        .map(|h| Sample { t_ms: (h + 1) * HOUR_MS - 1, v: 1.0 })
                        .collect();
                    RawSeries { samples, ..s.clone() }
                })
                .collect();
            f.absorb_seen(answer);
        }
        f
    }

    fn trailing(hours: &[(HourInput, BTreeMap<String, u64>)]) -> Vec<(i64, Vec<String>)> {
        hours
            .iter()
            .map(|(i, _)| (i.start_ms / HOUR_MS, i.trailing_devices.iter().map(|d| d.uuid.clone()).collect()))
            .collect()
    }

    #[test]
    fn an_hour_of_counters_holds_its_own_samples_and_the_last_one_before_within_the_look_back() {
        use crate::metering::{Counter, Engine};
        let h = |k: i64| k * HOUR_MS;
        let series = |times: Vec<i64>| CounterSeries {
            namespace: "ns".into(),
            pod: "p".into(),
            model: Some("m".into()),
            engine: Engine::Vllm,
            counter: Counter::Requests,
            samples: times.into_iter().map(|t| Sample::new(t, t as f64)).collect(),
        };
        let mut hours: Vec<(HourInput, BTreeMap<String, u64>)> = (0..4)
            .map(|k| (HourInput { start_ms: h(k), end_ms: h(k + 1), ..HourInput::default() }, BTreeMap::new()))
            .collect();
        // every minute of hours 0 and 1, then one sample at 3 h + 10 min
        let mut times: Vec<i64> = (0..120).map(|m| m * 60_000).collect();
        times.push(h(3) + 600_000);
        split_counters(vec![series(times)], &mut hours, COUNTER_LOOKBACK_MS);
        let got: Vec<Vec<i64>> = hours
            .iter()
            .map(|(i, _)| i.serving.series.iter().flat_map(|s| s.samples.iter().map(|p| p.t_ms)).collect())
            .collect();
        assert_eq!(got[0], (0..60).map(|m| m * 60_000).collect::<Vec<_>>(), "nothing before the first");
        assert_eq!(got[1], (59..120).map(|m| m * 60_000).collect::<Vec<_>>(), "the one before, then its own");
        assert!(got[2].is_empty(), "no sample of its own: not handed the series");
        // the last sample before hour 3 (at 1 h 59 min) is 61 minutes before it: beyond the look-back
        assert_eq!(got[3], [h(3) + 600_000]);
    }

    #[test]
    fn carried_trailing_days_equal_the_queried_ones() {
        // a device seen for 30 hours from hour 20, one seen only in hour 22, one from hour 50 on
        let series = [dcgm("GPU-a", 20, 50), dcgm("GPU-b", 22, 23), dcgm("GPU-c", 50, 80)];
        let hours = |from: i64, to: i64| (from..to).map(|h| h * HOUR_MS).collect::<Vec<_>>();
        // every 6-hour window of [24 h, 96 h) reading its own trailing day
        let queried: Vec<_> = (4..16)
            .flat_map(|w| {
                trailing(&window(&series, w * 6, w * 6 + 6, Some(TRAILING_HOURS)).into_hours(&hours(w * 6, w * 6 + 6)))
            })
            .collect();
        assert!(queried.iter().any(|(h, d)| *h == 46 && d == &["GPU-a"]), "{queried:?}");
        assert!(queried.iter().any(|(h, d)| *h == 55 && d == &["GPU-a", "GPU-c"]), "{queried:?}");
        assert!(queried.iter().any(|(h, d)| *h == 30 && d.len() == 2), "{queried:?}");
        // only the first reads it; the others carry it
        let mut history = CarriedDevices::default();
        let mut carried = Vec::new();
        for w in 4..16 {
            let first = w == 4;
            assert_eq!(history.reaches(w * 6 * HOUR_MS), !first);
            let f = window(&series, w * 6, w * 6 + 6, first.then_some(TRAILING_HOURS));
            carried.extend(trailing(&f.into_hours_carrying(&hours(w * 6, w * 6 + 6), &mut history)));
        }
        assert_eq!(carried, queried);
        // a window that does not follow the last one is not reached: its trailing day must be read
        assert!(!history.reaches(100 * HOUR_MS));
        let f = window(&series, 100, 106, None);
        let _ = f.into_hours_carrying(&hours(100, 106), &mut history);
        assert!(!history.reaches(106 * HOUR_MS), "a window without its trailing day leaves nothing to carry");
    }

    #[test]
    fn a_device_whose_samples_are_all_nan_is_seen_as_a_fresh_read_sees_it() {
        // GPU-n reports only NaN, in hours 30 and 31: the window's read drops the samples, the trailing day's
        // count_over_time counts them; either way the device was there
        let mut nan = dcgm("GPU-n", 30, 32);
        nan.non_finite = nan.samples.drain(..).map(|p| p.t_ms).collect();
        let series = [dcgm("GPU-a", 20, 60), nan.clone()];
        let hours = |from: i64, to: i64| (from..to).map(|h| h * HOUR_MS).collect::<Vec<_>>();
        // the trailing answer of a fresh read counts the NaN device's hours
        let fresh = |from: i64| {
            let mut f = window(&series, from, from + 6, Some(TRAILING_HOURS));
            let answer = vec![RawSeries {
                samples: (30..32)
                    .filter(|h| *h < from && *h >= from - TRAILING_HOURS)
                    .map(|h| Sample { t_ms: (h + 1) * HOUR_MS - 1, v: 1.0 })
                    .collect(),
                non_finite: Vec::new(),
                ..nan.clone()
            }];
            f.absorb_seen(answer);
            trailing(&f.into_hours(&hours(from, from + 6)))
        };
        let mut carry = CarriedDevices::default();
        for w in 4..9 {
            let mut f = window(&series, w * 6, w * 6 + 6, (w == 4).then_some(TRAILING_HOURS));
            // the window's own NaN samples, as the read reports them
            let part = RawSeries {
                samples: Vec::new(),
                non_finite: nan
                    .non_finite
                    .iter()
                    .copied()
                    .filter(|t| *t >= w * 6 * HOUR_MS && *t < (w * 6 + 6) * HOUR_MS)
                    .collect(),
                ..nan.clone()
            };
            f.absorb(&FetchSpec { matchers: None, team_label: "label_team".into() }, 4, vec![part]);
            let got = trailing(&f.into_hours_carrying(&hours(w * 6, w * 6 + 6), &mut carry));
            assert_eq!(got, fresh(w * 6), "window {w}");
            if w == 5 {
                assert!(got.iter().all(|(_, d)| d.contains(&"GPU-n".to_string())), "{got:?}");
            }
        }
    }

    #[test]
    fn the_seen_devices_range_is_the_hour_on_either_end_rule() {
        let spec = FetchSpec { matchers: None, team_label: "label_team".into() };
        let closed = seen_devices_query(&spec, RangeEnds::Closed);
        assert!(closed.starts_with("group by (Hostname,hostname,kubernetes_node,node,UUID,uuid,gpu) (count_over_time(DCGM_FI_PROF_SM_ACTIVE{}[3599999ms])) or "), "{closed}");
        assert_eq!(closed.matches("[3599999ms]").count(), 4);
        let open = seen_devices_query(&spec, RangeEnds::LeftOpen);
        assert_eq!((open.matches("[3600000ms]").count(), open.matches("[3599999ms]").count()), (4, 0), "{open}");
    }
}
