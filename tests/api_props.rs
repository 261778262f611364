//! Property tests (issue 10): the Prometheus answer decoder, the CMDB CSV import and every JSON body of the
//! API. On any input: no panic, no 5xx, and a refused request writes nothing (row counts, audit rows).

use crate::common;

use cardhour::prom::{PromError, parse_response};
use common::api::{TestApi, write_counts};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

// --- the Prometheus decoder --------------------------------------------------------------------------------------

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter("JSON has finite numbers", |f| f.is_finite()).prop_map(Value::from),
        any::<String>().prop_map(Value::from),
        prop::sample::select(vec![
            "2026-11-01",
            "-5000-01-01",
            "0000-01-01",
            "200000-01-01",
            "10",
            "-1",
            "1e30",
            "NaN",
            "A100-80GB",
            "vision",
            "",
            " ",
            "a\u{0}b",
            "\u{202E}x",
            "showback",
            "spread_proportionally",
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(field_name(), inner, 0..5).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Field names the routes know, and others.
fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "gpu_model", "effective_from", "rate", "tco", "card_price", "pue", "name", "owner", "namespace", "team_id",
            "valid_from", "cluster", "amount", "thresholds", "on_demand", "spot", "reserved", "pricing_model", "mode",
            "unallocated", "status", "data", "result", "resultType", "metric", "values", "value",
        ])
        .prop_map(str::to_string),
        1 => "\\PC{0,8}",
    ]
}

fn arb_prom_answer() -> impl Strategy<Value = Value> {
    let point = prop_oneof![
        (any::<f64>().prop_filter("finite", |f| f.is_finite()), "\\PC{0,6}").prop_map(|(t, v)| json!([t, v])),
        (any::<i64>(), prop::sample::select(vec!["NaN", "+Inf", "-Inf", "1", "0.5", "1e400"]))
            .prop_map(|(t, v)| json!([t, v])),
        arb_json(),
    ];
    let series = (prop::collection::btree_map("\\PC{0,6}", "\\PC{0,6}", 0..3), prop::collection::vec(point, 0..5))
        .prop_map(|(metric, values)| json!({"metric": metric, "values": values}));
    (
        prop::sample::select(vec!["success", "error", ""]),
        prop::sample::select(vec!["matrix", "vector", "scalar"]),
        prop::collection::vec(series, 0..3),
    )
        .prop_map(|(status, kind, result)| json!({"status": status, "data": {"resultType": kind, "result": result}}))
}

proptest! {
    #![proptest_config(Config::with_cases(512))]

    #[test]
    fn prom_decoder_never_panics_on_bytes(body in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Err(e) = parse_response(&body) {
            prop_assert!(matches!(e, PromError::Malformed(_) | PromError::Query { .. }), "{e}");
        }
    }

    #[test]
    fn prom_decoder_never_panics_on_json(v in prop_oneof![arb_prom_answer(), arb_json()]) {
        match parse_response(v.to_string().as_bytes()) {
            Ok(series) => prop_assert!(series.iter().all(|s| s.samples.iter().all(|x| x.v.is_finite()))),
            Err(e) => prop_assert!(matches!(e, PromError::Malformed(_) | PromError::Query { .. }), "{e}"),
        }
    }
}

// --- the API -------------------------------------------------------------------------------------------------------

/// A real database and server shared by the cases of one property (blocking: proptest's runner is sync).
struct Harness {
    rt: tokio::runtime::Runtime,
    api: TestApi,
    _db: common::TestDb,
}

impl Harness {
    fn new() -> Harness {
        let db = common::TestDb::new().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let api = rt.block_on(async {
            let pool = PgPool::connect(&db.url).await.unwrap();
            cardhour::db::MIGRATOR.run(&pool).await.unwrap();
            TestApi::start(pool).await
        });
        Harness { rt, api, _db: db }
    }
}

/// How a valid body is spoiled.
#[derive(Debug, Clone)]
enum Mutation {
    Keep,
    Replace(String, Value),
    Remove(String),
    Add(String, Value),
    Whole(Value),
}

fn arb_mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => Just(Mutation::Keep),
        4 => (field_name(), arb_json()).prop_map(|(f, v)| Mutation::Replace(f, v)),
        1 => field_name().prop_map(Mutation::Remove),
        1 => (field_name(), arb_json()).prop_map(|(f, v)| Mutation::Add(f, v)),
        2 => arb_json().prop_map(Mutation::Whole),
    ]
}

