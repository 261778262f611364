//! OpenMetrics text built series by series, for hand-made clusters backfilled into a real Prometheus.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Kube-state-metrics' and the exporters' usual scrape interval in the hand-made clusters.
pub const MINUTE_MS: i64 = 60_000;

/// Family → series (its labels as written) → samples (ms, value), written sorted by time.
#[derive(Default)]
pub struct Om {
    families: BTreeMap<String, BTreeMap<String, Vec<(i64, f64)>>>,
}

impl Om {
    /// The samples of one series, created empty the first time.
    pub fn series(&mut self, name: &str, labels: &[(&str, &str)]) -> &mut Vec<(i64, f64)> {
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        self.families.entry(name.to_string()).or_default().entry(labels.join(",")).or_default()
    }

    /// `v` every `step` ms (phase `phase` ms) in `[from, to)`.
    pub fn every(
        &mut self,
        name: &str,
        labels: &[(&str, &str)],
        (from, to): (i64, i64),
        phase: i64,
        step: i64,
        v: f64,
    ) {
        let s = self.series(name, labels);
        let mut t = from + phase;
        while t < to {
            s.push((t, v));
            t += step;
        }
    }

    /// `v` every minute on the minute in `[from, to)`.
    pub fn every_minute(&mut self, name: &str, labels: &[(&str, &str)], span: (i64, i64), v: f64) {
        self.every(name, labels, span, 0, MINUTE_MS, v);
    }

    /// Writes the file `promtool tsdb create-blocks-from openmetrics` reads (every family a gauge).
    pub fn write(&self, path: &Path) {
        let mut out = String::new();
        for (name, series) in &self.families {
            writeln!(out, "# TYPE {name} gauge").unwrap();
            for (labels, samples) in series {
                let mut samples = samples.clone();
                samples.sort_by_key(|(t, _)| *t);
                for (t, v) in samples {
                    writeln!(out, "{name}{{{labels}}} {v} {}.{:03}", t.div_euclid(1000), t.rem_euclid(1000)).unwrap();
                }
            }
        }
        out.push_str("# EOF\n");
        std::fs::write(path, out).unwrap();
    }
}
