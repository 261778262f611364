//! The one error of the use cases, in their own terms and closed: each face (HTTP, pages, command line) turns it
//! into its own answer by matching these variants only. What the layers below fail with (the ledger's refusals,
//! a database constraint, a webhook client) is translated here, never shown to a face as it is.

use super::alerts::AlertError;
use crate::billing::Month;
use crate::db::constraint::{self, Violation};
use crate::ledger::LedgerError;
use crate::ledger::readiness::Readiness;
use crate::validate::FieldError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Values that break a rule; every bad field is listed.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<FieldError>),
    /// Absent — or present but outside the caller's scope: a team lead learns nothing of other teams.
    #[error("{0} not found")]
    NotFound(String),
    /// Absent, for a value the caller named in `field`.
    #[error("{message}")]
    NotFoundField { field: String, message: String },
    /// The stored data refuses the request as it stands: written first by someone else, a month closed already,
    /// a closed month asked for under another policy.
    #[error("{message}")]
    Conflict { field: Option<String>, message: String },
    /// A month that is not complete (SPEC §6), closed without an override: what stands in the way.
    #[error("month {} is not ready to close: {}", .0.month,
        .0.blockers.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NotReady(Box<Readiness>),
    /// A month closed before it ended.
    #[error("month {0} has not ended yet")]
    NotEnded(Month),
    /// A cluster-wide use case asked for by a team-scoped caller.
    #[error("this is for global readers only")]
    Forbidden,
    /// The database had no time for it (every connection busy, or the statement cancelled by its timeout): the
    /// service is overloaded, not broken; the caller may try again.
    #[error("the request took too long and was cancelled; narrow it (a shorter range, fewer rows)")]
    Timeout,
    /// Anything else: logged by the face, never shown to a page's reader or an API client (the command line's
    /// operator reads it).
    #[error(transparent)]
    Internal(anyhow::Error),
}

impl Error {
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid(vec![FieldError::new(field, message)])
    }

    /// A failure of the service itself, logged by the face that answers.
    pub fn internal(e: impl Into<anyhow::Error>) -> Self {
        Self::Internal(e.into())
    }
}

impl From<FieldError> for Error {
    fn from(e: FieldError) -> Self {
        Self::Invalid(vec![e])
    }
}

impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Self {
        Self::Internal(e)
    }
}

/// A refusal of the database by a constraint is the caller's (a race lost, a value the schema refuses): a
/// conflict or an invalid field, naming the field the constraint protects ([`constraint::on_constraint`]). A
/// statement without time is [`Error::Timeout`]; everything else is internal.
impl From<sqlx::Error> for Error {
    fn from(e: sqlx::Error) -> Self {
        if constraint::is_timeout(&e) {
            return Self::Timeout;
        }
        let Some(refusal) = constraint::on_constraint(&e) else { return Self::Internal(e.into()) };
        let field = refusal.field.map(str::to_string);
        let invalid = |message: &str| Self::invalid(field.clone().unwrap_or_else(|| "body".into()), message);
        match refusal.violation {
            Violation::Unique | Violation::Exclusion => {
                Self::Conflict { field, message: "it exists already (written concurrently or before)".into() }
            }
            Violation::ForeignKey => invalid("refers to something that does not exist"),
            Violation::Check => invalid("is not a value the ledger accepts"),
            Violation::OutOfRange => invalid("holds a value out of range or a NUL byte"),
        }
    }
}

/// The ledger's refusals in the use cases' terms; its failures (a snapshot unreadable, an integrity check
/// failed, inconsistent rates) are internal.
impl From<LedgerError> for Error {
    fn from(e: LedgerError) -> Self {
        match e {
            LedgerError::Database(e) => e.into(),
            LedgerError::AlreadyClosed(m) => {
                Self::Conflict { field: Some("month".into()), message: format!("month {m} is closed already") }
            }
            LedgerError::NotEnded(m) => Self::NotEnded(m),
            LedgerError::NotReady(r) => Self::NotReady(r),
            e @ LedgerError::PolicyMismatch { field, .. } => {
                Self::Conflict { field: Some(field.into()), message: e.to_string() }
            }
            LedgerError::OverrideReason(e) => e.into(),
            e @ (LedgerError::Rates(_) | LedgerError::Snapshot(..) | LedgerError::Integrity { .. }) => {
                Self::Internal(e.into())
            }
        }
    }
}

impl From<crate::db::rates::RateBookError> for Error {
    fn from(e: crate::db::rates::RateBookError) -> Self {
        LedgerError::from(e).into()
    }
}

