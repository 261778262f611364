//! `/admin/users` (admin): the portal's users (name, role, teams, disabled), creating one, disabling one, and
//! `/admin/users/{name}/password` to set a new password — which signs that user out of every other session. The
//! command line's use cases, audited alike.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use tower_sessions::Session;

use super::{FieldErrors, ROLES, Tab, refused, role_word, tabs, team_list};
use crate::access::Role;
use crate::db::users::User;
use crate::usecase::state::AppState;
use crate::usecase::{self, users};
use crate::web::capability::PageAdmin;
use crate::web::extract::{CsrfForm, PageUser};
use crate::web::fmt::when;
use crate::web::i18n::{Lang, PageLang, t};
use crate::web::layout::{Chrome, PageError};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/users", get(list).post(create))
        .route("/admin/users/{name}/disable", post(disable))
        .route("/admin/users/{name}/password", get(password_page).post(set_password))
}

/// The new-user form as sent: every field text (`teams` comma-separated).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct UserForm {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub role: String,
    #[serde(default)]
    pub teams: String,
    #[serde(default)]
    pub password: String,
}

pub struct UserRow {
    pub username: String,
    pub role: String,
    pub teams: String,
    pub disabled: Option<String>,
    pub created: String,
    pub last_login: Option<String>,
    /// The signed-in admin's own row (it cannot disable itself).
    pub me: bool,
}

#[derive(Template, WebTemplate)]
#[template(path = "admin/users.html")]
pub struct UsersPage {
    pub c: Chrome,
    pub tabs: Vec<Tab>,
    pub users: Vec<UserRow>,
    pub roles: Vec<(&'static str, String)>,
    pub form: UserForm,
    pub errors: FieldErrors,
    pub notice: Option<String>,
}

impl UsersPage {
    pub fn selected(&self, role: &str) -> &'static str {
        if self.form.role == role { "selected" } else { "" }
    }
}

async fn page(
    s: &AppState,
    user: &PageUser,
    lang: Lang,
    form: UserForm,
    errors: FieldErrors,
) -> Result<UsersPage, PageError> {
    let tz = s.billing_tz;
    let logins = users::last_logins(&s.cases).await?;
    let users = users::list(&s.cases)
        .await?
        .into_iter()
        .map(|u| UserRow {
            me: u.username == user.username,
            role: role_word(lang, &u.role),
            teams: u.teams.join(", "),
            disabled: u.disabled_at.map(|d| when(&d, tz)),
            created: when(&u.created_at, tz),
            last_login: logins.get(&u.id).map(|t| when(t, tz)),
            username: u.username,
        })
        .collect();
    Ok(UsersPage {
        c: Chrome::new(user, lang, "/admin/teams", t(lang, "admin.users")),
        tabs: tabs(user, lang, "/admin/users"),
        users,
        roles: ROLES.iter().map(|r| (*r, role_word(lang, r))).collect(),
        form,
        errors,
        notice: None,
    })
}

#[derive(Debug, Default, Deserialize)]
struct NoticeQuery {
    created: Option<String>,
    disabled: Option<String>,
    password: Option<String>,
}

async fn list(
    State(s): State<AppState>,
    PageAdmin { user, .. }: PageAdmin,
    PageLang(lang): PageLang,
    Query(q): Query<NoticeQuery>,
) -> Result<UsersPage, PageError> {
    let mut p = page(&s, &user, lang, UserForm::default(), FieldErrors::default()).await?;
    let known = |n: Option<String>| n.filter(|n| p.users.iter().any(|u| &u.username == n));
    p.notice = known(q.created)
        .map(|n| format!("{} {n}", t(lang, "admin.saved")))
        .or_else(|| {
            known(q.disabled).map(|n| format!("{} {n} · {}", t(lang, "admin.saved"), t(lang, "admin.disabled")))
        })
        .or_else(|| known(q.password).map(|n| format!("{} {n}", t(lang, "admin.password_set"))));
    Ok(p)
}

