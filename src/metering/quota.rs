//! Quotas against use (SPEC §10): per hour and quota scope (a namespace's ResourceQuota, a Kueue ClusterQueue, a
//! Volcano queue), the guarantee's card-seconds split by the scope's own GPU-seconds — cardhour's metering, not the
//! quota's `used`, which counts requests of pods that may not be Running — into used within the guarantee,
//! borrowed above it and reserved idle; and what each GPU model of the scope's pods used of it (the credit of
//! reserved-quota billing is priced by the model that ran, not by the model the reservation names). Pure.

use std::collections::{BTreeMap, BTreeSet};

use super::output::UsageRow;
use super::sample::{Sample, infer_interval_ms};

/// What holds a guarantee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeKind {
    /// A namespace's `hard` GPU ResourceQuota (counted only where the namespace has no queue).
    Namespace,
    /// A Kueue ClusterQueue's nominal quota.
    ClusterQueue,
    /// A Volcano queue's guarantee.
    VolcanoQueue,
}

/// One quota scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct QuotaScope {
    pub kind: ScopeKind,
    pub name: String,
}

/// A scope's hour (or a sum of hours): card-seconds throughout.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct QuotaUse {
    /// ∫ guaranteed quota dt.
    pub guaranteed: f64,
    /// min(used, guaranteed).
    pub used_within: f64,
    /// max(0, used − guaranteed): use above the guarantee, lent by other scopes or free capacity.
    pub borrowed: f64,
    /// guaranteed − used within it: paid for, not used.
    pub reserved_idle: f64,
}

impl ScopeKind {
    /// The stored name of the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            ScopeKind::Namespace => "namespace",
            ScopeKind::ClusterQueue => "cluster_queue",
            ScopeKind::VolcanoQueue => "volcano_queue",
        }
    }

    /// The kind a stored name names.
    pub fn parse(s: &str) -> Option<Self> {
        [ScopeKind::Namespace, ScopeKind::ClusterQueue, ScopeKind::VolcanoQueue].into_iter().find(|k| k.as_str() == s)
    }
}

/// One guarantee series: a namespace's ResourceQuota `hard` (one object), a ClusterQueue's nominal quota (one
/// flavor), a Volcano queue's deserved share; in units of its resource (Volcano's milli-units already divided).
#[derive(Debug, Clone)]
pub struct QuotaSeries {
    pub scope: QuotaScope,
    /// The ResourceQuota object, or the Kueue flavor ("" for Volcano): a namespace's objects are each enforced,
    /// so its guarantee is their minimum; a queue's flavors add up.
    pub object: String,
    /// The resource, named as a pod's requests name it (`nvidia_com_gpu`, `nvidia_com_mig_1g_10gb`).
    pub resource: String,
    pub samples: Vec<Sample>,
}

/// A pod labelled into a queue (Kueue's `kueue.x-k8s.io/cluster-queue-name`, Volcano's `volcano.sh/queue-name`,
/// as kube-state-metrics exports them in `kube_pod_labels`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct QueueMember {
    pub namespace: String,
    pub pod: String,
    pub queue: QuotaScope,
}

/// What one hour's quotas are metered from.
#[derive(Debug, Clone, Default)]
pub struct QuotaInput {
    pub guarantees: Vec<QuotaSeries>,
    /// Namespaces with a Kueue LocalQueue (`kueue_local_queue_resource_usage`), by their samples: queued.
    pub local_queues: Vec<(String, Vec<Sample>)>,
    /// Pods in a queue, by their label series' samples (read an hour either side, like a serving pod's model).
    pub members: Vec<(QueueMember, Vec<Sample>)>,
}

impl QuotaInput {
    /// Each labelled pod's queue (namespace, pod → queue): of several label series, the one with the latest sample
    /// near the hour.
    pub fn queues(&self) -> BTreeMap<(&str, &str), &QuotaScope> {
        let mut member: BTreeMap<(&str, &str), (i64, &QuotaScope)> = BTreeMap::new();
        for (m, samples) in &self.members {
            let Some(last) = samples.last() else { continue };
            let e = member.entry((m.namespace.as_str(), m.pod.as_str())).or_insert((i64::MIN, &m.queue));
            if last.t_ms >= e.0 {
                *e = (last.t_ms, &m.queue);
            }
        }
        member.into_iter().map(|(k, (_, q))| (k, q)).collect()
    }
}

