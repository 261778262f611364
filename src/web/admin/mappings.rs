//! `/admin/mappings`: the namespace → team mappings, a form to add one or point one at another team, and the CMDB
//! CSV upload — the API's import (same decoding, parser and decisions) shown as a preview of every row's change
//! before anything is written. "Apply" sends the previewed file back with the digest of what the preview decided,
//! both under an HMAC keyed by a secret the session keeps server-side; the import then runs only if the file is the
//! one previewed and decides exactly the same, else nothing is written.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use tower_sessions::Session;

use super::upload_seal::{Carried, UploadSeal, row_of};
use super::{FieldErrors, Tab, blank_none, refused, tabs};
use crate::access::Scope;
use crate::db::teams::Team;
use crate::usecase::mapping_import::{ImportReport, RowAction};
use crate::usecase::state::AppState;
use crate::usecase::{self, mappings, teams};
use crate::web::capability::{PageGlobalReader, PageWriter};
use crate::web::extract::{CsrfForm, CsrfUpload, PageUser};
use crate::web::fmt::when;
use crate::web::i18n::{Lang, PageLang, t};
use crate::web::layout::{Chrome, PageError};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/mappings", get(list).post(put))
        .route("/admin/mappings/preview", post(preview))
        .route("/admin/mappings/apply", post(apply))
}

/// This page's previews: its own session secret and MAC domain.
const SEAL: UploadSeal = UploadSeal { secret: "mappings-preview", domain: b"cardhour mappings preview\0" };

/// The mapping form as sent (and the list's "change" links, as a query): every field text.
#[derive(Debug, Default, Clone, Deserialize)]
pub struct MappingForm {
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub cluster: String,
    #[serde(default)]
    pub team_id: String,
    #[serde(default)]
    pub valid_from: String,
}

pub struct MappingRow {
    pub namespace: String,
    pub cluster: Option<String>,
    pub team: String,
    pub team_name: String,
    pub valid_from: String,
    pub created_by: String,
    pub created_at: String,
    /// The list's link that fills the form with this mapping.
    pub change: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "admin/mappings.html")]
pub struct MappingsPage {
    pub c: Chrome,
    pub tabs: Vec<Tab>,
    pub rows: Vec<MappingRow>,
    pub teams: Vec<Team>,
    pub may_write: bool,
    pub form: MappingForm,
    pub errors: FieldErrors,
    /// The upload form's message (field `file`).
    pub upload_errors: FieldErrors,
    pub notice: Option<String>,
}

impl MappingsPage {
    pub fn selected(&self, team: &str) -> &'static str {
        if self.form.team_id == team { "selected" } else { "" }
    }
}

fn query(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new()).extend_pairs(pairs).finish()
}

async fn page(
    s: &AppState,
    user: &PageUser,
    lang: Lang,
    form: MappingForm,
    errors: FieldErrors,
    upload_errors: FieldErrors,
) -> Result<MappingsPage, PageError> {
    let all = Scope::all();
    let teams = teams::teams(&s.cases, &all).await?;
    let name = |id: &str| teams.iter().find(|t| t.id == id).map_or_else(String::new, |t| t.name.clone());
    let rows = mappings::mappings(&s.cases, &all)
        .await?
        .into_iter()
        .map(|m| MappingRow {
            change: query(&[
                ("namespace", &m.namespace),
                ("cluster", m.cluster.as_deref().unwrap_or("")),
                ("team_id", &m.team_id),
                ("valid_from", &m.valid_from.to_string()),
            ]),
            team_name: name(&m.team_id),
            namespace: m.namespace,
            cluster: m.cluster,
            team: m.team_id,
            valid_from: m.valid_from.to_string(),
            created_by: m.created_by,
            created_at: when(&m.created_at, s.billing_tz),
        })
        .collect();
    Ok(MappingsPage {
        c: Chrome::new(user, lang, "/admin/teams", t(lang, "admin.mappings")),
        tabs: tabs(user, lang, "/admin/mappings"),
        rows,
        teams,
        may_write: crate::web::capability::may_write(user),
        form,
        errors,
        upload_errors,
        notice: None,
    })
}

/// The list's query: a mapping to fill the form with, or what an import or a save did.
#[derive(Debug, Default, Deserialize)]
struct ListQuery {
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    cluster: String,
    #[serde(default)]
    team_id: String,
    #[serde(default)]
    valid_from: String,
    saved: Option<String>,
    added: Option<String>,
    changed: Option<String>,
    unchanged: Option<String>,
}

