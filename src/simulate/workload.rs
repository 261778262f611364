//! Workload classes and utilization patterns.
//!
//! Utilization is a pure function of (pod, device, time): noise and bursts come from a stable
//! hash, never from a stateful RNG, so each series can be written on its own, in any order, and
//! the truth recomputes exactly the same numbers.

use std::f64::consts::TAU;

use super::clock::{DAY_MS, HOUR_MS};
use super::layout::{
    NS_NLP_PROD, NS_NLP_RESEARCH, NS_PLATFORM_INFER, NS_RECSYS, NS_SANDBOX, NS_SPEECH, NS_VISION_DEV, NS_VISION_TRAIN,
};

const MIN_MS: i64 = 60_000;

/// SplitMix64 finalizer: a stable, well-mixed 64-bit hash.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hash of two words.
pub fn hash2(a: u64, b: u64) -> u64 {
    mix64(a ^ mix64(b))
}

/// Hash of three words.
pub fn hash3(a: u64, b: u64, c: u64) -> u64 {
    mix64(a ^ mix64(b ^ mix64(c)))
}

/// A hash mapped to `[0, 1)`.
pub fn unit(h: u64) -> f64 {
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Round to 4 decimals, so values print short and exactly as the truth uses them.
pub fn q4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// How a pod's base utilization evolves. All values are fractions of the unit it holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pattern {
    /// Inference at a steady level.
    Steady { base: f64 },
    /// Training: high, with a short checkpoint dip every `ckpt_ms`.
    Training { base: f64, ckpt_ms: i64 },
    /// On/off blocks; a block is on when hash(pod, block index) < `p_on`.
    Bursty { block_ms: i64, p_on: f64, hi: f64, lo: f64 },
    /// Linear ramp from `lo` to `hi` over each period, then a drop.
    SawTooth { period_ms: i64, lo: f64, hi: f64 },
    /// Day/night sine on wall-clock time.
    Diurnal { mid: f64, amp: f64, phase_ms: i64 },
    /// An idle squatter: holds memory, barely computes.
    Idle { level: f64 },
}

const NOISE_AMP: f64 = 0.03;
const SALT_BURST: u64 = 0xB0_5751;

/// Base utilization in `[0, 1]` (4 decimals) of device `dev` of a pod that started running at
/// `t1`, at time `t` (ms).
pub fn base_util(pattern: &Pattern, seed: u64, dev: u8, t1: i64, t: i64) -> f64 {
    let rel = t - t1;
    let noise = (unit(hash3(seed, dev as u64, t as u64)) - 0.5) * 2.0 * NOISE_AMP;
    // Devices of one pod differ a little (e.g. rank 0 does extra work).
    let dev_bias = (unit(hash2(seed, 0xDE_u64 + dev as u64)) - 0.5) * 0.06;
    let x = match *pattern {
        Pattern::Steady { base } => base + dev_bias + noise,
        Pattern::Training { base, ckpt_ms } => {
            if rel.rem_euclid(ckpt_ms) < 90_000 {
                0.08 + noise.abs()
            } else {
                base + dev_bias + noise
            }
        }
        Pattern::Bursty { block_ms, p_on, hi, lo } => {
            let block = rel.div_euclid(block_ms);
            if unit(hash2(seed ^ SALT_BURST, block as u64)) < p_on {
                hi + dev_bias + noise
            } else {
                lo + noise.abs() * 0.3
            }
        }
        Pattern::SawTooth { period_ms, lo, hi } => {
            let phase = rel.rem_euclid(period_ms) as f64 / period_ms as f64;
            lo + (hi - lo) * phase + noise * 0.5
        }
        Pattern::Diurnal { mid, amp, phase_ms } => {
            let day_phase = (t + phase_ms).rem_euclid(DAY_MS) as f64 / DAY_MS as f64;
            mid + amp * (TAU * day_phase).sin() + dev_bias + noise
        }
        Pattern::Idle { level } => (level + noise * 0.2).clamp(0.0, 0.03),
    };
    q4(x.clamp(0.0, 1.0))
}

/// Broad workload classes; each decides namespace, size, duration, pattern and failure rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Multi-card training, hours long.
    Train,
    /// Batch jobs shorter than an hour.
    ShortJob,
    /// Long-running inference services.
    Inference,
    /// Notebooks and debugging.
    Dev,
    /// Long-running idle pod holding memory.
    Squatter,
}

/// Uniform draw helper over a hash-free RNG interface, so this module stays independent of rand.
pub trait Draw {
    /// Uniform in `[0, 1)`.
    fn u(&mut self) -> f64;
    /// Uniform in `[lo, hi)`.
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.u()
    }
    /// Uniform integer in `[lo, hi)` (`hi > lo`).
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + ((hi - lo) as f64 * self.u()) as i64
    }
    /// Index drawn from relative weights.
    fn weighted(&mut self, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        let mut x = self.u() * total;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }
}