/// One quota scope's hour (SPEC §10), card-seconds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QuotaRow {
    pub scope: QuotaScope,
    pub split: QuotaUse,
    /// The scope's use by the GPU model its pods ran on, by model name (see [`split_by_model`]); empty when the
    /// scope used nothing in the hour.
    pub by_model: Vec<ModelUse>,
    /// A namespace scope's team label (the namespace's); `None` for queues, whose team is mapped.
    pub label_team: Option<String>,
}

/// What the pods of one GPU model used of a scope's hour, card-seconds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelUse {
    /// The model as usage rows name it (`unknown` where no source says).
    pub gpu_model: String,
    /// The model's GPU-seconds in the scope.
    pub used: f64,
    /// Its part of the scope's use within the guarantee.
    pub used_within: f64,
}

/// A scope's use within its guarantee by GPU model: each model's share of the used-within is its share of the
/// scope's use (pro rata — the guarantee names no model, and no pod came first within an hour), so the models'
/// within-parts add up to the scope's and a scope that did not borrow has each model's use within whole.
/// `used` is the models' GPU-seconds, in model order.
pub fn split_by_model<M: AsRef<str>>(split: &QuotaUse, used: &BTreeMap<M, f64>) -> Vec<ModelUse> {
    let total = split.used();
    used.iter()
        .filter(|(_, v)| **v > 0.0)
        .map(|(model, &v)| ModelUse {
            gpu_model: model.as_ref().to_string(),
            used: v,
            // no borrowing: every model's use is within, bit for bit
            used_within: if split.borrowed == 0.0 || total <= 0.0 { v } else { v * (split.used_within / total) },
        })
        .collect()
}

/// The hour's quota scopes (SPEC §10): each scope's guarantee (∫ by sample, `ksm_interval_ms` a sample for
/// ResourceQuotas, the queue series' own interval for queues) split by the GPU-seconds of its own pods — a queue's
/// labelled pods, a namespace's where the namespace is in no queue. `cards_per_unit` says how much of a card
/// one unit of a resource is (`None`: not a GPU resource, not counted). Scopes in order, a row where the scope
/// has a guarantee or use in the hour.
pub fn meter_quota(
    input: &QuotaInput,
    rows: &[UsageRow],
    (start_ms, end_ms): (i64, i64),
    ksm_interval_ms: i64,
    cards_per_unit: impl Fn(&str) -> Option<f64>,
    namespace_team: impl Fn(&str) -> Option<String>,
) -> Vec<QuotaRow> {
    let in_hour = |samples: &[Sample]| samples.iter().any(|s| s.t_ms >= start_ms && s.t_ms < end_ms);
    let member = input.queues();
    let queued: BTreeSet<&str> = member
        .keys()
        .map(|(ns, _)| *ns)
        .chain(input.local_queues.iter().filter(|(_, s)| in_hour(s)).map(|(ns, _)| ns.as_str()))
        .collect();
    let queue_interval = infer_interval_ms(
        input.guarantees.iter().filter(|g| g.scope.kind != ScopeKind::Namespace).map(|g| g.samples.as_slice()),
    )
    .unwrap_or(ksm_interval_ms);
    let mut guaranteed: BTreeMap<&QuotaScope, f64> = BTreeMap::new();
    // a namespace's objects: per sample time, the least of them (each is enforced)
    let mut objects: BTreeMap<&QuotaScope, BTreeMap<&str, BTreeMap<i64, f64>>> = BTreeMap::new();
    for g in &input.guarantees {
        let Some(per_unit) = cards_per_unit(&g.resource) else { continue };
        let from = g.samples.partition_point(|s| s.t_ms < start_ms);
        let to = g.samples.partition_point(|s| s.t_ms < end_ms);
        let samples = &g.samples[from..to];
        match g.scope.kind {
            ScopeKind::Namespace if queued.contains(g.scope.name.as_str()) => {}
            ScopeKind::Namespace => {
                let at = objects.entry(&g.scope).or_default().entry(g.object.as_str()).or_default();
                for s in samples {
                    *at.entry(s.t_ms).or_default() += s.v.max(0.0) * per_unit;
                }
            }
            _ => {
                let cards = samples.iter().map(|s| s.v.max(0.0) * per_unit).sum::<f64>();
                *guaranteed.entry(&g.scope).or_default() += cards * queue_interval as f64 / 1000.0;
            }
        }
    }
    for (scope, objects) in objects {
        let mut least: BTreeMap<i64, f64> = BTreeMap::new();
        for at in objects.values() {
            for (t, v) in at {
                least.entry(*t).and_modify(|l| *l = l.min(*v)).or_insert(*v);
            }
        }
        *guaranteed.entry(scope).or_default() += least.values().sum::<f64>() * ksm_interval_ms as f64 / 1000.0;
    }
    // per scope: its GPU-seconds, and the same by model (names borrowed from the rows: no copy per row)
    let mut used: BTreeMap<QuotaScope, (f64, BTreeMap<&str, f64>)> = BTreeMap::new();
    for r in rows {
        let scope = match member.get(&(r.key.namespace.as_str(), r.key.pod.as_str())) {
            Some(queue) => QuotaScope::clone(queue),
            None => QuotaScope { kind: ScopeKind::Namespace, name: r.key.namespace.clone() },
        };
        if scope.kind == ScopeKind::Namespace && !guaranteed.contains_key(&scope) {
            continue; // a namespace without a counted guarantee is no scope
        }
        let (total, by_model) = used.entry(scope).or_default();
        *total += r.gpu_seconds;
        *by_model.entry(r.gpu_model.as_str()).or_default() += r.gpu_seconds;
    }
    let scopes: BTreeSet<QuotaScope> = guaranteed.keys().copied().cloned().chain(used.keys().cloned()).collect();
    scopes
        .into_iter()
        .map(|scope| {
            let (total, by_model) = used.get(&scope).map_or((0.0, None), |(t, m)| (*t, Some(m)));
            let split = split_use(guaranteed.get(&scope).copied().unwrap_or(0.0), total);
            let label_team = (scope.kind == ScopeKind::Namespace).then(|| namespace_team(&scope.name)).flatten();
            let by_model = by_model.map(|m| split_by_model(&split, m)).unwrap_or_default();
            QuotaRow { scope, split, by_model, label_team }
        })
        .collect()
}

