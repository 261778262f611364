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
/// Replicas per card of the 10-way time-slicing nodes of the shared profile.
pub const TS_REPLICAS_10: u32 = 10;

/// Which cluster is simulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Profile {
    /// The seven node types of every feature (`ALL_NODE_TYPES`).
    #[default]
    Standard,
    /// Shared cards as clusters really run them (`SHARED_NODE_TYPES`): time-slicing under the device plugin's
    /// default names and renamed, 4 and 10 replicas, dcgm-exporter before and after 4.8.2, MPS, HAMi with
    /// whole-card requests, MIG's single strategy (known by DCGM and by GFD alone), a node nothing counts.
    Shared,
    /// Every setup the differential exactness harness (`tests/exactness.rs`) reads back by every path
    /// (`EXACT_NODE_TYPES`): the standard and shared node types, time-slicing renamed under dcgm-exporter 4.8.2 and
    /// plain without GFD before it, MIG mixed on an A30 (4 slices), MIG single known by DCGM alone; the exporters on
    /// their own interval (1.5 times KSM's by default) and phase, and some pods shorter than one interval.
    Exactness,
}

impl std::str::FromStr for Profile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "standard" => Ok(Self::Standard),
            "shared" => Ok(Self::Shared),
            "exactness" => Ok(Self::Exactness),
            other => Err(format!("unknown profile `{other}` (expected standard, shared or exactness)")),
        }
    }
}

impl Profile {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Standard => "standard",
            Self::Shared => "shared",
            Self::Exactness => "exactness",
        }
    }

    pub fn node_types(self) -> &'static [NodeType] {
        match self {
            Self::Standard => &ALL_NODE_TYPES,
            Self::Shared => &SHARED_NODE_TYPES,
            Self::Exactness => &EXACT_NODE_TYPES,
        }
    }
}

/// How a node's dcgm-exporter reports shared cards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exporter {
    /// Before 4.8.2 with `--kubernetes-virtual-gpus`: a copy of the card's value per held replica; an idle card
    /// has no series while another card of the node is busy.
    CopiesDropIdle,
    /// The copies without the drop (the standard profile's time-slicing node).
    Copies,
    /// 4.8.2 and later: the card's unlabelled series always, and per-pod `GPU_UTIL` / `FB_USED` (per replica).
    PerPod,
    /// Without `--kubernetes-virtual-gpus`: device-level series only.
    DeviceOnly,
}

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
    /// Shared profile: L40S time-sliced 4 ways under the default names (`nvidia_com_gpu` = cards × 4), copies
    /// with idle cards dropped (dcgm-exporter < 4.8.2), GFD labels (product, count, replicas, time-slicing).
    TsPlainL40S,
    /// Shared profile: A100 time-sliced 10 ways, renamed (`nvidia_com_gpu_shared`), copies with idle cards
    /// dropped, no GFD labels (cards from DCGM over a day).
    TsRenamedA100,
    /// Shared profile: A100 time-sliced 10 ways under the default names, dcgm-exporter 4.8.2 per-pod series.
    TsPodSeriesA100,
    /// Shared profile: L40S with MPS, 4 replicas under the default names, GFD labels (mps), dcgm-exporter
    /// without `--kubernetes-virtual-gpus` (device-level series only: its pods are unmetered).
    MpsL40S,
    /// Shared profile: HAMi A100 (cards × 10) where some containers ask for `nvidia_com_gpu` alone (whole cards).
    HamiWholeA100,
    /// Shared profile: A100 in MIG's single strategy, two 3g.40gb per card, known by DCGM and GFD.
    MigSingleA100,
    /// Shared profile: A30 in MIG's single strategy, two 2g.12gb per card, known by GFD labels alone.
    MigSingleA30,
    /// Shared profile: L40S time-sliced 4 ways under the default names with nothing to count its cards (no
    /// DCGM, no GFD): taken at face value until configured.
    UncountableL40S,
    /// Exactness profile: A30 in MIG mixed strategy (4 compute slices): cards 0–3 partitioned, 4–7 whole, and
    /// whole-card pods requesting `nvidia_com_gpu` beside the slices; its capacity lists `nvidia_com_gpu` alone, so
    /// only the pods' `nvidia_com_mig_*` requests say the node is mixed.
    MigMixedA30,
    /// Exactness profile: L40S time-sliced 4 ways, renamed (`nvidia_com_gpu_shared`), dcgm-exporter 4.8.2 per-pod
    /// series beside the device series, no GFD labels.
    TsRenamedPodL40S,
    /// Exactness profile: A100 time-sliced 4 ways under the default names, copies with idle cards dropped
    /// (dcgm-exporter < 4.8.2), no GFD labels: its cards are counted from DCGM over a day.
    TsPlainDropA100,
    /// Exactness profile: A100 in MIG's single strategy (two 3g.40gb per card) known by DCGM alone (no GFD).
    MigSingleDcgmA100,
}

