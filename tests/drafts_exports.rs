//! Drafts before a close, the close that names its policy, unknown teams in exports, and the Excel workbook, end
//! to end on a real Postgres.
//!
//! Ground truth, by hand (A100 12.5, H100 20 yuan per card-hour; two 8-card nodes, A100 and H100, 3 hours on
//! 2026-10-05): vision 1 A100 × 3 h = 3 card-hours = 37.50, nlp 2 A100 × 3 h = 6 = 75.00 → allocated 112.50;
//! capacity A100 24 card-hours = 300.00 + H100 24 = 480.00 = 780.00; unallocated 667.50. Spread 1 : 2 over the
//! teams' allocated amounts: vision 222.50, nlp 445.00 (totals 260.00 and 520.00).

use crate::common;

use std::collections::BTreeMap;
use std::io::Cursor;
use std::process::Command;

use calamine::{Data, Reader, Xlsx};
use cardhour::metering::{HourOutput, UsageRow};
use chrono::{DateTime, Duration, Utc};
use common::api::TestApi;
use common::{TestDb, run_cardhour, run_cardhour_ok};
use reqwest::Method;
use rust_decimal::Decimal;
use rust_decimal_macros::dec;
use serde_json::{Value, json};
use sqlx::PgPool;

const A100: &str = "NVIDIA A100-SXM4-80GB";
const H100: &str = "NVIDIA H100 80GB HBM3";
const SPREAD: &str = "mode=chargeback&unallocated=spread_proportionally";

fn row(namespace: &str, pod: &str, team: &str, model: &str, cards: f64) -> UsageRow {
    common::api::whole_cards((namespace, pod), Some(team), (model, "node-a"), cards, 0.5)
}

/// `hours` hours from `from` of `rows`, with an A100 and an H100 node of 8 cards each as capacity.
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

/// Rates, mappings and October's three hours.
async fn seed(api: &TestApi) {
    let fin = Some(api.finance.as_str());
    for (model, rate) in [("A100-80GB", "12.5"), ("H100-80GB", "20")] {
        let r = json!({"gpu_model": model, "effective_from": "2026-09-01", "rate": rate});
        assert_eq!(api.call(Method::POST, "/api/v1/rates", fin, Some(r)).await.0, 201);
    }
    for (ns, team) in [("vision-train", "vision"), ("nlp-prod", "nlp")] {
        let m = json!({"namespace": ns, "team_id": team, "valid_from": "2026-09-01"});
        assert_eq!(api.call(Method::POST, "/api/v1/mappings", fin, Some(m)).await.0, 201);
    }
    let rows = [row("vision-train", "v-0", "vision", A100, 1.0), row("nlp-prod", "n-0", "nlp", A100, 2.0)];
    store(&api.pool, "2026-10-05T00:00:00Z", 3, &rows).await;
}

struct Answer {
    status: u16,
    etag: Option<String>,
    body: Vec<u8>,
}

async fn send(api: &TestApi, token: &str, path: &str) -> Answer {
    let resp = api.client.get(format!("{}{path}", api.base)).bearer_auth(token).send().await.unwrap();
    let etag = resp.headers().get("etag").map(|v| v.to_str().unwrap().to_string());
    Answer { status: resp.status().as_u16(), etag, body: resp.bytes().await.unwrap().to_vec() }
}

/// A 200's body.
async fn get(api: &TestApi, token: &str, path: &str) -> Vec<u8> {
    let a = send(api, token, path).await;
    assert_eq!(a.status, 200, "{path}: {}", String::from_utf8_lossy(&a.body));
    a.body
}

async fn get_json(api: &TestApi, token: &str, path: &str) -> Value {
    serde_json::from_slice(&get(api, token, path).await).unwrap()
}

/// An error answer: status and JSON body.
async fn refused(api: &TestApi, token: &str, path: &str) -> (u16, Value) {
    let a = send(api, token, path).await;
    (a.status, serde_json::from_slice(&a.body).unwrap_or(Value::Null))
}

