//! `/admin/queue-mappings`: which team a Kueue ClusterQueue or a Volcano queue belongs to from a date (SPEC §10),
//! the list and a form to add one — the API's `GET`/`POST /queue-mappings`, from the same use case.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Deserialize;

use super::{FieldErrors, Tab, blank_none, refused, tabs};
use crate::access::Scope;
use crate::db::teams::Team;
use crate::glossary;
use crate::usecase::queue_mappings::{self, QueueKind, QueueMappingInput};
use crate::usecase::state::AppState;
use crate::usecase::teams;
use crate::web::capability::{PageGlobalReader, PageWriter};
use crate::web::extract::{CsrfForm, PageUser};
use crate::web::fmt::when;
use crate::web::i18n::{Lang, PageLang, t};
use crate::web::layout::{Chrome, PageError};

pub fn routes() -> Router<AppState> {
    Router::new().route("/admin/queue-mappings", get(list).post(add))
}

/// The form as sent: every field text.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct QueueForm {
    #[serde(default)]
    pub queue_kind: String,
    #[serde(default)]
    pub queue: String,
    #[serde(default)]
    pub cluster: String,
    #[serde(default)]
    pub team_id: String,
    #[serde(default)]
    pub valid_from: String,
}

pub struct QueueRow {
    pub kind: String,
    pub queue: String,
    pub cluster: Option<String>,
    pub team: String,
    pub team_name: String,
    pub valid_from: String,
    pub created_by: String,
    pub created_at: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "admin/queue_mappings.html")]
pub struct QueueMappingsPage {
    pub c: Chrome,
    pub tabs: Vec<Tab>,
    pub rows: Vec<QueueRow>,
    pub teams: Vec<Team>,
    /// (value, words) of each queue kind.
    pub kinds: Vec<(&'static str, String)>,
    pub may_write: bool,
    pub form: QueueForm,
    pub errors: FieldErrors,
    pub notice: Option<String>,
}

impl QueueMappingsPage {
    pub fn selected(&self, team: &str) -> &'static str {
        if self.form.team_id == team { "selected" } else { "" }
    }

    pub fn kind_selected(&self, kind: &str) -> &'static str {
        if self.form.queue_kind == kind { "selected" } else { "" }
    }
}

async fn page(
    s: &AppState,
    user: &PageUser,
    lang: Lang,
    form: QueueForm,
    errors: FieldErrors,
) -> Result<QueueMappingsPage, PageError> {
    let all = Scope::all();
    let teams = teams::teams(&s.cases, &all).await?;
    let name = |id: &str| teams.iter().find(|t| t.id == id).map_or_else(String::new, |t| t.name.clone());
    let kind_word = |k: &str| glossary::term(lang, &format!("scope_kind.{k}"));
    let rows = queue_mappings::queue_mappings(&s.cases, &all)
        .await?
        .into_iter()
        .map(|m| QueueRow {
            kind: kind_word(&m.queue_kind),
            team_name: name(&m.team_id),
            queue: m.queue,
            cluster: m.cluster,
            team: m.team_id,
            valid_from: m.valid_from.to_string(),
            created_by: m.created_by,
            created_at: when(&m.created_at, s.billing_tz),
        })
        .collect();
    let kinds = [QueueKind::ClusterQueue, QueueKind::VolcanoQueue].map(|k| (k.as_str(), kind_word(k.as_str())));
    Ok(QueueMappingsPage {
        c: Chrome::new(user, lang, "/admin/teams", t(lang, "admin.queue_mappings")),
        tabs: tabs(user, lang, "/admin/queue-mappings"),
        rows,
        teams,
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
) -> Result<QueueMappingsPage, PageError> {
    let form = QueueForm { queue_kind: QueueKind::ClusterQueue.as_str().into(), ..QueueForm::default() };
    let mut p = page(&s, &user, lang, form, FieldErrors::default()).await?;
    if let Some(queue) = q.saved.filter(|q| p.rows.iter().any(|r| &r.queue == q)) {
        p.notice = Some(format!("{} {queue}", t(lang, "admin.saved")));
    }
    Ok(p)
}

/// The form's fields as the use case takes them, or each bad field's message.
fn input(lang: Lang, form: &QueueForm) -> Result<QueueMappingInput, FieldErrors> {
    let mut errors = FieldErrors::default();
    let kind = match form.queue_kind.as_str() {
        "cluster_queue" => Some(QueueKind::ClusterQueue),
        "volcano_queue" => Some(QueueKind::VolcanoQueue),
        _ => {
            errors.push(lang, "queue_kind", "required");
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
    match (kind, valid_from) {
        (Some(queue_kind), Some(valid_from)) if errors.is_empty() => Ok(QueueMappingInput {
            cluster: blank_none(&form.cluster),
            queue_kind,
            queue: form.queue.clone(),
            team_id: form.team_id.clone(),
            valid_from,
        }),
        _ => Err(errors),
    }
}

async fn add(
    State(s): State<AppState>,
    PageWriter { user, writer }: PageWriter,
    PageLang(lang): PageLang,
    CsrfForm(form): CsrfForm<QueueForm>,
) -> Result<Response, PageError> {
    let errors = match input(lang, &form) {
        Ok(input) => match queue_mappings::create_queue_mapping(&s.cases, &writer, &input).await {
            Ok(m) => {
                let q = url::form_urlencoded::Serializer::new(String::new()).append_pair("saved", &m.queue).finish();
                return Ok(Redirect::to(&format!("/admin/queue-mappings?{q}")).into_response());
            }
            Err(e) => FieldErrors::from_refusal(lang, e)?,
        },
        Err(errors) => errors,
    };
    Ok(refused(page(&s, &user, lang, form, errors).await?))
}
