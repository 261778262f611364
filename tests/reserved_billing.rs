//! Reserved-quota billing (issue 29, SPEC §10), end to end on a real Postgres: the third bill policy previewed on a
//! draft beside showback, its blockers until every guarantee has reservation terms, its lines on every face (API
//! JSON, CSV, xlsx, PDF), the over-commitment when guarantees exceed the cards, the close freezing it byte for byte,
//! and terms changed afterwards restating the closed month on the next open one.
//!
//! Ground truth, by hand (A100-80GB at 10.0000 yuan per card-hour; 4 hours on 2026-10-05, cluster c1, one 8-card
//! node: capacity 32 card-hours = 320.00):
//! - nlp: its pod holds 2 cards in ClusterQueue `cq-nlp` (mapped to nlp), whose nominal quota is 10 cards: 40
//!   guaranteed card-hours, 8 used within. Terms A100-80GB × 0.8 → reservation rate 8.0000.
//!   Usage 8 × 10 = 80.00; reservation 40 × 8 = 320.00; used within credited −8 × 10 = −80.00 → 320.00.
//! - vision: its pod holds 1 card in namespace `vision-train`, whose ResourceQuota guarantees ½ card: 2 guaranteed
//!   card-hours, 2 used within, 2 borrowed. Terms × 0.5 → 5.0000. Usage 40.00; reservation 10.00; credit −20.00
//!   → 30.00 (= 2 × 5 + 2 borrowed × 10).
//! - Allocated 350.00 > 320.00 capacity; the usage alone (120.00) fits, so the 30.00 above it is the
//!   over-commitment; unallocated 0.00, the platform keeps 0.00: 350.00 + 0.00 = 320.00 + 30.00.
//! - Showback of the same month: nlp 80.00, vision 40.00, unallocated 200.00.
//! - Terms of cq-nlp restated to × 0.9 from 2026-10-03 after the close: 40 × 9.0000 = 360.00, so November carries
//!   +40.00 for nlp (−320.00 at the old rate, +360.00 at the new).

use crate::common;

use std::collections::BTreeMap;
use std::io::Cursor;

use calamine::{Data, Reader, Xlsx};
use cardhour::metering::{CapacityRow, HourOutput, ModelUse, OfferedSource, QuotaRow, QuotaScope, QuotaUse, ScopeKind};
use chrono::{DateTime, Duration, Utc};
use common::TestDb;
use common::api::{TestApi, whole_cards};
use common::files::{csv_rows, pdftotext, visible};
use reqwest::Method;
use rust_decimal::Decimal;
use rust_decimal_macros::dec;
use serde_json::{Value, json};
use sqlx::PgPool;

const A100: &str = "NVIDIA A100-SXM4-80GB";

fn quota(kind: ScopeKind, name: &str, guaranteed: f64, used_within: f64, borrowed: f64) -> QuotaRow {
    QuotaRow {
        scope: QuotaScope { kind, name: name.into() },
        split: QuotaUse {
            guaranteed: guaranteed * 3600.0,
            used_within: used_within * 3600.0,
            borrowed: borrowed * 3600.0,
            reserved_idle: (guaranteed - used_within) * 3600.0,
        },
        // every pod of the month runs on the A100 node
        by_model: vec![ModelUse {
            gpu_model: A100.into(),
            used: (used_within + borrowed) * 3600.0,
            used_within: used_within * 3600.0,
        }],
        label_team: (kind == ScopeKind::Namespace).then(|| "vision".to_string()),
    }
}

