//! What a close freezes (SPEC §6), end to end on a real Postgres: a month closed by the release before layouts
//! (layout 1, `tests/fixtures/layout1/`, see its README) renders byte for byte as it did then, as do the months the
//! last releases of layouts 2, 3 and 4 closed (`tests/fixtures/layout2/` to `layout4/`); a month closed now is of
//! the current layout (5), freezes its PDF extras, and its CSV reconciles alone; data changing after a close changes no byte
//! and no ETag of any representation; each representation has its own ETag and answers 304 to it; altered frozen
//! extras are refused like an altered statement.
//!
//! Ground truth, by hand (A100 12.5; H100 20, then 22.75 from 2026-10-10; L40S unpriced; two 8-card nodes):
//! - September, 3 hours: vision 1 A100 = 3 card-hours = 37.50, nlp 2 A100 = 6 = 75.00; capacity A100 24 × 12.5 =
//!   300.00 + H100 24 × 20 = 480.00 = 780.00; unallocated 667.50, spread 1 : 2 = 222.50 and 445.00.
//! - October: the 5th, 7 hours: vision 1 A100 = 87.50, nlp 3 A100 = 262.50 and 4 H100 = 28 × 20 = 560.00; the 12th,
//!   3 hours: nlp 4 H100 = 12 × 22.75 = 273.00, vision 2 H100 = 136.50, nlp 1 L40S unpriced. Allocated 1319.50;
//!   capacity A100 80 × 12.5 = 1000.00, H100 56 × 20 = 1120.00 and 24 × 22.75 = 546.00 = 2666.00; unallocated (kept
//!   by the platform) 1346.50. September re-read with nlp at 3 cards restates +3 card-hours = 37.50 on October.
//! - Idle in October's last stored week (10-05 03:00 – 10-12 03:00 UTC): nlp-idle-pod 3 cards × 4 h × 0.99 × 12.5
//!   = 148.50, vision-idle-pod 49.50.

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use cardhour::billing::{Month, PolicyChoice};
use cardhour::export::Layout;
use cardhour::ledger::LedgerError;
use cardhour::metering::{CapacityRow, HourOutput, OfferedSource, UsageRow};
use chrono::{DateTime, Duration, Utc};
use common::api::TestApi;
use common::{TestDb, run_cardhour_ok};
use reqwest::Method;
use rust_decimal::Decimal;
use rust_decimal_macros::dec;
use serde_json::{Value, json};
use sqlx::PgPool;

const A100: &str = "NVIDIA A100-SXM4-80GB";
const H100: &str = "NVIDIA H100 80GB HBM3";
const L40S: &str = "NVIDIA L40S";

/// The golden fixture of a month closed under `layout` (`tests/fixtures/layout<N>/`).
fn fixtures_of(layout: u32) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures")).join(format!("layout{layout}"))
}

/// A pod's hour: `cards` of `model` at `util` (0–1) holding 8 GiB.
fn row(namespace: &str, pod: &str, team: &str, model: &str, cards: f64, util: f64) -> UsageRow {
    let node = if model == A100 { "node-a" } else { "node-h" };
    common::api::whole_cards((namespace, pod), Some(team), (model, node), cards, util)
}

/// Stores `hours` hours from `from` of `rows`, with two 8-card nodes (A100, H100) as capacity, both offered.
async fn store(pool: &PgPool, from: &str, hours: i64, rows: &[UsageRow]) {
    store_offering(pool, from, hours, rows, 8.0).await
}

