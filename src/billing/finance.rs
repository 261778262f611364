//! Finance codes (SPEC §11): the cost centre, GL account and legal entity a team's spend is booked to in the
//! company's books, dated — a version holds from its first day until the next version of the team.
//!
//! A bill line computed per day (usage, reservation) carries the codes of its days, so a team whose codes change
//! mid-month has its lines split at that day; the statement's other lines of the team (its unallocated share,
//! restatements, adjustments) carry the codes in effect on the month's last day ([`super::TeamBill::finance`]):
//! they are booked in the month they appear. Codes never move money: a restatement compares lines without them.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

/// A team's finance codes. Each is text as the company's books spell it (a cost centre `CC-1001`, a GL account
/// `6602.01`, a legal entity `北京某某科技有限公司`); absent when not set. Ordered, so lines split by codes sort
/// the same way in every render.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FinanceCodes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "CC-1001")]
    pub cost_centre: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "6602.01")]
    pub gl_account: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(example = "北京示例科技有限公司")]
    pub legal_entity: Option<String>,
}

impl FinanceCodes {
    /// No code at all (a version that clears a team's codes from its day).
    pub fn is_empty(&self) -> bool {
        self.cost_centre.is_none() && self.gl_account.is_none() && self.legal_entity.is_none()
    }

    /// The codes, `None` when empty: what a line carries.
    pub fn non_empty(self) -> Option<FinanceCodes> {
        (!self.is_empty()).then_some(self)
    }

    /// The three codes in their fixed order, empty where unset (an export's three columns, a line id's parts).
    pub fn cells(&self) -> [&str; 3] {
        [
            self.cost_centre.as_deref().unwrap_or(""),
            self.gl_account.as_deref().unwrap_or(""),
            self.legal_entity.as_deref().unwrap_or(""),
        ]
    }
}

/// One version of a team's codes: from `valid_from` on (the billing time zone's days), until the team's next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinanceCodeVersion {
    pub team: String,
    pub valid_from: NaiveDate,
    pub codes: FinanceCodes,
}

/// Every team's dated codes, looked up by team and day.
#[derive(Debug, Clone, Default)]
pub struct FinanceCodeBook {
    by_team: BTreeMap<String, BTreeMap<NaiveDate, Option<FinanceCodes>>>,
}

impl FinanceCodeBook {
    /// The book of `versions` (in any order; of two versions of one team and day, the later in the list wins).
    pub fn new(versions: impl IntoIterator<Item = FinanceCodeVersion>) -> Self {
        let mut by_team: BTreeMap<String, BTreeMap<NaiveDate, Option<FinanceCodes>>> = BTreeMap::new();
        for v in versions {
            by_team.entry(v.team).or_default().insert(v.valid_from, v.codes.non_empty());
        }
        FinanceCodeBook { by_team }
    }

    /// `team`'s codes on `day`: those of its latest version from `day` or before; `None` before its first version,
    /// or when that version cleared them.
    pub fn at(&self, team: &str, day: NaiveDate) -> Option<&FinanceCodes> {
        self.by_team.get(team)?.range(..=day).next_back()?.1.as_ref()
    }

