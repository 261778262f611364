//! Issue 33, part A, on a Postgres of months stored as the ingest stores them:
//!
//! - Item 7: November compared with October like with like — under the view's policy (October, frozen under
//!   chargeback + spread, re-read kept by the platform) and from covered hours (3 of October's 744, 4 of
//!   November's 720), with what is compared said.
//! - Item 8: the idle list and the low-utilization report print one figure per pod for the same window; the idle
//!   list's totals are the money spent idle and, apart, the projection.
//! - Item 9: the month-wide CSV, workbook and PDF with a total row; the idle list and the reports as CSV and
//!   workbooks (read back with calamine); finance may issue API tokens, never an admin one.
//! - Items 10, 12: a closed month prints its times in the billing time zone, frozen with it (a server in another
//!   zone prints the same); the Chinese statement holds no English word but data and the allowed product names;
//!   a team whose name is its id is printed once.
//!
//! By hand (A100 12.5; two 8-card nodes): October (Shanghai) holds 3 hours on the 5th — vision 1 card = 37.50,
//! nlp 3 cards = 112.50, capacity 48 card-hours = 600.00, unallocated 450.00 spread 1 : 3 = 112.50 and 337.50.
//! November holds 2 hours on 10-31 16:00–18:00Z (vision 1, nlp 1) and 2 on 11-10 00:00–02:00Z (vision 1, nlp 2)
//! and one hour of an unassigned pod (1 card, 11-10 02:00Z): vision 50.00, nlp 75.00, unassigned 12.50, capacity
//! 5 h × 16 = 80 card-hours = 1,000.00.

use crate::common;

use std::collections::BTreeMap;
use std::io::Cursor;

use calamine::{Data, Reader, Xlsx};
use cardhour::access::{Credential, Principal, Role, Scope};
use cardhour::billing::{BillMode, BillPolicy, Month, PolicyChoice, UnallocatedPolicy};
use cardhour::glossary::{self, Lang};
use cardhour::metering::HourOutput;
use cardhour::usecase::{self, Services, months};
use chrono::{DateTime, Utc};
use common::api::{SEED_MODEL, TestApi, full_node, row};
use reqwest::Method;
use rust_decimal::Decimal;
use rust_decimal_macros::dec;
use serde_json::{Value, json};
use sqlx::PgPool;

async fn get(api: &TestApi, token: &str, path: &str) -> Vec<u8> {
    let r = api.client.get(format!("{}{path}", api.base)).bearer_auth(token).send().await.unwrap();
    let status = r.status().as_u16();
    let body = r.bytes().await.unwrap().to_vec();
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    body
}

fn csv_rows(bytes: &[u8]) -> Vec<BTreeMap<String, String>> {
    let body = bytes.strip_prefix("\u{feff}".as_bytes()).expect("UTF-8 with BOM");
    csv::Reader::from_reader(body).deserialize().map(Result::unwrap).collect()
}

