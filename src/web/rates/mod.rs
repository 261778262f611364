//! The rates pages: the dated rate history per GPU model with the TCO inputs behind each version, the cloud
//! reference rates (finance and admin set them with a form), self-build vs rent at the measured allocation
//! (global readers, as the API's `/rent-vs-build`), and the TCO calculator ([`tco`]). Every reader sees the rates,
//! as in the API; the forms are the writers'.

mod forms;
mod history;
mod manual;
mod tco;

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chrono::Utc;
use serde::Deserialize;

use super::capability::PageWriter;
use super::field_errors::{self as fields, FieldErrors, Problem};
use super::fmt::percent;
use super::i18n::{Lang, PageLang, t};
use super::layout::{Chrome, PageError};
use crate::pricing::CloudRates;
use crate::usecase::state::AppState;
use crate::usecase::{self, months, rates};
use crate::validate::{self, TimeInput};
use crate::web::extract::{CsrfForm, PageUser};

pub use history::ModelHistory;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/rates", get(page))
        .route("/rates/cloud", post(cloud_submit))
        .route("/rates/new", get(tco::form_page).post(tco::submit))
        .route("/rates/manual", post(manual::submit))
}

/// A ¥ per card-hour figure as the statements print a rate: `¥5.6893`.
pub(super) fn rate4(d: rust_decimal::Decimal) -> String {
    crate::export::present::rate(crate::money::RatePerCardHour::new(d), Lang::En)
}

pub struct CloudRow {
    pub model: String,
    pub on_demand: String,
    pub spot: String,
    pub reserved: String,
    pub updated: String,
}

/// The cloud rates form as typed.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct CloudForm {
    #[serde(default)]
    pub model: String,
    #[serde(default)]
    pub on_demand: String,
    #[serde(default)]
    pub spot: String,
    #[serde(default)]
    pub reserved: String,
}

/// The self-build vs rent question as typed (a GET form).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct RentQuery {
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub from: Option<String>,
    #[serde(default)]
    pub to: Option<String>,
    #[serde(default)]
    pub saved: Option<String>,
    #[serde(default)]
    pub cloud_saved: Option<String>,
}

pub struct Comparison {
    pub kind: &'static str,
    pub cloud_rate: String,
    pub saving: String,
    pub build_wins: bool,
    pub break_even: Option<String>,
}

pub struct RentAnswer {
    pub model: String,
    pub allocation_rate: String,
    pub utilization: String,
    pub own: String,
    pub own_full: String,
    pub comparisons: Vec<Comparison>,
}

/// The self-build vs rent section (global readers only).
pub struct RentSection {
    /// The models with a TCO-derived rate, the choices.
    pub models: Vec<String>,
    pub model: String,
    pub from: String,
    pub to: String,
    pub answer: Option<RentAnswer>,
    /// Why there is no answer, in words.
    pub note: Option<&'static str>,
}

#[derive(Template, WebTemplate)]
#[template(path = "rates.html")]
pub struct RatesPage {
    pub c: Chrome,
    pub models: Vec<ModelHistory>,
    pub cloud: Vec<CloudRow>,
    pub rent: Option<RentSection>,
    pub writes: bool,
    pub cloud_form: CloudForm,
    pub errors: FieldErrors,
    pub saved: bool,
    pub cloud_saved: bool,
}

impl RatesPage {
    pub fn error(&self, field: &str) -> Option<String> {
        self.errors.message(self.c.lang, field)
    }

    /// The cloud form's rate inputs: (field, label, value as typed, message).
    pub fn cloud_inputs(&self) -> Vec<(&'static str, &'static str, String, Option<String>)> {
        let f = &self.cloud_form;
        [
            ("on_demand", "rates.cloud.on_demand", &f.on_demand),
            ("spot", "rates.cloud.spot", &f.spot),
            ("reserved", "rates.cloud.reserved", &f.reserved),
        ]
        .into_iter()
        .map(|(name, key, value)| (name, self.c.t(key), value.clone(), self.error(name)))
        .collect()
    }
}

fn money4(d: Option<rust_decimal::Decimal>) -> String {
    d.map_or_else(|| "–".into(), rate4)
}

