//! The login under abuse (issue 27, items 1, 7 and 8's SSO names), against the whole application served by
//! `cardhour::http::server::serve` on loopback over a real database: a burst of wrong passwords for one name is checked
//! at most five times (the throttle counts before it checks, atomically); the right password sent inside a burst
//! that reached the limit does not sign in; anonymous visitors of the login page leave no session row (the form's
//! CSRF token is a double-submit cookie); a proxy user name with a bidi control is nobody.

use crate::common;

use common::portal::{Answer, PASSWORD, TestPortal, hidden, session_cookie, visitor};
use futures_util::future::join_all;
use sqlx::PgPool;

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

/// Visitors with the login form loaded (its cookie kept by each client): ready to post it.
async fn visitors_at_the_form(p: &TestPortal, n: usize) -> Vec<(reqwest::Client, String)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let c = visitor();
        let (_, csrf) = p.login_page(&c, None).await;
        assert_eq!(csrf.len(), 43, "the form carries its token");
        out.push((c, csrf));
    }
    out
}

/// Every visitor posts the form at once, for `user` with its password.
async fn burst(p: &TestPortal, who: &[(reqwest::Client, String)], user: &str, passwords: &[&str]) -> Vec<Answer> {
    join_all(who.iter().zip(passwords).map(|((c, csrf), pw)| async move {
        p.post_form(c, "/login", &[("csrf", csrf.as_str()), ("username", user), ("password", pw)]).await
    }))
    .await
}

fn statuses(answers: &[Answer]) -> (usize, usize, usize) {
    let n = |s: u16| answers.iter().filter(|a| a.status == s).count();
    (n(303), n(401), n(429))
}

#[sqlx::test]
async fn thirty_wrong_passwords_at_once_are_checked_five_times(pool: PgPool) {
    let p = TestPortal::start(pool.clone()).await;
    let who = visitors_at_the_form(&p, 30).await;
    let started = std::time::Instant::now();
    let answers = burst(&p, &who, "finance", &["guess-guess"; 30]).await;
    let (ok, wrong, throttled) = statuses(&answers);
    // a 401 is a password checked and found wrong; a 429 is refused before any check
    assert_eq!((ok, wrong, throttled), (0, 5, 25), "5 checked, the rest refused unchecked");
    assert!(answers.iter().all(|a| a.status != 429 || a.retry_after.is_some()), "a 429 says when to retry");
    assert_eq!(count(&pool, "SELECT count(*) FROM login_failures WHERE username = 'finance'").await, 5);
    // the refused ones cost no password hashing: 30 checks of argon2 would take far longer than 5
    println!("30 attempts answered in {:.2} s", started.elapsed().as_secs_f64());
    // nobody signed in, no session stored
    assert_eq!(count(&pool, "SELECT count(*) FROM portal_sessions").await, 0);
}

#[sqlx::test]
async fn the_right_password_inside_a_burst_at_the_limit_does_not_sign_in(pool: PgPool) {
    let p = TestPortal::start(pool.clone()).await;
    // five failures: the name is at its limit
    for i in 0..5 {
        assert_eq!(p.login(&visitor(), "finance", "guess-guess").await.status, 401, "failure {i}");
    }
    // a burst of wrong ones with the right one in the middle: every one refused unchecked
    let who = visitors_at_the_form(&p, 12).await;
    let mut passwords = vec!["guess-again"; 12];
    passwords[6] = PASSWORD;
    let answers = burst(&p, &who, "finance", &passwords).await;
    assert_eq!(statuses(&answers), (0, 0, 12), "all refused before their password was looked at");
    assert!(session_cookie(&answers[6].set_cookies).is_none(), "no session for the right password");
    assert!(p.signed_in(&who[6].0).await.is_none());
    assert_eq!(count(&pool, "SELECT count(*) FROM portal_sessions").await, 0);
    assert_eq!(count(&pool, "SELECT count(*) FROM login_failures").await, 5, "refused attempts are not counted");

    // the case from a clean state: 19 wrong and the right one at once. At most five are checked (one of
    // them may be the right one, which then signs in: it had a slot), the rest are refused unchecked
    sqlx::query("DELETE FROM login_failures").execute(&pool).await.unwrap();
    let who = visitors_at_the_form(&p, 20).await;
    let mut passwords = ["guess-again"; 20];
    passwords[19] = PASSWORD;
    let answers = burst(&p, &who, "finance", &passwords).await;
    let (ok, wrong, throttled) = statuses(&answers);
    assert!(ok + wrong <= 5 && ok <= 1, "at most five checked: {ok} signed in, {wrong} wrong");
    assert_eq!(ok + wrong + throttled, 20);
    assert_eq!(ok == 1, answers[19].status == 303);
}

