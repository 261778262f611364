//! What each node is, from what it advertises (SPEC §3): its physical cards and where they were counted, its GPU
//! model and where it came from, and how its units share a card — whole cards, time-slicing or MPS replicas
//! (whatever the resource is called), MIG's single strategy, or HAMi.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::input::{GfdLabels, HourInput};
use super::resource::{ResourceKind, card_memory_mib, classify_resource, mig_compute_slices, mig_profile_slices};

/// What configuration says of one node, where nothing on the node tells it (no DCGM, no GFD labels).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSettings {
    /// Physical cards.
    pub cards: Option<u32>,
    /// Time-slicing or MPS replicas per card (cards = advertised units / replicas).
    pub replicas: Option<u32>,
    /// The GPU model, where neither DCGM nor GFD names it.
    pub gpu_model: Option<String>,
    /// How its cards are shared, where nothing on the node says it.
    pub sharing: Option<SharingSetting>,
}

/// A node's sharing as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SharingSetting {
    None,
    TimeSlicing,
    Mps,
    Hami,
}

impl std::str::FromStr for SharingSetting {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "none" => Ok(Self::None),
            "time-slicing" => Ok(Self::TimeSlicing),
            "mps" => Ok(Self::Mps),
            "hami" => Ok(Self::Hami),
            other => Err(format!("unknown sharing `{other}` (expected none, time-slicing, mps or hami)")),
        }
    }
}

impl SharingSetting {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::TimeSlicing => "time-slicing",
            Self::Mps => "mps",
            Self::Hami => "hami",
        }
    }
}

/// Where a node's physical cards were counted, in the order of trust.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CardsSource {
    /// Distinct DCGM device UUIDs over the trailing day.
    Dcgm,
    /// GFD's `nvidia.com/gpu.count`.
    GfdCount,
    /// Advertised units ÷ GFD's `nvidia.com/gpu.replicas`.
    GfdReplicas,
    /// Per-node configuration (or the cluster's HAMi split count).
    Config,
    /// Nothing counts them: a unit is taken as a card (unverified).
    FaceValue,
}

impl CardsSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dcgm => "dcgm",
            Self::GfdCount => "gfd_count",
            Self::GfdReplicas => "gfd_replicas",
            Self::Config => "config",
            Self::FaceValue => "face_value",
        }
    }
}

/// Where a node's GPU model came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelSource {
    Dcgm,
    Gfd,
    Config,
    Unknown,
}

/// How a node's `nvidia_com_gpu` units relate to its cards.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Sharing {
    /// A unit is a card (or the node advertises fewer units than cards: MIG's mixed strategy).
    Exclusive,
    /// Time-slicing or MPS under the device plugin's default config: `replicas` units per card.
    Replicas { replicas: f64, mps: bool },
    /// MIG's single strategy: each unit is an instance of `profile` (`g` compute slices).
    MigSingle { profile: String, g: u32 },
    /// HAMi: units are virtual GPUs, a container's share comes from its `gpucores` (or memory).
    Hami,
}

/// What one node is in one hour.
#[derive(Debug, Clone)]
pub(super) struct NodeFacts {
    pub(super) model: String,
    pub(super) model_source: ModelSource,
    /// Physical cards; `None` where nothing counts them (face value).
    pub(super) cards: Option<f64>,
    pub(super) cards_source: CardsSource,
    pub(super) sharing: Sharing,
    /// Advertised `nvidia_com_gpu` units per physical card: 1 for whole cards, the replicas, HAMi's split, or
    /// the MIG instances a card holds under the single strategy.
    pub(super) plain_per_card: f64,
    /// Replicas per card of `nvidia_com_gpu_shared`, where known.
    pub(super) shared_replicas: Option<f64>,
    /// The sharing of `nvidia_com_gpu_shared` replicas is MPS.
    pub(super) shared_mps: bool,
    pub(super) evidence: Evidence,
}