fn money(v: &Value) -> Decimal {
    v.as_str().unwrap_or_else(|| panic!("{v} is not a decimal string")).parse().unwrap()
}

/// Team → unallocated share in a month view.
fn shares(month: &Value) -> BTreeMap<String, Decimal> {
    month["teams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["team"].as_str().unwrap().into(), money(&t["unallocated_share"])))
        .collect()
}

fn csv_rows(bytes: &[u8]) -> Vec<BTreeMap<String, String>> {
    let body = bytes.strip_prefix("\u{feff}".as_bytes()).expect("UTF-8 with BOM");
    csv::Reader::from_reader(body).deserialize().map(Result::unwrap).collect()
}

fn pdftotext(pdf: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.pdf");
    std::fs::write(&path, pdf).unwrap();
    let out = Command::new("pdftotext").arg("-layout").arg(&path).arg("-").output().expect("pdftotext (poppler-utils)");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

async fn closed_months(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM closed_months").fetch_one(pool).await.unwrap()
}

/// An open month is shown under any policy asked for — JSON, CSV, PDF, xlsx — so finance looks at the chargeback
/// draft first; a close must name its policy (422 on `policy`, `mode`, `unallocated` otherwise, API and CLI), and
/// answers with the hash of what it froze; a closed month then answers only under its own policy (409 otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draft_under_another_policy_then_a_close_that_names_it() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let fin = api.finance.clone();

    // the default (showback, kept by the platform): no shares
    let default = get_json(&api, &fin, "/api/v1/bills/2026-10").await;
    assert_eq!(default["policy"], json!({"mode": "showback", "unallocated": "kept_by_platform"}));
    assert_eq!(shares(&default), BTreeMap::from([("nlp".into(), dec!(0)), ("vision".into(), dec!(0))]));
    assert_eq!(money(&default["unallocated"]), dec!(667.50));

    // the chargeback draft, spread: every representation shows it
    let draft = get_json(&api, &fin, &format!("/api/v1/bills/2026-10?{SPREAD}")).await;
    assert_eq!(draft["status"], "open");
    assert_eq!(draft["policy"], json!({"mode": "chargeback", "unallocated": "spread_proportionally"}));
    assert_eq!(shares(&draft), BTreeMap::from([("nlp".into(), dec!(445.00)), ("vision".into(), dec!(222.50))]));
    let vision = get_json(&api, &fin, &format!("/api/v1/bills/2026-10/teams/vision?{SPREAD}")).await;
    assert_eq!(money(&vision["total"]), dec!(260.00));
    // only one part asked for: the other is the configured default
    let half = get_json(&api, &fin, "/api/v1/bills/2026-10?unallocated=spread_proportionally").await;
    assert_eq!(half["policy"], json!({"mode": "showback", "unallocated": "spread_proportionally"}));

    let csv = csv_rows(&get(&api, &fin, &format!("/api/v1/exports/2026-10/bills.csv?{SPREAD}")).await);
    let csv_shares: BTreeMap<String, Decimal> = csv
        .iter()
        .filter(|r| r["line_type"] == "unallocated_share")
        .map(|r| (r["team"].clone(), r["amount"].parse().unwrap()))
        .collect();
    assert_eq!(csv_shares, shares(&draft));
    assert!(csv.iter().all(|r| r["policy"] == "chargeback/spread_proportionally"));
    let plain = csv_rows(&get(&api, &fin, "/api/v1/exports/2026-10/bills.csv").await);
    assert!(!plain.is_empty() && plain.iter().all(|r| r["line_type"] != "unallocated_share"));

    let pdf_default = send(&api, &fin, "/api/v1/exports/2026-10/statements.pdf").await;
    let pdf_draft = send(&api, &fin, &format!("/api/v1/exports/2026-10/statements.pdf?{SPREAD}")).await;
    assert_eq!((pdf_default.status, pdf_draft.status), (200, 200));
    assert_ne!(pdf_default.etag, pdf_draft.etag);
    let text = pdftotext(&pdf_draft.body);
    assert!(text.contains("222.50") && text.contains("445.00"), "the draft PDF prints the shares:\n{text}");
    assert!(!pdftotext(&pdf_default.body).contains("222.50"));

    let xlsx = get(&api, &fin, &format!("/api/v1/exports/2026-10/bills.xlsx?{SPREAD}")).await;
    let book = Book::read(&xlsx);
    let summary = book.teams_table();
    assert_eq!(summary["vision"]["unallocated_share"], "222.50");
    assert_eq!(summary["nlp"]["unallocated_share"], "445.00");

    // a bad policy is a 422 naming it
    let (status, err) = refused(&api, &fin, "/api/v1/exports/2026-10/bills.csv?mode=invoice").await;
    assert_eq!((status, err["field"].as_str()), (422, Some("mode")), "{err}");

    // a close names its policy: no default
    let close = "/api/v1/bills/2026-10/close";
    let reason = json!({"reason": "no ingest run in this test"});
    for (body, field) in [
        (None, "policy"),
        (Some(json!({"override": reason})), "policy"),
        (Some(json!({"mode": "chargeback", "override": reason})), "unallocated"),
        (Some(json!({"unallocated": "spread_proportionally", "override": reason})), "mode"),
        (Some(json!({"mode": "invoice", "unallocated": "spread_proportionally"})), "mode"),
    ] {
        let (status, err) = api.call(Method::POST, close, Some(&fin), body.clone()).await;
        assert_eq!((status, err["field"].as_str()), (422, Some(field)), "{body:?}: {err}");
    }
    let cli = run_cardhour(["close", "--month", "2026-10", "--override", "test"], &db.env());
    let stderr = String::from_utf8_lossy(&cli.stderr);
    assert!(!cli.status.success() && stderr.contains("--mode") && stderr.contains("--unallocated"), "{stderr}");
    let cli = run_cardhour(["close", "--month", "2026-10", "--mode", "chargeback", "--override", "test"], &db.env());
    assert!(!cli.status.success(), "half a policy is not a policy");
    assert_eq!(closed_months(&pool).await, 0, "nothing was closed");

    // the CLI exports the same draft
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("draft.csv");
    let args = ["export", "--month", "2026-10", "--mode", "chargeback", "--policy", "spread-proportionally"];
    run_cardhour_ok(args.into_iter().chain(["--out", out.to_str().unwrap()]), &db.env());
    assert_eq!(
        std::fs::read(&out).unwrap(),
        get(&api, &fin, &format!("/api/v1/exports/2026-10/bills.csv?{SPREAD}")).await
    );

    let body = json!({"mode": "chargeback", "unallocated": "spread_proportionally", "override": reason});
    let (status, closed) = api.call(Method::POST, close, Some(&fin), Some(body)).await;
    assert_eq!(status, 201, "{closed}");
    let stored: String = sqlx::query_scalar("SELECT content_hash FROM closed_months WHERE month = '2026-10'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(closed["snapshot_hash"].as_str(), Some(stored.as_str()));
    assert_eq!(stored.len(), 64);
    assert_eq!(shares(&closed), shares(&draft), "what was frozen is the draft looked at");
    assert_eq!(closed["policy"], draft["policy"]);

    // closed: its own policy is the same answer, another is a 409 naming the field
    let frozen = get(&api, &fin, "/api/v1/bills/2026-10").await;
    assert_eq!(get(&api, &fin, &format!("/api/v1/bills/2026-10?{SPREAD}")).await, frozen);
    assert_eq!(get(&api, &fin, "/api/v1/bills/2026-10?mode=chargeback").await, frozen);
    for (path, field) in [
        ("/api/v1/bills/2026-10?mode=showback", "mode"),
        ("/api/v1/bills/2026-10/teams/vision?unallocated=kept_by_platform", "unallocated"),
        ("/api/v1/exports/2026-10/bills.csv?unallocated=kept_by_platform", "unallocated"),
        ("/api/v1/exports/2026-10/statements.pdf?mode=showback", "mode"),
        ("/api/v1/exports/2026-10/bills.xlsx?mode=showback", "mode"),
    ] {
        let (status, err) = refused(&api, &fin, path).await;
        assert_eq!((status, err["field"].as_str()), (409, Some(field)), "{path}: {err}");
        assert!(err["message"].as_str().unwrap().contains("closed under"), "{err}");
    }
    let cli = run_cardhour(["export", "--month", "2026-10", "--mode", "showback"], &db.env());
    assert!(!cli.status.success() && String::from_utf8_lossy(&cli.stderr).contains("closed under"));
}

/// `?team=` of a team that does not exist is a 404 naming `team` in every export and the team statement (the CLI:
/// "unknown team", non-zero exit); a known team without lines is an export without lines; a team lead asking for
/// another team gets the same 404 as for an unknown one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_team_is_not_a_team_without_lines() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let fin = api.finance.clone();
    let put = json!({"name": "运维", "owner": "李四"});
    assert_eq!(api.call(Method::PUT, "/api/v1/teams/ops", Some(&fin), Some(put)).await.0, 200);

    for path in [
        "/api/v1/exports/2026-10/bills.csv?team=visoin",
        "/api/v1/exports/2026-10/statements.pdf?team=visoin",
        "/api/v1/exports/2026-10/bills.xlsx?team=visoin",
        "/api/v1/bills/2026-10/teams/visoin",
    ] {
        let (status, err) = refused(&api, &fin, path).await;
        assert_eq!((status, err["field"].as_str()), (404, Some("team")), "{path}: {err}");
        assert_eq!(err["message"], "unknown team visoin", "{path}");
        // a lead's other team answers exactly as an unknown one
        let other = path.replace("visoin", "nlp");
        let (status, err) = refused(&api, &api.lead, &other).await;
        assert_eq!((status, err["field"].as_str()), (404, Some("team")), "{other}: {err}");
    }
    let csv = get(&api, &fin, "/api/v1/exports/2026-10/bills.csv?team=ops").await;
    let text = String::from_utf8(csv).unwrap();
    // the header and the total row (layout 4): nothing carried
    assert_eq!(text.lines().count(), 2, "the header and the total row only: {text}");
    assert!(text.starts_with("\u{feff}month,status,line_type"));
    assert!(text.lines().nth(1).unwrap().contains(",total,") && text.contains(",0.00,"), "{text}");
    let ops = get_json(&api, &fin, "/api/v1/bills/2026-10/teams/ops").await;
    assert_eq!((ops["lines"].as_array().unwrap().len(), money(&ops["total"])), (0, dec!(0)));
    let book = Book::read(&get(&api, &fin, "/api/v1/exports/2026-10/bills.xlsx?team=ops").await);
    assert_eq!(book.names, [summary_sheet()]);
    assert_eq!(send(&api, &fin, "/api/v1/exports/2026-10/statements.pdf?team=ops").await.status, 200);

    let cli = run_cardhour(["export", "--month", "2026-10", "--team", "visoin"], &db.env());
    assert!(!cli.status.success());
    assert!(String::from_utf8_lossy(&cli.stderr).contains("unknown team visoin"), "{cli:?}");
    let out = run_cardhour_ok(["export", "--month", "2026-10", "--team", "ops"], &db.env());
    assert_eq!(out.lines().count(), 2, "the header and the total row: {out}");
}

/// A workbook read back with calamine.
struct Book {
    names: Vec<String>,
    sheets: BTreeMap<String, Vec<Vec<Data>>>,
}

impl Book {
    fn read(bytes: &[u8]) -> Book {
        let mut wb: Xlsx<_> = calamine::open_workbook_from_rs(Cursor::new(bytes.to_vec())).unwrap();
        let names = wb.sheet_names().to_vec();
        let sheets = names
            .iter()
            .map(|n| {
                let range = wb.worksheet_range(n).unwrap();
                // from A1, so row and column numbers are the sheet's
                let (h, w) = range.end().map_or((0, 0), |(r, c)| (r as usize + 1, c as usize + 1));
                let rows = (0..h)
                    .map(|r| {
                        (0..w).map(|c| range.get_value((r as u32, c as u32)).cloned().unwrap_or(Data::Empty)).collect()
                    })
                    .collect();
                (n.clone(), rows)
            })
            .collect();
        Book { names, sheets }
    }

    /// Rows of the table whose English header row starts with `first` on `sheet`, as field → cell text (numbers
    /// with `decimals` per field), until the first empty row.
    fn table(&self, sheet: &str, first: &str) -> Vec<BTreeMap<String, String>> {
        let rows = &self.sheets[sheet];
        let start = rows.iter().position(|r| matches!(&r[0], Data::String(s) if s == first)).expect(first);
        let header: Vec<String> = rows[start].iter().map(|c| c.to_string()).collect();
        rows[start + 1..]
            .iter()
            .take_while(|r| !r.iter().all(|c| matches!(c, Data::Empty)))
            .map(|r| {
                header.iter().zip(r).filter(|(h, _)| !h.is_empty()).map(|(h, c)| (h.clone(), cell(h, c))).collect()
            })
            .collect()
    }

    /// The summary's teams table, by team id (its total row, the glossary's 合计, left out).
    fn teams_table(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        self.table(summary_sheet(), "team")
            .into_iter()
            .filter(|r| r["team"] != "合计")
            .map(|r| (r["team"].clone(), r))
            .collect()
    }

    /// The reconciliation figures of the summary (layout 4: the glossary's zh label in the first column, the amount in
    /// the third): field name → amount.
    fn figures(&self) -> BTreeMap<String, Decimal> {
        let code = |label: &str| -> Option<&'static str> {
            let zh = |key: &str| cardhour::glossary::term(cardhour::glossary::Lang::Zh, key);
            match label {
                "分配金额合计" => Some("allocated"),
                "团队承担合计" => Some("teams_total"),
                l => [
                    "capacity_cost",
                    "unallocated",
                    "not_offered",
                    "platform_kept",
                    "over_recovery",
                    "capacity_shortfall",
                ]
                .into_iter()
                .find(|c| zh(&format!("term.{c}")) == l),
            }
        };
        self.sheets[summary_sheet()]
            .iter()
            .filter_map(|r| match (&r[0], r.get(2)) {
                (Data::String(label), Some(Data::Float(v))) => {
                    Some((code(label)?.to_string(), Decimal::try_from(*v).unwrap().round_dp(2)))
                }
                _ => None,
            })
            .collect()
    }
}

