//! Issue 33 in a real headless Chromium: finance walks month-end in the portal, on a simulated cluster ingested
//! from a real Prometheus (as `tests/month_end_nodes.rs`: one node without a capacity series, one without
//! dcgm-exporter — its GPU model unknown —, L40S without a rate).
//!
//! November's draft under each policy (the month page's figures are the API's), coverage and blockers in Chinese
//! on the close confirmation, the unknown node's model set on the nodes page (a bad field named, the preview
//! before the save, audited), the hours metered again, the close under the chosen policy — a policy changed
//! after the preview is shown again, not closed; the frozen totals equal the preview's field by field — and the
//! month's CSV, PDF and xlsx downloaded from the month page, their figures checked. Every zh page holds no ASCII
//! word but the glossary's allowed ones and data. Screenshots of the nodes page, the close confirmation and the
//! month page in zh and en land in `target/screenshots/` (and in `docs/screenshots/` with
//! `CARDHOUR_DOCS_SCREENSHOTS=1`).

use crate::common;

use std::collections::BTreeMap;

use common::api::TestApi;
use common::browser::Browser;
use common::portal::{PASSWORD, TestPortal};
use common::{TestDb, TestPrometheus, run_cardhour_ok, yuan};
use fantoccini::{Client, Locator};
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{Value, json};

const START: &str = "2026-11-03T02:00:00Z";
const END: &str = "2026-11-03T06:00:00Z";
const UNCOUNTED: &str = "gpu-h100-01";
const NODCGM: &str = "gpu-h100-nodcgm-06";
const H100: &str = "NVIDIA H100 80GB HBM3";
const POLICIES: [(&str, &str); 4] = [
    ("showback", "kept_by_platform"),
    ("showback", "spread_proportionally"),
    ("chargeback", "kept_by_platform"),
    ("chargeback", "spread_proportionally"),
];

async fn sign_in(c: &Client, portal: &TestPortal, user: &str) {
    c.goto(&portal.url("/login")).await.unwrap();
    c.find(Locator::Css("#username")).await.unwrap().send_keys(user).await.unwrap();
    c.find(Locator::Css("#password")).await.unwrap().send_keys(PASSWORD).await.unwrap();
    c.find(Locator::Css("#submit")).await.unwrap().click().await.unwrap();
    wait_for_path(c, |p| p != "/login").await;
}

