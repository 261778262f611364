//! The portal's session: what it holds (the signed-in user's id, the CSRF token, when it was last seen), how the
//! cookie is set (HttpOnly, SameSite=Lax, Secure when configured) and how long it lives without a request.
//!
//! Sessions are rows of `portal_sessions` ([`crate::db::sessions`]), so every instance behind a load
//! balancer sees the same ones and a restart signs nobody out. A session is made only once something needs
//! storing — at sign-in — never for an anonymous visitor: the login form is protected from login CSRF (which
//! signs a victim into the attacker's account) by a double-submit token instead ([`LoginToken`]), a random value
//! in a cookie of its own that the form must repeat, so a visitor who never signs in leaves no row.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use tower_sessions::cookie::SameSite;
use tower_sessions::{Expiry, Session, SessionManagerLayer};

/// The cookie's name.
pub const COOKIE: &str = "cardhour_session";

const USER: &str = "user_id";
const CSRF: &str = "csrf";
const SEEN: &str = "seen";
/// The proxy's user a session belongs to (SSO mode).
const PROXY_USER: &str = "proxy_user";

/// A session is saved again (and its expiry pushed back) at most this often: not a write on every page view.
const TOUCH_EVERY: i64 = 60;

/// How the session cookie is set.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// `Secure` on the cookie: only sent over HTTPS (set it whenever users reach the portal over TLS, e.g. behind
    /// a TLS-terminating proxy).
    pub secure: bool,
    /// A session unused this long ends (its row expires and the cookie with it).
    pub idle: Duration,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self { secure: false, idle: Duration::from_secs(2 * 3600) }
    }
}

/// The session layer over the database's `portal_sessions`.
pub fn layer(pool: sqlx::PgPool, config: &SessionConfig) -> SessionManagerLayer<crate::db::sessions::PgSessionStore> {
    let idle = tower_sessions::cookie::time::Duration::try_from(config.idle)
        .unwrap_or(tower_sessions::cookie::time::Duration::hours(2));
    SessionManagerLayer::new(crate::db::sessions::PgSessionStore::new(pool))
        .with_name(COOKIE)
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(config.secure)
        .with_path("/")
        .with_expiry(Expiry::OnInactivity(idle))
}

/// The login form's CSRF token for an anonymous visitor (double submit): a random value held in a cookie of its
/// own (HttpOnly, `SameSite=Strict`, `__Host-` prefixed when cookies are Secure, so a sibling host cannot plant
/// one) and repeated in the form; a login is accepted only when the two agree. Nothing is stored on the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginToken(String);

impl LoginToken {
    /// How long the form stays usable (then the page is loaded again).
    const MAX_AGE: i64 = 2 * 3600;

