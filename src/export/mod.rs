//! Finance's exports of a month: bill lines as CSV, statements as PDF (Chinese names in an embedded CJK font subset)
//! and as an Excel workbook, each written by the layout its statement was frozen with ([`layout`]).

mod csv_export;
mod fonts;
mod frozen;
pub mod layout;
mod pdf;
pub mod xlsx;

pub use csv_export::neutralise;
pub use fonts::{FontChain, FontsMissing};
pub use frozen::{FrozenExtras, IdleLine, UtilizationFigures};
pub use layout::{Layout, bill_csv, bill_xlsx, pdf_extras, since, statement_pdf};
pub use pdf::{PdfError, StatementExtras};
