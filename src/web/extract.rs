//! Who is looking at a page: the signed-in user of the portal's session ([`PageUser`]), and the forms that carry
//! the session's CSRF token ([`CsrfForm`]). The pages take these as the API's handlers take the bearer
//! extractors; the roles and the scope are the same ([`Principal::scope`]).
//!
//! The user is read from the database on every request (by the id the session holds), so disabling a user or
//! changing its role or teams takes effect at its next request, not when its session expires.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::de::DeserializeOwned;
use tower_sessions::Session;

use crate::access::Principal;
use crate::auth::session;
use crate::usecase::state::AppState;

/// The signed-in user of a page request. A request without a valid session is sent to `/login`.
#[derive(Debug, Clone)]
pub struct PageUser {
    pub principal: Principal,
    /// The login name shown in the header.
    pub username: String,
    /// The session's CSRF token: every form a page renders carries it in a hidden field named `csrf`.
    pub csrf: String,
    /// The query string the page was asked with (without `?`; empty for none): links back to the same page keep
    /// it (the language switch).
    pub query: String,
}

/// Why a page request was refused before its handler ran.
#[derive(Debug)]
pub enum PageRejection {
    /// Not signed in: to the login page, then back.
    Login { next: String },
    /// A form without the session's CSRF token.
    Csrf,
    /// A form that could not be read.
    BadForm(String),
    /// SSO mode, a request without the proxy's user header: it did not come through the proxy's sign-in.
    ProxyOnly,
    /// SSO mode, a user header the portal does not believe: sent from an address that is not the proxy's, or
    /// naming no one user (logged when it happens).
    ProxyRefused,
    /// SSO mode, a user the proxy signed in whose groups grant no role here.
    NoRole,
    /// The session or the user could not be read (logged; the page says only that it failed).
    Internal(String),
}

/// A plain page in both languages for the refusals that happen before any page (no user to frame it for).
fn plain(status: StatusCode, title: &str, en: &str, zh: &str) -> Response {
    let html = format!("<!doctype html><meta charset=utf-8><title>{title}</title><h1>{title}</h1><p>{en}<p>{zh}");
    let mut r = (status, Html(html)).into_response();
    r.headers_mut().insert(axum::http::header::CACHE_CONTROL, axum::http::HeaderValue::from_static("no-store"));
    r
}

impl IntoResponse for PageRejection {
    fn into_response(self) -> Response {
        match self {
            Self::Login { next } => Redirect::to(&format!(
                "/login?next={}",
                url::form_urlencoded::byte_serialize(next.as_bytes()).collect::<String>()
            ))
            .into_response(),
            Self::Csrf => (
                StatusCode::FORBIDDEN,
                Html(
                    "<!doctype html><meta charset=utf-8><title>403</title><h1>403</h1>\
                     <p>The form's security token is missing or stale. Go back, reload the page and send it again.\
                     <p>表单的安全令牌缺失或已过期，请返回并刷新页面后重新提交。",
                ),
            )
                .into_response(),
            Self::BadForm(m) => (StatusCode::BAD_REQUEST, m).into_response(),
            Self::ProxyOnly => plain(
                StatusCode::UNAUTHORIZED,
                "401",
                "This portal signs you in through single sign-on: open it at the address of the sign-on proxy.",
                "本系统通过单点登录进入，请从单点登录代理的地址访问。",
            ),
            Self::ProxyRefused => plain(
                StatusCode::FORBIDDEN,
                "403",
                "The sign-on headers of this request are not accepted: it did not come from the sign-on proxy.",
                "此请求的单点登录信息不被接受：它并非来自单点登录代理。",
            ),
            Self::NoRole => plain(
                StatusCode::FORBIDDEN,
                "403",
                "You are signed in, but none of your groups gives access to cardhour. Ask an administrator to map \
                 one of your groups to a role.",
                "您已登录，但您所在的组都没有本系统的访问权限。请联系管理员为您的组配置角色。",
            ),
            Self::Internal(detail) => {
                tracing::error!("page request failed: {detail}");
                (StatusCode::INTERNAL_SERVER_ERROR, Html("<!doctype html><title>500</title><h1>500</h1>"))
                    .into_response()
            }
        }
    }
}

