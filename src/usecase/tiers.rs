//! Efficiency by team: the utilization heatmap's cells (team × billing day) and the efficiency tiers of SPEC §8
//! (≥ 70 % golden, 50–70 % silver, < 50 % bronze) — cluster-wide views, for global readers.

use std::collections::BTreeMap;

use chrono::NaiveDate;

use super::{Error, Services, global_only};
use crate::access::Scope;
use crate::billing::Month;
use crate::waste::{CapacitySeconds, utilization_report};

/// A team's efficiency tier by its utilization (effective ÷ metered GPU-hours).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    Golden,
    Silver,
    Bronze,
}

impl Tier {
    /// ≥ 0.70 golden, 0.50 up to 0.70 silver, below 0.50 bronze; no metered time, no tier.
    pub fn of(utilization: Option<f64>) -> Option<Tier> {
        let u = utilization.filter(|u| u.is_finite())?;
        Some(if u >= 0.70 {
            Tier::Golden
        } else if u >= 0.50 {
            Tier::Silver
        } else {
            Tier::Bronze
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Golden => "golden",
            Tier::Silver => "silver",
            Tier::Bronze => "bronze",
        }
    }
}

/// The utilization of each team on each billing day of `month` (`None`: nothing metered that day), the days in
/// order; computed per team by the report's own rule ([`utilization_report`]).
pub struct Heatmap {
    pub days: Vec<NaiveDate>,
    pub teams: Vec<(String, Vec<Option<f64>>)>,
}

pub async fn heatmap(s: &Services, scope: &Scope, month: Month) -> Result<Heatmap, Error> {
    global_only(scope)?;
    let (from, to) = (month.first_day(), month.next().first_day());
    let rows = crate::db::reports::usage_by_day_team(&s.pool, from, to).await?;
    let days: Vec<NaiveDate> = from.iter_days().take_while(|d| *d < to).collect();
    let mut by_team: BTreeMap<String, Vec<_>> = BTreeMap::new();
    for r in rows {
        by_team.entry(r.team.clone()).or_default().push((
            r.day,
            r.team,
            r.gpu_seconds,
            r.effective_gpu_seconds,
            r.unmetered_gpu_seconds,
        ));
    }
    let none: BTreeMap<NaiveDate, CapacitySeconds> = BTreeMap::new();
    let teams = by_team
        .into_iter()
        .map(|(team, usage)| {
            let report = utilization_report(&usage, &none);
            let per_day: BTreeMap<NaiveDate, Option<f64>> =
                report.days.iter().map(|d| (d.day, d.figures.utilization)).collect();
            (team, days.iter().map(|d| per_day.get(d).copied().flatten()).collect())
        })
        .collect();
    Ok(Heatmap { days, teams })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_split_at_seventy_and_fifty_percent() {
        assert_eq!(Tier::of(Some(0.70)), Some(Tier::Golden));
        assert_eq!(Tier::of(Some(0.6999)), Some(Tier::Silver));
        assert_eq!(Tier::of(Some(0.50)), Some(Tier::Silver));
        assert_eq!(Tier::of(Some(0.4999)), Some(Tier::Bronze));
        assert_eq!(Tier::of(Some(0.0)), Some(Tier::Bronze));
        assert_eq!(Tier::of(None), None);
        assert_eq!(Tier::of(Some(f64::NAN)), None);
    }
}
