//! Integrity enforced by the database (issue 10): the data version orders commits so caches never serve an
//! answer missing a committed write; closed months and the audit log refuse UPDATE, DELETE and TRUNCATE even from
//! the owner; a tampered closed statement is refused; the service's least-privilege role can do its work and
//! nothing more.

use crate::common;

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cardhour::billing::{Month, PolicyChoice};
use cardhour::ledger::LedgerError;
use cardhour::metering::{ContainerKey, HourOutput, UsageRow, UtilSource};
use cardhour::usecase::statements::StatementCache;
use common::api::TestApi;
use common::{TestDb, run_cardhour};
use reqwest::Method;
use rust_decimal::Decimal;
use rust_decimal_macros::dec;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::PgPool;

fn row(namespace: &str, team: &str, cards: f64) -> UsageRow {
    UsageRow {
        key: ContainerKey { namespace: namespace.into(), pod: format!("{namespace}-0"), container: "main".into() },
        resource: "nvidia_com_gpu".into(),
        kind: "whole",
        gpu_model: "NVIDIA A100-SXM4-80GB".into(),
        mig_profile: None,
        node: "n1".into(),
        units: cards,
        fraction: 1.0,
        memory_share: Some(1.0),
        gpu_seconds: cards * 3600.0,
        effective_gpu_seconds: cards * 1800.0,
        unmetered_gpu_seconds: 0.0,
        bridged_gpu_seconds: 0.0,
        util_source: UtilSource::SmActive,
        peak_fb_used_mib: None,
        label_team: Some(team.into()),
    }
}

fn hour_of(rows: Vec<UsageRow>) -> HourOutput {
    HourOutput { interval_ms: Some(60_000), rows, ..HourOutput::default() }
}

/// Writes one cluster-hour as the ingest does, in `tx` (not committed).
async fn write_hour(tx: &mut sqlx::PgConnection, cluster: &str, hour: &str, rows: Vec<UsageRow>) {
    cardhour::db::clusters::upsert(&mut *tx, cluster, "http://127.0.0.1:9").await.unwrap();
    cardhour::db::usage::lock_hour(&mut *tx, cluster, hour.parse().unwrap()).await.unwrap();
    cardhour::db::usage::replace_hour(&mut *tx, cluster, hour.parse().unwrap(), &hour_of(rows)).await.unwrap();
}

async fn store_hour(pool: &PgPool, cluster: &str, hour: &str, rows: Vec<UsageRow>) {
    let mut tx = pool.begin().await.unwrap();
    write_hour(&mut tx, cluster, hour, rows).await;
    tx.commit().await.unwrap();
}

/// (team, card-hours) of a `/bills/{month}` answer.
fn bill_hours(view: &Value) -> BTreeMap<String, Decimal> {
    view["teams"]
        .as_array()
        .unwrap_or_else(|| panic!("no teams in {view}"))
        .iter()
        .map(|t| {
            (t["team"].as_str().unwrap().to_string(), Decimal::from_str(t["card_hours"].as_str().unwrap()).unwrap())
        })
        .collect()
}

/// (team, GPU-hours) of a `/usage?group_by=team` answer.
fn usage_hours(usage: &Value) -> BTreeMap<String, f64> {
    usage
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {usage}"))
        .iter()
        .map(|r| (r["team"].as_str().unwrap().to_string(), r["gpu_hours"].as_f64().unwrap()))
        .collect()
}

async fn version(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT version FROM data_version").fetch_one(pool).await.unwrap()
}

const OCT_HOUR: &str = "2026-10-05T00:00:00Z";
const OCT_USAGE: &str = "/api/v1/usage?from=2026-10-05T00:00:00Z&to=2026-10-05T01:00:00Z&group_by=team";

