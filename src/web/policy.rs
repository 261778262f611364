//! `?mode=&unallocated=` on the bills pages, as the API takes them: a draft under another bill policy (an open
//! month), or the frozen one named (a closed month; another is the conflict page). The links of a page carry the
//! policy it shows, so a statement, a download or the close confirmation opened from it show the same figures.

use serde::Deserialize;

use super::layout::PageError;
use crate::billing::{BillPolicy, PolicyChoice};
use crate::export::Lang;

/// The policy a page was asked for: each part text or absent (blank is absent, as a form's empty choice sends it).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PolicyQuery {
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub unallocated: Option<String>,
}

impl PolicyQuery {
    /// The choice asked for; a part that names no policy names no page (as a path that names no month).
    pub fn choice(&self) -> Result<PolicyChoice, PageError> {
        let part = |s: &Option<String>| s.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(str::to_string);
        let (mode, unallocated) = (part(&self.mode), part(&self.unallocated));
        crate::validate::policy_choice(mode.as_deref(), unallocated.as_deref(), None).map_err(|_| PageError::NotFound)
    }
}

/// The query of links that show `policy` (`mode=…&unallocated=…`): what a page passes on to the pages and files it
/// links, so they print the figures it shows.
pub fn query(policy: BillPolicy) -> String {
    format!("mode={}&unallocated={}", policy.mode.as_str(), policy.unallocated.as_str())
}

/// The policy in words, as the statements name it: `展示成本 · 未分配成本由平台承担`.
pub fn words(policy: BillPolicy, lang: Lang) -> String {
    format!(
        "{} · {}",
        crate::glossary::mode(lang, policy.mode),
        crate::glossary::unallocated_sentence(lang, policy.unallocated)
    )
}

/// A team as a row prints it: its display name (the `unassigned` team in words), and its id beside it only when
/// the two differ (never "nlp nlp").
pub fn team_id_note(lang: Lang, id: &str, name: &str) -> (String, Option<String>) {
    let shown = crate::glossary::team_name(lang, id, name);
    if shown.is_empty() {
        return (id.to_string(), None);
    }
    let differs = id != "unassigned" && !name.eq_ignore_ascii_case(id);
    (shown, differs.then(|| id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::billing::{BillMode, UnallocatedPolicy};

    #[test]
    fn a_policy_is_read_as_the_api_reads_it_and_passed_on() {
        let q = |m: &str, u: &str| PolicyQuery { mode: Some(m.into()), unallocated: Some(u.into()) };
        let c = q("chargeback", "spread_proportionally").choice().unwrap();
        assert_eq!(
            c.complete(),
            Some(BillPolicy { mode: BillMode::Chargeback, unallocated: UnallocatedPolicy::SpreadProportionally })
        );
        assert_eq!(q("", " ").choice().unwrap(), PolicyChoice::NONE);
        assert!(q("bogus", "").choice().is_err());
        let p = BillPolicy { mode: BillMode::Showback, unallocated: UnallocatedPolicy::KeptByPlatform };
        assert_eq!(query(p), "mode=showback&unallocated=kept_by_platform");
        assert_eq!(words(p, Lang::Zh), "展示成本 · 未分配成本由平台承担");
    }

    #[test]
    fn a_team_prints_its_id_only_when_it_differs_from_its_name() {
        assert_eq!(team_id_note(Lang::Zh, "nlp", "nlp"), ("nlp".into(), None));
        assert_eq!(team_id_note(Lang::Zh, "nlp", "NLP"), ("NLP".into(), None));
        assert_eq!(team_id_note(Lang::Zh, "vision", "视觉组"), ("视觉组".into(), Some("vision".into())));
        assert_eq!(team_id_note(Lang::Zh, "unassigned", "unassigned"), ("未分配".into(), None));
        assert_eq!(team_id_note(Lang::En, "x", ""), ("x".into(), None));
    }
}
