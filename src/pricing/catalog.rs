//! GPU model names: DCGM's `modelName` label → the pricing key a rate is stored under.
//!
//! DCGM reports the driver's product name, which differs by form factor and driver version
//! (`NVIDIA A100-SXM4-80GB`, `NVIDIA A100 80GB PCIe`, `NVIDIA H100 80GB HBM3`, `NVIDIA GeForce RTX 4090`…), while
//! finance prices a card model once. Built-in rules map the common names; explicit overrides (exact name → key,
//! e.g. from configuration) win over them; anything unknown is priced under its own name, trimmed, so a new card
//! shows up as an unpriced model instead of being folded silently into a similar one.
//!
//! The key carries the memory size where one family is sold in sizes priced differently (A100, A800, V100).

use std::collections::HashMap;

use crate::validate::GpuModel;

/// Maps DCGM model names to pricing keys: overrides first, then the built-in rules, then the name itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelCatalog {
    overrides: HashMap<String, String>,
}

impl ModelCatalog {
    /// Built-in rules only.
    pub fn new() -> Self {
        Self::default()
    }

    /// With explicit overrides (`modelName` → key). A name is matched after trimming; so is the key.
    pub fn with_overrides<K: AsRef<str>, V: AsRef<str>>(overrides: impl IntoIterator<Item = (K, V)>) -> Self {
        let overrides = overrides
            .into_iter()
            .map(|(k, v)| (k.as_ref().trim().to_string(), v.as_ref().trim().to_string()))
            .collect();
        Self { overrides }
    }

    /// The pricing key of a checked model name, checked in turn: a built-in key, an alias as stored (checked when
    /// it was put) or the name itself.
    pub fn key_of(&self, model: &GpuModel) -> GpuModel {
        GpuModel::parse("gpu_model", &self.key_for(model.as_str())).unwrap_or_else(|_| model.clone())
    }

    /// The pricing key of a DCGM `modelName`.
    pub fn key_for(&self, model_name: &str) -> String {
        let name = model_name.trim();
        if let Some(key) = self.overrides.get(name) {
            return key.clone();
        }
        builtin_key(name).map_or_else(|| name.to_string(), str::to_string)
    }
}

