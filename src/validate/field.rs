//! The one shape of a refused input field, whichever face shows it: the API's JSON `{field, message}`, a page's
//! message beside its field (worded from [`Problem`] in the page's language), the command line's `field: message`.

use std::fmt;

/// What is wrong with a field, in kinds a page can say in its own language (the message is the rule's own
/// words, in English).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Problem {
    Required,
    /// NUL, control or invisible formatting characters.
    Characters,
    TooLong,
    NotNumber,
    Negative,
    /// A value outside the rule's range, or any other rule the value breaks (the message says which).
    #[default]
    OutOfRange,
    NotDate,
    DateRange,
    NotMonth,
    UnknownTeam,
    /// Already taken (a rate version on that date, a team id).
    Taken,
}

/// One invalid input field.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct FieldError {
    pub field: String,
    pub message: String,
    /// What kind of refusal it is (pages word it; the API's JSON carries the message only).
    #[serde(skip)]
    pub problem: Problem,
}

impl FieldError {
    /// `field` refused by a rule, `message` saying which.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError { field: field.into(), message: message.into(), problem: Problem::default() }
    }

    /// `field` refused as `problem`, `message` the rule's own words (may be empty).
    pub fn of(field: impl Into<String>, problem: Problem, message: impl Into<String>) -> Self {
        FieldError { field: field.into(), message: message.into(), problem }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_is_field_and_message_only() {
        let e = FieldError::of("amount", Problem::NotNumber, "`abc` is not a number");
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"field": "amount", "message": "`abc` is not a number"})
        );
        assert_eq!(e.to_string(), "amount: `abc` is not a number");
        assert_eq!(FieldError::new("a", "b").problem, Problem::OutOfRange);
    }
}
