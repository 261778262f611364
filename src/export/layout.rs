//! Layouts: how a statement's representations (JSON views, CSV, PDF) are written. A closed month is frozen with
//! the layout current at its close and is rendered by that layout's renderer for good, so a later layout never
//! alters the bytes of a month closed before it (SPEC §6 "What a close freezes"); an open month renders with the
//! current layout.
//!
//! - Layout 1: what the release before layouts served. Snapshots of version 1 carry no layout: they are layout 1.
//!   Their close froze no extras, so their PDF shows the idle list and utilization computed when it is rendered
//!   (as that release did).
//! - Layout 2: the close also freezes the PDF's extras ([`FrozenExtras`]). The CSV writes its months as
//!   `="2026-11"` (Excel reads a bare `2026-11` as the date 2026-11-01 and shows `Nov-26`) and, in an
//!   export of every team, ends with the cluster rows (`capacity` per GPU model and rate, `unallocated`,
//!   `not_offered`, `platform_kept`) so it reconciles on its own: Σ usage + Σ unallocated_share + platform_kept =
//!   Σ capacity. The JSON views carry `"layout": 2`; fields added from layout 2 on (offered capacity) are absent
//!   from layout-1 views ([`since`]); the PDF prints offered capacity from layout 2 on only.
//! - Layout 3: the PDF is the statement finance signs ([`super::view`]): in zh-CN (default) or en, ¥ amounts with
//!   thousands separators, fixed decimals, kinds and lines in words, a draft watermark on open months, the data
//!   coverage, budget vs actual, the previous month and the change, prepared-by and an approval block; the close
//!   also freezes the coverage, the budgets and the previous month's totals. CSV and JSON as layout 2 (the JSON
//!   says `"layout": 3`). Layouts 1 and 2 keep their renderer (English only; `lang` changes nothing there).
//! - Layout 4: times in the billing time zone, named (the close freezes the zone); one glossary for every word
//!   ([`crate::glossary`]); close blockers in the reader's language; a team named once; total rows; the capacity
//!   shortfall (usage above the counted capacity, never a negative unallocated). The CSV writes one number format
//!   per column kind, ends with a `total` row and takes `lang` (header and words in it; codes without); the
//!   workbook is in `lang` (one header row, words for codes, times in the zone) with a total row. Layout 3
//!   months keep their bytes (`tests/fixtures/layout3/`).
//! - Layout 5: each team's unit cost of inference of the month per model (SPEC §9), frozen with the close
//!   ([`crate::ledger::frozen::UnitCostLine`]), printed beside the team's lines: the team statement's JSON
//!   (`unit_cost`), the CSV (`unit_cost` rows and their columns, where a team of the export served), each team's
//!   sheet of the workbook and its page of the PDF and the portal (a table: model, engine, tokens, ¥ per million
//!   tokens, ¥ per thousand requests, idle serving cost). Nothing is printed for a team without serving pods, so
//!   a month without any prints as layout 4 did. Layout 4 months keep their bytes (`tests/fixtures/layout4/`).
//! - Layout 6: stable line ids (SPEC §11, [`crate::ledger::line_id`]): each line's `id` in the team statement's
//!   JSON (lines and restatements), a `line_id` column at the end of every CSV row (usage, reservation, share,
//!   restatement, adjustment and unit-cost rows; the cluster rows theirs; the total row none) and at the
//!   end of a team sheet's lines in the workbook. The PDF and the pages print what layout 5 did.

use super::csv_export::{self, CsvShape};
use super::{FontChain, FrozenExtras, Lang, PdfError, ScopedExtras, StatementExtras};
use crate::ledger::Statement;
pub use crate::ledger::layout::{Layout, since};

/// The statement's lines of the teams `include` accepts as CSV bytes, written by the statement's layout.
/// `every_team`: the export holds every team (a global reader, no team asked for), so layout 2 adds the cluster
/// rows; a narrower export gets none (a team lead sees no cluster-wide figure, and one team's rows could not
/// reconcile with the cluster's).
/// `words`: layout 4 on, the header and the words in that language (`None`: the codes, as before).
pub fn bill_csv(
    st: &Statement,
    include: impl Fn(&str) -> bool,
    every_team: bool,
    words: Option<Lang>,
) -> Result<Vec<u8>, csv::Error> {
    let shape = match st.layout {
        Layout::V1 => {
            CsvShape { months_as_text: false, cluster_rows: false, v4: false, v5: false, v6: false, words: None }
        }
        Layout::V2 | Layout::V3 => {
            CsvShape { months_as_text: true, cluster_rows: every_team, v4: false, v5: false, v6: false, words: None }
        }
        Layout::V4 => {
            CsvShape { months_as_text: true, cluster_rows: every_team, v4: true, v5: false, v6: false, words }
        }
        Layout::V5 => CsvShape { months_as_text: true, cluster_rows: every_team, v4: true, v5: true, v6: false, words },
        Layout::V6 => CsvShape { months_as_text: true, cluster_rows: every_team, v4: true, v5: true, v6: true, words },
    };
    csv_export::write(st, include, shape)
}

