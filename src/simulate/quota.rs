//! Quotas and queues (SPEC §10): namespaces' GPU ResourceQuotas, Kueue ClusterQueues and LocalQueues, the pods'
//! queue labels and a few GPU pods that never run; their truth is `truth.json`'s `quota` and `pending`.
//!
//! Nothing here draws from the schedule's random streams: the quotas are constants and the never-ran pods come from a
//! salted hash of the seed (`SALT_QUOTA`), so every other series and every other truth figure stays as it was. The
//! never-ran pods are not pods of the cluster (`Cluster::pods`): they hold no card, have no device series and count
//! in no GPU-hour, capacity or pod count.
//!
//! Written, every family a gauge on the KSM grid over the whole window (missing the KSM outages); the quota and Kueue
//! families after HAMi's and before the serving counters (from whose first series on a file holds only serving
//! series and pod labels), the queue labels after the serving pods' labels:
//! - `kube_resourcequota{namespace, resourcequota, resource, type}` as kube-state-metrics writes it (raw resource
//!   names): `vision-dev`'s `gpu` with `requests.nvidia.com/gpu` hard 4 before the window's midpoint hour and 8 from
//!   it (a quota raised mid-window); `recsys` with two objects, `gpu` hard 8 and `gpu-cap` hard 12 (the guarantee is
//!   the least of them, 8), and on `gpu` also a `limits.nvidia.com/gpu` hard 8 that cardhour must ignore;
//!   `vision-train`'s `gpu` hard 16, a namespace in a Kueue queue, so its quota is a ceiling and never a guarantee;
//!   `sandbox`'s `gpu` hard 2. Each object's `type="used"` is what the quota controller counts: the integer GPU
//!   requests of the namespace's GPU pods Pending or Running (created, not yet ended: `[t0, t2)`; a never-ran pod
//!   until it is deleted).
//! - Kueue's `kueue_cluster_queue_nominal_quota`, `kueue_cluster_queue_borrowing_limit`,
//!   `kueue_cluster_queue_lending_limit` and `kueue_cluster_queue_resource_usage{cohort, cluster_queue, flavor,
//!   resource="nvidia.com/gpu", replica_role}`: `cq-nlp` (cohort `research`) nominal 16, borrowing and lending
//!   limits `+Inf` (no limit); `cq-vision` (no cohort label) nominal 8, borrowing limit 4, lending `+Inf`; usage the
//!   requests of the queue's Running pods. Every series twice: from the leader (`replica_role="leader"`) and from a
//!   follower replica with other values (999) that a reader must drop; `cq-nlp`'s leader series carry an extra label
//!   (`custom_team="nlp"`) that must not split the scope.
//! - `kueue_local_queue_resource_usage{name="lq-<namespace>", namespace, flavor, resource, replica_role="leader"}` of
//!   `nlp-prod`, `nlp-research` (in `cq-nlp`) and `vision-train` (in `cq-vision`).
//! - In `kube_pod_labels` (after the serving pods' series), `label_kueue_x_k8s_io_cluster_queue_name` and
//!   `label_kueue_x_k8s_io_local_queue_name` of every pod object of those namespaces except the inference servers
//!   (never queued) and the unknown resource's pods, while the object exists, with an empty `label_model` so every
//!   series of the family has the serving pods' label (an empty label is an absent one: Prometheus drops it).
//! - The never-ran pods, `2 + gpus/64` of them (`<namespace>-stuck-<n>`, one in `nlp-research`, one in `sandbox`,
//!   the others in any namespace; uids of version 5, unlike the cluster's version-4 ones): at the end of
//!   `kube_pod_container_resource_requests` (`nvidia_com_gpu` of 1, 2 or 4 cards, `node=""`: never scheduled) and
//!   of `kube_pod_status_phase` (Pending for 1 to 20 hours inside the window, as long as the window allows, then
//!   deleted), and queue-labelled like the other pods of their namespace.
//!
//! The truth counts the guarantees from the same constants and the use from the truth's own GPU-seconds, never
//! reading the written series.

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::{Deserialize, Serialize};

