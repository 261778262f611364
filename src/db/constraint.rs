//! What a refusal of the database means for the caller: a violated constraint read from its SQLSTATE and name
//! (the names the migrations create), as a typed [`Refusal`] naming the input field the constraint protects. The
//! use cases turn it into a conflict or an invalid field; nothing above `db` reads a SQLSTATE.

/// What kind of rule the database refused a write by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Violation {
    /// `unique_violation` (23505): the same thing was written first (before, or concurrently).
    Unique,
    /// `exclusion_violation` (23P01): it overlaps something written first.
    Exclusion,
    /// `foreign_key_violation` (23503): what it refers to does not exist (or not any more).
    ForeignKey,
    /// `check_violation`, `not_null_violation`, a string too long (23514, 23502, 22001).
    Check,
    /// A value out of Postgres' range, a NUL or untranslatable character, a malformed date (22021, 22P05, 22008,
    /// 22007, 22003).
    OutOfRange,
}

impl Violation {
    /// Whether the caller lost to something already written (a conflict) rather than sent a value the schema
    /// refuses (an invalid field).
    pub fn is_conflict(self) -> bool {
        matches!(self, Violation::Unique | Violation::Exclusion)
    }
}

/// A write the database refused for a constraint: which kind, and the input field it protects when known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    pub violation: Violation,
    /// The request field the constraint protects (`None`: the constraint is not one a caller names a field of).
    pub field: Option<&'static str>,
}

/// The refusal `e` is, when the database refused a value or a write by a constraint; `None` for every other
/// failure (a connection lost, a timeout, a bug).
pub fn on_constraint(e: &sqlx::Error) -> Option<Refusal> {
    let db = e.as_database_error()?;
    let code = db.code()?;
    let violation = violation_of(&code)?;
    Some(Refusal { violation, field: db.constraint().and_then(field_of_constraint) })
}

/// The kind of violation a SQLSTATE is, when it is one.
pub fn violation_of(sqlstate: &str) -> Option<Violation> {
    Some(match sqlstate {
        "23505" => Violation::Unique,
        "23P01" => Violation::Exclusion,
        "23503" => Violation::ForeignKey,
        "23514" | "23502" | "22001" => Violation::Check,
        "22021" | "22P05" | "22008" | "22007" | "22003" => Violation::OutOfRange,
        _ => return None,
    })
}

/// Whether `e` is the service running out of time, not a failure: every connection busy for the pool's acquire
/// timeout, or a statement cancelled by `statement_timeout` (57014).
pub fn is_timeout(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::PoolTimedOut)
        || e.as_database_error().and_then(|d| d.code()).is_some_and(|c| c.as_ref() == "57014")
}

/// The request field a database constraint protects (constraint names as the migrations create them).
pub fn field_of_constraint(constraint: &str) -> Option<&'static str> {
    Some(match constraint {
        "rate_versions_gpu_model_effective_from_key" => "effective_from",
        "namespace_mappings_unique" => "valid_from",
        "namespace_mappings_team_id_fkey" => "team_id",
        "budgets_team_id_fkey" => "team",
        "budgets_pkey" => "month",
        "budgets_month_check" | "closed_months_month_check" | "closed_months_pkey" => "month",
        "teams_pkey" | "teams_id_check" => "id",
        "teams_name_check" => "name",
        "idempotency_keys_pkey" => "Idempotency-Key",
        "close_endpoints_url_check" => "url",
        "close_endpoints_secret_check" => "secret",
        c if c.starts_with("rate_versions_rate") => "rate",
        c if c.starts_with("cloud_rates_") => "rates",
        _ => return None,
    })
}

/// A database refusal as Postgres would send it, for the tests of what each one becomes.
#[cfg(test)]
pub(crate) mod fake {
    use std::borrow::Cow;

    #[derive(Debug)]
    struct Refused {
        code: &'static str,
        constraint: Option<&'static str>,
    }

    impl std::fmt::Display for Refused {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "refused by {:?} ({})", self.constraint, self.code)
        }
    }

    impl std::error::Error for Refused {}

    impl sqlx::error::DatabaseError for Refused {
        fn message(&self) -> &str {
            "refused"
        }
        fn code(&self) -> Option<Cow<'_, str>> {
            Some(Cow::Borrowed(self.code))
        }
        fn constraint(&self) -> Option<&str> {
            self.constraint
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    /// The error sqlx returns when Postgres refuses a statement with SQLSTATE `code` by `constraint`.
    pub(crate) fn refused(code: &'static str, constraint: Option<&'static str>) -> sqlx::Error {
        sqlx::Error::Database(Box::new(Refused { code, constraint }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_are_kinds_of_violation() {
        assert_eq!(violation_of("23505"), Some(Violation::Unique));
        assert_eq!(violation_of("23P01"), Some(Violation::Exclusion));
        assert_eq!(violation_of("23503"), Some(Violation::ForeignKey));
        for check in ["23514", "23502", "22001"] {
            assert_eq!(violation_of(check), Some(Violation::Check), "{check}");
        }
        for range in ["22021", "22P05", "22008", "22007", "22003"] {
            assert_eq!(violation_of(range), Some(Violation::OutOfRange), "{range}");
        }
        // a deadlock, a lost connection, a cancelled statement: no constraint of the caller's
        for other in ["40P01", "08006", "57014", ""] {
            assert_eq!(violation_of(other), None, "{other}");
        }
        assert!(Violation::Unique.is_conflict() && Violation::Exclusion.is_conflict());
        assert!(!Violation::ForeignKey.is_conflict() && !Violation::Check.is_conflict());
    }

    #[test]
    fn constraints_name_the_field_they_protect() {
        let cases = [
            ("rate_versions_gpu_model_effective_from_key", "effective_from"),
            ("rate_versions_rate_check", "rate"),
            ("namespace_mappings_unique", "valid_from"),
            ("namespace_mappings_team_id_fkey", "team_id"),
            ("budgets_team_id_fkey", "team"),
            ("budgets_pkey", "month"),
            ("closed_months_pkey", "month"),
            ("teams_pkey", "id"),
            ("teams_name_check", "name"),
            ("cloud_rates_h100_check", "rates"),
            ("idempotency_keys_pkey", "Idempotency-Key"),
        ];
        for (constraint, field) in cases {
            assert_eq!(field_of_constraint(constraint), Some(field), "{constraint}");
        }
        assert_eq!(field_of_constraint("usage_hours_pkey"), None);
    }

    #[test]
    fn a_refusal_names_its_kind_and_field() {
        let r = on_constraint(&fake::refused("23505", Some("rate_versions_gpu_model_effective_from_key"))).unwrap();
        assert_eq!(r, Refusal { violation: Violation::Unique, field: Some("effective_from") });
        let r = on_constraint(&fake::refused("23503", Some("budgets_team_id_fkey"))).unwrap();
        assert_eq!(r, Refusal { violation: Violation::ForeignKey, field: Some("team") });
        let r = on_constraint(&fake::refused("23514", Some("some_new_check"))).unwrap();
        assert_eq!(r, Refusal { violation: Violation::Check, field: None });
        assert_eq!(on_constraint(&fake::refused("40P01", None)), None);
        assert!(is_timeout(&fake::refused("57014", None)));
    }

    #[test]
    fn other_failures_are_no_refusal() {
        assert_eq!(on_constraint(&sqlx::Error::PoolTimedOut), None);
        assert_eq!(on_constraint(&sqlx::Error::RowNotFound), None);
        assert!(is_timeout(&sqlx::Error::PoolTimedOut));
        assert!(!is_timeout(&sqlx::Error::RowNotFound));
    }
}