/// 4 hours of 2026-10-05 as the ingest writes them: usage, capacity and quota rows.
async fn store(pool: &PgPool) {
    let from: DateTime<Utc> = "2026-10-05T00:00:00Z".parse().unwrap();
    for h in 0..4 {
        let out = HourOutput {
            interval_ms: Some(60_000),
            rows: vec![
                whole_cards(("nlp-train", "n-0"), Some("nlp"), (A100, "n1"), 2.0, 0.5),
                whole_cards(("vision-train", "v-0"), Some("vision"), (A100, "n1"), 1.0, 0.5),
            ],
            capacity: vec![CapacityRow {
                node: "n1".into(),
                gpu_model: A100.into(),
                cards: 8.0,
                card_seconds: 8.0 * 3600.0,
                offered_card_seconds: 8.0 * 3600.0,
                offered_source: OfferedSource::Allocatable,
            }],
            anomalies: Vec::new(),
            serving: Vec::new(),
            pending: Vec::new(),
            quota: vec![
                quota(ScopeKind::ClusterQueue, "cq-nlp", 10.0, 2.0, 0.0),
                quota(ScopeKind::Namespace, "vision-train", 0.5, 0.5, 0.5),
            ],
        };
        let hour = from + Duration::hours(h);
        let mut tx = pool.begin().await.unwrap();
        cardhour::db::clusters::upsert(&mut tx, "c1", "http://127.0.0.1:9").await.unwrap();
        cardhour::db::usage::lock_hour(&mut tx, "c1", hour).await.unwrap();
        cardhour::db::usage::replace_hour(&mut tx, "c1", hour, &out).await.unwrap();
        tx.commit().await.unwrap();
    }
}

async fn get(api: &TestApi, path: &str) -> Vec<u8> {
    let resp = api.client.get(format!("{}{path}", api.base)).bearer_auth(&api.finance).send().await.unwrap();
    let status = resp.status().as_u16();
    let body = resp.bytes().await.unwrap().to_vec();
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    body
}

async fn get_json(api: &TestApi, path: &str) -> Value {
    serde_json::from_slice(&get(api, path).await).unwrap()
}

/// (kind, namespace) → (amount, reserved_card_hours) of a team's lines.
async fn lines(api: &TestApi, team: &str, query: &str) -> BTreeMap<(String, String), (String, Option<String>)> {
    let st = get_json(api, &format!("/api/v1/bills/2026-10/teams/{team}{query}")).await;
    let lines = st["lines"].as_array().unwrap();
    assert!(!lines.is_empty(), "{st}");
    lines
        .iter()
        .map(|l| {
            (
                (l["kind"].as_str().unwrap().to_string(), l["namespace"].as_str().unwrap().to_string()),
                (l["amount"].as_str().unwrap().to_string(), l["reserved_card_hours"].as_str().map(str::to_string)),
            )
        })
        .collect()
}

fn key(kind: &str, ns: &str) -> (String, String) {
    (kind.to_string(), ns.to_string())
}

