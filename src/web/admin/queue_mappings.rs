//! `/admin/queue-mappings`: which team a Kueue ClusterQueue or a Volcano queue belongs to from a date (SPEC §10),
//! the list, a form to add one and a CSV upload — the API's `GET`/`POST /queue-mappings` and
//! `POST /queue-mappings/import`, from the same use case. The upload is previewed (every row's change, every
//! problem) before anything is written, as the namespace mappings' CMDB upload is: "apply" sends the previewed file
//! back with the digest of what the preview decided, both under an HMAC keyed by a secret the session keeps
//! server-side; the import then runs only if the file is the one previewed and decides exactly the same.

use std::sync::LazyLock;

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
use crate::glossary;
use crate::usecase::mapping_import::RowAction;
use crate::usecase::queue_mappings::{self, QueueKind, QueueMappingInput};
use crate::usecase::state::AppState;
use crate::usecase::{self, teams};
use crate::web::capability::{PageGlobalReader, PageWriter};
use crate::web::extract::{CsrfForm, CsrfUpload, PageUser};
use crate::web::fmt::when;
use crate::web::i18n::{Lang, PageLang, t};
use crate::web::layout::{Chrome, PageError};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/queue-mappings", get(list).post(add))
        .route("/admin/queue-mappings/preview", post(preview))
        .route("/admin/queue-mappings/apply", post(apply))
}

/// This page's previews: its own session secret and MAC domain.
const SEAL: UploadSeal = UploadSeal { secret: "queue-mappings-preview", domain: b"cardhour queue mappings preview\0" };

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
    /// The upload form's message (field `file`).
    pub upload_errors: FieldErrors,
    pub notice: Option<String>,
    /// An uploaded file's preview: then the page is that, and neither the forms nor the list.
    pub preview: Option<Preview>,
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
    upload_errors: FieldErrors,
) -> Result<QueueMappingsPage, PageError> {
    let all = Scope::all();
    let teams = teams::teams(&s.cases, &all).await?;
    let name = |id: &str| teams.iter().find(|t| t.id == id).map_or_else(String::new, |t| t.name.clone());
    let rows = queue_mappings::queue_mappings(&s.cases, &all)
        .await?
        .into_iter()
        .map(|m| QueueRow {
            kind: kind_word(lang, &m.queue_kind),
            team_name: name(&m.team_id),
            queue: m.queue,
            cluster: m.cluster,
            team: m.team_id,
            valid_from: m.valid_from.to_string(),
            created_by: m.created_by,
            created_at: when(&m.created_at, s.billing_tz),
        })
        .collect();
    let kinds = [QueueKind::ClusterQueue, QueueKind::VolcanoQueue].map(|k| (k.as_str(), kind_word(lang, k.as_str())));
    Ok(QueueMappingsPage {
        c: Chrome::new(user, lang, "/admin/teams", t(lang, "admin.queue_mappings")),
        tabs: tabs(user, lang, "/admin/queue-mappings"),
        rows,
        teams,
        kinds: kinds.to_vec(),
        may_write: crate::web::capability::may_write(user),
        form,
        errors,
        upload_errors,
        notice: None,
        preview: None,
    })
}

/// A queue kind's words (`cluster_queue` → Kueue 集群队列).
fn kind_word(lang: Lang, kind: &str) -> String {
    glossary::term(lang, &format!("scope_kind.{kind}"))
}

/// The list's query: what a save or an import did.
#[derive(Debug, Default, Deserialize)]
struct ListQuery {
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
) -> Result<QueueMappingsPage, PageError> {
    let form = QueueForm { queue_kind: QueueKind::ClusterQueue.as_str().into(), ..QueueForm::default() };
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
    } else if let Some(queue) = q.saved.filter(|q| p.rows.iter().any(|r| &r.queue == q)) {
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
    Ok(refused(page(&s, &user, lang, form, errors, FieldErrors::default()).await?))
}

/// One row of a preview.
pub struct PreviewRow {
    pub line: usize,
    /// `added`, `changed`, `unchanged` or `error` (the badge's class).
    pub class: &'static str,
    pub action: &'static str,
    /// The queue kind's words.
    pub kind: String,
    pub queue: String,
    pub cluster: Option<String>,
    pub team: String,
    pub previous: Option<String>,
    pub valid_from: String,
    /// A refused row's problem: its field and message.
    pub problem: Option<(String, String)>,
}

