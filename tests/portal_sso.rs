//! SSO mode behind an authenticating proxy, over a real server on loopback with each connection's real peer
//! address: the proxy's user and groups headers are believed only from a trusted address (127.0.0.1 here, or some
//! other address so that 127.0.0.1 is not trusted); groups map to roles and teams on every request; a user whose
//! groups grant nothing gets a 403 page, not a login loop; forms still need the session's CSRF token, which belongs
//! to the proxy's user.

use crate::common;

use std::net::SocketAddr;

use cardhour::auth::ProxyConfig;
use cardhour::auth::proxy::{GroupGrant, parse_trusted};
use cardhour::http::server::app;
use cardhour::usecase::state::AppState;
use common::api::{SEED_MONTH, TestApi, seed};
use common::portal::{hidden, visitor};
use common::yuan;
use reqwest::Method;
use sqlx::PgPool;

const SIGN_OUT: &str = "/oauth2/sign_out";

fn config(trusted: &str) -> ProxyConfig {
    ProxyConfig {
        user_header: "x-forwarded-user".parse().unwrap(),
        groups_header: "x-forwarded-groups".parse().unwrap(),
        trusted: vec![parse_trusted(trusted).unwrap()],
        grants: ["ml-vision=team_lead:vision", "ml-nlp=team_lead:nlp", "finance-team=finance", "ops=viewer"]
            .iter()
            .map(|g| GroupGrant::parse(g).unwrap())
            .collect(),
        sign_out_url: Some(SIGN_OUT.into()),
    }
}

/// The whole application in SSO mode, served as `cardhour serve` serves it (each connection's peer address).
async fn start(pool: &PgPool, sso: ProxyConfig) -> String {
    let state = AppState::new(pool.clone(), chrono_tz::Asia::Shanghai).with_sso(sso);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let service = app(state).into_make_service_with_connect_info::<SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, service).await.unwrap() });
    base
}

struct Answer {
    status: u16,
    location: Option<String>,
    body: String,
}

/// A GET as the proxy forwards it: the user and groups headers (when given), in English.
async fn get(c: &reqwest::Client, url: &str, user: Option<&str>, groups: &str) -> Answer {
    let mut req = c.get(url).header("accept-language", "en");
    if let Some(u) = user {
        req = req.header("x-forwarded-user", u).header("x-forwarded-groups", groups);
    }
    answer(req.send().await.unwrap()).await
}

async fn post(c: &reqwest::Client, url: &str, user: &str, groups: &str, form: &[(&str, &str)]) -> Answer {
    // the proxy forwards the browser's form as it is
    let req = c.post(url).header("x-forwarded-user", user).header("x-forwarded-groups", groups).form(form);
    answer(req.send().await.unwrap()).await
}

/// The close form's fields with this CSRF token.
/// A close of the month under chargeback, kept by the platform; `shown` the fingerprint of the figures the
/// confirmation printed under that policy (the portal closes only what it showed).
fn close_form<'a>(token: &'a str, shown: &'a str) -> [(&'a str, &'a str); 5] {
    [
        ("csrf", token),
        ("mode", "chargeback"),
        ("unallocated", "kept_by_platform"),
        ("reason", "sso test"),
        ("shown", shown),
    ]
}

async fn answer(r: reqwest::Response) -> Answer {
    let status = r.status().as_u16();
    let location = r.headers().get("location").and_then(|v| v.to_str().ok()).map(str::to_string);
    Answer { status, location, body: r.text().await.unwrap() }
}

#[sqlx::test]
async fn trusted_proxy_users_get_their_groups_roles_and_teams(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let base = start(&pool, config("127.0.0.1/32")).await;
    let url = |p: &str| format!("{base}{p}");
    let month = SEED_MONTH;

    // a team lead by its group: its own team's pages, and the not-found page for another team's
    let lead = visitor();
    let home = get(&lead, &url("/"), Some("li@example.com"), "staff,ml-vision").await;
    assert_eq!(home.status, 200, "{}", home.body);
    assert!(home.body.contains("Signed in as <strong>li@example.com</strong>"), "{}", home.body);
    assert!(home.body.contains("视觉组") || home.body.contains("vision"));
    let (_, statement) =
        api.call(Method::GET, &format!("/api/v1/bills/{month}/teams/vision"), Some(&api.lead), None).await;
    let page = get(&lead, &url(&format!("/bills/{month}/teams/vision")), Some("li@example.com"), "ml-vision").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains(&yuan(statement["total"].as_str().unwrap())), "the API's total on the statement");
    let missing = get(&lead, &url("/teams/no-such-team"), Some("li@example.com"), "ml-vision").await;
    assert_eq!(missing.status, 404);
    for path in ["/teams/nlp".to_string(), format!("/bills/{month}/teams/nlp"), "/reports/utilization".into()] {
        let a = get(&lead, &url(&path), Some("li@example.com"), "ml-vision").await;
        assert_eq!((a.status, a.body == missing.body), (404, true), "{path} for a lead of vision");
    }
    // two lead groups: both teams
    let both = get(&lead, &url("/teams/nlp"), Some("li@example.com"), "ml-vision, ml-nlp").await;
    assert_eq!(both.status, 200, "{}", both.body);

    // the groups changed at the proxy: the next request has the new role, and back
    let a = get(&lead, &url("/reports/utilization"), Some("li@example.com"), "ml-vision,ops").await;
    assert_eq!(a.status, 200, "viewer (highest) wins: {}", a.body);
    let a = get(&lead, &url(&format!("/bills/{month}/close")), Some("li@example.com"), "ops,finance-team").await;
    assert_eq!(a.status, 200, "finance may open the close form: {}", a.body);
    let a = get(&lead, &url("/reports/utilization"), Some("li@example.com"), "ml-vision").await;
    assert_eq!(a.status, 404, "a lead again");
    // no group of its grants anything: a clear 403, no redirect to a login
    let a = get(&lead, &url("/"), Some("li@example.com"), "staff").await;
    assert_eq!((a.status, a.location), (403, None));
    assert!(a.body.contains("none of your groups gives access"), "{}", a.body);
    let a = get(&lead, &url("/"), Some("li@example.com"), "").await;
    assert_eq!(a.status, 403);

    // no user header from the proxy: not signed in, and no login form to loop through
    let a = get(&visitor(), &url("/bills"), None, "").await;
    assert_eq!((a.status, a.location), (401, None));
    assert!(a.body.contains("single sign-on"), "{}", a.body);
    let a = get(&visitor(), &url("/login?next=%2Fbills"), None, "").await;
    assert_eq!((a.status, a.location.as_deref()), (303, Some("/bills")));
    let a = post(&visitor(), &url("/login"), "x", "ops", &[("username", "admin"), ("password", "x")]).await;
    assert_eq!(a.status, 405, "no password login in SSO mode");
    // the API keeps its bearer tokens: the headers do not sign anyone in there
    let a = get(&visitor(), &url(&format!("/api/v1/bills/{month}")), Some("wang"), "finance-team").await;
    assert_eq!(a.status, 401);
}

