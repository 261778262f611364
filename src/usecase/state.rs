//! What every request handler of either face (the JSON API, the pages) can reach: the database and the use cases,
//! with how the portal signs users in. Beside the use cases it wraps, below both faces and the server that composes
//! them.

use std::sync::Arc;

use axum::extract::FromRef;
use sqlx::PgPool;

/// The one request-body limit: the server's layer and every extractor of either face (`String`, `Bytes`, `Json`,
/// forms) agree on it.
pub const BODY_LIMIT: usize = 8 * 1024 * 1024;

/// No request may hold a connection for longer (the pool's `statement_timeout` bounds each statement).
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The state of the HTTP application: the database (for the layers around the handlers) and the use cases.
#[derive(Clone)]
pub struct AppState {
    pub pool: PgPool,
    /// The billing time zone (months and rate dates are in it).
    pub billing_tz: chrono_tz::Tz,
    /// The use cases, with the answers they keep in memory.
    pub cases: crate::usecase::Services,
    /// How the portal signs users in (session cookie, login throttle).
    pub portal: Arc<crate::auth::PortalConfig>,
    /// SSO mode: the authenticating proxy whose headers name the pages' users (no login form then).
    pub sso: Option<Arc<crate::auth::ProxyConfig>>,
}

impl AppState {
    pub fn new(pool: PgPool, billing_tz: chrono_tz::Tz) -> Self {
        Self {
            cases: crate::usecase::Services::new(pool.clone(), billing_tz),
            pool,
            billing_tz,
            portal: Arc::new(crate::auth::PortalConfig::default()),
            sso: None,
        }
    }

    /// This state in SSO mode behind the proxy `sso` describes.
    pub fn with_sso(mut self, sso: crate::auth::ProxyConfig) -> Self {
        self.sso = Some(Arc::new(sso));
        self
    }

    /// This state with another portal configuration.
    pub fn with_portal(mut self, portal: crate::auth::PortalConfig) -> Self {
        self.portal = Arc::new(portal);
        self
    }
}

impl FromRef<AppState> for PgPool {
    fn from_ref(s: &AppState) -> PgPool {
        s.pool.clone()
    }
}