#[sqlx::test]
async fn anonymous_login_pages_store_no_session(pool: PgPool) {
    let p = TestPortal::start(pool.clone()).await;
    let sessions = "SELECT count(*) FROM portal_sessions";
    let mut tokens = std::collections::HashSet::new();
    for _ in 0..20 {
        let r = visitor().get(p.url("/login")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let cookies: Vec<String> =
            r.headers().get_all("set-cookie").iter().map(|v| v.to_str().unwrap().to_string()).collect();
        assert!(session_cookie(&cookies).is_none(), "no session cookie: {cookies:?}");
        let login = cookies.iter().find(|c| c.starts_with("cardhour_login=")).expect("the form's token cookie");
        let flags: Vec<&str> = login.split(';').map(str::trim).collect();
        assert!(flags.contains(&"HttpOnly") && flags.contains(&"SameSite=Strict"), "{login}");
        let page = r.text().await.unwrap();
        let csrf = hidden(&page, "csrf").unwrap();
        assert!(login.starts_with(&format!("cardhour_login={csrf};")), "the form repeats the cookie: {login}");
        tokens.insert(csrf);
    }
    assert_eq!(tokens.len(), 20, "a token of its own per visitor");
    assert_eq!(count(&pool, sessions).await, 0, "20 anonymous visits, no row");

    // the same visitor loading the form again keeps its token; a wrong password stores nothing either
    let c = visitor();
    let (_, first) = p.login_page(&c, None).await;
    let (_, again) = p.login_page(&c, None).await;
    assert_eq!(first, again);
    assert_eq!(p.login(&c, "finance", "guess-guess").await.status, 401);
    assert_eq!(count(&pool, sessions).await, 0);

    // the form without its cookie (a login CSRF: another site posting it) or with another visitor's token: 403
    let forged = visitor();
    let a = p.post_form(&forged, "/login", &[("csrf", &first), ("username", "finance"), ("password", PASSWORD)]).await;
    assert_eq!(a.status, 403, "a token without its cookie");
    let other = visitor();
    let (_, theirs) = p.login_page(&other, None).await;
    let a = p.post_form(&c, "/login", &[("csrf", &theirs), ("username", "finance"), ("password", PASSWORD)]).await;
    assert_eq!(a.status, 403, "another visitor's token");
    assert_eq!(count(&pool, sessions).await, 0);

    // signing in makes the one session, and the token's cookie goes
    let a = p.post_form(&c, "/login", &[("csrf", &first), ("username", "finance"), ("password", PASSWORD)]).await;
    assert_eq!(a.status, 303, "{}", a.body);
    assert!(session_cookie(&a.set_cookies).is_some());
    assert!(
        a.set_cookies.iter().any(|c| c.starts_with("cardhour_login=;") && c.contains("Max-Age=0")),
        "{:?}",
        a.set_cookies
    );
    assert_eq!(count(&pool, sessions).await, 1);
    assert_eq!(p.signed_in(&c).await.as_deref(), Some("finance"));
}

#[sqlx::test]
async fn the_login_token_cookie_is_host_only_and_secure_when_cookies_are(pool: PgPool) {
    use cardhour::auth::PortalConfig;
    use cardhour::auth::session::SessionConfig;
    let config = PortalConfig { session: SessionConfig { secure: true, ..SessionConfig::default() } };
    let p = TestPortal::start_with(pool, config).await;
    let r = visitor().get(p.url("/login")).send().await.unwrap();
    let cookie = r.headers().get("set-cookie").unwrap().to_str().unwrap().to_string();
    let flags: Vec<&str> = cookie.split(';').map(str::trim).collect();
    assert!(cookie.starts_with("__Host-cardhour_login="), "{cookie}");
    assert!(flags.contains(&"Secure") && flags.contains(&"HttpOnly") && flags.contains(&"Path=/"), "{cookie}");
}

#[sqlx::test]
async fn a_proxy_user_named_with_a_bidi_control_is_nobody(pool: PgPool) {
    use cardhour::auth::ProxyConfig;
    use cardhour::auth::proxy::{GroupGrant, parse_trusted};
    use reqwest::header::HeaderValue;
    let sso = ProxyConfig {
        user_header: "x-forwarded-user".parse().unwrap(),
        groups_header: "x-forwarded-groups".parse().unwrap(),
        trusted: vec![parse_trusted("127.0.0.1").unwrap()],
        grants: vec![GroupGrant::parse("finance-team=finance").unwrap()],
        sign_out_url: None,
    };
    let state = cardhour::usecase::state::AppState::new(pool.clone(), chrono_tz::Asia::Shanghai).with_sso(sso);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = cardhour::http::server::app(state);
    tokio::spawn(cardhour::http::server::serve(listener, app, Default::default(), std::future::pending()));
    let get = async |user: &str| {
        let r = visitor()
            .get(format!("{base}/"))
            .header("x-forwarded-user", HeaderValue::from_bytes(user.as_bytes()).unwrap())
            .header("x-forwarded-groups", "finance-team")
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    let (status, page) = get("王五").await;
    assert_eq!(status, 200, "a name in any script is a user: {page}");
    // the API refuses these in any name typed (validate::text); the proxy's user is held to the same rule
    for bad in ["evil\u{202E}gpj.exe", "\u{2066}wang", "wang\u{200F}", "wang\u{FEFF}"] {
        let (status, page) = get(bad).await;
        assert_eq!(status, 403, "{bad:?}: {page}");
        assert!(page.contains("not accepted") && !page.contains("wang"), "{bad:?}: {page}");
    }
    assert_eq!(count(&pool, "SELECT count(*) FROM portal_sessions").await, 1, "only the one real user's session");
}
