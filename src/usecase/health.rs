//! Ingest health per cluster: watermark and lag, hours kept over smaller reads, failed reads, the anomalies of
//! the last day — whether the stored numbers are complete (global readers).

use chrono::Utc;

use super::{Error, Services, global_only};
use crate::access::Scope;
use crate::ingest::health::IngestHealth;

pub async fn health(s: &Services, scope: &Scope) -> Result<IngestHealth, Error> {
    global_only(scope)?;
    Ok(crate::ingest::health::health(&s.pool, Utc::now()).await?)
}