/// GFD writes the product with dashes for spaces (`NVIDIA-A100-SXM4-80GB`), `-SHARED` appended for renamed
/// replicas and `-MIG-<profile>` under MIG's single strategy: the parent model, spelt as DCGM spells it where a
/// DCGM device of the hour has the same name, else with the vendor's dash made a space (`NVIDIA A30`).
pub fn gfd_model(product: &str, dcgm_models: &[&str]) -> String {
    let mut p = product.trim();
    p = p.strip_suffix("-SHARED").unwrap_or(p);
    if let Some(at) = p.find("-MIG-") {
        p = &p[..at];
    }
    let norm = |s: &str| s.to_ascii_uppercase().replace(|c: char| !c.is_ascii_alphanumeric(), "-");
    if let Some(m) = dcgm_models.iter().find(|m| norm(m) == norm(p)) {
        return (*m).to_string();
    }
    for vendor in ["NVIDIA-", "Tesla-", "Quadro-"] {
        if let Some(rest) = p.strip_prefix(vendor) {
            return format!("{} {rest}", vendor.trim_end_matches('-'));
        }
    }
    p.to_string()
}

/// The MIG profile GFD names in a single-strategy product (`NVIDIA-A100-SXM4-80GB-MIG-3g.40gb` → `3g.40gb`).
pub fn gfd_mig_profile(product: &str) -> Option<&str> {
    product.find("-MIG-").map(|at| &product[at + 5..]).filter(|p| mig_profile_slices(p).is_some())
}

/// Instances of `profile` one card of `model` holds: its compute slices over the profile's, and no more than
/// its memory allows (`1g.20gb` on an 80 GB card: 4, not 7).
pub fn mig_instances_per_card(profile: &str, model: &str) -> Option<u32> {
    let g = mig_profile_slices(profile).filter(|g| *g > 0)?;
    let by_slices = mig_compute_slices(model).unwrap_or(7) / g;
    let mem_gb = super::memory::mig_profile_memory_gb(profile);
    let card_gb = card_memory_mib(model).map(|m| (m / 1024.0) as u32);
    let by_memory = match (mem_gb, card_gb) {
        (Some(p), Some(c)) if p > 0 => c / p,
        _ => u32::MAX,
    };
    Some(by_slices.min(by_memory)).filter(|n| *n > 0)
}

/// Everything known of the hour's nodes.
pub(super) struct Nodes<'a> {
    facts: BTreeMap<&'a str, NodeFacts>,
}