use super::bridge::bridged;
use super::clock::{HOUR_MS, rfc3339};
use super::layout::{
    GPUS_PER_NODE, NAMESPACES, NS_NLP_PROD, NS_NLP_RESEARCH, NS_RECSYS, NS_SANDBOX, NS_VISION_DEV, NS_VISION_TRAIN,
    team_of,
};
use super::model::{Cluster, Grid, Kind, PHASES, Pod};
use super::om::{OmWriter, ksm_samples};
use super::serving::POD_LABELS;
use super::workload::{Class, hash2, hash3, unit};

/// Salt of every quota hash: none of the schedule's streams (`hash3(seed, a, 1..=8)`) nor serving's collides with it.
const SALT_QUOTA: u64 = 0x0A07_A5EC;
/// Never-ran pods: one per this many cards, beyond the first two.
const STUCK_PER_GPUS: u32 = 64;
/// How long a never-ran pod is Pending (before the window's length caps it).
const STUCK_MIN_MS: i64 = HOUR_MS;
const STUCK_MAX_MS: i64 = 20 * HOUR_MS;

pub const RESOURCE_QUOTA: &str = "kube_resourcequota";
pub const CQ_NOMINAL: &str = "kueue_cluster_queue_nominal_quota";
pub const CQ_BORROWING: &str = "kueue_cluster_queue_borrowing_limit";
pub const CQ_LENDING: &str = "kueue_cluster_queue_lending_limit";
pub const CQ_USAGE: &str = "kueue_cluster_queue_resource_usage";
pub const LQ_USAGE: &str = "kueue_local_queue_resource_usage";
/// The queue labels of `kube_pod_labels`.
pub const CQ_LABEL: &str = "label_kueue_x_k8s_io_cluster_queue_name";
pub const LQ_LABEL: &str = "label_kueue_x_k8s_io_local_queue_name";

/// The GPU quota cardhour reads; the `limits.` one is not a guarantee.
const REQUESTS_GPU: &str = "requests.nvidia.com/gpu";
const LIMITS_GPU: &str = "limits.nvidia.com/gpu";
const KUEUE_GPU: &str = "nvidia.com/gpu";
const FLAVOR: &str = "default-flavor";
/// Every value of a follower replica's series.
const FOLLOWER: f64 = 999.0;

/// A `hard` value: constant, or raised at the window's midpoint hour.
#[derive(Clone, Copy, Debug)]
enum Hard {
    Fixed(i64),
    Raised { before: i64, from: i64 },
}

/// One ResourceQuota object's GPU entry.
struct QuotaObject {
    ns: usize,
    name: &'static str,
    hard: Hard,
    /// A `limits.nvidia.com/gpu` hard value beside it (ignored by cardhour).
    limits: Option<i64>,
}

/// The ResourceQuota objects, in the order they are written.
static QUOTAS: [QuotaObject; 5] = [
    QuotaObject { ns: NS_VISION_TRAIN, name: "gpu", hard: Hard::Fixed(16), limits: None },
    QuotaObject { ns: NS_VISION_DEV, name: "gpu", hard: Hard::Raised { before: 4, from: 8 }, limits: None },
    QuotaObject { ns: NS_RECSYS, name: "gpu", hard: Hard::Fixed(8), limits: Some(8) },
    QuotaObject { ns: NS_RECSYS, name: "gpu-cap", hard: Hard::Fixed(12), limits: None },
    QuotaObject { ns: NS_SANDBOX, name: "gpu", hard: Hard::Fixed(2), limits: None },
];

