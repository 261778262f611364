//! Finance's exports of a month: bill lines as CSV, statements as PDF (Chinese names in an embedded CJK font subset)
//! and as an Excel workbook, each written by the layout its statement was frozen with ([`layout`]).

pub mod blocker;
pub mod close_event;
mod csv_export;
mod fonts;
mod frozen;
pub mod json_view;
pub mod layout;
mod pdf;
pub mod present;
pub mod table;
pub mod view;
mod view_pdf;
pub mod xlsx;

pub use crate::ledger::frozen::{Coverage, FrozenExtras, IdleLine, PreviousMonth, UtilizationFigures};
pub use csv_export::neutralise;
pub use fonts::{CJK_FONT_PATHS, FONT_ENV, FontChain, FontsMissing, PdfFonts};
pub use frozen::ScopedExtras;
pub use layout::{Layout, bill_csv, bill_xlsx, pdf_extras, since, statement_pdf};
pub use pdf::{PdfError, StatementExtras};
pub use present::{LANGS, Lang};
pub use view::{Prepared, StatementView, statement_view};
