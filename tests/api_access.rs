//! Access end to end: every route of the API × every kind of caller (admin, finance, viewer, a team lead, no
//! token, an unknown, an expired and a revoked token) on a month with two teams, checking the status and the
//! content — a team lead's JSON, CSV rows and PDF text (`pdftotext -layout`) hold its own team's figures and none
//! of the other team's names nor the cluster-wide figures. Also: safe `Content-Disposition`, unknown teams, the
//! bearer scheme in any case, `WWW-Authenticate`, token expiry and last use, and `cardhour token` on the CLI.
//!
//! Ground truth, by hand: 7 hours (2026-10-05 00:00–07:00 UTC) of one A100 for `vision` and three for `nlp`, two
//! 8-card nodes, all at 12.5 yuan per card-hour, both pods at 1 % utilization holding 8 GiB:
//! vision 7 card-hours = 87.50, nlp 21 = 262.50, capacity 112 = 1400.00, allocated 350.00, unallocated and kept by
//! the platform 1050.00; idle waste per month = cards × 12.5 × 730: vision 9125.00, nlp 27375.00.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::api::{SEED_FROM as FROM, SEED_MONTH as MONTH, SEED_TO as TO, TestApi, seed};
use common::yuan;
use reqwest::Method;
use reqwest::header::{AUTHORIZATION, CONTENT_DISPOSITION, CONTENT_TYPE, HeaderMap, WWW_AUTHENTICATE};
use serde_json::{Value, json};
use sqlx::PgPool;

/// Own team: what a team lead of `vision` must see.
const VISION_TOTAL: &str = "87.50";
const VISION_WASTE: &str = "9125.00";
/// What it must never see: the other team and the cluster.
const NLP_TOTAL: &str = "262.50";
const NLP_WASTE: &str = "27375.00";
const CAPACITY_COST: &str = "1400.00";

const ALLOCATED: &str = "350.00";
const UNALLOCATED: &str = "1050.00";

struct Answer {
    status: u16,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn header(&self, name: reqwest::header::HeaderName) -> Option<String> {
        self.headers.get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
    }
}