async fn list(
    State(s): State<AppState>,
    PageGlobalReader(user): PageGlobalReader,
    PageLang(lang): PageLang,
    Query(q): Query<ListQuery>,
) -> Result<MappingsPage, PageError> {
    let form = MappingForm { namespace: q.namespace, cluster: q.cluster, team_id: q.team_id, valid_from: q.valid_from };
    let mut p = page(&s, &user, lang, form, FieldErrors::default(), FieldErrors::default()).await?;
    let count = |v: &Option<String>| v.as_deref().and_then(|n| n.parse::<usize>().ok());
    if let (Some(a), Some(c), Some(u)) = (count(&q.added), count(&q.changed), count(&q.unchanged)) {
        p.notice = Some(format!(
            "{} {a} {} · {c} {} · {u} {}",
            t(lang, "admin.imported"),
            t(lang, "admin.added"),
            t(lang, "admin.changed"),
            t(lang, "admin.unchanged")
        ));
    } else if let Some(ns) = q.saved.filter(|ns| p.rows.iter().any(|r| &r.namespace == ns)) {
        p.notice = Some(format!("{} {ns}", t(lang, "admin.saved")));
    }
    Ok(p)
}

/// The form's fields as the use case takes them, or each bad field's message.
fn input(lang: Lang, form: &MappingForm) -> Result<mappings::MappingInput, FieldErrors> {
    let mut errors = FieldErrors::default();
    let valid_from = if form.valid_from.trim().is_empty() {
        errors.push(lang, "valid_from", "required");
        None
    } else {
        crate::validate::lenient_date("valid_from", &form.valid_from)
            .map_err(|e| errors.push(lang, "valid_from", &e.message))
            .ok()
    };
    match valid_from {
        Some(valid_from) if errors.is_empty() => Ok(mappings::MappingInput {
            cluster: blank_none(&form.cluster),
            namespace: form.namespace.clone(),
            team_id: form.team_id.clone(),
            valid_from,
        }),
        _ => Err(errors),
    }
}

async fn put(
    State(s): State<AppState>,
    PageWriter { user, writer }: PageWriter,
    PageLang(lang): PageLang,
    CsrfForm(form): CsrfForm<MappingForm>,
) -> Result<Response, PageError> {
    let errors = match input(lang, &form) {
        Ok(input) => match mappings::put_mapping(&s.cases, &writer, &input).await {
            Ok((_, m)) => {
                return Ok(
                    Redirect::to(&format!("/admin/mappings?{}", query(&[("saved", &m.namespace)]))).into_response()
                );
            }
            Err(e) => FieldErrors::from_refusal(lang, e)?,
        },
        Err(errors) => errors,
    };
    Ok(refused(page(&s, &user, lang, form, errors, FieldErrors::default()).await?))
}

/// One row of a preview.
pub struct PreviewRow {
    pub line: usize,
    /// `added`, `changed` or `unchanged` (the badge's class).
    pub class: &'static str,
    pub action: &'static str,
    pub cluster: Option<String>,
    pub namespace: String,
    pub team: String,
    pub previous: Option<String>,
    pub valid_from: String,
    /// A refused row's problem: its field and message.
    pub problem: Option<(String, String)>,
    /// The row's finance codes as one text and what they do (the badge's class and word), where it has codes.
    pub codes: Option<(String, &'static str, &'static str)>,
}

#[derive(Template, WebTemplate)]
#[template(path = "admin/mappings_preview.html")]
pub struct PreviewPage {
    pub c: Chrome,
    pub tabs: Vec<Tab>,
    pub file_name: String,
    pub rows: Vec<PreviewRow>,
    /// Each problem of the file that is no row's: (where, message).
    pub errors: Vec<(String, String)>,
    /// How many problems the file has (rows' included).
    pub problems: usize,
    pub added: usize,
    pub changed: usize,
    pub unchanged: usize,
    pub teams_created: usize,
    /// Versions of teams' finance codes the file sets.
    pub codes_set: usize,
    /// The apply form's fields: only for a file without problems that changes something.
    pub apply: Option<Carried>,
    /// Why an apply was refused (then this is the file's preview as things are now).
    pub message: Option<String>,
}

fn action(lang: Lang, a: RowAction) -> (&'static str, &'static str) {
    let class = match a {
        RowAction::Insert => "added",
        RowAction::Update => "changed",
        RowAction::Unchanged => "unchanged",
    };
    (
        class,
        t(
            lang,
            match class {
                "added" => "admin.added",
                "changed" => "admin.changed",
                _ => "admin.unchanged",
            },
        ),
    )
}