/// A saving per card-hour, negative when renting is cheaper: `−¥1.2345`.
fn signed4(d: rust_decimal::Decimal) -> String {
    if d < rust_decimal::Decimal::ZERO { format!("\u{2212}{}", rate4(-d)) } else { rate4(d) }
}

/// A share (0–1) as a percentage: `61.3 %`.
fn share(d: rust_decimal::Decimal) -> String {
    percent(rust_decimal::prelude::ToPrimitive::to_f64(&d))
}

/// The answer of self-build vs rent for the question `q`, with the bad fields of the question in `errors`.
async fn rent_section(
    s: &AppState,
    user: &PageUser,
    models: Vec<String>,
    q: &RentQuery,
    errors: &mut FieldErrors,
) -> Result<RentSection, PageError> {
    let month = months::current(&s.cases, Utc::now());
    let model = q.model.clone().or_else(|| models.first().cloned()).unwrap_or_default();
    let from = q.from.clone().unwrap_or_else(|| month.first_day().to_string());
    let to = q.to.clone().unwrap_or_else(|| month.next().first_day().to_string());
    let mut section = RentSection { models, model, from, to, answer: None, note: None };
    if section.models.is_empty() && q.model.is_none() {
        section.note = Some("rates.rvb.no_models");
        return Ok(section);
    }
    let before = errors.0.len();
    let model = fields::text(errors, "model", &section.model, validate::MODEL_NAME_MAX);
    let tz = s.billing_tz;
    let mut instant = |field: &str, typed: &str| {
        let text = fields::text(errors, field, typed, fields::FIGURE_MAX)?;
        match TimeInput::parse(field, &text).and_then(|t| t.resolve(field, tz)) {
            Ok(t) => Some(t),
            Err(e) => {
                let range = e.message.starts_with("must be between");
                errors.add(field, if range { Problem::DateRange } else { Problem::NotDate }, e.message);
                None
            }
        }
    };
    let (from, to) = (instant("from", &section.from), instant("to", &section.to));
    let (Some(model), Some(from), Some(to)) = (model, from, to) else { return Ok(section) };
    if errors.0.len() > before {
        return Ok(section);
    }
    match rates::rent_vs_build_view(&s.cases, &user.principal.scope(), &model, from, to).await {
        Ok(v) => {
            let c = &v.comparison;
            let comparisons = [
                ("rates.cloud.on_demand", &c.on_demand),
                ("rates.cloud.spot", &c.spot),
                ("rates.cloud.reserved", &c.reserved),
            ]
            .into_iter()
            .filter_map(|(kind, cmp)| {
                cmp.as_ref().map(|x| Comparison {
                    kind,
                    cloud_rate: rate4(x.cloud_rate),
                    saving: signed4(x.saving_per_card_hour),
                    build_wins: x.build_wins,
                    break_even: x.break_even_allocation.map(share),
                })
            })
            .collect();
            section.answer = Some(RentAnswer {
                model: v.gpu_model.clone(),
                allocation_rate: share(v.allocation_rate),
                utilization: v.utilization.map_or_else(|| "–".into(), share),
                own: rate4(c.own_cost_per_allocated_card_hour),
                own_full: rate4(c.own_cost_at_full_allocation),
                comparisons,
            });
        }
        Err(usecase::Error::NotFound(what)) => {
            section.note =
                Some(if what.starts_with("a TCO-derived") { "rates.rvb.no_tco" } else { "rates.rvb.no_usage" });
        }
        Err(e) => match FieldErrors::from_usecase(e, "") {
            Ok(found) => errors.0.extend(found.0),
            Err(other) => return Err(other.into()),
        },
    }
    Ok(section)
}

