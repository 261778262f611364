//! `/admin/audit`: the audit log, newest first, a page at a time (`?before=<id>`: the entries older than it) —
//! the API's `GET /audit` use case, for the same readers (everyone but a team lead).

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::routing::get;
use serde::Deserialize;

use super::{Tab, tabs};
use crate::usecase::audit;
use crate::usecase::state::AppState;
use crate::web::capability::PageGlobalReader;
use crate::web::fmt::when;
use crate::web::i18n::{PageLang, t};
use crate::web::layout::{Chrome, PageError};

/// Entries per page.
pub const PAGE: usize = 50;

pub fn routes() -> Router<AppState> {
    Router::new().route("/admin/audit", get(list))
}

pub struct EntryRow {
    pub id: i64,
    pub at: String,
    pub actor: String,
    pub action: String,
    pub entity: String,
    pub before: String,
    pub after: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "admin/audit.html")]
pub struct AuditPage {
    pub c: Chrome,
    pub tabs: Vec<Tab>,
    pub entries: Vec<EntryRow>,
    /// The link to the next (older) page, when there is one.
    pub older: Option<i64>,
    /// Whether this is a later page (then it links back to the newest).
    pub paged: bool,
}

#[derive(Debug, Default, Deserialize)]
struct AuditQuery {
    before: Option<String>,
}

fn json(v: Option<serde_json::Value>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

async fn list(
    State(s): State<AppState>,
    PageGlobalReader(user): PageGlobalReader,
    PageLang(lang): PageLang,
    Query(q): Query<AuditQuery>,
) -> Result<AuditPage, PageError> {
    // a cursor that is no id is no page
    let before = match q.before.as_deref().map(str::trim).filter(|b| !b.is_empty()) {
        Some(b) => Some(b.parse::<i64>().map_err(|_| PageError::NotFound)?),
        None => None,
    };
    let mut rows = audit::entries(&s.cases, &user.principal.scope(), PAGE as i64 + 1, before).await?;
    let more = rows.len() > PAGE;
    rows.truncate(PAGE);
    Ok(AuditPage {
        c: Chrome::new(&user, lang, "/admin/teams", t(lang, "admin.audit")),
        tabs: tabs(&user, lang, "/admin/audit"),
        older: if more { rows.last().map(|e| e.id) } else { None },
        paged: before.is_some(),
        entries: rows
            .into_iter()
            .map(|e| EntryRow {
                id: e.id,
                at: when(&e.at, s.billing_tz),
                actor: e.actor,
                action: e.action,
                entity: e.entity,
                before: json(e.before),
                after: json(e.after),
            })
            .collect(),
    })
}
