//! What a Kubernetes extended-resource name means for metering: its kind and its card fraction.

/// The meaning of one `resource` label of `kube_pod_container_resource_requests`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceKind {
    /// `nvidia_com_gpu`: whole cards (unless the container is a HAMi one, see [`crate::metering::meter_hour`]).
    Whole,
    /// `nvidia_com_mig_<g>g_<m>gb`: a MIG instance of `g` compute slices.
    Mig { profile: String, slices: u32 },
    /// `nvidia_com_gpu_shared`: a time-slicing replica.
    TimeSlice,
    /// HAMi `nvidia_com_gpucores`: percent of a card's SMs.
    HamiCores,
    /// HAMi `nvidia_com_gpumem`: MiB of a card's memory.
    HamiMem,
    /// HAMi `nvidia_com_gpumem_percentage`.
    HamiMemPercent,
    /// Looks like an accelerator but cardhour does not know how to meter it: reported, never dropped silently.
    UnknownGpu,
    /// cpu, memory, pods… — not ours.
    NotGpu,
}

/// How HAMi's share of a card is derived from its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HamiPolicy {
    /// gpucores / 100
    #[default]
    Cores,
    /// gpumem_percentage / 100, or gpumem ÷ the card's memory
    Memory,
    /// the larger of the two
    Max,
}

impl std::str::FromStr for HamiPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "cores" => Ok(Self::Cores),
            "memory" => Ok(Self::Memory),
            "max" => Ok(Self::Max),
            other => Err(format!("unknown HAMi policy `{other}` (expected cores, memory or max)")),
        }
    }
}

pub fn classify_resource(name: &str) -> ResourceKind {
    match name {
        "nvidia_com_gpu" => ResourceKind::Whole,
        "nvidia_com_gpu_shared" => ResourceKind::TimeSlice,
        "nvidia_com_gpucores" => ResourceKind::HamiCores,
        "nvidia_com_gpumem" => ResourceKind::HamiMem,
        "nvidia_com_gpumem_percentage" => ResourceKind::HamiMemPercent,
        _ => {
            if let Some((profile, slices)) = name.strip_prefix("nvidia_com_mig_").and_then(parse_mig_resource) {
                ResourceKind::Mig { profile, slices }
            } else if name.starts_with("nvidia_com_")
                || name.starts_with("amd_com_")
                || name.starts_with("habana_ai_")
                || name.contains("gpu")
            {
                ResourceKind::UnknownGpu
            } else {
                ResourceKind::NotGpu
            }
        }
    }
}

/// `1g_10gb` (KSM's sanitised `1g.10gb`, maybe with a suffix such as `_me`) → ("1g.10gb", 1).
fn parse_mig_resource(rest: &str) -> Option<(String, u32)> {
    let mut parts = rest.split('_');
    let g = parts.next()?.strip_suffix('g')?;
    let mem = parts.next()?.strip_suffix("gb")?;
    let slices: u32 = g.parse().ok().filter(|g| *g > 0)?;
    mem.parse::<u32>().ok()?;
    let suffix: Vec<&str> = parts.collect();
    let mut profile = format!("{g}g.{mem}gb");
    for s in suffix {
        profile.push('+');
        profile.push_str(s);
    }
    Some((profile, slices))
}

/// Compute slices of one `GPU_I_PROFILE` label value such as `3g.40gb`.
pub fn mig_profile_slices(profile: &str) -> Option<u32> {
    profile.split_once('g').and_then(|(g, _)| g.parse().ok())
}

/// Compute slices of a whole card of this model (the denominator of a MIG fraction).
pub fn mig_compute_slices(model: &str) -> Option<u32> {
    let m = model.to_ascii_uppercase();
    if m.contains("A30") {
        Some(4)
    } else if ["A100", "A800", "H100", "H800", "H200", "H20", "B200", "B100", "GH200"].iter().any(|k| m.contains(k)) {
        Some(7)
    } else {
        None
    }
}