/// The exactness profile's node types; node `i` gets type `i mod 19`.
pub const EXACT_NODE_TYPES: [NodeType; 19] = [
    NodeType::WholeA100,
    NodeType::WholeH100,
    NodeType::WholeL40S,
    NodeType::NoDcgmH100,
    NodeType::MigA100,
    NodeType::MigMixedA30,
    NodeType::TimeSliceL40S,
    NodeType::TsPlainL40S,
    NodeType::TsPlainDropA100,
    NodeType::TsRenamedA100,
    NodeType::TsPodSeriesA100,
    NodeType::TsRenamedPodL40S,
    NodeType::MpsL40S,
    NodeType::HamiA100,
    NodeType::HamiWholeA100,
    NodeType::MigSingleA100,
    NodeType::MigSingleDcgmA100,
    NodeType::MigSingleA30,
    NodeType::UncountableL40S,
];

/// The shared profile's node types; node `i` gets type `i mod 9`.
pub const SHARED_NODE_TYPES: [NodeType; 9] = [
    NodeType::TsPlainL40S,
    NodeType::TsRenamedA100,
    NodeType::TsPodSeriesA100,
    NodeType::MpsL40S,
    NodeType::HamiWholeA100,
    NodeType::MigSingleA100,
    NodeType::MigSingleA30,
    NodeType::UncountableL40S,
    NodeType::WholeA100,
];

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
const A30: &str = "NVIDIA A30";

