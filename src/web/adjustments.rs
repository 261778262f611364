//! The adjustments page (SPEC §11, maker-checker): every adjustment of the teams the reader sees, of a month or of
//! all — pending, approved (and the statement it is on), rejected; finance and admin enter one with a reason and
//! decide those someone else entered ([`usecase::adjustments`], the API's `/adjustments`). A team lead reads its own
//! teams' only; a POST from anyone but a writer gets the not-found page before its form is read.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::capability::PageWriter;
use super::field_errors::{self as fields, FieldErrors};
use super::fmt::{when, yuan};
use super::i18n::{Lang, PageLang, t};
use super::layout::{Chrome, PageError};
use crate::billing::Month;
use crate::ledger::{Adjustment, AdjustmentStatus};
use crate::usecase::adjustments::{self, AdjustmentInput, DecisionInput};
use crate::usecase::state::AppState;
use crate::usecase::{self};
use crate::web::extract::{CsrfForm, PageUser};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/adjustments", get(page).post(enter))
        .route("/adjustments/{id}/approve", post(approve))
        .route("/adjustments/{id}/reject", post(reject))
}

/// The entry form as typed.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct AdjustmentForm {
    #[serde(default)]
    pub month: String,
    #[serde(default)]
    pub team: String,
    #[serde(default)]
    pub amount: String,
    #[serde(default)]
    pub reason: String,
}

/// A decision as sent.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct DecisionForm {
    #[serde(default)]
    pub note: String,
    /// The month the page showed (to return to it).
    #[serde(default)]
    pub back: String,
}

/// One adjustment as the page shows it.
pub struct Row {
    pub id: i64,
    pub line_id: String,
    pub month: String,
    pub team: String,
    pub amount: String,
    pub reason: String,
    /// `pending`, `approved`, `rejected` (the badge's class).
    pub status: &'static str,
    pub status_words: &'static str,
    pub entered: String,
    pub decided: String,
    pub note: String,
    pub booked: String,
    /// The reader may decide it: a writer, pending, entered by someone else.
    pub decidable: bool,
}

#[derive(Template, WebTemplate)]
#[template(path = "adjustments.html")]
pub struct AdjustmentsPage {
    pub c: Chrome,
    /// The month shown (empty: every month).
    pub month: String,
    pub rows: Vec<Row>,
    /// The teams the form offers (writers only: `None` is no form).
    pub teams: Option<Vec<(String, String)>>,
    pub form: AdjustmentForm,
    pub errors: FieldErrors,
    pub notice: Option<String>,
}

impl AdjustmentsPage {
    pub fn error(&self, field: &str) -> Option<String> {
        self.errors.message(self.c.lang, field)
    }

    pub fn selected(&self, team: &str) -> &'static str {
        if self.form.team == team { "selected" } else { "" }
    }
}

#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    month: Option<String>,
    #[serde(default)]
    entered: Option<i64>,
    #[serde(default)]
    approved: Option<i64>,
    #[serde(default)]
    rejected: Option<i64>,
}

fn status_words(s: AdjustmentStatus) -> &'static str {
    match s {
        AdjustmentStatus::Pending => "adjustments.pending",
        AdjustmentStatus::Approved => "adjustments.approved",
        AdjustmentStatus::Rejected => "adjustments.rejected",
    }
}

fn row(a: Adjustment, lang: Lang, tz: chrono_tz::Tz, reader: Option<&str>) -> Row {
    let name = |actor: &str| crate::export::present::actor_name(actor).to_string();
    Row {
        id: a.id,
        line_id: a.line_id(),
        month: a.month.to_string(),
        team: a.team.clone(),
        amount: yuan(a.amount),
        reason: a.reason.clone(),
        status: a.status.as_str(),
        status_words: t(lang, status_words(a.status)),
        entered: format!("{} · {}", name(&a.entered_by), when(&a.entered_at, tz)),
        decided: match (&a.decided_by, a.decided_at) {
            (Some(by), Some(at)) => format!("{} · {}", name(by), when(&at, tz)),
            _ => "—".into(),
        },
        note: a.decision_note.clone().unwrap_or_default(),
        booked: a.booked_month.map_or_else(|| "—".into(), |m| m.to_string()),
        decidable: a.status == AdjustmentStatus::Pending
            && reader.is_some_and(|r| crate::ledger::adjustment::may_decide(&a.entered_by, r)),
    }
}

/// The page of `month` (or every month) for `user`, with `form` and `errors` in its form (a writer's only).
async fn render(
    s: &AppState,
    user: &PageUser,
    lang: Lang,
    month: Option<Month>,
    form: AdjustmentForm,
    errors: FieldErrors,
    notice: Option<String>,
) -> Result<AdjustmentsPage, PageError> {
    let scope = user.principal.scope();
    let list = adjustments::list(&s.cases, &scope, month, None, crate::validate::PAGE_MAX).await?;
    let writer = crate::access::Writer::of(&user.principal);
    let reader = writer.as_ref().map(crate::access::Writer::actor);
    let rows = list.into_iter().map(|a| row(a, lang, s.billing_tz, reader.as_deref())).collect();
    let teams = match writer {
        Some(_) => {
            Some(usecase::teams::teams(&s.cases, &scope).await?.into_iter().map(|t| (t.id, t.name)).collect::<Vec<_>>())
        }
        None => None,
    };
    let shown = month.map(|m| m.to_string()).unwrap_or_default();
    let form = AdjustmentForm { month: if form.month.is_empty() { shown.clone() } else { form.month }, ..form };
    let title = match month {
        Some(m) => format!("{} · {m}", t(lang, "adjustments.title")),
        None => t(lang, "adjustments.title").to_string(),
    };
    Ok(AdjustmentsPage {
        c: Chrome::new(user, lang, "/adjustments", title),
        month: shown,
        rows,
        teams,
        form,
        errors,
        notice,
    })
}

