//! An in-process API server on a loopback port with one token per role, for the API tests.

use cardhour::api::{AppState, app};
use cardhour::auth::{Role, new_token};
use reqwest::Method;
use serde_json::Value;
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
        tokio::spawn(async move { axum::serve(listener, app(state)).await.unwrap() });
        let [admin, finance, viewer, lead]: [String; 4] = tokens.try_into().unwrap();
        TestApi { base, client: reqwest::Client::new(), pool, admin, finance, viewer, lead }
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
