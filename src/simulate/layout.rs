//! Static cluster layout: the seven node types, their GPU models and label conventions, the MIG
//! partition of the MIG node, HAMi lane budgets, and the namespaces with their teams.
//!
//! Everything here is a constant: the seeded randomness lives in `schedule`.

/// Every simulated node carries eight physical cards.
pub const GPUS_PER_NODE: u32 = 8;
/// Time-slicing replicas per physical card on the time-slicing node.
pub const TS_REPLICAS: u32 = 4;
/// HAMi advertises `nvidia_com_gpu` = cards × this split count.
pub const HAMI_SPLIT: u32 = 10;
/// MIG compute slices of an A100.
pub const MIG_SLICES: u32 = 7;

/// The seven node types; node `i` gets type `i mod 7`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeType {
    /// Whole A100 cards; dcgm-exporter with SM_ACTIVE enabled, plain workload labels, `Hostname`.
    WholeA100,
    /// Whole H100 cards; no SM_ACTIVE, `exported_*` workload labels, `hostname`, daily scrape gap.
    WholeH100,
    /// Whole L40S cards; only GPU_UTIL (integer percent).
    WholeL40S,
    /// A100 in MIG mixed strategy: cards 0–3 partitioned, 4–7 whole.
    MigA100,
    /// L40S with time-slicing (4 replicas) and `--kubernetes-virtual-gpus` copies.
    TimeSliceL40S,
    /// A100 shared through HAMi (gpucores / gpumem).
    HamiA100,
    /// Whole H100 cards without any dcgm-exporter: its pods are entirely unmetered.
    NoDcgmH100,
}

/// All node types in the order of `NodeType::of_node`.
pub const ALL_NODE_TYPES: [NodeType; 7] = [
    NodeType::WholeA100,
    NodeType::WholeH100,
    NodeType::WholeL40S,
    NodeType::MigA100,
    NodeType::TimeSliceL40S,
    NodeType::HamiA100,
    NodeType::NoDcgmH100,
];

const A100: &str = "NVIDIA A100-SXM4-80GB";
const H100: &str = "NVIDIA H100 80GB HBM3";
const L40S: &str = "NVIDIA L40S";

impl NodeType {
    /// The type of node number `i`.
    pub fn of_node(i: usize) -> Self {
        ALL_NODE_TYPES[i % ALL_NODE_TYPES.len()]
    }

    /// The part of the node name that tells the type, e.g. `a100` in `gpu-a100-00`.
    pub fn slug(self) -> &'static str {
        match self {
            NodeType::WholeA100 => "a100",
            NodeType::WholeH100 => "h100",
            NodeType::WholeL40S => "l40s",
            NodeType::MigA100 => "a100-mig",
            NodeType::TimeSliceL40S => "l40s-ts",
            NodeType::HamiA100 => "a100-hami",
            NodeType::NoDcgmH100 => "h100-nodcgm",
        }
    }

    /// The physical card model (the DCGM `modelName`, where the node has DCGM).
    pub fn model(self) -> &'static str {
        match self {
            NodeType::WholeA100 | NodeType::MigA100 | NodeType::HamiA100 => A100,
            NodeType::WholeH100 | NodeType::NoDcgmH100 => H100,
            NodeType::WholeL40S | NodeType::TimeSliceL40S => L40S,
        }
    }

    /// Framebuffer size of one physical card in MiB.
    pub fn card_mem_mib(self) -> u32 {
        match self.model() {
            A100 => 81920,
            H100 => 81559,
            _ => 46068,
        }
    }

    /// Whether a dcgm-exporter runs on the node.
    pub fn has_dcgm(self) -> bool {
        self != NodeType::NoDcgmH100
    }

    /// The host label name of the node's DCGM series.
    pub fn host_label(self) -> &'static str {
        match self {
            NodeType::WholeH100 => "hostname",
            _ => "Hostname",
        }
    }

    /// Workload label names (namespace, pod, container) on the node's DCGM series. The H100 node
    /// was scraped without `honor_labels`, so Prometheus renamed them to `exported_*`.
    pub fn workload_labels(self) -> [&'static str; 3] {
        match self {
            NodeType::WholeH100 => ["exported_namespace", "exported_pod", "exported_container"],
            _ => ["namespace", "pod", "container"],
        }
    }

    /// `kube_node_status_capacity` of the node (resource, value).
    pub fn capacity(self) -> &'static [(&'static str, u32)] {
        match self {
            NodeType::WholeA100 | NodeType::WholeH100 | NodeType::WholeL40S | NodeType::NoDcgmH100 => {
                &[("nvidia_com_gpu", 8)]
            }
            NodeType::MigA100 => &[
                ("nvidia_com_gpu", 4),
                ("nvidia_com_mig_1g_10gb", 9),
                ("nvidia_com_mig_2g_20gb", 1),
                ("nvidia_com_mig_3g_40gb", 3),
                ("nvidia_com_mig_7g_80gb", 1),
            ],
            NodeType::TimeSliceL40S => &[("nvidia_com_gpu_shared", GPUS_PER_NODE * TS_REPLICAS)],
            NodeType::HamiA100 => &[("nvidia_com_gpu", GPUS_PER_NODE * HAMI_SPLIT)],
        }
    }
}