/// The rates page for `user`: the history, the cloud rates, self-build vs rent for question `q` (global readers),
/// the cloud form with `cloud_form` and `errors` (writers).
async fn render(
    s: &AppState,
    user: &PageUser,
    lang: Lang,
    q: &RentQuery,
    cloud_form: CloudForm,
    mut errors: FieldErrors,
) -> Result<RatesPage, PageError> {
    let scope = user.principal.scope();
    let versions = rates::rates(&s.cases, &scope).await?;
    let models = history::by_model(&versions, lang, s.billing_tz);
    let cloud = rates::cloud_rates(&s.cases, &scope)
        .await?
        .into_iter()
        .map(|c| CloudRow {
            model: c.gpu_model.clone(),
            on_demand: money4(c.on_demand),
            spot: money4(c.spot),
            reserved: money4(c.reserved),
            updated: super::fmt::when(&c.updated_at, s.billing_tz),
        })
        .collect();
    let rent = if scope.is_global() {
        let tco_models = models.iter().filter(|m| m.has_tco).map(|m| m.model.clone()).collect();
        Some(rent_section(s, user, tco_models, q, &mut errors).await?)
    } else {
        None
    };
    Ok(RatesPage {
        c: Chrome::new(user, lang, "/rates", t(lang, "rates.title")),
        models,
        cloud,
        rent,
        writes: crate::web::capability::may_write(user),
        cloud_form,
        errors,
        saved: q.saved.is_some(),
        cloud_saved: q.cloud_saved.is_some(),
    })
}

async fn page(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    Query(q): Query<RentQuery>,
) -> Result<Response, PageError> {
    let page = render(&s, &user, lang, &q, CloudForm::default(), FieldErrors::default()).await?;
    // a self-build vs rent question with a bad field: the page, the field saying why
    let status = if page.errors.is_empty() { StatusCode::OK } else { StatusCode::UNPROCESSABLE_ENTITY };
    Ok((status, page).into_response())
}

/// The cloud rates a form sets: (model, rates), or every bad field.
fn check_cloud(form: &CloudForm) -> Result<(String, CloudRates), FieldErrors> {
    let mut errors = FieldErrors::default();
    let model = fields::text(&mut errors, "model", &form.model, validate::MODEL_NAME_MAX);
    let on_demand = fields::optional_figure(&mut errors, "on_demand", &form.on_demand);
    let spot = fields::optional_figure(&mut errors, "spot", &form.spot);
    let reserved = fields::optional_figure(&mut errors, "reserved", &form.reserved);
    match (model, on_demand, spot, reserved) {
        (Some(model), Some(on_demand), Some(spot), Some(reserved)) if errors.is_empty() => {
            Ok((model, CloudRates { on_demand, spot, reserved }))
        }
        _ => Err(errors),
    }
}

async fn cloud_submit(
    State(s): State<AppState>,
    PageWriter { user, writer }: PageWriter,
    PageLang(lang): PageLang,
    CsrfForm(form): CsrfForm<CloudForm>,
) -> Result<Response, PageError> {
    let errors = match check_cloud(&form) {
        Ok((model, cloud)) => match rates::put_cloud_rates(&s.cases, &writer, &model, cloud).await {
            Ok(_) => return Ok(Redirect::to("/rates?cloud_saved=1#cloud").into_response()),
            Err(e) => FieldErrors::from_usecase(e, "").map_err(PageError::from)?,
        },
        Err(errors) => errors,
    };
    let page = render(&s, &user, lang, &RentQuery::default(), form, errors).await?;
    Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rust_decimal::Decimal;

    #[test]
    fn a_cloud_form_takes_blank_as_unknown() {
        let f = |m: &str, od: &str, spot: &str| CloudForm {
            model: m.into(),
            on_demand: od.into(),
            spot: spot.into(),
            reserved: String::new(),
        };
        let (model, r) = check_cloud(&f(" H100-80GB ", "25.5", "")).unwrap();
        assert_eq!(
            (model.as_str(), r.on_demand, r.spot, r.reserved),
            ("H100-80GB", Some(Decimal::new(255, 1)), None, None)
        );
        let bad: Vec<_> =
            check_cloud(&f("", "abc", "-1")).unwrap_err().0.into_iter().map(|e| (e.field, e.problem)).collect();
        assert_eq!(
            bad,
            [
                ("model".into(), Problem::Required),
                ("on_demand".into(), Problem::NotNumber),
                ("spot".into(), Problem::Negative)
            ]
        );
    }

    #[test]
    fn savings_and_shares_print_as_figures() {
        assert_eq!(signed4(Decimal::new(-12345, 4)), "\u{2212}¥1.2345");
        assert_eq!(signed4(Decimal::new(5, 0)), "¥5.0000");
        assert_eq!(share(Decimal::new(6130, 4)), "61.3 %");
    }
}
