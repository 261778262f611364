//! The statement finance signs (layout 3), end to end on a real Postgres and read back with `pdftotext -layout`:
//! ¥ amounts equal to the JSON's, a draft watermark on an open month and none on a closed one, Chinese labels by
//! default and English on request, the data coverage, budget vs actual, the previous month and the change,
//! prepared-by and the approval block; what the close froze stays. Then, from hand-made statements: capacity
//! unknown reads as unknown (never −0.000 or a negative unallocated amount), and in a 100-team month no heading is
//! the last line of a page.
//!
//! Ground truth, by hand (A100 12.5; H100 20, then 22.75 from 2026-10-10; L40S unpriced; two 8-card nodes):
//! - September, 3 hours: vision 1 A100 = 37.50, nlp 2 A100 = 75.00 (closed, kept by the platform).
//! - October: the 5th, 7 hours: vision 1 A100 = 87.50, nlp 3 A100 = 262.50 and 4 H100 = 560.00; the 12th, 3 hours:
//!   nlp 4 H100 = 273.00, vision 2 H100 = 136.50, nlp 1 L40S unpriced. vision 224.00, nlp 1095.50, allocated
//!   1319.50; capacity 2666.00; unallocated 1346.50. Coverage: 10 of October's 744 hours.
//! - nlp's budget 1000.00: 109.6 % used, −95.50 left; against September: vision +186.50 (+497.3 %), nlp +1,020.50
//!   (+1,360.7 %).

use crate::common;

use std::collections::BTreeMap;
use std::process::Command;

use cardhour::billing::{BillMode, BillPolicy, CapacityLine, Month, UnallocatedPolicy, UsageLine, compute_month};
use cardhour::export::view::Block;
use cardhour::export::{FontChain, Lang, Layout, StatementExtras, statement_pdf, statement_view};
use cardhour::ledger::{MonthStatus, Statement, TeamInfo};
use cardhour::metering::{HourOutput, UsageRow};
use cardhour::money::RatePerCardHour;
use chrono::{DateTime, Duration, Utc};
use common::api::TestApi;
use reqwest::Method;
use rust_decimal::Decimal;
use rust_decimal_macros::dec;
use serde_json::{Value, json};
use sqlx::PgPool;

const A100: &str = "NVIDIA A100-SXM4-80GB";
const H100: &str = "NVIDIA H100 80GB HBM3";
const L40S: &str = "NVIDIA L40S";

fn row(namespace: &str, pod: &str, team: &str, model: &str, cards: f64, util: f64) -> UsageRow {
    let node = if model == A100 { "node-a" } else { "node-h" };
    common::api::whole_cards((namespace, pod), Some(team), (model, node), cards, util)
}

async fn store(pool: &PgPool, from: &str, hours: i64, rows: &[UsageRow]) {
    let from: DateTime<Utc> = from.parse().unwrap();
    for h in 0..hours {
        let out = HourOutput {
            interval_ms: Some(60_000),
            rows: rows.to_vec(),
            capacity: vec![common::api::full_node("node-a", A100), common::api::full_node("node-h", H100)],
            ..HourOutput::default()
        };
        let hour = from + Duration::hours(h);
        let mut tx = pool.begin().await.unwrap();
        cardhour::db::clusters::upsert(&mut tx, "c1", "http://127.0.0.1:9").await.unwrap();
        cardhour::db::usage::lock_hour(&mut tx, "c1", hour).await.unwrap();
        cardhour::db::usage::replace_hour(&mut tx, "c1", hour, &out).await.unwrap();
        tx.commit().await.unwrap();
    }
}

