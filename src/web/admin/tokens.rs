//! `/admin/tokens` (admin): the API tokens (holder, role, teams, created, expiry, last use, revoked), issuing one
//! — its secret is on the answer to the form and nowhere else: not stored, not logged, never shown again — and
//! revoking one. The command line's use cases, audited alike.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::HeaderValue;
use axum::http::header::CACHE_CONTROL;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::{FieldErrors, ROLES, Tab, refused, role_word, tabs, team_list};
use crate::access::Role;
use crate::usecase::state::AppState;
use crate::usecase::{self, tokens};
use crate::web::capability::PageAdmin;
use crate::web::extract::{CsrfForm, PageUser};
use crate::web::fmt::when;
use crate::web::i18n::{Lang, PageLang, t};
use crate::web::layout::{Chrome, PageError};

pub fn routes() -> Router<AppState> {
    Router::new().route("/admin/tokens", get(list).post(create)).route("/admin/tokens/{id}/revoke", post(revoke))
}

/// The new-token form as sent: every field text (`teams` comma-separated, `expires` a day or blank).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct TokenForm {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub role: String,
    #[serde(default)]
    pub teams: String,
    #[serde(default)]
    pub expires: String,
}

pub struct TokenRow {
    pub id: i64,
    pub name: String,
    pub role: String,
    pub teams: String,
    pub created: String,
    pub expires: Option<String>,
    pub expired: bool,
    pub last_used: Option<String>,
    pub revoked: Option<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "admin/tokens.html")]
pub struct TokensPage {
    pub c: Chrome,
    pub tabs: Vec<Tab>,
    pub tokens: Vec<TokenRow>,
    pub roles: Vec<(&'static str, String)>,
    pub form: TokenForm,
    pub errors: FieldErrors,
    pub notice: Option<String>,
    /// The token just issued: its id and secret (only on the answer to the form that issued it).
    pub issued: Option<(i64, String)>,
}

impl TokensPage {
    pub fn selected(&self, role: &str) -> &'static str {
        if self.form.role == role { "selected" } else { "" }
    }
}

async fn page(
    s: &AppState,
    user: &PageUser,
    lang: Lang,
    form: TokenForm,
    errors: FieldErrors,
) -> Result<TokensPage, PageError> {
    let (tz, now) = (s.billing_tz, Utc::now());
    let at = |t: &DateTime<Utc>| when(t, tz);
    let tokens = tokens::list(&s.cases)
        .await?
        .into_iter()
        .rev()
        .map(|k| TokenRow {
            id: k.id,
            role: role_word(lang, &k.role),
            teams: k.teams.join(", "),
            created: at(&k.created_at),
            expired: k.expires_at.is_some_and(|e| e <= now),
            expires: k.expires_at.as_ref().map(at),
            last_used: k.last_used_at.as_ref().map(at),
            revoked: k.revoked_at.as_ref().map(at),
            name: k.name,
        })
        .collect();
    Ok(TokensPage {
        c: Chrome::new(user, lang, "/admin/teams", t(lang, "admin.tokens")),
        tabs: tabs(user, lang, "/admin/tokens"),
        tokens,
        roles: ROLES.iter().map(|r| (*r, role_word(lang, r))).collect(),
        form,
        errors,
        notice: None,
        issued: None,
    })
}

#[derive(Debug, Default, Deserialize)]
struct NoticeQuery {
    revoked: Option<String>,
}

async fn list(
    State(s): State<AppState>,
    PageAdmin { user, .. }: PageAdmin,
    PageLang(lang): PageLang,
    Query(q): Query<NoticeQuery>,
) -> Result<TokensPage, PageError> {
    let mut p = page(&s, &user, lang, TokenForm::default(), FieldErrors::default()).await?;
    p.notice = q
        .revoked
        .and_then(|id| id.parse::<i64>().ok())
        .filter(|id| p.tokens.iter().any(|k| k.id == *id && k.revoked.is_some()))
        .map(|id| format!("{} {} #{id}", t(lang, "admin.revoked"), t(lang, "admin.tokens")));
    Ok(p)
}

/// The form's fields as the use case takes them, or each bad field's message. A day of expiry is refused from
/// its midnight in the billing time zone.
fn request(lang: Lang, form: &TokenForm, tz: chrono_tz::Tz) -> Result<tokens::TokenRequest, FieldErrors> {
    let mut errors = FieldErrors::default();
    let role = Role::parse(form.role.trim());
    if role.is_none() {
        errors.push(lang, "role", "not a role: admin, finance, viewer or team_lead");
    }
    let expires_at = match form.expires.trim() {
        "" => None,
        day => crate::validate::lenient_date("expires_at", day)
            .map_err(|e| errors.push(lang, "expires_at", &e.message))
            .ok()
            .map(|d| crate::billing::month::start_of_day(tz, d)),
    };
    match role {
        Some(role) if errors.is_empty() => {
            Ok(tokens::TokenRequest { name: form.name.clone(), role, teams: team_list(&form.teams), expires_at })
        }
        _ => Err(errors),
    }
}

async fn create(
    State(s): State<AppState>,
    PageAdmin { user, admin }: PageAdmin,
    PageLang(lang): PageLang,
    CsrfForm(form): CsrfForm<TokenForm>,
) -> Result<Response, PageError> {
    let errors = match request(lang, &form, s.billing_tz) {
        Ok(req) => match tokens::create(&s.cases, &admin, &req).await {
            Ok(issued) => {
                let mut p = page(&s, &user, lang, TokenForm::default(), FieldErrors::default()).await?;
                p.issued = Some((issued.id, issued.secret));
                let mut r = p.into_response();
                // the one answer holding the secret: kept by no cache
                r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
                return Ok(r);
            }
            Err(e) => FieldErrors::from_refusal(lang, e)?,
        },
        Err(errors) => errors,
    };
    Ok(refused(page(&s, &user, lang, form, errors).await?))
}

#[derive(Debug, Default, Deserialize)]
pub struct NoFields {}

async fn revoke(
    State(s): State<AppState>,
    PageAdmin { admin, .. }: PageAdmin,
    Path(id): Path<String>,
    CsrfForm(_): CsrfForm<NoFields>,
) -> Result<Response, PageError> {
    let id: i64 = id.parse().map_err(|_| PageError::NotFound)?;
    match tokens::revoke(&s.cases, &admin, id).await {
        Ok(()) => Ok(Redirect::to(&format!("/admin/tokens?revoked={id}")).into_response()),
        // unknown or revoked already: no such active token
        Err(usecase::Error::NotFoundField { .. }) => Err(PageError::NotFound),
        Err(e) => Err(e.into()),
    }
}