async fn preview_page(
    s: &AppState,
    user: &PageUser,
    key: &str,
    lang: Lang,
    file_name: String,
    bytes: &[u8],
    message: Option<String>,
) -> Result<PreviewPage, PageError> {
    let pv = mappings::preview(&s.cases, bytes).await?;
    let empty = ImportReport {
        dry_run: true,
        inserted: 0,
        updated: 0,
        unchanged: 0,
        teams_created: 0,
        finance_codes_set: 0,
        rows: Vec::new(),
        mappings: Vec::new(),
    };
    let report = pv.report.as_ref().unwrap_or(&empty);
    let applicable = pv.errors.is_empty()
        && pv.report.is_some()
        && report.inserted + report.updated + report.teams_created + report.finance_codes_set > 0;
    let mut rows: Vec<PreviewRow> = report
        .rows
        .iter()
        .map(|r| {
            let codes = r.codes.as_ref().zip(r.finance_codes).map(|(c, a)| {
                let text = c.cells().into_iter().filter(|v| !v.is_empty()).collect::<Vec<_>>().join(" · ");
                let (class, word) = action(lang, a);
                (text, class, word)
            });
            let (class, action) = action(lang, r.action);
            PreviewRow {
                line: r.line,
                class,
                action,
                cluster: r.cluster.clone(),
                namespace: r.namespace.clone(),
                team: r.team.clone(),
                previous: r.previous_team.clone(),
                valid_from: r.valid_from.to_string(),
                problem: None,
                codes,
            }
        })
        .collect();
    // each refused row in its place among the others, the file's own problems above them
    let mut errors = Vec::new();
    for e in &pv.errors {
        let message = super::localize(lang, &e.message);
        match row_of(&e.field) {
            Some((line, field)) => rows.push(PreviewRow {
                line,
                class: "error",
                action: t(lang, "admin.error"),
                cluster: None,
                namespace: String::new(),
                team: String::new(),
                previous: None,
                valid_from: String::new(),
                problem: Some((field, message)),
                codes: None,
            }),
            None => errors.push((e.field.clone(), message)),
        }
    }
    rows.sort_by_key(|r| r.line);
    Ok(PreviewPage {
        c: Chrome::new(user, lang, "/admin/teams", t(lang, "admin.preview_title")),
        tabs: tabs(user, lang, "/admin/mappings"),
        file_name,
        rows,
        errors,
        problems: pv.errors.len(),
        added: report.inserted,
        changed: report.updated,
        unchanged: report.unchanged,
        teams_created: report.teams_created,
        codes_set: report.finance_codes_set,
        apply: applicable.then(|| Carried {
            file: URL_SAFE_NO_PAD.encode(bytes),
            sig: SEAL.sign(key, bytes, &pv.plan),
            plan: pv.plan.clone(),
        }),
        message,
    })
}

async fn preview(
    State(s): State<AppState>,
    PageWriter { user, .. }: PageWriter,
    PageLang(lang): PageLang,
    session: Session,
    upload: CsrfUpload,
) -> Result<Response, PageError> {
    let Some(file) = upload.part("file").filter(|f| !f.bytes.is_empty()) else {
        let mut errors = FieldErrors::default();
        errors.push(lang, "file", "choose a file (CSV) to upload");
        return Ok(refused(page(&s, &user, lang, MappingForm::default(), FieldErrors::default(), errors).await?));
    };
    let name = file.file_name.clone().unwrap_or_default();
    let key = SEAL.key(&session).await?;
    let p = preview_page(&s, &user, &key, lang, name, &file.bytes, None).await?;
    Ok(if p.problems == 0 { p.into_response() } else { refused(p) })
}

/// The apply form as sent.
#[derive(Debug, Default, Deserialize)]
pub struct ApplyForm {
    #[serde(default)]
    pub file: String,
    #[serde(default)]
    pub plan: String,
    #[serde(default)]
    pub sig: String,
    #[serde(default)]
    pub file_name: String,
}

async fn apply(
    State(s): State<AppState>,
    PageWriter { user, writer }: PageWriter,
    PageLang(lang): PageLang,
    session: Session,
    CsrfForm(form): CsrfForm<ApplyForm>,
) -> Result<Response, PageError> {
    let key = SEAL.key(&session).await?;
    let bytes =
        URL_SAFE_NO_PAD.decode(form.file.as_bytes()).ok().filter(|b| SEAL.signed_by(&key, b, &form.plan, &form.sig));
    let Some(bytes) = bytes else {
        let mut errors = FieldErrors::default();
        errors.push(lang, "file", "the previewed file was altered: nothing was imported; upload it again");
        return Ok(refused(page(&s, &user, lang, MappingForm::default(), FieldErrors::default(), errors).await?));
    };
    match mappings::apply_previewed(&s.cases, &writer, &bytes, &form.plan).await {
        Ok(r) => {
            let q = query(&[
                ("added", &r.inserted.to_string()),
                ("changed", &r.updated.to_string()),
                ("unchanged", &r.unchanged.to_string()),
            ]);
            Ok(Redirect::to(&format!("/admin/mappings?{q}")).into_response())
        }
        // stale (or refused rows): the file's preview as things are now, with why, and nothing written
        Err(e @ (usecase::Error::Conflict { .. } | usecase::Error::Invalid(_))) => {
            let message = super::localize(lang, &e.to_string());
            let p = preview_page(&s, &user, &key, lang, form.file_name, &bytes, Some(message)).await?;
            Ok(refused(p))
        }
        Err(e) => Err(e.into()),
    }
}
