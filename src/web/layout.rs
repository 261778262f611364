//! What every page shares: the header (navigation by role, the user, logout, the language switch) as
//! [`Chrome`], the not-found and error pages, and the stylesheet served from the binary.

use askama::Template;
use askama_web::WebTemplate;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::field_errors::localize;
use super::i18n::{self, Lang};
use crate::access::Role;
use crate::usecase;
use crate::web::extract::PageUser;

/// The stylesheet, in the binary: nothing is loaded from another host.
pub const CSS: &str = include_str!("../../static/portal.css");

pub async fn css() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8"), (header::CACHE_CONTROL, "max-age=3600")], CSS).into_response()
}

/// One entry of the navigation.
pub struct NavItem {
    pub href: &'static str,
    pub label: &'static str,
    pub active: bool,
}

/// The frame of a page: its language, the signed-in user and what the role may open.
pub struct Chrome {
    pub lang: Lang,
    pub title: String,
    /// `None` on the not-found and error pages (they are the same for everyone).
    pub user: Option<String>,
    pub csrf: String,
    pub nav: Vec<NavItem>,
    /// The language switch: this page in the other language (its query kept, `lang` replaced).
    pub lang_href: String,
}

/// The sections each role may open, in the order the header lists them.
fn sections(role: Role) -> &'static [(&'static str, &'static str)] {
    // only pages that exist: the admin pages are the API's until their pages land
    const LEAD: &[(&str, &str)] = &[
        ("/", "nav.home"),
        ("/bills", "nav.bills"),
        ("/idle", "nav.idle"),
        ("/budgets", "nav.budgets"),
        ("/rates", "nav.rates"),
    ];
    const READER: &[(&str, &str)] = &[
        ("/", "nav.home"),
        ("/bills", "nav.bills"),
        ("/idle", "nav.idle"),
        ("/budgets", "nav.budgets"),
        ("/rates", "nav.rates"),
        ("/reports/utilization", "nav.reports"),
        ("/health", "nav.health"),
        ("/admin/teams", "nav.admin"),
    ];
    // the writers' (the API's `PUT /nodes/…`): settling the nodes and models that stand in the way of a close
    const WRITER: &[(&str, &str)] = &[
        ("/", "nav.home"),
        ("/bills", "nav.bills"),
        ("/nodes", "nav.nodes"),
        ("/adjustments", "nav.adjustments"),
        ("/idle", "nav.idle"),
        ("/budgets", "nav.budgets"),
        ("/rates", "nav.rates"),
        ("/reports/utilization", "nav.reports"),
        ("/health", "nav.health"),
        ("/admin/teams", "nav.admin"),
    ];
    match role {
        Role::TeamLead => LEAD,
        Role::Viewer => READER,
        Role::Finance | Role::Admin => WRITER,
    }
}

impl Chrome {
    /// The frame of a page in section `active` (its path in the navigation) titled `title`.
    pub fn new(user: &PageUser, lang: Lang, active: &str, title: impl Into<String>) -> Self {
        let nav = sections(user.principal.role)
            .iter()
            .map(|(href, key)| NavItem { href, label: i18n::t(lang, key), active: *href == active })
            .collect();
        let lang_href = i18n::switch_href(&user.query, lang.pick("en", "zh-CN"));
        Chrome { lang, title: title.into(), user: Some(user.username.clone()), csrf: user.csrf.clone(), nav, lang_href }
    }

    /// The frame of the pages everyone gets alike (not found, errors): no user, no navigation.
    fn bare(lang: Lang, title: &str) -> Self {
        Chrome { lang, title: title.into(), user: None, csrf: String::new(), nav: Vec::new(), lang_href: String::new() }
    }

    pub fn t(&self, key: &'static str) -> &'static str {
        i18n::t(self.lang, key)
    }

    /// A glossary term as a column or a label prints it ([`i18n::heading`]: `Input tokens`, 输入词元).
    pub fn term(&self, key: &'static str) -> String {
        i18n::heading(self.lang, key)
    }

    pub fn html_lang(&self) -> &'static str {
        i18n::html_code(self.lang)
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "message.html")]
pub struct MessagePage {
    pub c: Chrome,
    pub heading: String,
    pub text: String,
}

/// What a page answers when its handler cannot show it.
#[derive(Debug)]
pub enum PageError {
    /// Absent, or outside the caller's scope: the same page either way (a team lead learns nothing of others).
    NotFound,
    /// A request the data refuses (e.g. a closed month under another policy).
    Conflict(String),
    /// Logged; the page says only that something went wrong.
    Internal(String),
}