/// The built-in rule for a model name, if one applies. Matching is on upper-cased alphanumeric tokens, so
/// `A100-SXM4-80GB`, `A100 80GB PCIe` and `a100_sxm4_80gb` read alike and `L40` never matches `L40S`.
pub fn builtin_key(model_name: &str) -> Option<&'static str> {
    let upper = model_name.to_uppercase();
    let tokens: Vec<&str> = upper.split(|c: char| !c.is_ascii_alphanumeric()).filter(|t| !t.is_empty()).collect();
    let has = |t: &str| tokens.contains(&t);
    // The card's memory: the largest `<n>GB` token, so a MIG profile such as `3g.40gb` appended to an 80 GB
    // card's name cannot make it read as the 40 GB card.
    let memory_gb = tokens.iter().filter_map(|t| t.strip_suffix("GB")?.parse::<u32>().ok()).max();
    let by_memory = |sizes: &[(u32, &'static str)]| {
        memory_gb.and_then(|gb| sizes.iter().find(|(size, _)| *size == gb).map(|(_, key)| *key))
    };

    if has("A100") {
        return by_memory(&[(80, "A100-80GB"), (40, "A100-40GB")]);
    }
    if has("A800") {
        return by_memory(&[(80, "A800-80GB"), (40, "A800-40GB")]);
    }
    if has("V100") {
        return by_memory(&[(32, "V100-32GB"), (16, "V100-16GB")]);
    }
    if has("H100") {
        // The NVL card has 94 GB and a different price; SXM and PCIe are 80 GB.
        return Some(if has("NVL") || memory_gb == Some(94) { "H100-NVL" } else { "H100-80GB" });
    }
    if has("RTX") {
        return if has("4090") {
            Some(if has("D") { "RTX-4090D" } else { "RTX-4090" })
        } else if has("3090") {
            Some("RTX-3090")
        } else if has("A6000") {
            Some("RTX-A6000")
        } else {
            None
        };
    }
    // Single-size (or single-priced) families, by exact token.
    const FAMILIES: [&str; 13] =
        ["H800", "H200", "H20", "B200", "GH200", "L40S", "L40", "L20", "L4", "A40", "A30", "A10", "T4"];
    FAMILIES.into_iter().find(|family| has(family))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_rules() {
        let c = ModelCatalog::new();
        let cases = [
            ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
            ("NVIDIA A100 80GB PCIe", "A100-80GB"),
            ("NVIDIA A100-PCIE-80GB", "A100-80GB"),
            ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
            ("NVIDIA A100-PCIE-40GB", "A100-40GB"),
            ("NVIDIA A100-SXM4-80GB MIG 3g.40gb", "A100-80GB"),
            ("NVIDIA H100 80GB HBM3", "H100-80GB"),
            ("NVIDIA H100 SXM", "H100-80GB"),
            ("NVIDIA H100 PCIe", "H100-80GB"),
            ("NVIDIA H100 NVL", "H100-NVL"),
            ("NVIDIA H800", "H800"),
            ("NVIDIA H800 PCIe", "H800"),
            ("NVIDIA H20", "H20"),
            ("NVIDIA H200", "H200"),
            ("NVIDIA L40S", "L40S"),
            ("NVIDIA L40", "L40"),
            ("NVIDIA L4", "L4"),
            ("NVIDIA L20", "L20"),
            ("NVIDIA A30", "A30"),
            ("NVIDIA A10", "A10"),
            ("NVIDIA A40", "A40"),
            ("NVIDIA A800-SXM4-80GB", "A800-80GB"),
            ("NVIDIA A800 80GB PCIe", "A800-80GB"),
            ("NVIDIA A800 40GB PCIe", "A800-40GB"),
            ("NVIDIA GeForce RTX 4090", "RTX-4090"),
            ("NVIDIA GeForce RTX 4090 D", "RTX-4090D"),
            ("NVIDIA GeForce RTX 3090", "RTX-3090"),
            ("NVIDIA RTX A6000", "RTX-A6000"),
            ("Tesla V100-SXM2-32GB", "V100-32GB"),
            ("Tesla V100-PCIE-16GB", "V100-16GB"),
            ("Tesla T4", "T4"),
            ("NVIDIA B200", "B200"),
            ("  nvidia a100-sxm4-80gb \n", "A100-80GB"),
        ];
        for (name, key) in cases {
            assert_eq!(c.key_for(name), key, "{name:?}");
        }
    }

    #[test]
    fn unknown_names_are_their_own_key_trimmed() {
        let c = ModelCatalog::new();
        assert_eq!(c.key_for("  Ascend 910B \t"), "Ascend 910B");
        // An A100 of an unknown size is not guessed into either priced size.
        assert_eq!(c.key_for("NVIDIA A100"), "NVIDIA A100");
        assert_eq!(c.key_for("NVIDIA GeForce RTX 2080 Ti"), "NVIDIA GeForce RTX 2080 Ti");
        assert_eq!(c.key_for(""), "");
        // Tokens, not substrings: L40S is not L40 and A1000 is not A100.
        assert_eq!(builtin_key("NVIDIA RTX A1000"), None);
        assert_eq!(builtin_key("NVIDIA L40S"), Some("L40S"));
    }

    #[test]
    fn overrides_win() {
        let c = ModelCatalog::with_overrides([
            ("NVIDIA A100-SXM4-80GB", "A100-80GB-SXM"),
            (" Ascend 910B ", " 910B "),
            ("NVIDIA A100", "A100-40GB"),
        ]);
        assert_eq!(c.key_for("NVIDIA A100-SXM4-80GB"), "A100-80GB-SXM");
        assert_eq!(c.key_for(" NVIDIA A100-SXM4-80GB "), "A100-80GB-SXM");
        assert_eq!(c.key_for("NVIDIA A100 80GB PCIe"), "A100-80GB");
        assert_eq!(c.key_for("Ascend 910B"), "910B");
        assert_eq!(c.key_for("NVIDIA A100"), "A100-40GB");
    }
}
