//! The portal's login and access: the session cookie's flags, wrong and unknown credentials, the CSRF token on
//! the login and logout forms, logout and disabling ending sessions, the `next` redirect, and the extractors the
//! pages are built on (PageUser, CsrfForm) — against an in-process server on a real database.

use crate::common;

use cardhour::auth::PortalConfig;
use cardhour::auth::session::SessionConfig;
use common::portal::{PASSWORD, TestPortal, hidden, session_cookie, signed_in_as, visitor};
use sqlx::PgPool;

const WRONG: &str = "Wrong username or password.";

async fn sessions(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM portal_sessions").fetch_one(pool).await.unwrap()
}

/// The session cookie of a signed-in request, sent by hand (no cookie store): what an attacker holding an old
/// cookie would send.
async fn whoami_with(p: &TestPortal, cookie: &str) -> (u16, String) {
    let r = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(p.url("/test/whoami"))
        .header("cookie", format!("cardhour_session={cookie}"))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[sqlx::test]
async fn a_login_sets_a_new_http_only_lax_session_and_goes_on_to_next(pool: PgPool) {
    let p = TestPortal::start(pool).await;
    let c = visitor();
    let pre = c.get(p.url("/login?next=/bills/2026-11")).send().await.unwrap();
    let pre_cookies: Vec<String> =
        pre.headers().get_all("set-cookie").iter().map(|v| v.to_str().unwrap().to_string()).collect();
    let page = pre.text().await.unwrap();
    // an anonymous visitor gets no session (issue 27): the form's token is a cookie of its own
    assert!(session_cookie(&pre_cookies).is_none(), "{pre_cookies:?}");
    let csrf = hidden(&page, "csrf").unwrap();
    assert!(pre_cookies.iter().any(|c| c.starts_with(&format!("cardhour_login={csrf};"))), "{pre_cookies:?}");
    assert_eq!(hidden(&page, "next").as_deref(), Some("/bills/2026-11"));
    assert!(page.contains(r#"name="username""#) && page.contains(r#"name="password""#));

    let a = p
        .post_form(
            &c,
            "/login",
            &[("csrf", &csrf), ("username", "finance"), ("password", PASSWORD), ("next", "/bills/2026-11")],
        )
        .await;
    assert_eq!(a.status, 303, "{}", a.body);
    assert_eq!(a.location.as_deref(), Some("/bills/2026-11"));
    let cookie = a.set_cookies.iter().find(|c| c.starts_with("cardhour_session=")).expect("a session cookie");
    let flags: Vec<&str> = cookie.split(';').map(str::trim).collect();
    assert!(flags.contains(&"HttpOnly"), "{cookie}");
    assert!(flags.contains(&"SameSite=Lax"), "{cookie}");
    assert!(flags.contains(&"Path=/"), "{cookie}");
    assert!(!flags.contains(&"Secure"), "not configured secure: {cookie}");
    assert!(flags.contains(&"Max-Age=7200"), "two hours of inactivity: {cookie}");
    assert!(session_cookie(&a.set_cookies).is_some());

    let r = c.get(p.url("/test/whoami")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "finance finance user:finance");
    assert_eq!(p.signed_in(&c).await.as_deref(), Some("finance"));
}

#[sqlx::test]
async fn the_cookie_is_secure_when_configured(pool: PgPool) {
    let config = PortalConfig { session: SessionConfig { secure: true, ..SessionConfig::default() } };
    let p = TestPortal::start_with(pool, config).await;
    let r = visitor().get(p.url("/login")).send().await.unwrap();
    let cookie = r.headers().get("set-cookie").unwrap().to_str().unwrap().to_string();
    assert!(cookie.split(';').map(str::trim).any(|f| f == "Secure"), "{cookie}");
    assert!(cookie.split(';').map(str::trim).any(|f| f == "HttpOnly"), "{cookie}");
}

#[sqlx::test]
async fn a_wrong_password_and_an_unknown_user_get_the_same_form_back(pool: PgPool) {
    let p = TestPortal::start(pool).await;
    let mut bodies = Vec::new();
    for (user, pw) in [("finance", "not-the-password"), ("nobody", PASSWORD), ("finance", "")] {
        let c = visitor();
        let a = p.login(&c, user, pw).await;
        assert_eq!(a.status, 401, "{user}");
        assert!(a.body.contains(WRONG) && a.body.contains("用户名或密码错误"), "{}", a.body);
        assert_eq!(hidden(&a.body, "csrf").map(|t| t.len()), Some(43), "the form again, with its token");
        assert!(a.body.contains(&format!(r#"name="username" value="{user}""#)), "the name typed is kept");
        assert!(!a.body.contains(pw) || pw.is_empty(), "the password is never echoed");
        assert!(p.signed_in(&c).await.is_none());
        assert_eq!(signed_in_as(&a.body), None);
        let r = c.get(p.url("/test/whoami")).send().await.unwrap();
        assert_eq!(r.status(), 303, "{user}: not signed in");
        let normalized = a
            .body
            .replace(&hidden(&a.body, "csrf").unwrap(), "TOKEN")
            .replace(&format!(r#"value="{user}""#), r#"value="NAME""#);
        bodies.push(normalized);
    }
    assert_eq!(bodies[0], bodies[1], "an unknown name is answered as a wrong password");
}

#[sqlx::test]
async fn a_login_form_without_its_csrf_token_is_refused(pool: PgPool) {
    let p = TestPortal::start(pool.clone()).await;
    let c = visitor();
    let (_, csrf) = p.login_page(&c, None).await;
    assert_eq!(csrf.len(), 43);
    let forged = format!("{}x", &csrf[..42]);
    for fields in [
        vec![("username", "finance"), ("password", PASSWORD)],
        vec![("csrf", ""), ("username", "finance"), ("password", PASSWORD)],
        vec![("csrf", forged.as_str()), ("username", "finance"), ("password", PASSWORD)],
        vec![("csrf", csrf.as_str()), ("csrf", csrf.as_str()), ("username", "finance"), ("password", PASSWORD)],
    ] {
        let a = p.post_form(&c, "/login", &fields).await;
        assert_eq!(a.status, 403, "{fields:?}");
        assert!(a.body.contains("security token"), "{}", a.body);
        assert!(session_cookie(&a.set_cookies).is_none(), "no new session: {:?}", a.set_cookies);
        assert!(p.signed_in(&c).await.is_none(), "{fields:?}");
    }
    // a visitor that never opened the form (no session at all) is refused too, and gets no session
    let before = sessions(&pool).await;
    let fresh = visitor();
    let a = p.post_form(&fresh, "/login", &[("csrf", &csrf), ("username", "finance"), ("password", PASSWORD)]).await;
    assert_eq!(a.status, 403);
    assert!(a.set_cookies.is_empty(), "{:?}", a.set_cookies);
    assert_eq!(sessions(&pool).await, before);
    // the real token still works afterwards
    let a = p.post_form(&c, "/login", &[("csrf", &csrf), ("username", "finance"), ("password", PASSWORD)]).await;
    assert_eq!(a.status, 303);
}

#[sqlx::test]
async fn logout_ends_the_session_and_its_old_cookie(pool: PgPool) {
    let p = TestPortal::start(pool.clone()).await;
    let c = visitor();
    let a = p.login(&c, "lead", PASSWORD).await;
    assert_eq!(a.status, 303);
    let cookie = session_cookie(&a.set_cookies).unwrap();
    assert_eq!(whoami_with(&p, &cookie).await, (200, "lead team_lead user:lead".to_string()));
    let (page, csrf) = p.login_page(&c, None).await;
    assert_eq!(signed_in_as(&page).as_deref(), Some("lead"));

    // without the token: refused, still signed in
    let a = p.post_form(&c, "/logout", &[]).await;
    assert_eq!(a.status, 403);
    assert_eq!(whoami_with(&p, &cookie).await.0, 200);

    let a = p.post_form(&c, "/logout", &[("csrf", &csrf)]).await;
    assert_eq!(a.status, 303);
    assert_eq!(a.location.as_deref(), Some("/login"));
    assert!(
        a.set_cookies.iter().any(|c| c.starts_with("cardhour_session=") && c.contains("Max-Age=0")),
        "{:?}",
        a.set_cookies
    );
    let (status, _) = whoami_with(&p, &cookie).await;
    assert_eq!(status, 303, "the old cookie names no session any more");
    assert!(p.signed_in(&c).await.is_none());
}

#[sqlx::test]
async fn a_disabled_users_open_session_stops_working(pool: PgPool) {
    let p = TestPortal::start(pool.clone()).await;
    let c = visitor();
    assert_eq!(p.login(&c, "viewer", PASSWORD).await.status, 303);
    let r = c.get(p.url("/test/whoami")).send().await.unwrap();
    assert_eq!(r.text().await.unwrap(), "viewer viewer user:viewer");

    let sv = cardhour::usecase::Services::new(pool.clone(), chrono_tz::Asia::Shanghai);
    cardhour::usecase::users::disable(&sv, &common::portal::operator(), "viewer").await.unwrap();
    let r = c.get(p.url("/test/whoami?x=1")).send().await.unwrap();
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()["location"], "/login?next=%2Ftest%2Fwhoami%3Fx%3D1");
    // and it cannot sign in again
    let a = p.login(&c, "viewer", PASSWORD).await;
    assert_eq!(a.status, 401);
    assert!(a.body.contains(WRONG));
}

#[sqlx::test]
async fn next_is_followed_only_to_a_local_path(pool: PgPool) {
    let p = TestPortal::start(pool).await;
    for (next, expected) in [
        ("/teams/vision?month=2026-11", "/teams/vision?month=2026-11"),
        ("//evil.example/x", "/"),
        ("https://evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("evil.example", "/"),
        ("", "/"),
    ] {
        let c = visitor();
        let (page, csrf) = p.login_page(&c, Some(next)).await;
        assert_eq!(hidden(&page, "next").as_deref(), Some(expected), "the form keeps only a local next: {next:?}");
        // even when the form is tampered with
        let a = p
            .post_form(&c, "/login", &[("csrf", &csrf), ("username", "admin"), ("password", PASSWORD), ("next", next)])
            .await;
        assert_eq!(a.status, 303);
        assert_eq!(a.location.as_deref(), Some(expected), "{next:?}");
    }
}

#[sqlx::test]
async fn a_csrf_form_needs_the_sessions_token_and_reads_the_other_fields(pool: PgPool) {
    let p = TestPortal::start(pool).await;
    let c = visitor();
    assert_eq!(p.login(&c, "finance", PASSWORD).await.status, 303);
    let (_, csrf) = p.login_page(&c, None).await;
    let a = p.post_form(&c, "/test/echo", &[("text", "预算 ok"), ("csrf", &csrf)]).await;
    assert_eq!((a.status, a.body.as_str()), (200, "finance: 预算 ok"));
    let a = p.post_form(&c, "/test/echo", &[("text", "x"), ("csrf", "nope")]).await;
    assert_eq!(a.status, 403);
    // another visitor's token is not this session's
    let other = visitor();
    assert_eq!(p.login(&other, "admin", PASSWORD).await.status, 303);
    let (_, other_csrf) = p.login_page(&other, None).await;
    assert_ne!(other_csrf, csrf);
    assert_eq!(p.post_form(&c, "/test/echo", &[("text", "x"), ("csrf", &other_csrf)]).await.status, 403);
    // a JSON body is not a form
    let r = c.post(p.url("/test/echo")).json(&serde_json::json!({"text": "x", "csrf": csrf})).send().await.unwrap();
    assert_eq!(r.status(), 400);
}

#[sqlx::test]
async fn five_failures_of_a_name_throttle_it_but_not_another_user_from_the_address(pool: PgPool) {
    let p = TestPortal::start(pool.clone()).await;
    let c = visitor();
    for i in 0..5 {
        let a = p.login(&c, "finance", "guess").await;
        assert_eq!(a.status, 401, "failure {i}");
    }
    // the sixth attempt is refused before the password is looked at: even the right one
    let a = p.login(&c, "finance", PASSWORD).await;
    assert_eq!(a.status, 429, "{}", a.body);
    let retry: i64 = a.retry_after.as_deref().expect("Retry-After").parse().unwrap();
    assert!((840..=900).contains(&retry), "about 15 minutes: {retry}");
    assert!(a.body.contains("Too many failed logins") && a.body.contains("15 minute"), "{}", a.body);
    assert!(hidden(&a.body, "csrf").is_some(), "the form again");
    assert!(p.signed_in(&c).await.is_none());
    // the name in another case is the same name
    assert_eq!(p.login(&visitor(), "FINANCE", PASSWORD).await.status, 429);
    // another user from the same address is not blocked
    let other = visitor();
    assert_eq!(p.login(&other, "viewer", PASSWORD).await.status, 303);
    let refused: i64 = sqlx::query_scalar("SELECT count(*) FROM login_failures").fetch_one(&pool).await.unwrap();
    assert_eq!(refused, 5, "throttled attempts are not counted");

    // the window passes (moved back instead of waited for): the right password works and forgets the failures
    sqlx::query("UPDATE login_failures SET at = at - interval '15 minutes 1 second'").execute(&pool).await.unwrap();
    assert_eq!(p.login(&c, "finance", PASSWORD).await.status, 303);
}

#[sqlx::test]
async fn twenty_failures_from_one_address_throttle_every_name_from_it(pool: PgPool) {
    let p = TestPortal::start(pool.clone()).await;
    for i in 0..20 {
        let a = p.login(&visitor(), &format!("guess{i}"), "x").await;
        assert_eq!(a.status, 401, "failure {i}");
    }
    let a = p.login(&visitor(), "admin", PASSWORD).await;
    assert_eq!(a.status, 429);
    assert!(a.retry_after.is_some());
    // another address is not (the rows say where the failures came from)
    let addresses: Vec<String> =
        sqlx::query_scalar("SELECT DISTINCT host(address) FROM login_failures").fetch_all(&pool).await.unwrap();
    assert_eq!(addresses, vec!["127.0.0.1".to_string()]);
    sqlx::query("UPDATE login_failures SET address = '10.9.9.9'").execute(&pool).await.unwrap();
    assert_eq!(p.login(&visitor(), "admin", PASSWORD).await.status, 303);
}
