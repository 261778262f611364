//! `/rates`, `/rates/preview`, `/cloud-rates`, `/rent-vs-build`: validation naming the field, nothing written on
//! bad input, the SPEC's worked example to the fen, and each endpoint's access rule.

use crate::common;

use common::api::TestApi;
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

fn tco() -> Value {
    json!({"card_price": "80000", "server_share_per_card": "40000", "depreciation_years": "5",
        "avg_power_kw": "0.5", "pue": "1.4", "electricity_price": "0.8", "system_factor": "1.2",
        "datacenter_per_card_year": "3000", "staff_per_card_year": "2000", "recovery_utilization": "0.7"})
}

fn with(mut v: Value, field: &str, value: Value) -> Value {
    match value {
        Value::Null => {
            v.as_object_mut().unwrap().remove(field);
        }
        other => v[field] = other,
    }
    v
}

async fn rate_count(api: &TestApi) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM rate_versions").fetch_one(&api.pool).await.unwrap()
}

#[sqlx::test]
async fn the_tco_preview_reproduces_the_spec_to_the_fen(pool: PgPool) {
    let api = TestApi::start(pool).await;
    let (status, b) = api.call(Method::POST, "/api/v1/rates/preview", Some(&api.viewer), Some(tco())).await;
    assert_eq!(status, 200, "{b}");
    // 0.5 kW × 8760 h × PUE 1.4 × 0.8 yuan/kWh = 4,905.60 yuan per card-year before the system factor
    assert_eq!(b["power_per_year_before_system_factor"], "4905.60");
    // × 1.2 = 5,886.72; hardware (80,000 + 40,000) / 5 = 24,000; + 3,000 + 2,000 = 34,886.72 a year
    assert_eq!(b["power_per_year"], "5886.72");
    assert_eq!(b["hardware_per_year"], "24000.00");
    assert_eq!(b["annual_tco"], "34886.72");
    // 34,886.72 / (8760 × 0.7) = 5.68931… yuan per card-hour
    assert_eq!(b["rate"], "5.6893");
}

#[sqlx::test]
async fn bad_rates_name_the_field_and_write_nothing(pool: PgPool) {
    let api = TestApi::start(pool).await;
    let fin = Some(api.finance.as_str());
    let cases = [
        (with(tco(), "card_price", json!("-1")), 422, "tco.card_price"),
        (with(tco(), "depreciation_years", json!("0")), 422, "tco.depreciation_years"),
        (with(tco(), "pue", json!("0.9")), 422, "tco.pue"),
        (with(tco(), "recovery_utilization", json!("1.5")), 422, "tco.recovery_utilization"),
        (with(tco(), "electricity_price", Value::Null), 422, "tco.electricity_price"),
        (with(tco(), "pue", json!("much")), 422, "tco.pue"),
    ];
    for (t, status, field) in cases {
        let body = json!({"gpu_model": "A100-80GB", "effective_from": "2026-11-01", "tco": t});
        let (s, err) = api.call(Method::POST, "/api/v1/rates", fin, Some(body)).await;
        assert_eq!((s, err["field"].as_str()), (status, Some(field)), "{err}");
    }
    let (s, err) = api
        .call(
            Method::POST,
            "/api/v1/rates",
            fin,
            Some(json!({"gpu_model": "L40S", "effective_from": "2026-11-01", "rate": "-2"})),
        )
        .await;
    assert_eq!((s, err["field"].as_str()), (422, Some("rate")));
    let (s, err) = api.call(Method::POST, "/api/v1/rates", fin, Some(json!({"gpu_model": "L40S", "rate": "2"}))).await;
    assert_eq!((s, err["field"].as_str()), (422, Some("effective_from")), "{err}");
    let (s, err) = api
        .call(Method::POST, "/api/v1/rates", fin, Some(json!({"gpu_model": "L40S", "effective_from": "2026-11-01"})))
        .await;
    assert_eq!((s, err["field"].as_str()), (422, Some("tco")));
    let (s, err) = api
        .call(
            Method::POST,
            "/api/v1/rates",
            fin,
            Some(json!({"gpu_model": " ", "effective_from": "2026-11-01", "rate": "1"})),
        )
        .await;
    assert_eq!((s, err["field"].as_str()), (422, Some("gpu_model")));
    // several bad TCO fields are all reported
    let (_, err) = api
        .call(
            Method::POST,
            "/api/v1/rates/preview",
            fin,
            Some(with(with(tco(), "pue", json!("0.5")), "system_factor", json!("0.5"))),
        )
        .await;
    assert_eq!(err["errors"].as_array().unwrap().len(), 2, "{err}");
    assert_eq!(rate_count(&api).await, 0);

    // overlapping effective dates: the second version of a model on the same day is refused
    let ok = json!({"gpu_model": "L40S", "effective_from": "2026-11-01", "rate": "6.5"});
    assert_eq!(api.call(Method::POST, "/api/v1/rates", fin, Some(ok.clone())).await.0, 201);
    let (s, err) = api.call(Method::POST, "/api/v1/rates", fin, Some(ok)).await;
    assert_eq!((s, err["field"].as_str()), (409, Some("effective_from")));
    assert_eq!(rate_count(&api).await, 1);
    let (_, audit) = api.call(Method::GET, "/api/v1/audit", fin, None).await;
    assert_eq!(audit[0]["action"], "rate.create");
    assert_eq!(audit[0]["after"]["rate"], "6.5000");
}

