//! Adjustments with maker-checker (issue 30, SPEC §11) on a real Postgres through the API and the portal: who may
//! enter and decide one (a team lead may not enter; the maker may not decide its own), bad input refused naming its
//! field with nothing written, a burst of approvals deciding it once; pending ones on the draft but in no total,
//! approved ones a line of every face (JSON, CSV, xlsx, PDF, the page) to the fen, frozen by the close; one entered
//! for a closed month booked to the next open month as a restatement, the closed month's bytes unchanged; the table
//! refusing any rewrite. Expected totals are the statement's own before the adjustment plus the amounts typed here.

use crate::common;

use std::io::Cursor;

use calamine::{Data, DataType, Reader, Xlsx};
use common::api::{SEED_MONTH, TestApi, seed};
use common::portal::{Answer, PASSWORD, TestPortal, hidden, visitor};
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{Value, json};
use sqlx::PgPool;

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

fn dec(v: &Value) -> Decimal {
    v.as_str().unwrap_or_else(|| panic!("not a decimal string: {v}")).parse().unwrap()
}

async fn team(api: &TestApi, month: &str, team: &str) -> Value {
    let (status, st) =
        api.call(Method::GET, &format!("/api/v1/bills/{month}/teams/{team}"), Some(&api.finance), None).await;
    assert_eq!(status, 200, "{st}");
    st
}

async fn raw(api: &TestApi, path: &str) -> Vec<u8> {
    let resp = api.client.get(format!("{}{path}", api.base)).bearer_auth(&api.finance).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200, "{path}");
    resp.bytes().await.unwrap().to_vec()
}

