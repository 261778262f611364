//! What the rates pages' forms hold: the TCO inputs in their order and the rate typed by hand.

use serde::Deserialize;

use crate::pricing::tco as bounds;
use crate::validate::DecimalRange;

/// The TCO inputs in the order the form, the history and the API list them: (field, word, unit word, range).
pub(super) const FIELDS: [(&str, &str, &str, DecimalRange); 10] = [
    ("card_price", "tco.card_price", "tco.unit.yuan", bounds::YUAN),
    ("server_share_per_card", "tco.server_share_per_card", "tco.unit.yuan", bounds::YUAN),
    ("depreciation_years", "tco.depreciation_years", "tco.unit.years", bounds::YEARS),
    ("avg_power_kw", "tco.avg_power_kw", "tco.unit.kw", bounds::POWER_KW),
    ("pue", "tco.pue", "tco.unit.factor", bounds::FACTOR),
    ("electricity_price", "tco.electricity_price", "tco.unit.yuan_kwh", bounds::ELECTRICITY_PRICE),
    ("system_factor", "tco.system_factor", "tco.unit.factor", bounds::FACTOR),
    ("datacenter_per_card_year", "tco.datacenter_per_card_year", "tco.unit.yuan", bounds::YUAN),
    ("staff_per_card_year", "tco.staff_per_card_year", "tco.unit.yuan", bounds::YUAN),
    ("recovery_utilization", "tco.recovery_utilization", "tco.unit.share", bounds::SHARE),
];

/// The rate-by-hand form as typed.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct ManualForm {
    #[serde(default)]
    pub gpu_model: String,
    #[serde(default)]
    pub effective_from: String,
    #[serde(default)]
    pub rate: String,
}
