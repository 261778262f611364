//! Memory promised per unit (SPEC §7, the memory side of oversubscription): the share of one card's memory a
//! unit of a resource is promised, 0–1, stored on every usage row beside its compute fraction.
//!
//! - a whole card: 1;
//! - a MIG instance: its profile's memory over the card's, both the nominal figures the names print (`3g.40gb` on
//!   an A100-80GB: 40/80 = ½). On A100, H100-80GB and A30 this is exactly the memory slices' share (4 of 8); on
//!   cards whose instance figures are rounded (H100-94GB's 1g.12gb: 12/94 against 1/8) it is within 3 %;
//! - a time-slicing replica: 1 — nothing caps its memory, every replica may use the whole card's;
//! - an MPS replica: 1/replicas — the device plugin caps each client's memory at its share;
//! - a HAMi vGPU: `gpumem` MiB over the card's MiB, or `gpumem_percentage`/100, and 1 when the container asks
//!   for neither (HAMi's default is the whole memory). DCGM's `FB_FREE` is not read, so the card's memory comes
//!   from its model ([`card_memory_mib`]); where the model does not tell it, the share is unknown (`None`),
//!   never guessed.

use super::resource::card_memory_mib;

/// The nominal memory (GB) of a MIG profile: `3g.40gb` → 40, `1g.10gb+me` → 10.
pub fn mig_profile_memory_gb(profile: &str) -> Option<u32> {
    let base = profile.split('+').next().unwrap_or(profile);
    base.split_once('.').and_then(|(_, m)| m.strip_suffix("gb")?.parse::<u32>().ok()).filter(|gb| *gb > 0)
}

/// The memory share of one unit of a row of `kind` (`whole`, `mig`, `timeslice`, `mps`) with card fraction
/// `fraction`, from what the row itself says. `None` for HAMi (its share comes from the container's requests,
/// [`hami_memory_share`]), for an unknown kind, and for a MIG instance on a card of unknown memory.
pub fn unit_memory_share(kind: &str, fraction: f64, mig_profile: Option<&str>, gpu_model: &str) -> Option<f64> {
    match kind {
        "whole" | "timeslice" => Some(1.0),
        "mps" => Some(fraction.clamp(0.0, 1.0)),
        "mig" => {
            let profile_gb = f64::from(mig_profile_memory_gb(mig_profile?)?);
            let card_gb = card_memory_mib(gpu_model)? / 1024.0;
            Some((profile_gb / card_gb).min(1.0))
        }
        _ => None,
    }
}

/// A HAMi vGPU's memory share from the container's `nvidia_com_gpumem` (MiB) and `nvidia_com_gpumem_percentage`
/// requests (the percentage wins, as in HAMi), over a card of `card_mib`. Asking for neither: 1.
pub fn hami_memory_share(
    gpumem_mib: Option<f64>,
    gpumem_percentage: Option<f64>,
    card_mib: Option<f64>,
) -> Option<f64> {
    match (gpumem_percentage, gpumem_mib) {
        (Some(pct), _) => Some((pct / 100.0).clamp(0.0, 1.0)),
        (None, Some(mib)) => card_mib.filter(|c| *c > 0.0).map(|card| (mib / card).clamp(0.0, 1.0)),
        (None, None) => Some(1.0),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const A100: &str = "NVIDIA A100-SXM4-80GB";

    #[test]
    fn each_kind_promises_its_memory() {
        assert_eq!(unit_memory_share("whole", 1.0, None, A100), Some(1.0));
        // a time-slicing replica may use the whole card's memory; an MPS client is capped at its share
        assert_eq!(unit_memory_share("timeslice", 0.25, None, "NVIDIA L40S"), Some(1.0));
        assert_eq!(unit_memory_share("mps", 0.25, None, "NVIDIA L40S"), Some(0.25));
        // MIG: the profile's memory over the card's, not its compute share (3/7)
        assert_eq!(unit_memory_share("mig", 3.0 / 7.0, Some("3g.40gb"), A100), Some(0.5));
        assert_eq!(unit_memory_share("mig", 1.0 / 7.0, Some("1g.10gb+me"), A100), Some(0.125));
        assert_eq!(unit_memory_share("mig", 1.0, Some("7g.80gb"), A100), Some(1.0));
        assert_eq!(unit_memory_share("mig", 0.5, Some("2g.12gb"), "NVIDIA A30"), Some(0.5));
        assert_eq!(unit_memory_share("mig", 1.0 / 7.0, Some("1g.10gb"), "NVIDIA A100-SXM4-40GB"), Some(0.25));
        // a card of unknown memory, a profile without a figure, HAMi (from its requests), an unknown kind
        assert_eq!(unit_memory_share("mig", 3.0 / 7.0, Some("3g.40gb"), "unknown"), None);
        assert_eq!(unit_memory_share("mig", 3.0 / 7.0, None, A100), None);
        assert_eq!(unit_memory_share("hami", 0.3, None, A100), None);
        assert_eq!(unit_memory_share("unknown", 1.0, None, A100), None);
        assert_eq!(mig_profile_memory_gb("3g.40gb"), Some(40));
        assert_eq!(mig_profile_memory_gb("3g"), None);
    }

    #[test]
    fn hami_memory_comes_from_its_requests() {
        assert_eq!(hami_memory_share(Some(20480.0), None, Some(81920.0)), Some(0.25));
        assert_eq!(hami_memory_share(Some(20480.0), Some(50.0), Some(81920.0)), Some(0.5));
        assert_eq!(hami_memory_share(None, Some(30.0), None), Some(0.3));
        // HAMi's default is the whole memory; MiB on a card of unknown memory is unknown, not guessed
        assert_eq!(hami_memory_share(None, None, None), Some(1.0));
        assert_eq!(hami_memory_share(Some(20480.0), None, None), None);
        // asking for more than the card has promises the card
        assert_eq!(hami_memory_share(Some(200_000.0), None, Some(81920.0)), Some(1.0));
    }

    proptest! {
        #[test]
        fn a_share_is_between_nothing_and_the_card(
            kind in prop::sample::select(vec!["whole", "mig", "timeslice", "mps", "hami"]),
            fraction in 0.0f64..=1.0,
            g in 1u32..=7,
            gb in 1u32..=200,
            card in prop::sample::select(vec!["NVIDIA A100-SXM4-80GB", "NVIDIA A30", "NVIDIA H100 80GB HBM3", "x"]),
            mib in prop::option::of(0.0f64..1e6),
            pct in prop::option::of(0.0f64..=150.0),
            card_mib in prop::option::of(1.0f64..1e6),
        ) {
            let profile = format!("{g}g.{gb}gb");
            for share in [unit_memory_share(kind, fraction, Some(&profile), card), hami_memory_share(mib, pct, card_mib)]
                .into_iter()
                .flatten()
            {
                prop_assert!((0.0..=1.0).contains(&share), "{share}");
            }
            // what needs no card memory is always known
            prop_assert!(hami_memory_share(mib, pct, card_mib).is_some() || (pct.is_none() && mib.is_some()));
            if kind != "mig" && kind != "hami" {
                prop_assert!(unit_memory_share(kind, fraction, None, card).is_some());
            }
        }
    }
}
