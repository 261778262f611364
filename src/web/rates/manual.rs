//! A rate version set by hand (finance, admin): a model, a date and ¥ per card-hour, saved by
//! [`rates::create_rate`] as the API's `POST /rates` with `rate` saves it. Its form is on the calculator's page.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};

use super::super::field_errors::{self as fields, FieldErrors};
use super::super::i18n::PageLang;
use super::super::layout::PageError;
use super::forms::ManualForm;
use super::tco::{TcoForm, page_of};
use crate::usecase::rates::{self, RateInput};
use crate::usecase::state::AppState;
use crate::validate;
use crate::web::capability::PageWriter;
use crate::web::extract::CsrfForm;

/// The version a form sets, or every bad field (the rate's range is the use case's).
fn check(form: &ManualForm) -> Result<RateInput, FieldErrors> {
    let mut errors = FieldErrors::default();
    let model = fields::text(&mut errors, "gpu_model", &form.gpu_model, validate::MODEL_NAME_MAX);
    let from = fields::date(&mut errors, "effective_from", &form.effective_from);
    let rate = fields::figure(&mut errors, "rate", &form.rate);
    match (model, from, rate) {
        (Some(gpu_model), Some(effective_from), Some(rate)) => {
            Ok(RateInput { gpu_model, effective_from, tco: None, rate: Some(rate) })
        }
        _ => Err(errors),
    }
}

pub(super) async fn submit(
    State(s): State<AppState>,
    PageWriter { user, writer }: PageWriter,
    PageLang(lang): PageLang,
    CsrfForm(form): CsrfForm<ManualForm>,
) -> Result<Response, PageError> {
    let errors = match check(&form) {
        Ok(input) => match rates::create_rate(&s.cases, &writer, input).await {
            Ok(stored) => {
                let to = format!("/rates?saved={}#model-{}", stored.id, stored.gpu_model);
                return Ok(Redirect::to(&to).into_response());
            }
            Err(e) => FieldErrors::from_usecase(e, "")?,
        },
        Err(errors) => errors,
    };
    let mut page = page_of(&user, lang, &TcoForm::default(), FieldErrors::default(), None);
    page.manual = form;
    page.manual_errors = errors;
    Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_rate_needs_all_three_fields() {
        let f =
            |m: &str, d: &str, r: &str| ManualForm { gpu_model: m.into(), effective_from: d.into(), rate: r.into() };
        let input = check(&f("H100-80GB", "2026-12-01", "21.3")).unwrap();
        assert_eq!(input.rate, Some(rust_decimal::Decimal::new(213, 1)));
        let bad: Vec<_> = check(&f("", "2026-13-01", "x")).unwrap_err().0.into_iter().map(|e| e.field).collect();
        assert_eq!(bad, ["gpu_model", "effective_from", "rate"]);
    }
}