impl<'a> Nodes<'a> {
    pub(super) fn new(input: &'a HourInput, cfg: &super::MeterConfig) -> Self {
        let mut dcgm_model: HashMap<&str, &str> = HashMap::new();
        let mut uuids: HashMap<&str, HashSet<&str>> = HashMap::new();
        let mut uuid_host: HashMap<&str, &str> = HashMap::new();
        let mut mig_profiles: HashMap<&str, BTreeMap<&str, usize>> = HashMap::new();
        // per host and card of the hour: the MIG profiles its series carry (none: an unpartitioned card)
        let mut partitions: HashMap<&str, BTreeMap<&str, HashSet<Option<&str>>>> = HashMap::new();
        for d in &input.devices {
            let Some(host) = d.host.as_deref() else { continue };
            if let Some(m) = d.model.as_deref() {
                dcgm_model.entry(host).or_insert(m);
            }
            if !d.samples.is_empty() {
                uuids.entry(host).or_default().insert(d.uuid.as_str());
                uuid_host.entry(d.uuid.as_str()).or_insert(host);
                if let Some(p) = d.mig_profile.as_deref() {
                    *mig_profiles.entry(host).or_default().entry(p).or_default() += 1;
                }
                partitions
                    .entry(host)
                    .or_default()
                    .entry(d.uuid.as_str())
                    .or_default()
                    .insert(d.mig_profile.as_deref());
            }
        }
        let mut hour_cards: HashMap<&str, usize> = HashMap::new();
        for (host, cards) in &partitions {
            hour_cards.insert(host, cards.len());
        }
        // a node where any pod asks for a MIG resource runs the mixed strategy
        let mig_requested: HashSet<&str> = input
            .requests
            .iter()
            .filter(|r| matches!(classify_resource(&r.resource), ResourceKind::Mig { .. }))
            .map(|r| r.node.as_str())
            .collect();
        for d in &input.trailing_devices {
            uuids.entry(d.host.as_str()).or_default().insert(d.uuid.as_str());
        }
        let mut gfd: HashMap<&str, (i64, &GfdLabels)> = HashMap::new();
        for l in &input.node_labels {
            let Some(last) = l.samples.last() else { continue };
            let e = gfd.entry(l.node.as_str()).or_insert((i64::MIN, &l.gfd));
            if last.t_ms >= e.0 {
                *e = (last.t_ms, &l.gfd);
            }
        }
        // per node: advertised units of each GPU resource (the last capacity sample)
        let mut units: HashMap<&str, HashMap<&str, f64>> = HashMap::new();
        for c in &input.capacity {
            if let Some(last) = c.samples.last() {
                units.entry(c.node.as_str()).or_default().insert(c.resource.as_str(), last.v);
            }
        }
        // HAMi shows itself by its requests (gpucores, gpumem) and by its monitor's series of a node's devices
        let mut hami: HashSet<&str> = HashSet::new();
        for r in &input.requests {
            if matches!(
                classify_resource(&r.resource),
                ResourceKind::HamiCores | ResourceKind::HamiMem | ResourceKind::HamiMemPercent
            ) {
                hami.insert(r.node.as_str());
            }
        }
        for h in &input.hami {
            if let Some(host) = uuid_host.get(h.device.as_str()) {
                hami.insert(host);
            }
        }
        let mut names: Vec<&str> = units.keys().copied().collect();
        // a Pending pod not yet bound has `node=""`: no node
        names.extend(input.requests.iter().map(|r| r.node.as_str()).filter(|n| !n.is_empty()));
        names.sort_unstable();
        names.dedup();
        let models: Vec<&str> = {
            let mut m: Vec<&str> = dcgm_model.values().copied().collect();
            m.sort_unstable();
            m.dedup();
            m
        };
        let empty_units = HashMap::new();
        let empty_gfd = GfdLabels::default();
        let mut facts = BTreeMap::new();
        for node in names {
            let u = units.get(node).unwrap_or(&empty_units);
            let g = gfd.get(node).map_or(&empty_gfd, |(_, g)| *g);
            let settings = cfg.nodes.get(node);
            let ctx = NodeCtx {
                dcgm_model: dcgm_model.get(node).copied(),
                dcgm_cards: uuids.get(node).map(HashSet::len).filter(|n| *n > 0),
                mig_profile: mig_profiles
                    .get(node)
                    .and_then(|m| m.iter().max_by_key(|(p, n)| (**n, std::cmp::Reverse(**p))).map(|(p, _)| *p)),
                advertises_mig: u.keys().any(|r| matches!(classify_resource(r), ResourceKind::Mig { .. }))
                    || mig_requested.contains(node),
                one_profile: partitions.get(node).and_then(|cards| {
                    // every card DCGM shows partitioned, all into one profile
                    let partitioned = cards.values().all(|p| p.iter().any(Option::is_some));
                    let profiles: HashSet<&str> = cards.values().flatten().flatten().copied().collect();
                    let mut one = profiles.into_iter();
                    match (partitioned, one.next(), one.next()) {
                        (true, Some(p), None) => Some(p),
                        _ => None,
                    }
                }),
                hour_cards: hour_cards.get(node).copied(),
                plain: u.get("nvidia_com_gpu").copied(),
                shared: u.get("nvidia_com_gpu_shared").copied(),
                gfd: g,
                settings,
                hami: hami.contains(node) || settings.and_then(|s| s.sharing) == Some(SharingSetting::Hami),
            };
            facts.insert(node, ctx.facts(&models, cfg));
        }
        Self { facts }
    }

    /// Each node's facts as stored with the hour.
    pub(super) fn facts(&self) -> Vec<NodeFact> {
        self.facts.iter().map(|(node, f)| f.fact(node)).collect()
    }

    pub(super) fn get(&self, node: &str) -> Option<&NodeFacts> {
        self.facts.get(node)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&'a str, &NodeFacts)> {
        self.facts.iter().map(|(k, v)| (*k, v))
    }

    /// The node's GPU model (`unknown` for a node never seen).
    pub(super) fn model(&self, node: &str) -> &str {
        self.facts.get(node).map_or("unknown", |f| f.model.as_str())
    }
}