/// The session the session layer put on the request.
pub(crate) fn session_of(parts: &Parts) -> Result<Session, PageRejection> {
    parts.extensions.get::<Session>().cloned().ok_or_else(|| PageRejection::Internal("no session layer".into()))
}

/// The request's query string, empty when it has none.
pub(crate) fn query_of(parts: &Parts) -> String {
    parts.uri.query().unwrap_or("").to_string()
}

fn internal(e: impl std::fmt::Display) -> PageRejection {
    PageRejection::Internal(e.to_string())
}

impl FromRequestParts<AppState> for PageUser {
    type Rejection = PageRejection;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        if let Some(sso) = &state.sso {
            return proxy_user(parts, sso).await;
        }
        let next = parts.uri.path_and_query().map(|p| p.as_str().to_string()).unwrap_or_else(|| "/".into());
        let login = || PageRejection::Login { next: next.clone() };
        let session = session_of(parts)?;
        let Some(id) = session::user_id(&session).await.map_err(internal)? else { return Err(login()) };
        match crate::usecase::users::session_user(&state.cases, id).await.map_err(internal)? {
            Some((user, principal)) => {
                let csrf = session::csrf_token(&session).await.map_err(internal)?;
                Ok(PageUser { principal, username: user.username, csrf, query: query_of(parts) })
            }
            None => {
                // disabled or deleted since signing in: the session ends here
                session::sign_out(&session).await.map_err(internal)?;
                Err(login())
            }
        }
    }
}

/// The user the authenticating proxy names (SSO mode), its role and teams from its groups on this very request,
/// its session bound to it (for the CSRF token).
async fn proxy_user(parts: &Parts, sso: &crate::auth::ProxyConfig) -> Result<PageUser, PageRejection> {
    use crate::auth::proxy::Identity;
    let peer = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip());
    let principal = match sso.identify(peer, &parts.headers) {
        Identity::User(p) => p,
        Identity::NoRole { user } => {
            tracing::info!(user = %user.escape_debug(), "SSO user without a role: none of its groups is mapped");
            return Err(PageRejection::NoRole);
        }
        Identity::Anonymous => return Err(PageRejection::ProxyOnly),
        Identity::Untrusted => {
            let peer = peer.map_or_else(|| "unknown".to_string(), |p| p.to_string());
            tracing::warn!(%peer, header = %sso.user_header, "SSO user header from an address that is not a trusted proxy: refused");
            return Err(PageRejection::ProxyRefused);
        }
        Identity::Malformed => {
            tracing::warn!(header = %sso.user_header, "SSO user header from the proxy names no one user: refused");
            return Err(PageRejection::ProxyRefused);
        }
    };
    let session = session_of(parts)?;
    session::bind_proxy_user(&session, &principal.name).await.map_err(internal)?;
    let csrf = session::csrf_token(&session).await.map_err(internal)?;
    Ok(PageUser { username: principal.name.clone(), principal, csrf, query: query_of(parts) })
}

/// An `application/x-www-form-urlencoded` form whose `csrf` field matches the session's token; the other fields
/// are read into `T` (which ignores `csrf`).
pub struct CsrfForm<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequest<AppState> for CsrfForm<T> {
    type Rejection = PageRejection;

    async fn from_request(req: Request, _state: &AppState) -> Result<Self, Self::Rejection> {
        let (parts, sent, rest) = read_form(req).await?;
        let session = session_of(&parts)?;
        if !session::csrf_matches(&session, &sent).await.map_err(internal)? {
            return Err(PageRejection::Csrf);
        }
        serde_urlencoded::from_str(&rest).map(CsrfForm).map_err(|e| PageRejection::BadForm(e.to_string()))
    }
}

/// The login form: as [`CsrfForm`], but its `csrf` field must match the visitor's [`session::LoginToken`] cookie
/// (an anonymous visitor has no session, and gets none before signing in).
pub struct LoginCsrfForm<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequest<AppState> for LoginCsrfForm<T> {
    type Rejection = PageRejection;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let (parts, sent, rest) = read_form(req).await?;
        let token = session::LoginToken::from_headers(&parts.headers, state.portal.session.secure);
        if !token.is_some_and(|t| t.matches(&sent)) {
            return Err(PageRejection::Csrf);
        }
        serde_urlencoded::from_str(&rest).map(LoginCsrfForm).map_err(|e| PageRejection::BadForm(e.to_string()))
    }
}

