//! The rate book: what stored usage is priced with — the model catalogue (the built-in names with the stored
//! aliases over them) and the dated rate history — held together so that every price is looked up one way.

use chrono::NaiveDate;

use super::{ModelCatalog, RateHistory};
use crate::money::RatePerCardHour;

#[derive(Debug, Clone)]
pub struct RateBook {
    pub catalog: ModelCatalog,
    pub history: RateHistory,
}

impl RateBook {
    /// The pricing key of a stored (DCGM) model name and its rate in force on billing day `day`.
    pub fn price(&self, gpu_model: &str, day: NaiveDate) -> (String, Option<RatePerCardHour>) {
        let model = self.catalog.key_for(gpu_model);
        let rate = self.history.rate_at(&model, day);
        (model, rate)
    }
}