async fn page(
    State(s): State<AppState>,
    user: PageUser,
    PageLang(lang): PageLang,
    Query(q): Query<ListQuery>,
) -> Result<Response, PageError> {
    let mut errors = FieldErrors::default();
    let month = match q.month.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(m) => match fields::month(&mut errors, "month", m) {
            Some(m) => Some(m),
            None => {
                let page = render(&s, &user, lang, None, AdjustmentForm::default(), errors, None).await?;
                return Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response());
            }
        },
    };
    let notice = match (q.entered, q.approved, q.rejected) {
        (Some(id), ..) => Some(format!("ADJ-{id} {}", t(lang, "adjustments.entered"))),
        (_, Some(id), _) => Some(format!("ADJ-{id} {}", t(lang, "adjustments.done_approved"))),
        (.., Some(id)) => Some(format!("ADJ-{id} {}", t(lang, "adjustments.done_rejected"))),
        _ => None,
    };
    Ok(render(&s, &user, lang, month, AdjustmentForm::default(), errors, notice).await?.into_response())
}

async fn enter(
    State(s): State<AppState>,
    PageWriter { user, writer }: PageWriter,
    PageLang(lang): PageLang,
    CsrfForm(form): CsrfForm<AdjustmentForm>,
) -> Result<Response, PageError> {
    // a form's fields as typed, around them what a hand leaves (the API takes them as written)
    let input = AdjustmentInput {
        month: form.month.trim().to_string(),
        team: form.team.trim().to_string(),
        amount: form.amount.trim().replace([',', '，', ' '], ""),
        reason: form.reason.clone(),
    };
    let errors = match adjustments::enter(&s.cases, &writer, &input).await {
        Ok(a) => return Ok(Redirect::to(&format!("/adjustments?month={}&entered={}", a.month, a.id)).into_response()),
        Err(usecase::Error::NotFoundField { field, message }) => {
            let mut errors = FieldErrors::default();
            errors.add(&field, fields::Problem::UnknownTeam, message);
            errors
        }
        Err(e) => FieldErrors::from_usecase(e, "")?,
    };
    let month = form.month.trim().parse().ok();
    let page = render(&s, &user, lang, month, form, errors, None).await?;
    Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
}

async fn approve(
    s: State<AppState>,
    w: PageWriter,
    l: PageLang,
    id: Path<String>,
    f: CsrfForm<DecisionForm>,
) -> Result<Response, PageError> {
    decide(s, w, l, id, f, AdjustmentStatus::Approved).await
}

async fn reject(
    s: State<AppState>,
    w: PageWriter,
    l: PageLang,
    id: Path<String>,
    f: CsrfForm<DecisionForm>,
) -> Result<Response, PageError> {
    decide(s, w, l, id, f, AdjustmentStatus::Rejected).await
}

async fn decide(
    State(s): State<AppState>,
    PageWriter { user, writer }: PageWriter,
    PageLang(lang): PageLang,
    Path(id): Path<String>,
    CsrfForm(form): CsrfForm<DecisionForm>,
    status: AdjustmentStatus,
) -> Result<Response, PageError> {
    let id: i64 = id.parse().map_err(|_| PageError::NotFound)?;
    let back: Option<Month> = form.back.trim().parse().ok();
    let input = DecisionInput { note: Some(form.note.clone()) };
    let done = match status {
        AdjustmentStatus::Approved => adjustments::approve(&s.cases, &writer, id, &input).await,
        _ => adjustments::reject(&s.cases, &writer, id, &input).await,
    };
    let month = back.map(|m| format!("month={m}&")).unwrap_or_default();
    match done {
        Ok(a) => Ok(Redirect::to(&format!("/adjustments?{month}{}={}", a.status.as_str(), a.id)).into_response()),
        // the maker, or a decision made meanwhile: the page again, saying which
        Err(usecase::Error::Conflict { message, .. }) => {
            let key = if message.contains("entered by you") {
                "adjustments.own"
            } else if message.contains("try again") {
                "adjustments.retry"
            } else {
                "adjustments.decided_already"
            };
            let notice = Some(format!("ADJ-{id}: {}", t(lang, key)));
            let page = render(&s, &user, lang, back, AdjustmentForm::default(), FieldErrors::default(), notice).await?;
            Ok((StatusCode::CONFLICT, page).into_response())
        }
        // the only field of a decision: its note, said in the notice (the row's form has no room for a message)
        Err(usecase::Error::Invalid(e)) => {
            let errors = FieldErrors(e);
            let why = errors.message(lang, "note").unwrap_or_default();
            let notice = Some(format!("ADJ-{id}: {}{why}", t(lang, "adjustments.note_invalid")));
            let page = render(&s, &user, lang, back, AdjustmentForm::default(), FieldErrors::default(), notice).await?;
            Ok((StatusCode::UNPROCESSABLE_ENTITY, page).into_response())
        }
        Err(e) => Err(e.into()),
    }
}