/// [`store`] with the H100 node offering `h100_offered` of its 8 cards (0: cordoned).
async fn store_offering(pool: &PgPool, from: &str, hours: i64, rows: &[UsageRow], h100_offered: f64) {
    let from: DateTime<Utc> = from.parse().unwrap();
    for h in 0..hours {
        let out = HourOutput {
            interval_ms: Some(60_000),
            rows: rows.to_vec(),
            capacity: [("node-a", A100), ("node-h", H100)]
                .map(|(node, model)| CapacityRow {
                    node: node.into(),
                    gpu_model: model.into(),
                    cards: 8.0,
                    card_seconds: 8.0 * 3600.0,
                    offered_card_seconds: if model == H100 { h100_offered } else { 8.0 } * 3600.0,
                    offered_source: OfferedSource::Allocatable,
                })
                .to_vec(),
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

/// Rates and mappings: A100 12.5; H100 20, then 22.75 from 2026-10-10; L40S has no rate (unpriced).
async fn seed_rates(api: &TestApi) {
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
}

/// September's three hours: vision 1 A100, nlp 2 A100 (`nlp_cards`).
async fn seed_september(pool: &PgPool, nlp_cards: f64) {
    let rows = [
        row("vision-train", "vision-idle-pod", "vision", A100, 1.0, 0.01),
        row("nlp-prod", "nlp-idle-pod", "nlp", A100, nlp_cards, 0.01),
    ];
    store(pool, "2026-09-20T00:00:00Z", 3, &rows).await;
}

/// October: 7 hours on the 5th (two idle A100 pods, 4 busy H100) and 3 on the 12th (after the H100 rate change:
/// 4 busy H100 of nlp, 2 H100 of vision at 50 %, an unpriced L40S).
async fn seed_october(pool: &PgPool) {
    let fifth = [
        row("vision-train", "vision-idle-pod", "vision", A100, 1.0, 0.01),
        row("nlp-prod", "nlp-idle-pod", "nlp", A100, 3.0, 0.01),
        row("nlp-llm", "nlp-llm-0", "nlp", H100, 4.0, 0.6),
    ];
    store(pool, "2026-10-05T00:00:00Z", 7, &fifth).await;
    let twelfth = [
        row("nlp-llm", "nlp-llm-0", "nlp", H100, 4.0, 0.6),
        row("vision-train", "vision-eval", "vision", H100, 2.0, 0.5),
        row("nlp-dev", "nlp-dev-0", "nlp", L40S, 1.0, 0.3),
    ];
    store(pool, "2026-10-12T00:00:00Z", 3, &twelfth).await;
}

fn pdftotext(pdf: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.pdf");
    std::fs::write(&path, pdf).unwrap();
    let out = Command::new("pdftotext").arg("-layout").arg(&path).arg("-").output().expect("pdftotext (poppler-utils)");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// An answer: status, the headers that matter here, the body.
struct Answer {
    status: u16,
    etag: Option<String>,
    cache_control: Option<String>,
    body: Vec<u8>,
}

/// GET `path` with `token`, and `If-None-Match` when given.
async fn send(api: &TestApi, token: &str, path: &str, if_none_match: Option<&str>) -> Answer {
    let mut req = api.client.get(format!("{}{path}", api.base)).bearer_auth(token);
    if let Some(tag) = if_none_match {
        req = req.header("if-none-match", tag);
    }
    let resp = req.send().await.unwrap();
    let header = |name: &str| resp.headers().get(name).map(|v| v.to_str().unwrap().to_string());
    let (etag, cache_control) = (header("etag"), header("cache-control"));
    Answer { status: resp.status().as_u16(), etag, cache_control, body: resp.bytes().await.unwrap().to_vec() }
}

/// A 200's body, checked to carry its ETag (the sha256 of exactly these bytes).
async fn get(api: &TestApi, token: &str, path: &str) -> Vec<u8> {
    let a = send(api, token, path, None).await;
    assert_eq!(a.status, 200, "{path}: {}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.etag, Some(sha256(&a.body)), "{path}: the ETag is the hash of the body");
    a.body
}

/// `"<sha256 hex>"`, computed here independently.
fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    let hex: String = sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// The representations of October compared with the golden files: (file, token, path, is a PDF).
fn representations(api: &TestApi) -> Vec<(&'static str, String, &'static str, bool)> {
    let (fin, lead) = (api.finance.clone(), api.lead.clone());
    vec![
        ("month.json", fin.clone(), "/api/v1/bills/2026-10", false),
        ("month-lead.json", lead.clone(), "/api/v1/bills/2026-10", false),
        ("team-vision.json", fin.clone(), "/api/v1/bills/2026-10/teams/vision", false),
        ("team-nlp.json", fin.clone(), "/api/v1/bills/2026-10/teams/nlp", false),
        ("bills.csv", fin.clone(), "/api/v1/exports/2026-10/bills.csv", false),
        ("bills-nlp.csv", fin.clone(), "/api/v1/exports/2026-10/bills.csv?team=nlp", false),
        ("bills-lead.csv", lead.clone(), "/api/v1/exports/2026-10/bills.csv", false),
        ("statements.txt", fin, "/api/v1/exports/2026-10/statements.pdf", true),
        ("statements-lead.txt", lead, "/api/v1/exports/2026-10/statements.pdf", true),
    ]
}

const OCTOBER: &str = "2026-10";

fn october() -> Month {
    Month::new(2026, 10).unwrap()
}

/// The golden file `name` of the layout-1 fixture.
fn golden(name: &str) -> Vec<u8> {
    golden_of(1, name)
}

/// The golden file `name` of the fixture of `layout`.
fn golden_of(layout: u32, name: &str) -> Vec<u8> {
    std::fs::read(fixtures_of(layout).join(name)).unwrap_or_else(|e| panic!("layout{layout}/{name}: {e}"))
}

/// The fixture's October as the previous release stored it: its snapshot text verbatim, closed when and by whom
/// it was then.
async fn insert_layout1_october(pool: &PgPool) -> String {
    insert_october_of(pool, 1).await
}

/// The October of the fixture of `layout`, inserted as its release stored it.
async fn insert_october_of(pool: &PgPool, layout: u32) -> String {
    let golden = |name: &str| golden_of(layout, name);
    let snapshot = String::from_utf8(golden("snapshot.json")).unwrap();
    let closed: Value = serde_json::from_slice(&golden("closed.json")).unwrap();
    sqlx::query(
        "INSERT INTO closed_months (month, closed_at, closed_by, snapshot) VALUES ($1, $2::timestamptz, $3, $4::jsonb)",
    )
    .bind(OCTOBER)
    .bind(closed["closed_at"].as_str().unwrap())
    .bind(closed["closed_by"].as_str().unwrap())
    .bind(snapshot.trim_end())
    .execute(pool)
    .await
    .unwrap();
    snapshot.trim_end().to_string()
}

/// The body of a representation as compared: a PDF's text (`pdftotext -layout`), anything else its bytes.
async fn rendered(api: &TestApi, token: &str, path: &str, pdf: bool) -> Vec<u8> {
    let body = get(api, token, path).await;
    if pdf { pdftotext(&body).into_bytes() } else { body }
}

/// Layout 1 after layout 2 exists: the fixture month (stored by the release before, with the data it had) is
/// served exactly as that release served it — JSON and CSV byte for byte, the PDF's text line for line — by the
/// API and by the CLI; its content hash is still the sha256 of the stored text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout1_month_renders_as_its_release_did() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    seed_rates(&api).await;
    seed_september(&pool, 3.0).await;
    seed_october(&pool).await; // a layout-1 PDF computes its idle list and utilization from the data (as then)
    let text = insert_layout1_october(&pool).await;

    let st = cardhour::usecase::ledger::statement(&pool, october(), PolicyChoice::NONE).await.unwrap();
    assert_eq!((st.layout, st.frozen.is_none()), (Layout::V1, true), "a version-1 snapshot is layout 1");
    assert_eq!(st.content_hash.map(|h| format!("\"{h}\"")), Some(sha256(text.as_bytes())));
    let reps = representations(&api);
    assert_eq!(reps.len(), 9);
    for (file, token, path, pdf) in reps {
        let got = rendered(&api, &token, path, pdf).await;
        let want = golden(file);
        assert!(
            got == want,
            "{path} differs from {file}:\n--- now\n{}\n--- then\n{}",
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
    }
    // the CLI renders it as the API does
    let dir = tempfile::tempdir().unwrap();
    for (format, file, golden_file) in [("csv", "o.csv", "bills.csv"), ("pdf", "o.pdf", "statements.txt")] {
        let out = dir.path().join(file);
        run_cardhour_ok(["export", "--month", OCTOBER, "--format", format, "--out", out.to_str().unwrap()], &db.env());
        let bytes = std::fs::read(&out).unwrap();
        let got = if format == "pdf" { pdftotext(&bytes).into_bytes() } else { bytes };
        assert!(got == golden(golden_file), "cardhour export --format {format} differs from {golden_file}");
    }
}

/// Layout 2 after layout 3 exists: October as the last release of layout 2 closed it (`tests/fixtures/layout2/`,
/// see its README; written by `write_layout2_fixture` on that code) is served as it was then — JSON and CSV byte
/// for byte, the PDF's text line for line — by the API and by the CLI. Its PDF's idle list and utilization are
/// the frozen ones: the data seeded here is the fixture's, but none of it is read for the PDF.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout2_month_renders_as_its_release_did() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    seed_rates(&api).await;
    seed_september(&pool, 3.0).await;
    seed_october(&pool).await;
    let text = insert_october_of(&pool, 2).await;

    let st = cardhour::usecase::ledger::statement(&pool, october(), PolicyChoice::NONE).await.unwrap();
    assert_eq!((st.layout, st.frozen.is_some()), (Layout::V2, true), "the fixture is a layout-2 month");
    assert_eq!(st.content_hash.map(|h| format!("\"{h}\"")), Some(sha256(text.as_bytes())));
    let reps = representations(&api);
    assert_eq!(reps.len(), 9);
    for (file, token, path, pdf) in reps {
        let got = rendered(&api, &token, path, pdf).await;
        let want = golden_of(2, file);
        assert!(
            got == want,
            "{path} differs from layout2/{file}:\n--- now\n{}\n--- then\n{}",
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
    }
    let dir = tempfile::tempdir().unwrap();
    for (format, file, golden_file) in [("csv", "o.csv", "bills.csv"), ("pdf", "o.pdf", "statements.txt")] {
        let out = dir.path().join(file);
        run_cardhour_ok(["export", "--month", OCTOBER, "--format", format, "--out", out.to_str().unwrap()], &db.env());
        let bytes = std::fs::read(&out).unwrap();
        let got = if format == "pdf" { pdftotext(&bytes).into_bytes() } else { bytes };
        assert!(got == golden_of(2, golden_file), "cardhour export --format {format} differs from {golden_file}");
    }
}

/// Writes `tests/fixtures/layout2/` from the code of the last release of layout 2 (run once, by hand, on that
/// code: `cargo test --test suite frozen_layout::write_layout2_fixture -- --ignored`). Never rerun on a later layout:
/// the files are what layout 2 served.
#[sqlx::test]
#[ignore = "writes the layout-2 golden fixture; run by hand on the code of layout 2 only"]
async fn write_layout2_fixture(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    two_months(&api).await;
    close_october(&api).await;
    write_fixture(&api, 2, representations(&api)).await;
}

/// Rates, September closed (spread over the teams) and changed after, October's data.
async fn two_months(api: &TestApi) {
    let fin = Some(api.finance.as_str());
    seed_rates(api).await;
    seed_september(&api.pool, 2.0).await;
    let close = json!({"mode": "showback", "unallocated": "spread_proportionally",
                       "override": {"reason": "no ingest run in this test"}});
    let (status, body) = api.call(Method::POST, "/api/v1/bills/2026-09/close", fin, Some(close)).await;
    assert_eq!(status, 201, "{body}");
    seed_september(&api.pool, 3.0).await;
    seed_october(&api.pool).await;
}

/// October closed now (under the current layout), kept by the platform.
async fn close_october(api: &TestApi) {
    let close = json!({"mode": "showback", "unallocated": "kept_by_platform", "override": {"reason": "no ingest run in this test"}});
    let (status, body) = api.call(Method::POST, "/api/v1/bills/2026-10/close", Some(&api.finance), Some(close)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["layout"], Layout::CURRENT.number(), "{body}");
}

fn csv_rows(bytes: &[u8]) -> Vec<BTreeMap<String, String>> {
    let body = bytes.strip_prefix("\u{feff}".as_bytes()).expect("UTF-8 with BOM");
    csv::Reader::from_reader(body).deserialize().map(Result::unwrap).collect()
}

fn amount(r: &BTreeMap<String, String>) -> Decimal {
    r["amount"].parse().unwrap_or_else(|e| panic!("{r:?}: {e}"))
}

/// The amounts of the rows of `line_type`.
fn amounts(rows: &[BTreeMap<String, String>], line_type: &str) -> Vec<Decimal> {
    rows.iter().filter(|r| r["line_type"] == line_type).map(amount).collect()
}

/// A month's CSV of layout 2 reconciles alone, to the fen: Σ usage + Σ unallocated_share + platform_kept = Σ
/// capacity, and Σ usage + unallocated + not_offered = Σ capacity. Returns (Σ capacity, unallocated, not offered,
/// platform kept).
fn reconcile(rows: &[BTreeMap<String, String>]) -> (Decimal, Decimal, Decimal, Decimal) {
    let sum = |t: &str| -> Decimal { amounts(rows, t).into_iter().sum() };
    let (capacity, usage, shares) = (sum("capacity"), sum("usage"), sum("unallocated_share"));
    let one = |t: &str| -> Decimal {
        let [a] = amounts(rows, t)[..] else { panic!("one {t} row: {rows:?}") };
        a
    };
    let (unallocated, not_offered, kept) = (one("unallocated"), one("not_offered"), one("platform_kept"));
    assert!(capacity > Decimal::ZERO && usage > Decimal::ZERO, "{rows:?}");
    assert_eq!(usage + shares + kept, capacity, "Σ usage {usage} + Σ shares {shares} + kept {kept}");
    assert_eq!(usage + unallocated + not_offered, capacity, "Σ usage + unallocated + not offered");
    (capacity, unallocated, not_offered, kept)
}

/// A month closed now: a version-2 snapshot of the current layout (6) with the extras (and the time zone) frozen;
/// its CSV writes months so a spreadsheet keeps them text, card-hours with 6 decimals, and ends with the cluster rows,
/// which reconcile with the teams' to the fen, then the total row. Without serving pods it freezes an empty unit
/// cost and prints none: its CSV has layout 4's columns.
#[sqlx::test]
async fn a_month_closed_now_is_layout_6_and_its_csv_reconciles_alone(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    two_months(&api).await;
    let (fin, lead) = (api.finance.clone(), api.lead.clone());
    // layout 6: every line's id, the same on the draft and after the close, in the CSV and the JSON
    let line = |r: &BTreeMap<String, String>| {
        let key = ["line_type", "team", "original_month", "namespace", "gpu_model", "kind", "rate"];
        key.map(|k| r[k].clone()).join("|")
    };
    let ids_of = |rows: &[BTreeMap<String, String>]| -> BTreeMap<String, String> {
        rows.iter().map(|r| (line(r), r["line_id"].clone())).collect()
    };
    let draft = csv_rows(&get(&api, &fin, "/api/v1/exports/2026-10/bills.csv").await);
    close_october(&api).await;

    let stored: Value = sqlx::query_scalar("SELECT snapshot FROM closed_months WHERE month = '2026-10'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!((stored["version"].as_u64(), stored["layout"].as_u64()), (Some(2), Some(6)));
    let st = cardhour::usecase::ledger::statement(&pool, october(), PolicyChoice::NONE).await.unwrap();
    assert_eq!(st.layout, Layout::V6);
    let frozen = st.frozen.clone().expect("layout 2 on freezes the extras");
    assert_eq!(frozen.time_zone.as_deref(), Some("Asia/Shanghai"), "layout 4 freezes the zone its times print in");
    assert_eq!(frozen.unit_cost, Some(Default::default()), "layout 5 freezes the unit cost: no team served");
    let idle: Vec<(&str, &str, String)> =
        frozen.idle.iter().map(|p| (p.team.as_str(), p.pod.as_str(), p.idle_spend.to_string())).collect();
    assert_eq!(idle, [("nlp", "nlp-idle-pod", "148.50".into()), ("vision", "vision-idle-pod", "49.50".into())]);
    // 10 hours of 16 cards; 77 GPU-hours held (4 + 4 + 8 cards × 7 h, 4 + 2 + 1 × 3 h)
    assert_eq!((frozen.utilization.capacity_card_hours, frozen.utilization.gpu_hours), (160.0, 77.0));

    let bytes = get(&api, &fin, "/api/v1/exports/2026-10/bills.csv").await;
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(!text.contains("unit_cost") && !text.contains("total_tokens"), "no team served: {text}");
    // RFC 4180: the formula's quotes doubled inside a quoted field
    assert!(text.lines().nth(1).unwrap().starts_with("\"=\"\"2026-10\"\"\",closed,usage,,nlp,"), "{text}");
    let rows = csv_rows(&bytes);
    assert!(!rows.is_empty() && rows.iter().all(|r| r["month"] == "=\"2026-10\""), "{rows:?}");
    let (total_row, lines) = rows.split_last().unwrap();
    assert_eq!((total_row["line_type"].as_str(), total_row["line_id"].as_str()), ("total", ""), "a sum is no line");
    let ids = ids_of(lines);
    assert_eq!(ids.len(), lines.len(), "one row per line");
    let distinct: std::collections::BTreeSet<&String> = ids.values().collect();
    assert_eq!(distinct.len(), lines.len(), "every line its own id: {ids:?}");
    assert!(ids.values().all(|id| !id.is_empty()), "{ids:?}");
    // the draft's lines had the ids the closed month's have (the figures may move; what a line is does not)
    let draft_ids = ids_of(&draft);
    assert!(!draft_ids.is_empty());
    let mut compared = 0;
    for (key, id) in &draft_ids {
        if let Some(closed) = ids.get(key) {
            assert_eq!(closed, id, "{key}");
            compared += 1;
        }
    }
    // every usage line of the draft is a line of the closed month (the figures of October do not move at its close)
    let usage = draft_ids.keys().filter(|k| k.starts_with("usage|")).count();
    assert!(usage > 0 && compared >= usage, "{compared} of {} draft lines found closed", draft_ids.len());
    // the JSON view of a team names its statement and each line by the same ids
    let nlp: Value = serde_json::from_slice(&get(&api, &fin, "/api/v1/bills/2026-10/teams/nlp").await).unwrap();
    assert_eq!(nlp["id"], "2026-10/nlp");
    let json_ids: Vec<&str> = nlp["lines"].as_array().unwrap().iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert!(!json_ids.is_empty());
    for id in &json_ids {
        assert!(rows.iter().any(|r| r["team"] == "nlp" && r["line_id"] == *id), "{id} not in the CSV");
    }
    let restated: Vec<_> = rows.iter().filter(|r| r["line_type"] == "restatement").collect();
    assert!(!restated.is_empty() && restated.iter().all(|r| r["original_month"] == "=\"2026-09\""));
    // September was spread: nlp's 3 more card-hours (+37.50) shift the shares (vision 222.50 → 157.50, nlp 445.00
    // → 472.50): nlp +65.00, vision −65.00
    let mut by_team: BTreeMap<&str, Decimal> = BTreeMap::new();
    for r in &restated {
        *by_team.entry(r["team"].as_str()).or_default() += amount(r);
    }
    assert_eq!(by_team, BTreeMap::from([("nlp", dec!(65.00)), ("vision", dec!(-65.00))]));
    let capacity: Vec<(String, String, String, String)> = rows
        .iter()
        .filter(|r| r["line_type"] == "capacity")
        .map(|r| (r["gpu_model"].clone(), r["card_hours"].clone(), r["rate"].clone(), r["amount"].clone()))
        .collect();
    let row = |m: &str, h: &str, r: &str, a: &str| (m.to_string(), h.to_string(), r.to_string(), a.to_string());
    assert_eq!(
        capacity,
        [
            row("A100-80GB", "80.000000", "12.5000", "1000.00"),
            row("H100-80GB", "56.000000", "20.0000", "1120.00"),
            row("H100-80GB", "24.000000", "22.7500", "546.00")
        ]
    );
    assert!(rows.iter().filter(|r| r["team"].is_empty()).all(|r| r["owner"].is_empty() && r["namespace"].is_empty()));
    assert_eq!(amounts(&rows, "usage").into_iter().sum::<Decimal>(), dec!(1319.50));
    assert_eq!(reconcile(&rows), (dec!(2666.00), dec!(1346.50), dec!(0), dec!(1346.50)));
    // the total row: Σ team totals (1,160.50 + 159.00) and card-hours (64 + 13), last
    let total = rows.last().unwrap();
    assert_eq!((total["line_type"].as_str(), total["amount"].as_str()), ("total", "1319.50"));
    assert_eq!(total["card_hours"], "77.000000");
    // one number format per column kind: card-hours 6 decimals, rates 4, amounts 2
    for r in &rows {
        for (col, dp) in [("card_hours", 6), ("effective_card_hours", 6), ("rate", 4), ("amount", 2)] {
            let v = &r[col];
            assert!(v.is_empty() || v.split_once('.').is_some_and(|(_, f)| f.len() == dp), "{col} {v:?} in {r:?}");
        }
    }
    // September, spread over the teams: the shares carry the unallocated part, the platform keeps nothing
    let sept = csv_rows(&get(&api, &fin, "/api/v1/exports/2026-09/bills.csv").await);
    assert_eq!(amounts(&sept, "unallocated_share"), [dec!(445.00), dec!(222.50)]);
    assert_eq!(reconcile(&sept), (dec!(780.00), dec!(667.50), dec!(0), dec!(0)));
    // an export of some teams has no cluster row: a team lead sees no cluster figure, one team cannot reconcile
    for (token, path) in
        [(&lead, "/api/v1/exports/2026-10/bills.csv"), (&fin, "/api/v1/exports/2026-10/bills.csv?team=nlp")]
    {
        let rows = csv_rows(&get(&api, token, path).await);
        let (total, lines) = rows.split_last().unwrap();
        assert_eq!(total["line_type"], "total");
        assert!(!lines.is_empty() && lines.iter().all(|r| !r["team"].is_empty() && r["month"] == "=\"2026-10\""));
    }
    // the CLI writes the same bytes
    let out = tempfile::NamedTempFile::new().unwrap();
    let url = common::db_url(&pool).await;
    run_cardhour_ok(["export", "--month", OCTOBER, "--out", out.path().to_str().unwrap()], &[("DATABASE_URL", &url)]);
    assert!(std::fs::read(out.path()).unwrap() == bytes, "cardhour export writes what the API serves");

    // the JSON views say their layout; the PDF prints the frozen idle pods and utilization
    let month: Value = serde_json::from_slice(&get(&api, &fin, "/api/v1/bills/2026-10").await).unwrap();
    assert_eq!((month["layout"].as_u64(), month["platform_kept"].as_str()), (Some(6), Some("1346.50")));
    let team: Value = serde_json::from_slice(&get(&api, &lead, "/api/v1/bills/2026-10/teams/vision").await).unwrap();
    // 87.50 + 136.50, restated −65.00
    assert_eq!((team["layout"].as_u64(), team["total"].as_str()), (Some(6), Some("159.00")));
    assert!(team.get("unit_cost").is_none(), "no serving pods, no unit cost: {team}");
    let pdf = pdftotext(&get(&api, &fin, "/api/v1/exports/2026-10/statements.pdf").await);
    for s in ["nlp-idle-pod", "¥148.50", "vision-idle-pod", "¥49.50", "160.000", "77.000", "¥2,666.00", "¥1,346.50"]
    {
        assert!(pdf.contains(s), "{s:?} missing from the PDF:\n{pdf}");
    }
    let lead_pdf = pdftotext(&get(&api, &lead, "/api/v1/exports/2026-10/statements.pdf").await);
    assert!(lead_pdf.contains("vision-idle-pod") && lead_pdf.contains("49.50"), "{lead_pdf}");
    for s in ["nlp-idle-pod", "148.50", "160.000", "分配率", "2,666.00"] {
        assert!(!lead_pdf.contains(s), "{s:?} in the team lead's PDF:\n{lead_pdf}");
    }
}

/// Every representation of October for (finance, team lead): path, token.
fn october_paths(api: &TestApi) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for token in [&api.finance, &api.lead] {
        for path in [
            "/api/v1/bills/2026-10",
            "/api/v1/bills/2026-10/teams/vision",
            "/api/v1/exports/2026-10/bills.csv",
            "/api/v1/exports/2026-10/statements.pdf",
        ] {
            out.push((path.to_string(), token.clone()));
        }
    }
    out
}

/// Later data — another hour with a new idle pod, a new rate, a renamed team — changes nothing of a closed month:
/// not a byte, not an ETag, in this server or a fresh one, the PDF's idle list included (the live list moved). An
/// open month's ETag follows its data.
#[sqlx::test]
async fn data_after_a_close_changes_no_byte_and_no_etag(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    two_months(&api).await;
    let fin = api.finance.clone();

    // open, October's answers change with its data and say so
    let open = send(&api, &fin, "/api/v1/bills/2026-10", None).await;
    assert_eq!(open.cache_control.as_deref(), Some("private, no-cache"));
    store(&pool, "2026-10-12T03:00:00Z", 1, &[row("nlp-prod", "nlp-batch", "nlp", A100, 1.0, 0.5)]).await;
    let moved = send(&api, &fin, "/api/v1/bills/2026-10", None).await;
    assert!(open.etag.is_some() && moved.etag != open.etag, "an open month's ETag follows its data");
    assert_eq!(send(&api, &fin, "/api/v1/bills/2026-10", open.etag.as_deref()).await.status, 200, "stale ETag");

    close_october(&api).await;
    let mut before = Vec::new();
    for (path, token) in october_paths(&api) {
        let a = send(&api, &token, &path, None).await;
        assert_eq!(a.status, 200, "{path}");
        assert_eq!(a.cache_control.as_deref(), Some("private, max-age=31536000, immutable"), "{path}");
        before.push((path, token, a.etag.unwrap(), a.body));
    }
    let idle_path = "/api/v1/idle?to=2026-10-12T05:00:00Z&include_ended=true";
    let (_, idle_then) = api.call(Method::GET, idle_path, Some(&fin), None).await;

    // later: a late hour with a new idle pod, a new A100 rate for October, a renamed team
    store(&pool, "2026-10-12T04:00:00Z", 1, &[row("vision-train", "vision-late-idle", "vision", A100, 2.0, 0.02)])
        .await;
    let rate = json!({"gpu_model": "A100-80GB", "effective_from": "2026-10-01", "rate": "15"});
    assert_eq!(api.call(Method::POST, "/api/v1/rates", Some(&fin), Some(rate)).await.0, 201);
    let rename = json!({"name": "视觉组（新）", "owner": "someone else"});
    assert_eq!(api.call(Method::PUT, "/api/v1/teams/vision", Some(&fin), Some(rename)).await.0, 200);
    let (_, idle_now) = api.call(Method::GET, idle_path, Some(&fin), None).await;
    assert!(idle_now.to_string().contains("vision-late-idle") && idle_now != idle_then, "the live list moved");
    // … which November restates
    let (_, november) = api.call(Method::GET, "/api/v1/bills/2026-11", Some(&fin), None).await;
    let restated: Vec<&str> =
        november["teams"].as_array().unwrap().iter().map(|t| t["restated"].as_str().unwrap()).collect();
    assert!(!restated.is_empty() && restated.iter().all(|r| *r != "0"), "{november}");

    for api in [&api, &TestApi::start(pool.clone()).await] {
        for (path, token, etag, body) in &before {
            let a = send(api, token, path, None).await;
            assert_eq!(a.status, 200, "{path}");
            assert_eq!(a.etag.as_ref(), Some(etag), "{path}: the ETag of a closed month never changes");
            assert!(a.body == *body, "{path}: a closed month's bytes never change");
        }
    }
    let pdf = pdftotext(&before.iter().find(|b| b.0.ends_with(".pdf")).unwrap().3);
    assert!(pdf.contains("nlp-idle-pod") && !pdf.contains("vision-late-idle") && !pdf.contains("（新）"), "{pdf}");
}

/// Each representation has its own strong ETag; `If-None-Match` with it is a 304 without a body (also as `*`, weak,
/// or in a list), with any other a 200.
#[sqlx::test]
async fn each_representation_has_its_etag_and_answers_304_to_it(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    two_months(&api).await;
    close_october(&api).await;
    let answers: Vec<(String, String, Answer)> = {
        let mut out = Vec::new();
        for (path, token) in october_paths(&api) {
            let a = send(&api, &token, &path, None).await;
            out.push((path, token, a));
        }
        out
    };
    let mut tags: Vec<&str> = answers.iter().map(|(_, _, a)| a.etag.as_deref().unwrap()).collect();
    assert_eq!(tags.len(), 8);
    tags.sort();
    tags.dedup();
    // month JSON, team JSON, CSV and PDF, finance's and the lead's: seven ETags, as a team's statement is the same
    // answer for both (its bytes, so its ETag)
    assert_eq!(tags.len(), 7, "{tags:?}");
    let team = |token: &str| &answers.iter().find(|(p, t, _)| p.ends_with("/teams/vision") && t == token).unwrap().2;
    assert!(team(&api.finance).body == team(&api.lead).body);
    for (i, (path, token, a)) in answers.iter().enumerate() {
        let etag = a.etag.clone().unwrap();
        assert_eq!(etag, sha256(&a.body));
        let other = answers[(i + 1) % answers.len()].2.etag.clone().unwrap();
        for hit in [etag.clone(), format!("W/{etag}"), format!("{other}, {etag}"), "*".to_string()] {
            let n = send(&api, token, path, Some(&hit)).await;
            assert_eq!(n.status, 304, "{path} with {hit}");
            assert!(n.body.is_empty(), "{path}: a 304 has no body");
            assert_eq!(n.etag.as_ref(), Some(&etag), "{path}");
            assert_eq!(n.cache_control.as_deref(), Some("private, max-age=31536000, immutable"));
        }
        let miss = send(&api, token, path, Some(&other)).await;
        assert_eq!((miss.status, miss.etag.as_ref()), (200, Some(&etag)), "{path} with a stale ETag");
        assert!(miss.body == a.body);
    }
}

/// The content hash covers the frozen extras: it is the sha256 of the whole stored text, extras included, and an
/// idle pod's figure altered in the database behind the application makes the month unreadable, as an altered bill.
#[sqlx::test]
async fn altered_frozen_extras_are_refused(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    two_months(&api).await;
    close_october(&api).await;
    let (text, stored): (String, String) =
        sqlx::query_as("SELECT snapshot::text, content_hash FROM closed_months WHERE month = '2026-10'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(text.contains("\"extras\"") && text.contains("nlp-idle-pod"), "{text}");
    assert_eq!(format!("\"{stored}\""), sha256(text.as_bytes()));
    assert_eq!(send(&api, &api.finance, "/api/v1/exports/2026-10/statements.pdf", None).await.status, 200);

    for (path, value) in [("{extras,idle,0,idle_spend}", "\"0.01\""), ("{extras,utilization,gpu_hours}", "1")] {
        let mut conn = pool.acquire().await.unwrap();
        sqlx::query("SET session_replication_role = replica").execute(&mut *conn).await.unwrap();
        let changed = sqlx::query(&format!(
            "UPDATE closed_months SET snapshot = jsonb_set(snapshot, '{path}', '{value}') WHERE month = '2026-10'"
        ))
        .execute(&mut *conn)
        .await
        .unwrap();
        assert_eq!(changed.rows_affected(), 1);
        sqlx::query("RESET session_replication_role").execute(&mut *conn).await.unwrap();
        drop(conn);
        match cardhour::usecase::ledger::statement(&pool, october(), PolicyChoice::NONE).await {
            Err(LedgerError::Integrity { stored: s, actual, .. }) => assert!(s == stored && actual != stored),
            other => panic!("{path} altered: the month must be refused, got {other:?}"),
        }
        let fresh = TestApi::start(pool.clone()).await;
        for path in
            ["/api/v1/exports/2026-10/statements.pdf", "/api/v1/exports/2026-10/bills.csv", "/api/v1/bills/2026-10"]
        {
            let a = send(&fresh, &fresh.finance, path, None).await;
            assert_eq!(a.status, 500, "{path}");
            assert!(!String::from_utf8_lossy(&a.body).contains("0.01"));
        }
    }
}

/// Capacity not offered (a cordoned node) is a layout-2 figure: its own CSV row, which the CSV reconciles with, the
/// JSON's `not_offered` and the PDF's line; October with the H100 node cordoned for one more hour (2026-10-12
/// 03:00, after the rate change): 8 card-hours × 22.75 = 182.00 not offered. Capacity: A100 88 × 12.5 = 1100.00,
/// H100 56 × 20 = 1120.00 and 32 × 22.75 = 728.00 = 2948.00; unallocated 2948.00 − 182.00 − 1319.50 = 1446.50;
/// kept by the platform 1628.50.
#[sqlx::test]
async fn capacity_not_offered_has_its_row_and_reconciles(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    two_months(&api).await;
    store_offering(&pool, "2026-10-12T03:00:00Z", 1, &[], 0.0).await;
    close_october(&api).await;
    let fin = api.finance.clone();
    let rows = csv_rows(&get(&api, &fin, "/api/v1/exports/2026-10/bills.csv").await);
    assert_eq!(reconcile(&rows), (dec!(2948.00), dec!(1446.50), dec!(182.00), dec!(1628.50)));
    let month: Value = serde_json::from_slice(&get(&api, &fin, "/api/v1/bills/2026-10").await).unwrap();
    assert_eq!((month["not_offered"].as_str(), month["platform_kept"].as_str()), (Some("182.00"), Some("1628.50")));
    let pdf = pdftotext(&get(&api, &fin, "/api/v1/exports/2026-10/statements.pdf?lang=en").await);
    for s in ["Not offered (kept by the platform)", "¥182.00", "Not offered card-hours", "8.000", "¥1,628.50"] {
        assert!(pdf.contains(s), "{s:?} missing from the PDF:\n{pdf}");
    }
}

/// The representations of a layout-3 month compared with its golden files: those of layout 2 (the PDF in zh-CN, its
/// default), the English PDF, and the workbooks byte for byte.
fn representations3(api: &TestApi) -> Vec<(&'static str, String, &'static str, bool)> {
    let (fin, lead) = (api.finance.clone(), api.lead.clone());
    let mut reps = representations(api);
    reps.extend([
        ("statements-en.txt", fin.clone(), "/api/v1/exports/2026-10/statements.pdf?lang=en", true),
        ("statements-lead-en.txt", lead.clone(), "/api/v1/exports/2026-10/statements.pdf?lang=en", true),
        ("bills.xlsx", fin.clone(), "/api/v1/exports/2026-10/bills.xlsx", false),
        ("bills-nlp.xlsx", fin, "/api/v1/exports/2026-10/bills.xlsx?team=nlp", false),
        ("bills-lead.xlsx", lead, "/api/v1/exports/2026-10/bills.xlsx", false),
    ]);
    reps
}

/// Writes `tests/fixtures/layout3/` from the code of the last release of layout 3 (run once, by hand, on that
/// code: `cargo test --test suite frozen_layout::write_layout3_fixture -- --ignored`). Never rerun on a later layout:
/// the files are what layout 3 served.
#[sqlx::test]
#[ignore = "writes the layout-3 golden fixture; run by hand on the code of layout 3 only"]
async fn write_layout3_fixture(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    two_months(&api).await;
    close_october(&api).await;
    write_fixture(&api, 3, representations3(&api)).await;
}

/// Writes October as the code running closed it into `tests/fixtures/layout<layout>/`: its snapshot as stored, when
/// and by whom it was closed, and every representation of `reps` (the body of each `write_layout<N>_fixture`).
async fn write_fixture(api: &TestApi, layout: u32, reps: Vec<(&'static str, String, &'static str, bool)>) {
    let dir = fixtures_of(layout);
    std::fs::create_dir_all(&dir).unwrap();
    let (snapshot, closed_at, closed_by): (String, String, String) = sqlx::query_as(
        "SELECT snapshot::text, to_json(closed_at)#>>'{}', closed_by FROM closed_months WHERE month = '2026-10'",
    )
    .fetch_one(&api.pool)
    .await
    .unwrap();
    std::fs::write(dir.join("snapshot.json"), format!("{snapshot}\n")).unwrap();
    let closed = json!({"closed_at": closed_at, "closed_by": closed_by});
    std::fs::write(dir.join("closed.json"), format!("{}\n", serde_json::to_string_pretty(&closed).unwrap())).unwrap();
    for (file, token, path, pdf) in reps {
        std::fs::write(dir.join(file), rendered(api, &token, path, pdf).await).unwrap();
    }
}

/// Requires `reps` of the October inserted from `tests/fixtures/layout<layout>/` to be served as that release served
/// them — JSON, CSV and workbooks byte for byte, the PDF's text line for line — by the API, and the CLI's CSV, PDF
/// and workbook too.
async fn renders_as_released(
    api: &TestApi,
    env: &[(&str, &str)],
    layout: u32,
    reps: Vec<(&'static str, String, &'static str, bool)>,
) {
    for (file, token, path, pdf) in reps {
        let got = rendered(api, &token, path, pdf).await;
        let want = golden_of(layout, file);
        assert!(
            got == want,
            "{path} differs from layout{layout}/{file}:\n--- now\n{}\n--- then\n{}",
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want)
        );
    }
    let dir = tempfile::tempdir().unwrap();
    for (format, file, golden_file) in
        [("csv", "o.csv", "bills.csv"), ("pdf", "o.pdf", "statements.txt"), ("xlsx", "o.xlsx", "bills.xlsx")]
    {
        let out = dir.path().join(file);
        run_cardhour_ok(["export", "--month", OCTOBER, "--format", format, "--out", out.to_str().unwrap()], env);
        let bytes = std::fs::read(&out).unwrap();
        let got = if format == "pdf" { pdftotext(&bytes).into_bytes() } else { bytes };
        assert!(got == golden_of(layout, golden_file), "cardhour export --format {format} differs from {golden_file}");
    }
}

/// The representations of a layout-4 month compared with its golden files: those of layout 3, the CSV in words
/// (`?lang=zh`, `?lang=en`: layout 4's header and words from the glossary) and the English workbook.
fn representations4(api: &TestApi) -> Vec<(&'static str, String, &'static str, bool)> {
    let fin = api.finance.clone();
    let mut reps = representations3(api);
    reps.extend([
        ("bills-zh.csv", fin.clone(), "/api/v1/exports/2026-10/bills.csv?lang=zh", false),
        ("bills-en.csv", fin.clone(), "/api/v1/exports/2026-10/bills.csv?lang=en", false),
        ("bills-en.xlsx", fin, "/api/v1/exports/2026-10/bills.xlsx?lang=en", false),
    ]);
    reps
}

/// Writes `tests/fixtures/layout4/` from the code of the last release of layout 4 (run once, by hand, on that
/// code: `cargo test --test suite frozen_layout::write_layout4_fixture -- --ignored`). Never rerun on a later layout:
/// the files are what layout 4 served.
#[sqlx::test]
#[ignore = "writes the layout-4 golden fixture; run by hand on the code of layout 4 only"]
async fn write_layout4_fixture(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    two_months(&api).await;
    close_october(&api).await;
    write_fixture(&api, 4, representations4(&api)).await;
}

/// Layout 3 after layout 4 exists: October as the last release of layout 3 closed it (`tests/fixtures/layout3/`,
/// written by `write_layout3_fixture` on that code) is served as it was then — JSON, CSV and the workbooks byte for
/// byte, the PDF's text (zh-CN and en) line for line — by the API and by the CLI: its times stay UTC, its words
/// those of layout 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout3_month_renders_as_its_release_did() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    seed_rates(&api).await;
    seed_september(&pool, 3.0).await;
    seed_october(&pool).await;
    let text = insert_october_of(&pool, 3).await;

    let st = cardhour::usecase::ledger::statement(&pool, october(), PolicyChoice::NONE).await.unwrap();
    assert_eq!((st.layout, st.frozen.is_some()), (Layout::V3, true), "the fixture is a layout-3 month");
    assert_eq!(st.content_hash.map(|h| format!("\"{h}\"")), Some(sha256(text.as_bytes())));
    let reps = representations3(&api);
    assert_eq!(reps.len(), 14);
    renders_as_released(&api, &db.env(), 3, reps).await;
}

/// October's serving: a vLLM pod of nlp that served tokens in the hours October's usage was stored. A month closed
/// under layout 4 must not show it (its statements came before the unit cost of inference was on them).
async fn seed_october_serving(pool: &PgPool) {
    let from: DateTime<Utc> = "2026-10-05T00:00:00Z".parse().unwrap();
    for h in 0..2 {
        sqlx::query(
            "INSERT INTO serving_hourly (cluster, hour, namespace, pod, model, engine, input_tokens, output_tokens,
                 requests) VALUES ('c1', $1, 'nlp-llm', 'nlp-llm-0', 'qwen-7b', 'vllm', 600000, 400000, 1000)",
        )
        .bind(from + Duration::hours(h))
        .execute(pool)
        .await
        .unwrap();
    }
}

/// Layout 4 after layout 5 exists: October as the last release of layout 4 closed it (`tests/fixtures/layout4/`,
/// written by `write_layout4_fixture` on that code) is served as it was then — JSON, CSV (codes and words) and the
/// workbooks byte for byte, the PDF's text (zh-CN and en) line for line — by the API and by the CLI, though October
/// now has serving rows whose unit cost a month closed today would print.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout4_month_renders_as_its_release_did() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    seed_rates(&api).await;
    seed_september(&pool, 3.0).await;
    seed_october(&pool).await;
    seed_october_serving(&pool).await;
    let text = insert_october_of(&pool, 4).await;

    let st = cardhour::usecase::ledger::statement(&pool, october(), PolicyChoice::NONE).await.unwrap();
    assert_eq!((st.layout, st.frozen.is_some()), (Layout::V4, true), "the fixture is a layout-4 month");
    assert_eq!((st.unit_cost.is_none(), st.unit_cost_of("nlp").is_empty()), (true, true));
    assert_eq!(st.content_hash.map(|h| format!("\"{h}\"")), Some(sha256(text.as_bytes())));
    // the live report has October's serving: a month closed now would print it
    let (status, report) = api
        .call(Method::GET, "/api/v1/reports/unit-cost?from=2026-10-01&to=2026-11-01", Some(&api.finance), None)
        .await;
    assert_eq!((status, report["rows"][0]["key"].as_str()), (200, Some("qwen-7b")), "{report}");
    let reps = representations4(&api);
    assert_eq!(reps.len(), 17);
    renders_as_released(&api, &db.env(), 4, reps).await;
}