/// Cards whose product names carry no memory figure, and their memory in GB. Matched on whole words of the name
/// (`A10` is not `A100`). Models sold in several sizes under one name (V100, H200 with its rounded-up MIG
/// figures) are left out: their memory stays unknown rather than guessed.
const NAMELESS_MEMORY_GB: [(&str, f64); 8] = [
    ("A30", 24.0),
    ("A10", 24.0),
    ("A40", 48.0),
    ("L4", 24.0),
    ("L40", 48.0),
    ("L40S", 48.0),
    ("T4", 16.0),
    ("H20", 96.0),
];

/// A card's memory in MiB from its model name (`NVIDIA A100-SXM4-80GB` → 81920; `NVIDIA A30`, whose name carries
/// no figure, 24 GB → 24576), for HAMi's memory policy and the memory a unit is promised.
pub fn card_memory_mib(model: &str) -> Option<f64> {
    let upper = model.to_ascii_uppercase();
    if let Some(at) = upper.find("GB") {
        let digits: String = upper[..at]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_digit())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        return digits.parse::<f64>().ok().filter(|g| *g > 0.0).map(|g| g * 1024.0);
    }
    let words: Vec<&str> = upper.split(|c: char| !c.is_ascii_alphanumeric()).collect();
    NAMELESS_MEMORY_GB.iter().find(|(name, _)| words.contains(name)).map(|(_, gb)| gb * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_every_gpu_resource() {
        assert_eq!(classify_resource("nvidia_com_gpu"), ResourceKind::Whole);
        assert_eq!(classify_resource("nvidia_com_gpu_shared"), ResourceKind::TimeSlice);
        assert_eq!(
            classify_resource("nvidia_com_mig_3g_40gb"),
            ResourceKind::Mig { profile: "3g.40gb".into(), slices: 3 }
        );
        assert_eq!(
            classify_resource("nvidia_com_mig_1g_10gb_me"),
            ResourceKind::Mig { profile: "1g.10gb+me".into(), slices: 1 }
        );
        assert_eq!(classify_resource("nvidia_com_gpucores"), ResourceKind::HamiCores);
        assert_eq!(classify_resource("nvidia_com_gpumem"), ResourceKind::HamiMem);
        assert_eq!(classify_resource("nvidia_com_gpumem_percentage"), ResourceKind::HamiMemPercent);
        assert_eq!(classify_resource("nvidia_com_mig_xg_10gb"), ResourceKind::UnknownGpu);
        assert_eq!(classify_resource("amd_com_gpu"), ResourceKind::UnknownGpu);
        assert_eq!(classify_resource("example_com_gpu"), ResourceKind::UnknownGpu);
        assert_eq!(classify_resource("cpu"), ResourceKind::NotGpu);
        assert_eq!(classify_resource("pods"), ResourceKind::NotGpu);
    }

    #[test]
    fn slices_and_memory_come_from_the_model() {
        assert_eq!(mig_compute_slices("NVIDIA A100-SXM4-80GB"), Some(7));
        assert_eq!(mig_compute_slices("NVIDIA H100 80GB HBM3"), Some(7));
        assert_eq!(mig_compute_slices("NVIDIA A30"), Some(4));
        assert_eq!(mig_compute_slices("NVIDIA L40S"), None);
        assert_eq!(mig_profile_slices("2g.20gb"), Some(2));
        assert_eq!(card_memory_mib("NVIDIA A100-SXM4-80GB"), Some(81920.0));
        assert_eq!(card_memory_mib("NVIDIA H100 80GB HBM3"), Some(81920.0));
        assert_eq!(card_memory_mib("NVIDIA L40S"), Some(49152.0));
        assert_eq!(card_memory_mib("NVIDIA-A30"), Some(24576.0));
        assert_eq!(card_memory_mib("NVIDIA A10"), Some(24576.0));
        assert_eq!(card_memory_mib("NVIDIA A100-PCIE-40GB"), Some(40960.0));
        assert_eq!(card_memory_mib("Tesla V100-SXM2"), None);
        assert_eq!(card_memory_mib("unknown"), None);
    }
}
