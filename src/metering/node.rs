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
            }
        }
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
        names.extend(input.requests.iter().map(|r| r.node.as_str()));
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
                advertises_mig: u.keys().any(|r| matches!(classify_resource(r), ResourceKind::Mig { .. })),
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

struct NodeCtx<'a> {
    dcgm_model: Option<&'a str>,
    dcgm_cards: Option<usize>,
    mig_profile: Option<&'a str>,
    advertises_mig: bool,
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
        let single = !self.advertises_mig
            && (self.mig_profile.is_some()
                || gfd_profile.is_some()
                || self.gfd.mig_strategy.as_deref() == Some("single"));
        let profile = if single { self.mig_profile.or(gfd_profile) } else { None };
        let advertised = self.plain.or(self.shared).unwrap_or(0.0);
        let replicas_units = |r: u32| (r > 0).then(|| advertised / f64::from(r));
        let (cards, cards_source) = if let Some(n) = self.dcgm_cards {
            (Some(n as f64), CardsSource::Dcgm)
        } else if let Some(n) = self.gfd.count.filter(|n| *n > 0) {
            // under the single strategy GFD counts MIG devices, not cards
            let per_card = profile.and_then(|p| mig_instances_per_card(p, &model));
            match (single, per_card) {
                (true, Some(k)) => (Some((f64::from(n) / f64::from(k)).ceil()), CardsSource::GfdCount),
                (true, None) => (None, CardsSource::FaceValue),
                (false, _) => (Some(f64::from(n)), CardsSource::GfdCount),
            }
        } else if let Some(c) = self.gfd.replicas.and_then(replicas_units).filter(|_| !single) {
            (Some(c), CardsSource::GfdReplicas)
        } else if let Some(n) = settings.cards.filter(|n| *n > 0) {
            (Some(f64::from(n)), CardsSource::Config)
        } else if let Some(c) = settings.replicas.and_then(replicas_units) {
            (Some(c), CardsSource::Config)
        } else if self.hami && self.plain.is_some() {
            (self.plain.map(|u| u / f64::from(cfg.hami_split.max(1))), CardsSource::Config)
        } else {
            (None, CardsSource::FaceValue)
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
