//! The monthly utilization report (SPEC §7): allocation rate, utilization and effective rate, per day and per
//! team. Pure: daily sums in, ratios out.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::Serialize;

/// Card-hour sums and the ratios made from them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Figures {
    pub gpu_hours: f64,
    pub effective_gpu_hours: f64,
    pub unmetered_gpu_hours: f64,
    pub capacity_card_hours: f64,
    /// Allocated ÷ capacity card-hours.
    pub allocation_rate: Option<f64>,
    /// Effective ÷ metered GPU-hours (the GPU-hour-weighted mean utilization).
    pub utilization: Option<f64>,
    /// Effective GPU-hours ÷ capacity card-hours.
    pub effective_rate: Option<f64>,
}

impl Figures {
    fn new(gpu_s: f64, eff_s: f64, unm_s: f64, cap_s: f64) -> Figures {
        let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
        Figures {
            gpu_hours: gpu_s / 3600.0,
            effective_gpu_hours: eff_s / 3600.0,
            unmetered_gpu_hours: unm_s / 3600.0,
            capacity_card_hours: cap_s / 3600.0,
            allocation_rate: ratio(gpu_s, cap_s),
            utilization: ratio(eff_s, gpu_s - unm_s),
            effective_rate: ratio(eff_s, cap_s),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct DayFigures {
    pub day: NaiveDate,
    #[serde(flatten)]
    pub figures: Figures,
    /// GPU-hours per team that day (the stacked trend).
    pub teams: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TeamFigures {
    pub team: String,
    pub gpu_hours: f64,
    pub effective_gpu_hours: f64,
    pub unmetered_gpu_hours: f64,
    /// Effective ÷ metered GPU-hours.
    pub utilization: Option<f64>,
    /// The team's GPU-hours ÷ the cluster's capacity card-hours.
    pub share_of_capacity: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct UtilizationReport {
    pub totals: Figures,
    pub days: Vec<DayFigures>,
    pub teams: Vec<TeamFigures>,
}

/// One day × team of usage: (day, team, gpu s, effective s, unmetered s).
pub type DayTeamSums = (NaiveDate, String, f64, f64, f64);

/// Builds the report from usage per day and team and capacity per day (card-seconds).
pub fn utilization_report(usage: &[DayTeamSums], capacity: &BTreeMap<NaiveDate, f64>) -> UtilizationReport {
    let mut days: BTreeMap<NaiveDate, ([f64; 3], BTreeMap<String, f64>)> =
        capacity.keys().map(|d| (*d, Default::default())).collect();
    let mut teams: BTreeMap<&str, [f64; 3]> = BTreeMap::new();
    for (day, team, g, e, u) in usage {
        let d = days.entry(*day).or_default();
        d.0[0] += g;
        d.0[1] += e;
        d.0[2] += u;
        *d.1.entry(team.clone()).or_default() += g / 3600.0;
        let t = teams.entry(team).or_default();
        t[0] += g;
        t[1] += e;
        t[2] += u;
    }
    let cap_total: f64 = capacity.values().sum();
    let totals = days.values().fold([0.0; 3], |a, (s, _)| [a[0] + s[0], a[1] + s[1], a[2] + s[2]]);
    UtilizationReport {
        totals: Figures::new(totals[0], totals[1], totals[2], cap_total),
        days: days
            .into_iter()
            .map(|(day, (s, teams))| DayFigures {
                day,
                figures: Figures::new(s[0], s[1], s[2], capacity.get(&day).copied().unwrap_or(0.0)),
                teams,
            })
            .collect(),
        teams: teams
            .into_iter()
            .map(|(team, s)| {
                let f = Figures::new(s[0], s[1], s[2], cap_total);
                TeamFigures {
                    team: team.to_string(),
                    gpu_hours: f.gpu_hours,
                    effective_gpu_hours: f.effective_gpu_hours,
                    unmetered_gpu_hours: f.unmetered_gpu_hours,
                    utilization: f.utilization,
                    share_of_capacity: f.allocation_rate,
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_of_a_small_month() {
        let d1 = NaiveDate::from_ymd_opt(2026, 10, 1).unwrap();
        let d2 = d1.succ_opt().unwrap();
        let h = 3600.0;
        // day 1: 8 cards for 24 h; team a holds 4 for 24 h at 50 %, b holds 2 for 24 h unmetered
        // day 2: nothing held
        let usage =
            vec![(d1, "a".to_string(), 96.0 * h, 48.0 * h, 0.0), (d1, "b".to_string(), 48.0 * h, 0.0, 48.0 * h)];
        let cap = BTreeMap::from([(d1, 192.0 * h), (d2, 192.0 * h)]);
        let r = utilization_report(&usage, &cap);
        assert_eq!(r.totals.gpu_hours, 144.0);
        assert_eq!(r.totals.allocation_rate, Some(144.0 / 384.0));
        // unmetered time is left out of utilization: 48 / 96, not 48 / 144
        assert_eq!(r.totals.utilization, Some(0.5));
        assert_eq!(r.totals.effective_rate, Some(48.0 / 384.0));
        assert_eq!(r.days.len(), 2);
        assert_eq!(r.days[1].figures.allocation_rate, Some(0.0));
        assert_eq!(r.days[0].teams["a"], 96.0);
        assert_eq!(r.teams[1].utilization, None);
    }
}