/// A Kueue ClusterQueue.
struct ClusterQueue {
    name: &'static str,
    cohort: Option<&'static str>,
    nominal: f64,
    borrowing: f64,
    lending: f64,
    /// The namespaces of its LocalQueues (`lq-<namespace>`).
    namespaces: &'static [usize],
    /// The team the test's mapping gives it.
    team: &'static str,
    /// An extra label of its leader series.
    leader_extra: Option<(&'static str, &'static str)>,
}

static QUEUES: [ClusterQueue; 2] = [
    ClusterQueue {
        name: "cq-nlp",
        cohort: Some("research"),
        nominal: 16.0,
        borrowing: f64::INFINITY,
        lending: f64::INFINITY,
        namespaces: &[NS_NLP_PROD, NS_NLP_RESEARCH],
        team: "nlp",
        leader_extra: Some(("custom_team", "nlp")),
    },
    ClusterQueue {
        name: "cq-vision",
        cohort: None,
        nominal: 8.0,
        borrowing: 4.0,
        lending: f64::INFINITY,
        namespaces: &[NS_VISION_TRAIN],
        team: "vision",
        leader_extra: None,
    },
];

/// The ClusterQueue of a namespace's LocalQueue.
fn queue_of(ns: usize) -> Option<usize> {
    QUEUES.iter().position(|q| q.namespaces.contains(&ns))
}

/// The queue of a pod object of the cluster: its namespace's, unless it is an inference server or of the unknown
/// resource.
fn queue_of_pod(pod: &Pod) -> Option<usize> {
    if pod.class == Class::Inference || pod.kind == Kind::Unknown {
        return None;
    }
    queue_of(pod.ns)
}

/// A GPU pod created, Pending over `[t0, t3)`, deleted without ever Running.
#[derive(Clone, Debug)]
pub struct Stuck {
    pub ns: usize,
    pub name: String,
    pub uid: String,
    /// `nvidia_com_gpu` requested (whole cards).
    pub q: u32,
    pub t0: i64,
    pub t3: i64,
}

/// What this module adds to a run (nothing when disabled).
#[derive(Clone, Debug)]
pub struct Plan {
    enabled: bool,
    /// Grid indices from here on are at or after the window's midpoint hour (vision-dev's quota raised).
    raise_k: u64,
    pub stuck: Vec<Stuck>,
}

impl Plan {
    /// Nothing added: the run writes what it wrote before quotas were simulated.
    pub fn disabled() -> Self {
        Plan { enabled: false, raise_k: 0, stuck: Vec::new() }
    }
}

/// The quota plan of the cluster, deterministic per seed.
pub fn plan(c: &Cluster, grid: &Grid, seed: u64) -> Plan {
    let hours = (grid.end_ms - grid.start_ms) / HOUR_MS;
    let raise_k = grid.count_before(grid.start_ms + hours / 2 * HOUR_MS, 0);
    let gpus = c.nodes.len() as u32 * GPUS_PER_NODE;
    let salt = hash2(seed, SALT_QUOTA);
    let window = grid.end_ms - grid.start_ms;
    let sec = |t: i64| t - t.rem_euclid(1000);
    let stuck = (0..2 + gpus / STUCK_PER_GPUS)
        .map(|n| {
            let h = |i: u64| hash3(salt, u64::from(n), i);
            let ns = match n {
                0 => NS_NLP_RESEARCH,
                1 => NS_SANDBOX,
                _ => (h(1) % NAMESPACES.len() as u64) as usize,
            };
            let want = STUCK_MIN_MS + (unit(h(2)) * (STUCK_MAX_MS - STUCK_MIN_MS) as f64) as i64;
            let dur = sec(want.min(window));
            let t0 = grid.start_ms + sec((unit(h(3)) * (window - dur) as f64) as i64);
            let (a, b) = (h(4), h(5));
            // version 5: never one of the cluster's (version 4) uids
            let uid = format!(
                "{:08x}-{:04x}-5{:03x}-{:04x}-{:012x}",
                a >> 32,
                (a >> 16) & 0xffff,
                a & 0xfff,
                (b >> 48 & 0x3fff) | 0x8000,
                b & 0xffff_ffff_ffff
            );
            Stuck {
                ns,
                name: format!("{}-stuck-{n}", NAMESPACES[ns].0),
                uid,
                q: [1, 2, 4][(h(6) % 3) as usize],
                t0,
                t3: t0 + dur,
            }
        })
        .collect();
    Plan { enabled: true, raise_k, stuck }
}

