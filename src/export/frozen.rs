//! A reader's part of what a close froze besides the statement ([`FrozenExtras`], stored in the snapshot): the
//! extras its PDF prints, filtered by the reader's scope, so a closed month's PDF never reads live data.

use super::StatementExtras;
use crate::access::Scope;
use crate::ledger::frozen::{FrozenExtras, PreviousMonth};

/// A reader's part of a closed month's frozen extras.
pub trait ScopedExtras {
    /// What `scope` may see of them, as today's live extras give it: its teams' idle pods; the finance summary
    /// and the cluster-wide utilization for a global reader only.
    fn for_scope(&self, scope: &Scope) -> StatementExtras;
}

impl ScopedExtras for FrozenExtras {
    fn for_scope(&self, scope: &Scope) -> StatementExtras {
        let global = scope.teams.is_none();
        StatementExtras {
            idle: self.idle.iter().filter(|p| scope.allows(&p.team)).cloned().collect(),
            utilization: global.then(|| self.utilization.clone()),
            finance_summary: global,
            coverage: self.coverage.clone().unwrap_or_default(),
            budgets: self
                .budgets
                .iter()
                .flatten()
                .filter(|(t, _)| scope.allows(t))
                .map(|(t, m)| (t.clone(), *m))
                .collect(),
            previous: self
                .previous
                .clone()
                .map(|p| PreviousMonth { teams: p.teams.into_iter().filter(|(t, _)| scope.allows(t)).collect(), ..p }),
            prepared: None,
            time_zone: self.time_zone.as_deref().and_then(|z| z.parse().ok()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::frozen::{UtilizationFigures, test_line as line};
    use crate::money::Money;
    use std::collections::BTreeMap;

    #[test]
    fn a_team_lead_gets_its_own_idle_pods_and_no_cluster_figure() {
        let frozen = FrozenExtras {
            idle: vec![line("nlp", "a"), line("vision", "b"), line("nlp", "c")],
            utilization: UtilizationFigures { gpu_hours: 7.0, ..Default::default() },
            budgets: Some(BTreeMap::from([("nlp".into(), Money::ZERO), ("vision".into(), Money::ZERO)])),
            ..Default::default()
        };
        let lead = frozen.for_scope(&Scope::teams(vec!["nlp".into()]));
        assert_eq!(lead.idle.iter().map(|p| p.pod.as_str()).collect::<Vec<_>>(), ["a", "c"]);
        assert!(lead.utilization.is_none() && !lead.finance_summary);
        assert_eq!(lead.budgets.keys().collect::<Vec<_>>(), ["nlp"]);
        let all = frozen.for_scope(&Scope::all());
        assert_eq!(all.idle.len(), 3);
        assert_eq!(all.utilization.map(|u| u.gpu_hours), Some(7.0));
        assert!(all.finance_summary);
    }
}