/// Rates, mappings, September (closed), October's data, nlp's October budget.
async fn seed(api: &TestApi) {
    let fin = Some(api.finance.as_str());
    for (model, from, rate) in
        [("A100-80GB", "2026-09-01", "12.5"), ("H100-80GB", "2026-09-01", "20"), ("H100-80GB", "2026-10-10", "22.75")]
    {
        let r = json!({"gpu_model": model, "effective_from": from, "rate": rate});
        assert_eq!(api.call(Method::POST, "/api/v1/rates", fin, Some(r)).await.0, 201);
    }
    for (ns, team) in [("vision-train", "vision"), ("nlp-prod", "nlp"), ("nlp-llm", "nlp"), ("nlp-dev", "nlp")] {
        let m = json!({"namespace": ns, "team_id": team, "valid_from": "2026-09-01"});
        assert_eq!(api.call(Method::POST, "/api/v1/mappings", fin, Some(m)).await.0, 201);
    }
    let september = [
        row("vision-train", "vision-idle-pod", "vision", A100, 1.0, 0.01),
        row("nlp-prod", "nlp-idle-pod", "nlp", A100, 2.0, 0.01),
    ];
    store(&api.pool, "2026-09-20T00:00:00Z", 3, &september).await;
    let close = json!({"mode": "showback", "unallocated": "kept_by_platform", "override": {"reason": "no ingest run in this test"}});
    let (status, body) = api.call(Method::POST, "/api/v1/bills/2026-09/close", fin, Some(close)).await;
    assert_eq!(status, 201, "{body}");
    let fifth = [
        row("vision-train", "vision-idle-pod", "vision", A100, 1.0, 0.01),
        row("nlp-prod", "nlp-idle-pod", "nlp", A100, 3.0, 0.01),
        row("nlp-llm", "nlp-llm-0", "nlp", H100, 4.0, 0.6),
    ];
    store(&api.pool, "2026-10-05T00:00:00Z", 7, &fifth).await;
    let twelfth = [
        row("nlp-llm", "nlp-llm-0", "nlp", H100, 4.0, 0.6),
        row("vision-train", "vision-eval", "vision", H100, 2.0, 0.5),
        row("nlp-dev", "nlp-dev-0", "nlp", L40S, 1.0, 0.3),
    ];
    store(&api.pool, "2026-10-12T00:00:00Z", 3, &twelfth).await;
    let budget = json!({"amount": "1000"});
    assert_eq!(api.call(Method::PUT, "/api/v1/budgets/2026-10/nlp", fin, Some(budget)).await.0, 200);
}