impl Hard {
    fn at(self, plan: &Plan, k: u64) -> i64 {
        match self {
            Hard::Fixed(v) => v,
            Hard::Raised { before, from } => {
                if k < plan.raise_k {
                    before
                } else {
                    from
                }
            }
        }
    }
}

/// Container of the never-ran pods.
const STUCK_CONTAINER: &str = "main";

/// The never-ran pods' requests, at the end of `kube_pod_container_resource_requests`.
pub fn write_stuck_requests<W: Write>(w: &mut OmWriter<W>, c: &Cluster, grid: &Grid, plan: &Plan) -> io::Result<()> {
    const NAME: &str = "kube_pod_container_resource_requests";
    for s in &plan.stuck {
        let (ka, kb) = grid.range(s.t0, s.t3, 0);
        w.series(
            NAME,
            [
                ("namespace", NAMESPACES[s.ns].0),
                ("pod", s.name.as_str()),
                ("uid", s.uid.as_str()),
                ("container", STUCK_CONTAINER),
                ("node", ""),
                ("resource", "nvidia_com_gpu"),
                ("unit", "integer"),
            ],
        );
        ksm_samples(w, c, grid, ka, kb, i64::from(s.q))?;
    }
    Ok(())
}

/// The never-ran pods' phases (Pending throughout), at the end of `kube_pod_status_phase`.
pub fn write_stuck_phases<W: Write>(w: &mut OmWriter<W>, c: &Cluster, grid: &Grid, plan: &Plan) -> io::Result<()> {
    const NAME: &str = "kube_pod_status_phase";
    for s in &plan.stuck {
        let (ka, kb) = grid.range(s.t0, s.t3, 0);
        for phase in PHASES {
            w.series(
                NAME,
                [
                    ("namespace", NAMESPACES[s.ns].0),
                    ("pod", s.name.as_str()),
                    ("uid", s.uid.as_str()),
                    ("phase", phase),
                ],
            );
            ksm_samples(w, c, grid, ka, kb, i64::from(phase == "Pending"))?;
        }
    }
    Ok(())
}

/// Whether the plan writes queue labels (so `kube_pod_labels` has series even without serving pods).
pub fn has_pod_labels(c: &Cluster, grid: &Grid, plan: &Plan) -> bool {
    let seen = |t0: i64, t3: i64| {
        let (ka, kb) = grid.range(t0, t3, 0);
        (ka..kb).any(|k| c.ksm_up(k))
    };
    plan.enabled
        && (c.pods.iter().any(|p| queue_of_pod(p).is_some() && seen(p.t0, p.t3))
            || plan.stuck.iter().any(|s| queue_of(s.ns).is_some() && seen(s.t0, s.t3)))
}

/// The queued pods' `kube_pod_labels` series, in the family the caller opened (after the serving pods' series).
pub fn write_pod_labels<W: Write>(w: &mut OmWriter<W>, c: &Cluster, grid: &Grid, plan: &Plan) -> io::Result<()> {
    if !plan.enabled {
        return Ok(());
    }
    let pods =
        c.pods.iter().enumerate().filter_map(|(p, pod)| {
            queue_of_pod(pod).map(|q| (pod.ns, c.pod_name(p), pod.uid.as_str(), pod.t0, pod.t3, q))
        });
    let stuck = plan
        .stuck
        .iter()
        .filter_map(|s| queue_of(s.ns).map(|q| (s.ns, s.name.as_str(), s.uid.as_str(), s.t0, s.t3, q)));
    for (ns, pod, uid, t0, t3, q) in pods.chain(stuck) {
        let (ka, kb) = grid.range(t0, t3, 0);
        let local = format!("lq-{}", NAMESPACES[ns].0);
        w.series(
            POD_LABELS,
            [
                ("namespace", NAMESPACES[ns].0),
                ("pod", pod),
                ("uid", uid),
                (CQ_LABEL, QUEUES[q].name),
                (LQ_LABEL, local.as_str()),
                ("label_model", ""),
            ],
        );
        ksm_samples(w, c, grid, ka, kb, 1)?;
    }
    Ok(())
}