async fn wait_for_path(c: &Client, done: impl Fn(&str) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let url = c.current_url().await.unwrap();
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

/// Clicks `css` and waits for the next document holding `needle`.
async fn click_for(c: &Client, css: &str, needle: &str) -> String {
    c.execute("window.__old = true", vec![]).await.unwrap();
    c.find(Locator::Css(css)).await.unwrap().click().await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let fresh = c.execute("return window.__old === undefined && document.readyState === 'complete'", vec![]).await;
        if fresh.ok().and_then(|v| v.as_bool()) == Some(true) {
            let text = body(c).await;
            if text.contains(needle) {
                return text;
            }
        }
        assert!(std::time::Instant::now() < deadline, "no page with {needle:?} after {css}: {:?}", c.source().await);
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

async fn body(c: &Client) -> String {
    c.find(Locator::Css("body")).await.unwrap().text().await.unwrap()
}

async fn text_of(c: &Client, css: &str) -> String {
    c.find(Locator::Css(css)).await.unwrap().text().await.unwrap().trim().to_string()
}

/// The figures a bills page shows: the cluster cards, and each team row's cells (by `data-team`).
#[derive(Debug, PartialEq)]
struct Shown {
    cluster: [String; 4],
    teams: BTreeMap<String, Vec<String>>,
}

async fn shown(c: &Client) -> Shown {
    let mut cluster: [String; 4] = Default::default();
    for (i, id) in ["capacity_cost", "allocated", "unallocated", "platform_kept"].iter().enumerate() {
        cluster[i] = text_of(c, &format!("#{id}")).await;
    }
    let mut teams = BTreeMap::new();
    for tr in c.find_all(Locator::Css("table.teams tr[data-team]")).await.unwrap() {
        let team = tr.attr("data-team").await.unwrap().unwrap();
        let mut cells = Vec::new();
        for td in tr.find_all(Locator::Css("td")).await.unwrap().into_iter().skip(1) {
            cells.push(td.text().await.unwrap().trim().to_string());
        }
        teams.insert(team, cells);
    }
    assert!(!teams.is_empty(), "a bills page lists teams");
    Shown { cluster, teams }
}

/// What the API's month says, printed as the pages print it.
fn printed(month: &Value) -> Shown {
    let y = |v: &Value| yuan(v.as_str().unwrap_or_else(|| panic!("{v}")));
    let hours = |v: &Value| {
        let d: Decimal = v.as_str().unwrap().parse().unwrap();
        cardhour::export::present::card_hours(d)
    };
    Shown {
        cluster: [
            y(&month["capacity_cost"]),
            y(&month["allocated"]),
            y(&month["unallocated"]),
            y(&month["platform_kept"]),
        ],
        teams: month["teams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let restated = yuan(t["restated"].as_str().unwrap_or("0.00"));
                let cells = vec![
                    hours(&t["card_hours"]),
                    y(&t["allocated"]),
                    y(&t["unallocated_share"]),
                    restated,
                    y(&t["total"]),
                ];
                (t["team"].as_str().unwrap().to_string(), cells)
            })
            .collect(),
    }
}

/// A zh page's ASCII words outside the glossary's allowed ones and the data it prints.
fn english_on(text: &str) -> Vec<String> {
    // data: teams, the cluster, nodes, models, the user, the product's name, the zone's name, and the language
    // switch (it names English in English)
    let data = [
        "cardhour",
        "finance",
        "sim",
        "nlp",
        "NLP",
        "platform",
        "recsys",
        "vision",
        UNCOUNTED,
        NODCGM,
        H100,
        "NVIDIA A100-SXM4-80GB",
        "L40S",
        "A100-80GB",
        "H100-80GB",
        "Asia/Shanghai",
        "English",
        "NVIDIA L40S",
    ];
    cardhour::glossary::english_words(text, &data).into_iter().map(str::to_string).collect()
}

async fn zh_clean(c: &Client, what: &str) {
    let words = english_on(&body(c).await);
    assert!(words.is_empty(), "{what}: English on a zh page: {words:?}");
}

/// A screenshot of the whole page (the window grown to its height, then back).
async fn screenshot(b: &Browser, name: &str) {
    let c = &b.client;
    let height = c.execute("return document.documentElement.scrollHeight", vec![]).await.unwrap();
    let height = height.as_u64().unwrap_or(900).clamp(900, 4000) as u32;
    c.set_window_size(1280, height + 140).await.unwrap();
    let file = b.screenshot(name).await;
    c.set_window_size(1280, 900).await.unwrap();
    if std::env::var_os("CARDHOUR_DOCS_SCREENSHOTS").is_some() {
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/screenshots");
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::copy(&file, docs.join(format!("{name}.png"))).unwrap();
    }
}

async fn select(c: &Client, name: &str, value: &str) {
    c.find(Locator::Css(&format!("form.close-form select[name={name}]")))
        .await
        .unwrap()
        .select_by_value(value)
        .await
        .unwrap();
}

async fn fill(c: &Client, name: &str, value: &str) {
    let e = c.find(Locator::Css(&format!("form.node-form input[name={name}]"))).await.unwrap();
    e.clear().await.unwrap();
    e.send_keys(value).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finance_walks_month_end_in_the_portal() {
    // the cluster of tests/month_end_nodes.rs
    let dir = tempfile::tempdir().unwrap();
    run_cardhour_ok(
        ["simulate", "--gpus", "56", "--hours", "4", "--scrape-interval", "60", "--seed", "3", "--end", END, "--out"]
            .into_iter()
            .chain([dir.path().to_str().unwrap()]),
        &[],
    );
    let metrics = std::fs::read_to_string(dir.path().join("metrics.om")).unwrap();
    let stripped: String = metrics
        .lines()
        .filter(|l| !(l.starts_with("kube_node_status_") && l.contains(&format!("node=\"{UNCOUNTED}\""))))
        .map(|l| format!("{l}\n"))
        .collect();
    let om = dir.path().join("stripped.om");
    std::fs::write(&om, stripped).unwrap();
    let prom = TestPrometheus::from_openmetrics(&om).unwrap();
    let db = TestDb::migrated().unwrap();
    let ingest = || {
        run_cardhour_ok(
            ["ingest", "--cluster", "sim", "--prometheus", &prom.url, "--from", START, "--to", END],
            &db.env(),
        )
    };
    ingest();
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    for (model, r) in [("NVIDIA A100-SXM4-80GB", "12.5"), (H100, "20")] {
        let body = json!({"gpu_model": model, "effective_from": "2026-10-01", "rate": r});
        assert_eq!(api.call(Method::POST, "/api/v1/rates", fin, Some(body)).await.0, 201);
    }
    let portal = TestPortal::start(pool.clone()).await;
    let b = Browser::start().await;
    let c = &b.client;
    sign_in(c, &portal, "finance").await;

    // 1. November's draft under each policy: the month page's figures are the API's, its links carry the policy
    let mut totals_by_policy = BTreeMap::new();
    for (mode, unallocated) in POLICIES {
        let q = format!("mode={mode}&unallocated={unallocated}");
        c.goto(&portal.url(&format!("/bills/2026-11?{q}&lang=zh-CN"))).await.unwrap();
        let (status, month) = api.call(Method::GET, &format!("/api/v1/bills/2026-11?{q}"), fin, None).await;
        assert_eq!(status, 200, "{month}");
        let page = shown(c).await;
        assert_eq!(page, printed(&month), "{q}: the page is the API's draft");
        totals_by_policy.insert(q.clone(), page.cluster.clone());
        let csv = c.find(Locator::Css("a[href*='/bills/2026-11/bills.csv']")).await.unwrap();
        assert!(csv.attr("href").await.unwrap().unwrap().contains(&q), "the download carries the policy");
        zh_clean(c, &format!("month page {q}")).await;
    }
    // spreading moves the unallocated part onto the teams: the platform keeps less
    assert_ne!(
        totals_by_policy["mode=showback&unallocated=kept_by_platform"][3],
        totals_by_policy["mode=showback&unallocated=spread_proportionally"][3]
    );
    // "nlp nlp" no more: a team whose name is its id prints once
    let row = text_of(c, "tr[data-team='platform'] td").await;
    assert_eq!(row, "platform", "a team named as its id prints its name alone");
    let row = text_of(c, "tr[data-team='vision'] td").await;
    assert_eq!(row, "视觉组 vision", "a name and a differing id");

    // 2. coverage and blockers in Chinese on the close confirmation
    c.goto(&portal.url("/bills/2026-11/close?lang=zh-CN")).await.unwrap();
    let text = body(c).await;
    assert!(text.contains("数据覆盖") && text.contains("4 / 720"), "coverage 4 of 720 hours: {text}");
    let mut blockers = Vec::new();
    for li in c.find_all(Locator::Css("ul.blockers li")).await.unwrap() {
        blockers.push(li.text().await.unwrap());
    }
    assert!(!blockers.is_empty(), "November is not ready");
    assert!(blockers.iter().any(|b| b.contains("首次采集之前有 58 小时没有数据")), "{blockers:?}");
    assert!(blockers.iter().any(|b| b.starts_with("GPU 型号未知")), "{blockers:?}");
    assert!(blockers.iter().any(|b| b.contains(NODCGM) && b.contains("物理卡数未能统计")), "{blockers:?}");
    zh_clean(c, "close confirmation").await;

    // 3. the nodes page, from the close page's link: the unknown model and the marked nodes
    click_for(c, "a[href='/nodes?month=2026-11']", "未知型号").await;
    zh_clean(c, "nodes page").await;
    let marks = text_of(c, &format!("tr[data-node='{NODCGM}']")).await;
    assert!(marks.contains("GPU 型号未知") && marks.contains("32"), "8 cards × 4 h of capacity: {marks}");
    screenshot(&b, "month-end-nodes-zh").await;
    c.goto(&portal.url("/nodes?month=2026-11&lang=en")).await.unwrap();
    screenshot(&b, "month-end-nodes-en").await;
    c.goto(&portal.url("/nodes?month=2026-11&lang=zh-CN")).await.unwrap();
    click_for(c, &format!("tr[data-node='{NODCGM}'] a.set"), "设置节点").await;
    // a bad field is named, nothing previewed nor offered for saving
    fill(c, "gpu_model", H100).await;
    fill(c, "cards", "八").await;
    let text = click_for(c, "#preview", "请输入 1 到 1024 之间的整数").await;
    assert!(!text.contains("保存后的变化"), "no preview of a bad form");
    assert!(c.find(Locator::Css("#save")).await.is_err(), "no save offered");
    // the preview is the API's, team by team
    fill(c, "cards", "8").await;
    click_for(c, "#preview", "保存后的变化").await;
    zh_clean(c, "node preview").await;
    let (status, preview) = api
        .call(
            Method::POST,
            &format!("/api/v1/nodes/sim/{NODCGM}/preview?month=2026-11"),
            fin,
            Some(json!({"gpu_model": H100, "cards": 8})),
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    let moves = body(c).await;
    let teams = preview["teams"].as_array().unwrap();
    assert!(!teams.is_empty());
    for t in teams {
        let line = format!("{} {}", yuan(t["total_after"].as_str().unwrap()), yuan(t["delta"].as_str().unwrap()));
        assert!(moves.contains(&line), "{}: {line} in {moves}", t["team"]);
    }
    assert!(moves.contains("¥208.00"), "vision: 10.4 card-hours × 20");
    screenshot(&b, "month-end-node-preview-zh").await;
    // saved as previewed, audited under the signed-in user
    click_for(c, "#save", "已保存节点设置").await;
    let audit: String =
        sqlx::query_scalar("SELECT actor || '|' || entity FROM audit_log WHERE action = 'node.settings'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(audit.starts_with("user:") && audit.ends_with(&format!("|node:sim/{NODCGM}")), "{audit}");
    // the English preview, for the screenshot
    c.goto(&portal.url(&format!("/nodes/sim/{NODCGM}?month=2026-11&lang=en"))).await.unwrap();
    click_for(c, "#preview", "What saving moves").await;
    screenshot(&b, "month-end-node-preview-en").await;
    // the node's hours metered again: the unknown model is gone from the blockers
    ingest();

    // 4. the close under the chosen policy: previewed, changed after the preview (shown again, not closed),
    // previewed again, closed; the frozen figures are the preview's, field by field
    c.goto(&portal.url("/bills/2026-11/close?lang=zh-CN")).await.unwrap();
    assert!(!body(c).await.contains("GPU 型号未知"), "the model is known now");
    select(c, "mode", "chargeback").await;
    select(c, "unallocated", "spread_proportionally").await;
    click_for(c, "#preview", "分摊计费 · 未分配成本按用量比例分摊").await;
    let previewed = shown(c).await;
    let (_, spread) = api
        .call(Method::GET, "/api/v1/bills/2026-11?mode=chargeback&unallocated=spread_proportionally", fin, None)
        .await;
    assert_eq!(previewed, printed(&spread), "the preview is the chosen policy's draft");
    screenshot(&b, "month-end-close-zh").await;
    select(c, "unallocated", "kept_by_platform").await;
    let reason = c.find(Locator::Css("textarea[name=reason]")).await.unwrap();
    reason.send_keys("试运行集群只有 4 小时数据：按测试结账").await.unwrap();
    let text = click_for(c, "#close", "所选政策下的数字与页面之前显示的不同").await;
    assert!(text.contains("分摊计费 · 未分配成本由平台承担"), "shown again under the policy chosen");
    let (_, still) = api.call(Method::GET, "/api/v1/bills/2026-11", fin, None).await;
    assert_eq!(still["status"], "open", "nothing closed when the figures differ from the preview");
    select(c, "unallocated", "spread_proportionally").await;
    click_for(c, "#preview", "分摊计费 · 未分配成本按用量比例分摊").await;
    assert_eq!(shown(c).await, previewed);
    c.goto(&portal.url("/bills/2026-11/close?mode=chargeback&unallocated=spread_proportionally&lang=en"))
        .await
        .unwrap();
    assert_eq!(shown(c).await, previewed, "the same figures through the query");
    screenshot(&b, "month-end-close-en").await;
    c.goto(&portal.url("/bills/2026-11/close?mode=chargeback&unallocated=spread_proportionally&lang=zh-CN"))
        .await
        .unwrap();
    let reason = c.find(Locator::Css("textarea[name=reason]")).await.unwrap();
    reason.send_keys("试运行集群只有 4 小时数据：按测试结账").await.unwrap();
    click_for(c, "#close", "已结账").await;
    wait_for_path(c, |p| p == "/bills/2026-11").await;
    let (_, closed) = api.call(Method::GET, "/api/v1/bills/2026-11", fin, None).await;
    assert_eq!(closed["status"], "closed", "{closed}");
    assert_eq!(
        (closed["policy"]["mode"].as_str(), closed["policy"]["unallocated"].as_str()),
        (Some("chargeback"), Some("spread_proportionally"))
    );
    assert_eq!(printed(&closed), previewed, "frozen = previewed, field by field");
    assert_eq!(shown(c).await, previewed, "the closed month's page too");
    zh_clean(c, "closed month").await;
    screenshot(&b, "month-end-month-zh").await;
    c.goto(&portal.url("/bills/2026-11?lang=en")).await.unwrap();
    screenshot(&b, "month-end-month-en").await;
    c.goto(&portal.url("/bills/2026-11?lang=zh-CN")).await.unwrap();

    // 5. the month's files from the month page's links, under its policy
    let finance = common::portal::visitor();
    assert_eq!(portal.login(&finance, "finance", PASSWORD).await.status, 303);
    let mut files = BTreeMap::new();
    for ext in ["bills.csv", "statements.pdf", "bills.xlsx"] {
        let link = c.find(Locator::Css(&format!("a[href*='/bills/2026-11/{ext}']"))).await.unwrap();
        let href = link.attr("href").await.unwrap().unwrap();
        assert!(href.contains("mode=chargeback&unallocated=spread_proportionally"), "{href}");
        let r = finance.get(portal.url(&href)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{href}");
        let disposition = r.headers()["content-disposition"].to_str().unwrap().to_string();
        assert!(disposition.contains("cardhour-2026-11."), "{disposition}");
        files.insert(ext, r.bytes().await.unwrap().to_vec());
    }
    let team_totals: BTreeMap<String, Decimal> = closed["teams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["team"].as_str().unwrap().to_string(), t["total"].as_str().unwrap().parse().unwrap()))
        .collect();
    let sum: Decimal = team_totals.values().copied().sum();
    let capacity: Decimal = closed["capacity_cost"].as_str().unwrap().parse().unwrap();
    assert_eq!(sum, capacity, "spread: the teams carry the whole capacity");

    // CSV (zh words): each team's lines add up to its frozen total, the total row to their sum
    let csv = String::from_utf8(files["bills.csv"].clone()).unwrap();
    let mut r = csv::Reader::from_reader(csv.trim_start_matches('\u{feff}').as_bytes());
    let header: Vec<String> = r.headers().unwrap().iter().map(str::to_string).collect();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("{name} in {header:?}"));
    let (line, team, amount) = (col("行类型"), col("团队"), col("金额（元）"));
    let mut by_team: BTreeMap<String, Decimal> = BTreeMap::new();
    let mut total_row = None;
    for rec in r.records() {
        let rec = rec.unwrap();
        match &rec[line] {
            "用量" | "未分配分摊" | "追溯调整" => {
                *by_team.entry(rec[team].to_string()).or_default() += rec[amount].parse::<Decimal>().unwrap()
            }
            "合计" => total_row = Some(rec[amount].parse::<Decimal>().unwrap()),
            _ => {}
        }
    }
    assert_eq!(by_team, team_totals, "the CSV's lines per team");
    assert_eq!(total_row, Some(sum), "the CSV's total row");

    // PDF: pdftotext holds every team's total and the month's
    let pdf = dir.path().join("month.pdf");
    std::fs::write(&pdf, &files["statements.pdf"]).unwrap();
    let out = std::process::Command::new("pdftotext").args(["-layout"]).arg(&pdf).arg("-").output().unwrap();
    assert!(out.status.success(), "pdftotext");
    let text = String::from_utf8_lossy(&out.stdout);
    for (team, total) in &team_totals {
        assert!(text.contains(&yuan(&total.to_string())), "{team}'s total {total} in the PDF");
    }

    // xlsx: the summary sheet's cells hold every team's total as a number
    use calamine::{DataType, Reader, Xlsx};
    let mut book: Xlsx<_> = calamine::open_workbook_from_rs(std::io::Cursor::new(files["bills.xlsx"].clone())).unwrap();
    let first = book.sheet_names()[0].clone();
    let sheet = book.worksheet_range(&first).unwrap();
    let numbers: Vec<f64> = sheet.rows().flat_map(|r| r.iter().filter_map(|c| c.as_f64())).collect();
    for (team, total) in &team_totals {
        let want: f64 = total.to_string().parse().unwrap();
        assert!(numbers.iter().any(|n| (n - want).abs() < 0.005), "{team}'s total {total} in the workbook's summary");
    }
    let words: Vec<String> =
        sheet.rows().flat_map(|r| r.iter().filter_map(|c| c.get_string().map(str::to_string))).collect();
    assert!(words.iter().any(|w| w.contains("分摊计费")), "the workbook names the policy in Chinese: {words:?}");
    b.close().await;
}
