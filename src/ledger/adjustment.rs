//! Adjustments (SPEC §11): a credit or debit of a team in a month, entered by finance with a reason and approved by
//! another finance or admin user (maker-checker). The pure rules: what a request must hold ([`NewAdjustment`]), who
//! may decide it ([`may_decide`]), and which statement an approval books it to ([`booking_month`]).

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::billing::Month;
use crate::money::Money;
use crate::validate::{self, DecimalRange, Invalid, Problem, TeamId};

/// The longest reason (and decision note) accepted.
pub const REASON_MAX: usize = 500;
/// An adjustment's size: more than nothing, at most ten billion yuan, to the fen (either sign).
pub const AMOUNT: DecimalRange = DecimalRange::above(0, 10_000_000_000).with_decimals(2);
/// What an amount is written as (the API document's pattern, and the first check of [`parse_amount`]): an optional
/// minus, digits without a leading zero or sign, at most two decimals; never zero; at most ten billion.
pub const AMOUNT_PATTERN: &str = r"^-?(0\.(0[1-9]|[1-9][0-9]?)|[1-9][0-9]{0,9}(\.[0-9]{1,2})?|10000000000(\.00?)?)$";

/// Where an adjustment stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AdjustmentStatus {
    /// Entered, not decided: shown on the draft, never in a total.
    Pending,
    /// A statement line of its booked month.
    Approved,
    /// Refused by the checker: a record, never a line.
    Rejected,
}

impl AdjustmentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Rejected => "rejected",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(Self::Pending),
            "approved" => Some(Self::Approved),
            "rejected" => Some(Self::Rejected),
            _ => None,
        }
    }
}

/// An adjustment as a statement carries it (approved: a line of the team's total; pending: shown on the draft only)
/// and as the API lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Adjustment {
    /// Its stable id (`ADJ-<id>` on the statements).
    pub id: i64,
    pub team: String,
    /// The month it corrects: the statement's own month, or an earlier closed month it restates.
    #[schema(value_type = String, example = "2026-11")]
    pub month: Month,
    /// Yuan: positive a debit (the team owes more), negative a credit.
    pub amount: Money,
    pub reason: String,
    pub status: AdjustmentStatus,
    /// Who entered it (the maker).
    pub entered_by: String,
    pub entered_at: DateTime<Utc>,
    /// Who approved or rejected it (the checker); absent while pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<DateTime<Utc>>,
    /// The checker's note, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_note: Option<String>,
    /// The month whose statement carries it (approved only): its own month, or the first month open at the approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, example = "2026-11")]
    pub booked_month: Option<Month>,
}

impl Adjustment {
    /// The id printed on every face: stable across renders, restatements and closes.
    pub fn line_id(&self) -> String {
        format!("ADJ-{}", self.id)
    }

    /// Booked to a later month than the one it corrects: a restatement of that closed month.
    pub fn restates(&self) -> bool {
        self.booked_month.is_some_and(|b| b != self.month)
    }
}

/// A request for an adjustment, parsed: a known team is the caller's to check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewAdjustment {
    pub month: Month,
    pub team: TeamId,
    pub amount: Money,
    pub reason: String,
}

impl NewAdjustment {
    /// Parses the fields as sent (a form trims its own), every refusal named by its field.
    pub fn parse(month: &str, team: &str, amount: &str, reason: &str) -> Result<NewAdjustment, Vec<Invalid>> {
        let mut bad = Vec::new();
        let month =
            month.parse::<Month>().map_err(|e| bad.push(Invalid::of("month", Problem::NotMonth, e.to_string()))).ok();
        let team = TeamId::parse("team", team).map_err(|e| bad.push(e)).ok();
        let amount = parse_amount(amount).map_err(|e| bad.push(e)).ok();
        let reason = validate::text("reason", reason, REASON_MAX).map_err(|e| bad.push(e)).ok();
        match (month, team, amount, reason) {
            (Some(month), Some(team), Some(amount), Some(reason)) if bad.is_empty() => {
                Ok(NewAdjustment { month, team, amount, reason })
            }
            _ => Err(bad),
        }
    }
}

/// A signed amount of yuan as [`AMOUNT_PATTERN`] writes it: not zero, to the fen, at most ten billion either way.
/// A zero written plainly (`0`, `-0.00`) is out of range, not malformed.
pub fn parse_amount(s: &str) -> Result<Money, Invalid> {
    static WRITTEN: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(AMOUNT_PATTERN).expect("the amount pattern"));
    static ZERO: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"^-?0(\.0{1,2})?$").expect("the zero pattern"));
    if ZERO.is_match(s) {
        return Err(Invalid::of(
            "amount",
            Problem::OutOfRange,
            "must not be zero: a credit is negative, a debit positive",
        ));
    }
    let d: Decimal = Some(s).filter(|s| WRITTEN.is_match(s)).and_then(|s| s.parse().ok()).ok_or_else(|| {
        Invalid::of(
            "amount",
            Problem::NotNumber,
            format!(
                "`{}` is not an amount of yuan (a minus for a credit, at most 2 decimals, at most 10000000000), \
                 e.g. -1200.50",
                short(s)
            ),
        )
    })?;
    if !AMOUNT.contains(d.abs()) {
        return Err(Invalid::of(
            "amount",
            Problem::OutOfRange,
            format!("must be a credit (negative) or debit (positive) whose size is {}", AMOUNT.describe()),
        ));
    }
    Ok(Money::from_decimal(d))
}

