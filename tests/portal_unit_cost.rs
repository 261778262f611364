//! The unit cost of inference in the portal (SPEC §9, issue 36): `/reports/unit-cost` over HTTP, signed in through
//! the login form, on usage and serving counters stored as the ingest stores them (two serving pods of two teams,
//! an idle hour each, a rate). Every figure of the page is the API's (`GET /api/v1/reports/unit-cost`) and a hand
//! computation's (cost ÷ tokens × 10⁶ to 4 decimals); the idle serving cost stands apart; a team lead sees its own
//! team's model and no other team's name, on the page and on its home; the zh page speaks Chinese only (data
//! aside); a bad field comes back 422 with its message. In a headless Chromium, the page in zh-CN and en is
//! screenshot to `target/screenshots/unit-cost-{zh,en}.png` (and to `docs/screenshots/` with
//! `CARDHOUR_DOCS_SCREENSHOTS=1`).

use crate::common;

use chrono::{DateTime, Duration, Utc};
use common::api::{SEED_MODEL, TestApi, full_node, row};
use common::browser::Browser;
use common::portal::{PASSWORD, TestPortal, visitor};
use common::yuan;
use fantoccini::Locator;
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::Value;
use sqlx::PgPool;

use cardhour::metering::{Engine, HourOutput, ServingKey, ServingRow, UsageRow};