#[derive(Clone)]
enum Body {
    None,
    Json(Value),
    Csv(&'static str),
}

/// One request with `authorization` sent verbatim (or not at all).
async fn send(api: &TestApi, method: &Method, path: &str, authorization: Option<&str>, body: &Body) -> Answer {
    let mut req = api.client.request(method.clone(), format!("{}{path}", api.base));
    if let Some(a) = authorization {
        req = req.header(AUTHORIZATION, a);
    }
    req = match body {
        Body::None => req,
        Body::Json(v) => req.json(v),
        Body::Csv(s) => req.header(CONTENT_TYPE, "text/csv").body(*s),
    };
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    Answer { status, headers, body: resp.bytes().await.unwrap().to_vec() }
}

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

fn pdftotext(pdf: &[u8]) -> String {
    assert!(pdf.starts_with(b"%PDF-"), "not a PDF: {}", String::from_utf8_lossy(&pdf[..pdf.len().min(300)]));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.pdf");
    std::fs::write(&path, pdf).unwrap();
    let out = std::process::Command::new("pdftotext")
        .arg("-layout")
        .arg(&path)
        .arg("-")
        .output()
        .expect("pdftotext (Debian package poppler-utils)");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// The records of a CSV export (after its byte-order mark).
fn csv_rows(csv: &[u8]) -> Vec<BTreeMap<String, String>> {
    let body = csv.strip_prefix("\u{feff}".as_bytes()).expect("UTF-8 with BOM");
    csv::Reader::from_reader(body).deserialize().map(Result::unwrap).collect()
}

/// A token of `role` (team `vision` for a lead) that expired yesterday, and one that was revoked.
async fn dead_tokens(pool: &PgPool) -> (String, String) {
    let mut secrets = Vec::new();
    for name in ["expired", "revoked"] {
        let t = cardhour::auth::new_token();
        let mut conn = pool.acquire().await.unwrap();
        let id =
            cardhour::db::tokens::insert(&mut conn, name, &t.hash, cardhour::auth::Role::Admin, &[]).await.unwrap();
        let sql = if name == "expired" {
            "UPDATE api_tokens SET created_at = now() - interval '2 days', expires_at = now() - interval '1 day' \
             WHERE id = $1"
        } else {
            "UPDATE api_tokens SET revoked_at = now() WHERE id = $1"
        };
        sqlx::query(sql).bind(id).execute(&mut *conn).await.unwrap();
        secrets.push(t.secret);
    }
    let [expired, revoked]: [String; 2] = secrets.try_into().unwrap();
    (expired, revoked)
}

const ROLES: [&str; 4] = ["admin", "finance", "viewer", "team_lead"];

/// Every route (its OpenAPI template), a concrete request and the status per role [admin, finance, viewer, lead].
fn routes() -> Vec<(&'static str, Method, String, Body, [u16; 4])> {
    let m = MONTH;
    let range = format!("from={FROM}&to={TO}");
    let g = Method::GET;
    let all = [200; 4];
    let global = [200, 200, 200, 403];
    let write = |ok: u16| [ok, ok, 403, 403];
    let tco = json!({"card_price": "80000", "server_share_per_card": "40000", "depreciation_years": "5",
        "avg_power_kw": "0.5", "pue": "1.4", "electricity_price": "0.8", "system_factor": "1.2",
        "datacenter_per_card_year": "3000", "staff_per_card_year": "2000", "recovery_utilization": "0.7"});
    vec![
        ("GET /teams", g.clone(), "/api/v1/teams".into(), Body::None, all),
        ("GET /teams/{id}", g.clone(), "/api/v1/teams/vision".into(), Body::None, all),
        ("GET /teams/{id}", g.clone(), "/api/v1/teams/nlp".into(), Body::None, [200, 200, 200, 404]),
        ("GET /teams/{id}", g.clone(), "/api/v1/teams/ghost".into(), Body::None, [404; 4]),
        (
            "PUT /teams/{id}",
            Method::PUT,
            "/api/v1/teams/speech".into(),
            Body::Json(json!({"name": "语音组"})),
            write(200),
        ),
        ("GET /teams/{id}/finance-codes", g.clone(), "/api/v1/teams/vision/finance-codes".into(), Body::None, all),
        (
            "GET /teams/{id}/finance-codes",
            g.clone(),
            "/api/v1/teams/nlp/finance-codes".into(),
            Body::None,
            [200, 200, 200, 404],
        ),
        (
            "PUT /teams/{id}/finance-codes",
            Method::PUT,
            "/api/v1/teams/vision/finance-codes".into(),
            // the same version twice: the first writer creates it, the second finds it as stored
            Body::Json(json!({"valid_from": "2026-12-01", "cost_centre": "CC-1001"})),
            [201, 200, 403, 403],
        ),
        ("GET /mappings", g.clone(), "/api/v1/mappings".into(), Body::None, all),
        (
            "POST /mappings",
            Method::POST,
            "/api/v1/mappings".into(),
            // the same mapping twice: the second writer is refused as a conflict
            Body::Json(json!({"namespace": "speech-x", "team_id": "vision", "valid_from": "2026-12-01"})),
            [201, 409, 403, 403],
        ),
        (
            "POST /mappings/import",
            Method::POST,
            "/api/v1/mappings/import".into(),
            Body::Csv("namespace,team,valid_from\nimported-ns,vision,2026-12-02\n"),
            // the same file again is unchanged: 200, nothing written (a nightly CMDB sync must not fail)
            [201, 200, 403, 403],
        ),
        ("GET /rates", g.clone(), "/api/v1/rates".into(), Body::None, all),
        (
            "POST /rates",
            Method::POST,
            "/api/v1/rates".into(),
            Body::Json(json!({"gpu_model": "L40S", "effective_from": "2026-12-01", "rate": "6"})),
            [201, 409, 403, 403],
        ),
        ("DELETE /rates/{id}", Method::DELETE, "/api/v1/rates/999999".into(), Body::None, write(404)),
        ("POST /rates/preview", Method::POST, "/api/v1/rates/preview".into(), Body::Json(tco), all),
        ("GET /cloud-rates", g.clone(), "/api/v1/cloud-rates".into(), Body::None, all),
        (
            "PUT /cloud-rates/{model}",
            Method::PUT,
            "/api/v1/cloud-rates/A100-80GB".into(),
            Body::Json(json!({"on_demand": "25.5"})),
            write(200),
        ),
        (
            "GET /rent-vs-build",
            g.clone(),
            format!("/api/v1/rent-vs-build?model=A100-80GB&{range}"),
            Body::None,
            // the A100 rate was set by hand: no TCO to compare with
            [404, 404, 404, 403],
        ),
        ("GET /model-aliases", g.clone(), "/api/v1/model-aliases".into(), Body::None, all),
        (
            "PUT /model-aliases/{model_name}",
            Method::PUT,
            "/api/v1/model-aliases/Tesla%20X".into(),
            Body::Json(json!({"pricing_model": "A100-80GB"})),
            write(200),
        ),
        ("GET /bills/{month}", g.clone(), format!("/api/v1/bills/{m}"), Body::None, all),
        ("GET /bills/{month}/teams/{team}", g.clone(), format!("/api/v1/bills/{m}/teams/vision"), Body::None, all),
        (
            "GET /bills/{month}/teams/{team}",
            g.clone(),
            format!("/api/v1/bills/{m}/teams/nlp"),
            Body::None,
            [200, 200, 200, 404],
        ),
        ("GET /bills/{month}/teams/{team}", g.clone(), format!("/api/v1/bills/{m}/teams/ghost"), Body::None, [404; 4]),
        (
            "POST /bills/{month}/close",
            Method::POST,
            "/api/v1/bills/2099-01/close".into(),
            Body::Json(json!({"mode": "showback", "unallocated": "kept_by_platform"})),
            write(409),
        ),
        ("GET /bills/{month}/readiness", g.clone(), format!("/api/v1/bills/{m}/readiness"), Body::None, global),
        ("GET /exports/{month}/bills.csv", g.clone(), format!("/api/v1/exports/{m}/bills.csv"), Body::None, all),
        (
            "GET /exports/{month}/bills.csv",
            g.clone(),
            format!("/api/v1/exports/{m}/bills.csv?team=vision"),
            Body::None,
            all,
        ),
        (
            "GET /exports/{month}/bills.csv",
            g.clone(),
            format!("/api/v1/exports/{m}/bills.csv?team=nlp"),
            Body::None,
            [200, 200, 200, 404],
        ),
        (
            "GET /exports/{month}/bills.csv",
            g.clone(),
            format!("/api/v1/exports/{m}/bills.csv?team=ghost"),
            Body::None,
            [404; 4],
        ),
        (
            "GET /exports/{month}/statements.pdf",
            g.clone(),
            format!("/api/v1/exports/{m}/statements.pdf"),
            Body::None,
            all,
        ),
        ("GET /exports/{month}/bills.xlsx", g.clone(), format!("/api/v1/exports/{m}/bills.xlsx"), Body::None, all),
        (
            "GET /exports/{month}/bills.xlsx",
            g.clone(),
            format!("/api/v1/exports/{m}/bills.xlsx?team=nlp"),
            Body::None,
            [200, 200, 200, 404],
        ),
        (
            "GET /exports/{month}/bills.xlsx",
            g.clone(),
            format!("/api/v1/exports/{m}/bills.xlsx?team=ghost"),
            Body::None,
            [404; 4],
        ),
        (
            "GET /exports/{month}/statements.pdf",
            g.clone(),
            format!("/api/v1/exports/{m}/statements.pdf?team=nlp"),
            Body::None,
            [200, 200, 200, 404],
        ),
        (
            "GET /exports/{month}/statements.pdf",
            g.clone(),
            format!("/api/v1/exports/{m}/statements.pdf?team=ghost"),
            Body::None,
            [404; 4],
        ),
        ("GET /usage", g.clone(), format!("/api/v1/usage?{range}"), Body::None, all),
        ("GET /audit", g.clone(), "/api/v1/audit".into(), Body::None, global),
        ("GET /ingest/health", g.clone(), "/api/v1/ingest/health".into(), Body::None, global),
        ("GET /idle", g.clone(), format!("/api/v1/idle?to={TO}&include_ended=true"), Body::None, all),
        (
            "GET /reports/low-utilization",
            g.clone(),
            format!("/api/v1/reports/low-utilization?{range}"),
            Body::None,
            all,
        ),
        ("GET /reports/utilization/{month}", g.clone(), format!("/api/v1/reports/utilization/{m}"), Body::None, global),
        ("GET /reports/quotas/{month}", g.clone(), format!("/api/v1/reports/quotas/{m}"), Body::None, all),
        ("GET /reports/queue/{month}", g.clone(), format!("/api/v1/reports/queue/{m}"), Body::None, all),
        (
            "GET /reports/capacity-plan",
            g.clone(),
            format!("/api/v1/reports/capacity-plan?month={m}&extra_cards=8"),
            Body::None,
            global,
        ),
        ("GET /queue-mappings", g.clone(), "/api/v1/queue-mappings".into(), Body::None, all),
        (
            "POST /queue-mappings",
            Method::POST,
            "/api/v1/queue-mappings".into(),
            // the same mapping twice: the second writer is refused as a conflict
            Body::Json(json!({"queue_kind": "cluster_queue", "queue": "cq-x", "team_id": "vision",
                "valid_from": "2026-12-01"})),
            [201, 409, 403, 403],
        ),
        (
            "POST /queue-mappings/import",
            Method::POST,
            "/api/v1/queue-mappings/import".into(),
            Body::Csv("queue_kind,queue,team,valid_from\ncluster_queue,cq-imported,vision,2026-12-02\n"),
            // the same file again is unchanged: 200, nothing written
            [201, 200, 403, 403],
        ),
        // reservation terms are finance's: global readers only
        ("GET /reservation-terms", g.clone(), "/api/v1/reservation-terms".into(), Body::None, global),
        (
            "POST /reservation-terms",
            Method::POST,
            "/api/v1/reservation-terms".into(),
            // the same terms twice: the second writer is refused as a conflict
            Body::Json(json!({"scope_kind": "cluster_queue", "scope": "cq-x", "gpu_model": "A100-80GB",
                "factor": "0.8", "valid_from": "2026-12-01"})),
            [201, 409, 403, 403],
        ),
        // close-event endpoints and events are finance's: global readers only, writers configure
        ("GET /close-endpoints", g.clone(), "/api/v1/close-endpoints".into(), Body::None, global),
        (
            "POST /close-endpoints",
            Method::POST,
            "/api/v1/close-endpoints".into(),
            Body::Json(json!({"url": "http://127.0.0.1:9/close", "secret": "close-secret-0123456789"})),
            write(201),
        ),
        (
            "POST /close-endpoints/{id}/deactivate",
            Method::POST,
            "/api/v1/close-endpoints/999999/deactivate".into(),
            Body::None,
            write(404),
        ),
        ("GET /close-events", g.clone(), "/api/v1/close-events".into(), Body::None, global),
        // adjustments: everyone reads (a lead its teams'), writers enter and decide (an unknown one is a 404)
        ("GET /adjustments", g.clone(), format!("/api/v1/adjustments?month={m}"), Body::None, all),
        (
            "POST /adjustments",
            Method::POST,
            "/api/v1/adjustments".into(),
            Body::Json(json!({"month": m, "team": "vision", "amount": "-1.00", "reason": "access matrix"})),
            write(201),
        ),
        (
            "POST /adjustments/{id}/approve",
            Method::POST,
            "/api/v1/adjustments/999999/approve".into(),
            Body::Json(json!({})),
            write(404),
        ),
        (
            "POST /adjustments/{id}/reject",
            Method::POST,
            "/api/v1/adjustments/999999/reject".into(),
            Body::Json(json!({"note": "x"})),
            write(404),
        ),
        ("GET /reports/teams/{month}", g.clone(), format!("/api/v1/reports/teams/{m}"), Body::None, global),
        (
            "GET /reports/unit-cost",
            g.clone(),
            "/api/v1/reports/unit-cost?from=2026-10-01&to=2026-11-01".into(),
            Body::None,
            all,
        ),
        (
            "GET /exports/unit-cost/{file}",
            g.clone(),
            "/api/v1/exports/unit-cost/unit-cost.csv?from=2026-10-01&to=2026-11-01&group_by=team&lang=zh".into(),
            Body::None,
            all,
        ),
        (
            "GET /reports/fragmentation",
            g.clone(),
            "/api/v1/reports/fragmentation?hour=2026-10-05T03:00:00Z".into(),
            Body::None,
            global,
        ),
        (
            "GET /reports/oversubscription",
            g.clone(),
            "/api/v1/reports/oversubscription?from=2026-10-01&to=2026-10-08".into(),
            Body::None,
            global,
        ),
        (
            "GET /exports/{file}",
            g.clone(),
            format!("/api/v1/exports/idle.csv?to={TO}&include_ended=true"),
            Body::None,
            all,
        ),
        (
            "GET /exports/{file}",
            g.clone(),
            format!("/api/v1/exports/idle.xlsx?to={TO}&include_ended=true"),
            Body::None,
            all,
        ),
        ("GET /exports/{file}", g.clone(), "/api/v1/exports/idle.pdf".into(), Body::None, [404; 4]),
        (
            "GET /exports/reports/{file}",
            g.clone(),
            format!("/api/v1/exports/reports/low-utilization.csv?{range}&lang=zh"),
            Body::None,
            all,
        ),
        (
            "GET /exports/reports/{file}",
            g.clone(),
            "/api/v1/exports/reports/oversubscription.xlsx?from=2026-10-01&to=2026-10-08".into(),
            Body::None,
            global,
        ),
        ("GET /exports/{month}/{file}", g.clone(), format!("/api/v1/exports/{m}/utilization.csv"), Body::None, global),
        ("GET /exports/{month}/{file}", g.clone(), format!("/api/v1/exports/{m}/tiers.xlsx"), Body::None, global),
        ("GET /nodes/marked/{month}", g.clone(), format!("/api/v1/nodes/marked/{m}"), Body::None, global),
        (
            "POST /nodes/{cluster}/{node}/preview",
            Method::POST,
            format!("/api/v1/nodes/c1/node-a/preview?month={m}"),
            Body::Json(json!({"replicas": 2})),
            global,
        ),
        (
            "PUT /nodes/{cluster}/{node}",
            Method::PUT,
            "/api/v1/nodes/c1/node-z".into(),
            Body::Json(json!({"gpu_model": "NVIDIA L40S", "cards": 8})),
            write(200),
        ),
        ("GET /budgets/{month}", g.clone(), format!("/api/v1/budgets/{m}"), Body::None, all),
        (
            "PUT /budgets/{month}/{team}",
            Method::PUT,
            format!("/api/v1/budgets/{m}/vision"),
            Body::Json(json!({"amount": "6000"})),
            write(200),
        ),
        (
            "PUT /budgets/{month}/{team}",
            Method::PUT,
            format!("/api/v1/budgets/{m}/ghost"),
            Body::Json(json!({"amount": "6000"})),
            write(404),
        ),
    ]
}

/// What must not appear in anything a team lead of `vision` receives.
fn leaks(text: &str) -> Vec<&'static str> {
    ["nlp", "NLP", NLP_TOTAL, NLP_WASTE, CAPACITY_COST, ALLOCATED, UNALLOCATED, "nlp-idle-pod"]
        .into_iter()
        .filter(|s| text.contains(s))
        .collect()
}

#[sqlx::test]
async fn every_route_and_caller_gets_its_status_and_only_its_data(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let (expired, revoked) = dead_tokens(&pool).await;
    let cases = routes();

    // the matrix covers every route the API documents
    let spec = send(&api, &Method::GET, "/api/v1/openapi.json", None, &Body::None).await.json();
    let mut documented = BTreeSet::new();
    for (path, item) in spec["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            documented.insert(format!("{} {}", method.to_uppercase(), path.trim_start_matches("/api/v1")));
        }
    }
    let covered: BTreeSet<String> = cases.iter().map(|c| c.0.to_string()).collect();
    assert!(documented.len() >= 25, "{documented:?}");
    assert_eq!(covered, documented, "every documented route is in the access matrix");

