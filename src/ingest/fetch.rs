//! One round of Prometheus queries for a run of hours, normalised from every label variant into metering input.

use std::collections::BTreeMap;

use crate::metering::{
    CapacitySeries, ContainerKey, DeviceSeries, HamiSeries, HourInput, NamespaceSeries, RequestSeries, RunningSeries,
    Sample, UtilMetric,
};
use crate::prom::{PromClient, PromError, RawSeries, RetryPolicy, with_retry};

use super::window::{HOUR_MS, slice};

/// Utilization series are read this far beyond a window so its edge grid points find their match.
pub const UTIL_MARGIN_MS: i64 = 5 * 60_000;

const DCGM_METRICS: &str =
    "DCGM_FI_PROF_SM_ACTIVE|DCGM_FI_PROF_GR_ENGINE_ACTIVE|DCGM_FI_DEV_GPU_UTIL|DCGM_FI_DEV_FB_USED";
const HAMI_UTIL: &str = "hami_container_device_utilization_ratio";

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

/// The normalised series of `[start_ms, end_ms)` (utilization with its margin).
#[derive(Debug, Default)]
pub struct Fetched {
    input: HourInput,
    /// (metric, timestamp) of every NaN/±Inf sample dropped.
    non_finite: Vec<(String, i64)>,
    pub samples_read: u64,
}