/// A use case's refusal as a page: what the API answers 409 (a conflict, a month not ready or not ended) is the
/// conflict page, what it answers 4xx otherwise the not-found page (a page has no field to name), the rest 500.
impl From<usecase::Error> for PageError {
    fn from(e: usecase::Error) -> Self {
        use usecase::Error as E;
        match e {
            E::NotFound(_) | E::NotFoundField { .. } | E::Forbidden | E::Invalid(_) => PageError::NotFound,
            E::Conflict { message, .. } => PageError::Conflict(message),
            e @ (E::NotReady(_) | E::NotEnded(_)) => PageError::Conflict(e.to_string()),
            e @ E::Timeout => PageError::Internal(e.to_string()),
            E::Internal(e) => PageError::Internal(format!("{e:#}")),
        }
    }
}

impl From<askama::Error> for PageError {
    fn from(e: askama::Error) -> Self {
        PageError::Internal(e.to_string())
    }
}

/// The not-found page: in both languages, so it is byte for byte the same for every caller and every path.
pub fn not_found_page() -> Response {
    let page = MessagePage {
        c: Chrome::bare(Lang::Zh, "404"),
        heading: "404 · 页面不存在 · Page not found".into(),
        text: "您要找的页面不存在。The page you asked for does not exist.".into(),
    };
    (StatusCode::NOT_FOUND, page).into_response()
}

/// The conflict a page handler answered, noted on its answer: [`frame_conflicts`] shows it in the caller's page.
#[derive(Debug, Clone)]
struct ConflictNote(String);

/// The conflict page: what the data refuses (in the page's language where the words are known), in the caller's
/// frame — its navigation, its name, the language switch — as any other page.
pub fn conflict_page(user: &PageUser, lang: Lang, active: &str, message: &str) -> Response {
    let heading = i18n::t(lang, "error.conflict");
    let page = MessagePage {
        c: Chrome::new(user, lang, active, heading),
        heading: heading.to_string(),
        text: format!("{} {}", localize(lang, message), i18n::t(lang, "error.conflict_hint")),
    };
    (StatusCode::CONFLICT, page).into_response()
}

/// The section of the navigation `path` is in: the longest entry it starts with (`/bills/2026-11/close` is in
/// `/bills`).
fn section_of(user: &PageUser, path: &str) -> &'static str {
    sections(user.principal.role)
        .iter()
        .map(|(href, _)| *href)
        .filter(|href| path == *href || (href.len() > 1 && path.starts_with(&format!("{href}/"))))
        .max_by_key(|href| href.len())
        .unwrap_or("")
}

/// Shows a conflict a page handler answered (a month closed meanwhile, something written first) in the caller's
/// page, as the API answers it 409: the handler's error knows no user, so the user is read again here — only
/// when a conflict was answered, from the request's own session.
pub async fn frame_conflicts(
    axum::extract::State(state): axum::extract::State<crate::usecase::state::AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let (parts, body) = req.into_parts();
    let (uri, headers, extensions) = (parts.uri.clone(), parts.headers.clone(), parts.extensions.clone());
    let response = next.run(axum::extract::Request::from_parts(parts, body)).await;
    let Some(ConflictNote(message)) = response.extensions().get::<ConflictNote>().cloned() else { return response };
    let lang = i18n::lang_of(uri.query(), &headers);
    let mut again = axum::extract::Request::new(());
    *again.uri_mut() = uri.clone();
    *again.headers_mut() = headers;
    *again.extensions_mut() = extensions;
    let (mut parts, ()) = again.into_parts();
    match <PageUser as axum::extract::FromRequestParts<_>>::from_request_parts(&mut parts, &state).await {
        Ok(user) => conflict_page(&user, lang, section_of(&user, uri.path()), &message),
        // signed out meanwhile: the conflict as it was answered, without a frame
        Err(_) => response,
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let (status, text) = match self {
            PageError::NotFound => return not_found_page(),
            PageError::Conflict(m) => {
                let page = MessagePage {
                    c: Chrome::bare(Lang::Zh, "409"),
                    heading: StatusCode::CONFLICT.to_string(),
                    text: m.clone(),
                };
                let mut response = (StatusCode::CONFLICT, page).into_response();
                response.extensions_mut().insert(ConflictNote(m));
                return response;
            }
            PageError::Internal(m) => {
                tracing::error!(error = %m, "page failed");
                (StatusCode::INTERNAL_SERVER_ERROR, "出错了，请稍后再试。Something went wrong; try again later.".into())
            }
        };
        let page = MessagePage { c: Chrome::bare(Lang::Zh, "error"), heading: status.to_string(), text };
        (status, page).into_response()
    }
}

/// `?month=YYYY-MM`: the month a page shows (the current one when absent).
#[derive(Debug, Default, serde::Deserialize)]
pub struct MonthQuery {
    pub month: Option<String>,
}

