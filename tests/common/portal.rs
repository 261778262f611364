//! An in-process portal (the whole application, served with each connection's peer address as `cardhour serve`
//! does) with a signed-in-able user per role, and a browser-like client: a cookie store, no automatic redirects.

use cardhour::auth::{PortalConfig, Role};
use cardhour::http::server::app;
use cardhour::usecase::state::AppState;
use cardhour::web::extract::{CsrfForm, PageUser};
use reqwest::header::SET_COOKIE;
use sqlx::PgPool;

/// Every test user's password.
pub const PASSWORD: &str = "correct-horse-42";

pub struct TestPortal {
    /// `http://127.0.0.1:<port>`, no trailing slash.
    pub base: String,
    pub pool: PgPool,
}

/// The command line's operator (an admin), as the tests' seeding writes under it.
pub fn operator() -> cardhour::access::Administrator {
    cardhour::access::Administrator::of(&cardhour::access::Principal::operator("test")).unwrap()
}

/// A visitor: its own cookies, redirects not followed (so a test sees each 303).
pub fn visitor() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("reqwest client")
}

/// What a POST of the login form answered.
pub struct Answer {
    pub status: u16,
    pub location: Option<String>,
    /// The `Set-Cookie` headers, as sent.
    pub set_cookies: Vec<String>,
    pub body: String,
    pub retry_after: Option<String>,
}

impl Answer {
    async fn of(r: reqwest::Response) -> Answer {
        let header = |name: &str| r.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
        let status = r.status().as_u16();
        let location = header("location");
        let retry_after = header("retry-after");
        let set_cookies =
            r.headers().get_all(SET_COOKIE).iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect();
        Answer { status, location, set_cookies, retry_after, body: r.text().await.unwrap() }
    }
}

impl TestPortal {
    /// Teams `vision` and `nlp`; users `admin`, `finance`, `viewer` and `lead` (team lead of vision), all with
    /// [`PASSWORD`].
    pub async fn start(pool: PgPool) -> TestPortal {
        Self::start_with(pool, PortalConfig::default()).await
    }

    pub async fn start_with(pool: PgPool, portal: PortalConfig) -> TestPortal {
        for (id, name) in [("vision", "视觉组"), ("nlp", "NLP")] {
            sqlx::query("INSERT INTO teams (id, name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING")
                .bind(id)
                .bind(name)
                .execute(&pool)
                .await
                .unwrap();
        }
        let state = AppState::new(pool.clone(), chrono_tz::Asia::Shanghai).with_portal(portal);
        for (name, role, teams) in [
            ("admin", Role::Admin, vec![]),
            ("finance", Role::Finance, vec![]),
            ("viewer", Role::Viewer, vec![]),
            ("lead", Role::TeamLead, vec!["vision".to_string()]),
        ] {
            cardhour::usecase::users::create(&state.cases, &operator(), name, role, &teams, PASSWORD).await.unwrap();
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        // probes of the extractors the pages are built on: `GET /test/whoami` (a PageUser) and `POST /test/echo`
        // (a PageUser's CsrfForm), under the same session layer as the pages
        let probes = axum::Router::new()
            .route("/test/whoami", axum::routing::get(whoami))
            .route("/test/echo", axum::routing::post(echo))
            .layer(cardhour::auth::session::layer(pool.clone(), &state.portal.session))
            .with_state(state.clone());
        // served as `cardhour serve` serves: each request knows its peer's address
        let app = app(state).merge(probes);
        let limits = cardhour::http::server::ClientLimits::default();
        tokio::spawn(cardhour::http::server::serve(listener, app, limits, std::future::pending()));
        TestPortal { base, pool }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `GET /login` (with `?next=` when given): the page, and the CSRF token in its form.
    pub async fn login_page(&self, c: &reqwest::Client, next: Option<&str>) -> (String, String) {
        let mut req = c.get(self.url("/login"));
        if let Some(n) = next {
            req = req.query(&[("next", n)]);
        }
        let page = req.send().await.unwrap().text().await.unwrap();
        let csrf = hidden(&page, "csrf").unwrap_or_default();
        (page, csrf)
    }

    /// POSTs the login form with exactly these fields.
    pub async fn post_form(&self, c: &reqwest::Client, path: &str, fields: &[(&str, &str)]) -> Answer {
        Answer::of(c.post(self.url(path)).form(fields).send().await.unwrap()).await
    }

    /// Opens the login page and signs in through its form.
    pub async fn login(&self, c: &reqwest::Client, user: &str, password: &str) -> Answer {
        let (_, csrf) = self.login_page(c, None).await;
        self.post_form(c, "/login", &[("csrf", &csrf), ("username", user), ("password", password)]).await
    }

    /// Who the login page says is signed in on this client (`None`: nobody).
    pub async fn signed_in(&self, c: &reqwest::Client) -> Option<String> {
        let (page, _) = self.login_page(c, None).await;
        signed_in_as(&page)
    }
}

async fn whoami(u: PageUser) -> String {
    format!("{} {} {}", u.username, u.principal.role.as_str(), u.principal.actor())
}

#[derive(serde::Deserialize)]
struct Echo {
    text: String,
}

async fn echo(u: PageUser, CsrfForm(e): CsrfForm<Echo>) -> String {
    format!("{}: {}", u.username, e.text)
}

/// The value of the hidden field `name` in a page.
pub fn hidden(page: &str, name: &str) -> Option<String> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page.find(&marker)? + marker.len();
    Some(page[start..].split('"').next()?.to_string())
}

/// Who a login page says is signed in.
pub fn signed_in_as(page: &str) -> Option<String> {
    let start = page.find("Signed in as <strong>")? + "Signed in as <strong>".len();
    Some(page[start..].split('<').next()?.to_string())
}

/// The session cookie's value in a `Set-Cookie` header list.
pub fn session_cookie(set_cookies: &[String]) -> Option<String> {
    set_cookies
        .iter()
        .find_map(|c| c.strip_prefix("cardhour_session="))
        .map(|rest| rest.split(';').next().unwrap_or("").to_string())
}