/// The defect of issue 10 (2): ingest A starts, ingest B (another cluster) starts and commits, a request caches,
/// A commits. With the old stamp (max(ingested_at), A's being its earlier transaction start) the cache kept
/// serving B's data only; the data version moves at A's commit, so both caches recompute and show A's hours.
#[sqlx::test]
async fn a_commit_after_a_cached_read_invalidates_every_cache(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());

    // A: cluster a, 10.5 cards of nlp for the hour; written, not committed
    let mut a = pool.begin().await.unwrap();
    write_hour(&mut a, "a", OCT_HOUR, vec![row("nlp-a", "nlp", 10.5)]).await;
    // B: cluster b, 4.25 cards of vision; started after A, committed first
    let mut b = pool.begin().await.unwrap();
    write_hour(&mut b, "b", OCT_HOUR, vec![row("vision-b", "vision", 4.25)]).await;
    b.commit().await.unwrap();

    let (status, bills) = api.call(Method::GET, "/api/v1/bills/2026-10", fin, None).await;
    assert_eq!(status, 200, "{bills}");
    assert_eq!(bill_hours(&bills), BTreeMap::from([("vision".to_string(), dec!(4.25))]));
    let (status, usage) = api.call(Method::GET, OCT_USAGE, fin, None).await;
    assert_eq!(status, 200, "{usage}");
    assert_eq!(usage_hours(&usage), BTreeMap::from([("vision".to_string(), 4.25)]));
    // served from the caches now: the same answers again, nothing committed in between
    let before = version(&pool).await;
    assert_eq!(api.call(Method::GET, "/api/v1/bills/2026-10", fin, None).await.1, bills);

    a.commit().await.unwrap();
    assert!(version(&pool).await > before, "A's commit moves the data version");

    let (status, bills) = api.call(Method::GET, "/api/v1/bills/2026-10", fin, None).await;
    assert_eq!(status, 200, "{bills}");
    assert_eq!(
        bill_hours(&bills),
        BTreeMap::from([("nlp".to_string(), dec!(10.5)), ("vision".to_string(), dec!(4.25))]),
        "the bill cached before A committed must not be served after"
    );
    let (_, usage) = api.call(Method::GET, OCT_USAGE, fin, None).await;
    assert_eq!(usage_hours(&usage), BTreeMap::from([("nlp".to_string(), 10.5), ("vision".to_string(), 4.25)]));
}

/// One bump per writing transaction, at commit, whatever it wrote; a rolled-back one and a token's bookkeeping
/// do not move it.
#[sqlx::test]
async fn the_data_version_moves_once_per_committed_write(pool: PgPool) {
    let v0 = version(&pool).await;
    store_hour(&pool, "a", OCT_HOUR, vec![row("nlp-a", "nlp", 1.0), row("vision-a", "vision", 2.0)]).await;
    let v1 = version(&pool).await;
    assert_eq!(v1, v0 + 1, "one ingested hour: many statements and rows, one bump");

    let mut tx = pool.begin().await.unwrap();
    write_hour(&mut tx, "a", "2026-10-05T01:00:00Z", vec![row("nlp-a", "nlp", 1.0)]).await;
    tx.rollback().await.unwrap();
    assert_eq!(version(&pool).await, v1, "a rolled-back write does not move it");

    let mut tx = pool.begin().await.unwrap();
    let id = cardhour::db::tokens::insert(&mut tx, "t", "hash-1", cardhour::auth::Role::Viewer, &[]).await.unwrap();
    tx.commit().await.unwrap();
    sqlx::query("UPDATE api_tokens SET revoked_at = now() WHERE id = $1").bind(id).execute(&pool).await.unwrap();
    assert_eq!(version(&pool).await, v1, "tokens are not versioned");

    for sql in [
        "INSERT INTO teams (id, name) VALUES ('t1', 'T1')",
        "INSERT INTO rate_versions (gpu_model, effective_from, rate, created_by) VALUES ('A100-80GB', '2026-09-01', 3, 't')",
        "INSERT INTO gpu_model_aliases VALUES ('X', 'A100-80GB')",
        "UPDATE settings SET value = value WHERE key = 'bill_mode'",
        "INSERT INTO namespace_mappings (namespace, team_id, valid_from, created_by) VALUES ('nlp-a', 't1', '2026-10-01', 't')",
        "INSERT INTO budgets (team_id, month, amount, updated_by) VALUES ('t1', '2026-10', 100, 't')",
    ] {
        let v = version(&pool).await;
        sqlx::query(sql).execute(&pool).await.unwrap();
        assert_eq!(version(&pool).await, v + 1, "{sql}");
    }
    let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM data_version_pending").fetch_one(&pool).await.unwrap();
    assert_eq!(pending, 0, "no pending row outlives its transaction");
}

/// September 2026 with usage of two teams, priced, closed by finance through the API.
/// Closes September, which holds one stored hour: by override (the readiness rules are tests/close_readiness.rs').
async fn close_september(api: &TestApi) {
    let reason = json!({"mode": "showback", "unallocated": "kept_by_platform", "override": {"reason": "test fixture: a few hours of the month only"}});
    let (status, closed) =
        api.call(Method::POST, "/api/v1/bills/2026-09/close", Some(&api.finance), Some(reason)).await;
    assert_eq!(status, 201, "{closed}");
    assert_eq!(bill_hours(&closed), BTreeMap::from([("nlp".into(), dec!(3)), ("vision".into(), dec!(1.5))]));
}

