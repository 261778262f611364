//! `/api/v1` access rules (every endpoint × every role) and the teams / mappings behaviour.

use crate::common;

use cardhour::metering::{ContainerKey, HourOutput, UsageRow, UtilSource};
use common::api::TestApi;
use reqwest::Method;
use serde_json::json;
use sqlx::PgPool;

fn row(namespace: &str, label_team: Option<&str>, gpu_seconds: f64) -> UsageRow {
    UsageRow {
        key: ContainerKey { namespace: namespace.into(), pod: "p".into(), container: "c".into() },
        resource: "nvidia_com_gpu".into(),
        kind: "whole",
        gpu_model: "NVIDIA A100-SXM4-80GB".into(),
        mig_profile: None,
        node: "n1".into(),
        units: 1.0,
        fraction: 1.0,
        memory_share: Some(1.0),
        gpu_seconds,
        effective_gpu_seconds: gpu_seconds / 2.0,
        unmetered_gpu_seconds: 0.0,
        bridged_gpu_seconds: 0.0,
        util_source: UtilSource::SmActive,
        peak_fb_used_mib: None,
        label_team: label_team.map(str::to_string),
    }
}

/// Stores one hour of usage: `vision-train` labelled vision, `nlp-prod` labelled nlp, `misc` unlabelled.
async fn store_usage(pool: &PgPool, hour: &str) {
    let out = HourOutput {
        interval_ms: Some(60_000),
        rows: vec![
            row("vision-train", Some("vision"), 3600.0),
            row("nlp-prod", Some("nlp"), 7200.0),
            row("misc", None, 1800.0),
        ],
        ..HourOutput::default()
    };
    let mut tx = pool.begin().await.unwrap();
    cardhour::db::clusters::upsert(&mut tx, "c1", "http://127.0.0.1:9").await.unwrap();
    cardhour::db::usage::replace_hour(&mut tx, "c1", hour.parse().unwrap(), &out).await.unwrap();
    tx.commit().await.unwrap();
}

/// (team, GPU-hours) of a `/usage?group_by=team` answer.
fn team_hours(usage: &serde_json::Value) -> Vec<(&str, f64)> {
    usage.as_array().unwrap().iter().map(|r| (r["team"].as_str().unwrap(), r["gpu_hours"].as_f64().unwrap())).collect()
}

const RANGE: &str = "from=2026-11-01T00:00:00Z&to=2026-11-02T00:00:00Z";

