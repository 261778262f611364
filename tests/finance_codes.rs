//! Finance codes per team (issue 30, SPEC §11) on a real Postgres through the API, the CMDB import and the portal:
//! codes changing mid-month split the team's lines at that day on every face (JSON, CSV, workbook, PDF), each line
//! under the codes of its days, the amounts by hand (card-hours × the rate); a team without codes prints as before;
//! a closed month keeps the codes it was closed with and a later change restates nothing; bad input refused
//! naming its field with nothing written; the CMDB file's code columns set a team's codes, idempotently; the
//! teams page sets them in Chinese.
//!
//! The usage: `common::months::store` — vision 1 card and nlp 3 cards an hour, 4 hours on 2026-10-05 and 6 hours
//! on 2026-10-20 — at the A100 rate of ¥12.5: nlp 12 card-hours (¥150.00) before its codes change on 10-16 and 18
//! card-hours (¥225.00) after; vision 10 card-hours (¥125.00), no codes.

use crate::common;

use std::io::Cursor;

use calamine::{Data, DataType, Reader, Xlsx};
use common::api::TestApi;
use common::portal::{PASSWORD, TestPortal, hidden, visitor};
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{Value, json};
use sqlx::PgPool;

const MONTH: &str = "2026-10";

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

fn dec(v: &Value) -> Decimal {
    v.as_str().unwrap_or_else(|| panic!("not a decimal string: {v}")).parse().unwrap()
}

fn d(s: &str) -> Decimal {
    s.parse().unwrap()
}

async fn raw(api: &TestApi, path: &str) -> Vec<u8> {
    let resp = api.client.get(format!("{}{path}", api.base)).bearer_auth(&api.finance).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200, "{path}");
    resp.bytes().await.unwrap().to_vec()
}

async fn put_codes(api: &TestApi, token: &str, team: &str, body: Value) -> (u16, Value) {
    api.call(Method::PUT, &format!("/api/v1/teams/{team}/finance-codes"), Some(token), Some(body)).await
}

async fn store_month(api: &TestApi) {
    common::months::rates_and_mappings(api).await;
    common::months::store(&api.pool, "2026-10-05T00:00:00Z", 4, 3.0).await.unwrap();
    common::months::store(&api.pool, "2026-10-20T00:00:00Z", 6, 3.0).await.unwrap();
}