async fn get(portal: &TestPortal, c: &reqwest::Client, path: &str) -> (u16, String) {
    let r = c.get(portal.url(path)).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn signed_in(portal: &TestPortal, user: &str) -> reqwest::Client {
    let c = visitor();
    let answer = portal.login(&c, user, PASSWORD).await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    c
}

/// What one serving pod served in one hour: (model, engine, input, output, requests); tokens `None` for Triton.
type Served = (&'static str, Engine, Option<i64>, Option<i64>, i64);

/// A serving pod: its namespace, name, team and cards.
struct Pod {
    namespace: &'static str,
    pod: &'static str,
    team: &'static str,
    cards: f64,
}

const QWEN: &str = "qwen2-7b-instruct";
const LLAMA: &str = "llama3-70b-instruct";

const VISION_POD: Pod = Pod { namespace: "vision-serve", pod: "qwen-0", team: "vision", cards: 1.0 };
const NLP_POD: Pod = Pod { namespace: "nlp-serve", pod: "llama-0", team: "nlp", cards: 2.0 };

/// Stores one hour of cluster `c1`: each pod holding its cards (a usage row as the ingest writes it) and serving
/// what it served (its `serving_hourly` row), two full A100 nodes beside.
async fn store_hour(pool: &PgPool, hour: DateTime<Utc>, pods: &[(&Pod, Served)]) {
    let rows: Vec<UsageRow> = pods
        .iter()
        .map(|(p, _)| {
            let mut r = row(p.namespace, p.pod, p.team, p.cards);
            // busy serving: half the cards' compute
            r.effective_gpu_seconds = p.cards * 1800.0;
            r
        })
        .collect();
    let serving = pods
        .iter()
        .map(|(p, (model, engine, input, output, requests))| ServingRow {
            key: ServingKey {
                namespace: p.namespace.into(),
                pod: p.pod.into(),
                model: (*model).into(),
                engine: *engine,
            },
            input_tokens: *input,
            output_tokens: *output,
            requests: *requests,
        })
        .collect();
    let out = HourOutput {
        interval_ms: Some(60_000),
        rows,
        capacity: vec![full_node("node-a", SEED_MODEL), full_node("node-b", SEED_MODEL)],
        serving,
        ..HourOutput::default()
    };
    let mut tx = pool.begin().await.unwrap();
    cardhour::db::clusters::upsert(&mut tx, "c1", "http://127.0.0.1:9").await.unwrap();
    cardhour::db::usage::replace_hour(&mut tx, "c1", hour, &out).await.unwrap();
    tx.commit().await.unwrap();
}

/// The rate of the seed: A100 at ¥12.5 per card-hour from September.
async fn rate(api: &TestApi) {
    let body = serde_json::json!({"gpu_model": "A100-80GB", "effective_from": "2026-09-01", "rate": "12.5"});
    assert_eq!(api.call(Method::POST, "/api/v1/rates", Some(&api.finance), Some(body)).await.0, 201);
}

fn at(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// Two billing days (Asia/Shanghai) of two serving pods, figures chosen to be worked by hand:
///
/// | day   | vision `qwen-0` (1 card, ¥12.5/h), qwen, vLLM | nlp `llama-0` (2 cards, ¥25/h), llama, SGLang |
/// |-------|------------------------------------------------|------------------------------------------------|
/// | 10-05 | 1.2M+0.3M tokens, 500 req; 0.8M+0.2M, 300; idle | 2M+1M, 900; 1.5M+0.5M, 700; 1M+0.5M, 400          |
/// | 10-06 | 0.6M+0.15M, 250; 0.4M+0.1M, 150                 | 3M+1M, 1,000; idle                               |
///
/// qwen: ¥50 served for 3M in + 0.75M out, 1,200 requests, ¥12.5 idle. llama: ¥100 for 7.5M + 3M, 3,000
/// requests, ¥25 idle.
async fn seed_two_days(pool: &PgPool) {
    let qwen = |i: i64, o: i64, r: i64| -> Served { (QWEN, Engine::Vllm, Some(i), Some(o), r) };
    let llama = |i: i64, o: i64, r: i64| -> Served { (LLAMA, Engine::Sglang, Some(i), Some(o), r) };
    let day1 = at("2026-10-05T00:00:00Z");
    let day2 = at("2026-10-06T00:00:00Z");
    let hours: [(DateTime<Utc>, Served, Served); 5] = [
        (day1, qwen(1_200_000, 300_000, 500), llama(2_000_000, 1_000_000, 900)),
        (day1 + Duration::hours(1), qwen(800_000, 200_000, 300), llama(1_500_000, 500_000, 700)),
        (day1 + Duration::hours(2), qwen(0, 0, 0), llama(1_000_000, 500_000, 400)),
        (day2, qwen(600_000, 150_000, 250), llama(3_000_000, 1_000_000, 1_000)),
        (day2 + Duration::hours(1), qwen(400_000, 100_000, 150), llama(0, 0, 0)),
    ];
    for (hour, v, n) in hours {
        store_hour(pool, hour, &[(&VISION_POD, v), (&NLP_POD, n)]).await;
    }
}

const RANGE: &str = "from=2026-10-05&to=2026-10-07";

/// An integer as the pages print counts, grouped by thousands (written here apart from the code that prints it).
fn grouped(int: &str) -> String {
    let digits: Vec<char> = int.chars().collect();
    let mut out = String::new();
    for (i, c) in digits.iter().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(*c);
    }
    out
}

/// A decimal with exactly `dp` decimals, grouped, after `prefix`; `—` for none.
fn fixed(v: &Value, dp: u32, prefix: &str) -> String {
    let Some(s) = v.as_str() else {
        assert!(v.is_null(), "not a decimal: {v}");
        return "—".into();
    };
    let mut d: Decimal = s.parse().unwrap();
    d = d.round_dp(dp);
    d.rescale(dp);
    let plain = d.to_string();
    let (int, frac) = plain.split_once('.').unwrap_or((&plain, ""));
    if frac.is_empty() { format!("{prefix}{}", grouped(int)) } else { format!("{prefix}{}.{frac}", grouped(int)) }
}

fn count(v: &Value) -> String {
    grouped(&v.as_i64().unwrap_or_else(|| panic!("not a count: {v}")).to_string())
}

/// An API row's figures as the page prints them, in the page's column order.
fn printed(r: &Value) -> Vec<String> {
    vec![
        yuan(r["serving_cost"].as_str().unwrap()),
        count(&r["input_tokens"]),
        count(&r["output_tokens"]),
        count(&r["total_tokens"]),
        count(&r["requests"]),
        fixed(&r["cost_per_million_input_tokens"], 4, "¥"),
        fixed(&r["cost_per_million_output_tokens"], 4, "¥"),
        fixed(&r["cost_per_million_tokens"], 4, "¥"),
        fixed(&r["cost_per_thousand_requests"], 4, "¥"),
        fixed(&r["tokens_per_gpu_hour"], 2, ""),
        yuan(r["idle_cost"].as_str().unwrap()),
        fixed(&r["idle_gpu_hours"], 3, ""),
    ]
}

/// The cells of the row `data-key="key"` of the table `id`, as text.
fn cells(page: &str, id: &str, key: &str) -> Vec<String> {
    let table = &page[page.find(&format!(r#"id="{id}""#)).unwrap_or_else(|| panic!("no table {id}: {page}"))..];
    let table = &table[..table.find("</table>").unwrap()];
    let start = table.find(&format!(r#"data-key="{key}""#)).unwrap_or_else(|| panic!("no row {key} in {table}"));
    let tr = &table[start..];
    let tr = &tr[..tr.find("</tr>").unwrap()];
    tr.split("<td").skip(1).map(|c| c[c.find('>').unwrap() + 1..c.find("</td>").unwrap()].to_string()).collect()
}

/// The keys of a table's rows, in order.
fn keys(page: &str, id: &str) -> Vec<String> {
    let table = &page[page.find(&format!(r#"id="{id}""#)).unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    table.split(r#"data-key=""#).skip(1).map(|s| s[..s.find('"').unwrap()].to_string()).collect()
}

/// The text of a page as a reader sees it: its tags and style sheets left out (the SVG's labels kept).
fn text(page: &str) -> String {
    let mut page = page.to_string();
    while let (Some(a), Some(b)) = (page.find("<style>"), page.find("</style>")) {
        page.replace_range(a..b + "</style>".len(), "");
    }
    page.split('<')
        .filter_map(|p| p.split_once('>').map(|(_, t)| t.trim()))
        .filter(|t| !t.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

#[sqlx::test]
async fn the_page_shows_the_api_figures_and_the_hand_computed_ones(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    rate(&api).await;
    seed_two_days(&pool).await;
    let portal = TestPortal::start(pool.clone()).await;
    let finance = signed_in(&portal, "finance").await;

    let (status, report) =
        api.call(Method::GET, &format!("/api/v1/reports/unit-cost?{RANGE}"), Some(&api.finance), None).await;
    assert_eq!(status, 200, "{report}");
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{report}");
    let (status, page) = get(&portal, &finance, &format!("/reports/unit-cost?{RANGE}&lang=en")).await;
    assert_eq!(status, 200, "{page}");

    // every row of the API's, every figure, in the API's order; then the total
    assert_eq!(keys(&page, "unit-cost"), [LLAMA, QWEN, "total"], "{page}");
    for r in rows {
        let key = r["key"].as_str().unwrap();
        let shown = cells(&page, "unit-cost", key);
        assert_eq!(shown[0], key);
        // the engine beside the model, by its name (the API's code `sglang` is SGLang on every face)
        let engine = cardhour::export::present::engine(cardhour::export::Lang::En, r["engine"].as_str().unwrap());
        assert_eq!(shown[1], engine, "the engine beside the model");
        assert_ne!(shown[1], r["engine"].as_str().unwrap());
        assert_eq!(shown[2..], printed(r)[..], "{key}");
    }
    let total = cells(&page, "unit-cost", "total");
    assert_eq!(total[0], "Total");
    assert_eq!(total[2..], printed(&report["total"])[..]);

    // by hand. qwen: 4 served hours × 1 card × ¥12.5 = ¥50 for 3,000,000 in + 750,000 out, 1,200 requests; the
    // idle hour's ¥12.50 apart
    let qwen = cells(&page, "unit-cost", QWEN);
    let by_hand = [
        "¥50.00",
        "3,000,000",
        "750,000",
        "3,750,000",
        "1,200",
        "¥16.6667", // 50 ÷ 3,000,000 × 10⁶ = 16.666…
        "¥66.6667", // 50 ÷ 750,000 × 10⁶
        "¥13.3333", // 50 ÷ 3,750,000 × 10⁶
        "¥41.6667", // 50 ÷ 1,200 × 1,000
        "937,500.00",
        "¥12.50",
        "1.000",
    ];
    assert_eq!(qwen[2..], by_hand.map(String::from)[..], "qwen by hand");
    // llama: 4 served hours × 2 cards × ¥12.5 = ¥100 for 10,500,000 tokens: 9.5238…; ¥25 idle
    let llama = cells(&page, "unit-cost", LLAMA);
    assert_eq!((llama[2].as_str(), llama[9].as_str(), llama[10].as_str()), ("¥100.00", "¥9.5238", "¥33.3333"));
    assert_eq!(llama[12], "¥25.00", "the idle hour of llama: 2 cards × ¥12.5");
    // the total: ¥150 ÷ 14,250,000 tokens = 10.5263…; a ratio of sums, not the mean of 13.3333 and 9.5238
    assert_eq!((total[2].as_str(), total[9].as_str(), total[12].as_str()), ("¥150.00", "¥10.5263", "¥37.50"));
    assert_eq!(report["total"]["cost_per_million_tokens"], "10.5263");
    // and the API agrees with the hand at full precision of its 4 decimals
    let api_qwen = rows.iter().find(|r| r["key"] == QWEN).unwrap();
    assert_eq!(api_qwen["cost_per_million_tokens"], "13.3333");
    assert_eq!(api_qwen["idle_cost"], "12.50");

    // the idle serving cost explained beside its column; the CSV and workbook of the very same report
    assert!(page.contains("Idle serving cost") && page.contains("never spread into the unit costs"), "{page}");
    for file in ["unit-cost.csv", "unit-cost.xlsx"] {
        let href =
            format!(r#"href="/reports/{file}?from=2026-10-05&#38;to=2026-10-07&#38;group_by=model&#38;lang=en""#);
        assert!(page.contains(&href), "{href} not in the page");
    }

    // the daily trend: a line per model, ¥ per million tokens per day (qwen 10 then 20, llama 11.54 then 6.25)
    let svg = &page[page.find(r#"id="unit-cost-trend""#).expect("the trend chart")..];
    let svg = &svg[..svg.find("</figure>").unwrap()];
    assert!(svg.contains(QWEN) && svg.contains(LLAMA) && svg.contains("10-05") && svg.contains("10-06"), "{svg}");
    // a series' line is 2 pixels wide (the axes, polylines too, 1)
    assert_eq!(svg.matches(r#"stroke-width="2" points"#).count(), 2, "two days, a line per model: {svg}");

    // grouped by team: the API's rows again, the team's id as the key
    let (_, by_team) = api
        .call(Method::GET, &format!("/api/v1/reports/unit-cost?{RANGE}&group_by=team"), Some(&api.viewer), None)
        .await;
    let (status, page) = get(&portal, &finance, &format!("/reports/unit-cost?{RANGE}&group_by=team&lang=en")).await;
    assert_eq!(status, 200);
    assert_eq!(keys(&page, "unit-cost"), ["nlp", "vision", "total"]);
    for r in by_team["rows"].as_array().unwrap() {
        let shown = cells(&page, "unit-cost", r["key"].as_str().unwrap());
        assert_eq!(shown[1..], printed(r)[..], "{r}");
    }
    assert!(page.contains(r#"<option value="team" selected>Team</option>"#), "{page}");

    // by day: the idle hours' cost on their own day, apart from the unit cost
    let (status, page) = get(&portal, &finance, &format!("/reports/unit-cost?{RANGE}&group_by=day&lang=en")).await;
    assert_eq!(status, 200);
    let day1 = cells(&page, "unit-cost", "2026-10-05");
    // ¥12.5 × 2 + ¥25 × 3 = ¥100 served for 2.5M + 6.5M tokens; qwen's idle ¥12.50
    assert_eq!((day1[1].as_str(), day1[8].as_str(), day1[11].as_str()), ("¥100.00", "¥11.1111", "¥12.50"));
}

#[sqlx::test]
async fn a_team_lead_sees_its_own_model_only(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    rate(&api).await;
    seed_two_days(&pool).await;
    let portal = TestPortal::start(pool.clone()).await;
    let lead = signed_in(&portal, "lead").await;

    let (status, report) =
        api.call(Method::GET, &format!("/api/v1/reports/unit-cost?{RANGE}"), Some(&api.lead), None).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(report["rows"].as_array().unwrap().len(), 1, "vision's model only: {report}");
    for lang in ["en", "zh-CN"] {
        let (status, page) = get(&portal, &lead, &format!("/reports/unit-cost?{RANGE}&lang={lang}")).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(keys(&page, "unit-cost"), [QWEN, "total"]);
        assert_eq!(cells(&page, "unit-cost", QWEN)[2..], printed(&report["rows"][0])[..]);
        // the total is its own team's: nothing of nlp's in it
        assert_eq!(cells(&page, "unit-cost", "total")[2..], printed(&report["total"])[..]);
        assert_eq!(report["total"]["serving_cost"], "50.00");
        let lower = page.to_lowercase();
        assert!(!lower.contains("nlp") && !lower.contains("llama"), "another team's name or model for a lead");
        // its reports' navigation: the top N and this page, nothing cluster-wide
        assert!(page.contains(r#"href="/reports/low-utilization""#), "{page}");
        assert!(!page.contains(r#"href="/reports/utilization"#) && !page.contains(r#"href="/reports/fragmentation""#));
    }
    // grouped by team: its own team only
    let (_, page) = get(&portal, &lead, &format!("/reports/unit-cost?{RANGE}&group_by=team&lang=en")).await;
    assert_eq!(keys(&page, "unit-cost"), ["vision", "total"]);

    // its home: October's unit cost per model, with the full report linked
    let (status, home) = get(&portal, &lead, "/teams/vision?month=2026-10&lang=zh-CN").await;
    assert_eq!(status, 200, "{home}");
    assert!(home.contains("本月推理单位成本（按模型）"), "{home}");
    let line = cells(&home, "team-unit-cost", QWEN);
    assert_eq!(line, [QWEN, "vLLM", "3,750,000", "¥13.3333", "¥41.6667", "¥12.50"]);
    assert!(
        home.contains(r#"href="/reports/unit-cost?from=2026-10-01&#38;to=2026-11-01&#38;group_by=model""#),
        "{home}"
    );
    assert!(!home.to_lowercase().contains("llama"), "{home}");
    // a month the team served nothing: no section at all
    let (status, home) = get(&portal, &lead, "/teams/vision?month=2026-09&lang=zh-CN").await;
    assert_eq!(status, 200);
    assert!(!home.contains("team-unit-cost") && !home.contains("推理单位成本"), "{home}");
    // another team's home stays not found for the lead
    let (status, _) = get(&portal, &lead, "/teams/nlp?month=2026-10").await;
    assert_eq!(status, 404);
}

/// Without a rate for the A100 every serving hour costs 0: the report and the lead's home mark each model
/// unpriced and say what that means; once the rate is set, the marks go.
#[sqlx::test]
async fn a_model_without_a_rate_is_marked_unpriced_until_it_has_one(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed_two_days(&pool).await;
    let portal = TestPortal::start(pool.clone()).await;
    let finance = signed_in(&portal, "finance").await;
    let lead = signed_in(&portal, "lead").await;
    let report = format!("/reports/unit-cost?{RANGE}&group_by=model&lang=zh-CN");
    let home = "/teams/vision?month=2026-10&lang=zh-CN";
    let note = "该组有 GPU 型号没有单价";
    let (status, page) = get(&portal, &finance, &report).await;
    assert_eq!(status, 200, "{page}");
    for model in [QWEN, LLAMA] {
        let line = cells(&page, "unit-cost", model);
        assert!(line[0].contains("未定价"), "{model}: {line:?}");
        assert_eq!(line[2], "¥0.00", "{model}: its cost counted as 0: {line:?}");
    }
    assert!(text(&page).contains(note), "{page}");
    let (status, page) = get(&portal, &lead, home).await;
    assert_eq!(status, 200, "{page}");
    let line = cells(&page, "team-unit-cost", QWEN);
    assert!(line[0].contains("未定价") && line[3] == "¥0.0000", "{line:?}");
    assert!(text(&page).contains(note), "{page}");

    rate(&api).await;
    let (_, page) = get(&portal, &finance, &report).await;
    assert!(!page.contains("未定价") && !text(&page).contains(note), "{page}");
    assert_eq!(cells(&page, "unit-cost", QWEN)[2], "¥50.00");
    let (_, page) = get(&portal, &lead, home).await;
    assert_eq!(cells(&page, "team-unit-cost", QWEN), [QWEN, "vLLM", "3,750,000", "¥13.3333", "¥41.6667", "¥12.50"]);
    assert!(!text(&page).contains(note), "{page}");
}

#[sqlx::test]
async fn the_zh_page_speaks_chinese_and_a_bad_field_comes_back_with_its_message(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    rate(&api).await;
    seed_two_days(&pool).await;
    let portal = TestPortal::start(pool.clone()).await;
    let viewer = signed_in(&portal, "viewer").await;

    let (status, page) = get(&portal, &viewer, &format!("/reports/unit-cost?{RANGE}&lang=zh-CN")).await;
    assert_eq!(status, 200, "{page}");
    for word in [
        "推理单位成本",
        "模型",
        "推理引擎",
        "推理成本",
        "输入词元",
        "输出词元",
        "词元总数",
        "请求数",
        "每百万输入词元成本（元）",
        "每百万输出词元成本（元）",
        "每百万词元成本（元）",
        "每千次请求成本（元）",
        "每卡时词元数",
        "空闲推理成本",
        "空闲推理卡时",
        "合计",
        "下载 CSV",
        "下载工作簿",
        "每日每百万词元成本（元），按模型",
    ] {
        assert!(page.contains(word), "{word} not on the zh page");
    }
    // no English word but data: the models, the engines, the user, the product and the language switch
    let data = [QWEN, LLAMA, "vllm", "sglang", "viewer", "cardhour", "English"];
    let shown = text(&page);
    let words = cardhour::glossary::english_words(&shown, &data);
    assert!(words.is_empty(), "English on the zh page: {words:?}");
    // the global readers' navigation names it too
    let (_, utilization) = get(&portal, &viewer, "/reports/utilization?month=2026-10").await;
    assert!(utilization.contains(r#"href="/reports/unit-cost""#), "the report nav lacks the unit cost");

    for (query, field, en, zh) in [
        ("from=2026-13-01", "from", "Not a date", "不是日期"),
        ("from=2026-10-07&to=2026-10-05", "from", "must be before `to`", "必须早于截止日期"),
        ("from=2025-01-01&to=2026-10-05", "to", "at most 366 days", "最多比起始日期晚 366 天"),
        ("group_by=colour", "group_by", "use team, namespace, model, engine, day or month", "不是可选的分组方式"),
    ] {
        for (lang, text) in [("en", en), ("zh-CN", zh)] {
            let (status, page) = get(&portal, &viewer, &format!("/reports/unit-cost?{query}&lang={lang}")).await;
            assert_eq!(status, 422, "{query}: {page}");
            let form = &page[page.find("<form method=\"get\"").unwrap()..];
            let label = &form[form.find(&format!("name=\"{field}\"")).unwrap()..];
            let label = &label[..label.find("</label>").unwrap()];
            assert!(label.contains("field-error") && label.contains(text), "{query} ({lang}): {field}: {label}");
            assert!(
                !page.contains("<tbody>") && !page.contains("unit-cost.csv"),
                "{query}: a refused form shows no figures"
            );
        }
    }
    // the value typed stays in its field
    let (_, page) = get(&portal, &viewer, "/reports/unit-cost?from=2026-13-01&lang=en").await;
    assert!(page.contains(r#"name="from" value="2026-13-01""#), "{page}");
    // nothing served in the range: said so, no table
    let (status, page) = get(&portal, &viewer, "/reports/unit-cost?from=2026-09-01&to=2026-10-01&lang=en").await;
    assert_eq!(status, 200);
    assert!(page.contains("No serving pod in the range.") && !page.contains("<tbody>"), "{page}");
}

/// A week of four models on five serving pods (a Triton model counting requests only), some hours idle: what the
/// screenshots show.
async fn seed_week(pool: &PgPool) {
    const QWEN_1: Pod = Pod { namespace: "vision-serve", pod: "qwen-1", team: "vision", cards: 1.0 };
    const RESNET: Pod = Pod { namespace: "vision-serve", pod: "resnet-0", team: "vision", cards: 1.0 };
    const BGE: Pod = Pod { namespace: "nlp-serve", pod: "bge-0", team: "nlp", cards: 1.0 };
    let start = at("2026-10-01T00:00:00Z");
    for day in 0..7i64 {
        for h in 0..6i64 {
            let hour = start + Duration::days(day) + Duration::hours(h);
            // traffic that rises through the week and dips at lunch
            let load = 6 + day + (h * 5 + day * 3) % 7 - if h == 3 { 4 } else { 0 };
            let idle = (day + h) % 5 == 0;
            let tokens = |per: i64| if idle { 0 } else { load * per };
            let pods: [(&Pod, Served); 5] = [
                (&VISION_POD, (QWEN, Engine::Vllm, Some(load * 180_000), Some(load * 45_000), load * 70)),
                (&QWEN_1, (QWEN, Engine::Vllm, Some(tokens(90_000)), Some(tokens(25_000)), tokens(40))),
                (&RESNET, ("resnet50", Engine::Triton, None, None, load * 2_400)),
                (&NLP_POD, (LLAMA, Engine::Sglang, Some(load * 260_000), Some(load * 90_000), load * 60)),
                (&BGE, ("bge-m3", Engine::Tgi, Some(tokens(400_000)), Some(0), tokens(300))),
            ];
            store_hour(pool, hour, &pods).await;
        }
    }
}

/// A screenshot of the whole page (the window grown to its height), kept in `target/screenshots/` and, with
/// `CARDHOUR_DOCS_SCREENSHOTS=1`, in `docs/screenshots/`.
async fn screenshot(b: &Browser, name: &str) -> std::path::PathBuf {
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
    file
}

#[sqlx::test]
async fn the_page_in_a_browser_in_both_languages(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    rate(&api).await;
    seed_week(&pool).await;
    let portal = TestPortal::start(pool.clone()).await;
    let b = Browser::start().await;
    let c = &b.client;
    c.goto(&portal.url("/login")).await.unwrap();
    c.find(Locator::Css("#username")).await.unwrap().send_keys("finance").await.unwrap();
    c.find(Locator::Css("#password")).await.unwrap().send_keys(PASSWORD).await.unwrap();
    c.find(Locator::Css("#submit")).await.unwrap().click().await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while c.current_url().await.unwrap().path() == "/login" {
        assert!(std::time::Instant::now() < deadline, "not signed in");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    let week = "from=2026-10-01&to=2026-10-08";
    let (_, report) =
        api.call(Method::GET, &format!("/api/v1/reports/unit-cost?{week}"), Some(&api.finance), None).await;
    for (lang, name) in [("zh-CN", "unit-cost-zh"), ("en", "unit-cost-en")] {
        c.goto(&portal.url(&format!("/reports/unit-cost?{week}&lang={lang}"))).await.unwrap();
        // the rows a reader sees are the API's, the chart drawn with a line per model that counts tokens
        let mut seen = Vec::new();
        for tr in c.find_all(Locator::Css("table#unit-cost tbody tr")).await.unwrap() {
            seen.push(tr.attr("data-key").await.unwrap().unwrap());
        }
        let mut expected: Vec<String> =
            report["rows"].as_array().unwrap().iter().map(|r| r["key"].as_str().unwrap().to_string()).collect();
        expected.push("total".into());
        assert_eq!(seen, expected);
        let triton = c.find(Locator::Css("tr[data-key='resnet50']")).await.unwrap().text().await.unwrap();
        assert!(triton.contains('—'), "no tokens, no ¥ per million tokens: {triton}");
        let lines = c.find_all(Locator::Css("#unit-cost-trend polyline[stroke-width='2']")).await.unwrap();
        assert_eq!(lines.len(), 3, "qwen, llama and bge served tokens every day; resnet50 counts none");
        let file = screenshot(&b, name).await;
        assert!(std::fs::metadata(&file).unwrap().len() > 10_000, "{}", file.display());
    }
    b.close().await;
}