/// `v(k)` at every grid point kube-state-metrics was scraped at.
fn gauge<W: Write>(w: &mut OmWriter<W>, c: &Cluster, grid: &Grid, v: impl Fn(u64) -> f64) -> io::Result<()> {
    for k in (0..grid.len).filter(|k| c.ksm_up(*k)) {
        w.sample_f64(v(k), grid.at(k))?;
    }
    Ok(())
}

/// Per namespace and grid index, the sum of `q` over the spans `[a, b)` (ms) given: (namespace, a, b, q).
fn sums(grid: &Grid, spans: impl Iterator<Item = (usize, i64, i64, u32)>) -> Vec<Vec<i64>> {
    let mut d = vec![vec![0i64; grid.len as usize + 1]; NAMESPACES.len()];
    for (ns, a, b, q) in spans {
        let (ka, kb) = grid.range(a, b, 0);
        d[ns][ka as usize] += i64::from(q);
        d[ns][kb as usize] -= i64::from(q);
    }
    for row in &mut d {
        let mut acc = 0;
        for x in row.iter_mut() {
            acc += *x;
            *x = acc;
        }
    }
    d
}

/// The ResourceQuotas' `used`: requests of the GPU pods Pending or Running, per namespace and grid index.
fn quota_used(c: &Cluster, grid: &Grid, plan: &Plan) -> Vec<Vec<i64>> {
    let pods = c.pods.iter().filter(|p| p.kind != Kind::Unknown).map(|p| (p.ns, p.t0, p.t2, p.q));
    let stuck = plan.stuck.iter().map(|s| (s.ns, s.t0, s.t3, s.q));
    sums(grid, pods.chain(stuck))
}

/// The LocalQueues' usage: requests of their queued pods Running, per namespace and grid index.
fn queue_running(c: &Cluster, grid: &Grid) -> Vec<Vec<i64>> {
    sums(grid, c.pods.iter().filter(|p| queue_of_pod(p).is_some()).map(|p| (p.ns, p.t1, p.t2, p.q)))
}

/// A ClusterQueue family's leader value at a grid index.
type QueueValue<'a> = dyn Fn(&ClusterQueue, u64) -> f64 + 'a;