    /// The versions days `first..=last` are looked up in: each team's version in effect on `first` and those
    /// beginning after it up to `last`. A book of them answers [`Self::at`] for those days as this one does.
    pub fn versions_for(&self, first: NaiveDate, last: NaiveDate) -> Vec<FinanceCodeVersion> {
        let mut out = Vec::new();
        for (team, versions) in &self.by_team {
            let start = versions.range(..=first).next_back().map(|(d, _)| *d).unwrap_or(first);
            for (day, codes) in versions.range(start..=last) {
                let codes = codes.clone().unwrap_or_default();
                out.push(FinanceCodeVersion { team: team.clone(), valid_from: *day, codes });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    fn codes(cc: &str) -> FinanceCodes {
        FinanceCodes { cost_centre: Some(cc.into()), gl_account: Some("6602.01".into()), legal_entity: None }
    }

    fn v(team: &str, from: &str, c: FinanceCodes) -> FinanceCodeVersion {
        FinanceCodeVersion { team: team.into(), valid_from: d(from), codes: c }
    }

    #[test]
    fn a_version_holds_from_its_day_until_the_next() {
        let book = FinanceCodeBook::new([
            v("nlp", "2026-11-16", codes("CC-2")),
            v("nlp", "2026-10-01", codes("CC-1")),
            v("nlp", "2026-12-01", FinanceCodes::default()),
            v("cv", "2026-11-01", codes("CC-9")),
        ]);
        assert_eq!(book.at("nlp", d("2026-09-30")), None);
        assert_eq!(book.at("nlp", d("2026-10-01")), Some(&codes("CC-1")));
        assert_eq!(book.at("nlp", d("2026-11-15")), Some(&codes("CC-1")));
        assert_eq!(book.at("nlp", d("2026-11-16")), Some(&codes("CC-2")));
        assert_eq!(book.at("nlp", d("2026-11-30")), Some(&codes("CC-2")));
        // an empty version clears them
        assert_eq!(book.at("nlp", d("2026-12-01")), None);
        assert_eq!(book.at("cv", d("2026-11-20")), Some(&codes("CC-9")));
        assert_eq!(book.at("ops", d("2026-11-20")), None);
    }

    #[test]
    fn empty_codes_serialize_to_nothing_and_cells_keep_their_order() {
        assert_eq!(serde_json::to_string(&FinanceCodes::default()).unwrap(), "{}");
        let c = FinanceCodes { cost_centre: None, gl_account: Some("6602".into()), legal_entity: Some("甲".into()) };
        assert_eq!(c.cells(), ["", "6602", "甲"]);
        assert_eq!(serde_json::to_string(&c).unwrap(), r#"{"gl_account":"6602","legal_entity":"甲"}"#);
        assert!(FinanceCodes::default().non_empty().is_none());
    }

    #[test]
    fn a_months_versions_answer_its_days_as_the_whole_book() {
        let book = FinanceCodeBook::new([
            v("nlp", "2026-09-01", codes("CC-0")),
            v("nlp", "2026-10-01", codes("CC-1")),
            v("nlp", "2026-10-16", FinanceCodes::default()),
            v("nlp", "2026-10-20", codes("CC-2")),
            v("nlp", "2026-11-05", codes("CC-3")),
            v("cv", "2026-09-10", codes("CC-9")),
            v("ops", "2026-11-01", codes("CC-5")),
        ]);
        let month = book.versions_for(d("2026-10-01"), d("2026-10-31"));
        let days: Vec<(&str, String)> = month.iter().map(|v| (v.team.as_str(), v.valid_from.to_string())).collect();
        assert_eq!(
            days,
            [
                ("cv", "2026-09-10".to_string()),
                ("nlp", "2026-10-01".to_string()),
                ("nlp", "2026-10-16".to_string()),
                ("nlp", "2026-10-20".to_string()),
            ]
        );
        let frozen = FinanceCodeBook::new(month);
        let mut day = d("2026-10-01");
        while day <= d("2026-10-31") {
            for team in ["nlp", "cv", "ops"] {
                assert_eq!(frozen.at(team, day), book.at(team, day), "{team} {day}");
            }
            day = day.succ_opt().unwrap();
        }
    }

    proptest! {
        /// Looking a day up equals scanning the versions by hand: the latest version of the team on or before it.
        #[test]
        fn lookup_equals_a_scan(days in proptest::collection::vec((0i64..90, 0u8..4), 0..12), probe in 0i64..100) {
            let base = d("2026-10-01");
            let versions: Vec<FinanceCodeVersion> = days
                .iter()
                .map(|(off, c)| {
                    let c = if *c == 0 { FinanceCodes::default() } else { codes(&format!("CC-{c}")) };
                    FinanceCodeVersion { team: "t".into(), valid_from: base + chrono::Duration::days(*off), codes: c }
                })
                .collect();
            let book = FinanceCodeBook::new(versions.clone());
            let day = base + chrono::Duration::days(probe);
            // the last of the list wins among versions of one day, as `new` documents
            let expected = versions
                .iter()
                .enumerate()
                .filter(|(_, v)| v.valid_from <= day)
                .max_by_key(|(i, v)| (v.valid_from, *i))
                .and_then(|(_, v)| v.codes.clone().non_empty());
            prop_assert_eq!(book.at("t", day).cloned(), expected);
        }
    }
}
