//! Who is calling, below the faces: bearer API tokens (stored as SHA-256 digests), passwords, the portal's session
//! cookie and the SSO proxy's headers; the roles and the data scope a role may see are [`crate::access`]'s.
//!
//! The extractors that hand a handler its capability stand on these in each face: the API's `Finance`,
//! `GlobalReader`, `ScopedReader` in `api::bearer` (over the HTTP API's error), the pages' `PageUser` in
//! `web::extract` and `PageWriter`, `PageGlobalReader`, `PageAdmin` in `web::capability`. Handlers never look at a
//! role: a handler without a capability does not compile against an authenticated caller, and one with the wrong
//! one is visible in its signature. `Finance` hands the [`crate::access::Writer`] every write use case takes.

pub mod password;
pub mod proxy;
pub mod session;
mod token;

pub use proxy::ProxyConfig;
pub use token::{NewToken, hash_token, new_token};

pub use crate::access::{Principal, Role, Scope};

/// How the portal signs users in.
#[derive(Debug, Clone, Default)]
pub struct PortalConfig {
    pub session: session::SessionConfig,
}