impl NodeType {
    /// The type of node number `i` of a profile.
    pub fn of_node(profile: Profile, i: usize) -> Self {
        let types = profile.node_types();
        types[i % types.len()]
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
            NodeType::TsPlainL40S => "l40s-ts4",
            NodeType::TsRenamedA100 => "a100-tsr10",
            NodeType::TsPodSeriesA100 => "a100-ts10pod",
            NodeType::MpsL40S => "l40s-mps4",
            NodeType::HamiWholeA100 => "a100-hamiw",
            NodeType::MigSingleA100 => "a100-migs",
            NodeType::MigSingleA30 => "a30-migs-gfd",
            NodeType::UncountableL40S => "l40s-uncounted",
            NodeType::MigMixedA30 => "a30-mig",
            NodeType::TsRenamedPodL40S => "l40s-tsr4pod",
            NodeType::TsPlainDropA100 => "a100-ts4drop",
            NodeType::MigSingleDcgmA100 => "a100-migs-dcgm",
        }
    }

    /// The physical card model (the DCGM `modelName`, where the node has DCGM).
    pub fn model(self) -> &'static str {
        match self {
            NodeType::WholeA100
            | NodeType::MigA100
            | NodeType::HamiA100
            | NodeType::TsRenamedA100
            | NodeType::TsPodSeriesA100
            | NodeType::HamiWholeA100
            | NodeType::MigSingleA100
            | NodeType::TsPlainDropA100
            | NodeType::MigSingleDcgmA100 => A100,
            NodeType::WholeH100 | NodeType::NoDcgmH100 => H100,
            NodeType::WholeL40S
            | NodeType::TimeSliceL40S
            | NodeType::TsPlainL40S
            | NodeType::MpsL40S
            | NodeType::UncountableL40S
            | NodeType::TsRenamedPodL40S => L40S,
            NodeType::MigSingleA30 | NodeType::MigMixedA30 => A30,
        }
    }

    /// The card's memory as its product is sold (GB): the denominator of a MIG profile's memory share.
    pub fn card_mem_gb(self) -> u32 {
        match self.model() {
            A100 | H100 => 80,
            A30 => 24,
            _ => 48,
        }
    }

    /// Framebuffer size of one physical card in MiB.
    pub fn card_mem_mib(self) -> u32 {
        match self.model() {
            A100 => 81920,
            H100 => 81559,
            A30 => 24576,
            _ => 46068,
        }
    }

    /// Whether a dcgm-exporter runs on the node.
    pub fn has_dcgm(self) -> bool {
        !matches!(self, NodeType::NoDcgmH100 | NodeType::MigSingleA30 | NodeType::UncountableL40S)
    }

    /// How its dcgm-exporter reports shared cards.
    pub fn exporter(self) -> Exporter {
        match self {
            NodeType::TsPlainL40S | NodeType::TsRenamedA100 | NodeType::TsPlainDropA100 => Exporter::CopiesDropIdle,
            NodeType::TsPodSeriesA100 | NodeType::TsRenamedPodL40S => Exporter::PerPod,
            NodeType::MpsL40S | NodeType::HamiA100 | NodeType::HamiWholeA100 => Exporter::DeviceOnly,
            _ => Exporter::Copies,
        }
    }

    /// The GPU model cardhour can know: DCGM's `modelName`, or GFD's product label.
    pub fn known_model(self) -> Option<&'static str> {
        (self.has_dcgm() || self.gfd_labels().iter().any(|(l, _)| *l == "label_nvidia_com_gpu_product"))
            .then(|| self.model())
    }

    /// Replicas per card of a time-slicing or MPS node (0 elsewhere).
    pub fn replicas(self) -> u32 {
        match self {
            NodeType::TimeSliceL40S
            | NodeType::TsPlainL40S
            | NodeType::MpsL40S
            | NodeType::UncountableL40S
            | NodeType::TsRenamedPodL40S
            | NodeType::TsPlainDropA100 => TS_REPLICAS,
            NodeType::TsRenamedA100 | NodeType::TsPodSeriesA100 => TS_REPLICAS_10,
            _ => 0,
        }
    }

    /// The KSM resource its time-slicing or MPS pods request.
    pub fn shared_resource(self) -> &'static str {
        match self {
            NodeType::TimeSliceL40S | NodeType::TsRenamedA100 | NodeType::TsRenamedPodL40S => "nvidia_com_gpu_shared",
            _ => "nvidia_com_gpu",
        }
    }

    /// Compute slices of the card (MIG): 4 on an A30, 7 on the others.
    pub fn mig_slices(self) -> u32 {
        if self.model() == A30 { 4 } else { MIG_SLICES }
    }

    /// The mixed-strategy partition of a MIG node: (card, profile, GPU_I_ID); the other cards are whole.
    pub fn mig_layout(self) -> &'static [(u32, MigProfile, u32)] {
        match self {
            NodeType::MigA100 => &MIG_LAYOUT,
            NodeType::MigMixedA30 => &MIG_LAYOUT_A30,
            _ => &[],
        }
    }

    /// The MIG profile of a single-strategy node, and the compute slices of its card.
    pub fn mig_single(self) -> Option<(MigProfile, u32)> {
        match self {
            NodeType::MigSingleA100 | NodeType::MigSingleDcgmA100 => Some((MIG_3G, MIG_SLICES)),
            NodeType::MigSingleA30 => Some((MIG_2G_A30, 4)),
            _ => None,
        }
    }

    /// The GPU feature discovery labels of `kube_node_labels` (KSM's names), empty where GFD is not exported.
    pub fn gfd_labels(self) -> Vec<(&'static str, String)> {
        let cards = GPUS_PER_NODE;
        let product = |suffix: &str| self.model().replace(' ', "-") + suffix;
        match self {
            NodeType::TsPlainL40S => vec![
                ("label_nvidia_com_gpu_product", product("")),
                ("label_nvidia_com_gpu_count", cards.to_string()),
                ("label_nvidia_com_gpu_replicas", TS_REPLICAS.to_string()),
                ("label_nvidia_com_gpu_sharing_strategy", "time-slicing".into()),
            ],
            NodeType::MpsL40S => vec![
                ("label_nvidia_com_gpu_product", product("")),
                ("label_nvidia_com_gpu_count", cards.to_string()),
                ("label_nvidia_com_gpu_replicas", TS_REPLICAS.to_string()),
                ("label_nvidia_com_gpu_sharing_strategy", "mps".into()),
            ],
            NodeType::MigSingleA100 | NodeType::MigSingleA30 => {
                let (p, _) = self.mig_single().unwrap_or((MIG_3G, MIG_SLICES));
                vec![
                    ("label_nvidia_com_gpu_product", product(&format!("-MIG-{}", p.name))),
                    ("label_nvidia_com_gpu_count", (cards * MIG_SINGLE_PER_CARD).to_string()),
                    ("label_nvidia_com_mig_strategy", "single".into()),
                ]
            }
            _ => Vec::new(),
        }
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
            // kube-state-metrics exporting the card resource alone: only the pods' requests tell the MIG resources
            NodeType::MigMixedA30 => &[("nvidia_com_gpu", 4)],
            NodeType::TsRenamedPodL40S => &[("nvidia_com_gpu_shared", GPUS_PER_NODE * TS_REPLICAS)],
            NodeType::TsPlainDropA100 => &[("nvidia_com_gpu", GPUS_PER_NODE * TS_REPLICAS)],
            NodeType::TimeSliceL40S => &[("nvidia_com_gpu_shared", GPUS_PER_NODE * TS_REPLICAS)],
            NodeType::HamiA100 | NodeType::HamiWholeA100 => &[("nvidia_com_gpu", GPUS_PER_NODE * HAMI_SPLIT)],
            NodeType::TsPlainL40S | NodeType::MpsL40S | NodeType::UncountableL40S => {
                &[("nvidia_com_gpu", GPUS_PER_NODE * TS_REPLICAS)]
            }
            NodeType::TsRenamedA100 => &[("nvidia_com_gpu_shared", GPUS_PER_NODE * TS_REPLICAS_10)],
            NodeType::TsPodSeriesA100 => &[("nvidia_com_gpu", GPUS_PER_NODE * TS_REPLICAS_10)],
            NodeType::MigSingleA100 | NodeType::MigSingleA30 | NodeType::MigSingleDcgmA100 => {
                &[("nvidia_com_gpu", GPUS_PER_NODE * MIG_SINGLE_PER_CARD)]
            }
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
    /// The memory the profile promises as its name prints it (GB): its share of the card is this over the card's
    /// nominal memory ([`NodeType::card_mem_gb`]).
    pub mem_gb: u32,
}

