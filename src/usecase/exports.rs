//! A month's files for finance — the bill lines as CSV, the workbook, the PDF statements — of a [`Selection`]:
//! the same bytes whichever face asks.

use chrono::Utc;

use super::statements::Selection;
use super::{Error, Services};
use crate::export::{Lang, Prepared};

/// The selection's bill lines as CSV (an export of every team ends with the cluster rows from layout 2 on).
pub fn csv(sel: &Selection) -> Result<Vec<u8>, Error> {
    crate::export::bill_csv(&sel.statement, sel.include(), sel.every_team()).map_err(|e| Error::Internal(e.into()))
}

/// The selection's statements as an Excel workbook.
pub fn xlsx(sel: &Selection) -> Result<Vec<u8>, Error> {
    crate::export::bill_xlsx(&sel.statement, sel.include(), sel.every_team()).map_err(|e| Error::Internal(e.into()))
}

/// The selection's statements as PDF in `lang`, with the extras its scope may see; a draft names `prepared_by`
/// as its preparer, to the minute (a closed month's preparer is its close).
pub async fn pdf(s: &Services, sel: &Selection, prepared_by: String, lang: Lang) -> Result<Vec<u8>, Error> {
    let mut extras = super::extras::extras_for(s, &sel.statement, &sel.scope).await?;
    let now = Utc::now();
    let at = chrono::DurationRound::duration_trunc(now, chrono::TimeDelta::minutes(1)).unwrap_or(now);
    extras.prepared = Some(Prepared { by: prepared_by, at });
    let fonts = crate::export::FontChain::installed().map_err(|e| Error::Internal(e.into()))?;
    let (st, include) = (std::sync::Arc::clone(&sel.statement), sel.include());
    // rendering is CPU work: off the async threads
    tokio::task::spawn_blocking(move || {
        crate::export::statement_pdf(&st, include, &fonts, &extras, lang).map_err(anyhow::Error::from)
    })
    .await
    .map_err(|e| Error::Internal(e.into()))?
    .map_err(Error::Internal)
}
