//! A month's files for finance — the bill lines as CSV, the workbook, the PDF statements — of a [`Selection`]:
//! the same bytes whichever face asks.

use chrono::Utc;

use super::statements::Selection;
use super::{Error, Services};
use crate::export::{Lang, Prepared};

/// The selection's bill lines as CSV (an export of every team ends with the cluster rows from layout 2 on, and a
/// total row from layout 4 on); `words`: layout 4 on, the header and the words in that language (`None`: codes).
pub fn csv(sel: &Selection, words: Option<Lang>) -> Result<Vec<u8>, Error> {
    crate::export::bill_csv(&sel.statement, sel.include(), sel.every_team(), words)
        .map_err(|e| Error::Internal(e.into()))
}

/// The selection's statements as an Excel workbook; from layout 4 on in `lang`, its times in the statement's zone.
pub fn xlsx(s: &Services, sel: &Selection, lang: Lang) -> Result<Vec<u8>, Error> {
    let tz = zone(s, &sel.statement);
    crate::export::bill_xlsx(&sel.statement, sel.include(), sel.every_team(), lang, tz)
        .map_err(|e| Error::Internal(e.into()))
}

/// The time zone a statement's times print in: the one its close froze (layout 4 on), else the billing time zone.
pub fn zone(s: &Services, st: &crate::ledger::Statement) -> chrono_tz::Tz {
    st.frozen.as_ref().and_then(|f| f.time_zone.as_deref()).and_then(|z| z.parse().ok()).unwrap_or(s.billing_tz)
}

/// A draft's preparer: who asks for it, now, to the minute (a closed month's preparer is its close).
pub fn prepared_now(by: String) -> Prepared {
    let now = Utc::now();
    let at = chrono::DurationRound::duration_trunc(now, chrono::TimeDelta::minutes(1)).unwrap_or(now);
    Prepared { by, at }
}

/// The selection's statements as PDF in `lang`, with the extras its scope may see; a draft names `prepared_by`
/// as its preparer, to the minute (a closed month's preparer is its close).
pub async fn pdf(s: &Services, sel: &Selection, prepared_by: String, lang: Lang) -> Result<Vec<u8>, Error> {
    let mut extras = super::extras::extras_for(s, &sel.statement, &sel.scope).await?;
    extras.prepared = Some(prepared_now(prepared_by));
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

/// A download's file name: `cardhour-<month>[-<team>].<ext>`.
pub fn file_name(st: &crate::ledger::Statement, team: Option<&str>, ext: &str) -> String {
    format!("cardhour-{}{}.{ext}", st.month, team.map(|t| format!("-{t}")).unwrap_or_default())
}

/// `attachment` with the file name twice (RFC 6266): `filename=` reduced to characters that are safe in a quoted
/// string for every client, and `filename*=UTF-8''…` (RFC 5987) percent-encoding every byte outside attr-char, so
/// no input can close the quotes, add a parameter or break the header. Only visible ASCII: always a valid header.
pub fn content_disposition(name: &str) -> String {
    use std::fmt::Write;
    let plain: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' }).collect();
    let mut encoded = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
            encoded.push(char::from(b));
        } else {
            let _ = write!(encoded, "%{b:02X}");
        }
    }
    format!("attachment; filename=\"{plain}\"; filename*=UTF-8''{encoded}")
}
