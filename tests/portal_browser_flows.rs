//! The portal's flows in a real headless Chromium: a team lead reads its own team's home — GPU-hours per
//! namespace equal to the simulator's truth for a simulated cluster ingested from a real Prometheus — switches
//! language (the choice sticks to the next page), and gets the not-found page for another team's; finance closes a
//! month through its confirmation page, and the month then reads closed (the API agrees). Screenshots of each step
//! land in `target/screenshots/`.

use crate::common;

use std::collections::BTreeMap;

use chrono::{DateTime, Datelike, Utc};
use common::api::{SEED_MONTH, TestApi, seed};
use common::browser::Browser;
use common::portal::{PASSWORD, TestPortal};
use common::{TestDb, TestPrometheus, run_cardhour_ok, simulate_run};
use fantoccini::{Client, Locator};
use reqwest::Method;
use serde_json::Value;
use sqlx::PgPool;

/// Signs `user` in through the login form and waits for the page after it.
async fn sign_in(c: &Client, portal: &TestPortal, user: &str) {
    c.goto(&portal.url("/login")).await.unwrap();
    c.find(Locator::Css("#username")).await.unwrap().send_keys(user).await.unwrap();
    c.find(Locator::Css("#password")).await.unwrap().send_keys(PASSWORD).await.unwrap();
    c.find(Locator::Css("#submit")).await.unwrap().click().await.unwrap();
    wait_for_path(c, |p| p != "/login").await;
}