#[sqlx::test]
async fn codes_changing_mid_month_split_the_lines_on_every_face_and_a_closed_month_keeps_its_own(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    store_month(&api).await;
    let fin = api.finance.clone();
    let first = json!({"valid_from": "2026-10-01", "cost_centre": "CC-1001", "gl_account": "6602.01",
                       "legal_entity": "北京示例科技有限公司"});

    // who may set them, and bad input named with nothing written
    for token in [&api.lead, &api.viewer] {
        assert_eq!(put_codes(&api, token, "nlp", first.clone()).await.0, 403);
    }
    let audit_before = count(&pool, "SELECT count(*) FROM audit_log").await;
    for (patch, status, field) in [
        (json!({"valid_from": "2026-10-32"}), 422, "valid_from"),
        (json!({"valid_from": "yesterday"}), 422, "valid_from"),
        (json!({"cost_centre": "a\u{7}b"}), 422, "cost_centre"),
        (json!({"gl_account": "x".repeat(65)}), 422, "gl_account"),
        (json!({"legal_entity": "甲\u{202e}乙"}), 422, "legal_entity"),
    ] {
        let mut body = first.clone();
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (got, e) = put_codes(&api, &fin, "nlp", body.clone()).await;
        assert_eq!(got, status, "{body}: {e}");
        assert_eq!(e["errors"][0]["field"].as_str(), Some(field), "{body}: {e}");
    }
    assert_eq!(put_codes(&api, &fin, "ghost", first.clone()).await.0, 404);
    let (status, e) =
        api.call(Method::PUT, "/api/v1/teams/nlp/finance-codes", Some(&fin), Some(json!({"cost_centre": "x"}))).await;
    assert_eq!(status, 422, "{e}");
    assert_eq!(count(&pool, "SELECT count(*) FROM team_finance_codes").await, 0);
    assert_eq!(count(&pool, "SELECT count(*) FROM audit_log").await, audit_before);

    // nlp's codes from the 1st, changed from the 16th; the same put again writes and audits nothing
    let (status, v) = put_codes(&api, &fin, "nlp", first.clone()).await;
    assert_eq!((status, v["cost_centre"].as_str()), (201, Some("CC-1001")), "{v}");
    let second = json!({"valid_from": "2026-10-16", "cost_centre": "CC-2002", "gl_account": "6602.02",
                        "legal_entity": "北京示例科技有限公司"});
    assert_eq!(put_codes(&api, &fin, "nlp", second.clone()).await.0, 201);
    let audited = count(&pool, "SELECT count(*) FROM audit_log WHERE action = 'finance_codes.put'").await;
    assert_eq!(audited, 2);
    assert_eq!(put_codes(&api, &fin, "nlp", second.clone()).await.0, 200);
    assert_eq!(count(&pool, "SELECT count(*) FROM audit_log WHERE action = 'finance_codes.put'").await, audited);
    let (status, versions) = api.call(Method::GET, "/api/v1/teams/nlp/finance-codes", Some(&api.finance), None).await;
    assert_eq!(status, 200);
    let days: Vec<&str> = versions.as_array().unwrap().iter().map(|v| v["valid_from"].as_str().unwrap()).collect();
    assert_eq!(days, ["2026-10-01", "2026-10-16"]);
    // a lead reads its own team's codes only
    assert_eq!(api.call(Method::GET, "/api/v1/teams/nlp/finance-codes", Some(&api.lead), None).await.0, 404);
    assert_eq!(api.call(Method::GET, "/api/v1/teams/vision/finance-codes", Some(&api.lead), None).await.0, 200);

    // a burst of one new version: created once (one 201, one audit entry), found as stored by the others; a burst
    // of conflicting versions of one day: each a change of the one before it, one row, the last writer's codes
    let path = "/api/v1/teams/vision/finance-codes";
    let same = json!({"valid_from": "2026-11-01", "cost_centre": "CC-7007"});
    let burst = (0..6).map(|_| api.call(Method::PUT, path, Some(&fin), Some(same.clone())));
    let answers = futures_util::future::join_all(burst).await;
    let mut statuses: Vec<u16> = answers.iter().map(|(s, _)| *s).collect();
    statuses.sort();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 201], "{answers:?}");
    assert!(answers.iter().all(|(_, v)| v["cost_centre"] == "CC-7007"), "{answers:?}");
    let vision_audits =
        "SELECT count(*) FROM audit_log WHERE action = 'finance_codes.put' AND entity LIKE 'team:vision@%'";
    assert_eq!(count(&pool, vision_audits).await, 1);
    let conflicting = (0..6).map(|i| {
        let body = json!({"valid_from": "2026-11-01", "cost_centre": format!("CC-80{i:02}")});
        let api = &api;
        let fin = fin.clone();
        async move { api.call(Method::PUT, path, Some(&fin), Some(body)).await }
    });
    let answers = futures_util::future::join_all(conflicting).await;
    assert!(answers.iter().all(|(s, _)| *s == 200), "{answers:?}");
    let stored: String = sqlx::query_scalar(
        "SELECT cost_centre FROM team_finance_codes WHERE team_id = 'vision' AND valid_from = '2026-11-01'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(stored.starts_with("CC-80"), "{stored}");
    // a team without usage in a month still has its month-end codes there (for lines not computed per day)
    let (_, vision_nov) = api.call(Method::GET, "/api/v1/bills/2026-11/teams/vision", Some(&fin), None).await;
    assert!(vision_nov["lines"].as_array().is_some_and(|l| l.is_empty()), "{vision_nov}");
    assert_eq!(vision_nov["finance_codes"]["cost_centre"], stored.as_str(), "{vision_nov}");
    assert_eq!(count(&pool, vision_audits).await, 7, "each change audited with its before");
    // (November's: October's statements below are untouched by them)

    // the JSON view: nlp's one usage line split at the 16th, each part under its codes, priced by hand
    let (_, st) = api.call(Method::GET, &format!("/api/v1/bills/{MONTH}/teams/nlp"), Some(&fin), None).await;
    let lines = st["lines"].as_array().unwrap();
    assert_eq!(lines.len(), 2, "{st}");
    let (a, b) = (&lines[0], &lines[1]);
    assert_eq!((a["namespace"].as_str(), b["namespace"].as_str()), (Some("nlp-prod"), Some("nlp-prod")));
    assert_eq!(
        a["finance_codes"],
        json!({"cost_centre": "CC-1001", "gl_account": "6602.01",
                                          "legal_entity": "北京示例科技有限公司"})
    );
    assert_eq!(b["finance_codes"]["cost_centre"], "CC-2002");
    assert_eq!((dec(&a["card_hours"]), dec(&a["amount"])), (d("12"), d("150.00")), "{a}");
    assert_eq!((dec(&b["card_hours"]), dec(&b["amount"])), (d("18"), d("225.00")), "{b}");
    assert_ne!(a["id"], b["id"]);
    // the team's codes of the month's end, for its other lines
    assert_eq!(st["finance_codes"]["cost_centre"], "CC-2002", "{st}");
    assert_eq!(dec(&st["total"]), d("375.00"));
    // a team without codes reads as before
    let (_, vision) = api.call(Method::GET, &format!("/api/v1/bills/{MONTH}/teams/vision"), Some(&fin), None).await;
    assert!(!vision.to_string().contains("finance_codes"), "{vision}");
    assert_eq!(dec(&vision["total"]), d("125.00"));

    // the CSV: the code columns where a team has codes, on each of its rows; Σ the team's rows = its total
    let csv = raw(&api, &format!("/api/v1/exports/{MONTH}/bills.csv")).await;
    let rows = common::files::csv_rows(&csv);
    let nlp: Vec<_> = rows.iter().filter(|r| r["team"] == "nlp" && r["line_type"] == "usage").collect();
    assert_eq!(nlp.len(), 2, "{rows:?}");
    let by_cc = |cc: &str| nlp.iter().find(|r| r["cost_centre"] == cc).unwrap_or_else(|| panic!("{cc}: {nlp:?}"));
    assert_eq!((by_cc("CC-1001")["amount"].as_str(), by_cc("CC-1001")["gl_account"].as_str()), ("150.00", "6602.01"));
    assert_eq!((by_cc("CC-2002")["amount"].as_str(), by_cc("CC-2002")["card_hours"].as_str()), ("225.00", "18.000000"));
    assert_eq!(by_cc("CC-2002")["legal_entity"], "北京示例科技有限公司");
    assert_eq!(by_cc("CC-1001")["line_id"], a["id"].as_str().unwrap());
    let vision_rows: Vec<_> = rows.iter().filter(|r| r["team"] == "vision").collect();
    assert!(!vision_rows.is_empty());
    assert!(vision_rows.iter().all(|r| r["cost_centre"].is_empty() && r["legal_entity"].is_empty()), "{vision_rows:?}");
    let nlp_sum: Decimal =
        rows.iter().filter(|r| r["team"] == "nlp").map(|r| r["amount"].parse::<Decimal>().unwrap_or_default()).sum();
    assert_eq!(nlp_sum, d("375.00"));
    // an export of a team without codes keeps the columns it had
    let vision_csv = raw(&api, &format!("/api/v1/exports/{MONTH}/bills.csv?team=vision")).await;
    let header = String::from_utf8_lossy(&vision_csv).lines().next().unwrap().to_string();
    assert!(!header.contains("cost_centre") && header.ends_with("line_id"), "{header}");

    // the workbook: nlp's sheet, each usage line's cost centre beside its amount
    let xlsx = raw(&api, &format!("/api/v1/exports/{MONTH}/bills.xlsx?lang=zh")).await;
    let mut wb: Xlsx<_> = calamine::open_workbook_from_rs(Cursor::new(xlsx)).unwrap();
    let names = wb.sheet_names().to_vec();
    let sheet_name =
        names.iter().find(|n| n.contains("nlp") || n.contains("NLP")).unwrap_or_else(|| panic!("{names:?}"));
    let sheet = wb.worksheet_range(sheet_name).unwrap();
    let codes: Vec<String> = sheet.rows().nth(1).unwrap().iter().map(ToString::to_string).collect();
    let col = |name: &str| codes.iter().position(|c| c == name).unwrap_or_else(|| panic!("{name}: {codes:?}"));
    let (cc, amount) = (col("cost_centre"), col("amount"));
    let money = |c: &Data| Decimal::try_from(c.as_f64().unwrap()).unwrap().round_dp(2);
    let usage: Vec<(String, Decimal)> = sheet
        .rows()
        .skip(2)
        .filter(|r| r.get(cc).is_some_and(|c| !c.is_empty()) && r.get(amount).is_some_and(|c| c.as_f64().is_some()))
        .map(|r| (r[cc].to_string(), money(&r[amount])))
        .collect();
    assert_eq!(usage, [("CC-1001".to_string(), d("150.00")), ("CC-2002".to_string(), d("225.00"))], "{usage:?}");

    // the PDF: the team's total by finance codes
    let pdf = raw(&api, &format!("/api/v1/exports/{MONTH}/statements.pdf?team=nlp")).await;
    let text = common::files::pdftotext(&pdf);
    assert!(text.contains("财务编码") && text.contains("成本中心"), "{text}");
    for needle in ["CC-1001", "CC-2002", "6602.02", "¥150.00", "¥225.00", "¥375.00"] {
        assert!(text.contains(needle), "{needle}: {text}");
    }

    // the close freezes them; a later change of October's codes moves nothing, restates nothing
    common::months::close(&api, MONTH).await;
    let closed_bytes = raw(&api, &format!("/api/v1/bills/{MONTH}/teams/nlp")).await;
    let closed: Value = serde_json::from_slice(&closed_bytes).unwrap();
    let closed_ids: Vec<&Value> = closed["lines"].as_array().unwrap().iter().map(|l| &l["id"]).collect();
    assert_eq!(closed_ids, [&a["id"], &b["id"]], "the draft's line ids are the closed month's");
    // the close froze the versions its lines were computed with
    let frozen: Value = sqlx::query_scalar("SELECT snapshot->'finance_codes' FROM closed_months WHERE month = $1")
        .bind(MONTH)
        .fetch_one(&pool)
        .await
        .unwrap();
    let frozen_days: Vec<&str> = frozen
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["team"] == "nlp")
        .map(|v| v["valid_from"].as_str().unwrap())
        .collect();
    assert_eq!(frozen_days, ["2026-10-01", "2026-10-16"], "{frozen}");
    // versions changed or dated into it later: one merging its two lines, one splitting them elsewhere
    let moved = json!({"valid_from": "2026-10-01", "cost_centre": "CC-9009"});
    assert_eq!(put_codes(&api, &fin, "nlp", moved).await.0, 200);
    let merged = json!({"valid_from": "2026-10-16", "cost_centre": "CC-9009"});
    assert_eq!(put_codes(&api, &fin, "nlp", merged).await.0, 200);
    let split = json!({"valid_from": "2026-10-12", "cost_centre": "CC-1212"});
    assert_eq!(put_codes(&api, &fin, "nlp", split).await.0, 201);
    assert_eq!(raw(&api, &format!("/api/v1/bills/{MONTH}/teams/nlp")).await, closed_bytes);
    let (status, nov) = api.call(Method::GET, "/api/v1/bills/2026-11/teams/nlp", Some(&fin), None).await;
    assert_eq!(status, 200, "{nov}");
    assert!(nov["restatements"].as_array().is_some_and(|r| r.is_empty()), "{nov}");
    assert_eq!(dec(&nov["total"]), Decimal::ZERO, "{nov}");
}