#[sqlx::test]
async fn forms_need_the_proxy_users_csrf_token(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let base = start(&pool, config("127.0.0.1")).await;
    let url = |p: &str| format!("{base}{p}");
    let month = SEED_MONTH;
    let c = visitor();

    let policy = "mode=chargeback&unallocated=kept_by_platform";
    let confirm = get(&c, &url(&format!("/bills/{month}/close?{policy}")), Some("wang"), "finance-team").await;
    assert_eq!(confirm.status, 200, "{}", confirm.body);
    let csrf = hidden(&confirm.body, "csrf").expect("the close form's token");
    let shown = hidden(&confirm.body, "shown").expect("the fingerprint of the figures shown");
    assert!(!csrf.is_empty());
    // the same user, the same session: the same token on the next page
    let again = get(&c, &url("/"), Some("wang"), "finance-team").await;
    assert_eq!(hidden(&again.body, "csrf").as_deref(), Some(csrf.as_str()));

    // without the token, with a wrong one, or with the token of another user's session: refused, nothing closed
    let close = url(&format!("/bills/{month}/close"));
    for (user, token) in [("wang", ""), ("wang", "forged"), ("zhao", csrf.as_str())] {
        let a = post(&c, &close, user, "finance-team", &close_form(token, &shown)).await;
        assert_eq!(a.status, 403, "{user} with {token:?}: {}", a.body);
    }
    let (_, bill) = api.call(Method::GET, &format!("/api/v1/bills/{month}"), Some(&api.finance), None).await;
    assert_eq!(bill["status"], "open", "{bill}");

    // another user on the same browser got a session of its own: wang's token is stale now
    let zhao = get(&c, &url("/"), Some("zhao"), "finance-team").await;
    let zhao_csrf = hidden(&zhao.body, "csrf").unwrap();
    assert_ne!(zhao_csrf, csrf);
    assert_eq!(post(&c, &url("/logout"), "wang", "finance-team", &[("csrf", &csrf)]).await.status, 403);

    // with its own token the form is taken, as from a signed-in user; the audit names the SSO user
    let a = post(&c, &close, "zhao", "finance-team", &close_form(&zhao_csrf, &shown)).await;
    assert_eq!(
        (a.status, a.location.as_deref()),
        (303, Some(format!("/bills/{month}?{policy}").as_str())),
        "{}",
        a.body
    );
    let (_, bill) = api.call(Method::GET, &format!("/api/v1/bills/{month}"), Some(&api.finance), None).await;
    assert_eq!(bill["status"], "closed", "{bill}");
    let actor: String =
        sqlx::query_scalar("SELECT actor FROM audit_log WHERE entity = 'month:2026-10' ORDER BY id DESC LIMIT 1")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(actor, "sso:zhao");

    // logging out with the token: the portal's session ends and the proxy's sign-out follows
    let a = post(&c, &url("/logout"), "zhao", "finance-team", &[("csrf", &zhao_csrf)]).await;
    assert_eq!((a.status, a.location.as_deref()), (303, Some(SIGN_OUT)));
}

#[sqlx::test]
async fn headers_from_an_untrusted_address_are_refused(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    // only 10.0.0.0/24 is the proxy: this test's own connections from 127.0.0.1 are not
    let base = start(&pool, config("10.0.0.0/24")).await;
    let c = visitor();
    for path in ["/", "/bills", "/reports/utilization"] {
        let r = c
            .get(format!("{base}{path}"))
            .header("x-forwarded-user", "admin")
            .header("x-forwarded-groups", "finance-team")
            // what a client may claim of itself counts for nothing
            .header("x-forwarded-for", "10.0.0.5")
            .header("x-real-ip", "10.0.0.5")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403, "{path}");
        let body = r.text().await.unwrap();
        assert!(body.contains("did not come from the sign-on proxy"), "{body}");
        assert!(!body.contains("Signed in as") && !body.contains("csrf"), "{path}: a page for the claimed user");
    }
    // no session was made for the claimed user
    let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM portal_sessions").fetch_one(&pool).await.unwrap();
    assert_eq!(sessions, 0);
    // without the header it is simply not signed in
    let r = c.get(format!("{base}/bills")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
}
