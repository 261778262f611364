//! Monthly bills (月度账单) per team, from GPU-hours already priced per rate period — pure domain code, no I/O.
//!
//! - [`month`]: the billing month `YYYY-MM` and its bounds in the billing time zone.
//! - [`lines`]: usage and capacity lines in, priced bill lines out (rounded half up to the fen per line).
//! - [`compute`]: [`compute_month`] — team bills, capacity cost, the unallocated cost and its policy.
//! - [`replicas`]: how time-sliced replicas are billed (fraction or whole card), dated per cluster or pool.
//! - [`spread`]: largest-remainder split, so spread shares sum exactly to the amount split.
//! - [`restate`]: restatement lines for a closed month recomputed later.
//! - [`rebill`]: a month's bills with card-hours moved between lines (a node's settings changed), recomputed.
//! - [`totals`]: the total row of a month's teams table.
//! - [`reserved`]: reserved-quota billing's reservation lines and the scopes' dated reservation terms (SPEC §10).
//! - [`unit_cost`]: ¥ per million tokens and per thousand requests of serving pods (SPEC §9).
//! - [`finance`]: a team's dated finance codes (cost centre, GL account, legal entity; SPEC §11) on its lines.
//!
//! Rates arrive resolved (a `RatePerCardHour` per period, or `None` when unknown): this module knows nothing
//! of how they are derived. Invariants, each tested by property: every total is the sum of its lines;
//! Σ team totals + platform_kept = capacity_cost (+ over-recovery + capacity shortfall), to the fen, under either
//! unallocated policy (+ over-commitment under reserved-quota billing); unallocated is never negative; showback and
//! chargeback produce identical numbers.

pub mod compute;
pub mod finance;
pub mod lines;
pub mod month;
pub mod rebill;
pub mod replicas;
pub mod reserved;
pub mod restate;
pub mod spread;
pub mod totals;
pub mod unit_cost;

#[cfg(test)]
mod proptests;

pub use compute::{
    BillMode, BillPolicy, MonthBills, PolicyChoice, TeamBill, UnallocatedPolicy, compute_month, compute_month_reserved,
};
pub use finance::{FinanceCodeBook, FinanceCodeVersion, FinanceCodes};
pub use lines::{BillLine, CapacityBillLine, CapacityLine, LineKey, UsageLine};
pub use month::{DEFAULT_BILLING_TZ, Month, MonthParseError};
pub use replicas::{ReplicaBilling, ReplicaPolicyBook, ReplicaPolicyVersion};
pub use reserved::{ReservationBook, ReservationCredit, ReservationLine, ReservationTerm, Reservations};
pub use restate::{RestatementLine, UNALLOCATED_SHARE_NAMESPACE, restate_month, restatement};
pub use spread::largest_remainder;
pub use totals::MonthTotals;
pub use unit_cost::{ModelHour, PodHour, UnitCostRow, UnitGroup, unit_costs};