impl Class {
    /// Lower-case name, reported in the truth as the pod's workload.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Train => "train",
            Class::ShortJob => "short_job",
            Class::Inference => "inference",
            Class::Dev => "dev",
            Class::Squatter => "squatter",
        }
    }

    /// Namespace drawn for a pod of this class.
    pub fn pick_namespace(self, d: &mut impl Draw) -> usize {
        let (ns, w): (&[usize], &[f64]) = match self {
            Class::Train => (&[NS_VISION_TRAIN, NS_NLP_RESEARCH, NS_SPEECH], &[0.4, 0.3, 0.3]),
            Class::ShortJob => (&[NS_RECSYS, NS_SPEECH, NS_VISION_TRAIN, NS_SANDBOX], &[0.35, 0.2, 0.2, 0.25]),
            Class::Inference => (&[NS_NLP_PROD, NS_PLATFORM_INFER, NS_RECSYS], &[0.45, 0.4, 0.15]),
            Class::Dev => (&[NS_VISION_DEV, NS_NLP_RESEARCH, NS_SANDBOX], &[0.45, 0.3, 0.25]),
            Class::Squatter => (&[NS_VISION_DEV, NS_NLP_RESEARCH], &[0.5, 0.5]),
        };
        ns[d.weighted(w)]
    }

    /// Pod name stem and container name.
    pub fn names(self, d: &mut impl Draw) -> (&'static str, &'static str) {
        let stems: &[&str] = match self {
            Class::Train => &["resnet-train", "bert-finetune", "whisper-train", "llama-sft", "vit-pretrain"],
            Class::ShortJob => &["eval-job", "batch-embed", "feature-extract", "ckpt-convert"],
            Class::Inference => &["triton-infer", "vllm-serve", "ranker-serve", "asr-serve"],
            Class::Dev => &["jupyter", "notebook", "debug-shell"],
            Class::Squatter => &["jupyter-lab", "notebook-idle"],
        };
        let container = match self {
            Class::Train => "trainer",
            Class::ShortJob => "job",
            Class::Inference => "server",
            Class::Dev | Class::Squatter => "notebook",
        };
        (stems[d.int(0, stems.len() as i64) as usize], container)
    }

    /// Running duration in ms.
    pub fn duration_ms(self, d: &mut impl Draw) -> i64 {
        match self {
            Class::Train => d.int(HOUR_MS, 10 * HOUR_MS),
            Class::ShortJob => d.int(5 * MIN_MS, 50 * MIN_MS),
            Class::Inference => d.int(4 * HOUR_MS, 36 * HOUR_MS),
            Class::Dev => d.int(30 * MIN_MS, 4 * HOUR_MS),
            Class::Squatter => 30 * DAY_MS,
        }
    }

    /// Probability that the pod ends Failed.
    pub fn p_fail(self) -> f64 {
        match self {
            Class::Train => 0.15,
            Class::ShortJob => 0.12,
            Class::Inference => 0.04,
            Class::Dev => 0.06,
            Class::Squatter => 0.0,
        }
    }

    /// Range of framebuffer use as a fraction of the unit's memory.
    pub fn fb_frac(self, d: &mut impl Draw) -> f64 {
        match self {
            Class::Train => d.range(0.55, 0.95),
            Class::ShortJob => d.range(0.2, 0.8),
            Class::Inference => d.range(0.3, 0.75),
            Class::Dev => d.range(0.05, 0.5),
            Class::Squatter => d.range(0.3, 0.85),
        }
    }

    /// Utilization pattern.
    pub fn pattern(self, d: &mut impl Draw) -> Pattern {
        match self {
            Class::Train if d.u() < 0.6 => {
                Pattern::Training { base: d.range(0.7, 0.95), ckpt_ms: d.int(20, 60) * MIN_MS }
            }
            Class::Train => {
                Pattern::SawTooth { period_ms: d.int(20, 90) * MIN_MS, lo: d.range(0.2, 0.4), hi: d.range(0.8, 1.0) }
            }
            // Between bursts a job still loads data and evaluates (≥ 12 %): only squatters are idle by SPEC §7's
            // rule, so the idle list's ground truth is the squatters.
            Class::ShortJob if d.u() < 0.5 => Pattern::Bursty {
                block_ms: d.int(2, 10) * MIN_MS,
                p_on: d.range(0.4, 0.8),
                hi: d.range(0.7, 1.0),
                lo: d.range(0.12, 0.2),
            },
            Class::ShortJob => Pattern::Training { base: d.range(0.6, 0.95), ckpt_ms: d.int(10, 30) * MIN_MS },
            Class::Inference if d.u() < 0.5 => Pattern::Steady { base: d.range(0.2, 0.6) },
            Class::Inference => {
                Pattern::Diurnal { mid: d.range(0.35, 0.5), amp: d.range(0.1, 0.35), phase_ms: d.int(0, DAY_MS) }
            }
            // A notebook in use: bursts of work over a light floor (small evals, plotting, data loading).
            Class::Dev => Pattern::Bursty {
                block_ms: d.int(5, 20) * MIN_MS,
                p_on: d.range(0.1, 0.3),
                hi: d.range(0.3, 0.8),
                lo: d.range(0.12, 0.2),
            },
            Class::Squatter => Pattern::Idle { level: d.range(0.0, 0.03) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_util_is_pure_and_bounded() {
        let pats = [
            Pattern::Steady { base: 0.5 },
            Pattern::Training { base: 0.9, ckpt_ms: 30 * MIN_MS },
            Pattern::Bursty { block_ms: 5 * MIN_MS, p_on: 0.5, hi: 0.9, lo: 0.02 },
            Pattern::SawTooth { period_ms: 40 * MIN_MS, lo: 0.2, hi: 1.0 },
            Pattern::Diurnal { mid: 0.4, amp: 0.3, phase_ms: 0 },
            Pattern::Idle { level: 0.02 },
        ];
        for p in &pats {
            for t in (0..DAY_MS).step_by(61_000) {
                let a = base_util(p, 42, 1, 0, t);
                assert_eq!(a, base_util(p, 42, 1, 0, t));
                assert!((0.0..=1.0).contains(&a));
                assert_eq!(a, q4(a));
            }
        }
        for t in (0..DAY_MS).step_by(61_000) {
            assert!(base_util(&Pattern::Idle { level: 0.03 }, 7, 0, 0, t) <= 0.03);
        }
    }
}