/// The statement's teams `include` accepts as an Excel workbook (summary sheet, a sheet per team). The workbook came
/// after layout 2 and has one shape so far, for every layout: it is built from the statement alone (a closed month's
/// frozen snapshot). Its replica billing cells appear only where the statement carries replica settings or
/// unverified lines (as the CSV's columns), so a month closed before replica billing keeps its bytes. `every_team` as for [`bill_csv`]: the summary then carries the capacity and reconciles to it.
/// From layout 4 on the workbook is in `lang`, its times in `tz` (the zone the close froze, or the billing time
/// zone for an open month); from layout 5 on a team's sheet also has its unit cost of inference per model.
pub fn bill_xlsx(
    st: &Statement,
    include: impl Fn(&str) -> bool,
    every_team: bool,
    lang: Lang,
    tz: chrono_tz::Tz,
) -> Result<Vec<u8>, rust_xlsxwriter::XlsxError> {
    let style = match st.layout {
        Layout::V1 | Layout::V2 | Layout::V3 => super::xlsx::Style::V3,
        Layout::V4 | Layout::V5 => super::xlsx::Style::V4 { lang, tz, line_ids: false },
        Layout::V6 => super::xlsx::Style::V4 { lang, tz, line_ids: true },
    };
    super::xlsx::write(st, include, every_team, style)
}

/// The statement as PDF, written by its layout. Layouts 1 and 2 print the same pages (in English; `lang` is not
/// theirs); layout 2's difference is where `extras` come from ([`pdf_extras`]). Layout 3 prints the statement
/// view ([`super::view`]) in `lang` (layout 4 its words and times, layout 5 the unit cost beside the lines).
pub fn statement_pdf(
    st: &Statement,
    include: impl Fn(&str) -> bool,
    fonts: &FontChain,
    extras: &StatementExtras,
    lang: Lang,
) -> Result<Vec<u8>, PdfError> {
    match st.layout {
        Layout::V1 | Layout::V2 => super::pdf::statement_pdf(st, include, fonts, extras),
        Layout::V3 | Layout::V4 | Layout::V5 | Layout::V6 => {
            super::view_pdf::view_pdf(&super::view::statement_view(st, include, extras, lang), fonts)
        }
    }
}

/// The PDF extras `scope` sees from what the close froze; `None` when nothing was frozen (an open month, or a month
/// closed under layout 1): the caller computes them now, as the release before layouts did.
pub fn pdf_extras(st: &Statement, scope: &crate::access::Scope) -> Option<StatementExtras> {
    st.frozen.as_ref().map(|f: &FrozenExtras| f.for_scope(scope))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_stored_as_numbers_and_unknown_ones_refused() {
        assert_eq!(serde_json::to_string(&Layout::V2).unwrap(), "2");
        assert_eq!(serde_json::from_str::<Layout>("1").unwrap(), Layout::V1);
        let err = serde_json::from_str::<Layout>("7").unwrap_err().to_string();
        assert!(err.contains("layout 7 is not known"), "{err}");
        assert!(Layout::V1 < Layout::V2 && Layout::V2 < Layout::V3 && Layout::V3 < Layout::V4);
        assert!(Layout::V4 < Layout::V5);
        assert!(Layout::V5 < Layout::V6);
        assert_eq!(Layout::CURRENT, Layout::V6);
        assert_eq!(serde_json::from_str::<Layout>("6").unwrap(), Layout::V6);
        assert_eq!(serde_json::from_str::<Layout>("4").unwrap(), Layout::V4);
        assert_eq!(serde_json::from_str::<Layout>("5").unwrap(), Layout::V5);
        assert_eq!(serde_json::to_string(&Layout::V5).unwrap(), "5");
        assert_eq!(since(Layout::V1, Layout::V2, || 5), None);
        assert_eq!(since(Layout::V2, Layout::V2, || 5), Some(5));
    }
}
