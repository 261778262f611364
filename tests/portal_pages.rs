//! The portal's pages over HTTP, signed in through the login form: each page shows the API's numbers (the
//! statement's total, the team's lines), a download is the API's export byte for byte, and a team lead reaches
//! nothing of another team's nor the cluster-wide pages — the same "not found" page as a team that does not exist.

use crate::common;

use common::api::{SEED_MONTH, TestApi, seed};
use common::portal::{PASSWORD, TestPortal, hidden, visitor};
use common::yuan;
use reqwest::Method;
use serde_json::Value;
use sqlx::PgPool;

async fn get(portal: &TestPortal, c: &reqwest::Client, path: &str) -> (u16, String) {
    let r = c.get(portal.url(path)).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn bytes(portal: &TestPortal, c: &reqwest::Client, path: &str) -> (u16, Vec<u8>) {
    let r = c.get(portal.url(path)).send().await.unwrap();
    (r.status().as_u16(), r.bytes().await.unwrap().to_vec())
}

async fn signed_in(portal: &TestPortal, user: &str) -> reqwest::Client {
    let c = visitor();
    let answer = portal.login(&c, user, PASSWORD).await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    c
}

#[sqlx::test]
async fn pages_show_the_api_numbers_and_a_team_lead_only_its_own(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let portal = TestPortal::start(pool.clone()).await;
    let month = SEED_MONTH;

    // not signed in: every page sends the visitor to the login, and back
    let anonymous = visitor();
    let r = anonymous.get(portal.url("/bills")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 303);
    assert_eq!(r.headers()["location"], "/login?next=%2Fbills");

    // the API's statement of vision, the ground truth of the pages
    let (status, statement) =
        api.call(Method::GET, &format!("/api/v1/bills/{month}/teams/vision"), Some(&api.lead), None).await;
    assert_eq!(status, 200, "{statement}");
    let total = statement["total"].as_str().unwrap().to_string();
    assert_ne!(total, "0.00", "the seed bills vision: {statement}");
    let lines = statement["lines"].as_array().unwrap();
    assert!(!lines.is_empty(), "{statement}");

    let lead = signed_in(&portal, "lead").await;
    let (status, home) = get(&portal, &lead, "/").await;
    assert_eq!(status, 200, "{home}");
    assert!(home.contains("视觉组") || home.contains("vision"), "the lead's home names its team");
    assert!(!home.contains("nlp-prod"), "another team's namespace on the lead's home");

    let (status, page) = get(&portal, &lead, &format!("/bills/{month}/teams/vision")).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains(&yuan(&total)), "statement page lacks the API's total {}", yuan(&total));
    assert!(page.contains("vision-train"), "statement page lacks its namespace");
    // a draft names its reader as the preparer, as its PDF does
    assert!(page.contains("Prepared by lead") || page.contains("制表 lead"), "the statement page names its preparer");

    // the download is the API's export, byte for byte
    let (status, csv) = bytes(&portal, &lead, &format!("/bills/{month}/teams/vision/bills.csv")).await;
    assert_eq!(status, 200);
    let api_csv = api
        .client
        .get(format!("{}/api/v1/exports/{month}/bills.csv?team=vision", api.base))
        .bearer_auth(&api.lead)
        .send()
        .await
        .unwrap();
    assert_eq!(api_csv.status().as_u16(), 200);
    assert_eq!(csv, api_csv.bytes().await.unwrap().to_vec(), "page CSV differs from the API's");
    assert!(String::from_utf8_lossy(&csv).contains("vision-train"));

    // another team's pages, a team that does not exist, and the cluster-wide pages: one and the same not-found page
    let (status, missing) = get(&portal, &lead, "/teams/no-such-team").await;
    assert_eq!(status, 404);
    for path in [
        "/teams/nlp".to_string(),
        format!("/bills/{month}/teams/nlp"),
        format!("/bills/{month}/teams/nlp/bills.csv"),
        format!("/bills/{month}/teams/nlp/statement.pdf"),
        format!("/bills/{month}/teams/no-such-team"),
        format!("/bills/{month}/close"),
        "/reports/utilization".to_string(),
        "/reports/tiers".to_string(),
        "/health".to_string(),
        "/idle?team=nlp".to_string(),
    ] {
        let (status, body) = get(&portal, &lead, &path).await;
        assert_eq!((status, body == missing), (404, true), "{path} for a team lead");
    }

    // finance sees both teams on the month, with the API's totals
    let finance = signed_in(&portal, "finance").await;
    let (status, month_page) = get(&portal, &finance, &format!("/bills/{month}")).await;
    assert_eq!(status, 200, "{month_page}");
    let (_, bill) = api.call(Method::GET, &format!("/api/v1/bills/{month}"), Some(&api.finance), None).await;
    let teams = bill["teams"].as_array().unwrap();
    assert_eq!(teams.len(), 2, "{bill}");
    for t in teams {
        let total = t["total"].as_str().unwrap();
        assert!(month_page.contains(&yuan(total)), "month page lacks {}'s total {}", t["team"], yuan(total));
    }
    // the home of a past month (`?month=`) is that month's overview: every team's total, the month's total
    let (status, home) = get(&portal, &finance, &format!("/?month={month}")).await;
    assert_eq!(status, 200, "{home}");
    let sum: rust_decimal::Decimal =
        teams.iter().map(|t| t["total"].as_str().unwrap().parse::<rust_decimal::Decimal>().unwrap()).sum();
    assert!(
        home.contains(&format!("id=\"total\">{}<", yuan(&sum.to_string()))),
        "home of {month} lacks the total {sum}"
    );
    for t in teams {
        assert!(home.contains(&yuan(t["total"].as_str().unwrap())), "home of {month} lacks {}", t["team"]);
    }
    assert!(!home.contains("本月预测"), "an ended month has no forecast: {home}");
    // … and a team's home of that month shows what the team spent in it; a month to come names no page
    let (_, vision_home) = get(&portal, &finance, &format!("/teams/vision?month={month}")).await;
    let vision = teams.iter().find(|t| t["team"] == "vision").unwrap()["total"].as_str().unwrap();
    assert!(vision_home.contains(&format!("id=\"spent\">{}<", yuan(vision))), "vision's home of {month}");
    for path in ["/?month=2999-01", "/?month=abc", "/teams/vision?month=2026-13"] {
        assert_eq!(get(&portal, &finance, path).await.0, 404, "{path}");
    }
    for path in ["/", "/idle", "/health", "/reports/utilization", "/reports/tiers", "/teams/nlp"] {
        let (status, body) = get(&portal, &finance, path).await;
        assert_eq!(status, 200, "{path} for finance: {body}");
    }

    // closing: the confirmation page's form needs its CSRF token; without it nothing is closed
    let (status, confirm) = get(&portal, &finance, &format!("/bills/{month}/close")).await;
    assert_eq!(status, 200, "{confirm}");
    assert!(hidden(&confirm, "csrf").is_some_and(|t| !t.is_empty()), "the close form carries a CSRF token");
    let r = finance
        .post(portal.url(&format!("/bills/{month}/close")))
        .form(&[("mode", "chargeback"), ("unallocated", "kept_by_platform"), ("reason", "")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let (_, bill) = api.call(Method::GET, &format!("/api/v1/bills/{month}"), Some(&api.finance), None).await;
    assert_eq!(bill["status"], Value::from("open"), "{bill}");
}

/// A conflict in the portal is answered as the API answers it: a second close of a month closed already is a 409
/// for both — the portal's a page in the caller's frame (its navigation, its name, its language), not a bare page
/// nor a 500; and the confirmation page of a closed month is the same 409 page.
#[sqlx::test]
async fn a_conflict_is_a_409_page_with_the_navigation_in_either_language(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let portal = TestPortal::start(pool.clone()).await;
    let month = SEED_MONTH;
    let finance = signed_in(&portal, "finance").await;
    let policy = "mode=chargeback&unallocated=kept_by_platform";
    let (status, confirm) = get(&portal, &finance, &format!("/bills/{month}/close?{policy}")).await;
    assert_eq!(status, 200, "{confirm}");
    let csrf = hidden(&confirm, "csrf").expect("the close form's CSRF token");
    // the portal closes only the figures it showed: the confirmation's fingerprint of them under this policy
    let shown = hidden(&confirm, "shown").expect("the fingerprint of the figures shown");
    let close = async |lang: &str| {
        let form = [
            ("csrf", csrf.as_str()),
            ("mode", "chargeback"),
            ("unallocated", "kept_by_platform"),
            ("reason", "closed by a test of conflicts"),
            ("shown", shown.as_str()),
        ];
        let r = finance.post(portal.url(&format!("/bills/{month}/close?lang={lang}"))).form(&form).send().await;
        let r = r.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    };
    let (status, body) = close("zh").await;
    assert_eq!(status, 303, "the first close closes the month: {body}");

    // the API refuses the same close again: 409 naming the month
    let policy = serde_json::json!({"mode": "chargeback", "unallocated": "kept_by_platform"});
    let path = format!("/api/v1/bills/{month}/close");
    let (status, again) = api.call(Method::POST, &path, Some(&api.finance), Some(policy)).await;
    assert_eq!((status, again["code"].as_str(), again["field"].as_str()), (409, Some("conflict"), Some("month")));

    // the portal refuses it as a 409 page, in the page's language, framed as every page of the caller
    for (lang, heading, said, bills) in
        [("zh", "409 · 与现有数据冲突", "已结账", "账单"), ("en", "409 · Conflict", "is closed already", "Bills")]
    {
        let (status, page) = close(lang).await;
        assert_eq!(status, 409, "{lang}: {page}");
        assert!(page.contains(&format!("<h1>{heading}</h1>")), "{lang}: {page}");
        assert!(page.contains(said), "{lang}: {page}");
        assert!(page.contains("<nav>") && page.contains(&format!(">{bills}</a>")), "{lang}: no navigation: {page}");
        assert!(page.contains("<strong>finance</strong>"), "{lang}: the caller's name: {page}");
        assert!(page.contains(r#"href="/bills" class="active""#), "{lang}: the section it is in: {page}");
        if lang == "zh" {
            assert!(!page.contains("closed already") && !page.contains("Conflict"), "English on a zh page: {page}");
        }
        // the confirmation page of the closed month: the same conflict
        let (status, page) = get(&portal, &finance, &format!("/bills/{month}/close?lang={lang}")).await;
        assert_eq!(status, 409, "{lang}: {page}");
        assert!(page.contains(said) && page.contains("<nav>"), "{lang}: {page}");
    }
    let (_, bill) = api.call(Method::GET, &format!("/api/v1/bills/{month}"), Some(&api.finance), None).await;
    assert_eq!(bill["status"], Value::from("closed"), "{bill}");
}
