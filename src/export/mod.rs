//! Finance's exports of a month: bill lines as CSV, statements as PDF (Chinese names in an embedded CJK font subset).

mod csv_export;
mod fonts;
mod pdf;

pub use csv_export::{bill_csv, neutralise};
pub use fonts::{FontChain, FontsMissing};
pub use pdf::{PdfError, StatementExtras, statement_pdf};
