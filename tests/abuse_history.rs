//! History nobody can forge (issue 27, item 6), on a real database laid out as docs/database.md says — tables owned
//! by a role that is not a superuser, the service running as a role of its own, the DDL guard installed once by a
//! superuser: neither role can INSERT a closed month (only the close can, through `close_month()`, with its audit
//! entry), neither can change the structure (`ALTER TABLE … RENAME`, `DISABLE TRIGGER`, …) outside `cardhour
//! migrate`, which still migrates and grants; the ingest's partitions are still made. And a closed month cached
//! before it was altered behind its triggers is not served once the alteration is found.

use crate::common;

use std::sync::atomic::{AtomicU32, Ordering};

use common::api::TestApi;
use common::{months, run_cardhour};
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

/// A database owned by a login role that is not a superuser, and a second login role for the service; all dropped
/// at the end.
struct Layout {
    owner: String,
    service: String,
    db: String,
    admin_url: url::Url,
}

impl Layout {
    fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = format!("{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let base = std::env::var("DATABASE_URL").unwrap_or_else(|_| common::DEFAULT_DATABASE_URL.to_string());
        let mut admin_url = url::Url::parse(&base).unwrap();
        admin_url.set_path("/postgres");
        let l = Self {
            owner: format!("cardhour_t_owner_{n}"),
            service: format!("cardhour_t_app_{n}"),
            db: format!("cardhour_t_hist_{n}"),
            admin_url,
        };
        l.admin(&format!("CREATE ROLE {} LOGIN", l.owner));
        l.admin(&format!("CREATE ROLE {} LOGIN", l.service));
        l.admin(&format!("CREATE DATABASE {} OWNER {}", l.db, l.owner));
        l
    }

    fn url(&self, user: &str) -> String {
        let mut u = self.admin_url.clone();
        u.set_path(&format!("/{}", self.db));
        u.set_username(user).unwrap();
        u.to_string()
    }

    /// Runs SQL as the superuser on `postgres` (or on this database).
    fn admin(&self, sql: &str) -> String {
        self.psql(self.admin_url.as_str(), sql)
    }

    fn superuser(&self, sql: &str) -> String {
        let mut u = self.admin_url.clone();
        u.set_path(&format!("/{}", self.db));
        self.psql(u.as_str(), sql)
    }

    fn psql(&self, url: &str, sql: &str) -> String {
        let out = std::process::Command::new("psql")
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
            .output()
            .unwrap();
        assert!(out.status.success(), "{sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        let _ = std::process::Command::new("psql")
            .args(["-X", "-q", "-d", self.admin_url.as_str()])
            .args(["-c", &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.db)])
            .args(["-c", &format!("DROP ROLE IF EXISTS {}", self.service)])
            .args(["-c", &format!("DROP ROLE IF EXISTS {}", self.owner)])
            .output();
    }
}

/// The SQLSTATE and message of a statement that must fail.
async fn refused(pool: &PgPool, sql: &str) -> (String, String) {
    let err = sqlx::query(sql).execute(pool).await.expect_err(sql);
    let db = err.as_database_error().unwrap_or_else(|| panic!("{sql}: {err}"));
    (db.code().map(|c| c.to_string()).unwrap_or_default(), db.message().to_string())
}

