//! The admin pages: teams, namespace → team mappings (with the CMDB CSV upload and its preview), users, API
//! tokens and the audit log. Who opens what mirrors the API: global readers see the lists, writers (finance,
//! admin) change teams and mappings, only an admin sees users and tokens; for anyone else such a page is the
//! not-found page, and a form sent by them writes nothing. Each page is a file of its own; what they share —
//! the access rule, the section's tabs, the field messages of a refused form in the page's language — is here.

mod audit;
mod close_events;
mod mappings;
mod queue_mappings;
mod reservation_terms;
mod teams;
mod tokens;
mod upload_seal;
mod users;

use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::field_errors::localize;
use super::i18n::{self, Lang};
use super::layout::PageError;
use crate::access::{Administrator, Principal};
use crate::usecase;
use crate::usecase::state::AppState;
use crate::validate::{FieldError, Problem};
use crate::web::extract::PageUser;

pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(teams::routes())
        .merge(mappings::routes())
        .merge(queue_mappings::routes())
        .merge(reservation_terms::routes())
        .merge(close_events::routes())
        .merge(users::routes())
        .merge(tokens::routes())
        .merge(audit::routes())
}

/// Who a tab is for (what the header offers; the pages themselves take [`PageGlobalReader`], [`PageWriter`] or
/// [`PageAdmin`]).
///
/// [`PageGlobalReader`]: crate::web::capability::PageGlobalReader
/// [`PageWriter`]: crate::web::capability::PageWriter
/// [`PageAdmin`]: crate::web::capability::PageAdmin
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Reads every team (viewer, finance, admin): the lists.
    Reader,
    /// Users and tokens: admin only.
    Admin,
}

impl Need {
    fn admits(self, p: &Principal) -> bool {
        match self {
            Need::Reader => p.scope().is_global(),
            Need::Admin => Administrator::of(p).is_some(),
        }
    }
}

/// One tab of the admin section.
pub struct Tab {
    pub href: &'static str,
    pub label: &'static str,
    pub active: bool,
}

/// The admin pages the caller may open, `active` marked.
pub fn tabs(user: &PageUser, lang: Lang, active: &str) -> Vec<Tab> {
    const ALL: &[(&str, &str, Need)] = &[
        ("/admin/teams", "admin.teams", Need::Reader),
        ("/admin/mappings", "admin.mappings", Need::Reader),
        ("/admin/queue-mappings", "admin.queue_mappings", Need::Reader),
        ("/admin/reservation-terms", "admin.reservation_terms", Need::Reader),
        ("/admin/close-events", "admin.close_events", Need::Reader),
        ("/admin/users", "admin.users", Need::Admin),
        ("/admin/tokens", "admin.tokens", Need::Admin),
        ("/admin/audit", "admin.audit", Need::Reader),
    ];
    ALL.iter()
        .filter(|(.., need)| need.admits(&user.principal))
        .map(|(href, key, _)| Tab { href, label: i18n::t(lang, key), active: *href == active })
        .collect()
}

/// Each bad field of a form, its message in the page's language.
#[derive(Debug, Default, Clone)]
pub struct FieldErrors(pub Vec<FieldError>);

impl FieldErrors {
    pub fn get(&self, field: &str) -> Option<&str> {
        self.0.iter().find(|e| e.field == field).map(|e| e.message.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn push(&mut self, lang: Lang, field: &str, message: &str) {
        self.0.push(FieldError::new(field, localize(lang, message)));
    }

    fn of(lang: Lang, list: Vec<FieldError>) -> Self {
        FieldErrors(list.into_iter().map(|e| FieldError { message: localize(lang, &e.message), ..e }).collect())
    }

    /// The fields a use case refused, or the error as a page when it is not about a field.
    pub fn from_refusal(lang: Lang, e: usecase::Error) -> Result<Self, PageError> {
        use usecase::Error as E;
        match e {
            E::Invalid(list) => Ok(Self::of(lang, list)),
            E::NotFoundField { field, message } => Ok(Self::of(lang, vec![FieldError::new(field, message)])),
            E::Conflict { field: Some(field), message } => {
                Ok(Self::of(lang, vec![FieldError::of(field, Problem::Taken, message)]))
            }
            other => Err(other.into()),
        }
    }
}

/// A form sent back with its messages: 422.
pub fn refused(page: impl IntoResponse) -> Response {
    (StatusCode::UNPROCESSABLE_ENTITY, page).into_response()
}

/// A text field of a form left blank: `None`.
pub fn blank_none(s: &str) -> Option<String> {
    (!s.trim().is_empty()).then(|| s.to_string())
}

/// A comma-separated list of team ids as typed (`vision, nlp`): its items, blanks dropped.
pub fn team_list(s: &str) -> Vec<String> {
    s.split([',', '，', ' ']).map(str::trim).filter(|t| !t.is_empty()).map(str::to_string).collect()
}

/// A role's name on a page.
pub fn role_word(lang: Lang, role: &str) -> String {
    let key = match role {
        "admin" => "role.admin",
        "finance" => "role.finance",
        "viewer" => "role.viewer",
        "team_lead" => "role.team_lead",
        other => return other.to_string(),
    };
    // English readers read the role's own name; others the word and the name the API and CLI use
    if lang == Lang::En { role.to_string() } else { format!("{} ({role})", i18n::t(lang, key)) }
}

/// The roles a form offers, in the order it lists them.
pub const ROLES: [&str; 4] = ["admin", "finance", "viewer", "team_lead"];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Role;
    use crate::web::layout::tests::user;

    #[test]
    fn messages_speak_the_pages_language() {
        assert_eq!(localize(Lang::Zh, "must be at most 200 characters"), "最多 200 个字符");
        assert_eq!(localize(Lang::En, "must be at most 200 characters"), "must be at most 200 characters");
        assert_eq!(localize(Lang::Zh, "unknown team `nope` (create it first)"), "团队 `nope` 不存在（请先创建）");
        assert_eq!(localize(Lang::Zh, "must not contain a NUL byte"), "不能包含 NUL 字符");
        assert_eq!(
            localize(Lang::Zh, "must be between 2000-01-01 and 2100-12-31"),
            "必须在 2000-01-01 与 2100-12-31 之间"
        );
        // a message the table does not know is shown as it is
        assert_eq!(localize(Lang::Zh, "something new"), "something new");
    }

    #[test]
    fn the_tabs_follow_the_role() {
        let hrefs = |r| tabs(&user(r, &[]), Lang::En, "/admin/teams").into_iter().map(|t| t.href).collect::<Vec<_>>();
        assert_eq!(
            hrefs(Role::Admin),
            [
                "/admin/teams",
                "/admin/mappings",
                "/admin/queue-mappings",
                "/admin/reservation-terms",
                "/admin/close-events",
                "/admin/users",
                "/admin/tokens",
                "/admin/audit"
            ]
        );
        assert_eq!(
            hrefs(Role::Finance),
            [
                "/admin/teams",
                "/admin/mappings",
                "/admin/queue-mappings",
                "/admin/reservation-terms",
                "/admin/close-events",
                "/admin/audit"
            ]
        );
        assert_eq!(hrefs(Role::Viewer), hrefs(Role::Finance));
        assert!(hrefs(Role::TeamLead).is_empty());
        assert_eq!(team_list(" vision,nlp ，x  "), ["vision", "nlp", "x"]);
    }
}