/// The facts of every node of an hour (cards, replicas, strategy) with their evidence: what [`super::meter_hour`]
/// meters the hour by, decided by the same code.
pub fn node_facts(input: &HourInput, cfg: &super::MeterConfig) -> Vec<NodeFact> {
    Nodes::new(input, cfg).facts()
}

struct NodeCtx<'a> {
    dcgm_model: Option<&'a str>,
    dcgm_cards: Option<usize>,
    mig_profile: Option<&'a str>,
    /// The node advertises a `nvidia_com_mig_*` resource or a pod on it asks for one: MIG's mixed strategy.
    advertises_mig: bool,
    /// The one profile every card DCGM shows on the node this hour is partitioned into, if so.
    one_profile: Option<&'a str>,
    /// The cards DCGM shows in the hour itself (not the trailing day).
    hour_cards: Option<usize>,
    plain: Option<f64>,
    shared: Option<f64>,
    gfd: &'a GfdLabels,
    settings: Option<&'a NodeSettings>,
    hami: bool,
}

impl NodeCtx<'_> {
    fn facts(&self, dcgm_models: &[&str], cfg: &super::MeterConfig) -> NodeFacts {
        let settings = self.settings.cloned().unwrap_or_default();
        let (model, model_source) = if let Some(m) = self.dcgm_model {
            (m.to_string(), ModelSource::Dcgm)
        } else if let Some(p) = self.gfd.product.as_deref().filter(|p| !p.trim().is_empty()) {
            (gfd_model(p, dcgm_models), ModelSource::Gfd)
        } else if let Some(m) = settings.gpu_model.as_deref().filter(|m| !m.trim().is_empty()) {
            (m.trim().to_string(), ModelSource::Config)
        } else {
            ("unknown".to_string(), ModelSource::Unknown)
        };
        // MIG's single strategy: every `nvidia_com_gpu` is an instance of the node's one profile
        let gfd_profile = self.gfd.product.as_deref().and_then(gfd_mig_profile);
        // positive evidence only: GFD's strategy label or product name, or (where GFD says nothing of MIG) every
        // card DCGM shows partitioned into one profile; any MIG resource on the node makes it mixed (SPEC §3)
        let gfd_strategy = self.gfd.mig_strategy.as_deref();
        let dcgm_single = matches!(gfd_strategy, None | Some("single")) && self.one_profile.is_some();
        let single = !self.advertises_mig
            && gfd_strategy != Some("mixed")
            && (gfd_profile.is_some() || gfd_strategy == Some("single") || dcgm_single);
        let profile = if single { self.one_profile.or(gfd_profile).or(self.mig_profile) } else { None };
        let advertised = self.plain.or(self.shared).unwrap_or(0.0);
        let replicas_units = |r: u32| (r > 0).then(|| advertised / f64::from(r));
        // DCGM's distinct devices are a lower bound (an idle time-sliced card's series vanishes before
        // dcgm-exporter 4.8.2): GFD's count, GFD's replicas and configuration come first where they exist
        let (cards, cards_source) = if let Some(n) = self.gfd.count.filter(|n| *n > 0) {
            // under the single strategy GFD counts MIG devices, not cards
            let per_card = profile.and_then(|p| mig_instances_per_card(p, &model));
            match (single, per_card) {
                (true, Some(k)) => (Some((f64::from(n) / f64::from(k)).ceil()), CardsSource::GfdCount),
                (true, None) => match self.dcgm_cards {
                    Some(d) => (Some(d as f64), CardsSource::Dcgm),
                    None => (None, CardsSource::FaceValue),
                },
                (false, _) => (Some(f64::from(n)), CardsSource::GfdCount),
            }
        } else if let Some(c) = self.gfd.replicas.and_then(replicas_units).filter(|_| !single) {
            (Some(c), CardsSource::GfdReplicas)
        } else if let Some(n) = settings.cards.filter(|n| *n > 0) {
            (Some(f64::from(n)), CardsSource::Config)
        } else if let Some(c) = settings.replicas.and_then(replicas_units) {
            (Some(c), CardsSource::Config)
        } else if let Some(n) = self.dcgm_cards {
            (Some(n as f64), CardsSource::Dcgm)
        } else if self.hami && self.plain.is_some() {
            (self.plain.map(|u| u / f64::from(cfg.hami_split.max(1))), CardsSource::Config)
        } else {
            (None, CardsSource::FaceValue)
        };
        // more devices than the evidence trusted above them: the evidence is wrong, the devices are real
        let conflict = match (cards, self.dcgm_cards) {
            (Some(c), Some(d)) if cards_source != CardsSource::Dcgm && (d as f64) > c + 1e-9 => Some((d as f64, c)),
            _ => None,
        };
        let (cards, cards_source) = match conflict {
            Some((d, _)) => (Some(d), CardsSource::Dcgm),
            None => (cards, cards_source),
        };
        let cards = cards.filter(|c| *c > 0.0);
        let cards_source = if cards.is_none() { CardsSource::FaceValue } else { cards_source };
        let strategy = settings.sharing.map(SharingSetting::as_str).or(self.gfd.sharing_strategy.as_deref());
        let mps = strategy == Some("mps");
        let sharing = if self.hami {
            Sharing::Hami
        } else if let Some(p) = profile {
            Sharing::MigSingle { profile: p.to_string(), g: mig_profile_slices(p).unwrap_or(1).max(1) }
        } else {
            match (self.plain, cards) {
                (Some(u), Some(c)) if u > c + 1e-9 => Sharing::Replicas { replicas: u / c, mps },
                _ => Sharing::Exclusive,
            }
        };
        let shared_replicas = match (self.shared, cards) {
            (Some(u), Some(c)) if u >= c => Some(u / c),
            _ => self.gfd.replicas.or(settings.replicas).filter(|r| *r > 0).map(f64::from),
        };
        let measured = self.plain.zip(cards).map(|(u, c)| u / c).filter(|r| *r > 0.0);
        let plain_per_card = match &sharing {
            Sharing::Exclusive => 1.0,
            Sharing::Replicas { replicas, .. } => *replicas,
            Sharing::Hami => measured.unwrap_or(f64::from(cfg.hami_split.max(1))),
            Sharing::MigSingle { profile, .. } => {
                measured.or_else(|| mig_instances_per_card(profile, &model).map(f64::from)).unwrap_or(1.0)
            }
        };
        NodeFacts {
            model,
            model_source,
            cards,
            cards_source,
            sharing,
            plain_per_card,
            shared_replicas,
            shared_mps: mps,
            evidence: Evidence {
                mixed: self.advertises_mig || gfd_strategy == Some("mixed"),
                renamed: self.shared.is_some(),
                dcgm_cards: self.dcgm_cards,
                hour_cards: self.hour_cards,
                gfd_count: self.gfd.count,
                gfd_replicas: self.gfd.replicas,
                configured: self.settings.is_some_and(|s| s.cards.is_some() || s.replicas.is_some()),
                conflict: conflict.map(|(_, c)| c),
            },
        }
    }
}