/// A urlencoded form's request parts, its one `csrf` value and its other fields (encoded again).
async fn read_form(req: Request) -> Result<(Parts, String, String), PageRejection> {
    let (parts, body) = req.into_parts();
    let urlencoded = parts.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| {
        v.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/x-www-form-urlencoded"))
    });
    if !urlencoded {
        return Err(PageRejection::BadForm("expected a form (application/x-www-form-urlencoded)".into()));
    }
    let body = axum::body::to_bytes(body, crate::usecase::state::BODY_LIMIT).await.map_err(|e| {
        PageRejection::BadForm(format!(
            "the form could not be read (at most {} bytes): {e}",
            crate::usecase::state::BODY_LIMIT
        ))
    })?;
    let (sent, rest) = split_csrf(&body)?;
    Ok((parts, sent, rest))
}

/// One part of a `multipart/form-data` form other than `csrf`: its name, the file name sent with it, its bytes.
#[derive(Debug, Clone)]
pub struct UploadPart {
    pub name: String,
    pub file_name: Option<String>,
    pub bytes: Bytes,
}

/// A `multipart/form-data` form (a file upload) whose one `csrf` part matches the session's token; its other
/// parts in order. The body is bounded by the application's body limit.
pub struct CsrfUpload(pub Vec<UploadPart>);

impl CsrfUpload {
    /// The first part named `name`.
    pub fn part(&self, name: &str) -> Option<&UploadPart> {
        self.0.iter().find(|p| p.name == name)
    }
}

impl FromRequest<AppState> for CsrfUpload {
    type Rejection = PageRejection;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let (parts, body) = req.into_parts();
        let session = session_of(&parts)?;
        let bad = |e: axum::extract::multipart::MultipartError| PageRejection::BadForm(e.body_text());
        let mut form = axum::extract::Multipart::from_request(Request::from_parts(parts, body), state)
            .await
            .map_err(|e| PageRejection::BadForm(e.body_text()))?;
        let (mut csrf, mut rest) = (Vec::new(), Vec::new());
        while let Some(field) = form.next_field().await.map_err(bad)? {
            let name = field.name().unwrap_or_default().to_string();
            let file_name = field.file_name().map(str::to_string);
            let bytes = field.bytes().await.map_err(bad)?;
            if name == "csrf" {
                csrf.push(String::from_utf8_lossy(&bytes).into_owned());
            } else {
                rest.push(UploadPart { name, file_name, bytes });
            }
        }
        // none reads as an empty token; two are a forged form
        let [sent] = &csrf[..] else { return Err(PageRejection::Csrf) };
        if !session::csrf_matches(&session, sent).await.map_err(internal)? {
            return Err(PageRejection::Csrf);
        }
        Ok(CsrfUpload(rest))
    }
}

/// The one `csrf` value of a form body and the body without it (encoded again, so `T` never sees the field even
/// if it denies unknown ones). No `csrf` reads as an empty one; two are refused as a forged form.
fn split_csrf(body: &[u8]) -> Result<(String, String), PageRejection> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_bytes(body).map_err(|e| PageRejection::BadForm(e.to_string()))?;
    let (csrf, rest): (Vec<_>, Vec<_>) = pairs.into_iter().partition(|(k, _)| k == "csrf");
    if csrf.len() > 1 {
        return Err(PageRejection::Csrf);
    }
    let sent = csrf.into_iter().next().map(|(_, v)| v).unwrap_or_default();
    let rest = serde_urlencoded::to_string(&rest).map_err(|e| PageRejection::BadForm(e.to_string()))?;
    Ok((sent, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_csrf_field_is_taken_out_of_the_form() {
        let (csrf, rest) = split_csrf(b"username=a%20b&csrf=t0k&password=p%26w").unwrap();
        assert_eq!(csrf, "t0k");
        assert_eq!(rest, "username=a+b&password=p%26w");
        let (csrf, rest) = split_csrf(b"x=1").unwrap();
        assert_eq!((csrf.as_str(), rest.as_str()), ("", "x=1"));
        assert!(matches!(split_csrf(b"csrf=a&csrf=b"), Err(PageRejection::Csrf)));
    }
}