/// An uploaded file as the import would take it.
pub struct Preview {
    pub file_name: String,
    pub rows: Vec<PreviewRow>,
    /// Each problem of the file that is no row's: (where, message).
    pub errors: Vec<(String, String)>,
    /// How many problems the file has (rows' included).
    pub problems: usize,
    pub added: usize,
    pub changed: usize,
    pub unchanged: usize,
    /// The apply form's fields: only for a file without problems that changes something.
    pub apply: Option<Carried>,
    /// Why an apply was refused (then this is the file's preview as things are now).
    pub message: Option<String>,
}

fn action(lang: Lang, a: RowAction) -> (&'static str, &'static str) {
    match a {
        RowAction::Insert => ("added", t(lang, "admin.added")),
        RowAction::Update => ("changed", t(lang, "admin.changed")),
        RowAction::Unchanged => ("unchanged", t(lang, "admin.unchanged")),
    }
}

/// A problem's message in the page's language: this import's own rules here, the rules it shares with the
/// namespace import (dates, names, teams, the file) in `super::localize`.
fn localize(lang: Lang, message: &str) -> String {
    static ZH: LazyLock<Vec<(regex::Regex, &'static str)>> = LazyLock::new(|| {
        [
            (
                r"^`(.*)` is not a queue kind",
                "`$1` 不是队列类型：请用 cluster_queue（Kueue 集群队列）或 volcano_queue（Volcano 队列）",
            ),
            (r"^unknown cluster `([^`]*)`", "集群 `$1` 不存在（留空为所有集群）"),
            (r"^missing column `([^`]*)`", "缺少列 `$1`（表头为 queue_kind,queue,team,valid_from，可选 cluster）"),
            (r"^queue (\S+) was mapped from (\S+) concurrently", "队列 $1 自 $2 起的归属刚被同时写入；请重新导入"),
            (r"^CSV ", "此行无法按 CSV 读取（列数与表头不同，或引号不成对）"),
        ]
        .into_iter()
        .filter_map(|(re, zh)| regex::Regex::new(re).ok().map(|r| (r, zh)))
        .collect()
    });
    if lang == Lang::En {
        return message.to_string();
    }
    ZH.iter()
        .find_map(|(re, zh)| {
            re.captures(message).map(|c| {
                let mut out = String::new();
                c.expand(zh, &mut out);
                out
            })
        })
        .unwrap_or_else(|| super::localize(lang, message))
}

/// The page of a file's preview: the import's dry run of its good rows and every problem, each at its line.
async fn preview_page(
    s: &AppState,
    user: &PageUser,
    key: &str,
    lang: Lang,
    file_name: String,
    bytes: &[u8],
    message: Option<String>,
) -> Result<QueueMappingsPage, PageError> {
    let pv = queue_mappings::preview(&s.cases, bytes).await?;
    let (added, changed, unchanged) = pv.report.as_ref().map_or((0, 0, 0), |r| (r.inserted, r.updated, r.unchanged));
    let applicable = pv.errors.is_empty() && added + changed > 0;
    let mut rows: Vec<PreviewRow> = pv
        .report
        .iter()
        .flat_map(|r| &r.rows)
        .map(|r| {
            let (class, action) = action(lang, r.action);
            PreviewRow {
                line: r.line,
                class,
                action,
                kind: kind_word(lang, &r.queue_kind),
                queue: r.queue.clone(),
                cluster: r.cluster.clone(),
                team: r.team.clone(),
                previous: r.previous_team.clone(),
                valid_from: r.valid_from.to_string(),
                problem: None,
            }
        })
        .collect();
    // each refused row in its place among the others, the file's own problems above them
    let mut errors = Vec::new();
    for e in &pv.errors {
        let message = localize(lang, &e.message);
        match row_of(&e.field) {
            Some((line, field)) => rows.push(PreviewRow {
                line,
                class: "error",
                action: t(lang, "admin.error"),
                kind: String::new(),
                queue: String::new(),
                cluster: None,
                team: String::new(),
                previous: None,
                valid_from: String::new(),
                problem: Some((field, message)),
            }),
            None => errors.push((e.field.clone(), message)),
        }
    }
    rows.sort_by_key(|r| r.line);
    let preview = Preview {
        file_name,
        rows,
        errors,
        problems: pv.errors.len(),
        added,
        changed,
        unchanged,
        apply: applicable.then(|| Carried {
            file: URL_SAFE_NO_PAD.encode(bytes),
            sig: SEAL.sign(key, bytes, &pv.plan),
            plan: pv.plan.clone(),
        }),
        message,
    };
    Ok(QueueMappingsPage {
        c: Chrome::new(user, lang, "/admin/teams", t(lang, "admin.preview_title")),
        tabs: tabs(user, lang, "/admin/queue-mappings"),
        rows: Vec::new(),
        teams: Vec::new(),
        kinds: Vec::new(),
        may_write: crate::web::capability::may_write(user),
        form: QueueForm::default(),
        errors: FieldErrors::default(),
        upload_errors: FieldErrors::default(),
        notice: None,
        preview: Some(preview),
    })
}