async fn wait_for_path(c: &Client, done: impl Fn(&str) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let url = c.current_url().await.unwrap();
        // the address changes when the new document commits, before it is parsed: wait for it to be complete too
        if done(url.path())
            && c.execute("return document.readyState", vec![]).await.ok().as_ref().and_then(|v| v.as_str())
                == Some("complete")
        {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "still at {url}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Waits until the current page's text contains `needle`: after a form post the old document, or none, may still be
/// there for a moment, so a lookup right after the click races the navigation.
async fn wait_for_text(c: &Client, needle: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        if let Ok(body) = c.find(Locator::Css("body")).await
            && let Ok(text) = body.text().await
            && text.contains(needle)
        {
            return text;
        }
        assert!(std::time::Instant::now() < deadline, "no page containing {needle:?}: {:?}", c.source().await);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The rows of the first table whose first header cell reads `first_header`: each row's cell texts.
async fn table(c: &Client, first_header: &str) -> Vec<Vec<String>> {
    for t in c.find_all(Locator::Css("table")).await.unwrap() {
        let Ok(th) = t.find(Locator::Css("thead th")).await else { continue };
        if th.text().await.unwrap().trim() != first_header {
            continue;
        }
        let mut rows = Vec::new();
        for tr in t.find_all(Locator::Css("tbody tr")).await.unwrap() {
            let mut cells = Vec::new();
            for td in tr.find_all(Locator::Css("td")).await.unwrap() {
                cells.push(td.text().await.unwrap().trim().to_string());
            }
            rows.push(cells);
        }
        return rows;
    }
    panic!("no table headed {first_header}");
}

fn number(cell: &str) -> f64 {
    cell.replace(',', "").parse().unwrap_or_else(|e| panic!("{cell}: {e}"))
}

async fn html_lang(c: &Client) -> String {
    c.find(Locator::Css("html")).await.unwrap().attr("lang").await.unwrap().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_team_lead_reads_the_simulated_truth_and_switches_language() {
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate_run(dir.path(), 16, 6, 60, 29);
    let truth = sim.truth_json();
    let prom = TestPrometheus::from_openmetrics(&sim.metrics).unwrap();
    let db = TestDb::migrated().unwrap();
    let (from, to) = (sim.start_arg(), sim.end_arg());
    run_cardhour_ok(["ingest", "--cluster", "sim", "--prometheus", &prom.url, "--from", &from, "--to", &to], &db.env());
    let pool = PgPool::connect(&db.url).await.unwrap();
    let portal = TestPortal::start(pool).await;

    // the truth: vision's GPU-hours per namespace in the current billing month (a simulation may start in the last)
    let month_start = {
        let now = Utc::now().with_timezone(&chrono_tz::Asia::Shanghai);
        let first = now.date_naive().with_day0(0).unwrap().and_hms_opt(0, 0, 0).unwrap();
        first.and_local_timezone(chrono_tz::Asia::Shanghai).unwrap().with_timezone(&Utc)
    };
    let vision: Vec<&str> = truth["by_namespace"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["team"] == "vision")
        .map(|n| n["namespace"].as_str().unwrap())
        .collect();
    assert!(!vision.is_empty(), "the simulation has vision namespaces");
    let mut expected: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for r in truth["by_hour_namespace"].as_array().unwrap() {
        let hour: DateTime<Utc> = r["hour"].as_str().unwrap().parse().unwrap();
        let ns = r["namespace"].as_str().unwrap();
        if hour >= month_start && vision.contains(&ns) {
            let e = expected.entry(ns.to_string()).or_default();
            e.0 += r["gpu_hours"].as_f64().unwrap();
            e.1 += r["effective_gpu_hours"].as_f64().unwrap();
        }
    }
    expected.retain(|_, (h, _)| *h > 0.0);
    assert!(!expected.is_empty(), "vision used GPUs this month: {truth}");

    let b = Browser::start().await;
    let c = &b.client;
    sign_in(c, &portal, "lead").await;
    // the lead's home is its team's, in the language the browser asks for unless switched
    c.goto(&portal.url("/?lang=en")).await.unwrap();
    assert_eq!(html_lang(c).await, "en");
    let rows = table(c, "Namespace").await;
    let shown: BTreeMap<String, (f64, f64)> =
        rows.iter().map(|r| (r[0].clone(), (number(&r[1]), number(&r[2])))).collect();
    assert_eq!(shown.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>(), "vision's namespaces");
    for (ns, (hours, effective)) in &expected {
        let (h, e) = shown[ns];
        // the page prints three decimals
        assert!((h - hours).abs() <= 0.0005 + 1e-9, "{ns}: page {h} GPU-hours, truth {hours}");
        assert!((e - effective).abs() <= 0.0005 + 1e-6, "{ns}: page {e} effective GPU-hours, truth {effective}");
    }
    b.screenshot("flow-lead-home-en").await;

    // the switch: one click, and the next page speaks it too
    c.find(Locator::Css("a.lang")).await.unwrap().click().await.unwrap();
    wait_for_path(c, |p| p == "/").await;
    assert_eq!(html_lang(c).await, "zh-CN");
    assert!(!table(c, "命名空间").await.is_empty(), "the same table, in Chinese");
    b.screenshot("flow-lead-home-zh").await;
    c.goto(&portal.url("/bills")).await.unwrap();
    assert_eq!(html_lang(c).await, "zh-CN", "the choice is remembered");
    c.find(Locator::Css("a.lang")).await.unwrap().click().await.unwrap();
    wait_for_path(c, |p| p == "/bills").await;
    assert_eq!(html_lang(c).await, "en");

    // another team's home and statement: the not-found page, as a team that does not exist
    for path in ["/teams/nlp", "/teams/no-such-team"] {
        c.goto(&portal.url(path)).await.unwrap();
        let h1 = c.find(Locator::Css("h1")).await.unwrap().text().await.unwrap();
        assert!(h1.contains("Page not found"), "{path}: {h1}");
    }
    b.screenshot("flow-lead-other-team").await;
    b.close().await;

    // ingest health, as finance reads it: the share of GPU-hours without utilization, the truth's (the simulation
    // is shorter than a day, so its last 24 stored hours are all of it)
    let finance = common::portal::visitor();
    assert_eq!(portal.login(&finance, "finance", PASSWORD).await.status, 303);
    let health = finance.get(portal.url("/health?lang=en")).send().await.unwrap().text().await.unwrap();
    let totals = &truth["totals"];
    let share = totals["unmetered_gpu_hours"].as_f64().unwrap() / totals["gpu_hours"].as_f64().unwrap();
    let shown = format!("<td class=\"num\">{:.1} %</td>", share * 100.0);
    assert!(health.contains(&shown), "ingest health shows {shown}: {health}");
}

#[sqlx::test]
async fn finance_closes_a_month_through_its_confirmation_page(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let portal = TestPortal::start(pool).await;
    let (_, bill) = api.call(Method::GET, &format!("/api/v1/bills/{SEED_MONTH}"), Some(&api.finance), None).await;
    assert_eq!(bill["status"], Value::from("open"));

    let b = Browser::start().await;
    let c = &b.client;
    sign_in(c, &portal, "finance").await;
    c.goto(&portal.url(&format!("/bills/{SEED_MONTH}?lang=en"))).await.unwrap();
    // (the link carries the policy the month page shows)
    c.find(Locator::Css(&format!("a[href^='/bills/{SEED_MONTH}/close']"))).await.unwrap().click().await.unwrap();
    wait_for_path(c, |p| p.ends_with("/close")).await;
    // the confirmation shows what will be frozen: the API's unallocated cost, every team's total
    let page = c.source().await.unwrap();
    let unallocated = bill["unallocated"].as_str().unwrap();
    assert!(page.contains(&common::yuan(unallocated)), "the confirmation shows {unallocated}");
    for t in bill["teams"].as_array().unwrap() {
        assert!(page.contains(&common::yuan(t["total"].as_str().unwrap())), "the confirmation shows {}", t["team"]);
    }
    b.screenshot("flow-close-confirmation-en").await;

    // the form stripped of its CSRF token (as a forged cross-site post would be): refused, nothing closed
    c.execute("document.querySelector('form.inline input[name=csrf]').remove()", vec![]).await.unwrap();
    c.find(Locator::Css("select[name=mode]")).await.unwrap().select_by_value("chargeback").await.unwrap();
    c.find(Locator::Css("form.inline button[type=submit]")).await.unwrap().click().await.unwrap();
    wait_for_text(c, "security token is missing").await;
    let (_, still) = api.call(Method::GET, &format!("/api/v1/bills/{SEED_MONTH}"), Some(&api.finance), None).await;
    assert_eq!(still["status"], Value::from("open"), "nothing closed without the token");
    c.goto(&portal.url(&format!("/bills/{SEED_MONTH}/close?lang=en"))).await.unwrap();

    // submitting without choosing the policy: the form back with the field's message, nothing closed
    c.find(Locator::Css("form.inline button[type=submit]")).await.unwrap().click().await.unwrap();
    let error = c.wait().for_element(Locator::Css(".field-error")).await.unwrap().text().await.unwrap();
    assert!(!error.is_empty());
    let (_, still) = api.call(Method::GET, &format!("/api/v1/bills/{SEED_MONTH}"), Some(&api.finance), None).await;
    assert_eq!(still["status"], Value::from("open"), "nothing closed by a form with errors");

    c.find(Locator::Css("select[name=mode]")).await.unwrap().select_by_value("chargeback").await.unwrap();
    c.find(Locator::Css("select[name=unallocated]")).await.unwrap().select_by_value("kept_by_platform").await.unwrap();
    let reason = c.find(Locator::Css("textarea[name=reason]")).await.unwrap();
    reason.clear().await.unwrap();
    reason.send_keys("seven hours of a test month: closed by the browser test").await.unwrap();
    c.find(Locator::Css("form.inline button[type=submit]")).await.unwrap().click().await.unwrap();
    wait_for_path(c, |p| p == format!("/bills/{SEED_MONTH}")).await;
    let badge = c.find(Locator::Css("h1 .badge")).await.unwrap().text().await.unwrap();
    assert_eq!(badge, "closed");
    b.screenshot("flow-closed-month-en").await;

    let (_, closed) = api.call(Method::GET, &format!("/api/v1/bills/{SEED_MONTH}"), Some(&api.finance), None).await;
    assert_eq!(closed["status"], Value::from("closed"), "{closed}");
    assert_eq!(closed["policy"]["mode"], Value::from("chargeback"), "{closed}");
    // the frozen totals are the ones the confirmation showed
    assert_eq!(closed["unallocated"], bill["unallocated"]);
    b.close().await;
}

#[sqlx::test]
async fn finance_previews_a_cmdb_file_then_applies_it(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let portal = TestPortal::start(pool).await;
    let (_, before) = api.call(Method::GET, "/api/v1/mappings", Some(&api.finance), None).await;

    // what Chinese Excel saves: GBK; a new namespace of a new team, a namespace moving to another team from
    // November (a new dated version: an addition), one as stored
    let csv = "namespace,team,team_name,owner,valid_from\n\
               recsys-train,rec,推荐算法组,张三,2026/11/01\n\
               nlp-prod,vision,,,2026-11-01\n\
               vision-train,vision,,,2026-09-01\n";
    let (gbk, _, unmappable) = encoding_rs::GBK.encode(csv);
    assert!(!unmappable);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cmdb-导出.csv");
    std::fs::write(&file, &gbk).unwrap();

    let b = Browser::start().await;
    let c = &b.client;
    sign_in(c, &portal, "finance").await;
    c.goto(&portal.url("/admin/mappings?lang=zh-CN")).await.unwrap();
    c.find(Locator::Css("input[type=file][name=file]")).await.unwrap().send_keys(file.to_str().unwrap()).await.unwrap();
    c.find(Locator::Css("form[action='/admin/mappings/preview'] button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_path(c, |p| p == "/admin/mappings/preview").await;
    let cards: Vec<String> = {
        let mut v = Vec::new();
        for e in c.find_all(Locator::Css(".cards .card .value")).await.unwrap() {
            v.push(e.text().await.unwrap());
        }
        v
    };
    // added, changed, unchanged, teams created, errors
    assert_eq!(cards, ["2", "0", "1", "1", "0"], "the preview's counts");
    b.screenshot("flow-mappings-preview-zh").await;
    let page = c.source().await.unwrap();
    assert!(page.contains("recsys-train") && page.contains("cmdb-导出.csv"), "the file and its rows: {page}");
    // nothing is written by a preview
    let (_, unchanged) = api.call(Method::GET, "/api/v1/mappings", Some(&api.finance), None).await;
    assert_eq!(unchanged, before, "a preview writes nothing");

    c.find(Locator::Css("form[action='/admin/mappings/apply'] button[type=submit]"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_path(c, |p| p == "/admin/mappings").await;
    b.screenshot("flow-mappings-applied-zh").await;
    let (_, after) = api.call(Method::GET, "/api/v1/mappings", Some(&api.finance), None).await;
    let rows = after.as_array().unwrap();
    let team_of = |ns: &str, from: &str| {
        rows.iter()
            .find(|m| m["namespace"] == ns && m["valid_from"] == from)
            .map(|m| m["team_id"].as_str().unwrap().to_string())
    };
    assert_eq!(team_of("recsys-train", "2026-11-01").as_deref(), Some("rec"), "{after}");
    assert_eq!(team_of("nlp-prod", "2026-11-01").as_deref(), Some("vision"), "{after}");
    assert_eq!(rows.len(), before.as_array().unwrap().len() + 2, "exactly the previewed two rows: {after}");
    let (_, teams) = api.call(Method::GET, "/api/v1/teams", Some(&api.finance), None).await;
    let rec = teams.as_array().unwrap().iter().find(|t| t["id"] == "rec").expect("team rec created");
    assert_eq!(rec["name"], "推荐算法组");
    b.close().await;
}

/// The main pages, screenshotted in both languages (as finance; a team lead's own pages too).
const SHOWN: &[(&str, &str, &str)] = &[
    ("finance", "home", "/?month={month}"),
    ("finance", "bills", "/bills"),
    ("finance", "month", "/bills/{month}"),
    ("finance", "statement", "/bills/{month}/teams/vision"),
    ("finance", "close", "/bills/{month}/close"),
    ("finance", "idle", "/idle"),
    ("finance", "health", "/health"),
    ("finance", "utilization", "/reports/utilization?month={month}"),
    ("finance", "tiers", "/reports/tiers?month={month}"),
    ("finance", "low-utilization", "/reports/low-utilization"),
    ("finance", "fragmentation", "/reports/fragmentation"),
    ("finance", "oversubscription", "/reports/oversubscription"),
    ("finance", "budgets", "/budgets?month={month}"),
    ("finance", "rates", "/rates"),
    ("finance", "rates-new", "/rates/new"),
    ("admin", "admin-teams", "/admin/teams"),
    ("admin", "admin-mappings", "/admin/mappings"),
    ("admin", "admin-users", "/admin/users"),
    ("admin", "admin-tokens", "/admin/tokens"),
    ("admin", "admin-audit", "/admin/audit"),
    ("lead", "lead-home", "/?month={month}"),
    ("lead", "lead-statement", "/bills/{month}/teams/vision"),
    ("lead", "lead-budgets", "/budgets?month={month}"),
    ("lead", "lead-low-utilization", "/reports/low-utilization"),
];

/// A word the page has no translation of prints its key (`section.word`): none may show.
fn untranslated(text: &str) -> Vec<String> {
    const SECTIONS: &[&str] = &[
        "nav.",
        "admin.",
        "close.",
        "idle.",
        "health.",
        "tier.",
        "home.",
        "bills.",
        "budget.",
        "budgets.",
        "rates.",
        "form.",
        "low_eff.",
        "download.",
        "status.",
        "report.",
        "reports.",
        "sso.",
        "oversub.",
        "frag.",
    ];
    text.split(|c: char| c.is_whitespace() || "()[]{}:,;·|".contains(c))
        .filter(|w| {
            SECTIONS.iter().any(|s| {
                w.starts_with(s)
                    && w.len() > s.len()
                    && w[s.len()..].chars().all(|c| c.is_ascii_lowercase() || c == '_')
            })
        })
        .map(str::to_string)
        .collect()
}

#[sqlx::test]
async fn every_main_page_in_both_languages(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let portal = TestPortal::start(pool).await;
    let b = Browser::start().await;
    let c = &b.client;
    let mut shots = 0;
    for user in ["finance", "admin", "lead"] {
        sign_in(c, &portal, user).await;
        for (_, name, path) in SHOWN.iter().filter(|(u, ..)| *u == user) {
            for (lang, code) in [("zh-CN", "zh"), ("en", "en")] {
                let path = path.replace("{month}", SEED_MONTH);
                let sep = if path.contains('?') { '&' } else { '?' };
                c.goto(&portal.url(&format!("{path}{sep}lang={lang}"))).await.unwrap();
                assert_eq!(html_lang(c).await, lang, "{user} {path}");
                let text = c.find(Locator::Css("body")).await.unwrap().text().await.unwrap();
                assert!(!text.contains("Page not found"), "{user} {path} is a page");
                // (the audit log lists actions by their ids, `budget.put`: data, not words)
                if !path.starts_with("/admin/audit") {
                    assert_eq!(untranslated(&text), Vec::<String>::new(), "{user} {path} in {lang}");
                }
                b.screenshot(&format!("page-{name}-{code}")).await;
                shots += 1;
            }
        }
        c.delete_all_cookies().await.unwrap();
    }
    assert_eq!(shots, 2 * SHOWN.len());
    b.close().await;
}