fn pdftotext(pdf: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.pdf");
    std::fs::write(&path, pdf).unwrap();
    let out = Command::new("pdftotext").arg("-layout").arg(&path).arg("-").output().expect("pdftotext (poppler-utils)");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

async fn get(api: &TestApi, token: &str, path: &str) -> (u16, Vec<u8>) {
    let resp = api.client.get(format!("{}{path}", api.base)).bearer_auth(token).send().await.unwrap();
    (resp.status().as_u16(), resp.bytes().await.unwrap().to_vec())
}

async fn pdf_text(api: &TestApi, token: &str, path: &str) -> String {
    let (status, body) = get(api, token, path).await;
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    pdftotext(&body)
}

/// A JSON amount (`"1319.50"`) as a statement prints it, written here independently: `¥1,319.50`, `−¥95.50`.
fn yuan(amount: &str) -> String {
    let (sign, digits) = amount.strip_prefix('-').map_or(("", amount), |d| ("\u{2212}", d));
    // an unpriced line's amount is "0" in the JSON
    let (int, frac) = digits.split_once('.').unwrap_or((digits, "00"));
    let mut grouped = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{sign}¥{grouped}.{frac}")
}

fn has_all(text: &str, wanted: &[&str]) {
    for s in wanted {
        assert!(text.contains(s), "{s:?} missing from the PDF:\n{text}");
    }
}

/// An open month: a draft in Chinese (the default) naming its preparer, with every amount of the JSON printed as
/// ¥, the coverage, the budget and the previous month; in English on request; a bad language is a 422.
#[sqlx::test]
async fn an_open_month_is_a_chinese_draft_with_the_json_amounts(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let fin = api.finance.clone();
    let text = pdf_text(&api, &fin, "/api/v1/exports/2026-10/statements.pdf").await;

    let (_, month) = api.call(Method::GET, "/api/v1/bills/2026-10", Some(&fin), None).await;
    // an open month is written by the current layout (6 since issue 30's line ids, 5 since issue 36's unit cost on
    // statements, 4 since issue 33; layout 3's words stay for months it closed)
    assert_eq!(month["layout"], 6, "{month}");
    let mut amounts: Vec<String> = ["capacity_cost", "allocated", "unallocated", "platform_kept"]
        .iter()
        .map(|k| month[*k].as_str().unwrap().to_string())
        .collect();
    let teams = month["teams"].as_array().unwrap();
    assert_eq!(teams.len(), 2);
    for t in teams {
        amounts.push(t["total"].as_str().unwrap().to_string());
        let (_, team) = api
            .call(
                Method::GET,
                &format!("/api/v1/bills/2026-10/teams/{}", t["team"].as_str().unwrap()),
                Some(&fin),
                None,
            )
            .await;
        for l in team["lines"].as_array().unwrap() {
            amounts.push(l["amount"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(amounts[..4], ["2666.00", "1319.50", "1346.50", "1346.50"]);
    assert!(amounts.len() > 8, "{amounts:?}");
    for a in &amounts {
        let printed = yuan(a);
        assert!(text.contains(&printed), "{printed} (JSON {a}) missing from the PDF:\n{text}");
    }
    has_all(
        &text,
        &[
            "草稿",
            "GPU 成本结算单 2026-10",
            "财务汇总",
            "整卡",
            "用量",
            "未定价",
            "数据覆盖",
            "¥12.5000",
            "¥224.00",
            "¥1,095.50",
            // card-hours with 3 decimals: vision's 7 A100 card-hours, nlp's 28 H100
            "7.000",
            "28.000",
            // the budget, its use and what is left
            "预算",
            "¥1,000.00",
            "109.6 %",
            "\u{2212}¥95.50",
            // the previous month (closed) and the change
            "¥37.50",
            "+¥186.50 (+497.3 %)",
            "+¥1,020.50 (+1,360.7 %)",
            // prepared by the caller, and the sign-off
            "制表 finance",
            "审核",
            "批准",
        ],
    );
    // coverage: 10 of October's 744 hours on c1
    assert!(text.lines().any(|l| l.contains("c1") && l.contains(" 10 ") && l.contains("744")), "{text}");
    for bad in ["−0.000", "-0.000", "usage ", "whole", "DRAFT"] {
        assert!(!text.contains(bad), "{bad:?} in the zh PDF:\n{text}");
    }

    let en = pdf_text(&api, &fin, "/api/v1/exports/2026-10/statements.pdf?lang=en").await;
    has_all(&en, &["DRAFT", "Whole card", "Usage", "Prepared by finance", "Reviewed by", "Approved by", "¥2,666.00"]);
    assert!(!en.contains("草稿") && !en.contains("整卡"), "{en}");
    let (status, body) =
        api.call(Method::GET, "/api/v1/exports/2026-10/statements.pdf?lang=fr", Some(&fin), None).await;
    assert_eq!(status, 422, "{body}");
    assert!(body.to_string().contains("lang"), "{body}");

    // a team lead's draft: its own team, no cluster figure, no other team's budget
    let lead = pdf_text(&api, &api.lead, "/api/v1/exports/2026-10/statements.pdf").await;
    has_all(&lead, &["草稿", "视觉组", "¥224.00", "¥37.50"]);
    for s in ["¥1,095.50", "¥2,666.00", "¥1,000.00", "财务汇总"] {
        assert!(!lead.contains(s), "{s:?} in the team lead's PDF:\n{lead}");
    }
}

/// A month closed now is layout 6 (3 before issue 33, 4 before issue 36, 5 before issue 30's line ids): no draft marker, prepared by who closed it and when; its budget, previous
/// month and coverage are frozen (a later budget change does not show); the CLI prints the same words.
#[sqlx::test]
async fn a_closed_month_is_no_draft_and_keeps_what_it_froze(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let fin = api.finance.clone();
    let close = json!({"mode": "showback", "unallocated": "kept_by_platform", "override": {"reason": "no ingest run in this test"}});
    let (status, closed) = api.call(Method::POST, "/api/v1/bills/2026-10/close", Some(&fin), Some(close)).await;
    assert_eq!(status, 201, "{closed}");
    assert_eq!(closed["layout"], 6, "{closed}");
    let stored: Value = sqlx::query_scalar("SELECT snapshot FROM closed_months WHERE month = '2026-10'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored["layout"], 6);
    assert_eq!(stored["extras"]["budgets"], json!({"nlp": "1000.00"}));
    assert_eq!(stored["extras"]["previous"]["teams"], json!({"nlp": "75.00", "vision": "37.50"}));
    assert_eq!(stored["extras"]["coverage"][0]["hours_present"], 10);

    let before = get(&api, &fin, "/api/v1/exports/2026-10/statements.pdf").await.1;
    let text = pdftotext(&before);
    has_all(
        &text,
        &["已结账", "制表 token:2:finance", "审核", "批准", "¥1,000.00", "¥1,346.50", "本月在数据不完整时结账"],
    );
    for s in ["草稿", "DRAFT"] {
        assert!(!text.contains(s), "{s:?} on a closed month:\n{text}");
    }
    let en = pdf_text(&api, &fin, "/api/v1/exports/2026-10/statements.pdf?lang=en").await;
    assert!(!en.contains("DRAFT") && en.contains("closed") && en.contains("Prepared by token:2:finance"), "{en}");

    let budget = json!({"amount": "5000"});
    assert_eq!(api.call(Method::PUT, "/api/v1/budgets/2026-10/nlp", Some(&fin), Some(budget)).await.0, 200);
    let after = get(&api, &fin, "/api/v1/exports/2026-10/statements.pdf").await.1;
    assert!(after == before, "a closed month's PDF never changes");

    let url = {
        let name: String = sqlx::query_scalar("SELECT current_database()").fetch_one(&pool).await.unwrap();
        let base = std::env::var("DATABASE_URL").unwrap_or_else(|_| common::DEFAULT_DATABASE_URL.into());
        let mut url = url::Url::parse(&base).unwrap();
        url.set_path(&format!("/{name}"));
        url.to_string()
    };
    let out = tempfile::NamedTempFile::new().unwrap();
    common::run_cardhour_ok(
        ["export", "--month", "2026-10", "--format", "pdf", "--lang", "en", "--out", out.path().to_str().unwrap()],
        &[("DATABASE_URL", &url)],
    );
    let cli = pdftotext(&std::fs::read(out.path()).unwrap());
    assert_eq!(cli, en, "the CLI prints what the API serves");
}

fn statement(usage: Vec<UsageLine>, capacity: Vec<CapacityLine>, teams: &[String]) -> Statement {
    let policy = BillPolicy { mode: BillMode::Chargeback, unallocated: UnallocatedPolicy::KeptByPlatform };
    Statement {
        month: Month::new(2026, 11).unwrap(),
        status: MonthStatus::Open,
        closed_at: None,
        closed_by: None,
        bills: compute_month(&usage, &capacity, policy),
        restatements: Vec::new(),
        teams: teams
            .iter()
            .map(|t| (t.clone(), TeamInfo { name: format!("{t} 组"), owner: Some("张三".into()) }))
            .collect::<BTreeMap<_, _>>(),
        content_hash: None,
        close_override: None,
        layout: Layout::V3,
        frozen: None,
        unit_cost: None,
        adjustments: Vec::new(),
        pending_adjustments: Vec::new(),
        finance_codes: Vec::new(),
    }
}

fn usage(team: &str, ns: &str, kind: &str, hours: Decimal, rate: Decimal) -> UsageLine {
    UsageLine {
        team: team.into(),
        namespace: ns.into(),
        gpu_model: "A100-80GB".into(),
        kind: kind.into(),
        card_hours: hours,
        effective_card_hours: (hours * dec!(0.4)).round_dp(6),
        unmetered_card_hours: Decimal::ZERO,
        rate: RatePerCardHour::new(rate),
        whole_card_hours: None,
        unverified_node: false,
        finance: None,
    }
}

fn font() -> std::sync::Arc<FontChain> {
    FontChain::installed().expect("Noto Sans CJK (apt-get install -y fonts-noto-cjk)")
}

/// No node capacity seen: capacity cost, unallocated and platform kept read "unknown", never a negative amount or
/// −0.000 card-hours.
#[test]
fn capacity_unknown_reads_as_unknown() {
    let teams = vec!["nlp".to_string()];
    let st = statement(vec![usage("nlp", "nlp-prod", "hami", dec!(41.75), dec!(12.5))], Vec::new(), &teams);
    // without capacity the usage is all shortfall (issue 33), never a negative unallocated
    assert!(st.bills.unallocated.is_zero(), "{:?}", st.bills.unallocated);
    assert_eq!(st.bills.capacity_shortfall, Some(st.bills.allocated));
    let extras = StatementExtras {
        finance_summary: true,
        utilization: Some(cardhour::export::UtilizationFigures { gpu_hours: 41.75, ..Default::default() }),
        ..Default::default()
    };
    for (lang, unknown) in [(Lang::Zh, "未知（未采集到节点容量）"), (Lang::En, "unknown (no node capacity seen)")]
    {
        let text = pdftotext(&statement_pdf(&st, |_| true, &font(), &extras, lang).unwrap());
        assert!(text.contains(unknown) && text.contains("41.750"), "{text}");
        assert!(text.contains(lang.pick("HAMi 虚拟卡", "HAMi virtual card")), "{text}");
        assert!(!text.contains("−¥") && !text.contains("-0.000") && !text.contains("−0.000"), "{text}");
    }
}

/// A 100-team month: every page's last line is no heading (a heading is kept with its table), every team's
/// total is printed as ¥; the pages are written to `target/statement-100-teams.pdf` to be looked at.
#[test]
fn in_a_100_team_month_no_heading_ends_a_page() {
    let teams: Vec<String> = (0..100).map(|i| format!("team-{i:03}")).collect();
    let kinds = ["whole", "mig", "timeslice", "hami"];
    let mut lines = Vec::new();
    for (i, t) in teams.iter().enumerate() {
        for n in 0..(1 + i % 9) {
            let hours = Decimal::from(10 + (i * 37 + n * 11) % 900) + dec!(0.125);
            lines.push(usage(t, &format!("{t}-ns{n}"), kinds[(i + n) % 4], hours, dec!(12.5)));
        }
    }
    let capacity = vec![CapacityLine::fully_offered("A100-80GB", dec!(400000), RatePerCardHour::new(dec!(12.5)))];
    let st = statement(lines, capacity, &teams);
    let extras = StatementExtras { finance_summary: true, ..Default::default() };
    let view = statement_view(&st, |_| true, &extras, Lang::Zh);
    let mut headings: Vec<String> = Vec::new();
    for s in &view.sections {
        for b in &s.blocks {
            match b {
                Block::Title(t) => headings.push(t.clone()),
                Block::Table(t) => headings.extend(t.heading.clone()),
                Block::Chart { title, .. } => headings.push(title.clone()),
                _ => {}
            }
        }
    }
    let pdf = statement_pdf(&st, |_| true, &font(), &extras, Lang::Zh).unwrap();
    let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/statement-100-teams.pdf");
    // (a build into another CARGO_TARGET_DIR, as CI's cache, leaves no target/ here)
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    std::fs::write(&out, &pdf).unwrap();
    let text = pdftotext(&pdf);
    let pages: Vec<&str> = text.split('\u{c}').filter(|p| !p.trim().is_empty()).collect();
    assert!(pages.len() > 100, "a summary and a page per team at least: {}", pages.len());
    for (n, page) in pages.iter().enumerate() {
        let body: Vec<&str> = page.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        // the page number is the last line
        let last = body.iter().rev().find(|l| !l.contains(" / ")).unwrap();
        assert!(!headings.iter().any(|h| *last == h.as_str()), "page {}: ends with heading {last:?}", n + 1);
        assert!(body.iter().any(|l| l.contains("草稿")), "page {}: no draft marker", n + 1);
    }
    for t in &teams {
        let total = st.team_total(t).to_string();
        assert!(text.contains(&yuan(&total)), "{t}: {total}");
    }
}

/// The low-utilization top N carries money, model and owner, rounded for display; the idle list's money is what
/// was spent idle, and an ended pod projects nothing. By hand over 2026-10-05 00:00 – 10-12 03:00 UTC (rates at the
/// range's end, 2026-10-12: A100 12.5, H100 22.75): nlp-idle-pod 21 card-hours at 1 % = 20.79 wasted × 12.5 =
/// 259.875 → 259.88; nlp-llm-0 40 at 60 % = 16 × 22.75 = 364.00; vision-idle-pod 6.93 × 12.5 = 86.625 → 86.63;
/// vision-eval 3 × 22.75 = 68.25; nlp-dev-0 2.1 on the unpriced L40S = 0.
#[sqlx::test]
async fn low_utilization_rows_carry_money_model_and_owner(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let path = "/api/v1/reports/low-utilization?from=2026-10-05T00:00:00Z&to=2026-10-12T03:00:00Z&top=10";
    let (status, body) = api.call(Method::GET, path, Some(&api.finance), None).await;
    assert_eq!(status, 200, "{body}");
    let rows: Vec<(String, f64, String, String, Option<String>, String)> = body
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["pod"].as_str().unwrap().to_string(),
                r["wasted_gpu_hours"].as_f64().unwrap(),
                r["gpu_model"].as_str().unwrap().to_string(),
                r["wasted_amount"].as_str().unwrap().to_string(),
                r["rate"].as_str().map(str::to_string),
                r["owner"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = |pod: &str, h: f64, m: &str, a: &str, r: Option<&str>| {
        (pod.to_string(), h, m.to_string(), a.to_string(), r.map(str::to_string), "owner".to_string())
    };
    assert_eq!(
        rows,
        [
            want("nlp-idle-pod", 20.79, "A100-80GB", "259.88", Some("12.5000")),
            want("nlp-llm-0", 16.0, "H100-80GB", "364.00", Some("22.7500")),
            want("vision-idle-pod", 6.93, "A100-80GB", "86.63", Some("12.5000")),
            want("vision-eval", 3.0, "H100-80GB", "68.25", Some("22.7500")),
            want("nlp-dev-0", 2.1, "L40S", "0.00", None),
        ]
    );
    // every measured number is printed rounded: no float noise such as 0.010000000000000002
    let text = body.to_string();
    assert!(text.contains("\"utilization\":0.01,") && !text.contains("0000000"), "{text}");

    let (_, idle) = api
        .call(Method::GET, "/api/v1/idle?to=2026-10-12T03:00:00Z&include_ended=true", Some(&api.finance), None)
        .await;
    let nlp = idle.as_array().unwrap().iter().find(|p| p["pod"] == "nlp-idle-pod").expect("nlp-idle-pod is idle");
    // 10-05 03:00 on: 4 hours × 3 cards × 0.99 × 12.5; ended (it held no card in the window's last hour)
    assert_eq!((nlp["idle_spend"].as_str(), nlp["monthly_projection"].is_null()), (Some("148.50"), true), "{nlp}");
    assert_eq!(nlp["average_utilization"], json!(0.01), "{nlp}");
    assert!(!idle.to_string().contains("0000000"), "{idle}");
}
