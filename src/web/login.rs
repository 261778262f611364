//! The login and logout pages: a form of `username` and `password` (with its CSRF token) at `/login`, and
//! `POST /logout`. A wrong name or password gets the form back (401) with one message that does not say which
//! was wrong; a login moves the visitor to a new session id and on to `next` (a local path) or `/`.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use tower_sessions::Session;

use crate::auth::{CsrfForm, PageRejection, local_next, session};
use crate::state::AppState;
use crate::usecase;

/// `/login` and `/logout`.
pub fn routes() -> Router<AppState> {
    Router::new().route("/login", get(form).post(login)).route("/logout", post(logout))
}

#[derive(Template, WebTemplate)]
#[template(path = "login.html")]
struct LoginPage {
    csrf: String,
    next: String,
    username: String,
    error: Option<String>,
    /// Who is signed in already (the page then offers to continue or sign out).
    signed_in: Option<String>,
}

const WRONG: &str = "用户名或密码错误。Wrong username or password.";

#[derive(Deserialize)]
struct NextQuery {
    next: Option<String>,
}

fn internal(e: impl std::fmt::Display) -> Response {
    PageRejection::Internal(e.to_string()).into_response()
}

/// A login page is never cached (it holds the session's CSRF token).
fn no_store(status: StatusCode, page: LoginPage) -> Response {
    let mut r = (status, page).into_response();
    r.headers_mut().insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn form(State(st): State<AppState>, session: Session, Query(q): Query<NextQuery>) -> Response {
    let next = local_next(q.next.as_deref()).to_string();
    let csrf = match session::csrf_token(&session).await {
        Ok(t) => t,
        Err(e) => return internal(e),
    };
    let signed_in = match session::user_id(&session).await {
        Ok(Some(id)) => match usecase::users::session_user(&st.cases, id).await {
            Ok(found) => found.map(|(u, _)| u.username),
            Err(e) => return internal(e),
        },
        Ok(None) => None,
        Err(e) => return internal(e),
    };
    no_store(StatusCode::OK, LoginPage { csrf, next, username: String::new(), error: None, signed_in })
}

#[derive(Deserialize)]
struct LoginForm {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    next: Option<String>,
}

async fn login(State(st): State<AppState>, session: Session, CsrfForm(f): CsrfForm<LoginForm>) -> Response {
    let next = local_next(f.next.as_deref()).to_string();
    let name = f.username.trim();
    match usecase::users::check_login(&st.cases, name, &f.password).await {
        Ok(Some(user)) => match session::sign_in(&session, user.id).await {
            Ok(()) => Redirect::to(&next).into_response(),
            Err(e) => internal(e),
        },
        Ok(None) => {
            let csrf = match session::csrf_token(&session).await {
                Ok(t) => t,
                Err(e) => return internal(e),
            };
            let page = LoginPage {
                csrf,
                next,
                username: name.chars().take(64).collect(),
                error: Some(WRONG.into()),
                signed_in: None,
            };
            no_store(StatusCode::UNAUTHORIZED, page)
        }
        Err(e) => internal(e),
    }
}

#[derive(Deserialize)]
struct LogoutForm {}

async fn logout(session: Session, CsrfForm(LogoutForm {}): CsrfForm<LogoutForm>) -> Response {
    match session::sign_out(&session).await {
        Ok(()) => Redirect::to("/login").into_response(),
        Err(e) => internal(e),
    }
}
