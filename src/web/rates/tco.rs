//! The TCO calculator (finance, admin): the inputs of a GPU model's rate version as a form; "Preview" shows the
//! yearly breakdown and the rate they give without saving anything ([`rates::preview_rate`], the API's
//! `POST /rates/preview`), and the preview's "Save" sends the same inputs to [`rates::create_rate`] (the API's
//! `POST /rates`).

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::super::field_errors::{self as fields, FieldErrors};
use super::super::fmt::yuan;
use super::super::i18n::{Lang, PageLang, t};
use super::super::layout::{Chrome, PageError};
use super::forms::{FIELDS, ManualForm};
use super::rate4;
use crate::money::thousands;
use crate::pricing::{RateBreakdown, TcoInputs};
use crate::usecase::rates::{self, RateInput};
use crate::usecase::state::AppState;
use crate::validate::{self, DecimalRange};
use crate::web::capability::PageWriter;
use crate::web::extract::{CsrfForm, PageUser};

/// The SPEC's worked example, as the form's placeholders.
const EXAMPLE: [&str; 10] = ["80000", "40000", "5", "0.5", "1.4", "0.8", "1.2", "3000", "2000", "0.7"];

/// The values a range takes, language-neutral: `0 – 1,000,000,000`, `> 0, ≤ 5`.
fn range_hint(r: DecimalRange) -> String {
    let (min, max) = (thousands(&r.min.to_string()), thousands(&r.max.to_string()));
    if r.min_exclusive { format!("> {min}, ≤ {max}") } else { format!("{min} – {max}") }
}

/// The calculator's form as typed: every field text.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct TcoForm {
    #[serde(default)]
    pub gpu_model: String,
    #[serde(default)]
    pub effective_from: String,
    #[serde(default)]
    pub card_price: String,
    #[serde(default)]
    pub server_share_per_card: String,
    #[serde(default)]
    pub depreciation_years: String,
    #[serde(default)]
    pub avg_power_kw: String,
    #[serde(default)]
    pub pue: String,
    #[serde(default)]
    pub electricity_price: String,
    #[serde(default)]
    pub system_factor: String,
    #[serde(default)]
    pub datacenter_per_card_year: String,
    #[serde(default)]
    pub staff_per_card_year: String,
    #[serde(default)]
    pub recovery_utilization: String,
    /// `save` saves; anything else previews.
    #[serde(default)]
    pub action: String,
}

impl TcoForm {
    fn figure(&self, field: &str) -> &str {
        match field {
            "card_price" => &self.card_price,
            "server_share_per_card" => &self.server_share_per_card,
            "depreciation_years" => &self.depreciation_years,
            "avg_power_kw" => &self.avg_power_kw,
            "pue" => &self.pue,
            "electricity_price" => &self.electricity_price,
            "system_factor" => &self.system_factor,
            "datacenter_per_card_year" => &self.datacenter_per_card_year,
            "staff_per_card_year" => &self.staff_per_card_year,
            "recovery_utilization" => &self.recovery_utilization,
            _ => "",
        }
    }
}

/// One input of the form as the page shows it.
pub struct InputView {
    pub name: &'static str,
    pub label: &'static str,
    pub hint: String,
    pub placeholder: &'static str,
    pub value: String,
    pub error: Option<String>,
}

/// One yearly line of a preview.
pub struct Line {
    pub label: &'static str,
    pub how: &'static str,
    pub amount: String,
}