#[sqlx::test]
async fn every_endpoint_enforces_its_access_rule(pool: PgPool) {
    let api = TestApi::start(pool).await;
    let usage = format!("/api/v1/usage?{RANGE}");
    let cases: Vec<(Method, &str, Option<serde_json::Value>, [u16; 5])> = vec![
        // [no token, admin, finance, viewer, team lead]
        (Method::GET, "/api/v1/teams", None, [401, 200, 200, 200, 200]),
        (Method::GET, "/api/v1/teams/vision", None, [401, 200, 200, 200, 200]),
        (Method::GET, "/api/v1/teams/nlp", None, [401, 200, 200, 200, 404]),
        (Method::PUT, "/api/v1/teams/speech", Some(json!({"name": "语音组"})), [401, 200, 200, 403, 403]),
        (Method::GET, "/api/v1/mappings", None, [401, 200, 200, 200, 200]),
        (Method::GET, &usage, None, [401, 200, 200, 200, 200]),
        (Method::GET, "/api/v1/audit", None, [401, 200, 200, 200, 403]),
    ];
    for (method, path, body, expected) in cases {
        let tokens = [None, Some(&api.admin), Some(&api.finance), Some(&api.viewer), Some(&api.lead)];
        for (token, want) in tokens.into_iter().zip(expected) {
            let (status, body_out) = api.call(method.clone(), path, token.map(String::as_str), body.clone()).await;
            assert_eq!(status, want, "{method} {path} with token #{:?}: {body_out}", token.map(|t| &t[..8]));
            if status >= 400 {
                assert_eq!(body_out["status"], want, "errors are JSON with their status");
            }
            if token == Some(&api.lead) && status < 300 {
                assert!(!body_out.to_string().contains("nlp"), "{method} {path}: the lead sees nlp: {body_out}");
            }
        }
    }
    // … and what the 200s hold: the lead's teams are exactly its own, the others see every team
    let ids = |v: &serde_json::Value| -> Vec<String> {
        v.as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(ids(&api.call(Method::GET, "/api/v1/teams", Some(&api.lead), None).await.1), ["vision"]);
    let everyone = ids(&api.call(Method::GET, "/api/v1/teams", Some(&api.viewer), None).await.1);
    assert!(everyone.contains(&"nlp".to_string()) && everyone.contains(&"vision".to_string()), "{everyone:?}");
    let (_, team) = api.call(Method::GET, "/api/v1/teams/vision", Some(&api.lead), None).await;
    assert_eq!(team["name"], "视觉组");
    // creating mappings: finance and admin only (each attempt a new date so the allowed ones do not conflict)
    for (i, (token, want)) in
        [(&api.admin, 201), (&api.finance, 201), (&api.viewer, 403), (&api.lead, 403)].into_iter().enumerate()
    {
        let body = json!({"namespace": "vision-dev", "team_id": "vision", "valid_from": format!("2026-0{}-01", i + 1)});
        let (status, out) = api.call(Method::POST, "/api/v1/mappings", Some(token), Some(body)).await;
        assert_eq!(status, want, "{out}");
    }
    let (status, _) = api
        .raw(Method::POST, "/api/v1/mappings/import", &api.viewer, "text/csv", "namespace,team,valid_from\n".into())
        .await;
    assert_eq!(status, 403);
    let (status, _) = api.call(Method::GET, "/api/v1/teams", Some("chr_not-a-token"), None).await;
    assert_eq!(status, 401);
    // the spec and Swagger UI are served from the binary (vendored: no network needed)
    let (status, spec) = api.call(Method::GET, "/api/v1/openapi.json", None, None).await;
    assert_eq!(status, 200);
    assert!(spec["paths"]["/api/v1/bills/{month}/close"].is_object());
    let ui = api.client.get(format!("{}/swagger-ui/", api.base)).send().await.unwrap();
    assert_eq!(ui.status().as_u16(), 200);
    assert!(ui.text().await.unwrap().contains("swagger-ui"));
}

#[sqlx::test]
async fn a_team_lead_sees_only_its_teams_usage(pool: PgPool) {
    store_usage(&pool, "2026-11-01T03:00:00Z").await;
    let api = TestApi::start(pool).await;
    let (status, all) =
        api.call(Method::GET, &format!("/api/v1/usage?{RANGE}&group_by=team"), Some(&api.finance), None).await;
    assert_eq!(status, 200);
    assert_eq!(team_hours(&all), [("nlp", 2.0), ("unassigned", 0.5), ("vision", 1.0)]);
    // a range of whole billing days (Shanghai midnights) reads the daily rollup: same figures
    let day = "from=2026-10-31T16:00:00Z&to=2026-11-01T16:00:00Z&group_by=team";
    let (_, daily) = api.call(Method::GET, &format!("/api/v1/usage?{day}"), Some(&api.finance), None).await;
    assert_eq!(daily, all);
    let (_, mine) =
        api.call(Method::GET, &format!("/api/v1/usage?{RANGE}&group_by=namespace"), Some(&api.lead), None).await;
    assert_eq!(
        mine,
        json!([{"namespace": "vision-train", "gpu_hours": 1.0, "effective_gpu_hours": 0.5, "unmetered_gpu_hours": 0.0, "utilization": 0.5}])
    );
    let (_, pods) = api.call(Method::GET, &format!("/api/v1/usage?{RANGE}&group_by=pod"), Some(&api.lead), None).await;
    assert_eq!(pods.as_array().unwrap().len(), 1);
    let (status, err) = api
        .call(Method::GET, "/api/v1/usage?from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z", Some(&api.lead), None)
        .await;
    assert_eq!((status, err["field"].as_str()), (422, Some("to")));
    let (status, err) =
        api.call(Method::GET, "/api/v1/usage?from=yesterday&to=2026-11-01T00:00:00Z", Some(&api.lead), None).await;
    assert_eq!((status, err["field"].as_str()), (422, Some("from")), "{err}");

    // a mapping moves `misc` to vision: the answers given (and kept) before follow at once, and so does the
    // per-pod day rollup the idle list reads (the range is one whole UTC day)
    let body = json!({"namespace": "misc", "team_id": "vision", "valid_from": "2026-11-01"});
    let (status, out) = api.call(Method::POST, "/api/v1/mappings", Some(&api.finance), Some(body)).await;
    assert_eq!(status, 201, "{out}");
    let (_, all) =
        api.call(Method::GET, &format!("/api/v1/usage?{RANGE}&group_by=team"), Some(&api.finance), None).await;
    assert_eq!(team_hours(&all), [("nlp", 2.0), ("vision", 1.5)]);
    let (_, mine) =
        api.call(Method::GET, &format!("/api/v1/usage?{RANGE}&group_by=namespace"), Some(&api.lead), None).await;
    assert_eq!(mine.as_array().unwrap().len(), 2, "{mine}");
    let pods = cardhour::db::waste::pods(
        &api.pool,
        "2026-11-01T00:00:00Z".parse().unwrap(),
        "2026-11-02T00:00:00Z".parse().unwrap(),
        &cardhour::access::Scope::all(),
    )
    .await
    .unwrap();
    let misc: Vec<&str> = pods.iter().filter(|p| p.namespace == "misc").map(|p| p.team.as_str()).collect();
    assert_eq!(misc, ["vision"]);
}

#[sqlx::test]
async fn mappings_reattribute_usage_from_their_date_and_are_audited(pool: PgPool) {
    // the hour is 2026-11-01 03:00 UTC = 11:00 in Shanghai, so a mapping valid from 2026-11-01 applies
    store_usage(&pool, "2026-11-01T03:00:00Z").await;
    store_usage(&pool, "2026-10-31T03:00:00Z").await;
    let api = TestApi::start(pool.clone()).await;
    let body = json!({"namespace": "misc", "team_id": "nlp", "valid_from": "2026-11-01"});
    let (status, m) = api.call(Method::POST, "/api/v1/mappings", Some(&api.finance), Some(body.clone())).await;
    assert_eq!(status, 201, "{m}");
    let team_of = |day: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, String>(
                "SELECT team FROM usage_namespace_hourly WHERE namespace = 'misc' AND hour = $1::timestamptz",
            )
            .bind(day)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    assert_eq!(team_of("2026-11-01T03:00:00Z").await, "nlp");
    assert_eq!(team_of("2026-10-31T03:00:00Z").await, "unassigned");
    // the same date again is a conflict naming valid_from; an unknown team names team_id; nothing written
    let (status, err) = api.call(Method::POST, "/api/v1/mappings", Some(&api.finance), Some(body)).await;
    assert_eq!((status, err["field"].as_str()), (409, Some("valid_from")));
    let (status, err) = api
        .call(
            Method::POST,
            "/api/v1/mappings",
            Some(&api.finance),
            Some(json!({"namespace": "misc", "team_id": "ghost", "valid_from": "2026-11-05"})),
        )
        .await;
    assert_eq!((status, err["field"].as_str()), (422, Some("team_id")));
    let (status, err) = api
        .call(
            Method::POST,
            "/api/v1/mappings",
            Some(&api.finance),
            Some(json!({"namespace": "misc", "team_id": "nlp"})),
        )
        .await;
    assert_eq!((status, err["field"].as_str()), (422, Some("valid_from")), "{err}");
    let (_, audit) = api.call(Method::GET, "/api/v1/audit", Some(&api.finance), None).await;
    let actions: Vec<&str> = audit.as_array().unwrap().iter().map(|a| a["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["mapping.create"]);
    assert_eq!(audit[0]["after"]["team_id"], "nlp");
}

#[sqlx::test]
async fn a_csv_import_is_all_or_nothing(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let count = || {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM namespace_mappings").fetch_one(&pool).await.unwrap()
        }
    };
    // row 3 contradicts row 2 (same namespace and date, another team): nothing of row 2 (nor its new team) may
    // remain
    let bad =
        "namespace,team,team_name,owner,valid_from\nrecsys,rec,推荐算法组,张三,2026-11-01\nrecsys,nlp,,,2026-11-01\n";
    let (status, err) = api.raw(Method::POST, "/api/v1/mappings/import", &api.finance, "text/csv", bad.into()).await;
    assert_eq!((status, err["field"].as_str()), (422, Some("row 3: team")), "{err}");
    assert_eq!(count().await, 0);
    let (status, _) = api.call(Method::GET, "/api/v1/teams/rec", Some(&api.admin), None).await;
    assert_eq!(status, 404, "the team of a failed import is not created");
    let malformed = "namespace,team,valid_from\na,b,2026-11-01\nc,D!,someday\n";
    let (status, err) =
        api.raw(Method::POST, "/api/v1/mappings/import", &api.finance, "text/csv", malformed.into()).await;
    assert_eq!(status, 422);
    assert_eq!(err["errors"].as_array().unwrap().len(), 2, "{err}");
    assert_eq!(count().await, 0);

    let good = "\u{feff}namespace,team,team_name,owner,valid_from\nrecsys,rec,推荐算法组,张三,2026-11-01\nrec-dev,rec,,,2026-11-01\n";
    let (status, out) = api.raw(Method::POST, "/api/v1/mappings/import", &api.finance, "text/csv", good.into()).await;
    assert_eq!(status, 201, "{out}");
    assert_eq!(out["teams_created"], 1);
    assert_eq!(count().await, 2);
    let (_, team) = api.call(Method::GET, "/api/v1/teams/rec", Some(&api.viewer), None).await;
    assert_eq!(team, json!({"id": "rec", "name": "推荐算法组", "owner": "张三"}));
}
