//! Ingest health per cluster: watermark and lag, hours kept over smaller reads, failed reads, the anomalies of
//! the last day — whether the stored numbers are complete (global readers); and whether PDF statements can be
//! made on this server (the fonts they need).

use chrono::Utc;

use super::{Error, Services, global_only};
use crate::access::Scope;
use crate::ingest::health::IngestHealth;

pub async fn health(s: &Services, scope: &Scope) -> Result<IngestHealth, Error> {
    global_only(scope)?;
    Ok(crate::ingest::health::health(&s.pool, Utc::now()).await?)
}

/// Whether PDF statements can be made now, with which fonts, or why not (a font installed after the server
/// started counts from the next look: [`crate::export::FontChain::installed`]). Reading the font files is blocking
/// work: off the async threads.
pub async fn pdf_fonts() -> Result<crate::export::PdfFonts, Error> {
    tokio::task::spawn_blocking(crate::export::FontChain::status).await.map_err(|e| Error::Internal(e.into()))
}

/// Ingest health and whether PDFs can be made: what the health page and the API's health answer show.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Health {
    #[serde(flatten)]
    pub ingest: IngestHealth,
    /// Whether PDF statements can be made on this server, and why not.
    pub pdf: crate::export::PdfFonts,
}

pub async fn full(s: &Services, scope: &Scope) -> Result<Health, Error> {
    Ok(Health { ingest: health(s, scope).await?, pdf: pdf_fonts().await? })
}
