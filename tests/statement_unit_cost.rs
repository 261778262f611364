//! The month's unit cost of inference on its statement (issue 36, layout 5; SPEC §6, §9), end to end on a real
//! Postgres: an open month's statement and a closed one's show, beside the lines, each team's unit cost per model —
//! the figures of `GET /reports/unit-cost?group_by=model` over the month's billing days, scoped to the team — in
//! every face (the team statement JSON, the CSV, the workbook, the PDF's text, the portal's page); a team without
//! serving pods shows none; after the close, changed serving rows and a new rate move the live report and not a
//! byte of the closed month.
//!
//! Ground truth, by hand (A100 ¥10 per card-hour; 2026-10-05 from 00:00 UTC, 08:00 in Asia/Shanghai, one billing
//! day):
//! - nlp `vllm-a` (2 cards, ¥20 an hour) serves qwen-7b on vLLM: hour 0 600,000 in + 400,000 out, 1,000 requests;
//!   hour 1 1,500,000 + 500,000, 3,000 requests; hour 2 nothing (idle, ¥20 apart). qwen-7b: ¥40 for 3,000,000
//!   tokens = ¥13.3333 per million, ¥40 for 4,000 requests = ¥10.0000 per thousand, idle ¥20.00.
//! - nlp `sglang-b` (1 card, ¥10, hour 0) serves llama-8b (100,000 + 100,000, 500 requests) and mistral-7b
//!   (200,000 + 100,000, 250 requests) on SGLang: ¥10 split 2 : 3 by tokens, ¥4 and ¥6: ¥20.0000 per million
//!   each; ¥8.0000 and ¥24.0000 per thousand requests.
//! - vision `triton-c` (1 card, hours 0 and 1) serves resnet50 on Triton: no tokens, 4,000 + 6,000 requests, ¥20:
//!   ¥2.0000 per thousand requests, no ¥ per million tokens.
//! - infra trains on 4 cards (hours 0–2) and serves nothing: no unit cost anywhere.

use crate::common;

use std::collections::BTreeMap;
use std::io::Cursor;
use std::process::Command;

use calamine::{Data, Reader, Xlsx};
use cardhour::auth::{Role, new_token};
use cardhour::metering::{CapacityRow, Engine, HourOutput, OfferedSource, ServingKey, ServingRow, UsageRow};
use chrono::{DateTime, Duration, Utc};
use common::api::TestApi;
use common::portal::{PASSWORD, TestPortal, visitor};
use reqwest::Method;
use rust_decimal::Decimal;
use rust_decimal_macros::dec;
use serde_json::{Value, json};
use sqlx::PgPool;

const A100: &str = "NVIDIA A100-SXM4-80GB";
const H100: &str = "NVIDIA H100 80GB HBM3";
const MONTH: &str = "2026-10";
const REPORT: &str = "/api/v1/reports/unit-cost?from=2026-10-01&to=2026-11-01&group_by=model";

fn usage(namespace: &str, pod: &str, cards: f64) -> UsageRow {
    common::api::whole_cards((namespace, pod), None, (A100, "node-a"), cards, 0.5)
}

fn served(
    namespace: &str,
    pod: &str,
    model: &str,
    engine: Engine,
    tokens: Option<(i64, i64)>,
    requests: i64,
) -> ServingRow {
    ServingRow {
        key: ServingKey { namespace: namespace.into(), pod: pod.into(), model: model.into(), engine },
        input_tokens: tokens.map(|t| t.0),
        output_tokens: tokens.map(|t| t.1),
        requests,
    }
}