fn pdftotext(pdf: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.pdf");
    std::fs::write(&path, pdf).unwrap();
    let out = std::process::Command::new("pdftotext").arg(&path).arg("-").output().expect("pdftotext (poppler-utils)");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

fn sheets(bytes: &[u8]) -> BTreeMap<String, Vec<Vec<Data>>> {
    let mut wb: Xlsx<_> = calamine::open_workbook_from_rs(Cursor::new(bytes.to_vec())).unwrap();
    let names = wb.sheet_names().to_vec();
    names
        .into_iter()
        .map(|n| {
            let range = wb.worksheet_range(&n).unwrap();
            let (h, w) = range.end().map_or((0, 0), |(r, c)| (r as usize + 1, c as usize + 1));
            let rows = (0..h)
                .map(|r| {
                    (0..w).map(|c| range.get_value((r as u32, c as u32)).cloned().unwrap_or(Data::Empty)).collect()
                })
                .collect();
            (n, rows)
        })
        .collect()
}

fn d(v: &str) -> Decimal {
    v.parse().unwrap_or_else(|e| panic!("{v:?}: {e}"))
}

/// Vision's pod with 1 card and nlp's with `nlp_cards`, 1 % busy with 8 GiB held.
fn teams(nlp_cards: f64) -> Vec<cardhour::metering::UsageRow> {
    vec![row("vision-train", "vision-pod", "vision", 1.0), row("nlp-prod", "nlp-pod", "nlp", nlp_cards)]
}

/// Stores `hours` hours from `from` of `rows` on two 8-card A100 nodes, as the ingest does.
async fn store(pool: &PgPool, from: &str, hours: i64, rows: Vec<cardhour::metering::UsageRow>) {
    let from: DateTime<Utc> = from.parse().unwrap();
    let out = HourOutput {
        interval_ms: Some(60_000),
        rows,
        capacity: vec![full_node("node-a", SEED_MODEL), full_node("node-b", SEED_MODEL)],
        ..HourOutput::default()
    };
    let hours: Vec<DateTime<Utc>> = (0..hours).map(|h| from + chrono::Duration::hours(h)).collect();
    let batch: Vec<cardhour::db::usage::HourRows> =
        hours.iter().map(|&hour| cardhour::db::usage::HourRows { hour, out: &out }).collect();
    cardhour::db::usage::ensure_month_partitions(pool, &hours).await.unwrap();
    let mut tx = pool.begin().await.unwrap();
    cardhour::db::clusters::upsert(&mut tx, "c1", "http://127.0.0.1:9").await.unwrap();
    for &h in &hours {
        cardhour::db::usage::lock_hour(&mut tx, "c1", h).await.unwrap();
    }
    cardhour::db::usage::replace_hours(&mut tx, "c1", &batch).await.unwrap();
    tx.commit().await.unwrap();
}

async fn seed(api: &TestApi) {
    common::months::rates_and_mappings(api).await;
    store(&api.pool, "2026-10-05T00:00:00Z", 3, teams(3.0)).await;
    store(&api.pool, "2026-10-31T16:00:00Z", 2, teams(1.0)).await;
    store(&api.pool, "2026-11-10T00:00:00Z", 2, teams(2.0)).await;
    // an hour of a pod no mapping and no label place: the `unassigned` team (no tier, no medal)
    let mut stray = row("scratch", "stray-pod", "unassigned", 1.0);
    stray.label_team = None;
    store(&api.pool, "2026-11-10T02:00:00Z", 1, vec![stray]).await;
    let close = json!({"mode": "chargeback", "unallocated": "spread_proportionally",
                       "override": {"reason": "no ingest run in this test"}});
    let (status, body) = api.call(Method::POST, "/api/v1/bills/2026-10/close", Some(&api.finance), Some(close)).await;
    assert_eq!(status, 201, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn month_end_figures_compare_like_with_like_and_every_export_adds_up_in_chinese() {
    let db = common::TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let fin = api.finance.clone();
    let services = Services::new(pool.clone(), chrono_tz::Asia::Shanghai);
    let (nov, now) = (Month::new(2026, 11).unwrap(), Utc::now());
    let all = Scope::all();

    // --- item 7: like with like
    let kept = months::overview(&services, &all, nov, PolicyChoice::NONE, now).await.unwrap();
    let c = &kept.comparison;
    assert_eq!((c.policy.mode.as_str(), c.policy.unallocated.as_str()), ("showback", "kept_by_platform"));
    assert!(c.previous_repoliced, "October froze chargeback + spread: re-read kept by the platform");
    assert_eq!(c.basis, months::ComparisonBasis::CoveredHours);
    assert_eq!((c.current_hours_covered, c.current_hours_of_month), (5, 720));
    assert_eq!((c.previous_hours_covered, c.previous_hours_of_month), (3, 744));
    // November kept: vision 50.00, nlp 75.00, unassigned 12.50 → 137.50 over 5 of 720 hours: × 144; October
    // kept: 37.50 and 112.50 = 150.00 over 3 of 744 hours: × 248
    assert_eq!(kept.total.as_decimal(), dec!(137.50));
    assert_eq!(c.current.as_decimal(), dec!(19800.00));
    assert_eq!(c.previous.as_decimal(), dec!(37200.00));
    let previous: BTreeMap<&str, Decimal> =
        kept.teams.iter().map(|t| (t.team.as_str(), t.previous.as_decimal())).collect();
    assert_eq!(previous, BTreeMap::from([("nlp", dec!(112.50)), ("unassigned", dec!(0)), ("vision", dec!(37.50))]));
    // the month's total row sums its team rows
    assert_eq!(kept.totals.total.as_decimal(), dec!(137.50));
    assert_eq!(kept.totals.allocated, kept.allocated);
    // under October's own policy nothing is re-read: spread, 150.00 and 450.00 × 248
    let spread = PolicyChoice::exactly(BillPolicy {
        mode: BillMode::Chargeback,
        unallocated: UnallocatedPolicy::SpreadProportionally,
    });
    let o = months::overview(&services, &all, nov, spread, now).await.unwrap();
    assert!(!o.comparison.previous_repoliced);
    assert_eq!(o.comparison.previous.as_decimal(), dec!(148800.00));
    // November spread: capacity 1,000.00 is what the teams carry; × 144
    assert_eq!((o.total.as_decimal(), o.comparison.current.as_decimal()), (dec!(1000.00), dec!(144000.00)));

    // --- item 8: one figure per pod, for the same window
    let window = "from=2026-11-03T02:00:00Z&to=2026-11-10T02:00:00Z";
    let idle: Value = serde_json::from_slice(
        &get(&api, &fin, "/api/v1/idle?to=2026-11-10T02:00:00Z&hours=168&include_ended=true").await,
    )
    .unwrap();
    let low: Value =
        serde_json::from_slice(&get(&api, &fin, &format!("/api/v1/reports/low-utilization?{window}")).await).unwrap();
    let by_pod = |v: &Value, field: &str| -> BTreeMap<String, String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|p| (p["pod"].as_str().unwrap().into(), p[field].as_str().unwrap().into()))
            .collect()
    };
    let (spent, wasted) = (by_pod(&idle, "idle_spend"), by_pod(&low, "wasted_amount"));
    // 2 h × 0.99 × 12.5 = 24.75 (vision), 4 card-hours × 0.99 × 12.5 = 49.50 (nlp)
    assert_eq!(spent["vision-pod"], "24.75");
    assert_eq!(spent["nlp-pod"], "49.50");
    for (pod, amount) in &spent {
        assert_eq!(wasted.get(pod), Some(amount), "{pod}: the idle list and the low-utilization report agree");
    }
    let rows = csv_rows(
        &get(&api, &fin, "/api/v1/exports/idle.csv?to=2026-11-10T02:00:00Z&hours=168&include_ended=true").await,
    );
    let (total, pods) = rows.split_last().unwrap();
    assert!(!pods.is_empty() && pods.iter().all(|r| r["window_from (Asia/Shanghai)"] == "2026-11-03T10:00:00+08:00"));
    let spent_sum: Decimal = pods.iter().map(|r| d(&r["idle_spend"])).sum();
    assert_eq!((total["window_from (Asia/Shanghai)"].as_str(), d(&total["idle_spend"])), ("total", spent_sum));
    // still running in the window's last stored hour: a projection, apart (vision 1 card × 12.5 × 730 h =
    // 9,125.00; nlp 2 cards: 18,250.00)
    let projected: BTreeMap<&str, &str> =
        pods.iter().map(|r| (r["pod"].as_str(), r["monthly_projection"].as_str())).collect();
    assert_eq!(projected, BTreeMap::from([("nlp-pod", "18250.00"), ("vision-pod", "9125.00")]));
    assert_eq!(total["monthly_projection"], "27375.00");
    let book = sheets(
        &get(&api, &fin, "/api/v1/exports/idle.xlsx?to=2026-11-10T02:00:00Z&hours=168&include_ended=true&lang=zh")
            .await,
    );
    let sheet = &book["闲置清单"];
    assert!(
        sheet.iter().any(|r| r[0] == Data::String("窗口开始".into())
            && r[1] == Data::String("2026-11-03 10:00 (Asia/Shanghai)".into()))
    );
    let total_row = sheet.iter().find(|r| r[0] == Data::String("合计".into())).expect("a total row");
    assert_eq!(total_row[13], Data::Float(spent_sum.to_string().parse().unwrap()));

    // --- item 9: the month-wide exports with their total rows
    let bills = csv_rows(&get(&api, &fin, "/api/v1/exports/2026-11/bills.csv").await);
    let last = bills.last().unwrap();
    assert_eq!((last["line_type"].as_str(), d(&last["amount"])), ("total", dec!(137.50)));
    let zh = String::from_utf8(get(&api, &fin, "/api/v1/exports/2026-11/bills.csv?lang=zh").await).unwrap();
    let header = zh.lines().next().unwrap();
    assert!(header.contains("行类型") && header.contains("卡时") && header.contains("金额（元）"), "{header}");
    assert!(
        zh.contains(",用量,") && zh.contains("展示成本/平台承担") && zh.contains(",未分配,") && zh.contains(",合计,"),
        "{zh}"
    );
    assert!(
        glossary::english_words(
            &zh,
            &["c1", "vision", "nlp", "unassigned", "vision-train", "nlp-prod", "scratch", "A100-80GB", "owner", "NLP"]
        )
        .is_empty(),
        "{zh}"
    );
    let book = sheets(&get(&api, &fin, "/api/v1/exports/2026-11/bills.xlsx").await);
    let summary = &book["汇总"];
    let team_total = summary.iter().find(|r| r[0] == Data::String("合计".into())).expect("the teams table's total row");
    assert_eq!(team_total[8], Data::Float(137.5));
    assert!(summary.iter().any(|r| r[1] == Data::String("展示成本".into())), "mode in words");
    let low_csv = csv_rows(&get(&api, &fin, &format!("/api/v1/exports/reports/low-utilization.csv?{window}")).await);
    let (low_total, low_rows) = low_csv.split_last().unwrap();
    let low_json: BTreeMap<String, String> = by_pod(&low, "wasted_amount");
    let low_file: BTreeMap<String, String> =
        low_rows.iter().map(|r| (r["pod"].clone(), r["wasted_amount"].clone())).collect();
    assert_eq!(low_file, low_json, "the CSV is the JSON");
    assert_eq!(d(&low_total["wasted_amount"]), low_json.values().map(|v| d(v)).sum::<Decimal>());
    let util = sheets(&get(&api, &fin, "/api/v1/exports/2026-11/utilization.xlsx").await);
    let days = &util["每日利用率"];
    let dated: Vec<String> = days
        .iter()
        .filter_map(|r| match &r[0] {
            Data::DateTime(d) => Some(d.as_datetime().unwrap().format("%Y-%m-%d").to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(dated, ["2026-11-01", "2026-11-10"], "a row per billing day with data");
    let month_row = days.iter().find(|r| r[0] == Data::String("合计".into())).unwrap();
    assert_eq!(month_row[3], Data::Float(11.0), "GPU-hours: vision 4 + nlp 6 + unassigned 1");
    assert!(util.contains_key("各团队利用率"));
    let tiers = csv_rows(&get(&api, &fin, "/api/v1/exports/2026-11/tiers.csv?lang=zh").await);
    let unassigned = tiers.iter().find(|r| r["团队"] == "unassigned").expect("the unassigned team is listed");
    assert_eq!(
        (unassigned["排名"].as_str(), unassigned["效率等级"].as_str(), unassigned["团队名称"].as_str()),
        ("", "无等级", "未分配")
    );
    assert!(tiers.iter().filter(|r| r["团队"] == "vision" || r["团队"] == "nlp").all(|r| r["效率等级"] == "铜牌"));
    let over = String::from_utf8(
        get(&api, &fin, "/api/v1/exports/reports/oversubscription.csv?from=2026-11-01&to=2026-11-11").await,
    )
    .unwrap();
    assert!(over.starts_with("\u{feff}level,day,cluster,node,gpu_model"), "{over}");
    assert!(over.contains("cluster,2026-11-10,c1,"), "{over}");
    // a team lead: its own idle pods; no cluster-wide report
    let lead_idle = String::from_utf8(
        get(&api, &api.lead, "/api/v1/exports/idle.csv?to=2026-11-10T02:00:00Z&hours=168&include_ended=true").await,
    )
    .unwrap();
    assert!(lead_idle.contains("vision-pod") && !lead_idle.contains("nlp"), "{lead_idle}");
    let r = api
        .client
        .get(format!("{}/api/v1/exports/2026-11/tiers.csv", api.base))
        .bearer_auth(&api.lead)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // finance issues API tokens (not admin ones)
    let finance = Principal { credential: Credential::User(7), name: "fin".into(), role: Role::Finance, teams: vec![] };
    let finance = cardhour::access::Writer::of(&finance).unwrap();
    let ask =
        |role| usecase::tokens::TokenRequest { name: "billing system".into(), role, teams: vec![], expires_at: None };
    let issued = usecase::tokens::create_as(&services, &finance, &ask(Role::Viewer)).await.unwrap();
    assert!(issued.secret.len() > 20);
    assert!(matches!(
        usecase::tokens::create_as(&services, &finance, &ask(Role::Admin)).await,
        Err(usecase::Error::Forbidden)
    ));
    let audit: String =
        sqlx::query_scalar("SELECT actor FROM audit_log WHERE action = 'token.create'").fetch_one(&pool).await.unwrap();
    assert_eq!(audit, "user:fin");

    // --- items 10, 12: the statement in Chinese, in the billing time zone, a team named once
    let (status, _) =
        api.call(Method::PUT, "/api/v1/teams/nlp", Some(&fin), Some(json!({"name": "nlp", "owner": "owner"}))).await;
    assert_eq!(status, 200);
    let draft = pdftotext(&get(&api, &fin, "/api/v1/exports/2026-11/statements.pdf").await);
    let flat = draft.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(!flat.contains("nlp nlp"), "a team whose name is its id is printed once:\n{draft}");
    assert!(flat.contains("(Asia/Shanghai)") && !flat.contains(" UTC"), "times in the billing time zone:\n{draft}");
    assert!(flat.contains("合计") && flat.contains("¥137.50"), "the total row:\n{draft}");
    assert!(flat.contains("未分配") && flat.contains("追溯调整"), "the glossary's words:\n{draft}");
    let close = json!({"mode": "showback", "unallocated": "kept_by_platform", "override": {"reason": "数据采集从 11 月 3 日开始"}});
    let (status, closed) = api.call(Method::POST, "/api/v1/bills/2026-11/close", Some(&fin), Some(close)).await;
    assert_eq!(status, 201, "{closed}");
    let zone: Option<String> =
        sqlx::query_scalar("SELECT snapshot->'extras'->>'time_zone' FROM closed_months WHERE month = '2026-11'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(zone.as_deref(), Some("Asia/Shanghai"));
    let closed_pdf = pdftotext(&get(&api, &fin, "/api/v1/exports/2026-11/statements.pdf").await);
    let closed_at: DateTime<Utc> = closed["closed_at"].as_str().unwrap().parse().unwrap();
    let local =
        closed_at.with_timezone(&chrono_tz::Asia::Shanghai).format("%Y-%m-%d %H:%M (Asia/Shanghai)").to_string();
    assert!(
        closed_pdf.contains(&format!("已结账 {local}")),
        "closed at, in the billing time zone: {local}\n{closed_pdf}"
    );
    // what stood in the way, in Chinese: the hours not ingested since the first
    assert!(closed_pdf.contains("小时未采集"), "{closed_pdf}");
    let data = [
        "c1",
        "vision",
        "nlp",
        "unassigned",
        "vision-train",
        "nlp-prod",
        "scratch",
        "A100-80GB",
        "owner",
        "vision-pod",
        "nlp-pod",
        "stray-pod",
        "token:2:finance",
        "Asia/Shanghai",
    ];
    let english = glossary::english_words(&closed_pdf, &data);
    assert!(english.is_empty(), "English on the Chinese statement: {english:?}\n{closed_pdf}");
    // the zone is frozen with the month: a server in UTC prints the closed month's times as the close did
    let utc = Services::new(pool.clone(), chrono_tz::UTC);
    let sel = usecase::statements::select(&utc, &all, nov, PolicyChoice::NONE, None).await.unwrap();
    let again = pdftotext(&usecase::exports::pdf(&utc, &sel, "x".into(), Lang::Zh).await.unwrap());
    assert_eq!(again, closed_pdf, "a closed month's text never changes with the setting");
}
