//! `/admin/close-events`: where the signed close event goes (the endpoints: add, deactivate) and each event's
//! deliveries — state, attempts, last answer, next try — the API's `/close-endpoints` and `/close-events` from the
//! same use case (SPEC §11).

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::{FieldErrors, Tab, refused, tabs};
use crate::glossary;
use crate::usecase::close_events::{self, EndpointInput};
use crate::usecase::state::AppState;
use crate::usecase::{self};
use crate::web::capability::{PageGlobalReader, PageWriter};
use crate::web::extract::{CsrfForm, PageUser};
use crate::web::fmt::when;
use crate::web::i18n::{Lang, PageLang, t};
use crate::web::layout::{Chrome, PageError};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/close-events", get(list).post(add))
        .route("/admin/close-events/endpoints/{id}/deactivate", post(deactivate))
}

/// The form as sent.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct EndpointForm {
    #[serde(default)]
    pub url: String,
    #[serde(default)]
    pub secret: String,
}

pub struct EndpointRow {
    pub id: i64,
    pub url: String,
    pub secret: String,
    pub active: bool,
    pub created_by: String,
    pub created_at: String,
}

pub struct DeliveryRow {
    pub url: String,
    /// `delivered`, `retrying`, `pending`, `inactive` (a class of the badge).
    pub state: &'static str,
    pub state_words: String,
    pub attempts: i32,
    /// The last answer in the reader's words: the HTTP status, or that none came.
    pub last_answer: String,
    /// The last error as the HTTP client told it (a tooltip: it is the client's, in English).
    pub last_error: String,
    pub next_attempt: String,
    pub delivered_at: String,
    /// Every POST: time and answer.
    pub log: Vec<String>,
}

pub struct EventRow {
    pub id: String,
    pub month: String,
    pub created_at: String,
    pub deliveries: Vec<DeliveryRow>,
}

#[derive(Template, WebTemplate)]
#[template(path = "admin/close_events.html")]
pub struct CloseEventsPage {
    pub c: Chrome,
    pub tabs: Vec<Tab>,
    pub endpoints: Vec<EndpointRow>,
    pub events: Vec<EventRow>,
    pub may_write: bool,
    pub form: EndpointForm,
    pub errors: FieldErrors,
    pub notice: Option<String>,
}

/// An answer in the reader's words: its HTTP status, or that none came (the client's own error text, English,
/// goes in a tooltip).
fn answer(lang: Lang, status: Option<i32>, error: Option<&str>) -> String {
    match (status, error) {
        (Some(s), _) => format!("HTTP {s}"),
        (None, Some(_)) => glossary::term(lang, "close_delivery.no_answer"),
        (None, None) => "—".into(),
    }
}

async fn page(
    s: &AppState,
    user: &PageUser,
    lang: Lang,
    form: EndpointForm,
    errors: FieldErrors,
) -> Result<CloseEventsPage, PageError> {
    let scope = user.principal.scope();
    let tz = s.billing_tz;
    let endpoints = close_events::endpoints(&s.cases, &scope)
        .await?
        .into_iter()
        .map(|e| EndpointRow {
            id: e.id,
            url: e.url,
            secret: e.secret,
            active: e.active,
            created_by: e.created_by,
            created_at: when(&e.created_at, tz),
        })
        .collect();
    let events = close_events::events(&s.cases, &scope, 100)
        .await?
        .into_iter()
        .map(|e| EventRow {
            id: e.id,
            month: e.month,
            created_at: when(&e.created_at, tz),
            deliveries: e
                .deliveries
                .into_iter()
                .map(|d| DeliveryRow {
                    state: d.state.as_str(),
                    state_words: glossary::term(lang, &format!("close_delivery.{}", d.state.as_str())),
                    url: d.url,
                    attempts: d.attempts,
                    last_answer: answer(lang, d.last_status, d.last_error.as_deref()),
                    last_error: d.last_error.clone().unwrap_or_default(),
                    next_attempt: d.next_attempt_at.map_or_else(|| "—".into(), |at| when(&at, tz)),
                    delivered_at: d.delivered_at.map_or_else(|| "—".into(), |at| when(&at, tz)),
                    log: d
                        .attempt_log
                        .iter()
                        .map(|a| format!("{} {}", when(&a.at, tz), answer(lang, a.status, a.error.as_deref())))
                        .collect(),
                })
                .collect(),
        })
        .collect();
    Ok(CloseEventsPage {
        c: Chrome::new(user, lang, "/admin/teams", t(lang, "admin.close_events")),
        tabs: tabs(user, lang, "/admin/close-events"),
        endpoints,
        events,
        may_write: crate::web::capability::may_write(user),
        form,
        errors,
        notice: None,
    })
}

#[derive(Debug, Default, Deserialize)]
struct ListQuery {
    saved: Option<i64>,
    deactivated: Option<i64>,
}

async fn list(
    State(s): State<AppState>,
    PageGlobalReader(user): PageGlobalReader,
    PageLang(lang): PageLang,
    Query(q): Query<ListQuery>,
) -> Result<CloseEventsPage, PageError> {
    let mut p = page(&s, &user, lang, EndpointForm::default(), FieldErrors::default()).await?;
    if let Some(id) = q.saved.filter(|id| p.endpoints.iter().any(|e| e.id == *id)) {
        p.notice = Some(format!("{} #{id}", t(lang, "admin.saved")));
    } else if let Some(id) = q.deactivated.filter(|id| p.endpoints.iter().any(|e| e.id == *id && !e.active)) {
        p.notice = Some(format!("{} #{id}", t(lang, "admin.close_endpoint_deactivated")));
    }
    Ok(p)
}

async fn add(
    State(s): State<AppState>,
    PageWriter { user, writer }: PageWriter,
    PageLang(lang): PageLang,
    CsrfForm(form): CsrfForm<EndpointForm>,
) -> Result<Response, PageError> {
    let input = EndpointInput { url: form.url.trim().to_string(), secret: form.secret.clone() };
    let errors = match close_events::create(&s.cases, &writer, &input).await {
        Ok(e) => return Ok(Redirect::to(&format!("/admin/close-events?saved={}", e.id)).into_response()),
        Err(e) => FieldErrors::from_refusal(lang, e)?,
    };
    // the secret is not sent back in the page
    let form = EndpointForm { secret: String::new(), ..form };
    Ok(refused(page(&s, &user, lang, form, errors).await?))
}

#[derive(Debug, Default, Deserialize)]
pub struct NoFields {}

async fn deactivate(
    State(s): State<AppState>,
    PageWriter { writer, .. }: PageWriter,
    Path(id): Path<String>,
    CsrfForm(_): CsrfForm<NoFields>,
) -> Result<Response, PageError> {
    let id: i64 = id.parse().map_err(|_| PageError::NotFound)?;
    match close_events::deactivate(&s.cases, &writer, id).await {
        Ok(_) => Ok(Redirect::to(&format!("/admin/close-events?deactivated={id}")).into_response()),
        Err(usecase::Error::NotFound(_)) => Err(PageError::NotFound),
        Err(e) => Err(e.into()),
    }
}