/// The summary sheet of a layout-4 workbook in zh-CN (the default).
fn summary_sheet() -> &'static str {
    cardhour::export::xlsx::summary_sheet(cardhour::glossary::Lang::Zh)
}

/// A cell as the JSON writes the field: money with 2 decimals, card-hours 3 (JSON has up to 6: compared rounded),
/// rates 4, months `YYYY-MM` (a date cell), text as it is.
fn cell(field: &str, c: &Data) -> String {
    match c {
        Data::Float(v) => {
            let decimals = match field {
                "rate" => 4,
                f if f.contains("card_hours") => 3,
                _ => 2,
            };
            format!("{v:.decimals$}")
        }
        Data::DateTime(d) => d.as_datetime().unwrap().format("%Y-%m").to_string(),
        Data::Bool(b) => b.to_string(),
        Data::Empty => String::new(),
        other => other.to_string(),
    }
}

/// A JSON decimal string with `decimals` places, as the workbook's cell is compared.
fn dp(v: &Value, decimals: u32) -> String {
    if v.is_null() {
        return String::new();
    }
    let d: Decimal = v.as_str().unwrap().parse().unwrap();
    format!("{:.*}", decimals as usize, d.round_dp(decimals))
}

/// The workbook equals the JSON statement line by line — each team's sheet its lines, the summary its teams — and
/// its summary reconciles to the capacity cost to the fen, open and closed; the bytes are deterministic (ETag =
/// sha256, equal on a second GET, unchanged by data after the close); a team lead's holds its own team only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workbook_is_the_statement_and_reconciles() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let fin = api.finance.clone();

    let check = |book: &Book, month: &Value, teams: &BTreeMap<String, Value>| {
        assert_eq!(book.names[0], summary_sheet());
        let expected: Vec<&String> = teams.keys().collect();
        assert!(!expected.is_empty());
        assert_eq!(book.names[1..].iter().collect::<Vec<_>>(), expected, "a sheet per team");
        for (team, st) in teams {
            let lines = book.table(team, "month");
            let want: Vec<BTreeMap<String, String>> = st["lines"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| {
                    BTreeMap::from([
                        ("month".into(), "2026-10".into()),
                        ("line_type".into(), "用量".into()),
                        ("original_month".into(), String::new()),
                        ("namespace".into(), l["namespace"].as_str().unwrap().into()),
                        ("gpu_model".into(), l["gpu_model"].as_str().unwrap().into()),
                        // layout 4: codes in the glossary's words (整卡 for `whole`), yes/no as 是/否
                        (
                            "kind".into(),
                            cardhour::glossary::kind(cardhour::glossary::Lang::Zh, l["kind"].as_str().unwrap()),
                        ),
                        ("card_hours".into(), dp(&l["card_hours"], 3)),
                        ("effective_card_hours".into(), dp(&l["effective_card_hours"], 3)),
                        ("unmetered_card_hours".into(), dp(&l["unmetered_card_hours"], 3)),
                        ("rate".into(), dp(&l["rate"], 4)),
                        ("amount".into(), dp(&l["amount"], 2)),
                        ("unpriced".into(), if l["unpriced"] == true { "是" } else { "否" }.into()),
                        // layout 6: the line's id, as the JSON view names it
                        ("line_id".into(), l["id"].as_str().unwrap().into()),
                    ])
                })
                .collect();
            assert!(!want.is_empty());
            let usage: Vec<_> = lines.iter().filter(|r| r["line_type"] == "用量").cloned().collect();
            assert_eq!(usage, want, "{team}'s sheet is its statement's lines");
            let share = lines.iter().find(|r| r["line_type"] == "未分配分摊").map(|r| r["amount"].clone());
            let json_share = dp(&st["unallocated_share"], 2);
            assert_eq!(share.unwrap_or_else(|| "0.00".into()), json_share, "{team}");
            let total = book.sheets[team.as_str()].iter().find_map(|r| match (&r[1], &r[10]) {
                (Data::String(s), Data::Float(v)) if s == "合计" => Some(format!("{v:.2}")),
                _ => None,
            });
            assert_eq!(total, Some(dp(&st["total"], 2)), "{team}");
        }
        let summary = book.teams_table();
        for t in month["teams"].as_array().unwrap().iter().filter(|t| teams.contains_key(t["team"].as_str().unwrap())) {
            let row = &summary[t["team"].as_str().unwrap()];
            for f in ["allocated", "unallocated_share", "restated", "total"] {
                assert_eq!(row[f], dp(&t[f], 2), "{f} of {t}");
            }
            assert_eq!(row["card_hours"], dp(&t["card_hours"], 3));
            assert_eq!(row["team_name"], t["name"].as_str().unwrap());
        }
    };

    for closed in [false, true] {
        let month = get_json(&api, &fin, "/api/v1/bills/2026-10").await;
        let mut teams = BTreeMap::new();
        for t in ["nlp", "vision"] {
            teams.insert(t.to_string(), get_json(&api, &fin, &format!("/api/v1/bills/2026-10/teams/{t}")).await);
        }
        let a = send(&api, &fin, "/api/v1/exports/2026-10/bills.xlsx").await;
        assert_eq!(a.status, 200);
        use sha2::Digest;
        let hex: String = sha2::Sha256::digest(&a.body).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(a.etag, Some(format!("\"{hex}\"")));
        assert_eq!(get(&api, &fin, "/api/v1/exports/2026-10/bills.xlsx").await, a.body, "deterministic bytes");
        let book = Book::read(&a.body);
        check(&book, &month, &teams);
        // the month cell is a date cell shown as the month
        let facts = &book.sheets[summary_sheet()];
        assert!(matches!(&facts[1][1], Data::DateTime(_)), "{:?}", facts[1][1]);
        assert_eq!(cell("month", &facts[1][1]), "2026-10");
        // reconciliation, to the fen, against the JSON and by hand
        let f = book.figures();
        assert_eq!(f["capacity_cost"], dec!(780.00));
        assert_eq!(f["allocated"], dec!(112.50));
        assert_eq!(f["unallocated"], dec!(667.50));
        assert_eq!(
            f["allocated"] + f["unallocated"] + f.get("not_offered").copied().unwrap_or_default(),
            f["capacity_cost"]
        );
        assert_eq!(f["teams_total"] + f["platform_kept"], f["capacity_cost"]);
        assert_eq!(f["capacity_cost"], money(&month["capacity_cost"]));
        assert_eq!(f["platform_kept"], money(&month["platform_kept"]));
        let capacity = book.table(summary_sheet(), "gpu_model");
        let amounts: Vec<(String, String)> =
            capacity.iter().map(|r| (r["gpu_model"].clone(), r["amount"].clone())).collect();
        assert_eq!(
            amounts,
            [("A100-80GB".to_string(), "300.00".to_string()), ("H100-80GB".to_string(), "480.00".to_string())]
        );

        // a team lead: its own team, no cluster figure
        let lead = Book::read(&get(&api, &api.lead, "/api/v1/exports/2026-10/bills.xlsx").await);
        assert_eq!(lead.names[1..], ["vision"]);
        assert!(lead.figures().is_empty(), "{:?}", lead.figures());
        assert_eq!(lead.teams_table().keys().collect::<Vec<_>>(), ["vision"]);
        let only = Book::read(&get(&api, &fin, "/api/v1/exports/2026-10/bills.xlsx?team=nlp").await);
        assert_eq!(only.names[1..], ["nlp"]);

        if !closed {
            let body = json!({"mode": "showback", "unallocated": "kept_by_platform",
                              "override": {"reason": "no ingest run in this test"}});
            let (status, out) = api.call(Method::POST, "/api/v1/bills/2026-10/close", Some(&fin), Some(body)).await;
            assert_eq!(status, 201, "{out}");
        } else {
            // later data changes no byte of a closed month's workbook
            let before = a.body.clone();
            store(&pool, "2026-10-20T00:00:00Z", 2, &[row("nlp-prod", "n-1", "nlp", H100, 4.0)]).await;
            assert_eq!(get(&api, &fin, "/api/v1/exports/2026-10/bills.xlsx").await, before);
        }
    }
    // the CLI writes the same workbook
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.xlsx");
    run_cardhour_ok(["export", "--month", "2026-10", "--format", "xlsx", "--out", out.to_str().unwrap()], &db.env());
    assert_eq!(std::fs::read(&out).unwrap(), get(&api, &fin, "/api/v1/exports/2026-10/bills.xlsx").await);
}