/// Write `kube_resourcequota` and the Kueue families.
pub fn write_families<W: Write>(w: &mut OmWriter<W>, c: &Cluster, grid: &Grid, plan: &Plan) -> io::Result<()> {
    if !plan.enabled {
        return Ok(());
    }
    let used = quota_used(c, grid, plan);
    w.family(RESOURCE_QUOTA)?;
    for o in &QUOTAS {
        let entry = |resource: &'static str, ty: &'static str| {
            [("namespace", NAMESPACES[o.ns].0), ("resourcequota", o.name), ("resource", resource), ("type", ty)]
        };
        w.series(RESOURCE_QUOTA, entry(REQUESTS_GPU, "hard"));
        gauge(w, c, grid, |k| o.hard.at(plan, k) as f64)?;
        if let Some(l) = o.limits {
            w.series(RESOURCE_QUOTA, entry(LIMITS_GPU, "hard"));
            gauge(w, c, grid, |_| l as f64)?;
        }
        w.series(RESOURCE_QUOTA, entry(REQUESTS_GPU, "used"));
        gauge(w, c, grid, |k| used[o.ns][k as usize] as f64)?;
    }

    let running = queue_running(c, grid);
    let usage = |q: &ClusterQueue, k: u64| q.namespaces.iter().map(|&ns| running[ns][k as usize]).sum::<i64>() as f64;
    let families: [(&str, &QueueValue); 4] = [
        (CQ_NOMINAL, &|q, _| q.nominal),
        (CQ_BORROWING, &|q, _| q.borrowing),
        (CQ_LENDING, &|q, _| q.lending),
        (CQ_USAGE, &usage),
    ];
    for (name, value) in families {
        w.family(name)?;
        for q in &QUEUES {
            for leader in [true, false] {
                let mut labels: Vec<(&str, &str)> = q.cohort.map(|c| ("cohort", c)).into_iter().collect();
                labels.extend([
                    ("cluster_queue", q.name),
                    ("flavor", FLAVOR),
                    ("resource", KUEUE_GPU),
                    ("replica_role", if leader { "leader" } else { "follower" }),
                ]);
                if leader {
                    labels.extend(q.leader_extra);
                }
                w.series(name, labels);
                gauge(w, c, grid, |k| if leader { value(q, k) } else { FOLLOWER })?;
            }
        }
    }

    w.family(LQ_USAGE)?;
    for q in &QUEUES {
        for &ns in q.namespaces {
            let local = format!("lq-{}", NAMESPACES[ns].0);
            w.series(
                LQ_USAGE,
                [
                    ("name", local.as_str()),
                    ("namespace", NAMESPACES[ns].0),
                    ("flavor", FLAVOR),
                    ("resource", KUEUE_GPU),
                    ("replica_role", "leader"),
                ],
            );
            gauge(w, c, grid, |k| running[ns][k as usize] as f64)?;
        }
    }
    Ok(())
}

/// One hour of one quota scope (SPEC §10), card-seconds throughout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuotaHourRow {
    pub hour: String,
    /// `namespace` (a ResourceQuota's guarantee) or `cluster_queue` (a Kueue ClusterQueue's nominal quota).
    pub scope_kind: String,
    pub scope: String,
    pub team: String,
    /// ∫ of the guarantee over the hour's scrapes (the least `requests.nvidia.com/gpu` hard of the namespace's
    /// objects; the queue's leader nominal quota), each holding for one scrape interval.
    pub guaranteed_card_seconds: f64,
    /// The scope's GPU-seconds (the truth's `gpu_hours` × 3600 of its pods in the hour, bridged seconds included).
    pub used_card_seconds: f64,
    /// min(used, guaranteed).
    pub used_within_card_seconds: f64,
    /// max(0, used − guaranteed).
    pub borrowed_card_seconds: f64,
    /// guaranteed − used within.
    pub reserved_idle_card_seconds: f64,
    /// The scope's use by the GPU model of its pods' nodes (`unknown` where cardhour cannot know it), in model
    /// order: a model's used-within is its share of the scope's use × the scope's used-within (pro rata).
    #[serde(default)]
    pub models: Vec<QuotaModelRow>,
}

/// What one GPU model used of a scope's hour, card-seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuotaModelRow {
    pub gpu_model: String,
    pub used_card_seconds: f64,
    pub used_within_card_seconds: f64,
}

/// One GPU pod object's wait: from its first Pending sample to its first Running one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingPodRow {
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    pub team: String,
    /// The first scrape seeing it Pending (null: Pending unseen, e.g. before the window).
    pub first_pending: Option<String>,
    /// The first scrape seeing it Running (null: never seen Running).
    pub first_running: Option<String>,
    /// The last scrape seeing it.
    pub last_seen: String,
    /// Its cards (`q·f`, as metered while Running) × the scrape interval, over the scrapes seeing it Pending.
    pub pending_card_seconds: f64,
    /// Never seen Running in the window (`first_running` null): the never-ran pods, pods still Pending at its end,
    /// and also pods seen only after they ended (Running before the window).
    pub never_ran: bool,
}