/// What a node's facts were decided from, kept with them (SPEC §3's order of trust made visible).
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Evidence {
    /// A MIG resource is advertised or asked for on the node, or GFD says `mixed`.
    pub(super) mixed: bool,
    /// It advertises renamed replicas (`nvidia_com_gpu_shared`).
    pub(super) renamed: bool,
    /// Distinct DCGM devices over the trailing day with the hour, and in the hour alone.
    pub(super) dcgm_cards: Option<usize>,
    pub(super) hour_cards: Option<usize>,
    pub(super) gfd_count: Option<u32>,
    pub(super) gfd_replicas: Option<u32>,
    /// Cards or replicas are configured for the node.
    pub(super) configured: bool,
    /// The cards the trusted evidence said where DCGM showed more devices (which were taken).
    pub(super) conflict: Option<f64>,
}

/// One node's facts in one hour, as decided and with what they were decided from (`node_facts_hourly`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeFact {
    pub node: String,
    pub gpu_model: String,
    /// Physical cards; `None` where nothing counts them (a unit taken as a card).
    pub cards: Option<f64>,
    /// Units advertised per card: time-slicing or MPS replicas (renamed or not), HAMi's split, MIG instances
    /// under the single strategy; `None` for whole cards.
    pub replicas: Option<f64>,
    /// `whole`, `time-slicing`, `mps`, `mig-single`, `mig-mixed` or `hami`.
    pub strategy: &'static str,
    pub cards_source: CardsSource,
    /// Every piece of evidence seen, e.g. `dcgm=6,dcgm_hour=4,gfd_count=8,gfd_replicas=4`.
    pub evidence: String,
    /// DCGM showed more devices than the trusted evidence counted cards.
    pub conflict: bool,
}

