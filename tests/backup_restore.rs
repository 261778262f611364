//! Backups (docs/database.md, "Backups"), with the real tools: `pg_dump --format=custom` of a database whose
//! closed months' raw rows were dropped by `cardhour retention`, `pg_restore` into a new empty database, and every
//! representation of every closed month (month and team statements as JSON, CSV exports, PDF statements) served
//! from the restored copy is byte for byte what the original served. The restored copy is a working database:
//! `cardhour migrate` finds it up to date, its partitions and retention horizon came with it, and it ingests.

use crate::common;

use std::process::Command;

use common::api::TestApi;
use common::months;
use common::{TestDb, run_cardhour_ok};
use sqlx::PgPool;

fn run(tool: &str, args: &[&str]) {
    let out = Command::new(tool).args(args).output().unwrap_or_else(|e| panic!("{tool}: {e} (postgresql-client)"));
    assert!(out.status.success(), "{tool} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_dump_serves_every_closed_bill_byte_for_byte() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    months::seed_four_months(&api).await;
    run_cardhour_ok(["retention", "--keep-months", "0", "--now", "2026-12-04T00:00:00Z"], &db.env());
    let mut closed = Vec::new();
    for m in ["2026-09", "2026-10"] {
        closed.push(months::representations(&api, m).await);
    }
    let rows_then = months::kept_digest(&pool).await;

    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("cardhour.dump");
    run("pg_dump", &["--format=custom", "--file", dump.to_str().unwrap(), "--dbname", &db.url]);
    let copy = TestDb::new().unwrap();
    run("pg_restore", &["--exit-on-error", "--no-owner", "--dbname", &copy.url, dump.to_str().unwrap()]);

    let restored = PgPool::connect(&copy.url).await.unwrap();
    assert_eq!(months::kept_digest(&restored).await, rows_then, "the same rows");
    let out = run_cardhour_ok(["migrate"], &copy.env());
    assert!(out.contains("up to date"), "{out}");
    // a new server on the copy (new tokens: the original's are in the copy too, but their secrets are not)
    let api2 = TestApi::start(restored.clone()).await;
    for (month, then) in ["2026-09", "2026-10"].iter().zip(&closed) {
        let now = months::representations(&api2, month).await;
        assert_eq!(now.len(), then.len());
        for ((path, who, body), (_, _, was)) in now.iter().zip(then) {
            assert!(body == was, "{who} {path}: the restored copy serves other bytes");
        }
    }
    // the horizon came along: September's raw rows cannot come back by an ingest; December still ingests
    let refused = months::store(&restored, "2026-09-20T00:00:00Z", 1, 1.0).await.unwrap_err();
    assert!(refused.to_string().contains("dropped by `cardhour retention`"), "{refused}");
    months::store(&restored, "2026-12-01T05:00:00Z", 1, 1.0).await.unwrap();
    restored.close().await;
    pool.close().await;
}