    /// The cookie's name: `__Host-` prefixed when the cookie is Secure (a browser then accepts it only from this
    /// very host, over HTTPS, for path `/`).
    pub fn cookie_name(secure: bool) -> &'static str {
        if secure { "__Host-cardhour_login" } else { "cardhour_login" }
    }

    /// The token the request's cookie holds, when it holds one of ours.
    pub fn from_headers(headers: &axum::http::HeaderMap, secure: bool) -> Option<Self> {
        let name = Self::cookie_name(secure);
        headers
            .get_all(axum::http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(tower_sessions::cookie::Cookie::split_parse)
            .filter_map(Result::ok)
            .find(|c| c.name() == name && c.value().len() == 43 && c.value().bytes().all(is_token_byte))
            .map(|c| Self(c.value().to_string()))
    }

    /// The request's token, or a new one (which the answer must set: see [`Self::set_cookie`]).
    pub fn from_headers_or_new(headers: &axum::http::HeaderMap, secure: bool) -> (Self, bool) {
        match Self::from_headers(headers, secure) {
            Some(t) => (t, false),
            None => (Self(random_token()), true),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the form sent `sent`, this token (compared in constant time).
    pub fn matches(&self, sent: &str) -> bool {
        use subtle::ConstantTimeEq;
        !sent.is_empty() && bool::from(self.0.as_bytes().ct_eq(sent.as_bytes()))
    }

    /// The `Set-Cookie` value that gives the browser this token.
    pub fn set_cookie(&self, secure: bool) -> axum::http::HeaderValue {
        let c = tower_sessions::cookie::Cookie::build((Self::cookie_name(secure), self.0.clone()))
            .http_only(true)
            .same_site(SameSite::Strict)
            .secure(secure)
            .path("/")
            .max_age(tower_sessions::cookie::time::Duration::seconds(Self::MAX_AGE))
            .build();
        axum::http::HeaderValue::from_str(&c.to_string()).unwrap_or(axum::http::HeaderValue::from_static(""))
    }

    /// The `Set-Cookie` value that removes the token (after a sign-in: the session's token takes over).
    pub fn clear_cookie(secure: bool) -> axum::http::HeaderValue {
        let c = tower_sessions::cookie::Cookie::build((Self::cookie_name(secure), ""))
            .http_only(true)
            .same_site(SameSite::Strict)
            .secure(secure)
            .path("/")
            .max_age(tower_sessions::cookie::time::Duration::ZERO)
            .build();
        axum::http::HeaderValue::from_str(&c.to_string()).unwrap_or(axum::http::HeaderValue::from_static(""))
    }
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

/// Why the session could not be read or written (the store's error, logged by the caller).
pub type Error = tower_sessions::session::Error;

fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The session's CSRF token, made (and the session with it) on first use.
pub async fn csrf_token(session: &Session) -> Result<String, Error> {
    if let Some(t) = session.get::<String>(CSRF).await? {
        return Ok(t);
    }
    let t = random_token();
    session.insert(CSRF, &t).await?;
    Ok(t)
}

/// A random secret of this session for `purpose`, made on first use. Unlike the CSRF token it is never put in a
/// page: it keys what the server hands the browser to carry and must get back unaltered (e.g. a previewed upload).
pub async fn secret(session: &Session, purpose: &str) -> Result<String, Error> {
    let key = format!("secret.{purpose}");
    if let Some(t) = session.get::<String>(&key).await? {
        return Ok(t);
    }
    let t = random_token();
    session.insert(&key, &t).await?;
    Ok(t)
}

/// Whether `sent` is the session's CSRF token, compared in constant time (a session without one matches nothing).
pub async fn csrf_matches(session: &Session, sent: &str) -> Result<bool, Error> {
    use subtle::ConstantTimeEq;
    let Some(expected) = session.get::<String>(CSRF).await? else { return Ok(false) };
    Ok(!sent.is_empty() && bool::from(expected.as_bytes().ct_eq(sent.as_bytes())))
}

/// Signs user `id` in: a new session id (the one the login form was served under may be known to someone else:
/// session fixation) and a new CSRF token.
pub async fn sign_in(session: &Session, user_id: i64) -> Result<(), Error> {
    session.cycle_id().await?;
    session.insert(USER, user_id).await?;
    session.insert(CSRF, random_token()).await?;
    session.insert(SEEN, now()).await?;
    Ok(())
}

/// Binds the session to the proxy's `user` (SSO mode): a session of another user, or of none, gets a new id and
/// a new CSRF token first, so a form rendered for one user is never accepted for another. Marks it used as
/// [`user_id`] does.
pub async fn bind_proxy_user(session: &Session, user: &str) -> Result<(), Error> {
    if session.get::<String>(PROXY_USER).await?.as_deref() == Some(user) {
        return touch(session).await;
    }
    session.cycle_id().await?;
    session.remove_value(USER).await?;
    session.insert(PROXY_USER, user).await?;
    session.insert(CSRF, random_token()).await?;
    session.insert(SEEN, now()).await?;
    Ok(())
}

/// Ends the session: its row is deleted and the cookie removed.
pub async fn sign_out(session: &Session) -> Result<(), Error> {
    session.flush().await
}

/// The signed-in user's id; marks the session used (saved again when last marked over a minute ago, which
/// pushes its inactivity expiry back).
pub async fn user_id(session: &Session) -> Result<Option<i64>, Error> {
    let Some(id) = session.get::<i64>(USER).await? else { return Ok(None) };
    touch(session).await?;
    Ok(Some(id))
}

/// Marks the session used: saved again when last marked over a minute ago.
async fn touch(session: &Session) -> Result<(), Error> {
    let seen = session.get::<i64>(SEEN).await?.unwrap_or(0);
    if now() - seen >= TOUCH_EVERY {
        session.insert(SEEN, now()).await?;
    }
    Ok(())
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Where to go after signing in: `next` when it is a path of this site, else `/`. Anything that a browser could
/// read as another host (`//evil`, `/\evil`, a scheme, control characters) is refused: no open redirect.
pub fn local_next(next: Option<&str>) -> &str {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && !n.starts_with("/\\")
                && n.len() <= 2048
                && !n.chars().any(|c| c.is_control() || c == '\\') =>
        {
            n
        }
        _ => "/",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_paths_are_followed_after_login() {
        for ok in ["/", "/bills/2026-11?team=a", "/teams/vision"] {
            assert_eq!(local_next(Some(ok)), ok);
        }
        for bad in ["//evil.example", "/\\evil.example", "https://evil.example/", "evil", "", "/a\\b", "/\r\nx"] {
            assert_eq!(local_next(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(local_next(None), "/");
    }
}
