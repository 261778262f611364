//! The monthly utilization report (SPEC §7): allocation rate, utilization and effective rate, per day and per
//! team. Pure: daily sums in, ratios out. The allocation rate is measured against the capacity offered to
//! workloads (SPEC §3: a cordoned node or an unhealthy card could not be allocated), shown beside it with what
//! was not offered.

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
    /// The part of `capacity_card_hours` offered to workloads: not cordoned, allocatable.
    pub offered_card_hours: f64,
    /// `capacity_card_hours − offered_card_hours`: cordoned nodes and unhealthy cards.
    pub not_offered_card_hours: f64,
    /// Allocated ÷ offered card-hours.
    pub allocation_rate: Option<f64>,
    /// Effective ÷ metered GPU-hours (the GPU-hour-weighted mean utilization).
    pub utilization: Option<f64>,
    /// Effective GPU-hours ÷ capacity card-hours.
    pub effective_rate: Option<f64>,
}

impl Figures {
    fn new(gpu_s: f64, eff_s: f64, unm_s: f64, cap: CapacitySeconds) -> Figures {
        let ratio = |a: f64, b: f64| (b > 0.0).then(|| a / b);
        let (cap_s, offered_s) = (cap.capacity, cap.offered.clamp(0.0, cap.capacity.max(0.0)));
        Figures {
            gpu_hours: gpu_s / 3600.0,
            effective_gpu_hours: eff_s / 3600.0,
            unmetered_gpu_hours: unm_s / 3600.0,
            capacity_card_hours: cap_s / 3600.0,
            offered_card_hours: offered_s / 3600.0,
            not_offered_card_hours: (cap_s - offered_s) / 3600.0,
            allocation_rate: ratio(gpu_s, offered_s),
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

/// Capacity card-seconds and the part of them offered to workloads.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CapacitySeconds {
    pub capacity: f64,
    pub offered: f64,
}

impl std::ops::AddAssign for CapacitySeconds {
    fn add_assign(&mut self, o: CapacitySeconds) {
        self.capacity += o.capacity;
        self.offered += o.offered;
    }
}

/// Builds the report from usage per day and team and capacity per day (card-seconds).
pub fn utilization_report(usage: &[DayTeamSums], capacity: &BTreeMap<NaiveDate, CapacitySeconds>) -> UtilizationReport {
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
    let cap_total = capacity.values().fold(CapacitySeconds::default(), |mut a, c| {
        a += *c;
        a
    });
    let totals = days.values().fold([0.0; 3], |a, (s, _)| [a[0] + s[0], a[1] + s[1], a[2] + s[2]]);
    UtilizationReport {
        totals: Figures::new(totals[0], totals[1], totals[2], cap_total),
        days: days
            .into_iter()
            .map(|(day, (s, teams))| DayFigures {
                day,
                figures: Figures::new(s[0], s[1], s[2], capacity.get(&day).copied().unwrap_or_default()),
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
                    share_of_capacity: (cap_total.capacity > 0.0).then(|| s[0] / cap_total.capacity),
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
        let all = |s: f64| CapacitySeconds { capacity: s, offered: s };
        let cap = BTreeMap::from([(d1, all(192.0 * h)), (d2, all(192.0 * h))]);
        let r = utilization_report(&usage, &cap);
        assert_eq!(r.totals.gpu_hours, 144.0);
        assert_eq!(r.totals.allocation_rate, Some(144.0 / 384.0));
        assert_eq!((r.totals.offered_card_hours, r.totals.not_offered_card_hours), (384.0, 0.0));
        // unmetered time is left out of utilization: 48 / 96, not 48 / 144
        assert_eq!(r.totals.utilization, Some(0.5));
        assert_eq!(r.totals.effective_rate, Some(48.0 / 384.0));
        assert_eq!(r.days.len(), 2);
        assert_eq!(r.days[1].figures.allocation_rate, Some(0.0));
        assert_eq!(r.days[0].teams["a"], 96.0);
        assert_eq!(r.teams[1].utilization, None);
    }

    #[test]
    fn allocation_counts_offered_cards_only() {
        let d1 = NaiveDate::from_ymd_opt(2026, 10, 1).unwrap();
        let h = 3600.0;
        // 16 cards for 24 h = 384 card-hours; one 8-card node cordoned for 12 h (96) and 2 unhealthy cards
        // (48): 240 offered. Team a holds 120 card-hours: half of what was offered, 31.25 % of capacity.
        let usage = vec![(d1, "a".to_string(), 120.0 * h, 60.0 * h, 0.0)];
        let cap = BTreeMap::from([(d1, CapacitySeconds { capacity: 384.0 * h, offered: 240.0 * h })]);
        let r = utilization_report(&usage, &cap);
        assert_eq!(r.totals.capacity_card_hours, 384.0);
        assert_eq!((r.totals.offered_card_hours, r.totals.not_offered_card_hours), (240.0, 144.0));
        assert_eq!(r.totals.allocation_rate, Some(0.5));
        assert_eq!(r.days[0].figures.allocation_rate, Some(0.5));
        // effective rate and a team's share stay on the whole capacity
        assert_eq!(r.totals.effective_rate, Some(60.0 / 384.0));
        assert_eq!(r.teams[0].share_of_capacity, Some(120.0 / 384.0));
    }
}