fn apply(mut body: Value, m: &Mutation) -> Value {
    match m {
        Mutation::Keep => body,
        Mutation::Whole(v) => v.clone(),
        Mutation::Replace(f, v) | Mutation::Add(f, v) => {
            // `Replace` of a field the body lacks is an addition too
            body[f.as_str()] = v.clone();
            body
        }
        Mutation::Remove(f) => {
            if let Some(o) = body.as_object_mut() {
                o.remove(f.as_str());
            }
            body
        }
    }
}

/// Every POST and PUT route with a JSON body, with a valid body; `writes`: a success adds one audit row.
fn routes() -> Vec<(Method, &'static str, Value, bool)> {
    let tco = json!({"card_price": "80000", "server_share_per_card": "40000", "depreciation_years": "5",
        "power_kw_per_card": "0.7", "pue": "1.3", "electricity_price": "0.8", "ops_per_card_year": "2000",
        "recovery_utilization": "0.7"});
    vec![
        (
            Method::POST,
            "/api/v1/rates",
            json!({"gpu_model": "A100-80GB", "effective_from": "2026-11-01", "rate": "10"}),
            true,
        ),
        (
            Method::POST,
            "/api/v1/rates",
            json!({"gpu_model": "H100-80GB", "effective_from": "2026-11-01", "tco": tco}),
            true,
        ),
        (Method::POST, "/api/v1/rates/preview", tco, false),
        (Method::PUT, "/api/v1/cloud-rates/A100-80GB", json!({"on_demand": "25", "spot": "9", "reserved": "15"}), true),
        (Method::PUT, "/api/v1/model-aliases/NVIDIA%20A100", json!({"pricing_model": "A100-80GB"}), true),
        (Method::PUT, "/api/v1/teams/cv", json!({"name": "视觉", "owner": "张三"}), true),
        (
            Method::POST,
            "/api/v1/mappings",
            json!({"namespace": "ns", "team_id": "vision", "valid_from": "2026-11-01"}),
            true,
        ),
        (Method::PUT, "/api/v1/budgets/2026-11/vision", json!({"amount": "1000", "thresholds": ["0.5", "1"]}), true),
        (
            Method::POST,
            "/api/v1/bills/2026-10/close",
            json!({"mode": "chargeback", "unallocated": "kept_by_platform"}),
            true,
        ),
    ]
}

#[test]
fn every_json_body_is_answered_without_5xx_or_partial_writes() {
    let h = Harness::new();
    let routes = routes();
    let mut runner = TestRunner::new(Config { cases: 160, failure_persistence: None, ..Config::default() });
    let strategy = (0..routes.len(), arb_mutation());
    let (ok, refused) = (std::sync::atomic::AtomicUsize::new(0), std::sync::atomic::AtomicUsize::new(0));
    runner
        .run(&strategy, |(i, m)| {
            let (method, path, base, writes) = &routes[i];
            let body = apply(base.clone(), &m);
            h.rt.block_on(async {
                let version = async || -> i64 {
                    sqlx::query_scalar("SELECT version FROM data_version").fetch_one(&h.api.pool).await.unwrap()
                };
                let (before, version_before) = (write_counts(&h.api.pool).await, version().await);
                let (status, answer) = h.api.call(method.clone(), path, Some(&h.api.finance), Some(body.clone())).await;
                let (after, wrote) = (write_counts(&h.api.pool).await, version().await != version_before);
                prop_assert!(status < 500, "{method} {path} {body} → {status} {answer}");
                prop_assert!(answer["status"].is_u64() || status < 400, "errors are JSON: {answer}");
                let seen = if status >= 400 { &refused } else { &ok };
                seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if status >= 400 {
                    prop_assert_eq!(&after, &before, "{} {} {} → {} wrote something", method, path, body, status);
                } else if *writes && wrote {
                    prop_assert_eq!(after[7].1, before[7].1 + 1, "one audit row per change: {} {}", path, body);
                } else if *writes {
                    // a PUT of what is stored already writes nothing (the data version stays) and audits nothing
                    prop_assert_eq!(method, &Method::PUT, "only a PUT may write nothing: {} {}", path, body);
                    prop_assert_eq!(&after, &before, "{} {}", path, body);
                }
                Ok::<(), TestCaseError>(())
            })
        })
        .unwrap();
    let (ok, refused) = (ok.into_inner(), refused.into_inner());
    assert!(ok > 0 && refused > 0, "both outcomes reached: {ok} accepted, {refused} refused");
}