fn short(s: &str) -> String {
    s.chars().take(40).collect()
}

/// Whether `checker` may approve or reject an adjustment `maker` entered: never the maker itself — the same person
/// by name whatever the credential (`user:alice`, `sso:alice` and a token named `alice` are one person).
pub fn may_decide(maker: &str, checker: &str) -> bool {
    crate::access::actor_name(maker) != crate::access::actor_name(checker)
}

/// The month whose statement an adjustment of `month` approved now is booked to: `month` itself while it is open,
/// else the first month after it that is not closed (a restatement of the closed month there).
pub fn booking_month(month: Month, closed: &BTreeSet<Month>) -> Month {
    let mut m = month;
    while closed.contains(&m) {
        m = m.next();
    }
    m
}

/// Σ amounts of `team`'s adjustments in `adjustments`.
pub fn team_sum<'a>(adjustments: impl IntoIterator<Item = &'a Adjustment>, team: &str) -> Money {
    adjustments.into_iter().filter(|a| a.team == team).map(|a| a.amount).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn m(s: &str) -> Month {
        s.parse().unwrap()
    }

    #[test]
    fn a_request_is_parsed_or_refused_field_by_field() {
        let ok = NewAdjustment::parse("2026-11", "nlp", "-1200.50", "GPU outage credit ").unwrap();
        assert_eq!(
            (ok.month, ok.team.as_str(), ok.amount.to_string(), ok.reason.as_str()),
            (m("2026-11"), "nlp", "-1200.50".to_string(), "GPU outage credit")
        );
        let bad = NewAdjustment::parse("2026-13", "Bad Team", "0", " ").unwrap_err();
        let fields: Vec<&str> = bad.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["month", "team", "amount", "reason"]);
        for amount in ["0.001", "1e3", "abc", "10000000000.01", "-10000000001", "0.00", ""] {
            assert!(parse_amount(amount).is_err(), "{amount}");
        }
        assert_eq!(parse_amount("-10000000000").unwrap().to_string(), "-10000000000.00");
        assert_eq!(parse_amount("-0.01").unwrap().to_string(), "-0.01");
        for odd in [" 5", "+5", "5.", ".5", "05", "1_000", "-", "1,000"] {
            assert!(parse_amount(odd).is_err(), "{odd}");
        }
        // the pattern and the range agree: what the pattern takes parses, within the range
        let re = regex::Regex::new(AMOUNT_PATTERN).unwrap();
        for ok in ["1", "-1", "0.01", "-0.1", "9999999999.99", "10000000000", "-10000000000.0"] {
            assert!(re.is_match(ok) && parse_amount(ok).is_ok(), "{ok}");
        }
        assert!(NewAdjustment::parse("2026-11", "nlp", "5", "a\u{202e}b").is_err());
    }

    #[test]
    fn the_maker_never_decides() {
        assert!(!may_decide("user:alice", "user:alice"));
        assert!(may_decide("user:alice", "user:bob"));
        assert!(!may_decide("user:alice", "token:3:alice"));
        assert!(!may_decide("sso:alice", "user:alice"));
        assert!(may_decide("token:3:alice", "token:4:bob"));
    }

    #[test]
    fn an_approval_books_to_the_month_or_the_first_open_month_after_it() {
        let closed: BTreeSet<Month> = [m("2026-09"), m("2026-10"), m("2026-12")].into();
        assert_eq!(booking_month(m("2026-11"), &closed), m("2026-11"));
        assert_eq!(booking_month(m("2026-09"), &closed), m("2026-11"));
        assert_eq!(booking_month(m("2026-12"), &closed), m("2027-01"));
        assert_eq!(booking_month(m("2026-08"), &closed), m("2026-08"));
    }

    proptest! {
        /// The booked month is never closed, never before the month corrected, and every month between is closed.
        #[test]
        fn the_booked_month_is_the_first_open_one(start in 0u32..36, closed in proptest::collection::btree_set(0u32..48, 0..30)) {
            let month_at = |i: u32| { let mut x = m("2025-01"); for _ in 0..i { x = x.next(); } x };
            let closed: BTreeSet<Month> = closed.into_iter().map(month_at).collect();
            let month = month_at(start);
            let booked = booking_month(month, &closed);
            prop_assert!(booked >= month && !closed.contains(&booked));
            let mut x = month;
            while x < booked { prop_assert!(closed.contains(&x)); x = x.next(); }
        }
    }
}
