//! What every part of one hour's metering shares: the hour's scrape grid and the anomalies counted on the way.

use std::collections::BTreeMap;

use super::output::{Anomaly, AnomalyKind};

#[derive(Debug, Clone, Copy)]
pub(super) struct Grid {
    pub(super) start: i64,
    pub(super) end: i64,
    pub(super) interval_ms: i64,
    pub(super) half: i64,
    /// The longest KSM gap bridged, in ms (0: none).
    pub(super) bridge_ms: i64,
    /// Whether KSM gaps are looked for at all: the samples keep the scrape interval.
    pub(super) gaps: bool,
    /// The scrape intervals of DCGM and of HAMi's monitor (inferred from their samples, else KSM's): what one
    /// of their samples covers.
    pub(super) dcgm_interval_ms: i64,
    pub(super) hami_interval_ms: i64,
}

impl Grid {
    pub(super) fn contains(&self, t: i64) -> bool {
        t >= self.start && t < self.end
    }
}

#[derive(Default)]
pub(super) struct Anomalies(BTreeMap<(AnomalyKind, String), u64>);

impl Anomalies {
    pub(super) fn add(&mut self, kind: AnomalyKind, subject: String, count: u64) {
        *self.0.entry((kind, subject)).or_default() += count;
    }
    pub(super) fn into_vec(self) -> Vec<Anomaly> {
        self.0.into_iter().map(|((kind, subject), count)| Anomaly { kind, subject, count }).collect()
    }
}
