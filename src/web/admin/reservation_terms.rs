//! `/admin/reservation-terms`: the GPU model and factor each quota scope's guarantee is billed at under
//! reserved-quota billing (SPEC §10), from a date — the list and a form to add terms, the API's
//! `GET`/`POST /reservation-terms` from the same use case, so a month closed under the policy is set up in the portal.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Deserialize;

use super::{FieldErrors, Tab, blank_none, refused, tabs};
use crate::glossary;
use crate::usecase::reservation_terms::{self, ReservationTermInput, ScopeKind};
use crate::usecase::state::AppState;
use crate::web::capability::{PageGlobalReader, PageWriter};
use crate::web::extract::{CsrfForm, PageUser};
use crate::web::fmt::when;
use crate::web::i18n::{Lang, PageLang, t};
use crate::web::layout::{Chrome, PageError};

pub fn routes() -> Router<AppState> {
    Router::new().route("/admin/reservation-terms", get(list).post(add))
}

/// The form as sent: every field text.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct TermForm {
    #[serde(default)]
    pub scope_kind: String,
    #[serde(default)]
    pub scope: String,
    #[serde(default)]
    pub cluster: String,
    #[serde(default)]
    pub gpu_model: String,
    #[serde(default)]
    pub factor: String,
    #[serde(default)]
    pub valid_from: String,
}

pub struct TermRow {
    pub kind: String,
    pub scope: String,
    pub cluster: Option<String>,
    pub gpu_model: String,
    pub factor: String,
    pub valid_from: String,
    pub created_by: String,
    pub created_at: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "admin/reservation_terms.html")]
pub struct ReservationTermsPage {
    pub c: Chrome,
    pub tabs: Vec<Tab>,
    pub rows: Vec<TermRow>,
    /// (value, words) of each scope kind.
    pub kinds: Vec<(&'static str, String)>,
    pub may_write: bool,
    pub form: TermForm,
    pub errors: FieldErrors,
    pub notice: Option<String>,
}

impl ReservationTermsPage {
    pub fn kind_selected(&self, kind: &str) -> &'static str {
        if self.form.scope_kind == kind { "selected" } else { "" }
    }
}

async fn page(
    s: &AppState,
    user: &PageUser,
    lang: Lang,
    form: TermForm,
    errors: FieldErrors,
) -> Result<ReservationTermsPage, PageError> {
    let rows = reservation_terms::list(&s.cases)
        .await?
        .into_iter()
        .map(|r| TermRow {
            kind: glossary::term(lang, &format!("scope_kind.{}", r.scope_kind)),
            scope: r.scope,
            cluster: r.cluster,
            gpu_model: r.gpu_model,
            factor: r.factor.normalize().to_string(),
            valid_from: r.valid_from.to_string(),
            created_by: r.created_by,
            created_at: when(&r.created_at, s.billing_tz),
        })
        .collect();
    let kinds = ScopeKind::ALL.map(|k| (k.as_str(), glossary::term(lang, &format!("scope_kind.{}", k.as_str()))));
    Ok(ReservationTermsPage {
        c: Chrome::new(user, lang, "/admin/teams", t(lang, "admin.reservation_terms")),
        tabs: tabs(user, lang, "/admin/reservation-terms"),
        rows,
        kinds: kinds.to_vec(),
        may_write: crate::web::capability::may_write(user),
        form,
        errors,
        notice: None,
    })
}

#[derive(Debug, Default, Deserialize)]
struct ListQuery {
    saved: Option<String>,
}

async fn list(
    State(s): State<AppState>,
    PageGlobalReader(user): PageGlobalReader,
    PageLang(lang): PageLang,
    Query(q): Query<ListQuery>,
) -> Result<ReservationTermsPage, PageError> {
    let form = TermForm { scope_kind: "cluster_queue".into(), factor: "0.8".into(), ..TermForm::default() };
    let mut p = page(&s, &user, lang, form, FieldErrors::default()).await?;
    if let Some(scope) = q.saved.filter(|q| p.rows.iter().any(|r| &r.scope == q)) {
        p.notice = Some(format!("{} {scope}", t(lang, "admin.saved")));
    }
    Ok(p)
}

/// The form's fields as the use case takes them, or each bad field's message.
fn input(lang: Lang, form: &TermForm) -> Result<ReservationTermInput, FieldErrors> {
    let mut errors = FieldErrors::default();
    let kind = ScopeKind::parse(&form.scope_kind);
    if kind.is_none() {
        errors.push(lang, "scope_kind", "required");
    }
    let factor = match form.factor.trim().parse::<rust_decimal::Decimal>() {
        Ok(f) => Some(f),
        Err(_) => {
            errors.push(lang, "factor", &reservation_terms::FACTOR.describe());
            None
        }
    };
    let valid_from = if form.valid_from.trim().is_empty() {
        errors.push(lang, "valid_from", "required");
        None
    } else {
        crate::validate::lenient_date("valid_from", &form.valid_from)
            .map_err(|e| errors.push(lang, "valid_from", &e.message))
            .ok()
    };
    match (kind, factor, valid_from) {
        (Some(scope_kind), Some(factor), Some(valid_from)) if errors.is_empty() => Ok(ReservationTermInput {
            cluster: blank_none(&form.cluster),
            scope_kind,
            scope: form.scope.trim().to_string(),
            gpu_model: form.gpu_model.clone(),
            factor,
            valid_from,
        }),
        _ => Err(errors),
    }
}

async fn add(
    State(s): State<AppState>,
    PageWriter { user, writer }: PageWriter,
    PageLang(lang): PageLang,
    CsrfForm(form): CsrfForm<TermForm>,
) -> Result<Response, PageError> {
    let errors = match input(lang, &form) {
        Ok(input) => match reservation_terms::create(&s.cases, &writer, &input).await {
            Ok(t) => {
                let q = url::form_urlencoded::Serializer::new(String::new()).append_pair("saved", &t.scope).finish();
                return Ok(Redirect::to(&format!("/admin/reservation-terms?{q}")).into_response());
            }
            Err(e) => FieldErrors::from_refusal(lang, e)?,
        },
        Err(errors) => errors,
    };
    Ok(refused(page(&s, &user, lang, form, errors).await?))
}