/// The list page with the upload form's message: no file, or one altered on its way back.
async fn upload_refused(s: &AppState, user: &PageUser, lang: Lang, message: &str) -> Result<Response, PageError> {
    let mut errors = FieldErrors::default();
    errors.push(lang, "file", message);
    let form = QueueForm { queue_kind: QueueKind::ClusterQueue.as_str().into(), ..QueueForm::default() };
    Ok(refused(page(s, user, lang, form, FieldErrors::default(), errors).await?))
}

async fn preview(
    State(s): State<AppState>,
    PageWriter { user, .. }: PageWriter,
    PageLang(lang): PageLang,
    session: Session,
    upload: CsrfUpload,
) -> Result<Response, PageError> {
    let Some(file) = upload.part("file").filter(|f| !f.bytes.is_empty()) else {
        return upload_refused(&s, &user, lang, "choose a file (CSV) to upload").await;
    };
    let name = file.file_name.clone().unwrap_or_default();
    let key = SEAL.key(&session).await?;
    let p = preview_page(&s, &user, &key, lang, name, &file.bytes, None).await?;
    let clean = p.preview.as_ref().is_some_and(|pv| pv.problems == 0);
    Ok(if clean { p.into_response() } else { refused(p) })
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
        return upload_refused(
            &s,
            &user,
            lang,
            "the previewed file was altered: nothing was imported; upload it again",
        )
        .await;
    };
    match queue_mappings::apply_previewed(&s.cases, &writer, &bytes, &form.plan).await {
        Ok(r) => {
            let q = url::form_urlencoded::Serializer::new(String::new())
                .append_pair("added", &r.inserted.to_string())
                .append_pair("changed", &r.updated.to_string())
                .append_pair("unchanged", &r.unchanged.to_string())
                .finish();
            Ok(Redirect::to(&format!("/admin/queue-mappings?{q}")).into_response())
        }
        // stale (or refused rows): the file's preview as things are now, with why, and nothing written
        Err(e @ (usecase::Error::Conflict { .. } | usecase::Error::Invalid(_))) => {
            let message = match &e {
                usecase::Error::Conflict { message, .. } => localize(lang, message),
                _ => t(lang, "admin.cannot_apply").to_string(),
            };
            let p = preview_page(&s, &user, &key, lang, form.file_name, &bytes, Some(message)).await?;
            Ok(refused(p))
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_are_placed_and_said_in_chinese() {
        assert_eq!(row_of("row 3: queue_kind"), Some((3, "queue_kind".to_string())));
        assert_eq!(row_of("body"), None);
        for message in [
            "`kueue` is not a queue kind: use cluster_queue or volcano_queue",
            "unknown cluster `c9` (leave it blank for every cluster)",
            "missing column `team` (the header is queue_kind,queue,team,valid_from and optional cluster)",
            "unknown team `nope`",
            "`2026-13-01` is not a date (2026-11-01, 2026/11/01, 2026/11/1 or 20261101)",
            "maps cq-a from 2026-11-01 to nlp, row 2 to vision",
            "the mappings changed since the preview: nothing was imported; upload the file again",
            "CSV deserialize error: record 2 (line: 3, byte: 40): found record with 3 fields",
        ] {
            let zh = localize(Lang::Zh, message);
            assert_ne!(zh, message, "{message}");
            assert_eq!(localize(Lang::En, message), message);
        }
    }
}