/// A budget check: the ledger's and the database's failures as above; a webhook client that cannot be built is
/// the service's own failure.
impl From<AlertError> for Error {
    fn from(e: AlertError) -> Self {
        match e {
            AlertError::Ledger(e) => e.into(),
            AlertError::Database(e) => e.into(),
            e @ AlertError::WebhookClient(_) => Self::Internal(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::constraint::fake::refused;

    fn conflict_field(e: Error) -> Option<String> {
        match e {
            Error::Conflict { field, .. } => field,
            other => panic!("not a conflict: {other:?}"),
        }
    }

    fn invalid_field(e: Error) -> String {
        match e {
            Error::Invalid(list) => {
                assert_eq!(list.len(), 1, "{list:?}");
                list[0].field.clone()
            }
            other => panic!("not invalid: {other:?}"),
        }
    }

    #[test]
    fn a_unique_violation_is_a_conflict_on_its_field() {
        let e = Error::from(refused("23505", Some("rate_versions_gpu_model_effective_from_key")));
        assert_eq!(conflict_field(e).as_deref(), Some("effective_from"));
        assert_eq!(conflict_field(refused("23505", Some("teams_pkey")).into()).as_deref(), Some("id"));
        assert_eq!(conflict_field(refused("23505", Some("budgets_pkey")).into()).as_deref(), Some("month"));
        assert_eq!(
            conflict_field(refused("23505", Some("namespace_mappings_unique")).into()).as_deref(),
            Some("valid_from")
        );
        // a constraint no caller names: a conflict all the same, without a field
        assert_eq!(conflict_field(refused("23505", Some("usage_hours_pkey")).into()), None);
    }

    #[test]
    fn an_exclusion_violation_is_a_conflict() {
        assert_eq!(conflict_field(refused("23P01", Some("closed_months_pkey")).into()).as_deref(), Some("month"));
    }

    #[test]
    fn a_foreign_key_violation_is_an_invalid_field() {
        assert_eq!(invalid_field(refused("23503", Some("budgets_team_id_fkey")).into()), "team");
        assert_eq!(invalid_field(refused("23503", Some("namespace_mappings_team_id_fkey")).into()), "team_id");
        assert_eq!(invalid_field(refused("23503", None).into()), "body");
    }

    #[test]
    fn a_check_violation_is_an_invalid_field() {
        assert_eq!(invalid_field(refused("23514", Some("teams_name_check")).into()), "name");
        assert_eq!(invalid_field(refused("23514", Some("rate_versions_rate_check")).into()), "rate");
        assert_eq!(invalid_field(refused("23514", Some("budgets_month_check")).into()), "month");
        assert_eq!(invalid_field(refused("23502", None).into()), "body");
        assert_eq!(invalid_field(refused("22021", None).into()), "body");
    }

    #[test]
    fn timeouts_and_other_failures_are_not_the_callers() {
        assert!(matches!(Error::from(sqlx::Error::PoolTimedOut), Error::Timeout));
        assert!(matches!(Error::from(refused("57014", None)), Error::Timeout));
        assert!(matches!(Error::from(refused("40P01", None)), Error::Internal(_)));
        assert!(matches!(Error::from(sqlx::Error::RowNotFound), Error::Internal(_)));
    }

    #[test]
    fn the_ledgers_refusals_are_the_use_cases_own() {
        let m: Month = "2026-11".parse().unwrap();
        assert!(matches!(Error::from(LedgerError::NotEnded(m)), Error::NotEnded(n) if n == m));
        assert_eq!(conflict_field(LedgerError::AlreadyClosed(m).into()).as_deref(), Some("month"));
        let e = LedgerError::PolicyMismatch { month: m, field: "mode", asked: "showback", frozen: "chargeback" };
        assert_eq!(conflict_field(e.into()).as_deref(), Some("mode"));
        let e = LedgerError::OverrideReason(FieldError::new("override_reason", "must not be blank"));
        assert_eq!(invalid_field(e.into()), "override_reason");
        assert_eq!(
            conflict_field(LedgerError::Database(refused("23505", Some("closed_months_pkey"))).into()).as_deref(),
            Some("month")
        );
        let e = LedgerError::Integrity { month: m.to_string(), stored: "a".into(), actual: "b".into() };
        assert!(matches!(Error::from(e), Error::Internal(_)));
        assert!(matches!(Error::from(LedgerError::Rates("two rates".into())), Error::Internal(_)));
    }

    #[test]
    fn a_webhook_client_that_cannot_be_built_is_internal_not_the_database() {
        let e = Error::from(AlertError::WebhookClient("no TLS backend".into()));
        assert!(matches!(e, Error::Internal(_)));
        assert!(matches!(Error::from(AlertError::Database(sqlx::Error::PoolTimedOut)), Error::Timeout));
    }
}
