//! CMDB imports of namespace → team mappings on a real Postgres, API and CLI: GBK and UTF-8 (with or without BOM)
//! files, dates in the common formats, idempotent re-imports (`unchanged`, no 409, no audit entry), updates, a dry
//! run that writes nothing, and refused rows reported by line and field.

use crate::common;

use common::api::{TestApi, write_counts};
use common::{TestDb, run_cardhour};
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

/// POSTs `body` (bytes, any encoding) to the import; status and JSON.
async fn import(api: &TestApi, query: &str, body: Vec<u8>) -> (u16, Value) {
    api.import_mappings(query, body).await
}

fn actions(report: &Value) -> Vec<(u64, String)> {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["line"].as_u64().unwrap(), r["action"].as_str().unwrap().into()))
        .collect()
}

async fn audit_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM audit_log").fetch_one(pool).await.unwrap()
}

async fn mappings(pool: &PgPool) -> Vec<(String, String, String)> {
    sqlx::query_as("SELECT namespace, team_id, valid_from::text FROM namespace_mappings ORDER BY namespace, valid_from")
        .fetch_all(pool)
        .await
        .unwrap()
}

const FILE: &str = "namespace,team,team_name,owner,valid_from\n\
                    recsys,rec,推荐算法组,张三,2026/11/1\n\
                    rec-dev,rec,推荐算法组,张三,20261101\n\
                    vision-train,vision,,,2026-11-01\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cmdb_file_imports_once_whatever_its_encoding() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    let (gbk, _, unmappable) = encoding_rs::GBK.encode(FILE);
    assert!(!unmappable && std::str::from_utf8(&gbk).is_err(), "a real GBK file, not UTF-8");

    // a dry run reports what would happen and writes nothing
    let before = write_counts(&pool).await;
    let (status, dry) = import(&api, "?dry_run=true", gbk.to_vec()).await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(dry["dry_run"], true);
    assert_eq!(actions(&dry), [(2, "insert".into()), (3, "insert".into()), (4, "insert".into())]);
    assert_eq!((dry["inserted"].as_u64(), dry["teams_created"].as_u64()), (Some(3), Some(1)));
    assert_eq!(write_counts(&pool).await, before, "a dry run writes nothing");

    // the GBK file itself: Chinese names intact, every date format read
    let (status, done) = import(&api, "", gbk.to_vec()).await;
    assert_eq!(status, 201, "{done}");
    assert_eq!(actions(&done), actions(&dry), "the dry run said what the import did");
    let (_, team) = api.call(Method::GET, "/api/v1/teams/rec", Some(&api.viewer), None).await;
    assert_eq!(team, json!({"id": "rec", "name": "推荐算法组", "owner": "张三"}));
    let stored = mappings(&pool).await;
    let nov1 = "2026-11-01".to_string();
    assert_eq!(
        stored,
        [
            ("rec-dev".into(), "rec".into(), nov1.clone()),
            ("recsys".into(), "rec".into(), nov1.clone()),
            ("vision-train".into(), "vision".into(), nov1.clone())
        ]
    );
    let audited = audit_count(&pool).await;

    // the same file again, now UTF-8 with a BOM, then without: unchanged, 200, nothing written or audited
    let bom = [b"\xef\xbb\xbf".as_slice(), FILE.as_bytes()].concat();
    for body in [bom, FILE.as_bytes().to_vec(), gbk.to_vec()] {
        let counts = write_counts(&pool).await;
        let (status, again) = import(&api, "", body).await;
        assert_eq!(status, 200, "{again}");
        assert_eq!(actions(&again), [(2, "unchanged".into()), (3, "unchanged".into()), (4, "unchanged".into())]);
        assert_eq!((again["unchanged"].as_u64(), again["inserted"].as_u64()), (Some(3), Some(0)));
        assert_eq!(write_counts(&pool).await, counts);
        assert_eq!(audit_count(&pool).await, audited, "no audit noise");
    }

    // one row moved to another team, one new: an update and an insert, both audited
    let changed = "namespace,team,valid_from\nrecsys,nlp,2026-11-01\nrec-dev,rec,2026-11-01\nnlp-prod,nlp,2026/12/01\n";
    let (status, report) = import(&api, "?dry_run=true", changed.into()).await;
    assert_eq!(status, 200);
    assert_eq!(actions(&report), [(2, "update".into()), (3, "unchanged".into()), (4, "insert".into())]);
    assert_eq!(report["rows"][0]["previous_team"], "rec");
    let (status, report) = import(&api, "", changed.into()).await;
    assert_eq!(status, 201, "{report}");
    assert_eq!((report["updated"].as_u64(), report["inserted"].as_u64()), (Some(1), Some(1)));
    assert_eq!(audit_count(&pool).await, audited + 2);
    let recsys: String = sqlx::query_scalar("SELECT team_id FROM namespace_mappings WHERE namespace = 'recsys'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(recsys, "nlp");
    let actions_logged: Vec<String> =
        sqlx::query_scalar("SELECT action FROM audit_log ORDER BY id DESC LIMIT 2").fetch_all(&pool).await.unwrap();
    assert_eq!(actions_logged, ["mapping.create", "mapping.update"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_rows_are_listed_by_line_and_field_and_nothing_is_written() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    let before = write_counts(&pool).await;
    let bad = "namespace,team,valid_from\nok-ns,vision,2026-11-01\nb,Bad Team,2026/11/01\nc,nlp,2026/13/01\n\
               d,nlp,2026-11-01\nd,vision,2026-11-01\n";
    let (status, err) = import(&api, "", bad.into()).await;
    assert_eq!(status, 422, "{err}");
    let fields: Vec<&str> = err["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap()).collect();
    assert_eq!(fields, ["row 3: team", "row 4: valid_from", "row 6: team"]);
    assert_eq!(err["field"], "row 3: team");
    assert_eq!(write_counts(&pool).await, before, "all rows or none");
    // bytes that are neither UTF-8 nor GB18030
    let (status, err) = import(&api, "", b"namespace,team,valid_from\n\x80\xff,x,2026-11-01\n".to_vec()).await;
    assert_eq!((status, err["field"].as_str()), (422, Some("body")), "{err}");

    // the CLI: the same rules, its errors as JSON on standard error, and its dry run
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cmdb.csv");
    std::fs::write(&path, bad).unwrap();
    let out = run_cardhour(["mappings", "import", path.to_str().unwrap()], &db.env());
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let json_line = stderr.lines().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("{stderr}"));
    let errors: Value = serde_json::from_str(json_line).unwrap();
    assert_eq!(errors["errors"][0]["field"], "row 3: team");
    assert_eq!(write_counts(&pool).await, before);
    let (gbk, _, _) = encoding_rs::GBK.encode(FILE);
    std::fs::write(&path, &gbk).unwrap();
    let out = run_cardhour(["mappings", "import", path.to_str().unwrap(), "--dry-run"], &db.env());
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["inserted"], 3);
    assert_eq!(write_counts(&pool).await, before, "a dry run writes nothing");
    let out = run_cardhour(["mappings", "import", path.to_str().unwrap()], &db.env());
    assert!(out.status.success(), "{out:?}");
    let again = run_cardhour(["mappings", "import", path.to_str().unwrap()], &db.env());
    let report: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!((report["unchanged"].as_u64(), report["inserted"].as_u64()), (Some(3), Some(0)));
}