#[sqlx::test]
async fn the_cmdb_file_sets_codes_and_the_teams_page_sets_them_in_chinese(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let portal = TestPortal::start(pool.clone()).await;
    store_month(&api).await;
    let import = |query: &'static str, body: &'static str| api.import_mappings(query, body);
    let file = "namespace,team,valid_from,cost_centre,gl_account,legal_entity\n\
                nlp-prod,nlp,2026-10-01,CC-1001,6602.01,北京示例科技有限公司\n\
                nlp-dev,nlp,2026-10-01,CC-1001,6602.01,北京示例科技有限公司\n\
                vision-train,vision,2026-09-01,,,\n";
    // dry: what it would do, nothing written
    let (status, dry) = import("?dry_run=true", file).await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(dry["finance_codes_set"], 1, "{dry}");
    let actions: Vec<&Value> = dry["rows"].as_array().unwrap().iter().map(|r| &r["finance_codes"]).collect();
    assert_eq!(actions, [&json!("insert"), &json!("unchanged"), &Value::Null], "{dry}");
    assert_eq!(count(&pool, "SELECT count(*) FROM team_finance_codes").await, 0);
    let (status, done) = import("", file).await;
    assert_eq!((status, done["finance_codes_set"].as_u64()), (201, Some(1)), "{done}");
    let stored: (String, Option<String>) =
        sqlx::query_as("SELECT cost_centre, legal_entity FROM team_finance_codes WHERE team_id = 'nlp'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(stored, ("CC-1001".to_string(), Some("北京示例科技有限公司".to_string())));
    // again: nothing to do
    let (status, again) = import("", file).await;
    assert_eq!((status, again["finance_codes_set"].as_u64()), (200, Some(0)), "{again}");
    // a contradiction in the file is refused by its row, nothing written
    let bad = "namespace,team,valid_from,cost_centre\nnlp-prod,nlp,2026-11-01,CC-1\nnlp-dev,nlp,2026-11-01,CC-2\n";
    let (status, e) = import("", bad).await;
    assert_eq!(status, 422, "{e}");
    assert_eq!(e["errors"][0]["field"], "row 3: cost_centre", "{e}");
    let bad = "namespace,team,valid_from,cost_centre,gl_account\nnlp-prod,nlp,2026-11-01,CC-1,6602\nnlp-dev,nlp,2026-11-01,CC-1,6603\n";
    let (status, e) = import("", bad).await;
    assert_eq!((status, e["errors"][0]["field"].as_str()), (422, Some("row 3: gl_account")), "{e}");
    assert_eq!(count(&pool, "SELECT count(*) FROM team_finance_codes").await, 1);

    // the teams page: today's codes in the list, the versions and the form on the team's page, in Chinese
    let c = visitor();
    assert_eq!(portal.login(&c, "finance", PASSWORD).await.status, 303);
    // the import's preview shows what a file's codes will do: a file changing only codes is not "unchanged"
    let home = c.get(portal.url("/")).send().await.unwrap().text().await.unwrap();
    let part = reqwest::multipart::Part::bytes(
        "namespace,team,valid_from,cost_centre\nnlp-prod,nlp,2026-10-01,CC-5005\n".as_bytes().to_vec(),
    )
    .file_name("cmdb.csv")
    .mime_str("text/csv")
    .unwrap();
    let form = reqwest::multipart::Form::new().text("csrf", hidden(&home, "csrf").unwrap()).part("file", part);
    let preview = c.post(portal.url("/admin/mappings/preview")).multipart(form).send().await.unwrap();
    let preview = preview.text().await.unwrap();
    assert!(preview.contains("将设置的财务编码版本") && preview.contains("CC-5005"), "{preview}");
    assert!(
        preview.contains(r#"<span class="badge changed">修改</span>"#) && preview.contains("/admin/mappings/apply"),
        "{preview}"
    );
    assert_eq!(count(&pool, "SELECT count(*) FROM team_finance_codes WHERE cost_centre = 'CC-5005'").await, 0);
    let html = c.get(portal.url("/admin/teams/nlp")).send().await.unwrap().text().await.unwrap();
    assert!(html.contains("财务编码") && html.contains("CC-1001") && html.contains("2026-10-01"), "{html}");
    let token = hidden(&html, "csrf").unwrap();
    let form = |valid_from: &'static str| {
        vec![
            ("csrf", token.clone()),
            ("valid_from", valid_from.to_string()),
            ("cost_centre", "CC-3003".to_string()),
            ("gl_account", "6602.03".to_string()),
            ("legal_entity", String::new()),
        ]
    };
    let post = |fields: Vec<(&'static str, String)>| {
        let (portal, c) = (&portal, &c);
        async move {
            let fields: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
            portal.post_form(c, "/admin/teams/nlp/finance-codes", &fields).await
        }
    };
    let refused = post(form("2026-13-01")).await;
    assert_eq!(refused.status, 422);
    assert!(refused.body.contains("field-error") && refused.body.contains("CC-3003"), "{}", refused.body);
    assert_eq!(count(&pool, "SELECT count(*) FROM team_finance_codes").await, 1);
    let saved = post(form("2026-10-16")).await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    let html = c.get(portal.url("/admin/teams/nlp")).send().await.unwrap().text().await.unwrap();
    assert!(html.contains("CC-3003") && html.contains("2026-10-16"), "{html}");
    let text = common::files::visible(&html);
    let data =
        ["nlp", "NLP", "vision", "finance", "owner", "unassigned", "CC-1001", "CC-3003", "6602.01", "6602.03", "ID"];
    let english = cardhour::glossary::english_words(&text, &data);
    assert!(english.is_empty(), "English on the zh page: {english:?}");
    // the statement split at the 16th by the page's version
    let (_, st) = api.call(Method::GET, &format!("/api/v1/bills/{MONTH}/teams/nlp"), Some(&api.finance), None).await;
    let ccs: Vec<&str> =
        st["lines"].as_array().unwrap().iter().map(|l| l["finance_codes"]["cost_centre"].as_str().unwrap()).collect();
    assert_eq!(ccs, ["CC-1001", "CC-3003"], "{st}");
}
