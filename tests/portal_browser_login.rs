//! Signing in and out of the portal through its real form in headless Chromium; a wrong password's message.

use crate::common;

use common::browser::Browser;
use common::portal::{PASSWORD, TestPortal};
use fantoccini::Locator;
use sqlx::PgPool;

#[sqlx::test]
async fn sign_in_and_out_through_the_form_in_chromium(pool: PgPool) {
    let p = TestPortal::start(pool).await;
    let b = Browser::start().await;
    let c = &b.client;

    c.goto(&p.url("/login")).await.unwrap();
    c.find(Locator::Css("#username")).await.unwrap().send_keys("finance").await.unwrap();
    c.find(Locator::Css("#password")).await.unwrap().send_keys("wrong-password").await.unwrap();
    c.find(Locator::Css("#submit")).await.unwrap().click().await.unwrap();
    let error = c.wait().for_element(Locator::Css("#login-error")).await.unwrap().text().await.unwrap();
    assert!(error.contains("Wrong username or password."), "{error}");
    b.screenshot("login-wrong-password").await;

    c.find(Locator::Css("#password")).await.unwrap().send_keys(PASSWORD).await.unwrap();
    c.find(Locator::Css("#submit")).await.unwrap().click().await.unwrap();
    // any page after the login (the home until the pages land may be a 404 page): the session cookie is set
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while c.current_url().await.unwrap().path() == "/login" && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(c.current_url().await.unwrap().path(), "/");
    let cookies = c.get_all_cookies().await.unwrap();
    let session = cookies.iter().find(|k| k.name() == "cardhour_session").expect("a session cookie");
    assert_eq!(session.http_only(), Some(true));

    c.goto(&p.url("/login")).await.unwrap();
    let who = c.find(Locator::Css("#signed-in")).await.unwrap().text().await.unwrap();
    assert!(who.contains("finance"), "{who}");
    b.screenshot("login-signed-in").await;
    c.find(Locator::Css("#logout")).await.unwrap().click().await.unwrap();
    c.wait().for_element(Locator::Css("#username")).await.unwrap();
    assert_eq!(c.current_url().await.unwrap().path(), "/login");
    assert!(c.find(Locator::Css("#signed-in")).await.is_err(), "signed out");
    b.screenshot("login-form").await;
    b.close().await;
}