pub const MIG_1G: MigProfile =
    MigProfile { g: 1, name: "1g.10gb", resource: "nvidia_com_mig_1g_10gb", mem_mib: 9728, mem_gb: 10 };
pub const MIG_2G: MigProfile =
    MigProfile { g: 2, name: "2g.20gb", resource: "nvidia_com_mig_2g_20gb", mem_mib: 19968, mem_gb: 20 };
pub const MIG_3G: MigProfile =
    MigProfile { g: 3, name: "3g.40gb", resource: "nvidia_com_mig_3g_40gb", mem_mib: 40192, mem_gb: 40 };
pub const MIG_7G: MigProfile =
    MigProfile { g: 7, name: "7g.80gb", resource: "nvidia_com_mig_7g_80gb", mem_mib: 80896, mem_gb: 80 };
/// The A30's 2g.12gb (under the single strategy its units are plain `nvidia_com_gpu`).
pub const MIG_2G_A30: MigProfile =
    MigProfile { g: 2, name: "2g.12gb", resource: "nvidia_com_mig_2g_12gb", mem_mib: 11776, mem_gb: 12 };
/// The A30's 1g.6gb and 4g.24gb (of 4 compute slices).
pub const MIG_1G_A30: MigProfile =
    MigProfile { g: 1, name: "1g.6gb", resource: "nvidia_com_mig_1g_6gb", mem_mib: 5836, mem_gb: 6 };
pub const MIG_4G_A30: MigProfile =
    MigProfile { g: 4, name: "4g.24gb", resource: "nvidia_com_mig_4g_24gb", mem_mib: 24062, mem_gb: 24 };
/// MIG instances per card on the single-strategy nodes (two 3g.40gb on an A100, two 2g.12gb on an A30).
pub const MIG_SINGLE_PER_CARD: u32 = 2;

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

/// The A30 MIG node's partition (mixed strategy): (card, profile, GPU_I_ID). Cards 4–7 are whole.
pub const MIG_LAYOUT_A30: [(u32, MigProfile, u32); 10] = [
    (0, MIG_1G_A30, 3),
    (0, MIG_1G_A30, 4),
    (0, MIG_1G_A30, 5),
    (0, MIG_1G_A30, 6),
    (1, MIG_2G_A30, 1),
    (1, MIG_2G_A30, 2),
    (2, MIG_2G_A30, 1),
    (2, MIG_1G_A30, 5),
    (2, MIG_1G_A30, 6),
    (3, MIG_4G_A30, 0),
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