/// The GPU-seconds the truth counts for pod object `p` (SPEC §3: each Running scrape holds `q·f` for an interval;
/// a KSM outage counts only where bridged), added per hour into `out`.
fn held_by_hour(c: &Cluster, grid: &Grid, p: usize, out: &mut [ModelSeconds]) {
    let pod = &c.pods[p];
    if pod.kind == Kind::Unknown {
        return;
    }
    let qf = pod.q as f64 * pod.f;
    let step_s = grid.step_ms as f64 / 1000.0;
    let model = c.nodes[pod.node].ty.known_model().unwrap_or("unknown");
    let (ka, kb) = grid.range(pod.t1, pod.t2, 0);
    for k in ka..kb {
        if let Some(g) = c.ksm_gap_at(k)
            && !bridged(grid, pod, g)
        {
            continue;
        }
        *out[grid.hour_of(k)].entry(model).or_default() += qf * step_s;
    }
}

/// GPU-seconds per GPU model.
type ModelSeconds = BTreeMap<&'static str, f64>;

fn split_row(
    hour: String,
    kind: &str,
    scope: &str,
    team: &str,
    guaranteed: f64,
    by_model: &ModelSeconds,
) -> QuotaHourRow {
    let used: f64 = by_model.values().sum();
    let within = used.min(guaranteed);
    let models = by_model
        .iter()
        .filter(|(_, v)| **v > 0.0)
        .map(|(m, v)| QuotaModelRow {
            gpu_model: m.to_string(),
            used_card_seconds: *v,
            used_within_card_seconds: if used > 0.0 { v * within / used } else { 0.0 },
        })
        .collect();
    QuotaHourRow {
        models,
        hour,
        scope_kind: kind.to_string(),
        scope: scope.to_string(),
        team: team.to_string(),
        guaranteed_card_seconds: guaranteed,
        used_card_seconds: used,
        used_within_card_seconds: within,
        borrowed_card_seconds: (used - guaranteed).max(0.0),
        reserved_idle_card_seconds: guaranteed - within,
    }
}

/// The quota rows: per hour, the namespaces guaranteed by their ResourceQuota (those without a queue) and the
/// ClusterQueues, each in every hour with a sample of its guarantee.
fn quota_rows(c: &Cluster, grid: &Grid, plan: &Plan) -> Vec<QuotaHourRow> {
    let step_s = grid.step_ms as f64 / 1000.0;
    let hours = ((grid.end_ms - grid.start_ms + HOUR_MS - 1) / HOUR_MS) as usize;
    // GPU-seconds per namespace and hour, and per queue and hour (its queued pods')
    let mut ns_used = vec![vec![ModelSeconds::new(); hours]; NAMESPACES.len()];
    let mut queue_used = vec![vec![ModelSeconds::new(); hours]; QUEUES.len()];
    for (p, pod) in c.pods.iter().enumerate() {
        held_by_hour(c, grid, p, &mut ns_used[pod.ns]);
        if let Some(q) = queue_of_pod(pod) {
            held_by_hour(c, grid, p, &mut queue_used[q]);
        }
    }
    // namespaces guaranteed by their ResourceQuota, in the order of `NAMESPACES`
    let mut scopes: Vec<usize> = QUOTAS.iter().map(|o| o.ns).filter(|&ns| queue_of(ns).is_none()).collect();
    scopes.sort_unstable();
    scopes.dedup();
    // Σ over the hour's scrapes of the guarantee
    let mut ns_points = vec![vec![0.0; hours]; NAMESPACES.len()];
    let mut queue_points = vec![vec![0.0; hours]; QUEUES.len()];
    let mut sampled = vec![false; hours];
    for k in (0..grid.len).filter(|k| c.ksm_up(*k)) {
        let h = grid.hour_of(k);
        sampled[h] = true;
        for &ns in &scopes {
            let least = QUOTAS.iter().filter(|o| o.ns == ns).map(|o| o.hard.at(plan, k)).min().unwrap_or(0);
            ns_points[ns][h] += least as f64;
        }
        for (q, cq) in QUEUES.iter().enumerate() {
            queue_points[q][h] += cq.nominal;
        }
    }
    let mut rows = Vec::new();
    for h in (0..hours).filter(|&h| sampled[h]) {
        let hour = || rfc3339(grid.start_ms + h as i64 * HOUR_MS);
        for &ns in &scopes {
            let g = ns_points[ns][h] * step_s;
            rows.push(split_row(hour(), "namespace", NAMESPACES[ns].0, team_of(ns), g, &ns_used[ns][h]));
        }
        for (q, cq) in QUEUES.iter().enumerate() {
            let g = queue_points[q][h] * step_s;
            rows.push(split_row(hour(), "cluster_queue", cq.name, cq.team, g, &queue_used[q][h]));
        }
    }
    rows
}