fn money(v: &Value) -> Decimal {
    v.as_str().unwrap_or_else(|| panic!("{v}")).parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reserved_quota_month_by_hand_on_every_face_frozen_at_close() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    let r = json!({"gpu_model": "A100-80GB", "effective_from": "2026-09-01", "rate": "10"});
    assert_eq!(api.call(Method::POST, "/api/v1/rates", fin, Some(r)).await.0, 201);
    for (ns, team) in [("vision-train", "vision"), ("nlp-train", "nlp")] {
        let m = json!({"namespace": ns, "team_id": team, "valid_from": "2026-09-01"});
        assert_eq!(api.call(Method::POST, "/api/v1/mappings", fin, Some(m)).await.0, 201);
    }
    let q = json!({"queue_kind": "cluster_queue", "queue": "cq-nlp", "team_id": "nlp", "valid_from": "2026-09-01"});
    assert_eq!(api.call(Method::POST, "/api/v1/queue-mappings", fin, Some(q)).await.0, 201);
    store(&pool).await;

    // no terms yet: the guarantees are billed at nothing, and a close under the policy is refused naming them
    let bare = lines(&api, "nlp", "?mode=reserved").await;
    assert_eq!(bare[&key("reservation", "cluster_queue/cq-nlp")], ("0".into(), Some("40".into())));
    let policy = json!({"mode": "reserved", "unallocated": "kept_by_platform"});
    let (status, refused) = api.call(Method::POST, "/api/v1/bills/2026-10/close", fin, Some(policy.clone())).await;
    assert_eq!((status, refused["code"].as_str()), (409, Some("not_ready")), "{refused}");
    let unpriced: Vec<(&str, &str)> = refused["blockers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["kind"] == "unpriced_reservation")
        .map(|b| (b["team"].as_str().unwrap(), b["scope"].as_str().unwrap()))
        .collect();
    assert_eq!(unpriced, [("nlp", "cluster_queue/cq-nlp"), ("vision", "vision-train")], "{refused}");

    // terms: bad input refused on its field, nothing written; then one per scope; the same again is a conflict
    let term = |kind: &str, scope: &str, factor: &str, from: &str| json!({"scope_kind": kind, "scope": scope, "gpu_model": "A100-80GB", "factor": factor, "valid_from": from});
    for (bad, field) in [
        (term("cluster_queue", "cq-nlp", "0", "2026-10-01"), "factor"),
        (term("cluster_queue", "cq-nlp", "10.5", "2026-10-01"), "factor"),
        (term("queue", "cq-nlp", "0.8", "2026-10-01"), "scope_kind"),
        (term("namespace", "", "0.8", "2026-10-01"), "scope"),
    ] {
        let (status, body) = api.call(Method::POST, "/api/v1/reservation-terms", fin, Some(bad.clone())).await;
        assert_eq!(status, 422, "{bad}: {body}");
        assert!(body.to_string().contains(field), "{bad}: {body}");
    }
    let viewer = Some(api.viewer.as_str());
    let t = term("cluster_queue", "cq-nlp", "0.8", "2026-10-01");
    assert_eq!(api.call(Method::POST, "/api/v1/reservation-terms", viewer, Some(t.clone())).await.0, 403);
    let (_, listed) = api.call(Method::GET, "/api/v1/reservation-terms", fin, None).await;
    assert_eq!(listed, json!([]), "nothing written by a refused request");
    let (status, stored) = api.call(Method::POST, "/api/v1/reservation-terms", fin, Some(t.clone())).await;
    assert_eq!(
        (status, stored["factor"].as_str(), stored["gpu_model"].as_str()),
        (201, Some("0.8"), Some("A100-80GB"))
    );
    let (status, again) = api.call(Method::POST, "/api/v1/reservation-terms", fin, Some(t)).await;
    assert_eq!((status, again["field"].as_str()), (409, Some("valid_from")), "{again}");
    let t = term("namespace", "vision-train", "0.5", "2026-10-01");
    assert_eq!(api.call(Method::POST, "/api/v1/reservation-terms", fin, Some(t)).await.0, 201);
    let audited: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE action = 'reservation_terms.create'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(audited, 2);

    // the draft under reserved-quota billing, by hand
    let nlp = lines(&api, "nlp", "?mode=reserved").await;
    assert_eq!(
        nlp,
        BTreeMap::from([
            (key("whole", "nlp-train"), ("80.00".into(), None)),
            (key("reservation", "cluster_queue/cq-nlp"), ("320.00".into(), Some("40".into()))),
            (key("reservation_use", "cluster_queue/cq-nlp"), ("-80.00".into(), Some("-8".into()))),
        ])
    );
    let vision = lines(&api, "vision", "?mode=reserved").await;
    assert_eq!(
        vision,
        BTreeMap::from([
            (key("whole", "vision-train"), ("40.00".into(), None)),
            (key("reservation", "vision-train"), ("10.00".into(), Some("2".into()))),
            (key("reservation_use", "vision-train"), ("-20.00".into(), Some("-2".into()))),
        ])
    );
    let st = get_json(&api, "/api/v1/bills/2026-10/teams/nlp?mode=reserved").await;
    let res = st["lines"].as_array().unwrap().iter().find(|l| l["kind"] == "reservation").unwrap().clone();
    assert_eq!((res["rate"].as_str(), res["reservation_factor"].as_str()), (Some("8.0000"), Some("0.8")));
    assert_eq!(res["card_hours"], "0", "a reservation holds no GPU-hours: {res}");
    let month = get_json(&api, "/api/v1/bills/2026-10?mode=reserved").await;
    assert_eq!(month["policy"]["mode"], "reserved");
    let figures =
        ["capacity_cost", "allocated", "unallocated", "platform_kept", "over_commitment"].map(|f| money(&month[f]));
    assert_eq!(figures, [dec!(320.00), dec!(350.00), dec!(0.00), dec!(0.00), dec!(30.00)], "{month}");
    assert!(month.get("capacity_shortfall").is_none(), "the usage fits the cards: {month}");
    let totals: Decimal = month["teams"].as_array().unwrap().iter().map(|t| money(&t["total"])).sum();
    assert_eq!(
        totals + figures[3],
        figures[0] + figures[4],
        "to the fen: Σ totals + kept = capacity + over-commitment"
    );

    // showback of the same month bills use only
    let shown = get_json(&api, "/api/v1/bills/2026-10?mode=showback").await;
    let shown_totals: Vec<(String, String)> = shown["teams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["team"].as_str().unwrap().into(), t["total"].as_str().unwrap().into()))
        .collect();
    assert_eq!(shown_totals, [("nlp".into(), "80.00".into()), ("vision".into(), "40.00".into())]);
    assert_eq!((shown["unallocated"].as_str(), shown.get("over_commitment")), (Some("200.00"), None));

    // the CSV: reservation rows with their hours and factor beside empty GPU-hours, the over-commitment its own row
    let csv = csv_rows(&get(&api, "/api/v1/exports/2026-10/bills.csv?mode=reserved").await);
    assert!(!csv.is_empty());
    let res_rows: Vec<(&str, &str, &str, &str, &str, &str)> = csv
        .iter()
        .filter(|r| r["line_type"].starts_with("reservation"))
        .map(|r| {
            (
                r["team"].as_str(),
                r["line_type"].as_str(),
                r["card_hours"].as_str(),
                r["reserved_card_hours"].as_str(),
                r["reservation_factor"].as_str(),
                r["amount"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        res_rows,
        [
            ("nlp", "reservation", "", "40.000000", "0.8000", "320.00"),
            ("nlp", "reservation_use", "", "-8.000000", "", "-80.00"),
            ("vision", "reservation", "", "2.000000", "0.5000", "10.00"),
            ("vision", "reservation_use", "", "-2.000000", "", "-20.00"),
        ]
    );
    let team_sum: Decimal = csv
        .iter()
        .filter(|r| matches!(r["line_type"].as_str(), "usage" | "reservation" | "reservation_use"))
        .map(|r| r["amount"].parse::<Decimal>().unwrap())
        .sum();
    assert_eq!(team_sum, dec!(350.00));
    let over: Vec<&str> =
        csv.iter().filter(|r| r["line_type"] == "over_commitment").map(|r| r["amount"].as_str()).collect();
    assert_eq!(over, ["30.00"]);
    assert!(csv.iter().all(|r| r["policy"].starts_with("reserved/kept_by_platform")), "{csv:?}");

    // the workbook: nlp's sheet has the reservation columns, its amounts the API's
    let xlsx = get(&api, "/api/v1/exports/2026-10/bills.xlsx?mode=reserved&lang=zh").await;
    let mut wb: Xlsx<_> = calamine::open_workbook_from_rs(Cursor::new(xlsx)).unwrap();
    let sheet = wb.sheet_names().into_iter().find(|n| n.contains("nlp")).expect("a sheet for nlp");
    let range = wb.worksheet_range(&sheet).unwrap();
    let rows: Vec<Vec<String>> = range.rows().map(|r| r.iter().map(Data::to_string).collect()).collect();
    let english = &rows[1];
    let col = |name: &str| english.iter().position(|c| c == name).unwrap_or_else(|| panic!("{name}: {english:?}"));
    let (line, hours, factor, amount) =
        (col("line_type"), col("reserved_card_hours"), col("reservation_factor"), col("amount"));
    let reservation = rows.iter().find(|r| r[line] == "预留").unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(
        (reservation[hours].as_str(), reservation[factor].as_str(), reservation[amount].as_str()),
        ("40", "0.8", "320")
    );
    assert!(rows.iter().any(|r| r[line] == "保障内使用抵扣" && r[amount] == "-80"), "{rows:?}");

    // the PDF in both languages: the policy, the lines, the over-commitment
    let zh = pdftotext(&get(&api, "/api/v1/exports/2026-10/statements.pdf?mode=reserved&lang=zh").await);
    for want in ["预留配额计费", "Kueue 队列 cq-nlp", "保障内使用抵扣", "超额承诺", "¥320.00", "−¥80.00", "¥30.00"]
    {
        assert!(zh.contains(want), "{want}: {zh}");
    }
    let en = pdftotext(&get(&api, "/api/v1/exports/2026-10/statements.pdf?mode=reserved&lang=en").await);
    for want in ["reserved quota", "ClusterQueue cq-nlp", "Used within the reservation", "over-commitment", "(× 0.8)"]
    {
        assert!(en.to_lowercase().contains(&want.to_lowercase()), "{want}: {en}");
    }

    // close under the policy: with terms no reservation stands in the way (only the month's missing hours: 4
    // stored), and the statement closed by override is the draft's, then frozen byte for byte
    let (status, refused) = api.call(Method::POST, "/api/v1/bills/2026-10/close", fin, Some(policy)).await;
    assert_eq!(status, 409, "{refused}");
    let kinds: Vec<&str> =
        refused["blockers"].as_array().unwrap().iter().map(|b| b["kind"].as_str().unwrap()).collect();
    assert!(!kinds.is_empty() && !kinds.contains(&"unpriced_reservation"), "{kinds:?}");
    let draft_nlp = get(&api, "/api/v1/bills/2026-10/teams/nlp?mode=reserved").await;
    let policy = json!({"mode": "reserved", "unallocated": "kept_by_platform",
        "override": {"reason": "four hours stored for the test"}});
    let (status, closed) = api.call(Method::POST, "/api/v1/bills/2026-10/close", fin, Some(policy)).await;
    assert_eq!(status, 201, "{closed}");
    let frozen: Vec<(String, Vec<u8>)> = {
        let mut out = Vec::new();
        for path in [
            "/api/v1/bills/2026-10",
            "/api/v1/bills/2026-10/teams/nlp",
            "/api/v1/exports/2026-10/bills.csv",
            "/api/v1/exports/2026-10/statements.pdf?lang=zh",
            "/api/v1/exports/2026-10/bills.xlsx",
        ] {
            out.push((path.to_string(), get(&api, path).await));
        }
        out
    };
    let closed_nlp: Value = serde_json::from_slice(&frozen[1].1).unwrap();
    let draft_nlp: Value = serde_json::from_slice(&draft_nlp).unwrap();
    assert_eq!(closed_nlp["lines"], draft_nlp["lines"], "the close froze the draft's lines");
    assert_eq!(closed_nlp["status"], "closed");

    // terms changed afterwards: the closed month's faces do not move; November carries the difference
    let t = term("cluster_queue", "cq-nlp", "0.9", "2026-10-03");
    assert_eq!(api.call(Method::POST, "/api/v1/reservation-terms", fin, Some(t)).await.0, 201);
    for (path, bytes) in &frozen {
        assert!(get(&api, path).await == *bytes, "{path} moved after the close");
    }
    let nov = get_json(&api, "/api/v1/bills/2026-11/teams/nlp?mode=reserved").await;
    let restated: Decimal = nov["restatements"].as_array().unwrap().iter().map(|r| money(&r["amount_delta"])).sum();
    assert_eq!(restated, dec!(40.00), "{nov}");
    // a showback draft of November asked for the frozen October's policy: the restatement follows October's
    let (status, body) = api.call(Method::GET, "/api/v1/bills/2026-10?mode=showback", fin, None).await;
    assert_eq!(
        (status, body["field"].as_str()),
        (409, Some("mode")),
        "a closed month exists under its policy only: {body}"
    );
}

/// The terms page as finance uses it: the list in Chinese, a bad factor refused on its field with nothing written,
/// terms stated on the page stored as the API stores them (the pricing key, audited).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finance_states_reservation_terms_on_the_admin_page() {
    use common::portal::{PASSWORD, TestPortal, hidden, visitor};
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let portal = TestPortal::start(pool.clone()).await;
    let c = visitor();
    assert_eq!(portal.login(&c, "finance", PASSWORD).await.status, 303);
    let page = |path: &'static str| {
        let (c, url) = (c.clone(), portal.url(path));
        async move {
            let r = c.get(url).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let (status, empty) = page("/admin/reservation-terms?lang=zh").await;
    assert_eq!(status, 200, "{empty}");
    assert!(empty.contains("预留条款") && empty.contains("尚无预留条款"), "{empty}");
    let shown = visible(&empty);
    let english = cardhour::glossary::english_words(&shown, &["Kueue", "Volcano", "H100", "2026-11-01"]);
    assert!(english.is_empty(), "English on a zh page: {english:?}");

    let csrf = hidden(&page("/").await.1, "csrf").expect("the home page's logout form");
    let form = |factor: &'static str| {
        vec![
            ("csrf", csrf.clone()),
            ("scope_kind", "cluster_queue".to_string()),
            ("scope", "cq-nlp".to_string()),
            ("cluster", String::new()),
            ("gpu_model", "NVIDIA A100-SXM4-80GB".to_string()),
            ("factor", factor.to_string()),
            ("valid_from", "2026/10/1".to_string()),
        ]
    };
    let stored = || async {
        sqlx::query_as::<_, (String, String, Decimal, chrono::NaiveDate)>(
            "SELECT scope, gpu_model, factor, valid_from FROM reservation_terms",
        )
        .fetch_all(&pool)
        .await
        .unwrap()
    };
    for bad in ["abc", "0", "11"] {
        let r = c.post(portal.url("/admin/reservation-terms?lang=zh")).form(&form(bad)).send().await.unwrap();
        let (status, body) = (r.status().as_u16(), r.text().await.unwrap());
        assert_eq!(status, 422, "{bad}: {body}");
        assert!(body.contains(r#"class="field-error""#) && body.contains(&format!(r#"value="{bad}""#)), "{body}");
        assert!(stored().await.is_empty(), "a refused form writes nothing");
    }
    let r = c.post(portal.url("/admin/reservation-terms")).form(&form("0.75")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 303);
    assert_eq!(r.headers()["location"], "/admin/reservation-terms?saved=cq-nlp");
    // the DCGM name is stored as its pricing key, as the API stores it
    assert_eq!(stored().await, [("cq-nlp".into(), "A100-80GB".into(), dec!(0.75), "2026-10-01".parse().unwrap())]);
    let (_, listed) = page("/admin/reservation-terms?lang=zh&saved=cq-nlp").await;
    assert!(listed.contains("<code>cq-nlp</code>") && listed.contains("0.75") && listed.contains("Kueue 集群队列"));
    let audited: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_log WHERE action = 'reservation_terms.create' AND actor LIKE '%finance%'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(audited, 1);
}