pub struct Preview {
    /// The inputs in words (they print; the form does not).
    pub inputs: Vec<(&'static str, String)>,
    pub lines: Vec<Line>,
    pub annual: String,
    pub rate: String,
    /// The inputs the save form carries, as typed (field, value).
    pub hidden: Vec<(&'static str, String)>,
}

#[derive(Template, WebTemplate)]
#[template(path = "rates_new.html")]
pub struct TcoPage {
    pub c: Chrome,
    pub gpu_model: String,
    pub effective_from: String,
    pub inputs: Vec<InputView>,
    pub errors: FieldErrors,
    pub preview: Option<Preview>,
    /// The rate-by-hand form ([`super::manual`]) and its bad fields.
    pub manual: ManualForm,
    pub manual_errors: FieldErrors,
}

impl TcoPage {
    pub fn error(&self, field: &str) -> Option<String> {
        self.errors.message(self.c.lang, field)
    }

    pub fn manual_error(&self, field: &str) -> Option<String> {
        self.manual_errors.message(self.c.lang, field)
    }
}

pub(super) fn page_of(
    user: &PageUser,
    lang: Lang,
    form: &TcoForm,
    errors: FieldErrors,
    preview: Option<Preview>,
) -> TcoPage {
    let inputs = FIELDS
        .iter()
        .zip(EXAMPLE)
        .map(|((name, label, unit, range), placeholder)| InputView {
            name,
            label: t(lang, label),
            hint: format!("{} {}", range_hint(*range), t(lang, unit)),
            placeholder,
            value: form.figure(name).to_string(),
            error: errors.message(lang, name),
        })
        .collect();
    TcoPage {
        c: Chrome::new(user, lang, "/rates", t(lang, "tco.title")),
        gpu_model: form.gpu_model.clone(),
        effective_from: form.effective_from.clone(),
        inputs,
        errors,
        preview,
        manual: Default::default(),
        manual_errors: FieldErrors::default(),
    }
}

pub(super) async fn form_page(PageWriter { user, .. }: PageWriter, PageLang(lang): PageLang) -> Response {
    page_of(&user, lang, &TcoForm::default(), FieldErrors::default(), None).into_response()
}

/// The rate version a form describes: (model, effective from, TCO inputs), or every bad field (as typed; the
/// ranges are the use case's).
fn check(form: &TcoForm) -> Result<(String, chrono::NaiveDate, TcoInputs), FieldErrors> {
    let mut errors = FieldErrors::default();
    let model = fields::text(&mut errors, "gpu_model", &form.gpu_model, validate::MODEL_NAME_MAX);
    let from = fields::date(&mut errors, "effective_from", &form.effective_from);
    let v: Vec<_> = FIELDS.iter().map(|(name, ..)| fields::figure(&mut errors, name, form.figure(name))).collect();
    let (Some(model), Some(from)) = (model, from) else { return Err(errors) };
    let Some(v) = v.into_iter().collect::<Option<Vec<_>>>() else { return Err(errors) };
    let inputs = TcoInputs {
        card_price: v[0],
        server_share_per_card: v[1],
        depreciation_years: v[2],
        avg_power_kw: v[3],
        pue: v[4],
        electricity_price: v[5],
        system_factor: v[6],
        datacenter_per_card_year: v[7],
        staff_per_card_year: v[8],
        recovery_utilization: v[9],
    };
    Ok((model, from, inputs))
}

fn preview_of(lang: Lang, inputs: &TcoInputs, b: &RateBreakdown, form: &TcoForm) -> Preview {
    let line = |label: &'static str, how: Option<&'static str>, amount: String| Line {
        label: t(lang, label),
        how: how.map_or("", |h| t(lang, h)),
        amount,
    };
    let mut hidden = vec![("gpu_model", form.gpu_model.trim().to_string())];
    hidden.push(("effective_from", form.effective_from.trim().to_string()));
    hidden.extend(FIELDS.iter().map(|(name, ..)| (*name, form.figure(name).trim().to_string())));
    Preview {
        inputs: super::history::input_words(lang, inputs),
        lines: vec![
            line("tco.hardware", Some("tco.hardware.how"), yuan(b.hardware_per_year)),
            line("tco.power_before", Some("tco.power_before.how"), yuan(b.power_per_year_before_system_factor)),
            line("tco.power", Some("tco.power.how"), yuan(b.power_per_year)),
            line("tco.datacenter", None, yuan(b.datacenter_per_year)),
            line("tco.staff", None, yuan(b.staff_per_year)),
        ],
        annual: yuan(b.annual_tco),
        rate: rate4(b.rate.as_decimal()),
        hidden,
    }
}

/// The form back with its bad fields (422).
fn form_back(user: &PageUser, lang: Lang, form: &TcoForm, errors: FieldErrors) -> Response {
    (StatusCode::UNPROCESSABLE_ENTITY, page_of(user, lang, form, errors, None)).into_response()
}

pub(super) async fn submit(
    State(s): State<AppState>,
    PageWriter { user, writer }: PageWriter,
    PageLang(lang): PageLang,
    CsrfForm(form): CsrfForm<TcoForm>,
) -> Result<Response, PageError> {
    let (model, effective_from, inputs) = match check(&form) {
        Ok(v) => v,
        Err(errors) => return Ok(form_back(&user, lang, &form, errors)),
    };
    if form.action != "save" {
        return match rates::preview_rate(inputs.clone()) {
            Ok(b) => {
                let preview = preview_of(lang, &inputs, &b, &form);
                Ok(page_of(&user, lang, &form, FieldErrors::default(), Some(preview)).into_response())
            }
            Err(e) => Ok(form_back(&user, lang, &form, FieldErrors::from_usecase(e, "")?)),
        };
    }
    let input = RateInput { gpu_model: model, effective_from, tco: Some(inputs), rate: None };
    match rates::create_rate(&s.cases, &writer, input).await {
        Ok(stored) => {
            Ok(Redirect::to(&format!("/rates?saved={}#model-{}", stored.id, stored.gpu_model)).into_response())
        }
        Err(e) => Ok(form_back(&user, lang, &form, FieldErrors::from_usecase(e, "tco.")?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pricing::tco as bounds;

    fn example() -> TcoForm {
        let mut f =
            TcoForm { gpu_model: "A100-80GB".into(), effective_from: "2026-12-01".into(), ..Default::default() };
        for ((name, ..), v) in FIELDS.iter().zip(EXAMPLE) {
            set(&mut f, name, v);
        }
        f
    }

    fn set(f: &mut TcoForm, name: &str, v: &str) {
        let slot = match name {
            "card_price" => &mut f.card_price,
            "server_share_per_card" => &mut f.server_share_per_card,
            "depreciation_years" => &mut f.depreciation_years,
            "avg_power_kw" => &mut f.avg_power_kw,
            "pue" => &mut f.pue,
            "electricity_price" => &mut f.electricity_price,
            "system_factor" => &mut f.system_factor,
            "datacenter_per_card_year" => &mut f.datacenter_per_card_year,
            "staff_per_card_year" => &mut f.staff_per_card_year,
            "recovery_utilization" => &mut f.recovery_utilization,
            _ => unreachable!(),
        };
        *slot = v.into();
    }

    #[test]
    fn the_example_previews_the_spec_rate() {
        let (_, _, inputs) = check(&example()).unwrap();
        let b = rates::preview_rate(inputs.clone()).unwrap();
        let p = preview_of(Lang::En, &inputs, &b, &example());
        assert_eq!(p.inputs[0], ("Card price", "¥80,000.00".to_string()));
        assert_eq!(p.rate, "¥5.6893");
        assert_eq!(p.annual, "¥34,886.72");
        assert_eq!(p.lines[1].amount, "¥4,905.60");
        assert_eq!(p.hidden.len(), 12);
    }

    #[test]
    fn every_bad_field_is_named() {
        let mut f = example();
        set(&mut f, "pue", "abc");
        set(&mut f, "card_price", "-1");
        f.effective_from = "2026-02-30".into();
        let bad: Vec<_> = check(&f).unwrap_err().0.into_iter().map(|e| (e.field, e.problem)).collect();
        use fields::Problem as P;
        assert_eq!(
            bad,
            [("effective_from".into(), P::NotDate), ("card_price".into(), P::Negative), ("pue".into(), P::NotNumber)]
        );
        // in range is the use case's to say
        let mut f = example();
        set(&mut f, "pue", "11");
        let (_, _, inputs) = check(&f).unwrap();
        let e = FieldErrors::from_usecase(rates::preview_rate(inputs).unwrap_err(), "").unwrap();
        assert_eq!(e.0[0].field, "pue");
        assert_eq!(e.message(Lang::Zh, "pue").unwrap(), "超出允许范围");
    }

    #[test]
    fn ranges_print_language_neutral() {
        assert_eq!(range_hint(bounds::YUAN), "0 – 1,000,000,000");
        assert_eq!(range_hint(bounds::POWER_KW), "> 0, ≤ 5");
    }
}
