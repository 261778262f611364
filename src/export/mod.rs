//! Finance's exports of a month: CSV now (PDF statements planned).

mod csv_export;
mod pdf;

pub use csv_export::{bill_csv, neutralise};
pub use pdf::{PdfError, find_cjk_font, statement_pdf};