#[sqlx::test]
async fn an_adjustment_is_entered_approved_by_another_user_and_frozen_by_the_close(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let (fin, admin) = (Some(api.finance.as_str()), Some(api.admin.as_str()));
    let before = team(&api, SEED_MONTH, "vision").await;
    let vision_total = dec(&before["total"]);
    assert!(vision_total > Decimal::ZERO, "{before}");
    assert!(before.get("adjusted").is_none() && before.get("adjustments").is_none(), "{before}");

    // a team lead or a viewer enters nothing; bad input names its field; nothing is written
    let good = json!({"month": SEED_MONTH, "team": "vision", "amount": "-100.50", "reason": "GPU 节点宕机 SLA 抵减"});
    for token in [&api.lead, &api.viewer] {
        assert_eq!(api.call(Method::POST, "/api/v1/adjustments", Some(token), Some(good.clone())).await.0, 403);
    }
    let audit_before = count(&pool, "SELECT count(*) FROM audit_log").await;
    for (patch, status, field) in [
        (json!({"amount": "0"}), 422, "amount"),
        (json!({"amount": "1.005"}), 422, "amount"),
        (json!({"amount": "abc"}), 422, "amount"),
        (json!({"amount": "10000000000.01"}), 422, "amount"),
        (json!({"reason": "   "}), 422, "reason"),
        (json!({"reason": "a\u{202e}b"}), 422, "reason"),
        (json!({"month": "2026-13"}), 422, "month"),
        (json!({"month": "2099-01"}), 422, "month"),
        (json!({"team": "Vision!"}), 422, "team"),
        (json!({"team": "ghost"}), 404, "team"),
    ] {
        let mut body = good.clone();
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        let (got, e) = api.call(Method::POST, "/api/v1/adjustments", fin, Some(body.clone())).await;
        assert_eq!(got, status, "{body}: {e}");
        let named = e["errors"][0]["field"].as_str().or(e["field"].as_str());
        assert_eq!(named, Some(field), "{body}: {e}");
    }
    assert_eq!(count(&pool, "SELECT count(*) FROM adjustments").await, 0);
    assert_eq!(count(&pool, "SELECT count(*) FROM audit_log").await, audit_before);

    // entered: pending, on the draft, in no total, and a blocker of the close
    let (status, a) = api.call(Method::POST, "/api/v1/adjustments", fin, Some(good.clone())).await;
    assert_eq!(status, 201, "{a}");
    assert_eq!(a["status"], "pending");
    let id = a["id"].as_i64().unwrap();
    let line_id = format!("ADJ-{id}");
    let draft = team(&api, SEED_MONTH, "vision").await;
    assert_eq!(dec(&draft["total"]), vision_total, "{draft}");
    assert!(draft.get("adjusted").is_none(), "{draft}");
    assert_eq!(draft["pending_adjustments"][0]["id"], line_id.as_str(), "{draft}");
    assert_eq!(draft["pending_adjustments"][0]["amount"], "-100.50");
    let (_, ready) = api.call(Method::GET, &format!("/api/v1/bills/{SEED_MONTH}/readiness"), fin, None).await;
    let pending: Vec<&Value> =
        ready["blockers"].as_array().unwrap().iter().filter(|b| b["kind"] == "pending_adjustment").collect();
    assert_eq!(pending.len(), 1, "{ready}");
    assert_eq!(pending[0]["id"], id, "{ready}");

    // the maker never decides it; a lead cannot; a burst of the checker's approvals decides it once
    let (status, e) = api.call(Method::POST, &format!("/api/v1/adjustments/{id}/approve"), fin, Some(json!({}))).await;
    assert_eq!(status, 409, "{e}");
    assert!(e["message"].as_str().unwrap().contains("maker-checker"), "{e}");
    let lead = Some(api.lead.as_str());
    assert_eq!(
        api.call(Method::POST, &format!("/api/v1/adjustments/{id}/approve"), lead, Some(json!({}))).await.0,
        403
    );
    let path = format!("/api/v1/adjustments/{id}/approve");
    let burst = (0..6).map(|_| api.call(Method::POST, &path, admin, Some(json!({"note": "核对无误"}))));
    let answers = futures_util::future::join_all(burst).await;
    let ok: Vec<&Value> = answers.iter().filter(|(s, _)| *s == 200).map(|(_, v)| v).collect();
    assert_eq!(ok.len(), 1, "{answers:?}");
    assert!(answers.iter().all(|(s, _)| *s == 200 || *s == 409), "{answers:?}");
    assert_eq!((ok[0]["status"].as_str(), ok[0]["booked_month"].as_str()), (Some("approved"), Some(SEED_MONTH)));
    assert_eq!(count(&pool, "SELECT count(*) FROM audit_log WHERE action = 'adjustment.approve'").await, 1);

    // approved: a line of every face, in the total to the fen
    let expected = vision_total + Decimal::new(-10050, 2);
    let st = team(&api, SEED_MONTH, "vision").await;
    assert_eq!(dec(&st["total"]), expected, "{st}");
    assert_eq!(dec(&st["adjusted"]), Decimal::new(-10050, 2));
    assert_eq!(st["adjustments"][0]["id"], line_id.as_str());
    assert!(st["adjustments"][0]["approved_by"].as_str().unwrap().contains("admin"), "{st}");
    assert!(st.get("pending_adjustments").is_none(), "{st}");
    let (_, month) = api.call(Method::GET, &format!("/api/v1/bills/{SEED_MONTH}"), fin, None).await;
    assert_eq!(dec(&month["adjusted"]), Decimal::new(-10050, 2), "{month}");
    let teams = month["teams"].as_array().unwrap();
    assert!(!teams.is_empty());
    let vision = teams.iter().find(|t| t["team"] == "vision").unwrap();
    assert_eq!(dec(&vision["total"]), expected);
    let nlp = teams.iter().find(|t| t["team"] == "nlp").unwrap();
    // a team without an approved adjustment has no `adjusted` (its statement does not depend on another's)
    assert!(nlp.get("adjusted").is_none(), "{nlp}");

    let csv = raw(&api, &format!("/api/v1/exports/{SEED_MONTH}/bills.csv?team=vision")).await;
    let rows = common::files::csv_rows(&csv);
    let adj: Vec<_> = rows.iter().filter(|r| r["line_type"] == "adjustment").collect();
    assert_eq!(adj.len(), 1, "{rows:?}");
    assert_eq!((adj[0]["amount"].as_str(), adj[0]["adjustment_id"].as_str()), ("-100.50", line_id.as_str()));
    assert_eq!(adj[0]["reason"], "GPU 节点宕机 SLA 抵减");
    let total_row = rows.iter().find(|r| r["line_type"] == "total").unwrap();
    assert_eq!(total_row["amount"].parse::<Decimal>().unwrap(), expected);
    // Σ the team's rows (usage, shares, adjustment) is its total
    let sum: Decimal = rows
        .iter()
        .filter(|r| r["team"] == "vision" && r["line_type"] != "total")
        .map(|r| r["amount"].parse::<Decimal>().unwrap_or_default())
        .sum();
    assert_eq!(sum, expected);

    let xlsx = raw(&api, &format!("/api/v1/exports/{SEED_MONTH}/bills.xlsx?lang=zh")).await;
    let mut wb: Xlsx<_> = calamine::open_workbook_from_rs(Cursor::new(xlsx)).unwrap();
    let names = wb.sheet_names().to_vec();
    let summary = wb.worksheet_range(&names[0]).unwrap();
    let header = summary.rows().position(|r| r.first().is_some_and(|c| *c == "team")).unwrap();
    let codes: Vec<String> = summary.rows().nth(header).unwrap().iter().map(ToString::to_string).collect();
    let col = |name: &str| codes.iter().position(|c| c == name).unwrap_or_else(|| panic!("{name}: {codes:?}"));
    let row = summary.rows().find(|r| r.first().is_some_and(|c| *c == "vision")).unwrap();
    let cell = |c: &Data| Decimal::try_from(c.as_f64().unwrap()).unwrap().round_dp(2);
    assert_eq!(cell(&row[col("adjusted")]), Decimal::new(-10050, 2));
    assert_eq!(cell(&row[col("total")]), expected);
    let vision_sheet = names.iter().find(|n| n.contains("vision") || n.contains("视觉")).unwrap();
    let sheet = wb.worksheet_range(vision_sheet).unwrap();
    let cells: Vec<String> = sheet.rows().flatten().map(ToString::to_string).collect();
    assert!(cells.contains(&line_id) && cells.iter().any(|c| c == "GPU 节点宕机 SLA 抵减"), "{cells:?}");

    let pdf = raw(&api, &format!("/api/v1/exports/{SEED_MONTH}/statements.pdf?team=vision")).await;
    let text = common::files::pdftotext(&pdf);
    assert!(text.contains(&line_id) && text.contains("GPU 节点宕机 SLA 抵减") && text.contains("调账"), "{text}");
    // the line, the total (87.50 of usage in the seed) and the summary's column, in the statement's own minus
    assert!(text.contains("−¥100.50"), "{text}");
    let printed_total = format!("−¥{}", (-expected).round_dp(2));
    assert!(text.contains(&printed_total), "{printed_total}: {text}");

    // a second one rejected: a record, never a line; decided once
    let debit = json!({"month": SEED_MONTH, "team": "nlp", "amount": "20", "reason": "重复抵减冲回"});
    let (_, b) = api.call(Method::POST, "/api/v1/adjustments", admin, Some(debit)).await;
    let bid = b["id"].as_i64().unwrap();
    let (status, r) = api
        .call(Method::POST, &format!("/api/v1/adjustments/{bid}/reject"), fin, Some(json!({"note": "无依据"})))
        .await;
    assert_eq!((status, r["status"].as_str()), (200, Some("rejected")), "{r}");
    let (status, _) = api.call(Method::POST, &format!("/api/v1/adjustments/{bid}/approve"), fin, Some(json!({}))).await;
    assert_eq!(status, 409);
    let nlp_st = team(&api, SEED_MONTH, "nlp").await;
    assert!(nlp_st.get("adjustments").is_none() && nlp_st.get("pending_adjustments").is_none(), "{nlp_st}");

    // the close freezes the approved one
    let close = json!({"mode": "showback", "unallocated": "kept_by_platform", "override": {"reason": "月底对账"}});
    let (status, closed) = api.call(Method::POST, &format!("/api/v1/bills/{SEED_MONTH}/close"), fin, Some(close)).await;
    assert_eq!(status, 201, "{closed}");
    let frozen: Value = sqlx::query_scalar("SELECT snapshot FROM closed_months WHERE month = $1")
        .bind(SEED_MONTH)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(frozen["adjustments"][0]["id"], id, "{frozen}");
    let closed_bytes = raw(&api, &format!("/api/v1/bills/{SEED_MONTH}/teams/nlp")).await;
    let closed_vision = team(&api, SEED_MONTH, "vision").await;
    assert_eq!(dec(&closed_vision["total"]), expected);

    // one for the closed month: approved, it restates it on the next open month; the closed month is unchanged
    let late = json!({"month": SEED_MONTH, "team": "nlp", "amount": "30.00", "reason": "十月漏计的存储费"});
    let (_, c) = api.call(Method::POST, "/api/v1/adjustments", fin, Some(late)).await;
    let cid = c["id"].as_i64().unwrap();
    let (status, c) =
        api.call(Method::POST, &format!("/api/v1/adjustments/{cid}/approve"), admin, Some(json!({}))).await;
    assert_eq!((status, c["booked_month"].as_str()), (200, Some("2026-11")), "{c}");
    assert_eq!(raw(&api, &format!("/api/v1/bills/{SEED_MONTH}/teams/nlp")).await, closed_bytes);
    let nov = team(&api, "2026-11", "nlp").await;
    assert_eq!(nov["adjustments"][0]["id"], format!("ADJ-{cid}").as_str(), "{nov}");
    assert_eq!(nov["adjustments"][0]["month"], SEED_MONTH);
    assert_eq!(dec(&nov["adjusted"]), Decimal::new(3000, 2));
    assert_eq!(
        dec(&nov["total"]),
        dec(&nov["allocated"]) + dec(&nov["unallocated_share"]) + dec(&nov["restated"]) + Decimal::new(3000, 2)
    );

    // the lead reads its own team's adjustments only
    let (_, mine) = api.call(Method::GET, "/api/v1/adjustments", lead, None).await;
    let mine = mine.as_array().unwrap();
    assert!(!mine.is_empty());
    assert!(mine.iter().all(|a| a["team"] == "vision"), "{mine:?}");
    // … and learns nothing of nlp's in November: not its statement, not its adjustment, no adjustments column
    let (status, _) = api.call(Method::GET, "/api/v1/bills/2026-11/teams/nlp", lead, None).await;
    assert_eq!(status, 404);
    let (status, nov_month) = api.call(Method::GET, "/api/v1/bills/2026-11", lead, None).await;
    assert_eq!(status, 200, "{nov_month}");
    let seen = nov_month.to_string();
    assert!(!seen.contains("nlp") && !seen.contains("adjusted") && !seen.contains("ADJ-"), "{seen}");
    let (_, nov_vision) = api.call(Method::GET, "/api/v1/bills/2026-11/teams/vision", lead, None).await;
    assert!(nov_vision.get("adjusted").is_none() && nov_vision.get("adjustments").is_none(), "{nov_vision}");

    // the table refuses a rewrite and a delete, whoever asks
    for sql in [
        format!("UPDATE adjustments SET amount = 1 WHERE id = {id}"),
        format!(
            "UPDATE adjustments SET status = 'pending', decided_by = NULL, decided_at = NULL, booked_month = NULL WHERE id = {id}"
        ),
        format!("DELETE FROM adjustments WHERE id = {bid}"),
    ] {
        assert!(sqlx::query(&sql).execute(&pool).await.is_err(), "{sql}");
    }
    assert_eq!(count(&pool, "SELECT count(*) FROM audit_log WHERE action LIKE 'adjustment.%'").await, 6);
}