impl NodeFacts {
    pub(super) fn fact(&self, node: &str) -> NodeFact {
        let e = &self.evidence;
        let (strategy, replicas) = match &self.sharing {
            Sharing::Hami => ("hami", Some(self.plain_per_card)),
            Sharing::MigSingle { .. } => ("mig-single", Some(self.plain_per_card)),
            Sharing::Replicas { replicas, mps } => (if *mps { "mps" } else { "time-slicing" }, Some(*replicas)),
            Sharing::Exclusive if e.renamed => {
                (if self.shared_mps { "mps" } else { "time-slicing" }, self.shared_replicas)
            }
            Sharing::Exclusive if e.mixed => ("mig-mixed", None),
            Sharing::Exclusive => ("whole", None),
        };
        let mut evidence = Vec::new();
        let mut push = |k: &str, v: Option<String>| {
            if let Some(v) = v {
                evidence.push(format!("{k}={v}"));
            }
        };
        push("dcgm", e.dcgm_cards.map(|n| n.to_string()));
        push("dcgm_hour", e.hour_cards.map(|n| n.to_string()));
        push("gfd_count", e.gfd_count.map(|n| n.to_string()));
        push("gfd_replicas", e.gfd_replicas.map(|n| n.to_string()));
        push("config", e.configured.then(|| "yes".to_string()));
        push("mig", e.mixed.then(|| "mixed".to_string()));
        NodeFact {
            node: node.to_string(),
            gpu_model: self.model.clone(),
            cards: self.cards,
            replicas,
            strategy,
            cards_source: self.cards_source,
            evidence: evidence.join(","),
            conflict: e.conflict.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfd_products_name_the_parent_model() {
        let dcgm = ["NVIDIA A100-SXM4-80GB"];
        assert_eq!(gfd_model("NVIDIA-A100-SXM4-80GB", &dcgm), "NVIDIA A100-SXM4-80GB");
        assert_eq!(gfd_model("NVIDIA-A100-SXM4-80GB-MIG-3g.40gb", &dcgm), "NVIDIA A100-SXM4-80GB");
        assert_eq!(gfd_model("NVIDIA-A100-SXM4-80GB-SHARED", &[]), "NVIDIA A100-SXM4-80GB");
        assert_eq!(gfd_model("NVIDIA-A30-MIG-2g.12gb", &[]), "NVIDIA A30");
        assert_eq!(gfd_model("NVIDIA-H100-80GB-HBM3", &["NVIDIA H100 80GB HBM3"]), "NVIDIA H100 80GB HBM3");
        assert_eq!(gfd_model("Tesla-T4", &[]), "Tesla T4");
        assert_eq!(gfd_mig_profile("NVIDIA-A30-MIG-2g.12gb"), Some("2g.12gb"));
        assert_eq!(gfd_mig_profile("NVIDIA-A30"), None);
    }

    #[test]
    fn mig_instances_per_card_by_slices_and_memory() {
        let a100 = "NVIDIA A100-SXM4-80GB";
        assert_eq!(mig_instances_per_card("1g.10gb", a100), Some(7));
        assert_eq!(mig_instances_per_card("1g.20gb", a100), Some(4));
        assert_eq!(mig_instances_per_card("2g.20gb", a100), Some(3));
        assert_eq!(mig_instances_per_card("3g.40gb", a100), Some(2));
        assert_eq!(mig_instances_per_card("7g.80gb", a100), Some(1));
        assert_eq!(mig_instances_per_card("2g.12gb", "NVIDIA A30"), Some(2));
        assert_eq!(mig_instances_per_card("1g.6gb", "NVIDIA A30"), Some(4));
        assert_eq!(mig_instances_per_card("xg", a100), None);
    }
}