/// A MIG profile of the A100.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MigProfile {
    /// Compute slices (the `g` of `<g>g.<mem>gb`).
    pub g: u32,
    /// The profile as dcgm-exporter writes it in `GPU_I_PROFILE`.
    pub name: &'static str,
    /// The extended resource as kube-state-metrics writes it.
    pub resource: &'static str,
    /// Instance framebuffer in MiB.
    pub mem_mib: u32,
}

pub const MIG_1G: MigProfile = MigProfile { g: 1, name: "1g.10gb", resource: "nvidia_com_mig_1g_10gb", mem_mib: 9728 };
pub const MIG_2G: MigProfile = MigProfile { g: 2, name: "2g.20gb", resource: "nvidia_com_mig_2g_20gb", mem_mib: 19968 };
pub const MIG_3G: MigProfile = MigProfile { g: 3, name: "3g.40gb", resource: "nvidia_com_mig_3g_40gb", mem_mib: 40192 };
pub const MIG_7G: MigProfile = MigProfile { g: 7, name: "7g.80gb", resource: "nvidia_com_mig_7g_80gb", mem_mib: 80896 };

/// The MIG node's partition: (card, profile, GPU_I_ID). Cards 4–7 are whole.
pub const MIG_LAYOUT: [(u32, MigProfile, u32); 14] = [
    (0, MIG_1G, 7),
    (0, MIG_1G, 8),
    (0, MIG_1G, 9),
    (0, MIG_1G, 10),
    (0, MIG_1G, 11),
    (0, MIG_1G, 12),
    (0, MIG_1G, 13),
    (1, MIG_3G, 2),
    (1, MIG_2G, 5),
    (1, MIG_1G, 13),
    (1, MIG_1G, 14),
    (2, MIG_3G, 1),
    (2, MIG_3G, 2),
    (3, MIG_7G, 0),
];

/// Cards of the MIG node that are not partitioned.
pub const MIG_WHOLE_CARDS: std::ops::Range<u32> = 4..8;

/// Ways to split a HAMi card's 100 cores into lanes of 20–50 cores (each lane holds one pod at a
/// time, so the cores on a card never sum above 100).
pub const HAMI_LANE_LAYOUTS: [&[u32]; 6] =
    [&[50, 50], &[50, 30, 20], &[40, 30, 30], &[30, 30, 20, 20], &[20, 20, 20, 20, 20], &[40, 40, 20]];

/// Namespaces and their `label_team` (None: no label, so team `unassigned`).
pub const NAMESPACES: [(&str, Option<&str>); 8] = [
    ("vision-train", Some("vision")),
    ("vision-dev", Some("vision")),
    ("nlp-prod", Some("nlp")),
    ("nlp-research", Some("nlp")),
    ("recsys", Some("recsys")),
    ("platform-infer", Some("platform")),
    ("speech", None),
    ("sandbox", None),
];

pub const NS_VISION_TRAIN: usize = 0;
pub const NS_VISION_DEV: usize = 1;
pub const NS_NLP_PROD: usize = 2;
pub const NS_NLP_RESEARCH: usize = 3;
pub const NS_RECSYS: usize = 4;
pub const NS_PLATFORM_INFER: usize = 5;
pub const NS_SPEECH: usize = 6;
pub const NS_SANDBOX: usize = 7;

/// Team of a namespace without a `team` label.
pub const UNASSIGNED: &str = "unassigned";

/// Teams in report order.
pub const TEAMS: [&str; 5] = ["vision", "nlp", "recsys", "platform", UNASSIGNED];

/// Team of namespace index `ns`.
pub fn team_of(ns: usize) -> &'static str {
    NAMESPACES[ns].1.unwrap_or(UNASSIGNED)
}
