//! An in-process API server on a loopback port with one token per role, for the API tests.

use cardhour::auth::{Role, new_token};
use cardhour::http::server::app;
use cardhour::metering::{CapacityRow, ContainerKey, HourOutput, OfferedSource, UsageRow, UtilSource};
use cardhour::usecase::state::AppState;
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

pub struct TestApi {
    pub base: String,
    pub client: reqwest::Client,
    pub pool: PgPool,
    pub admin: String,
    pub finance: String,
    pub viewer: String,
    /// A team lead of team `vision` only.
    pub lead: String,
}

impl TestApi {
    /// Starts the API on `pool` (migrated), with teams `vision` and `nlp` and a token per role.
    pub async fn start(pool: PgPool) -> TestApi {
        Self::start_with(pool, cardhour::http::server::ClientLimits::default()).await
    }

    /// [`Self::start`], served as `cardhour serve` serves (its connection loop) with these client limits.
    pub async fn start_with(pool: PgPool, limits: cardhour::http::server::ClientLimits) -> TestApi {
        for (id, name) in [("vision", "视觉组"), ("nlp", "NLP")] {
            sqlx::query(
                "INSERT INTO teams (id, name, owner) VALUES ($1, $2, 'owner')
                 ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, owner = EXCLUDED.owner",
            )
            .bind(id)
            .bind(name)
            .execute(&pool)
            .await
            .unwrap();
        }
        let mut tokens = Vec::new();
        for (role, teams) in [
            (Role::Admin, vec![]),
            (Role::Finance, vec![]),
            (Role::Viewer, vec![]),
            (Role::TeamLead, vec!["vision".to_string()]),
        ] {
            let t = new_token();
            let mut conn = pool.acquire().await.unwrap();
            cardhour::db::tokens::insert(&mut conn, role.as_str(), &t.hash, role, &teams).await.unwrap();
            tokens.push(t.secret);
        }
        let state = AppState::new(pool.clone(), chrono_tz::Asia::Shanghai);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(cardhour::http::server::serve(listener, app(state), limits, std::future::pending()));
        let [admin, finance, viewer, lead]: [String; 4] = tokens.try_into().unwrap();
        TestApi { base, client: reqwest::Client::new(), pool, admin, finance, viewer, lead }
    }

