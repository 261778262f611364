//! Finance's exports of a month: CSV now (PDF statements planned).

mod csv_export;

pub use csv_export::{bill_csv, neutralise};
