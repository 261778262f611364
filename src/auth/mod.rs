//! Who is calling: bearer API tokens (stored as SHA-256 digests), the portal's signed-in user and its sessions;
//! the roles and the data scope a role may see are [`crate::access`]'s.
//!
//! Handlers never look at a role: each takes the capability extractor it needs (the API's `Finance`,
//! `GlobalReader`, `ScopedReader` in `api::auth`, over the HTTP API's error; the pages' `PageWriter`,
//! `PageGlobalReader`, `PageAdmin` in `web::capability`), so a handler without one does not compile against an
//! authenticated caller, and one with the wrong one is visible in its signature. `Finance` hands the
//! [`crate::access::Writer`] every write use case takes.

mod page;
pub mod password;
pub mod proxy;
pub mod session;
mod token;

pub use page::{CsrfForm, CsrfUpload, LoginCsrfForm, PageRejection, PageUser, UploadPart, local_next};
pub use proxy::ProxyConfig;
pub use token::{NewToken, hash_token, new_token};

pub use crate::access::{Principal, Role, Scope};

/// How the portal signs users in.
#[derive(Debug, Clone, Default)]
pub struct PortalConfig {
    pub session: session::SessionConfig,
}