impl QuotaUse {
    /// The scope's own use: used within the guarantee plus borrowed.
    pub fn used(&self) -> f64 {
        self.used_within + self.borrowed
    }
}

impl std::ops::Add for QuotaUse {
    type Output = QuotaUse;

    /// A team's figures are the sums over its scopes and hours (each split on its own first).
    fn add(self, o: QuotaUse) -> QuotaUse {
        QuotaUse {
            guaranteed: self.guaranteed + o.guaranteed,
            used_within: self.used_within + o.used_within,
            borrowed: self.borrowed + o.borrowed,
            reserved_idle: self.reserved_idle + o.reserved_idle,
        }
    }
}

/// One scope's hour split by its use (negative inputs, which no gauge or meter gives, count as 0).
pub fn split_use(guaranteed: f64, used: f64) -> QuotaUse {
    let (guaranteed, used) = (guaranteed.max(0.0), used.max(0.0));
    let used_within = used.min(guaranteed);
    QuotaUse { guaranteed, used_within, borrowed: used - used_within, reserved_idle: guaranteed - used_within }
}

/// ∫ of a gauge over `[start_ms, end_ms)` by sample, like any gauge: each sample in the hour holds its value for one
/// scrape interval of its source (`interval_ms`). Seconds × the gauge's unit (cards for a GPU quota).
pub fn gauge_seconds(samples: &[Sample], interval_ms: i64, (start_ms, end_ms): (i64, i64)) -> f64 {
    let from = samples.partition_point(|s| s.t_ms < start_ms);
    let to = samples.partition_point(|s| s.t_ms < end_ms);
    let sum: f64 = samples[from..to].iter().map(|s| s.v.max(0.0)).sum();
    sum * interval_ms as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn use_within_above_and_below_the_guarantee() {
        let u = split_use(8.0 * 3600.0, 3.0 * 3600.0);
        assert_eq!((u.used_within, u.borrowed, u.reserved_idle), (3.0 * 3600.0, 0.0, 5.0 * 3600.0));
        let u = split_use(4.0 * 3600.0, 6.0 * 3600.0);
        assert_eq!((u.used_within, u.borrowed, u.reserved_idle), (4.0 * 3600.0, 2.0 * 3600.0, 0.0));
        let u = split_use(0.0, 3600.0);
        assert_eq!((u.guaranteed, u.borrowed), (0.0, 3600.0), "no guarantee: all of it borrowed");
    }

    #[test]
    fn a_team_sums_its_scopes_each_split_on_its_own() {
        // 16 cards reserved in one queue and 4 used; 2 guaranteed in a namespace and 6 used: the queue's idle
        // cards do not cover the namespace's borrowing
        let team = split_use(16.0, 4.0) + split_use(2.0, 6.0);
        assert_eq!(team, QuotaUse { guaranteed: 18.0, used_within: 6.0, borrowed: 4.0, reserved_idle: 12.0 });
        assert_eq!(team.used(), 10.0);
    }

    #[test]
    fn a_gauge_counts_its_samples_in_the_hour_an_interval_each() {
        let h = 3_600_000;
        let samples: Vec<Sample> = (0..70).map(|k| Sample::new(k * 60_000 - 300_000, 8.0)).collect();
        // 60 samples fall in [0, 1 h): 8 cards × 60 × 60 s
        assert_eq!(gauge_seconds(&samples, 60_000, (0, h)), 8.0 * 3600.0);
        // a quota raised mid-hour: 30 minutes at 4, 30 at 8
        let raised: Vec<Sample> = (0..60).map(|k| Sample::new(k * 60_000, if k < 30 { 4.0 } else { 8.0 })).collect();
        assert_eq!(gauge_seconds(&raised, 60_000, (0, h)), 6.0 * 3600.0);
        assert_eq!(gauge_seconds(&raised, 60_000, (h, 2 * h)), 0.0);
    }

    fn usage(ns: &str, pod: &str, gpu_seconds: f64) -> UsageRow {
        UsageRow {
            key: super::super::ContainerKey { namespace: ns.into(), pod: pod.into(), container: "c".into() },
            resource: "nvidia_com_gpu".into(),
            kind: "whole",
            gpu_model: "A100".into(),
            mig_profile: None,
            node: "n1".into(),
            units: 1.0,
            fraction: 1.0,
            memory_share: None,
            gpu_seconds,
            effective_gpu_seconds: 0.0,
            unmetered_gpu_seconds: 0.0,
            bridged_gpu_seconds: 0.0,
            util_source: super::super::UtilSource::None,
            peak_fb_used_mib: None,
            label_team: None,
        }
    }

    fn every_minute(v: f64) -> Vec<Sample> {
        (0..60).map(|k| Sample::new(k * 60_000, v)).collect()
    }

    fn scope(kind: ScopeKind, name: &str) -> QuotaScope {
        QuotaScope { kind, name: name.into() }
    }

    fn series(kind: ScopeKind, name: &str, object: &str, resource: &str, v: f64) -> QuotaSeries {
        QuotaSeries {
            scope: scope(kind, name),
            object: object.into(),
            resource: resource.into(),
            samples: every_minute(v),
        }
    }

    /// The hour of SPEC §10's rules: a namespace with two ResourceQuotas (the least counts), a namespace with a
    /// ResourceQuota and a LocalQueue (its queue guarantees it, its pods count for the queue), a ClusterQueue of
    /// two flavors (they add up), a Volcano queue without use (all idle), a MIG quota (a slice is g/7 of a card),
    /// a `cpu` quota (not counted), and a pod in no scope.
    #[test]
    fn an_hour_of_scopes() {
        let h = 3_600_000;
        let ns = ScopeKind::Namespace;
        let input = QuotaInput {
            guarantees: vec![
                series(ns, "recsys", "gpu", "nvidia_com_gpu", 8.0),
                series(ns, "recsys", "gpu-cap", "nvidia_com_gpu", 12.0),
                series(ns, "train", "gpu", "nvidia_com_gpu", 16.0),
                series(ns, "mig", "gpu", "nvidia_com_mig_1g_10gb", 7.0),
                series(ns, "cpuonly", "q", "cpu", 64.0),
                series(ScopeKind::ClusterQueue, "cq", "a100", "nvidia_com_gpu", 4.0),
                series(ScopeKind::ClusterQueue, "cq", "h100", "nvidia_com_gpu", 2.0),
                series(ScopeKind::VolcanoQueue, "vq", "", "nvidia_com_gpu", 1.0),
            ],
            local_queues: vec![("train".into(), every_minute(3.0))],
            members: vec![(
                QueueMember {
                    namespace: "train".into(),
                    pod: "job-1".into(),
                    queue: scope(ScopeKind::ClusterQueue, "cq"),
                },
                every_minute(1.0),
            )],
        };
        let rows = [
            usage("recsys", "r", 10.0 * 3600.0),
            usage("train", "job-1", 5.0 * 3600.0),
            usage("other", "x", 3600.0),
            usage("mig", "m", 0.5 * 3600.0),
        ];
        let out = meter_quota(
            &input,
            &rows,
            (0, h),
            60_000,
            |r| match r {
                "nvidia_com_gpu" => Some(1.0),
                "nvidia_com_mig_1g_10gb" => Some(1.0 / 7.0),
                _ => None,
            },
            |ns| (ns == "recsys").then(|| "rec".to_string()),
        );
        let got: Vec<(ScopeKind, &str, QuotaUse, Option<&str>)> =
            out.iter().map(|r| (r.scope.kind, r.scope.name.as_str(), r.split, r.label_team.as_deref())).collect();
        let hr = 3600.0;
        assert_eq!(
            got,
            [
                (ns, "mig", split_use(hr, 0.5 * hr), None),
                (ns, "recsys", split_use(8.0 * hr, 10.0 * hr), Some("rec")),
                (ScopeKind::ClusterQueue, "cq", split_use(6.0 * hr, 5.0 * hr), None),
                (ScopeKind::VolcanoQueue, "vq", split_use(hr, 0.0), None),
            ]
        );
        assert_eq!(out[1].split.borrowed, 2.0 * hr);
        assert_eq!(out[2].split.reserved_idle, hr);
    }

    #[test]
    fn a_queue_seen_only_through_its_pods_borrows_all_it_uses() {
        let input = QuotaInput {
            members: vec![(
                QueueMember { namespace: "a".into(), pod: "p".into(), queue: scope(ScopeKind::VolcanoQueue, "v") },
                every_minute(1.0),
            )],
            ..QuotaInput::default()
        };
        let out = meter_quota(&input, &[usage("a", "p", 100.0)], (0, 3_600_000), 60_000, |_| Some(1.0), |_| None);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].split.guaranteed, out[0].split.borrowed), (0.0, 100.0));
    }

    #[test]
    fn a_queue_over_its_guarantee_shares_the_within_by_model() {
        // cq guarantees 6 cards; 5 A100 and 3 H100 cards run: 6 of 8 within, each model ¾ of its use
        let input = QuotaInput {
            guarantees: vec![series(ScopeKind::ClusterQueue, "cq", "f", "nvidia_com_gpu", 6.0)],
            members: ["a", "h"]
                .map(|pod| {
                    let queue = scope(ScopeKind::ClusterQueue, "cq");
                    (QueueMember { namespace: "train".into(), pod: pod.into(), queue }, every_minute(1.0))
                })
                .to_vec(),
            ..QuotaInput::default()
        };
        let hr = 3600.0;
        let rows =
            [usage("train", "a", 5.0 * hr), UsageRow { gpu_model: "H100".into(), ..usage("train", "h", 3.0 * hr) }];
        let out = meter_quota(&input, &rows, (0, 3_600_000), 60_000, |_| Some(1.0), |_| None);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].split, split_use(6.0 * hr, 8.0 * hr));
        let m = |model: &str, used: f64, within: f64| ModelUse { gpu_model: model.into(), used, used_within: within };
        assert_eq!(out[0].by_model, [m("A100", 5.0 * hr, 3.75 * hr), m("H100", 3.0 * hr, 2.25 * hr)]);
        // within its guarantee a scope's models keep their whole use; an idle scope has none
        let under = split_by_model(&split_use(10.0, 8.0), &BTreeMap::from([("A100", 5.0), ("H100", 3.0)]));
        assert_eq!(under, [m("A100", 5.0, 5.0), m("H100", 3.0, 3.0)]);
        assert!(split_by_model(&split_use(10.0, 0.0), &BTreeMap::<&str, f64>::new()).is_empty());
    }

    proptest! {
        #[test]
        fn the_models_share_the_within_and_nothing_else(
            guaranteed in 0.0f64..1e6,
            uses in proptest::collection::vec(0.0f64..1e6, 1..5),
        ) {
            let used: BTreeMap<String, f64> = uses.iter().enumerate().map(|(i, v)| (format!("m{i}"), *v)).collect();
            let split = split_use(guaranteed, uses.iter().sum());
            let by_model = split_by_model(&split, &used);
            let within: f64 = by_model.iter().map(|m| m.used_within).sum();
            prop_assert!((within - split.used_within).abs() <= 1e-6 * split.used_within.max(1.0));
            prop_assert!((by_model.iter().map(|m| m.used).sum::<f64>() - split.used()).abs() <= 1e-6 * split.used().max(1.0));
            for m in &by_model {
                prop_assert!(m.used_within >= 0.0 && m.used_within <= m.used + 1e-9, "{m:?}");
                prop_assert_eq!(m.used, used[&m.gpu_model]);
            }
        }

        #[test]
        fn the_split_adds_up(guaranteed in 0.0f64..1e7, used in 0.0f64..1e7) {
            let u = split_use(guaranteed, used);
            prop_assert!(u.used_within >= 0.0 && u.borrowed >= 0.0 && u.reserved_idle >= 0.0);
            prop_assert!((u.used_within + u.reserved_idle - guaranteed).abs() <= 1e-6);
            prop_assert!((u.used() - used).abs() <= 1e-6);
            prop_assert!(u.borrowed == 0.0 || u.reserved_idle == 0.0, "a scope never borrows while it idles");
        }
    }
}
