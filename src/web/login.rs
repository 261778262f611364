//! The login and logout pages: a form of `username` and `password` (with its CSRF token) at `/login`, and
//! `POST /logout`. A wrong name or password gets the form back (401) with one message that does not say which
//! was wrong; too many failures get it with 429 and `Retry-After` (the rule: [`usecase::users::THROTTLE_WINDOW`]);
//! a login moves the visitor to a new session id and on to `next` (a local path) or `/`. An anonymous visitor gets
//! no session: the form's CSRF token is a double-submit cookie ([`session::LoginToken`]), and the session is made
//! at sign-in.
//!
//! In SSO mode ([`crate::auth::proxy`]) the proxy signs users in: `/login` goes on to `next` (the proxy has signed
//! the visitor in already, or will), the form is not taken, and logging out ends the portal's session and goes to
//! the proxy's sign-out address when one is configured.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use axum::Extension;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, HeaderValue, RETRY_AFTER, SET_COOKIE};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use tower_sessions::Session;

use crate::auth::session::{self, local_next};
use crate::usecase;
use crate::usecase::state::AppState;
use crate::usecase::users::Login;
use crate::web::extract::{CsrfForm, LoginCsrfForm, PageRejection};

/// `/login` and `/logout`; in SSO mode the login page only goes on, and there is no form to post.
pub fn routes(sso: bool) -> Router<AppState> {
    let login_page = if sso { get(form) } else { get(form).post(login) };
    Router::new().route("/login", login_page).route("/logout", post(logout))
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

async fn form(
    State(st): State<AppState>,
    headers: HeaderMap,
    session: Session,
    Query(q): Query<NextQuery>,
) -> Response {
    let next = local_next(q.next.as_deref()).to_string();
    if st.sso.is_some() {
        return Redirect::to(&next).into_response();
    }
    // reading a session that was never made stores nothing
    let signed_in = match session::user_id(&session).await {
        Ok(Some(id)) => match usecase::users::session_user(&st.cases, id).await {
            Ok(found) => found.map(|(u, _)| u.username),
            Err(e) => return internal(e),
        },
        Ok(None) => None,
        Err(e) => return internal(e),
    };
    let secure = st.portal.session.secure;
    match signed_in {
        // the page offers to sign out: that form carries the session's token
        Some(name) => match session::csrf_token(&session).await {
            Ok(csrf) => no_store(
                StatusCode::OK,
                LoginPage { csrf, next, username: String::new(), error: None, signed_in: Some(name) },
            ),
            Err(e) => internal(e),
        },
        None => {
            let (token, new) = session::LoginToken::from_headers_or_new(&headers, secure);
            let page = LoginPage {
                csrf: token.as_str().to_string(),
                next,
                username: String::new(),
                error: None,
                signed_in: None,
            };
            with_token(no_store(StatusCode::OK, page), new.then_some(&token), secure)
        }
    }
}

/// Sets the login token's cookie on `r` when it is new.
fn with_token(mut r: Response, token: Option<&session::LoginToken>, secure: bool) -> Response {
    if let Some(t) = token {
        r.headers_mut().append(SET_COOKIE, t.set_cookie(secure));
    }
    r
}

#[derive(Deserialize)]
struct LoginForm {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    next: Option<String>,
}

/// The client's address: the socket's peer (`serve` records it per connection); unknown when served without it.
fn peer(connect: Option<Extension<ConnectInfo<SocketAddr>>>) -> IpAddr {
    connect.map_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED), |Extension(ConnectInfo(a))| a.ip())
}

async fn login(
    State(st): State<AppState>,
    connect: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    session: Session,
    LoginCsrfForm(f): LoginCsrfForm<LoginForm>,
) -> Response {
    let next = local_next(f.next.as_deref()).to_string();
    let name = f.username.trim();
    let secure = st.portal.session.secure;
    let (status, message, retry_after) = match usecase::users::login(&st.cases, name, &f.password, peer(connect)).await
    {
        Ok(Login::Ok(user)) => {
            return match session::sign_in(&session, user.id).await {
                Ok(()) => {
                    let mut r = Redirect::to(&next).into_response();
                    // the session's own token takes over from here
                    r.headers_mut().append(SET_COOKIE, session::LoginToken::clear_cookie(secure));
                    r
                }
                Err(e) => internal(e),
            };
        }
        Ok(Login::Refused) => (StatusCode::UNAUTHORIZED, WRONG.to_string(), None),
        Ok(Login::Throttled { retry_after_secs }) => {
            let minutes = (retry_after_secs + 59) / 60;
            let message = format!(
                "登录失败次数过多，请 {minutes} 分钟后再试。Too many failed logins: try again in {minutes} minute(s)."
            );
            (StatusCode::TOO_MANY_REQUESTS, message, Some(retry_after_secs))
        }
        Err(e) => return internal(e),
    };
    // the form again, under the token it was sent with (the extractor checked the cookie holds it)
    let (token, new) = session::LoginToken::from_headers_or_new(&headers, secure);
    let page = LoginPage {
        csrf: token.as_str().to_string(),
        next,
        username: name.chars().take(64).collect(),
        error: Some(message),
        signed_in: None,
    };
    let mut r = with_token(no_store(status, page), new.then_some(&token), secure);
    if let Some(secs) = retry_after {
        r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    r
}

#[derive(Deserialize)]
struct LogoutForm {}

async fn logout(
    State(st): State<AppState>,
    session: Session,
    CsrfForm(LogoutForm {}): CsrfForm<LogoutForm>,
) -> Response {
    let to = match &st.sso {
        // without the proxy's sign-out the next page signs the same user in again: the proxy's session decides
        Some(sso) => sso.sign_out_url.as_deref().unwrap_or("/"),
        None => "/login",
    };
    match session::sign_out(&session).await {
        Ok(()) => Redirect::to(to).into_response(),
        Err(e) => internal(e),
    }
}