    let audit_before: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log").fetch_one(&pool).await.unwrap();
    let tokens = [&api.admin, &api.finance, &api.viewer, &api.lead];
    let mut refused_writes = 0;
    for (route, method, path, body, want) in &cases {
        // no credentials, and credentials that are not a valid token: 401 with the challenge, JSON body
        let dead: [(Option<String>, &str); 5] = [
            (None, r#"Bearer realm="cardhour""#),
            (Some("Basic YWRtaW46YWRtaW4=".into()), r#"Bearer realm="cardhour""#),
            (Some(bearer("chr_not-a-token")), r#"Bearer realm="cardhour", error="invalid_token""#),
            (Some(bearer(&expired)), r#"Bearer realm="cardhour", error="invalid_token""#),
            (Some(bearer(&revoked)), r#"Bearer realm="cardhour", error="invalid_token""#),
        ];
        for (auth, challenge) in dead {
            let a = send(&api, method, path, auth.as_deref(), body).await;
            assert_eq!(a.status, 401, "{route} {path} with {auth:?}: {}", a.text());
            assert_eq!(a.header(WWW_AUTHENTICATE).as_deref(), Some(challenge), "{route} {path} with {auth:?}");
            assert_eq!((a.json()["status"].as_u64(), a.json()["code"].as_str()), (Some(401), Some("unauthorized")));
        }
        for ((token, role), want) in tokens.iter().zip(ROLES).zip(want) {
            // the scheme in any case
            let scheme = ["Bearer", "bearer", "BEARER", "bEaReR"][refused_writes % 4];
            let a = send(&api, method, path, Some(&format!("{scheme} {token}")), body).await;
            assert_eq!(a.status, *want, "{route} {path} as {role}: {}", a.text());
            assert!(a.header(WWW_AUTHENTICATE).is_none(), "{route} {path} as {role}");
            if a.status >= 400 {
                let err = a.json();
                assert_eq!(err["status"].as_u64(), Some(u64::from(a.status)), "{route} {path} as {role}: JSON error");
                if a.status == 403 {
                    assert_eq!(err["code"], "forbidden");
                    refused_writes += 1;
                }
            }
            // (an error may echo the caller's own input, e.g. the team it asked for)
            if role == "team_lead" && a.status < 300 {
                let text = if a.header(CONTENT_TYPE).as_deref() == Some("application/pdf") {
                    pdftotext(&a.body)
                } else {
                    a.text()
                };
                assert_eq!(leaks(&text), Vec::<&str>::new(), "{route} {path} as a team lead:\n{text}");
            }
        }
    }
    assert!(refused_writes >= 20, "{refused_writes}");
    // the refused writes wrote nothing: every audit row is admin's or finance's
    let audit: Vec<String> =
        sqlx::query_scalar("SELECT actor FROM audit_log ORDER BY id").fetch_all(&pool).await.unwrap();
    assert!(audit.len() as i64 > audit_before, "the allowed writes are audited");
    let strangers: Vec<&String> =
        audit.iter().filter(|a| !(a.ends_with(":admin") || a.ends_with(":finance") || *a == "cli")).collect();
    assert!(strangers.is_empty(), "{strangers:?}");
}

#[sqlx::test]
async fn a_team_lead_gets_its_own_figures_in_json_csv_and_pdf_and_nothing_else(pool: PgPool) {
    let api = TestApi::start(pool).await;
    seed(&api).await;
    let get = |token: &str, path: String| {
        let (api, token) = (&api, bearer(token));
        async move {
            let a = send(api, &Method::GET, &path, Some(&token), &Body::None).await;
            assert_eq!(a.status, 200, "{path}: {}", a.text());
            a
        }
    };
    let (fin, lead) = (api.finance.clone(), api.lead.clone());

    // the month: finance sees both teams and the cluster; the lead its team only, no cluster figure
    let all = get(&fin, format!("/api/v1/bills/{MONTH}")).await.json();
    let totals = |v: &Value| -> Vec<(String, String)> {
        v["teams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| (t["team"].as_str().unwrap().into(), t["total"].as_str().unwrap().into()))
            .collect()
    };
    assert_eq!(totals(&all), [("nlp".into(), NLP_TOTAL.into()), ("vision".into(), VISION_TOTAL.into())]);
    assert_eq!(
        [&all["capacity_cost"], &all["allocated"], &all["unallocated"], &all["platform_kept"]],
        [CAPACITY_COST, ALLOCATED, UNALLOCATED, UNALLOCATED]
    );
    let mine = get(&lead, format!("/api/v1/bills/{MONTH}")).await.json();
    assert_eq!(totals(&mine), [("vision".to_string(), VISION_TOTAL.to_string())]);
    assert_eq!(mine["teams"][0]["name"], "视觉组");
    for field in ["capacity", "capacity_cost", "allocated", "unallocated", "platform_kept"] {
        assert!(mine[field].is_null(), "{field}: {mine}");
    }
    let st = get(&lead, format!("/api/v1/bills/{MONTH}/teams/vision")).await.json();
    assert_eq!((st["total"].as_str(), st["lines"][0]["card_hours"].as_str()), (Some(VISION_TOTAL), Some("7")));

    // usage, idle list, low-utilization list, teams, mappings, budgets
    let range = format!("from={FROM}&to={TO}");
    let hours = |v: &Value| -> Vec<(String, f64)> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| (r["team"].as_str().unwrap().into(), r["gpu_hours"].as_f64().unwrap()))
            .collect()
    };
    assert_eq!(
        hours(&get(&fin, format!("/api/v1/usage?{range}")).await.json()),
        [("nlp".into(), 21.0), ("vision".into(), 7.0)]
    );
    assert_eq!(hours(&get(&lead, format!("/api/v1/usage?{range}")).await.json()), [("vision".into(), 7.0)]);
    let pods = |v: &Value, field: &str| -> Vec<(String, String)> {
        v.as_array().unwrap().iter().map(|p| (p["pod"].as_str().unwrap().into(), p[field].to_string())).collect()
    };
    let idle = format!("/api/v1/idle?to={TO}&include_ended=true");
    assert_eq!(
        pods(&get(&fin, idle.clone()).await.json(), "monthly_waste"),
        [
            ("nlp-idle-pod".into(), format!("\"{NLP_WASTE}\"")),
            ("vision-idle-pod".into(), format!("\"{VISION_WASTE}\""))
        ]
    );
    assert_eq!(
        pods(&get(&lead, idle).await.json(), "monthly_waste"),
        [("vision-idle-pod".into(), format!("\"{VISION_WASTE}\""))]
    );
    let low = format!("/api/v1/reports/low-utilization?{range}");
    assert_eq!(pods(&get(&fin, low.clone()).await.json(), "team").len(), 2);
    assert_eq!(pods(&get(&lead, low).await.json(), "team"), [("vision-idle-pod".into(), "\"vision\"".into())]);
    let ids = |v: &Value, field: &str| -> Vec<String> {
        v.as_array().unwrap().iter().map(|t| t[field].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(ids(&get(&lead, "/api/v1/teams".into()).await.json(), "id"), ["vision"]);
    assert!(ids(&get(&fin, "/api/v1/teams".into()).await.json(), "id").contains(&"nlp".to_string()));
    assert_eq!(ids(&get(&lead, "/api/v1/mappings".into()).await.json(), "namespace"), ["vision-train"]);
    assert_eq!(ids(&get(&fin, "/api/v1/mappings".into()).await.json(), "namespace").len(), 2);
    assert_eq!(ids(&get(&lead, format!("/api/v1/budgets/{MONTH}")).await.json(), "team_id"), ["vision"]);
    let mut budgets = ids(&get(&fin, format!("/api/v1/budgets/{MONTH}")).await.json(), "team_id");
    budgets.sort();
    assert_eq!(budgets, ["nlp", "vision"]);

    // the CSV: finance's has both teams' lines, the lead's exactly vision's, with or without ?team=vision
    let fin_csv = csv_rows(&get(&fin, format!("/api/v1/exports/{MONTH}/bills.csv")).await.body);
    let teams: BTreeSet<&str> = fin_csv.iter().map(|r| r["team"].as_str()).collect();
    // "": the cluster's rows (capacity, unallocated, platform kept) that close an export of every team
    assert_eq!(teams, BTreeSet::from(["", "nlp", "vision"]));
    let vision_rows: Vec<_> = fin_csv.iter().filter(|r| r["team"] == "vision").cloned().collect();
    assert_eq!(vision_rows.len(), 1);
    assert_eq!((vision_rows[0]["amount"].as_str(), vision_rows[0]["team_name"].as_str()), (VISION_TOTAL, "视觉组"));
    for path in [format!("/api/v1/exports/{MONTH}/bills.csv"), format!("/api/v1/exports/{MONTH}/bills.csv?team=vision")]
    {
        let a = get(&lead, path.clone()).await;
        // the lead's export ends with its total row (layout 4): its team's total
        let mut rows = csv_rows(&a.body);
        let total = rows.pop().unwrap();
        assert_eq!((total["line_type"].as_str(), total["amount"].as_str()), ("total", VISION_TOTAL), "{path}");
        assert_eq!(rows, vision_rows, "{path}");
        assert_eq!(leaks(&a.text()), Vec::<&str>::new(), "{path}");
    }

    // the PDF (in English: its labels are what is looked for): finance's opens with the cluster summary; the
    // lead's is its statement only
    let fin_pdf = pdftotext(&get(&fin, format!("/api/v1/exports/{MONTH}/statements.pdf?lang=en")).await.body);
    for s in [
        "finance summary".to_string(),
        "Capacity cost".into(),
        "Allocation rate".into(),
        yuan(CAPACITY_COST),
        yuan(ALLOCATED),
        yuan(UNALLOCATED),
        "112.000".into(),
        "28.000".into(),
        "NLP".into(),
        yuan(NLP_TOTAL),
        yuan(NLP_WASTE),
        "nlp-idle-pod".into(),
        "视觉组".into(),
        yuan(VISION_TOTAL),
        yuan(VISION_WASTE),
    ] {
        assert!(fin_pdf.contains(&s), "{s:?} is missing from finance's PDF:\n{fin_pdf}");
    }
    for path in [
        format!("/api/v1/exports/{MONTH}/statements.pdf?lang=en"),
        format!("/api/v1/exports/{MONTH}/statements.pdf?team=vision&lang=en"),
    ] {
        let text = pdftotext(&get(&lead, path.clone()).await.body);
        for s in [
            "视觉组".to_string(),
            "vision-train".into(),
            yuan(VISION_TOTAL),
            "vision-idle-pod".into(),
            yuan(VISION_WASTE),
            "12.5000".into(),
        ] {
            assert!(text.contains(&s), "{s:?} is missing from the lead's PDF {path}:\n{text}");
        }
        let cluster = [
            "finance summary",
            "Capacity cost",
            "Platform kept",
            "Allocation rate",
            "Effective rate",
            "112.000",
            "28.000",
            "Sum of totals",
        ];
        let shown: Vec<&str> = cluster.into_iter().filter(|s| text.contains(s)).collect();
        assert_eq!(shown, Vec::<&str>::new(), "cluster-wide figures in the lead's PDF {path}:\n{text}");
        assert_eq!(leaks(&text), Vec::<&str>::new(), "{path}:\n{text}");
    }
}

#[sqlx::test]
async fn downloads_have_a_safe_file_name_and_unknown_teams_are_404(pool: PgPool) {
    let api = TestApi::start(pool).await;
    seed(&api).await;
    for ext in ["bills.csv", "statements.pdf", "bills.xlsx"] {
        let a = send(
            &api,
            &Method::GET,
            &format!("/api/v1/exports/{MONTH}/{ext}?team=vision"),
            Some(&bearer(&api.finance)),
            &Body::None,
        )
        .await;
        assert_eq!(a.status, 200);
        let name = ext.replace("bills.", "").replace("statements.", "");
        assert_eq!(
            a.header(CONTENT_DISPOSITION).unwrap(),
            format!(
                "attachment; filename=\"cardhour-{MONTH}-vision.{name}\"; filename*=UTF-8''cardhour-{MONTH}-vision.{name}"
            )
        );
        for token in [&api.admin, &api.finance, &api.viewer, &api.lead] {
            // a quote and parameter smuggled in, CR/LF, a NUL, a space, a non-ASCII letter: the field `team`, as JSON
            for bad in ["a%22%3Bfilename%3D%22evil.exe", "a%0D%0AX-Evil:%201", "a%0Ab", "a%00", "a%20b", "%E8%A7%86"] {
                let path = format!("/api/v1/exports/{MONTH}/{ext}?team={bad}");
                let a = send(&api, &Method::GET, &path, Some(&bearer(token)), &Body::None).await;
                assert_eq!(a.status, 422, "{path}: {}", a.text());
                assert_eq!(a.header(CONTENT_TYPE).as_deref(), Some("application/json"), "{path}");
                assert!(a.header(CONTENT_DISPOSITION).is_none(), "{path}");
                assert_eq!(a.json()["field"], "team", "{path}: {}", a.text());
            }
            // a team that does not exist (and, for the lead, one outside its scope): a JSON 404 naming `team`, not
            // an empty file; a known team without lines (`unassigned`) is an export without lines
            for team in ["ghost", "unassigned", "speech"] {
                let path = format!("/api/v1/exports/{MONTH}/{ext}?team={team}");
                let a = send(&api, &Method::GET, &path, Some(&bearer(token)), &Body::None).await;
                if team == "unassigned" && token != &api.lead {
                    assert_eq!(a.status, 200, "{path}: {}", a.text());
                    continue;
                }
                assert_eq!((a.status, a.json()["code"].as_str()), (404, Some("not_found")), "{path}: {}", a.text());
                assert_eq!(a.json()["field"], "team", "{path}");
                assert_eq!(a.json()["message"], format!("unknown team {team}"), "{path}");
            }
        }
    }
}

#[sqlx::test]
async fn tokens_expire_record_their_last_use_and_any_scheme_case_works(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let path = "/api/v1/teams/vision";
    for scheme in ["bearer", "BEARER", "Bearer", "bEARER"] {
        let a = send(&api, &Method::GET, path, Some(&format!("{scheme} {}", api.viewer)), &Body::None).await;
        assert_eq!((a.status, a.json()["name"].as_str()), (200, Some("视觉组")), "{scheme}");
    }
    // an expiry in the future is honoured until it passes
    let t = cardhour::auth::new_token();
    let mut conn = pool.acquire().await.unwrap();
    let soon = chrono::Utc::now() + chrono::Duration::hours(1);
    let id = cardhour::db::tokens::insert_expiring(
        &mut conn,
        "soon",
        &t.hash,
        cardhour::auth::Role::Viewer,
        &[],
        Some(soon),
    )
    .await
    .unwrap();
    let used = |id: i64| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, Option<chrono::DateTime<chrono::Utc>>>(
                "SELECT last_used_at FROM api_tokens WHERE id = $1",
            )
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    assert_eq!(used(id).await, None);
    let before = chrono::Utc::now();
    assert_eq!(send(&api, &Method::GET, path, Some(&bearer(&t.secret)), &Body::None).await.status, 200);
    let first = used(id).await.expect("last use recorded");
    assert!(first >= before - chrono::Duration::seconds(5), "{first} vs {before}");
    // within the minute: no write
    assert_eq!(send(&api, &Method::GET, path, Some(&bearer(&t.secret)), &Body::None).await.status, 200);
    assert_eq!(used(id).await, Some(first));
    // older than a minute: written again
    sqlx::query("UPDATE api_tokens SET last_used_at = now() - interval '5 minutes' WHERE id = $1")
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
    let stale = used(id).await.unwrap();
    assert_eq!(send(&api, &Method::GET, path, Some(&bearer(&t.secret)), &Body::None).await.status, 200);
    assert!(used(id).await.unwrap() > stale + chrono::Duration::minutes(4));
    // once past its expiry: 401 invalid_token, and the use is not recorded
    let expire = "UPDATE api_tokens SET created_at = now() - interval '1 day', expires_at = now() - interval '1 second', \
                  last_used_at = NULL WHERE id = $1";
    sqlx::query(expire).bind(id).execute(&pool).await.unwrap();
    let a = send(&api, &Method::GET, path, Some(&bearer(&t.secret)), &Body::None).await;
    assert_eq!(a.status, 401);
    assert_eq!(a.header(WWW_AUTHENTICATE).as_deref(), Some(r#"Bearer realm="cardhour", error="invalid_token""#));
    assert_eq!(used(id).await, None);
    // an expiry before the token's creation is refused by the database
    let bad = sqlx::query("UPDATE api_tokens SET expires_at = created_at - interval '1 day' WHERE id = $1")
        .bind(id)
        .execute(&pool)
        .await;
    assert!(bad.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_issues_expiring_tokens_and_lists_expiry_and_last_use() {
    let db = common::TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    let env = db.env();
    let cli = |args: Vec<&str>| {
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let args: Vec<String> = args.into_iter().map(str::to_string).collect();
        tokio::task::spawn_blocking(move || {
            let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            common::run_cardhour(args, &env)
        })
    };
    let out =
        cli(vec!["token", "create", "--name", "billing-bot", "--role", "viewer", "--expires-in", "90d"]).await.unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let secret = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(secret.starts_with("chr_"), "{secret}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("expires "), "{}", String::from_utf8_lossy(&out.stderr));
    let out =
        cli(vec!["token", "create", "--name", "x", "--role", "viewer", "--expires-at", "2020-01-01"]).await.unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--expires-at"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = cli(vec!["token", "create", "--name", "x", "--role", "viewer", "--expires-in", "soon"]).await.unwrap();
    assert!(!out.status.success());

    let list = |format: &'static str| {
        let cli = &cli;
        async move {
            let out = cli(vec!["token", "list", "--format", format]).await.unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap()
        }
    };
    let tokens: Value = serde_json::from_str(&list("json").await).unwrap();
    let bot = tokens.as_array().unwrap().iter().find(|t| t["name"] == "billing-bot").unwrap().clone();
    let expires: chrono::DateTime<chrono::Utc> = bot["expires_at"].as_str().unwrap().parse().unwrap();
    let want = chrono::Utc::now() + chrono::Duration::days(90);
    assert!((expires - want).num_seconds().abs() < 120, "{expires} vs {want}");
    assert!(bot["last_used_at"].is_null());
    assert!(bot.get("token_hash").is_none());

    let a = send(&api, &Method::GET, "/api/v1/teams", Some(&bearer(&secret)), &Body::None).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let tokens: Value = serde_json::from_str(&list("json").await).unwrap();
    let bot = tokens.as_array().unwrap().iter().find(|t| t["name"] == "billing-bot").unwrap().clone();
    assert!(bot["last_used_at"].is_string(), "{bot}");

    let text = list("text").await;
    let line = text.lines().find(|l| l.contains("billing-bot")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("active") && line.contains(&expires.format("%Y-%m-%d %H:%M UTC").to_string()), "{line}");
    assert!(!line.contains("never"), "it has an expiry and was used: {line}");
    let admin = text.lines().find(|l| l.contains(" admin ")).unwrap_or_else(|| panic!("{text}"));
    assert!(admin.contains("never"), "{admin}");
}