/// The page at `path` as the session `c` gets it.
async fn page(portal: &TestPortal, c: &reqwest::Client, path: &str) -> String {
    c.get(portal.url(path)).send().await.unwrap().text().await.unwrap()
}

/// POSTs a form with the session's CSRF token (from its home page) and these fields.
async fn post(portal: &TestPortal, c: &reqwest::Client, path: &str, fields: &[(&str, &str)]) -> Answer {
    let home = c.get(portal.url("/")).send().await.unwrap().text().await.unwrap();
    let token = hidden(&home, "csrf").expect("the home page's logout form");
    let mut all = vec![("csrf", token.as_str())];
    all.extend_from_slice(fields);
    portal.post_form(c, path, &all).await
}

#[sqlx::test]
async fn the_adjustments_page_enters_and_decides_in_chinese(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let portal = TestPortal::start(pool.clone()).await;
    seed(&api).await;
    let (maker, checker) = (visitor(), visitor());
    assert_eq!(portal.login(&maker, "finance", PASSWORD).await.status, 303);
    assert_eq!(portal.login(&checker, "admin", PASSWORD).await.status, 303);
    let fields = [("month", SEED_MONTH), ("team", "vision"), ("amount", "-88.80"), ("reason", "十月机房断电补偿")];
    let bad = post(
        &portal,
        &maker,
        "/adjustments",
        &[("month", SEED_MONTH), ("team", "vision"), ("amount", "x"), ("reason", "r")],
    )
    .await;
    assert_eq!(bad.status, 422);
    assert_eq!(count(&pool, "SELECT count(*) FROM adjustments").await, 0);
    let entered = post(&portal, &maker, "/adjustments", &fields).await;
    assert_eq!(entered.status, 303);
    let id: i64 = sqlx::query_scalar("SELECT id FROM adjustments").fetch_one(&pool).await.unwrap();

    // the maker's own: no buttons, and a POST of the decision refused in words
    let html = page(&portal, &maker, &format!("/adjustments?month={SEED_MONTH}")).await;
    assert!(
        html.contains(&format!("ADJ-{id}")) && html.contains("待审批") && html.contains("十月机房断电补偿"),
        "{html}"
    );
    assert!(!html.contains(&format!("/adjustments/{id}/approve")), "{html}");
    let own = post(&portal, &maker, &format!("/adjustments/{id}/approve"), &[("note", ""), ("back", SEED_MONTH)]).await;
    assert_eq!(own.status, 409);
    assert!(own.body.contains("须由另一位财务或管理员审批"), "{}", own.body);
    // the month's draft says one awaits approval; its total does not move
    let draft = page(&portal, &maker, &format!("/bills/{SEED_MONTH}")).await;
    assert!(draft.contains("id=\"pending-adjustments\""), "{draft}");

    // the checker approves it from the page
    let html = page(&portal, &checker, &format!("/adjustments?month={SEED_MONTH}")).await;
    assert!(html.contains(&format!("/adjustments/{id}/approve")), "{html}");
    let done =
        post(&portal, &checker, &format!("/adjustments/{id}/approve"), &[("note", "已核对"), ("back", SEED_MONTH)])
            .await;
    assert_eq!(done.status, 303);
    let status: String =
        sqlx::query_scalar("SELECT status FROM adjustments WHERE id = $1").bind(id).fetch_one(&pool).await.unwrap();
    assert_eq!(status, "approved");
    let html = page(&portal, &checker, &format!("/adjustments?month={SEED_MONTH}")).await;
    assert!(html.contains("已批准"), "{html}");
    let text = common::files::visible(&html);
    // the data: ids, user names, the zone, team ids and stored names of the form's choices
    let line_id = format!("ADJ-{id}");
    let data =
        [SEED_MONTH, &line_id, "Asia/Shanghai", "finance", "admin", "vision", "nlp", "NLP", "unassigned", "YYYY-MM"];
    let english = cardhour::glossary::english_words(&text, &data);
    assert!(english.is_empty(), "English on the zh page: {english:?}");
    // the team's statement page prints it as a line of its total
    let st = page(&portal, &checker, &format!("/bills/{SEED_MONTH}/teams/vision")).await;
    assert!(st.contains(&format!("ADJ-{id}")) && st.contains("调账"), "{st}");
}