/// The three hours of 2026-10-05 from 00:00 UTC: the pods' GPUs and what they served.
async fn seed(api: &TestApi) {
    let fin = Some(api.finance.as_str());
    sqlx::query("INSERT INTO teams (id, name, owner) VALUES ('infra', 'Infra', 'ops')")
        .execute(&api.pool)
        .await
        .unwrap();
    let rate = json!({"gpu_model": "A100-80GB", "effective_from": "2026-09-01", "rate": "10"});
    assert_eq!(api.call(Method::POST, "/api/v1/rates", fin, Some(rate)).await.0, 201);
    for (ns, team) in [("nlp-serve", "nlp"), ("vision-serve", "vision"), ("infra-train", "infra")] {
        let m = json!({"namespace": ns, "team_id": team, "valid_from": "2026-09-01"});
        assert_eq!(api.call(Method::POST, "/api/v1/mappings", fin, Some(m)).await.0, 201);
    }
    let qwen = |t: Option<(i64, i64)>, r: i64| served("nlp-serve", "vllm-a", "qwen-7b", Engine::Vllm, t, r);
    let hours: [(Vec<UsageRow>, Vec<ServingRow>); 3] = [
        (
            vec![
                usage("nlp-serve", "vllm-a", 2.0),
                usage("nlp-serve", "sglang-b", 1.0),
                usage("vision-serve", "triton-c", 1.0),
                usage("infra-train", "trainer", 4.0),
            ],
            vec![
                qwen(Some((600_000, 400_000)), 1_000),
                served("nlp-serve", "sglang-b", "llama-8b", Engine::Sglang, Some((100_000, 100_000)), 500),
                served("nlp-serve", "sglang-b", "mistral-7b", Engine::Sglang, Some((200_000, 100_000)), 250),
                served("vision-serve", "triton-c", "resnet50", Engine::Triton, None, 4_000),
            ],
        ),
        (
            vec![
                usage("nlp-serve", "vllm-a", 2.0),
                usage("vision-serve", "triton-c", 1.0),
                usage("infra-train", "trainer", 4.0),
                common::api::whole_cards(("nlp-serve", "vllm-h"), None, (H100, "node-h"), 1.0, 0.5),
            ],
            vec![
                qwen(Some((1_500_000, 500_000)), 3_000),
                served("vision-serve", "triton-c", "resnet50", Engine::Triton, None, 6_000),
                // an H100 has no rate: its hour costs 0, and the model is marked unpriced on every face
                served("nlp-serve", "vllm-h", "phi-3", Engine::Vllm, Some((60_000, 40_000)), 100),
            ],
        ),
        (vec![usage("nlp-serve", "vllm-a", 2.0), usage("infra-train", "trainer", 4.0)], vec![qwen(Some((0, 0)), 0)]),
    ];
    let from: DateTime<Utc> = "2026-10-05T00:00:00Z".parse().unwrap();
    for (h, (rows, serving)) in hours.into_iter().enumerate() {
        let out = HourOutput {
            interval_ms: Some(60_000),
            rows,
            capacity: vec![CapacityRow {
                node: "node-a".into(),
                gpu_model: A100.into(),
                cards: 8.0,
                card_seconds: 8.0 * 3600.0,
                offered_card_seconds: 8.0 * 3600.0,
                offered_source: OfferedSource::Allocatable,
            }],
            serving,
            ..HourOutput::default()
        };
        let hour = from + Duration::hours(h as i64);
        let mut tx = api.pool.begin().await.unwrap();
        cardhour::db::clusters::upsert(&mut tx, "c1", "http://127.0.0.1:9").await.unwrap();
        cardhour::db::usage::lock_hour(&mut tx, "c1", hour).await.unwrap();
        cardhour::db::usage::replace_hour(&mut tx, "c1", hour, &out).await.unwrap();
        tx.commit().await.unwrap();
    }
}

/// A team lead's token for `team`.
async fn lead_of(pool: &PgPool, team: &str) -> String {
    let t = new_token();
    let mut conn = pool.acquire().await.unwrap();
    cardhour::db::tokens::insert(&mut conn, &format!("lead-{team}"), &t.hash, Role::TeamLead, &[team.to_string()])
        .await
        .unwrap();
    t.secret
}

async fn get(api: &TestApi, token: &str, path: &str) -> Vec<u8> {
    let r = api.client.get(format!("{}{path}", api.base)).bearer_auth(token).send().await.unwrap();
    let status = r.status().as_u16();
    let body = r.bytes().await.unwrap().to_vec();
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    body
}

async fn get_json(api: &TestApi, token: &str, path: &str) -> Value {
    serde_json::from_slice(&get(api, token, path).await).unwrap()
}