fn csv_cell() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "ns-a", "ns-b", "vision", "nlp", "new-team", "Bad Team", "2026-11-01", "2026-13-01", "-5000-01-01", "",
            "\"quoted, cell\"", "推荐组", "\u{202E}x", "a\u{0}b", "=cmd()", "c1",
        ])
        .prop_map(str::to_string),
        1 => any::<String>(),
    ]
}

fn arb_csv() -> impl Strategy<Value = Vec<u8>> {
    let header = prop::sample::select(vec![
        "namespace,team,valid_from",
        "namespace,team,team_name,owner,valid_from",
        "namespace,team,valid_from,cluster",
        "\u{feff}namespace,team,valid_from",
        "namespace,team",
        "",
    ]);
    let rows = prop::collection::vec(prop::collection::vec(csv_cell(), 0..6), 0..5);
    prop_oneof![
        4 => (header, rows).prop_map(|(h, rows)| {
            let mut s = format!("{h}\n");
            for r in rows {
                s.push_str(&r.join(","));
                s.push('\n');
            }
            s.into_bytes()
        }),
        1 => prop::collection::vec(any::<u8>(), 0..200),
        // well-formed imports, so that the all-rows half is reached too
        2 => prop::collection::vec(
            (
                "[a-z][a-z0-9-]{0,12}",
                prop::sample::select(vec!["vision", "nlp", "new-team", "rec"]),
                prop::sample::select(vec!["2026-10-01", "2026-11-01", "2026-11-15"]),
            ),
            1..4,
        )
        .prop_map(|rows| {
            let mut s = "namespace,team,valid_from\n".to_string();
            for (ns, team, day) in rows {
                s.push_str(&format!("{ns},{team},{day}\n"));
            }
            s.into_bytes()
        }),
    ]
}

#[test]
fn the_csv_import_is_all_or_nothing_on_any_bytes() {
    let h = Harness::new();
    let mut runner = TestRunner::new(Config { cases: 96, failure_persistence: None, ..Config::default() });
    runner
        .run(&arb_csv(), |body| {
            h.rt.block_on(async {
                let before = write_counts(&h.api.pool).await;
                let resp = h
                    .api
                    .client
                    .post(format!("{}/api/v1/mappings/import", h.api.base))
                    .bearer_auth(&h.api.finance)
                    .header("content-type", "text/csv")
                    .body(body.clone())
                    .send()
                    .await
                    .unwrap();
                let status = resp.status().as_u16();
                let answer: Value = resp.json().await.unwrap_or(Value::Null);
                let after = write_counts(&h.api.pool).await;
                let text = String::from_utf8_lossy(&body);
                prop_assert!(status < 500, "{text:?} → {status} {answer}");
                prop_assert!(answer["status"].is_u64() || status == 201 || status == 200, "errors are JSON: {answer}");
                if status == 201 {
                    let (inserted, updated) =
                        (answer["inserted"].as_i64().unwrap(), answer["updated"].as_i64().unwrap());
                    let teams = answer["teams_created"].as_i64().unwrap_or(-1);
                    prop_assert!(inserted + updated > 0);
                    prop_assert_eq!(answer["mappings"].as_array().map_or(0, Vec::len) as i64, inserted + updated);
                    prop_assert_eq!(after[1].1, before[1].1 + inserted, "every new row stored: {:?}", text);
                    prop_assert_eq!(after[0].1, before[0].1 + teams);
                    prop_assert_eq!(after[7].1, before[7].1 + inserted + updated + teams, "one audit row per change");
                } else if status == 200 {
                    // an import that changes nothing (every row stored already) writes and audits nothing
                    prop_assert_eq!(answer["inserted"].as_i64().unwrap() + answer["updated"].as_i64().unwrap(), 0);
                    prop_assert_eq!(&after, &before, "{:?} → 200 wrote something", text);
                } else {
                    prop_assert_eq!(&after, &before, "{:?} → {} wrote something", text, status);
                }
                Ok::<(), TestCaseError>(())
            })?;
            Ok(())
        })
        .unwrap();
    // the generator must reach the success path too, or the all-rows half is untested
    let created = h.rt.block_on(async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM namespace_mappings").fetch_one(&h.api.pool).await.unwrap()
    });
    assert!(created > 0, "no generated import succeeded");
}
