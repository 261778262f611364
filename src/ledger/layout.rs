//! The layout a statement is written with (its JSON views, CSV, PDF): frozen with a month at its close, so a later
//! layout never alters the bytes of a month closed before it (the renderers per layout: [`crate::export::layout`]).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A layout version. Ordered: a field added in layout N is shown when `layout >= N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Layout {
    V1,
    V2,
    V3,
    /// Times in the billing time zone (named), one glossary for every word, blockers in the reader's language,
    /// a team named once, total rows, one number format per CSV column kind (see `docs/frozen.md`).
    V4,
    /// Each team's unit cost of inference of the month per model beside its lines (SPEC §9, issue 36), frozen
    /// with the close.
    V5,
    /// Stable line ids (SPEC §11): every line's id ([`crate::ledger::line_id`]) in the JSON views (`id`), the CSV
    /// (`line_id`) and the workbook (`line_id`).
    V6,
}

impl Layout {
    /// The layout of new closes and of open months.
    pub const CURRENT: Layout = Layout::V6;

    pub fn number(self) -> u32 {
        match self {
            Layout::V1 => 1,
            Layout::V2 => 2,
            Layout::V3 => 3,
            Layout::V4 => 4,
            Layout::V5 => 5,
            Layout::V6 => 6,
        }
    }

    pub fn from_number(n: u32) -> Option<Layout> {
        match n {
            1 => Some(Layout::V1),
            2 => Some(Layout::V2),
            3 => Some(Layout::V3),
            4 => Some(Layout::V4),
            5 => Some(Layout::V5),
            6 => Some(Layout::V6),
            _ => None,
        }
    }
}

/// Stored as its number.
impl Serialize for Layout {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.number())
    }
}

/// A layout this build does not know (a snapshot from a newer release) is an error, never rendered by another.
impl<'de> Deserialize<'de> for Layout {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Layout, D::Error> {
        let n = u32::deserialize(d)?;
        Layout::from_number(n)
            .ok_or_else(|| serde::de::Error::custom(format!("layout {n} is not known to this build of cardhour")))
    }
}

/// `value` for a statement of layout `since` or later, else `None`: a JSON field added in a later layout is
/// skipped (`skip_serializing_if = "Option::is_none"`) for months frozen under an earlier one, so their bytes
/// never change.
pub fn since<T>(layout: Layout, since: Layout, value: impl FnOnce() -> T) -> Option<T> {
    (layout >= since).then(value)
}
