//! The portal's budgets and rates pages over HTTP, signed in through the login form: each shows the API's numbers
//! (budgets, spend, forecast, rate versions, cloud rates, self-build vs rent, the TCO preview), a save through a
//! page creates exactly what the API then lists, a team lead sees its own teams only and reaches no form, and every
//! bad input gives the form back (422) with the field's message in the page's language and nothing written.

use crate::common;

use common::api::{SEED_FROM, SEED_MONTH, SEED_TO, TestApi, seed, write_counts};
use common::portal::{PASSWORD, TestPortal, hidden, visitor};
use common::yuan;
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

async fn get(portal: &TestPortal, c: &reqwest::Client, path: &str) -> (u16, String) {
    let r = c.get(portal.url(path)).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// POSTs a form; returns status, `Location` and body.
async fn post(portal: &TestPortal, c: &reqwest::Client, path: &str, fields: &[(&str, &str)]) -> (u16, String, String) {
    let r = c.post(portal.url(path)).form(fields).send().await.unwrap();
    let status = r.status().as_u16();
    let location = r.headers().get("location").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    (status, location, r.text().await.unwrap())
}

async fn signed_in(portal: &TestPortal, user: &str) -> reqwest::Client {
    let c = visitor();
    let answer = portal.login(&c, user, PASSWORD).await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    c
}

/// The session's CSRF token, from a page's forms.
async fn csrf(portal: &TestPortal, c: &reqwest::Client, path: &str) -> String {
    let (status, page) = get(portal, c, path).await;
    assert_eq!(status, 200, "{path}: {page}");
    hidden(&page, "csrf").filter(|t| !t.is_empty()).expect("a CSRF token on the page")
}

/// The message next to field `name` of the POST form to `action`: the text of the `field-error` inside the same
/// `<label>` as the field's input.
fn field_message(page: &str, action: &str, name: &str) -> Option<String> {
    let form = &page[page.find(&format!(r#"<form method="post" action="{action}""#))?..];
    let form = &form[..form.find("</form>")?];
    let at = form.find(&format!(r#"name="{name}""#))?;
    let label = &form[at..];
    let label = &label[..label.find("</label>")?];
    let start = label.find(r#"<span class="field-error">"#)? + r#"<span class="field-error">"#.len();
    Some(label[start..].split('<').next()?.to_string())
}

/// A decimal of the API's JSON (a string), compared by value (the database keeps its own scale).
fn dec(v: &Value) -> rust_decimal::Decimal {
    s(v).parse().unwrap()
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("a string: {v}"))
}

/// A rate per card-hour as the pages print it (4 decimals, thousands grouped), written independently.
fn rate4(r: &str) -> String {
    let d: rust_decimal::Decimal = r.parse().unwrap();
    let fixed = format!("{:.4}", d);
    let (int, frac) = fixed.split_once('.').unwrap();
    let y = yuan(&format!("{int}.00"));
    format!("{}.{frac}", y.strip_suffix(".00").unwrap())
}

#[sqlx::test]
async fn budgets_show_the_api_numbers_and_a_team_lead_only_its_own(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let portal = TestPortal::start(pool.clone()).await;
    let month = SEED_MONTH;

    let (status, list) = api.call(Method::GET, &format!("/api/v1/budgets/{month}"), Some(&api.finance), None).await;
    assert_eq!(status, 200, "{list}");
    let list = list.as_array().unwrap().clone();
    assert_eq!(list.len(), 2, "the seed budgets both teams: {list:?}");

    let finance = signed_in(&portal, "finance").await;
    let (status, page) = get(&portal, &finance, &format!("/budgets?month={month}&lang=en")).await;
    assert_eq!(status, 200, "{page}");
    for b in &list {
        let team = s(&b["team_id"]);
        let row =
            &page[page.find(&format!(r#"<tr id="budget-{team}">"#)).unwrap_or_else(|| panic!("{team}: {page}"))..];
        let row = &row[..row.find("</tr>").unwrap()];
        for field in ["amount", "spent", "forecast"] {
            assert!(row.contains(&yuan(s(&b[field]))), "{team}'s {field} {} not on its row: {row}", yuan(s(&b[field])));
        }
        assert_ne!(s(&b["spent"]), "0.00", "the seed spends: {b}");
    }
    // the form: CSRF, every team
    assert!(page.contains(r#"<form method="post" action="/budgets""#), "finance gets the form");
    assert!(page.contains(r#"<option value="nlp""#) && page.contains(r#"<option value="vision""#), "{page}");

    // a team lead: its own team's row only, no form
    let lead = signed_in(&portal, "lead").await;
    let (status, page) = get(&portal, &lead, &format!("/budgets?month={month}")).await;
    assert_eq!(status, 200, "{page}");
    let vision = list.iter().find(|b| b["team_id"] == "vision").unwrap();
    assert!(page.contains(r#"<tr id="budget-vision">"#) && page.contains(&yuan(s(&vision["spent"]))), "{page}");
    assert!(!page.contains("budget-nlp") && !page.contains("NLP"), "another team on the lead's page: {page}");
    assert!(!page.contains(r#"<form method="post" action="/budgets""#), "a lead gets no form");

    // a team lead's POST, for another team or its own: the not-found page; a viewer's: forbidden; nothing written
    let before = write_counts(&pool).await;
    let (_, missing) = get(&portal, &lead, "/no-such-page").await;
    let token = csrf(&portal, &lead, "/budgets").await;
    for team in ["nlp", "vision", "ghost"] {
        let form = [("csrf", token.as_str()), ("month", month), ("team", team), ("amount", "1"), ("thresholds", "")];
        let (status, _, body) = post(&portal, &lead, "/budgets", &form).await;
        assert_eq!((status, body == missing), (404, true), "a lead setting {team}'s budget");
    }
    let viewer = signed_in(&portal, "viewer").await;
    let (status, page) = get(&portal, &viewer, &format!("/budgets?month={month}")).await;
    assert_eq!(status, 200);
    assert!(page.contains(r#"<tr id="budget-nlp">"#) && !page.contains(r#"<form method="post" action="/budgets""#));
    let token = csrf(&portal, &viewer, "/budgets").await;
    let form = [("csrf", token.as_str()), ("month", month), ("team", "nlp"), ("amount", "1")];
    let (status, _, body) = post(&portal, &viewer, "/budgets", &form).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(write_counts(&pool).await, before, "a refused POST wrote");

    // finance sets a budget through the page: the API then lists exactly it
    let token = csrf(&portal, &finance, "/budgets").await;
    let form = [
        ("csrf", token.as_str()),
        ("month", "2026-11"),
        ("team", "nlp"),
        ("amount", "12345.67"),
        ("thresholds", "0.5, 1"),
    ];
    let (status, location, body) = post(&portal, &finance, "/budgets", &form).await;
    assert_eq!((status, location.as_str()), (303, "/budgets?month=2026-11&saved=1"), "{body}");
    let (_, list) = api.call(Method::GET, "/api/v1/budgets/2026-11", Some(&api.finance), None).await;
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!((s(&list[0]["team_id"]), s(&list[0]["amount"])), ("nlp", "12345.67"), "{list:?}");
    let thresholds: Vec<_> = list[0]["thresholds"].as_array().unwrap().iter().map(dec).collect();
    assert_eq!(thresholds, [dec(&json!("0.5")), dec(&json!("1"))], "{list:?}");
    let (_, page) = get(&portal, &finance, &format!("{location}&lang=zh-CN")).await;
    assert!(page.contains("¥12,345.67") && page.contains("预算已保存"), "{page}");

    // a budget below the spend: the alerts the API lists are on the team's row
    let form = [("csrf", token.as_str()), ("month", month), ("team", "nlp"), ("amount", "100"), ("thresholds", "")];
    assert_eq!(post(&portal, &finance, "/budgets", &form).await.0, 303);
    let (_, list) = api.call(Method::GET, &format!("/api/v1/budgets/{month}"), Some(&api.finance), None).await;
    let nlp = list.as_array().unwrap().iter().find(|b| b["team_id"] == "nlp").unwrap().clone();
    let alerts = nlp["alerts"].as_array().unwrap();
    assert!(!alerts.is_empty(), "spent {} of 100 raises alerts: {nlp}", nlp["spent"]);
    let (_, page) = get(&portal, &finance, &format!("/budgets?month={month}&lang=en")).await;
    let row = &page[page.find(r#"<tr id="budget-nlp">"#).unwrap()..];
    let row = &row[..row.find("</tr>").unwrap()];
    assert!(row.contains("¥100.00") && row.contains(&yuan(s(&nlp["spent"]))), "{row}");
    for a in alerts {
        let pct = format!("{:.1} %", dec(&a["threshold"]) * rust_decimal::Decimal::ONE_HUNDRED);
        assert!(row.contains(&format!("{pct} ({})", s(&a["basis"]))), "alert {a} not on {row}");
    }
}

#[sqlx::test]
async fn a_bad_budget_comes_back_with_the_fields_message_and_writes_nothing(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let portal = TestPortal::start(pool.clone()).await;
    let finance = signed_in(&portal, "finance").await;
    let token = csrf(&portal, &finance, "/budgets").await;
    let before = write_counts(&pool).await;
    let long = "9".repeat(40);
    // (field, value, the zh message next to it, a part of the en one)
    let cases: &[(&str, &str, &str, &str)] = &[
        ("amount", "", "必填", "Required"),
        ("amount", "abc", "不是数字", "Not a number"),
        ("amount", "-5", "不能为负数", "Must not be negative"),
        ("amount", "1\0", "不允许的字符", "not allowed"),
        ("amount", &long, "太长", "Too long"),
        ("amount", "0", "超出允许范围", "must be more than 0"),
        ("amount", "10000000001", "超出允许范围", "Out of range"),
        ("month", "", "必填", "Required"),
        ("month", "1999-12", "2000-01-01", "between 2000-01-01 and 2100-12-31"),
        ("month", "2026-13", "不是月份", "Not a month"),
        ("team", "", "必填", "Required"),
        ("team", "ghost", "没有这个团队", "No such team"),
        ("team", "NLP!", "没有这个团队", "No such team"),
        ("thresholds", "abc", "不是数字", "Not a number"),
        ("thresholds", "11", "超出允许范围", "Out of range"),
        ("thresholds", "0.5\0", "不允许的字符", "not allowed"),
    ];
    for (field, value, zh, en) in cases {
        let mut form = vec![
            ("csrf", token.as_str()),
            ("month", "2026-11"),
            ("team", "nlp"),
            ("amount", "100"),
            ("thresholds", ""),
        ];
        form.iter_mut().find(|(k, _)| k == field).unwrap().1 = value;
        for (lang, want) in [("zh-CN", zh), ("en", en)] {
            let r =
                finance.post(portal.url("/budgets")).header("accept-language", lang).form(&form).send().await.unwrap();
            let status = r.status().as_u16();
            let body = r.text().await.unwrap();
            assert_eq!(status, 422, "{field}={value:?} ({lang}): {body}");
            let msg = field_message(&body, "/budgets", field).unwrap_or_else(|| panic!("{field}={value:?}: {body}"));
            assert!(msg.contains(want), "{field}={value:?} ({lang}): {msg:?}");
            // the form keeps what was typed elsewhere
            assert!(body.contains(r#"<option value="nlp" selected>"#) || *field == "team", "{body}");
        }
    }
    // no CSRF token, or another: refused, nothing written
    for bad in [None, Some("forged")] {
        let mut form = vec![("month", "2026-11"), ("team", "nlp"), ("amount", "100")];
        if let Some(b) = bad {
            form.push(("csrf", b));
        }
        let (status, ..) = post(&portal, &finance, "/budgets", &form).await;
        assert_eq!(status, 403, "csrf {bad:?}");
    }
    // a bad month in the month picker: the page with the month's message
    let (status, page) = get(&portal, &finance, "/budgets?month=abc&lang=en").await;
    assert_eq!(status, 422, "{page}");
    assert!(field_message(&page, "/budgets", "month").is_some_and(|m| m.contains("Not a month")), "{page}");
    let (status, page) = get(&portal, &finance, "/budgets?month=2026-1%001").await;
    assert_eq!(status, 422, "{page}");
    assert!(field_message(&page, "/budgets", "month").is_some_and(|m| m.contains("not allowed")), "{page}");
    assert_eq!(write_counts(&pool).await, before, "a refused budget wrote");
    let (_, list) = api.call(Method::GET, "/api/v1/budgets/2026-11", Some(&api.finance), None).await;
    assert_eq!(list, json!([]));
}

fn tco() -> Value {
    json!({"card_price": "80000", "server_share_per_card": "40000", "depreciation_years": "5",
        "avg_power_kw": "0.5", "pue": "1.4", "electricity_price": "0.8", "system_factor": "1.2",
        "datacenter_per_card_year": "3000", "staff_per_card_year": "2000", "recovery_utilization": "0.7"})
}

/// The calculator's form fields for `tco` (and the model and date), with `csrf`.
fn tco_form<'a>(
    csrf: &'a str,
    tco: &'a Value,
    model: &'a str,
    from: &'a str,
    action: &'a str,
) -> Vec<(&'a str, &'a str)> {
    let mut f = vec![("csrf", csrf), ("gpu_model", model), ("effective_from", from), ("action", action)];
    for (k, v) in tco.as_object().unwrap() {
        f.push((k.as_str(), v.as_str().unwrap()));
    }
    f
}

#[sqlx::test]
async fn the_rates_page_shows_the_api_history_cloud_rates_and_rent_vs_build(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let fin = Some(api.finance.as_str());
    let body = json!({"gpu_model": "A100-80GB", "effective_from": "2026-10-01", "tco": tco()});
    assert_eq!(api.call(Method::POST, "/api/v1/rates", fin, Some(body)).await.0, 201);
    let cloud = json!({"on_demand": "25.5", "spot": "9"});
    assert_eq!(api.call(Method::PUT, "/api/v1/cloud-rates/A100-80GB", fin, Some(cloud)).await.0, 200);
    let portal = TestPortal::start(pool.clone()).await;

    let (_, rates) = api.call(Method::GET, "/api/v1/rates", fin, None).await;
    let rates = rates.as_array().unwrap().clone();
    assert_eq!(rates.len(), 2, "{rates:?}");
    let q = format!("model=A100-80GB&from={SEED_FROM}&to={SEED_TO}");
    let (status, rvb) = api.call(Method::GET, &format!("/api/v1/rent-vs-build?{q}"), fin, None).await;
    assert_eq!(status, 200, "{rvb}");

    let finance = signed_in(&portal, "finance").await;
    let (status, page) = get(&portal, &finance, &format!("/rates?{q}&lang=en")).await;
    assert_eq!(status, 200, "{page}");
    for r in &rates {
        let row =
            &page[page.find(&format!(r#"<tr id="rate-{}">"#, r["id"])).unwrap_or_else(|| panic!("{r}: {page}"))..];
        let row = &row[..row.find("</tr>").unwrap()];
        assert!(row.contains(&rate4(s(&r["rate"]))), "{} not on {row}", rate4(s(&r["rate"])));
        assert!(row.contains(s(&r["effective_from"])), "{row}");
        if r["tco"].is_null() {
            // the manual version of 2026-09-01 runs until the day before the TCO version
            assert!(row.contains("set by hand") && row.contains("2026-09-30"), "{row}");
        } else {
            assert!(row.contains("¥80,000.00") && row.contains("70.0 %") && row.contains("current"), "{row}");
        }
    }
    assert!(page.contains("¥25.5000") && page.contains("¥9.0000"), "cloud rates: {page}");
    let rvb = &rvb["comparison"];
    let own = rate4(s(&rvb["own_cost_per_allocated_card_hour"]));
    assert!(page.contains(&format!(r#"<div class="value" id="rvb-own">{own}</div>"#)), "{own}: {page}");
    let on_demand = &rvb["on_demand"];
    assert!(page.contains(&rate4(s(&on_demand["cloud_rate"]))), "{page}");
    let verdict = if on_demand["build_wins"] == true { "building is cheaper" } else { "renting is cheaper" };
    assert!(page.contains(verdict), "{verdict}: {page}");
    assert!(page.contains(r#"<form method="post" action="/rates/cloud""#) && page.contains(r#"href="/rates/new""#));

    // a team lead reads the rates, as in the API, but not the cluster-wide comparison, and gets no form
    let lead = signed_in(&portal, "lead").await;
    let (status, page) = get(&portal, &lead, &format!("/rates?{q}")).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("¥12.5000") && page.contains("¥5.6893"), "{page}");
    assert!(!page.contains(r#"id="rent""#) && !page.contains("<form method=\"post\" action=\"/rates"), "{page}");

    // a bad question: the field's message, 422
    let (status, page) = get(&portal, &finance, "/rates?model=A100-80GB&from=abc&to=2026-10-02&lang=en").await;
    assert_eq!(status, 422, "{page}");
    assert!(page.contains("Not a date"), "{page}");
    let (status, page) =
        get(&portal, &finance, "/rates?model=A100-80GB&from=2026-10-05&to=2026-10-01&lang=zh-CN").await;
    assert_eq!(status, 422, "{page}");
    assert!(page.contains("超出允许范围"), "{page}");
    let (status, page) = get(&portal, &finance, "/rates?model=A100%00&from=2026-10-05&to=2026-10-06&lang=en").await;
    assert_eq!(status, 422, "{page}");
    assert!(page.contains("not allowed"), "{page}");
    // no usage in the range: said in words
    let (status, page) = get(&portal, &finance, "/rates?model=A100-80GB&from=2026-01-01&to=2026-01-02&lang=en").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("No measured usage"), "{page}");
}

#[sqlx::test]
async fn the_tco_preview_is_the_apis_and_save_creates_exactly_that_version(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let portal = TestPortal::start(pool.clone()).await;
    let (status, preview) = api.call(Method::POST, "/api/v1/rates/preview", Some(&api.finance), Some(tco())).await;
    assert_eq!(status, 200, "{preview}");

    let finance = signed_in(&portal, "finance").await;
    let token = csrf(&portal, &finance, "/rates/new").await;
    let before = write_counts(&pool).await;
    let tco = tco();
    let form = tco_form(&token, &tco, "A100-80GB", "2026-12-01", "preview");
    let r = finance.post(portal.url("/rates/new")).header("accept-language", "en").form(&form).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let page = r.text().await.unwrap();
    assert!(page.contains(&format!(r#"id="rate">{}<"#, rate4(s(&preview["rate"])))), "{page}");
    assert!(page.contains(&format!(r#"id="annual">{}<"#, yuan(s(&preview["annual_tco"])))), "{page}");
    for line in [
        "hardware_per_year",
        "power_per_year_before_system_factor",
        "power_per_year",
        "datacenter_per_year",
        "staff_per_year",
    ] {
        assert!(page.contains(&yuan(s(&preview[line]))), "{line}: {page}");
    }
    assert!(page.contains("nothing is saved yet"), "{page}");
    assert_eq!(write_counts(&pool).await, before, "a preview wrote");

    // the preview's Save carries the same inputs
    let save = &page[page.rfind(r#"<form method="post" action="/rates/new""#).unwrap()..];
    let save = &save[..save.find("</form>").unwrap()];
    let mut fields: Vec<(String, String)> = Vec::new();
    for part in save.split("<input type=\"hidden\" name=\"").skip(1) {
        let (name, rest) = part.split_once('"').unwrap();
        let value = rest.split_once("value=\"").unwrap().1.split('"').next().unwrap();
        fields.push((name.to_string(), value.to_string()));
    }
    assert!(fields.iter().any(|(k, v)| k == "action" && v == "save"), "{fields:?}");
    assert_eq!(fields.len(), 14, "csrf, model, date, 10 inputs, action: {fields:?}");
    let r = finance.post(portal.url("/rates/new")).form(&fields).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 303, "{}", r.text().await.unwrap());
    let location = r.headers()["location"].to_str().unwrap().to_string();
    let (_, list) = api.call(Method::GET, "/api/v1/rates", Some(&api.viewer), None).await;
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1, "exactly one version: {list:?}");
    let v = &list[0];
    assert_eq!(
        (s(&v["gpu_model"]), s(&v["effective_from"]), s(&v["rate"])),
        ("A100-80GB", "2026-12-01", s(&preview["rate"]))
    );
    assert_eq!(v["tco"], tco, "the stored inputs are the typed ones");
    assert_eq!(s(&v["created_by"]), "user:finance");
    assert_eq!(location, format!("/rates?saved={}#model-A100-80GB", v["id"]));
    let (_, page) = get(&portal, &finance, &location).await;
    assert!(page.contains(&format!(r#"<tr id="rate-{}">"#, v["id"])) && page.contains("费率版本已保存"), "{page}");

    // the same date again: the form back, the date's message, nothing more written
    let before = write_counts(&pool).await;
    let r = finance.post(portal.url("/rates/new")).header("accept-language", "en").form(&fields).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 422);
    let page = r.text().await.unwrap();
    let msg = field_message(&page, "/rates/new", "effective_from").unwrap_or_else(|| panic!("{page}"));
    assert!(msg.contains("Already taken") && msg.contains("2026-12-01"), "{msg}");
    assert_eq!(write_counts(&pool).await, before);

    // viewer and team lead: not found (what a role may not open does not exist for it); nothing written
    let viewer = signed_in(&portal, "viewer").await;
    assert_eq!(get(&portal, &viewer, "/rates/new").await.0, 404);
    let vt = csrf(&portal, &viewer, "/rates").await;
    assert_eq!(post(&portal, &viewer, "/rates/new", &tco_form(&vt, &tco, "H100", "2026-12-01", "save")).await.0, 404);
    assert_eq!(
        post(&portal, &viewer, "/rates/cloud", &[("csrf", vt.as_str()), ("model", "H100"), ("on_demand", "1")]).await.0,
        404
    );
    let lead = signed_in(&portal, "lead").await;
    let (_, missing) = get(&portal, &lead, "/no-such-page").await;
    assert_eq!(get(&portal, &lead, "/rates/new").await, (404, missing.clone()));
    let lt = csrf(&portal, &lead, "/rates").await;
    let (status, _, body) =
        post(&portal, &lead, "/rates/new", &tco_form(&lt, &tco, "H100", "2026-12-01", "save")).await;
    assert_eq!((status, body == missing), (404, true));
    let (status, _, body) =
        post(&portal, &lead, "/rates/cloud", &[("csrf", lt.as_str()), ("model", "H100"), ("on_demand", "1")]).await;
    assert_eq!((status, body == missing), (404, true));
    fn manual(t: &str) -> [(&str, &str); 4] {
        [("csrf", t), ("gpu_model", "H100"), ("effective_from", "2026-12-01"), ("rate", "1")]
    }
    let (vt, lt) = (vt.as_str(), lt.as_str());
    assert_eq!(post(&portal, &viewer, "/rates/manual", &manual(vt)).await.0, 404);
    let (status, _, body) = post(&portal, &lead, "/rates/manual", &manual(lt)).await;
    assert_eq!((status, body == missing), (404, true));
    assert_eq!(write_counts(&pool).await, before, "a refused POST wrote");
}

#[sqlx::test]
async fn bad_rate_forms_come_back_with_the_fields_message_and_write_nothing(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let portal = TestPortal::start(pool.clone()).await;
    let finance = signed_in(&portal, "finance").await;
    let token = csrf(&portal, &finance, "/rates/new").await;
    let before = write_counts(&pool).await;
    let long = "x".repeat(101);
    let cases: &[(&str, &str, &str, &str)] = &[
        ("gpu_model", "", "必填", "Required"),
        ("gpu_model", "A100\0", "不允许的字符", "not allowed"),
        ("gpu_model", &long, "太长", "Too long"),
        ("effective_from", "", "必填", "Required"),
        ("effective_from", "2026-02-30", "不是日期", "Not a date"),
        ("effective_from", "12/01/2026", "不是日期", "Not a date"),
        ("effective_from", "2101-01-01", "2100-12-31", "between 2000-01-01 and 2100-12-31"),
        ("card_price", "", "必填", "Required"),
        ("card_price", "abc", "不是数字", "Not a number"),
        ("card_price", "-80000", "不能为负数", "Must not be negative"),
        ("card_price", "1e5", "不是数字", "Not a number"),
        ("card_price", "80000\0", "不允许的字符", "not allowed"),
        ("card_price", "2000000000", "超出允许范围", "between 0 and 1,000,000,000"),
        ("pue", "11", "超出允许范围", "Out of range"),
        ("avg_power_kw", "0", "超出允许范围", "Out of range"),
        ("recovery_utilization", "70", "超出允许范围", "a share, not a percent"),
        ("depreciation_years", "0.5", "超出允许范围", "Out of range"),
    ];
    let tco = tco();
    for action in ["preview", "save"] {
        for (field, value, zh, en) in cases {
            let mut form = tco_form(&token, &tco, "A100-80GB", "2026-12-01", action);
            form.iter_mut().find(|(k, _)| k == field).unwrap().1 = value;
            for (lang, want) in [("zh-CN", zh), ("en", en)] {
                let r = finance
                    .post(portal.url("/rates/new"))
                    .header("accept-language", lang)
                    .form(&form)
                    .send()
                    .await
                    .unwrap();
                let status = r.status().as_u16();
                let body = r.text().await.unwrap();
                assert_eq!(status, 422, "{action} {field}={value:?} ({lang}): {body}");
                let msg =
                    field_message(&body, "/rates/new", field).unwrap_or_else(|| panic!("{field}={value:?}: {body}"));
                assert!(msg.contains(want), "{action} {field}={value:?} ({lang}): {msg:?}");
                assert!(!body.contains(r#"id="rate">"#), "a bad form previews nothing: {body}");
            }
        }
    }
    // the cloud rates form
    let cases: &[(&str, &str, &str)] = &[
        ("model", "", "必填"),
        ("model", "H100\0", "不允许的字符"),
        ("on_demand", "abc", "不是数字"),
        ("spot", "-1", "不能为负数"),
        ("reserved", "2000000", "超出允许范围"),
    ];
    for (field, value, zh) in cases {
        let mut form =
            vec![("csrf", token.as_str()), ("model", "H100-80GB"), ("on_demand", "25"), ("spot", ""), ("reserved", "")];
        form.iter_mut().find(|(k, _)| k == field).unwrap().1 = value;
        let (status, _, body) = post(&portal, &finance, "/rates/cloud", &form).await;
        assert_eq!(status, 422, "{field}={value:?}: {body}");
        let msg = field_message(&body, "/rates/cloud", field).unwrap_or_else(|| panic!("{field}={value:?}: {body}"));
        assert!(msg.contains(zh), "{field}={value:?}: {msg}");
    }
    // a rate set by hand
    let cases: &[(&str, &str, &str)] = &[
        ("gpu_model", "", "必填"),
        ("effective_from", "2026-11-31", "不是日期"),
        ("effective_from", "1999-12-31", "2000-01-01"),
        ("rate", "abc", "不是数字"),
        ("rate", "-1", "不能为负数"),
        ("rate", "2000000", "超出允许范围"),
        ("rate", "1\0", "不允许的字符"),
    ];
    for (field, value, zh) in cases {
        let mut form = vec![
            ("csrf", token.as_str()),
            ("gpu_model", "H100-80GB"),
            ("effective_from", "2026-12-01"),
            ("rate", "21.3"),
        ];
        form.iter_mut().find(|(k, _)| k == field).unwrap().1 = value;
        let (status, _, body) = post(&portal, &finance, "/rates/manual", &form).await;
        assert_eq!(status, 422, "{field}={value:?}: {body}");
        let msg = field_message(&body, "/rates/manual", field).unwrap_or_else(|| panic!("{field}={value:?}: {body}"));
        assert!(msg.contains(zh), "{field}={value:?}: {msg}");
    }
    assert_eq!(
        post(
            &portal,
            &finance,
            "/rates/manual",
            &[("gpu_model", "H100"), ("effective_from", "2026-12-01"), ("rate", "1")]
        )
        .await
        .0,
        403
    );
    // without the CSRF token: refused
    let no_csrf: Vec<_> = tco_form(&token, &tco, "A100-80GB", "2026-12-01", "save").into_iter().skip(1).collect();
    assert_eq!(post(&portal, &finance, "/rates/new", &no_csrf).await.0, 403);
    assert_eq!(post(&portal, &finance, "/rates/cloud", &[("model", "H100"), ("on_demand", "1")]).await.0, 403);
    assert_eq!(write_counts(&pool).await, before, "a refused rate form wrote");

    // a good rate by hand: exactly the version the API then lists
    let form =
        [("csrf", token.as_str()), ("gpu_model", "H100-80GB"), ("effective_from", "2026-12-01"), ("rate", "21.3")];
    let (status, location, body) = post(&portal, &finance, "/rates/manual", &form).await;
    assert_eq!(status, 303, "{body}");
    let (_, list) = api.call(Method::GET, "/api/v1/rates", Some(&api.viewer), None).await;
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(
        (s(&list[0]["gpu_model"]), s(&list[0]["effective_from"]), dec(&list[0]["rate"])),
        ("H100-80GB", "2026-12-01", dec(&json!("21.3")))
    );
    assert!(list[0]["tco"].is_null(), "{list:?}");
    assert_eq!(location, format!("/rates?saved={}#model-H100-80GB", list[0]["id"]));

    // a good cloud form: the API lists it; blank is unknown
    let form =
        [("csrf", token.as_str()), ("model", "H100-80GB"), ("on_demand", "25.5"), ("spot", ""), ("reserved", "18")];
    let (status, location, body) = post(&portal, &finance, "/rates/cloud", &form).await;
    assert_eq!((status, location.as_str()), (303, "/rates?cloud_saved=1#cloud"), "{body}");
    let (_, cloud) = api.call(Method::GET, "/api/v1/cloud-rates", Some(&api.viewer), None).await;
    let cloud = cloud.as_array().unwrap();
    assert_eq!(cloud.len(), 1, "{cloud:?}");
    assert_eq!(cloud[0]["gpu_model"], "H100-80GB");
    assert_eq!(
        (dec(&cloud[0]["on_demand"]), &cloud[0]["spot"], dec(&cloud[0]["reserved"])),
        (dec(&json!("25.5")), &Value::Null, dec(&json!("18")))
    );
}