fn pdftotext(pdf: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.pdf");
    std::fs::write(&path, pdf).unwrap();
    let out = Command::new("pdftotext").arg("-layout").arg(&path).arg("-").output().expect("pdftotext (poppler-utils)");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

fn dec(v: &Value) -> Option<Decimal> {
    v.as_str().map(|s| s.parse().unwrap_or_else(|e| panic!("{s:?}: {e}")))
}

/// A unit cost per model as every face must show it: (model, engine) → (total tokens, requests, ¥ per million
/// tokens, ¥ per thousand requests, idle serving cost).
type Figures = BTreeMap<(String, String), (i64, i64, Option<Decimal>, Option<Decimal>, Decimal)>;

/// The rows of a unit-cost report (`key` is the model) or of a statement's `unit_cost` (`model`).
fn figures(rows: &Value) -> Figures {
    rows.as_array()
        .unwrap_or_else(|| panic!("rows: {rows}"))
        .iter()
        .map(|r| {
            let model = r.get("model").unwrap_or(&r["key"]).as_str().unwrap().to_string();
            let key = (model, r["engine"].as_str().unwrap().to_string());
            let value = (
                r["total_tokens"].as_i64().unwrap(),
                r["requests"].as_i64().unwrap(),
                dec(&r["cost_per_million_tokens"]),
                dec(&r["cost_per_thousand_requests"]),
                dec(&r["idle_cost"]).unwrap(),
            );
            (key, value)
        })
        .collect()
}

fn truth(team: &str) -> Figures {
    let f = |m: &str, e: &str, t: i64, r: i64, pm: Option<Decimal>, pk: Option<Decimal>, idle: Decimal| {
        ((m.to_string(), e.to_string()), (t, r, pm, pk, idle))
    };
    match team {
        "nlp" => Figures::from([
            f("llama-8b", "sglang", 200_000, 500, Some(dec!(20.0000)), Some(dec!(8.0000)), dec!(0)),
            f("mistral-7b", "sglang", 300_000, 250, Some(dec!(20.0000)), Some(dec!(24.0000)), dec!(0)),
            f("phi-3", "vllm", 100_000, 100, Some(dec!(0.0000)), Some(dec!(0.0000)), dec!(0)),
            f("qwen-7b", "vllm", 3_000_000, 4_000, Some(dec!(13.3333)), Some(dec!(10.0000)), dec!(20)),
        ]),
        "vision" => Figures::from([f("resnet50", "triton", 0, 10_000, None, Some(dec!(2.0000)), dec!(0))]),
        _ => Figures::new(),
    }
}

/// The CSV's rows as maps by header.
fn csv_rows(bytes: &[u8]) -> Vec<BTreeMap<String, String>> {
    let body = bytes.strip_prefix("\u{feff}".as_bytes()).expect("UTF-8 with BOM");
    csv::Reader::from_reader(body).deserialize().map(Result::unwrap).collect()
}

/// The CSV's unit-cost rows of `team`, as figures.
fn csv_figures(rows: &[BTreeMap<String, String>], team: &str) -> Figures {
    let opt = |s: &str| (!s.is_empty()).then(|| s.parse::<Decimal>().unwrap());
    rows.iter()
        .filter(|r| r["line_type"] == "unit_cost" && r["team"] == team)
        .map(|r| {
            for (col, dp) in
                [("cost_per_million_tokens", 4), ("cost_per_thousand_requests", 4), ("idle_serving_cost", 2)]
            {
                let v = &r[col];
                assert!(v.is_empty() || v.split_once('.').is_some_and(|(_, f)| f.len() == dp), "{col} {v:?}");
            }
            (
                (r["model"].clone(), r["engine"].clone()),
                (
                    r["total_tokens"].parse().unwrap(),
                    r["requests"].parse().unwrap(),
                    opt(&r["cost_per_million_tokens"]),
                    opt(&r["cost_per_thousand_requests"]),
                    r["idle_serving_cost"].parse().unwrap(),
                ),
            )
        })
        .collect()
}

/// The rows of the unit-cost table of a team's sheet of the workbook, found by its field names (the hidden row
/// under the header), each cell by its field; none without the table.
fn xlsx_unit_cost_rows(xlsx: &[u8], sheet: &str) -> Vec<BTreeMap<String, Data>> {
    let mut wb: Xlsx<_> = calamine::open_workbook_from_rs(Cursor::new(xlsx.to_vec())).unwrap();
    let range = wb.worksheet_range(sheet).unwrap();
    let cells: Vec<Vec<Data>> = range.rows().map(|r| r.to_vec()).collect();
    let Some(fields) = cells.iter().position(|r| r.contains(&Data::String("cost_per_million_tokens".into()))) else {
        return Vec::new();
    };
    let names: Vec<(usize, String)> = cells[fields]
        .iter()
        .enumerate()
        .filter_map(|(i, d)| match d {
            Data::String(s) => Some((i, s.clone())),
            _ => None,
        })
        .collect();
    let model = names.iter().find(|(_, n)| n == "model").unwrap().0;
    cells[fields + 1..]
        .iter()
        .take_while(|r| !matches!(r.get(model), None | Some(Data::Empty)))
        .map(|r| names.iter().map(|(i, n)| (n.clone(), r.get(*i).cloned().unwrap_or(Data::Empty))).collect())
        .collect()
}

/// The unit-cost table of a team's sheet of the workbook, as figures.
fn xlsx_figures(xlsx: &[u8], sheet: &str) -> Figures {
    let num = |d: &Data| -> Option<Decimal> {
        match d {
            Data::Float(f) => Some(Decimal::try_from(*f).unwrap()),
            Data::Int(i) => Some(Decimal::from(*i)),
            Data::Empty => None,
            other => panic!("a number: {other:?}"),
        }
    };
    let text = |d: &Data| match d {
        Data::String(s) => s.clone(),
        other => panic!("text: {other:?}"),
    };
    xlsx_unit_cost_rows(xlsx, sheet)
        .iter()
        .map(|r| {
            let int = |c: &str| i64::try_from(num(&r[c]).unwrap()).unwrap();
            (
                (text(&r["model"]), text(&r["engine"])),
                (
                    int("total_tokens"),
                    int("requests"),
                    num(&r["cost_per_million_tokens"]).map(|d| d.round_dp(4)),
                    num(&r["cost_per_thousand_requests"]).map(|d| d.round_dp(4)),
                    num(&r["idle_serving_cost"]).unwrap().round_dp(2),
                ),
            )
        })
        .collect()
}

/// The models the unit-cost table of a team's sheet flags unpriced (`yes` in an English workbook).
fn xlsx_unpriced(xlsx: &[u8], sheet: &str) -> Vec<String> {
    xlsx_unit_cost_rows(xlsx, sheet)
        .into_iter()
        .filter(|r| {
            let flag = &r["unpriced"];
            assert!(matches!(flag, Data::String(s) if s == "yes" || s == "no"), "{flag:?}");
            *flag == Data::String("yes".into())
        })
        .map(|r| r["model"].to_string())
        .collect()
}

/// `n` with thousands grouped (`3,000,000`).
fn grouped(n: i64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// An engine as a person reads it (the glossary's `engine.*`), written here independently.
fn engine_name(code: &str) -> &str {
    match code {
        "vllm" => "vLLM",
        "sglang" => "SGLang",
        "triton" => "Triton",
        other => panic!("engine {other}"),
    }
}

/// Figures with the engines as a person reads them (the workbook in words).
fn in_words(f: &Figures) -> Figures {
    f.iter().map(|((m, e), v)| ((m.clone(), engine_name(e).to_string()), *v)).collect()
}

/// The lines a statement's text (the PDF's or the page's) must hold for `team`'s unit cost: the title, and each
/// model's row with its figures in order.
fn has_unit_cost(text: &str, title: &str, want: &Figures) {
    assert!(text.contains(title), "{title:?} missing:\n{text}");
    for ((model, engine), (tokens, requests, per_million, per_thousand, idle)) in want {
        let line = text.lines().find(|l| l.contains(model.as_str())).unwrap_or_else(|| panic!("{model}:\n{text}"));
        let cells = [
            engine_name(engine).to_string(),
            grouped(*tokens),
            grouped(*requests),
            per_million.map_or("–".into(), |d| format!("¥{d:.4}")),
            per_thousand.map_or("–".into(), |d| format!("¥{d:.4}")),
            format!("¥{idle:.2}"),
        ];
        let mut rest = &line[line.find(model.as_str()).unwrap() + model.len()..];
        for c in &cells {
            let at = rest.find(c.as_str()).unwrap_or_else(|| panic!("{c:?} of {model} missing from {line:?}"));
            rest = &rest[at + c.len()..];
        }
    }
}

const ZH_TITLE: &str = "推理单位成本（按模型）";
const EN_TITLE: &str = "Unit cost of inference per model";

/// Every face of `team`'s statement of October: its unit cost per model is `want`.
async fn faces_show(api: &TestApi, portal: &TestPortal, finance_page: &reqwest::Client, team: &str, want: &Figures) {
    let fin = api.finance.clone();
    let json = get_json(api, &fin, &format!("/api/v1/bills/{MONTH}/teams/{team}")).await;
    assert_eq!(json["layout"], 6, "{json}");
    if want.is_empty() {
        assert!(json.get("unit_cost").is_none(), "{team}: no serving, no unit cost: {json}");
    } else {
        assert_eq!(&figures(&json["unit_cost"]), want, "{team}: the team statement's JSON");
    }
    let csv = csv_rows(&get(api, &fin, &format!("/api/v1/exports/{MONTH}/bills.csv?team={team}")).await);
    assert_eq!(&csv_figures(&csv, team), want, "{team}: the team's CSV");
    let unpriced: Vec<&str> = csv
        .iter()
        .filter(|r| r["line_type"] == "unit_cost" && r["unpriced"] == "true")
        .map(|r| &r["model"][..])
        .collect();
    assert_eq!(unpriced, if team == "nlp" { vec!["phi-3"] } else { vec![] }, "{team}: unpriced in the CSV");
    // in words: the glossary's header and line type, the engines by their names
    let zh = csv_rows(&get(api, &fin, &format!("/api/v1/exports/{MONTH}/bills.csv?team={team}&lang=zh")).await);
    let rows: Vec<(String, String, String)> = zh
        .iter()
        .filter(|r| r["行类型"] == "推理单位成本")
        .map(|r| (r["模型"].clone(), r["推理引擎"].clone(), r["每百万词元成本（元）"].clone()))
        .collect();
    let words: Vec<(String, String, String)> = want
        .iter()
        .map(|((m, e), v)| (m.clone(), engine_name(e).to_string(), v.2.map(|d| format!("{d:.4}")).unwrap_or_default()))
        .collect();
    assert_eq!(rows, words, "{team}: the team's CSV in words");
    let xlsx = get(api, &fin, &format!("/api/v1/exports/{MONTH}/bills.xlsx?team={team}&lang=en")).await;
    assert_eq!(xlsx_figures(&xlsx, team), in_words(want), "{team}: the team's workbook");
    assert_eq!(xlsx_unpriced(&xlsx, team), if team == "nlp" { vec!["phi-3"] } else { vec![] }, "{team}: workbook");
    for (lang, title) in [("zh", ZH_TITLE), ("en", EN_TITLE)] {
        let pdf = pdftotext(
            &get(api, &fin, &format!("/api/v1/exports/{MONTH}/statements.pdf?team={team}&lang={lang}")).await,
        );
        if want.is_empty() {
            assert!(!pdf.contains(title), "{team}: no serving, no section:\n{pdf}");
        } else {
            has_unit_cost(&pdf, title, want);
            // the unpriced model is marked, and only it
            let marked: Vec<&str> = pdf.lines().filter(|l| l.contains(" ⚠ ") && l.contains("vLLM")).collect();
            let want_marked = usize::from(team == "nlp");
            assert_eq!(marked.len(), want_marked, "{team} {lang}: {marked:?}\n{pdf}");
            assert!(marked.iter().all(|l| l.contains("phi-3 ⚠")), "{marked:?}");
        }
    }
    let page = finance_page.get(portal.url(&format!("/bills/{MONTH}/teams/{team}"))).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    if want.is_empty() {
        assert!(!html.contains(ZH_TITLE) && !html.contains(EN_TITLE), "{team}: no serving, no section:\n{html}");
    } else {
        // the page's table: one row a line, its cells' text in order
        let text: String = html
            .replace("</tr>", "\n")
            .split('<')
            .map(|part| part.split_once('>').map_or(part, |(_, t)| t))
            .collect::<Vec<_>>()
            .join(" ");
        has_unit_cost(&text, ZH_TITLE, want);
    }
}

#[sqlx::test]
async fn the_unit_cost_per_model_is_on_every_face_and_frozen_with_the_close(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let portal = TestPortal::start(pool.clone()).await;
    let page = visitor();
    assert_eq!(portal.login(&page, "finance", PASSWORD).await.status, 303);
    let leads: BTreeMap<&str, String> = BTreeMap::from([
        ("nlp", lead_of(&pool, "nlp").await),
        ("vision", api.lead.clone()),
        ("infra", lead_of(&pool, "infra").await),
    ]);

    // the live report, scoped to each team by its lead's token, is the truth by hand
    for (team, token) in &leads {
        let report = get_json(&api, token, REPORT).await;
        assert_eq!(figures(&report["rows"]), truth(team), "{team}: the live report");
    }

    // the open month (a draft) shows the live figures
    for team in ["nlp", "vision", "infra"] {
        faces_show(&api, &portal, &page, team, &truth(team)).await;
    }

    let close = json!({"mode": "showback", "unallocated": "kept_by_platform", "override": {"reason": "no ingest run in this test"}});
    let (status, body) =
        api.call(Method::POST, &format!("/api/v1/bills/{MONTH}/close"), Some(&api.finance), Some(close)).await;
    assert_eq!((status, body["layout"].as_u64()), (201, Some(6)), "{body}");
    let stored: Value = sqlx::query_scalar("SELECT snapshot FROM closed_months WHERE month = $1")
        .bind(MONTH)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored["layout"], 6);
    let frozen = &stored["extras"]["unit_cost"];
    assert_eq!(frozen.as_object().unwrap().keys().collect::<Vec<_>>(), ["nlp", "vision"], "teams that served, only");
    assert_eq!(figures(&frozen["nlp"]), truth("nlp"));

    // the closed month: the same figures on every face
    for team in ["nlp", "vision", "infra"] {
        faces_show(&api, &portal, &page, team, &truth(team)).await;
    }
    let fin = api.finance.clone();
    // every representation, as the close left them
    let mut paths: Vec<(String, String)> = Vec::new();
    for team in ["nlp", "vision", "infra"] {
        paths.push((fin.clone(), format!("/api/v1/bills/{MONTH}/teams/{team}")));
        paths.push((leads[team].clone(), format!("/api/v1/bills/{MONTH}/teams/{team}")));
    }
    for (token, lang) in [(&fin, "zh"), (&fin, "en"), (&api.lead, "zh")] {
        paths.push((token.clone(), format!("/api/v1/exports/{MONTH}/bills.csv?lang={lang}")));
        paths.push((token.clone(), format!("/api/v1/exports/{MONTH}/bills.xlsx?lang={lang}")));
        paths.push((token.clone(), format!("/api/v1/exports/{MONTH}/statements.pdf?lang={lang}")));
    }
    paths.push((fin.clone(), format!("/api/v1/exports/{MONTH}/bills.csv")));
    paths.push((fin.clone(), format!("/api/v1/bills/{MONTH}")));
    let mut before = Vec::new();
    for (token, path) in &paths {
        before.push(get(&api, token, path).await);
    }
    // the lead of vision sees its own unit cost only
    let lead_pdf =
        pdftotext(&before[paths.iter().position(|p| p.0 == api.lead && p.1.contains("statements.pdf")).unwrap()]);
    assert!(lead_pdf.contains("resnet50") && !lead_pdf.contains("qwen-7b"), "{lead_pdf}");
    let all =
        csv_rows(&before[paths.iter().position(|p| p.1 == format!("/api/v1/exports/{MONTH}/bills.csv")).unwrap()]);
    for team in ["nlp", "vision", "infra"] {
        assert_eq!(csv_figures(&all, team), truth(team), "{team} in the CSV of every team");
    }
    // the unit-cost rows carry no amount: the CSV's sums are the bills' as before
    assert!(all.iter().filter(|r| r["line_type"] == "unit_cost").all(|r| r["amount"].is_empty()));

    // later: the serving rows re-read with twice the tokens, and a new rate for the month
    let changed = sqlx::query(
        "UPDATE serving_hourly SET input_tokens = input_tokens * 2, requests = requests * 2 WHERE pod = 'vllm-a'",
    )
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(changed.rows_affected(), 3);
    let rate = json!({"gpu_model": "A100-80GB", "effective_from": "2026-10-01", "rate": "15"});
    assert_eq!(api.call(Method::POST, "/api/v1/rates", Some(&fin), Some(rate)).await.0, 201);
    // the live report moved: qwen-7b ¥60 (2 cards × ¥15 × 2 hours) for 5,100,000 tokens and 8,000 requests
    let live = figures(&get_json(&api, &leads["nlp"], REPORT).await["rows"]);
    let qwen = &live[&("qwen-7b".to_string(), "vllm".to_string())];
    assert_eq!((qwen.0, qwen.1, qwen.2, qwen.3), (5_100_000, 8_000, Some(dec!(11.7647)), Some(dec!(7.5000))));
    assert_ne!(live, truth("nlp"));

    // … and not a byte of the closed month, in this server or a fresh one
    for server in [&api, &TestApi::start(pool.clone()).await] {
        for ((token, path), body) in paths.iter().zip(&before) {
            assert!(get(server, token, path).await == *body, "{path}: a closed month's bytes never change");
        }
    }
    for team in ["nlp", "vision", "infra"] {
        faces_show(&api, &portal, &page, team, &truth(team)).await;
    }
}