async fn create(
    State(s): State<AppState>,
    PageAdmin { user, admin }: PageAdmin,
    PageLang(lang): PageLang,
    CsrfForm(mut form): CsrfForm<UserForm>,
) -> Result<Response, PageError> {
    let pw = std::mem::take(&mut form.password);
    let errors = match Role::parse(form.role.trim()) {
        None => {
            let mut e = FieldErrors::default();
            e.push(lang, "role", "not a role: admin, finance, viewer or team_lead");
            e
        }
        Some(role) => {
            let teams = team_list(&form.teams);
            match users::create(&s.cases, &admin, form.username.trim(), role, &teams, &pw).await {
                Ok(u) => return Ok(Redirect::to(&format!("/admin/users?created={}", u.username)).into_response()),
                Err(e) => FieldErrors::from_refusal(lang, e)?,
            }
        }
    };
    // the password is never sent back
    Ok(refused(page(&s, &user, lang, form, errors).await?))
}

/// User `name` of a path, when there is one (a path that names nobody names no page).
async fn existing(s: &AppState, name: &str) -> Result<User, PageError> {
    users::list(&s.cases).await?.into_iter().find(|u| u.username == name).ok_or(PageError::NotFound)
}

#[derive(Debug, Default, Deserialize)]
pub struct NoFields {}

async fn disable(
    State(s): State<AppState>,
    PageAdmin { user, admin }: PageAdmin,
    PageLang(lang): PageLang,
    Path(name): Path<String>,
    CsrfForm(_): CsrfForm<NoFields>,
) -> Result<Response, PageError> {
    let target = existing(&s, &name).await?;
    if target.username == user.username {
        let mut errors = FieldErrors::default();
        errors.push(lang, "disable", "you cannot disable yourself");
        return Ok(refused(page(&s, &user, lang, UserForm::default(), errors).await?));
    }
    match users::disable(&s.cases, &admin, &target.username).await {
        Ok(u) => Ok(Redirect::to(&format!("/admin/users?disabled={}", u.username)).into_response()),
        Err(usecase::Error::NotFoundField { .. }) => Err(PageError::NotFound),
        Err(e) => Err(e.into()),
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "admin/user_password.html")]
pub struct PasswordPage {
    pub c: Chrome,
    pub tabs: Vec<Tab>,
    pub username: String,
    pub errors: FieldErrors,
}

fn password_form(user: &PageUser, lang: Lang, username: String, errors: FieldErrors) -> PasswordPage {
    PasswordPage {
        c: Chrome::new(user, lang, "/admin/teams", format!("{} · {username}", t(lang, "admin.set_password"))),
        tabs: tabs(user, lang, "/admin/users"),
        username,
        errors,
    }
}

async fn password_page(
    State(s): State<AppState>,
    PageAdmin { user, .. }: PageAdmin,
    PageLang(lang): PageLang,
    Path(name): Path<String>,
) -> Result<PasswordPage, PageError> {
    let target = existing(&s, &name).await?;
    Ok(password_form(&user, lang, target.username, FieldErrors::default()))
}

#[derive(Debug, Default, Deserialize)]
pub struct PasswordForm {
    #[serde(default)]
    pub password: String,
}

async fn set_password(
    State(s): State<AppState>,
    PageAdmin { user, admin }: PageAdmin,
    PageLang(lang): PageLang,
    session: Session,
    Path(name): Path<String>,
    CsrfForm(form): CsrfForm<PasswordForm>,
) -> Result<Response, PageError> {
    let target = existing(&s, &name).await?;
    // the session setting it stays; every other session of the user ends
    let keep = session.id();
    match users::set_password(&s.cases, &admin, &target.username, &form.password, keep.as_ref()).await {
        Ok(u) => Ok(Redirect::to(&format!("/admin/users?password={}", u.username)).into_response()),
        Err(usecase::Error::NotFoundField { .. }) => Err(PageError::NotFound),
        Err(e) => {
            let errors = FieldErrors::from_refusal(lang, e)?;
            Ok(refused(password_form(&user, lang, target.username, errors)))
        }
    }
}
