//! The use cases: what the faces (the JSON API, the pages, the command line) and the exports ask of cardhour —
//! statements and their files, the ledger on the database (computing, reading, closing months: [`ledger`]) and a
//! month's readiness, usage, idle lists, reports, budgets and their alerts, rates, teams, mappings and their import,
//! the audit log, ingest health. Every read takes the caller's access scope explicitly; the faces parse input and
//! present answers, the numbers and rules are here and in the pure layers below, the SQL in `db`. Nothing here knows
//! a terminal; of HTTP only [`state`], the state both faces' handlers reach, with the limits they share.

pub mod adjustments;
pub mod alerts;
pub mod audit;
pub mod budgets;
pub mod cache;
pub mod capacity_plan;
pub mod close_events;
pub mod closing;
pub mod exports;
pub mod extras;
pub mod finance_codes;
pub mod health;
pub mod idle;
pub mod ledger;
pub mod mapping_import;
pub mod mappings;
pub mod months;
pub mod nodes;
pub mod queue_mapping_import;
pub mod queue_mappings;
pub mod quotas;
pub mod rates;
pub mod readiness;
pub mod replicas;
pub mod report_exports;
pub mod reports;
pub mod reservation_terms;
pub mod state;
pub mod statements;
pub mod team_home;
pub mod teams;
pub mod tiers;
pub mod tokens;
pub mod unit_cost;
pub mod usage;
pub mod users;

mod error;

use std::sync::Arc;

use sqlx::PgPool;

pub use error::Error;

use crate::access::Scope;
use cache::StampedCache;

/// What every use case works with: the database, the billing time zone, and the answers kept in memory until the
/// data behind them changes (dashboards repeat them). Cheap to clone: the caches are shared.
#[derive(Clone)]
pub struct Services {
    pub pool: PgPool,
    /// The billing time zone (months and rate dates are in it).
    pub billing_tz: chrono_tz::Tz,
    pub statements: Arc<statements::StatementCache>,
    pub usage: Arc<StampedCache<usage::UsageKey, Vec<usage::UsageRow>>>,
    pub idle: Arc<StampedCache<idle::IdleKey, Vec<crate::waste::IdlePod>>>,
    /// A month's utilization report (the home, the reports and the statements' figures read it on every view).
    pub utilization: Arc<StampedCache<crate::billing::Month, crate::waste::UtilizationReport>>,
    pub low_utilization: Arc<StampedCache<reports::LowUtilizationKey, Vec<crate::waste::WastefulPod>>>,
}

impl Services {
    pub fn new(pool: PgPool, billing_tz: chrono_tz::Tz) -> Self {
        Self {
            pool,
            billing_tz,
            statements: Default::default(),
            usage: Default::default(),
            idle: Default::default(),
            utilization: Default::default(),
            low_utilization: Default::default(),
        }
    }
}

/// The cluster-wide use cases are for global readers only: a team-scoped caller is refused (each face also admits
/// only global readers to them; this keeps a face that forgets from leaking cluster-wide figures).
fn global_only(scope: &Scope) -> Result<(), Error> {
    if scope.is_global() { Ok(()) } else { Err(Error::Forbidden) }
}