    /// POSTs `body` (bytes, any encoding) to the CMDB import as finance, `query` appended (`?dry_run=true`);
    /// the status and the JSON report (`Null` when not JSON).
    pub async fn import_mappings(&self, query: &str, body: impl Into<Vec<u8>>) -> (u16, Value) {
        let resp = self
            .client
            .post(format!("{}/api/v1/mappings/import{query}", self.base))
            .bearer_auth(&self.finance)
            .header("content-type", "text/csv")
            .body(body.into())
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// Calls the API; returns the status and the JSON body (`Null` when not JSON).
    pub async fn call(&self, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> (u16, Value) {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// GETs a file (an export) as `token`; asserts it is served (200) and returns its bytes.
    pub async fn download(&self, path: &str, token: &str) -> Vec<u8> {
        let resp = self.client.get(format!("{}{path}", self.base)).bearer_auth(token).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200, "GET {path}");
        resp.bytes().await.unwrap().to_vec()
    }

    pub async fn raw(&self, method: Method, path: &str, token: &str, content_type: &str, body: String) -> (u16, Value) {
        let resp = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token)
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }
}

/// Row counts of everything a write route can change, audit log included, by table: equal before and after a
/// refused request means nothing was written.
pub async fn write_counts(pool: &PgPool) -> Vec<(&'static str, i64)> {
    let mut out = Vec::new();
    for table in [
        "teams",
        "namespace_mappings",
        "rate_versions",
        "cloud_rates",
        "gpu_model_aliases",
        "budgets",
        "closed_months",
        "audit_log",
    ] {
        let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {table}")).fetch_one(pool).await.unwrap();
        out.push((table, n));
    }
    out
}

/// The month [`seed`] fills: 7 hours (2026-10-05 00:00–07:00 UTC) of one A100 for `vision` and three for `nlp`
/// on two 8-card nodes, at 12.5 yuan per card-hour (see tests/api_access.rs for the figures by hand).
pub const SEED_MONTH: &str = "2026-10";
pub const SEED_FROM: &str = "2026-10-05T00:00:00Z";
pub const SEED_TO: &str = "2026-10-05T07:00:00Z";
pub const SEED_MODEL: &str = "NVIDIA A100-SXM4-80GB";

/// An 8-card node of `model` for a whole hour, every card offered (its allocatable).
pub fn full_node(node: &str, model: &str) -> CapacityRow {
    CapacityRow {
        node: node.into(),
        gpu_model: model.into(),
        cards: 8.0,
        card_seconds: 8.0 * 3600.0,
        offered_card_seconds: 8.0 * 3600.0,
        offered_source: OfferedSource::Allocatable,
    }
}

/// An hour of `cards` whole `model` cards held by `namespace/pod` on `node`, `util` of it effective, labelled `team`
/// where given: the usage row the statement tests store.
pub fn whole_cards(
    (namespace, pod): (&str, &str),
    team: Option<&str>,
    (model, node): (&str, &str),
    cards: f64,
    util: f64,
) -> UsageRow {
    UsageRow {
        key: ContainerKey { namespace: namespace.into(), pod: pod.into(), container: "main".into() },
        resource: "nvidia_com_gpu".into(),
        kind: "whole",
        gpu_model: model.into(),
        mig_profile: None,
        node: node.into(),
        units: cards,
        fraction: 1.0,
        memory_share: Some(1.0),
        gpu_seconds: cards * 3600.0,
        effective_gpu_seconds: cards * 3600.0 * util,
        unmetered_gpu_seconds: 0.0,
        bridged_gpu_seconds: 0.0,
        util_source: UtilSource::SmActive,
        peak_fb_used_mib: Some(8192.0),
        label_team: team.map(Into::into),
    }
}

/// One container of [`SEED_MODEL`] holding `cards` for an hour at 1 % utilization with 8 GiB in use.
pub fn row(namespace: &str, pod: &str, team: &str, cards: f64) -> UsageRow {
    UsageRow {
        key: ContainerKey { namespace: namespace.into(), pod: pod.into(), container: "main".into() },
        resource: "nvidia_com_gpu".into(),
        kind: "whole",
        gpu_model: SEED_MODEL.into(),
        mig_profile: None,
        node: if team == "vision" { "node-a".into() } else { "node-b".into() },
        units: cards,
        fraction: 1.0,
        memory_share: Some(1.0),
        gpu_seconds: cards * 3600.0,
        effective_gpu_seconds: cards * 36.0,
        unmetered_gpu_seconds: 0.0,
        bridged_gpu_seconds: 0.0,
        util_source: UtilSource::SmActive,
        peak_fb_used_mib: Some(8192.0),
        label_team: Some(team.into()),
    }
}

/// The month: usage and capacity of 7 hours, a rate, a mapping and a budget per team.
pub async fn seed(api: &TestApi) {
    for h in 0..7 {
        let out = HourOutput {
            interval_ms: Some(60_000),
            rows: vec![
                row("vision-train", "vision-idle-pod", "vision", 1.0),
                row("nlp-prod", "nlp-idle-pod", "nlp", 3.0),
            ],
            capacity: vec![full_node("node-a", SEED_MODEL), full_node("node-b", SEED_MODEL)],
            ..HourOutput::default()
        };
        let hour = SEED_FROM.parse::<chrono::DateTime<chrono::Utc>>().unwrap() + chrono::Duration::hours(h);
        let mut tx = api.pool.begin().await.unwrap();
        cardhour::db::clusters::upsert(&mut tx, "c1", "http://127.0.0.1:9").await.unwrap();
        cardhour::db::usage::replace_hour(&mut tx, "c1", hour, &out).await.unwrap();
        tx.commit().await.unwrap();
    }
    super::months::rates_and_mappings(api).await;
    let fin = Some(api.finance.as_str());
    for team in ["vision", "nlp"] {
        let b = json!({"amount": "5000"});
        assert_eq!(api.call(Method::PUT, &format!("/api/v1/budgets/{SEED_MONTH}/{team}"), fin, Some(b)).await.0, 200);
    }
}