async fn closed_september(pool: &PgPool) -> TestApi {
    let api = TestApi::start(pool.clone()).await;
    sqlx::query(
        "INSERT INTO rate_versions (gpu_model, effective_from, rate, created_by) VALUES ('A100-80GB', '2026-09-01', 12.5, 't')",
    )
    .execute(pool)
    .await
    .unwrap();
    store_hour(pool, "a", "2026-09-10T00:00:00Z", vec![row("nlp-a", "nlp", 3.0), row("vision-a", "vision", 1.5)]).await;
    close_september(&api).await;
    api
}

/// Everything stored about closed months and the audit log, as text.
async fn immutable_state(pool: &PgPool) -> (Vec<String>, Vec<String>) {
    let months = sqlx::query_scalar(
        "SELECT month || '|' || closed_at || '|' || closed_by || '|' || content_hash || '|' || snapshot::text
         FROM closed_months ORDER BY month",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let audit = sqlx::query_scalar(
        "SELECT id || '|' || at || '|' || actor || '|' || action || '|' || entity || '|' || coalesce(after::text, '')
         FROM audit_log ORDER BY id",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    (months, audit)
}

#[sqlx::test]
async fn direct_sql_cannot_change_a_closed_month_or_the_audit_log(pool: PgPool) {
    let _api = closed_september(&pool).await;
    let before = immutable_state(&pool).await;
    assert_eq!(before.0.len(), 1, "September is closed");
    assert!(before.1.iter().any(|a| a.contains("month.close")), "the close is audited: {:?}", before.1);

    // as the owner of the tables (here even a superuser), straight SQL
    for sql in [
        "UPDATE closed_months SET closed_by = 'mallory'",
        "UPDATE closed_months SET snapshot = '{}' WHERE month = '2026-09'",
        "DELETE FROM closed_months",
        "TRUNCATE closed_months",
        "UPDATE audit_log SET actor = 'mallory'",
        "DELETE FROM audit_log WHERE action = 'month.close'",
        "TRUNCATE audit_log",
        "INSERT INTO closed_months (month, closed_by, snapshot) VALUES ('2026-09', 'm', '{}')
         ON CONFLICT (month) DO UPDATE SET snapshot = EXCLUDED.snapshot",
    ] {
        let err = sqlx::query(sql).execute(&pool).await.expect_err(sql);
        let db = err.as_database_error().unwrap_or_else(|| panic!("{sql}: {err}"));
        assert!(db.message().contains("is immutable"), "{sql}: {}", db.message());
        assert_eq!(db.code().as_deref(), Some("23001"), "{sql}");
    }
    assert_eq!(immutable_state(&pool).await, before, "nothing changed");
}

#[sqlx::test]
async fn a_tampered_closed_statement_is_refused(pool: PgPool) {
    let api = closed_september(&pool).await;
    let fin = Some(api.finance.as_str());
    let sept = Month::new(2026, 9).unwrap();

    // the stored hash is sha256 of the snapshot's text, as computed here independently
    let (text, stored): (String, String) =
        sqlx::query_as("SELECT snapshot::text, content_hash FROM closed_months WHERE month = '2026-09'")
            .fetch_one(&pool)
            .await
            .unwrap();
    let hex: String = Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(stored, hex);
    let st = cardhour::usecase::ledger::statement(&pool, sept, PolicyChoice::NONE).await.unwrap();
    assert_eq!(st.content_hash.as_deref(), Some(hex.as_str()));
    let served = api.call(Method::GET, "/api/v1/bills/2026-09", fin, None).await;
    assert_eq!(served.0, 200);

    // a superuser bypassing the triggers cuts the first team's total to one fen in the snapshot
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("SET session_replication_role = replica").execute(&mut *conn).await.unwrap();
    let changed = sqlx::query(
        "UPDATE closed_months SET snapshot = jsonb_set(snapshot, '{bills,teams,0,total}', '\"0.01\"')
         WHERE month = '2026-09'",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    assert_eq!(changed.rows_affected(), 1);
    sqlx::query("RESET session_replication_role").execute(&mut *conn).await.unwrap();
    drop(conn);
    let tampered: String =
        sqlx::query_scalar("SELECT snapshot::text FROM closed_months").fetch_one(&pool).await.unwrap();
    assert!(tampered.contains("\"total\": \"0.01\"") && tampered != text, "the snapshot was altered: {tampered}");

    // read from the database: refused
    match cardhour::usecase::ledger::statement(&pool, sept, PolicyChoice::NONE).await {
        Err(LedgerError::Integrity { month, stored: s, actual }) => {
            assert_eq!((month.as_str(), s.as_str()), ("2026-09", hex.as_str()));
            assert_ne!(actual, hex);
        }
        other => panic!("a tampered snapshot must be refused, got {other:?}"),
    }
    // a fresh server (nothing cached): 500 without details, for the month, its team statements and exports, and
    // for the next open month, whose restatements read it
    let fresh = TestApi::start(pool.clone()).await;
    for path in [
        "/api/v1/bills/2026-09",
        "/api/v1/bills/2026-09/teams/nlp",
        "/api/v1/exports/2026-09/bills.csv",
        "/api/v1/bills/2026-10",
    ] {
        let (status, body) = fresh.call(Method::GET, path, Some(&fresh.finance), None).await;
        assert_eq!(status, 500, "{path}: {body}");
        let text = body.to_string();
        assert!(!text.contains("hash") && !text.contains(&hex) && !text.contains("0.01"), "{path}: {text}");
    }
    // the server that read it before the tampering does not serve it from memory either once the alteration was
    // found in this process (issue 27): never the altered figures, nor an answer vouching for a month that fails
    let (status, again) = api.call(Method::GET, "/api/v1/bills/2026-09", fin, None).await;
    assert_eq!(status, 500, "{again}");
    assert!(!again.to_string().contains("0.01") && !again.to_string().contains(&hex), "{again}");
    assert_eq!(bill_hours(&served.1)["nlp"], dec!(3));
}

/// A closed statement is read once and then served from memory under its content hash, whatever else changes.
#[sqlx::test]
async fn a_closed_statement_is_read_once_and_kept_by_its_hash(pool: PgPool) {
    let _api = closed_september(&pool).await;
    let cache = StatementCache::default();
    // the services an open month's statement is computed with (its unit cost of inference prices serving pods)
    let services = cardhour::usecase::Services::new(pool.clone(), chrono_tz::Asia::Shanghai);
    let sept = Month::new(2026, 9).unwrap();
    let first = cache.statement(&services, sept, PolicyChoice::NONE).await.unwrap();
    let hash: String = sqlx::query_scalar("SELECT content_hash FROM closed_months").fetch_one(&pool).await.unwrap();
    assert_eq!(first.content_hash.as_deref(), Some(hash.as_str()));
    assert_eq!(first.team_ids(), ["nlp", "vision"]);

    // later data: a re-ingest of the closed month's hour and a new team move the data version
    let v = version(&pool).await;
    store_hour(&pool, "a", "2026-09-10T00:00:00Z", vec![row("nlp-a", "nlp", 30.0)]).await;
    sqlx::query("INSERT INTO teams (id, name) VALUES ('t2', 'T2')").execute(&pool).await.unwrap();
    assert!(version(&pool).await > v);
    let again = cache.statement(&services, sept, PolicyChoice::NONE).await.unwrap();
    assert!(Arc::ptr_eq(&first, &again), "served from memory, not read or computed again");
    // its own policy asked for is the same statement; another is refused (a closed month has no other draft)
    let frozen = PolicyChoice::exactly(first.bills.policy);
    assert!(Arc::ptr_eq(&first, &cache.statement(&services, sept, frozen).await.unwrap()));
    let other = PolicyChoice { mode: Some(cardhour::billing::BillMode::Chargeback), ..PolicyChoice::NONE };
    match cache.statement(&services, sept, other).await {
        // the ledger's policy mismatch, as the use cases' conflict naming the field
        Err(cardhour::usecase::Error::Conflict { field: Some(f), .. }) if f == "mode" => {}
        other => panic!("expected a policy mismatch, got {other:?}"),
    }

    // the open month after it is recomputed under the new version and carries the restatement
    let oct = cache.statement(&services, Month::new(2026, 10).unwrap(), PolicyChoice::NONE).await.unwrap();
    assert_eq!(oct.content_hash, None);
    let delta: Decimal = oct.restatements_of("nlp").map(|r| r.card_hours_delta).sum();
    assert_eq!(delta, dec!(27));
}

// --- the service's least-privilege role ---------------------------------------------------------------------------

/// A role created for one test, dropped (with its privileges) at the end.
struct TestRole {
    name: String,
    db_url: String,
}

impl TestRole {
    fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        Self {
            name: format!("cardhour_app_t{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)),
            db_url: String::new(),
        }
    }

    /// `db_url` with this role as the user (the server trusts loopback connections).
    fn url(&self) -> String {
        let mut u = url::Url::parse(&self.db_url).unwrap();
        u.set_username(&self.name).unwrap();
        u.set_password(None).unwrap();
        u.to_string()
    }
}

impl Drop for TestRole {
    fn drop(&mut self) {
        let psql = |url: &str, sql: &str| {
            let _ = std::process::Command::new("psql").args(["-X", "-q", "-d", url, "-c", sql]).output();
        };
        psql(&self.db_url, &format!("DROP OWNED BY {}", self.name));
        let mut admin = url::Url::parse(&self.db_url).unwrap();
        admin.set_path("/postgres");
        psql(admin.as_str(), &format!("DROP ROLE IF EXISTS {}", self.name));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_role_works_but_cannot_alter_history() {
    let db = TestDb::migrated().unwrap();
    let mut role = TestRole::new();
    role.db_url = db.url.clone();

    // refused: the owner itself, a name that is not a plain identifier
    for (bad, why) in [("postgres", "owner"), ("x\"; DROP TABLE teams; --", "plain role name")] {
        let out = run_cardhour(["migrate", "--grant-app-role", bad], &db.env());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(why), "{bad}: {err}");
    }
    for _ in 0..2 {
        // twice: idempotent
        let out = run_cardhour(["migrate", "--grant-app-role", &role.name], &db.env());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    let app = cardhour::db::connect(&role.url(), 4).await.unwrap();
    let who: String = sqlx::query_scalar("SELECT current_user::text").fetch_one(&app).await.unwrap();
    assert_eq!(who, role.name);
    let owns: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_class WHERE relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)",
    )
    .fetch_one(&app)
    .await
    .unwrap();
    assert_eq!(owns, 0);

    // the ingest's write path, the API's writes (teams, tokens, a close) and reads, as the service role
    store_hour(&app, "a", "2026-09-10T00:00:00Z", vec![row("nlp-a", "nlp", 3.0), row("vision-a", "vision", 1.5)]).await;
    let api = TestApi::start(app.clone()).await;
    let (status, body) =
        api.call(Method::PUT, "/api/v1/teams/speech", Some(&api.admin), Some(json!({"name": "语音组"}))).await;
    assert!(status == 200 || status == 201, "{status} {body}");
    close_september(&api).await;
    let (status, view) = api.call(Method::GET, "/api/v1/bills/2026-09/teams/nlp", Some(&api.finance), None).await;
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["card_hours"].as_str().map(|h| Decimal::from_str(h).unwrap()), Some(dec!(3)), "{view}");

    // the CLI's read path as the service role
    let out = run_cardhour(
        ["usage", "--from", "2026-09-10T00:00:00Z", "--to", "2026-09-10T01:00:00Z", "--format", "json"],
        &[("DATABASE_URL", &role.url())],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let usage: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(usage_hours(&usage), BTreeMap::from([("nlp".to_string(), 3.0), ("vision".to_string(), 1.5)]));

    let audit_before: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log").fetch_one(&app).await.unwrap();
    assert!(audit_before >= 2, "the team change and the close are audited");
    for sql in [
        "UPDATE audit_log SET actor = 'mallory'",
        "DELETE FROM audit_log",
        "TRUNCATE audit_log",
        "UPDATE closed_months SET closed_by = 'mallory'",
        "DELETE FROM closed_months",
        "TRUNCATE closed_months",
        "TRUNCATE gpu_usage_hourly",
        "ALTER TABLE audit_log DISABLE TRIGGER immutable",
        "ALTER TABLE closed_months DISABLE TRIGGER ALL",
        "DROP TRIGGER immutable ON audit_log",
        "SET session_replication_role = replica",
        "UPDATE data_version SET version = 1",
        "UPDATE settings SET value = 'UTC'",
        "CREATE TABLE mine (x int)",
        // the close event as signed and sent, and the record of its POSTs
        "UPDATE close_events SET payload = '{}'",
        "DELETE FROM close_events",
        "UPDATE close_delivery_attempts SET status = 200",
        "DELETE FROM close_delivery_attempts",
    ] {
        let err = sqlx::query(sql).execute(&app).await.expect_err(sql);
        let msg = err.as_database_error().map(|d| d.message().to_string()).unwrap_or_else(|| err.to_string());
        assert!(msg.contains("permission denied") || msg.contains("must be owner"), "{sql}: {msg}");
    }
    let audit_after: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log").fetch_one(&app).await.unwrap();
    assert_eq!(audit_after, audit_before);
    let closed_by: String = sqlx::query_scalar("SELECT closed_by FROM closed_months").fetch_one(&app).await.unwrap();
    assert_ne!(closed_by, "mallory");
    app.close().await;
}