impl MonthQuery {
    /// The month asked for, else the current one; a month that is no month, or is still to come, names no page.
    pub fn month(&self, s: &crate::usecase::state::AppState) -> Result<crate::billing::Month, PageError> {
        let current = crate::usecase::months::current(&s.cases, chrono::Utc::now());
        match self.month.as_deref().filter(|m| !m.is_empty()) {
            None => Ok(current),
            Some(m) => match m.parse::<crate::billing::Month>() {
                Ok(m) if m <= current => Ok(m),
                _ => Err(PageError::NotFound),
            },
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::access::{Credential, Principal};

    pub(crate) fn user(role: Role, teams: &[&str]) -> PageUser {
        PageUser {
            principal: Principal {
                credential: Credential::User(0),
                name: "u".into(),
                role,
                teams: teams.iter().map(|t| (*t).to_string()).collect(),
            },
            username: "alice".into(),
            csrf: "tok-123".into(),
            query: String::new(),
        }
    }

    #[test]
    fn the_navigation_follows_the_role() {
        let lead = Chrome::new(&user(Role::TeamLead, &["vision"]), Lang::En, "/", "x");
        let hrefs: Vec<_> = lead.nav.iter().map(|n| n.href).collect();
        assert_eq!(hrefs, ["/", "/bills", "/idle", "/budgets", "/rates"]);
        assert!(lead.nav[0].active && !lead.nav[1].active);
        let admin = Chrome::new(&user(Role::Admin, &[]), Lang::Zh, "/bills", "x");
        assert!(admin.nav.iter().any(|n| n.href == "/health" && n.label == "采集健康"));
        // a team lead has no cluster-wide section; the nodes page is the writers'
        assert!(!lead.nav.iter().any(|n| n.href == "/health" || n.href.starts_with("/reports")));
        assert!(admin.nav.iter().any(|n| n.href == "/nodes" && n.label == "节点"));
        let viewer = Chrome::new(&user(Role::Viewer, &[]), Lang::En, "/", "x");
        assert!(!viewer.nav.iter().any(|n| n.href == "/nodes"));
    }

    #[tokio::test]
    async fn not_found_is_one_page_for_everyone() {
        let body = |r: Response| async move {
            let (parts, body) = r.into_parts();
            (parts.status, axum::body::to_bytes(body, 1 << 20).await.unwrap())
        };
        let (status, a) = body(not_found_page()).await;
        let (_, b) = body(PageError::NotFound.into_response()).await;
        let (_, c) = body(PageError::from(usecase::Error::Forbidden).into_response()).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(a, b);
        assert_eq!(a, c);
        let html = String::from_utf8(a.to_vec()).unwrap();
        assert!(html.contains("页面不存在") && html.contains("Page not found"), "{html}");
        // nobody's name, no navigation, no form
        assert!(!html.contains("<nav>") && !html.contains("logout"), "{html}");
        assert!(html.contains(r#"<link rel="stylesheet" href="/static/portal.css">"#));
    }

    #[tokio::test]
    async fn a_conflict_is_a_409_page_in_the_callers_frame() {
        let finance = user(Role::Finance, &[]);
        assert_eq!(section_of(&finance, "/bills/2026-11/close"), "/bills");
        assert_eq!(section_of(&finance, "/admin/teams/x"), "/admin/teams");
        assert_eq!(section_of(&finance, "/"), "/");
        assert_eq!(section_of(&finance, "/billsx"), "");
        for (lang, heading, said) in [
            (Lang::Zh, "409 · 与现有数据冲突", "2026-11 已结账"),
            (Lang::En, "409 · Conflict", "2026-11 is closed already"),
        ] {
            let r = conflict_page(&finance, lang, "/bills", "month 2026-11 is closed already");
            assert_eq!(r.status(), StatusCode::CONFLICT);
            let html = String::from_utf8(axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap().to_vec()).unwrap();
            assert!(html.contains(&format!("<h1>{heading}</h1>")) && html.contains(said), "{html}");
            assert!(html.contains("<nav>") && html.contains(r#"href="/bills" class="active""#), "{html}");
            assert!(html.contains("<strong>alice</strong>"), "{html}");
        }
        // a handler's conflict, before it is framed: 409, noted for the frame
        let r = PageError::Conflict("month 2026-11 is closed already".into()).into_response();
        assert_eq!(r.status(), StatusCode::CONFLICT);
        assert!(r.extensions().get::<ConflictNote>().is_some());
    }

    #[test]
    fn the_stylesheet_hides_the_navigation_in_print() {
        let print = &CSS[CSS.find("@media print").unwrap()..];
        assert!(print.contains("header.top nav") && print.contains("display: none"));
    }
}