#[sqlx::test]
async fn rate_endpoints_enforce_their_access_rules(pool: PgPool) {
    let api = TestApi::start(pool).await;
    let rate = json!({"gpu_model": "H100-80GB", "effective_from": "2026-11-01", "rate": "20"});
    // [no token, admin, finance, viewer, team lead]
    let cases: Vec<(Method, String, Option<Value>, [u16; 5])> = vec![
        (Method::GET, "/api/v1/rates".into(), None, [401, 200, 200, 200, 200]),
        (Method::POST, "/api/v1/rates/preview".into(), Some(tco()), [401, 200, 200, 200, 200]),
        (Method::GET, "/api/v1/cloud-rates".into(), None, [401, 200, 200, 200, 200]),
        (
            Method::PUT,
            "/api/v1/cloud-rates/H100-80GB".into(),
            Some(json!({"on_demand": "25.5", "spot": "9"})),
            [401, 200, 200, 403, 403],
        ),
        (
            Method::GET,
            "/api/v1/rent-vs-build?model=H100-80GB&from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z".into(),
            None,
            [401, 404, 404, 404, 403],
        ),
        (Method::GET, "/api/v1/bills/2026-10".into(), None, [401, 200, 200, 200, 200]),
        (Method::GET, "/api/v1/model-aliases".into(), None, [401, 200, 200, 200, 200]),
        (Method::GET, "/api/v1/idle?to=2026-11-01T00:00:00Z".into(), None, [401, 200, 200, 200, 200]),
        (Method::GET, "/api/v1/idle?rule=monthly".into(), None, [401, 422, 422, 422, 422]),
        (Method::GET, "/api/v1/exports/2026-10/bills.csv".into(), None, [401, 200, 200, 200, 200]),
        (Method::GET, "/api/v1/reports/low-utilization".into(), None, [401, 200, 200, 200, 200]),
        (Method::GET, "/api/v1/reports/low-utilization?top=0".into(), None, [401, 422, 422, 422, 422]),
        (Method::GET, "/api/v1/reports/utilization/2026-10".into(), None, [401, 200, 200, 200, 403]),
        (Method::GET, "/api/v1/reports/teams/2026-10".into(), None, [401, 200, 200, 200, 403]),
        (
            Method::GET,
            "/api/v1/reports/fragmentation?hour=2026-10-01T04:00:00Z".into(),
            None,
            [401, 200, 200, 200, 403],
        ),
        (Method::GET, "/api/v1/reports/fragmentation".into(), None, [401, 404, 404, 404, 403]),
        (Method::GET, "/api/v1/budgets/2026-10".into(), None, [401, 200, 200, 200, 200]),
        (Method::PUT, "/api/v1/budgets/2026-10/nlp".into(), Some(json!({"amount": "1000"})), [401, 200, 200, 403, 403]),
        (
            Method::PUT,
            "/api/v1/budgets/2026-10/ghost".into(),
            Some(json!({"amount": "1000"})),
            [401, 404, 404, 403, 403],
        ),
        // no usage stored: nlp, a known team, has an export without lines (its lead's is another team: 404)
        (Method::GET, "/api/v1/exports/2026-10/bills.csv?team=nlp".into(), None, [401, 200, 200, 200, 404]),
        (Method::GET, "/api/v1/exports/2026-10/statements.pdf?team=nlp".into(), None, [401, 200, 200, 200, 404]),
        (
            Method::PUT,
            "/api/v1/model-aliases/Tesla%20X".into(),
            Some(json!({"pricing_model": "A100-80GB"})),
            [401, 200, 200, 403, 403],
        ),
        (Method::GET, "/api/v1/bills/2026-10/teams/vision".into(), None, [401, 200, 200, 200, 200]),
        (
            Method::POST,
            "/api/v1/bills/2099-10/close".into(),
            Some(json!({"mode": "showback", "unallocated": "kept_by_platform"})),
            [401, 409, 409, 403, 403],
        ),
    ];
    for (method, path, body, expected) in cases {
        let tokens = [None, Some(&api.admin), Some(&api.finance), Some(&api.viewer), Some(&api.lead)];
        for (token, want) in tokens.into_iter().zip(expected) {
            let (status, out) = api.call(method.clone(), &path, token.map(String::as_str), body.clone()).await;
            assert_eq!(status, want, "{method} {path}: {out}");
            // every refusal is the JSON error it says it is
            if status >= 400 {
                assert_eq!(out["status"], status, "{method} {path}: {out}");
            }
            // the team lead (of vision) is never told about nlp
            if token == Some(&api.lead) && status < 300 {
                assert!(!out.to_string().contains("nlp"), "{method} {path}: {out}");
            }
        }
    }
    for (i, (token, want)) in
        [(&api.admin, 201), (&api.finance, 201), (&api.viewer, 403), (&api.lead, 403)].into_iter().enumerate()
    {
        let body = json!({"gpu_model": "H100-80GB", "effective_from": format!("2026-0{}-01", i + 1), "rate": "20"});
        assert_eq!(api.call(Method::POST, "/api/v1/rates", Some(token), Some(body)).await.0, want);
    }
    let (_, list) = api.call(Method::GET, "/api/v1/rates", Some(&api.viewer), None).await;
    let id = list[0]["id"].as_i64().unwrap();
    for (token, want) in [(&api.viewer, 403), (&api.lead, 403), (&api.finance, 204), (&api.admin, 404)] {
        assert_eq!(api.call(Method::DELETE, &format!("/api/v1/rates/{id}"), Some(token), None).await.0, want);
    }
    let _ = rate;
}