/// Writes `tests/fixtures/layout5/` from the code of layout 5 (run once by hand on that code:
/// `cargo test --test suite frozen_layout::write_layout5_fixture -- --ignored`). Never rerun on a later layout: the
/// files are what layout 5 served. October is closed with serving rows, so its statements print the unit cost.
#[sqlx::test]
#[ignore = "writes the layout-5 golden fixture; run by hand on the code of layout 5 only"]
async fn write_layout5_fixture(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    two_months(&api).await;
    seed_october_serving(&pool).await;
    close_october(&api).await;
    write_fixture(&api, 5, representations4(&api)).await;
}

/// Layout 5 after layout 6 exists: October as the last release of layout 5 closed it (`tests/fixtures/layout5/`,
/// written by `write_layout5_fixture` on that code, with October's serving rows so its statements print the unit cost
/// of inference) is served as it was then — JSON, CSV (codes and words) and the workbooks byte for byte, the PDF's
/// text line for line — by the API and by the CLI: no line ids, no statement id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout5_month_renders_as_its_release_did() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    seed_rates(&api).await;
    seed_september(&pool, 3.0).await;
    seed_october(&pool).await;
    seed_october_serving(&pool).await;
    let text = insert_october_of(&pool, 5).await;

    let st = cardhour::usecase::ledger::statement(&pool, october(), PolicyChoice::NONE).await.unwrap();
    assert_eq!((st.layout, st.frozen.is_some()), (Layout::V5, true), "the fixture is a layout-5 month");
    assert!(!st.unit_cost_of("nlp").is_empty(), "the fixture's October prints nlp's unit cost");
    assert_eq!(st.content_hash.map(|h| format!("\"{h}\"")), Some(sha256(text.as_bytes())));
    let reps = representations4(&api);
    assert_eq!(reps.len(), 17);
    renders_as_released(&api, &db.env(), 5, reps).await;
}