/// A pod object's row: Pending `[t0, t1)`, Running `[t1, t2)`, seen until `t3`, cut on the grid as the phases are
/// written; `None` without a sample.
fn pending_row(
    c: &Cluster,
    grid: &Grid,
    ns: usize,
    (pod, uid): (&str, &str),
    (t0, t1, t2, t3): (i64, i64, i64, i64),
    cards: f64,
) -> Option<PendingPodRow> {
    let (ka, kb) = grid.range(t0, t3, 0);
    let k1 = grid.count_before(t1, 0).clamp(ka, kb);
    let k2 = grid.count_before(t2, 0).clamp(k1, kb);
    let up = |k: &u64| c.ksm_up(*k);
    let last = (ka..kb).rev().find(up)?;
    let first_running = (k1..k2).find(up).map(|k| rfc3339(grid.at(k)));
    let pending = (ka..k1).filter(up).count() as f64;
    Some(PendingPodRow {
        namespace: NAMESPACES[ns].0.to_string(),
        pod: pod.to_string(),
        uid: uid.to_string(),
        team: team_of(ns).to_string(),
        first_pending: (ka..k1).find(up).map(|k| rfc3339(grid.at(k))),
        never_ran: first_running.is_none(),
        first_running,
        last_seen: rfc3339(grid.at(last)),
        pending_card_seconds: cards * pending * grid.step_ms as f64 / 1000.0,
    })
}

/// The truth of quotas and queue waits: `quota` rows per hour and scope, `pending` rows per GPU pod object with a
/// sample (the never-ran pods among them), by namespace, pod name and creation.
pub fn truth(c: &Cluster, grid: &Grid, plan: &Plan) -> (Vec<QuotaHourRow>, Vec<PendingPodRow>) {
    if !plan.enabled {
        return (Vec::new(), Vec::new());
    }
    let mut pending: Vec<(i64, PendingPodRow)> = Vec::new();
    for (p, pod) in c.pods.iter().enumerate().filter(|(_, pod)| pod.kind != Kind::Unknown) {
        let times = (pod.t0, pod.t1, pod.t2, pod.t3);
        let cards = pod.q as f64 * pod.f;
        if let Some(r) = pending_row(c, grid, pod.ns, (c.pod_name(p), &pod.uid), times, cards) {
            pending.push((pod.t0, r));
        }
    }
    for s in &plan.stuck {
        let times = (s.t0, s.t3, s.t3, s.t3);
        if let Some(r) = pending_row(c, grid, s.ns, (&s.name, &s.uid), times, f64::from(s.q)) {
            pending.push((s.t0, r));
        }
    }
    pending.sort_by(|a, b| (&a.1.namespace, &a.1.pod, a.0, &a.1.uid).cmp(&(&b.1.namespace, &b.1.pod, b.0, &b.1.uid)));
    (quota_rows(c, grid, plan), pending.into_iter().map(|x| x.1).collect())
}
