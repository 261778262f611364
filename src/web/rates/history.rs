//! The rate history as the page lists it: per GPU model its dated versions, each effective until the day before
//! the next one, with the TCO inputs it was derived from (SPEC §5: all inputs stored and shown).

use chrono::Duration;

use super::super::fmt::{percent, when, yuan};
use super::super::i18n::{Lang, t};
use super::forms::FIELDS;
use super::rate4;
use crate::db::rates::StoredRate;
use crate::money::Money;
use crate::pricing::TcoInputs;

pub struct VersionRow {
    pub id: i64,
    pub effective_from: String,
    /// The last day it applies (the day before the next version), or "current".
    pub effective_to: String,
    pub rate: String,
    pub source: &'static str,
    pub created: String,
    /// The TCO inputs in words (label, value); empty for a rate set by hand.
    pub inputs: Vec<(&'static str, String)>,
}

pub struct ModelHistory {
    pub model: String,
    /// Whether a version is derived from a TCO model (self-build vs rent needs one).
    pub has_tco: bool,
    /// Newest first.
    pub versions: Vec<VersionRow>,
}

/// A TCO input as the page prints it: amounts as money, the recovery utilization as a percentage.
fn input_value(field: &str, v: rust_decimal::Decimal) -> String {
    match field {
        "card_price" | "server_share_per_card" | "datacenter_per_card_year" | "staff_per_card_year" => {
            yuan(Money::from_decimal(v))
        }
        "electricity_price" => format!("¥{}/kWh", v.normalize()),
        "avg_power_kw" => format!("{} kW", v.normalize()),
        "recovery_utilization" => percent(rust_decimal::prelude::ToPrimitive::to_f64(&v)),
        _ => v.normalize().to_string(),
    }
}

fn inputs_of(lang: Lang, tco: &serde_json::Value) -> Vec<(&'static str, String)> {
    match serde_json::from_value::<TcoInputs>(tco.clone()) {
        Ok(i) => input_words(lang, &i),
        // stored by an older release in another shape: shown as stored
        Err(_) => vec![(t(lang, "rates.inputs"), tco.to_string())],
    }
}

/// TCO inputs in words, in the form's order: (label, value).
pub(super) fn input_words(lang: Lang, i: &TcoInputs) -> Vec<(&'static str, String)> {
    let values = [
        i.card_price,
        i.server_share_per_card,
        i.depreciation_years,
        i.avg_power_kw,
        i.pue,
        i.electricity_price,
        i.system_factor,
        i.datacenter_per_card_year,
        i.staff_per_card_year,
        i.recovery_utilization,
    ];
    FIELDS.iter().zip(values).map(|((name, label, ..), v)| (t(lang, label), input_value(name, v))).collect()
}

/// Every model's versions (as the API lists them), grouped, each model's newest first.
pub fn by_model(versions: &[StoredRate], lang: Lang, tz: chrono_tz::Tz) -> Vec<ModelHistory> {
    let mut models: Vec<String> = versions.iter().map(|v| v.gpu_model.clone()).collect();
    models.sort();
    models.dedup();
    models
        .into_iter()
        .map(|model| {
            let mut own: Vec<&StoredRate> = versions.iter().filter(|v| v.gpu_model == model).collect();
            own.sort_by_key(|v| v.effective_from);
            let rows = own
                .iter()
                .enumerate()
                .map(|(i, v)| VersionRow {
                    id: v.id,
                    effective_from: v.effective_from.to_string(),
                    effective_to: own.get(i + 1).map_or_else(
                        || t(lang, "rates.current").to_string(),
                        |next| (next.effective_from - Duration::days(1)).to_string(),
                    ),
                    rate: rate4(v.rate.as_decimal()),
                    source: t(lang, if v.tco.is_some() { "rates.source.tco" } else { "rates.source.manual" }),
                    created: format!("{} · {}", v.created_by, when(&v.created_at, tz)),
                    inputs: v.tco.as_ref().map(|tco| inputs_of(lang, tco)).unwrap_or_default(),
                })
                .rev()
                .collect();
            ModelHistory { has_tco: own.iter().any(|v| v.tco.is_some()), model, versions: rows }
        })
        .collect()
}