const FORGE: &str = "INSERT INTO closed_months (month, closed_by, snapshot) VALUES ('2026-08', 'mallory', '{}')";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neither_the_owner_nor_the_service_can_forge_a_close_or_change_the_structure() {
    let l = Layout::new();
    let owner_url = l.url(&l.owner);
    // migrating as the owner: the guard needs a superuser once, and migrate says so
    let out = run_cardhour(["migrate", "--grant-app-role", &l.service], &[("DATABASE_URL", &owner_url)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("DDL guard is not installed") && err.contains("CREATE EVENT TRIGGER cardhour_ddl_guard"),
        "{err}"
    );
    // the DBA's one step (docs/database.md); then migrate and grant again, as every release does
    l.superuser("CREATE EVENT TRIGGER cardhour_ddl_guard ON ddl_command_start EXECUTE FUNCTION ddl_guard()");
    let out = run_cardhour(["migrate", "--grant-app-role", &l.service], &[("DATABASE_URL", &owner_url)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("DDL guard"), "migrate still migrates and grants: {err}");

    let owner = cardhour::db::connect(&owner_url, 2).await.unwrap();
    let service = cardhour::db::connect(&l.url(&l.service), 16).await.unwrap();
    for (who, pool) in [("owner", &owner), ("service", &service)] {
        let (code, message) = refused(pool, FORGE).await;
        assert_eq!(code, "42501", "{who}: {message}");
        assert!(message.contains("permission denied"), "{who}: {message}");
        // the same statement from a DO block (not a function's own frame) is no close either
        let spoof = "DO $$ DECLARE p_month text := '2026-08'; p_closed_by text := 'x'; p_snapshot jsonb := '{}';
            BEGIN INSERT INTO closed_months (month, closed_by, snapshot) VALUES (p_month, p_closed_by, p_snapshot)
            ON CONFLICT (month) DO NOTHING; END $$";
        assert_eq!(refused(pool, spoof).await.0, "42501", "{who}");
        for ddl in [
            "ALTER TABLE closed_months RENAME TO closed_months_old",
            "ALTER TABLE closed_months DISABLE TRIGGER door",
            "ALTER TABLE audit_log DISABLE TRIGGER immutable",
            "ALTER TABLE closed_months DISABLE TRIGGER USER",
            "DROP TRIGGER door ON closed_months",
            "CREATE OR REPLACE FUNCTION closed_month_door() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END'",
            "DROP FUNCTION ddl_guard() CASCADE",
            "GRANT INSERT ON audit_log TO PUBLIC",
            "CREATE TABLE scratch (x int)",
            "ALTER EVENT TRIGGER cardhour_ddl_guard DISABLE",
            "DROP EVENT TRIGGER cardhour_ddl_guard",
            "SET session_replication_role = replica",
        ] {
            let (code, message) = refused(pool, ddl).await;
            assert!(code == "42501" || message.contains("must be owner"), "{who}: {ddl}: {code} {message}");
        }
    }
    for sql in
        ["SELECT count(*) FROM closed_months", "SELECT count(*) FROM pg_class WHERE relname = 'closed_months_old'"]
    {
        assert_eq!(sqlx::query_scalar::<_, i64>(sql).fetch_one(&owner).await.unwrap(), 0, "{sql}");
    }
    // no role but the service (and the owner) may call the close
    let grantees: String = l.superuser(
        "SELECT string_agg(coalesce(r.rolname, 'PUBLIC'), ',') FROM pg_proc p
             CROSS JOIN LATERAL aclexplode(p.proacl) a LEFT JOIN pg_roles r ON r.oid = a.grantee
         WHERE p.proname = 'close_month' AND a.privilege_type = 'EXECUTE'",
    );
    assert!(!grantees.contains("PUBLIC") && grantees.contains(&l.service), "{grantees}");

    // the service does its work: the ingest makes its month's partitions (DDL inside the schema's own function),
    // the API changes teams and closes a month through the door, with its audit entry
    months::store(&service, "2026-09-10T00:00:00Z", 3, 2.0).await.unwrap();
    let api = TestApi::start(service.clone()).await;
    months::rates_and_mappings(&api).await;
    months::close(&api, "2026-09").await;
    let (status, view) = api.call(Method::GET, "/api/v1/bills/2026-09", Some(&api.finance), None).await;
    assert_eq!((status, view["status"].as_str()), (200, Some("closed")), "{view}");
    let closes: Vec<(String, String)> =
        sqlx::query_as("SELECT action, entity FROM audit_log WHERE action LIKE 'month.close%'")
            .fetch_all(&owner)
            .await
            .unwrap();
    assert_eq!(closes, [("month.close_override".to_string(), "month:2026-09".to_string())]);
    // the door itself refuses a month that has not ended
    let (code, message) = refused(
        &service,
        "SELECT close_month(to_char(now() AT TIME ZONE 'Asia/Shanghai', 'YYYY-MM'), 'x', '{}', 'month.close', '{}')",
    )
    .await;
    assert!(code == "23514" && message.contains("has not ended"), "{code} {message}");

    // retention, as the owner: its drops are the schema's own function's (dry run and for real)
    for args in [&["retention", "--keep-months", "0", "--dry-run"][..], &["retention", "--keep-months", "0"]] {
        let out = run_cardhour(args, &[("DATABASE_URL", &owner_url)]);
        assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    api.pool.close().await;
    owner.close().await;
}

/// A closed month's total as served.
fn total(view: &Value) -> String {
    view["teams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["total"].as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[sqlx::test]
async fn a_cached_closed_month_is_not_served_once_its_alteration_is_found(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let fin = Some(api.finance.as_str());
    months::rates_and_mappings(&api).await;
    months::store(&pool, "2026-09-10T00:00:00Z", 3, 2.0).await.unwrap();
    months::store(&pool, "2026-10-05T00:00:00Z", 3, 3.0).await.unwrap();
    months::close(&api, "2026-09").await;
    months::close(&api, "2026-10").await;
    let (status, sept) = api.call(Method::GET, "/api/v1/bills/2026-09", fin, None).await;
    assert_eq!(status, 200, "{sept}");
    let (status, oct) = api.call(Method::GET, "/api/v1/bills/2026-10", fin, None).await;
    assert_eq!(status, 200, "{oct}");

    // October altered by a superuser skipping every trigger (the data version does not move): once the integrity
    // check of this process finds it (here the ledger's read, as any request reading the snapshot does), logs it
    // and refuses, this server does not serve October from memory either
    let version =
        || async { sqlx::query_scalar::<_, i64>("SELECT version FROM data_version").fetch_one(&pool).await.unwrap() };
    let before = version().await;
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("SET session_replication_role = replica").execute(&mut *conn).await.unwrap();
    sqlx::query("UPDATE closed_months SET snapshot = jsonb_set(snapshot, '{bills,teams,0,total}', '\"0.01\"') WHERE month = '2026-10'")
        .execute(&mut *conn)
        .await
        .unwrap();
    sqlx::query("RESET session_replication_role").execute(&mut *conn).await.unwrap();
    drop(conn);
    let oct_month = cardhour::billing::Month::new(2026, 10).unwrap();
    let found = cardhour::usecase::ledger::statement(&pool, oct_month, cardhour::billing::PolicyChoice::NONE).await;
    assert!(matches!(found, Err(cardhour::ledger::LedgerError::Integrity { .. })), "{found:?}");
    assert_eq!(version().await, before, "nothing told the cache by the data version");
    for path in ["/api/v1/bills/2026-10", "/api/v1/bills/2026-10/teams/nlp", "/api/v1/exports/2026-10/bills.csv"] {
        let (status, body) = api.call(Method::GET, path, fin, None).await;
        assert_eq!(status, 500, "{path}: {body}");
        assert!(!body.to_string().contains("0.01"), "{path}: {body}");
    }

    // September altered by a superuser who disables its immutability trigger (the data version moves): the next
    // request finds it at once, whatever was cached
    let (status, again) = api.call(Method::GET, "/api/v1/bills/2026-09", fin, None).await;
    assert_eq!((status, total(&again)), (200, total(&sept)), "intact, served from memory");
    for sql in [
        "ALTER TABLE closed_months DISABLE TRIGGER immutable",
        "UPDATE closed_months SET snapshot = jsonb_set(snapshot, '{bills,teams,0,total}', '\"0.02\"') WHERE month = '2026-09'",
        "ALTER TABLE closed_months ENABLE TRIGGER immutable",
    ] {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    let (status, body) = api.call(Method::GET, "/api/v1/bills/2026-09", fin, None).await;
    assert_eq!(status, 500, "{body}");
    assert_eq!(body["code"], "internal", "{body}");
    assert!(!json!(body).to_string().contains("0.02"));
}
