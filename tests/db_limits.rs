//! `--statement-timeout` (`CARDHOUR_STATEMENT_TIMEOUT`): PostgreSQL itself cancels a statement that runs longer,
//! so no request or report can hold the database for minutes.

use crate::common;

use std::time::{Duration, Instant};

use common::{TestDb, run_cardhour};

#[tokio::test]
async fn a_statement_past_the_timeout_is_cancelled_by_the_server() {
    let db = TestDb::new().unwrap();
    let pool = cardhour::db::connect_bounded(&db.url, 1, Some(Duration::from_millis(300))).await.unwrap();
    let start = Instant::now();
    let err = sqlx::query("SELECT pg_sleep(5)").execute(&pool).await.expect_err("cancelled");
    let code = err.as_database_error().and_then(|e| e.code()).map(|c| c.to_string());
    assert_eq!(code.as_deref(), Some("57014"), "query_canceled: {err}");
    assert!(start.elapsed() < Duration::from_secs(3), "cancelled after {:?}", start.elapsed());
    // the limit is per statement: the connection goes on serving quick ones
    let one: i32 = sqlx::query_scalar("SELECT 1").fetch_one(&pool).await.unwrap();
    assert_eq!(one, 1);
    let shown: String = sqlx::query_scalar("SHOW statement_timeout").fetch_one(&pool).await.unwrap();
    assert_eq!(shown, "300ms");
    // without a limit (migrations) nothing is set
    let unbounded = cardhour::db::connect(&db.url, 1).await.unwrap();
    let shown: String = sqlx::query_scalar("SHOW statement_timeout").fetch_one(&unbounded).await.unwrap();
    assert_eq!(shown, "0");
}

#[test]
fn a_bad_timeout_is_a_clear_cli_error() {
    let db = TestDb::migrated().unwrap();
    let out = run_cardhour(
        ["usage", "--from", "2026-11-01T00:00:00Z", "--to", "2026-11-02T00:00:00Z", "--statement-timeout", "soon"],
        &db.env(),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--statement-timeout") && err.contains("not a duration"), "{err}");
}