/// The six selectors one window reads, each with the margin it is read with.
pub fn selectors(spec: &FetchSpec) -> [(String, i64); 6] {
    [
        (spec.selector("kube_pod_container_resource_requests", r#"unit="integer""#), 0),
        (spec.selector("kube_pod_status_phase", r#"phase="Running""#), 0),
        (spec.selector("kube_namespace_labels", ""), 0),
        (spec.selector("kube_node_status_capacity", r#"resource=~"nvidia_com_.+|amd_com_.+|habana_ai_.+|.*gpu.*""#), 0),
        (spec.selector("", &format!(r#"__name__=~"{DCGM_METRICS}""#)), UTIL_MARGIN_MS),
        (spec.selector(HAMI_UTIL, ""), UTIL_MARGIN_MS),
    ]
}

/// Reads `[start_ms, end_ms)`: the six range-selector queries, concurrently, each retried per `policy`.
pub async fn fetch(
    client: &PromClient,
    spec: &FetchSpec,
    start_ms: i64,
    end_ms: i64,
    policy: RetryPolicy,
) -> Result<Fetched, PromError> {
    let q = |(selector, margin): (String, i64)| {
        let client = client.clone();
        async move {
            with_retry(policy, "Prometheus query", || client.raw_samples(&selector, start_ms - margin, end_ms + margin))
                .await
        }
    };
    let [a, b, c, d, e, f] = selectors(spec);
    let answers = tokio::try_join!(q(a), q(b), q(c), q(d), q(e), q(f))?;
    Ok(Fetched::from_answers(spec, answers))
}

/// The answers to [`selectors`], in that order.
pub type Answers = (Vec<RawSeries>, Vec<RawSeries>, Vec<RawSeries>, Vec<RawSeries>, Vec<RawSeries>, Vec<RawSeries>);

fn workload(s: &RawSeries, ns: &[&str], pod: &[&str], container: &[&str]) -> Option<ContainerKey> {
    Some(ContainerKey {
        namespace: s.label_any(ns)?.to_string(),
        pod: s.label_any(pod)?.to_string(),
        container: s.label_any(container).unwrap_or("").to_string(),
    })
}

fn pod_uid(s: &RawSeries) -> String {
    s.label("uid")
        .map(str::to_string)
        .unwrap_or_else(|| format!("{}/{}", s.label("namespace").unwrap_or(""), s.label("pod").unwrap_or("")))
}

impl Fetched {
    /// Normalises the answers to [`selectors`] (the Prometheus label variants) into metering input.
    pub fn from_answers(spec: &FetchSpec, answers: Answers) -> Fetched {
        let (requests, running, namespaces, capacity, dcgm, hami) = answers;
        let mut out = Fetched::default();
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
            });
        }
        for s in running {
            note(&s, "kube_pod_status_phase");
            input.running.push(RunningSeries { uid: pod_uid(&s), samples: s.samples });
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
        for s in capacity {
            note(&s, "kube_node_status_capacity");
            let (Some(node), Some(resource)) = (s.label("node"), s.label("resource")) else { continue };
            input.capacity.push(CapacitySeries {
                node: node.to_string(),
                resource: resource.to_string(),
                samples: s.samples,
            });
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
            let host = s.label_any(&["Hostname", "hostname", "kubernetes_node", "node"]).map(str::to_string);
            let uuid = s
                .label_any(&["UUID", "uuid"])
                .map(str::to_string)
                .unwrap_or_else(|| format!("{}:{}", host.as_deref().unwrap_or(""), s.label("gpu").unwrap_or("")));
            input.devices.push(DeviceSeries {
                metric,
                workload,
                uuid,
                model: s.label("modelName").map(str::to_string),
                mig_profile: s.label("GPU_I_PROFILE").map(str::to_string),
                mig_instance: s.label("GPU_I_ID").map(str::to_string),
                vgpu: s.label("vgpu").map(str::to_string),
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
        out
    }

    /// The metering input of the hour starting at `hour_ms` (which must lie in the fetched range).
    pub fn hour(&self, hour_ms: i64) -> (HourInput, BTreeMap<String, u64>) {
        let (a, b) = (hour_ms, hour_ms + HOUR_MS);
        let (ua, ub) = (a - UTIL_MARGIN_MS, b + UTIL_MARGIN_MS);
        let cut = |s: &[Sample], lo: i64, hi: i64| slice(s, lo, hi).to_vec();
        let i = &self.input;
        let input = HourInput {
            start_ms: a,
            end_ms: b,
            requests: i
                .requests
                .iter()
                .filter_map(|r| {
                    let samples = cut(&r.samples, a, b);
                    (!samples.is_empty()).then(|| RequestSeries { samples, ..r.clone_empty() })
                })
                .collect(),
            running: i
                .running
                .iter()
                .map(|r| RunningSeries { uid: r.uid.clone(), samples: cut(&r.samples, a, b) })
                .filter(|r| !r.samples.is_empty())
                .collect(),
            devices: i
                .devices
                .iter()
                .filter_map(|d| {
                    let samples = cut(&d.samples, ua, ub);
                    (!samples.is_empty()).then(|| DeviceSeries { samples, ..d.clone_empty() })
                })
                .collect(),
            hami: i
                .hami
                .iter()
                .map(|h| HamiSeries {
                    workload: h.workload.clone(),
                    device: h.device.clone(),
                    samples: cut(&h.samples, ua, ub),
                })
                .filter(|h| !h.samples.is_empty())
                .collect(),
            namespaces: i
                .namespaces
                .iter()
                .map(|n| NamespaceSeries {
                    namespace: n.namespace.clone(),
                    team: n.team.clone(),
                    samples: cut(&n.samples, a, b),
                })
                .filter(|n| !n.samples.is_empty())
                .collect(),
            capacity: i
                .capacity
                .iter()
                .map(|c| CapacitySeries {
                    node: c.node.clone(),
                    resource: c.resource.clone(),
                    samples: cut(&c.samples, a, b),
                })
                .filter(|c| !c.samples.is_empty())
                .collect(),
        };
        let mut non_finite = BTreeMap::new();
        for (metric, t) in &self.non_finite {
            if *t >= a && *t < b {
                *non_finite.entry(metric.clone()).or_default() += 1;
            }
        }
        (input, non_finite)
    }
}

trait CloneEmpty {
    fn clone_empty(&self) -> Self;
}

impl CloneEmpty for RequestSeries {
    fn clone_empty(&self) -> Self {
        Self {
            key: self.key.clone(),
            uid: self.uid.clone(),
            node: self.node.clone(),
            resource: self.resource.clone(),
            samples: Vec::new(),
        }
    }
}

impl CloneEmpty for DeviceSeries {
    fn clone_empty(&self) -> Self {
        Self {
            metric: self.metric,
            workload: self.workload.clone(),
            host: self.host.clone(),
            uuid: self.uuid.clone(),
            model: self.model.clone(),
            mig_profile: self.mig_profile.clone(),
            mig_instance: self.mig_instance.clone(),
            vgpu: self.vgpu.clone(),
            samples: Vec::new(),
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
}
