//! CSV imports of queue → team mappings (issue 29) on a real Postgres, through the API, the command line and the
//! admin page: GBK and UTF-8 (with or without BOM) files, dates in the common CMDB formats, idempotent re-imports
//! (`unchanged`, nothing written or audited), an update audited as `queue_mapping.update`, a dry run and a
//! preview that write nothing, refused files reported by `row N: field` with nothing written, and the mapping
//! taking effect in the month's quota report.

use crate::common;

use common::api::TestApi;
use common::files::visible;
use common::portal::{Answer, PASSWORD, TestPortal, hidden, visitor};
use common::{TestDb, run_cardhour};
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

/// POSTs `body` (bytes, any encoding) to the import as `token`; status and JSON.
async fn import_as(api: &TestApi, token: &str, query: &str, body: Vec<u8>) -> (u16, Value) {
    let resp = api
        .client
        .post(format!("{}/api/v1/queue-mappings/import{query}", api.base))
        .bearer_auth(token)
        .header("content-type", "text/csv")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn import(api: &TestApi, query: &str, body: Vec<u8>) -> (u16, Value) {
    import_as(api, &api.finance, query, body).await
}

/// Each row's (line, action) of a report.
fn actions(report: &Value) -> Vec<(u64, String)> {
    report["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("no rows: {report}"))
        .iter()
        .map(|r| (r["line"].as_u64().unwrap(), r["action"].as_str().unwrap().into()))
        .collect()
}

/// The refused fields of a 422, in order.
fn fields(err: &Value) -> Vec<String> {
    err["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no errors: {err}"))
        .iter()
        .map(|e| e["field"].as_str().unwrap().to_string())
        .collect()
}

/// The stored queue mappings as (cluster, kind, queue, team, valid_from), and the audit log's size: equal before
/// and after means nothing was written.
async fn stored(pool: &PgPool) -> (Vec<(Option<String>, String, String, String, String)>, i64) {
    let rows = sqlx::query_as(
        "SELECT cluster, queue_kind, queue, team_id, valid_from::text FROM queue_mappings
         ORDER BY queue_kind, queue, cluster NULLS FIRST, valid_from",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let audited: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log").fetch_one(pool).await.unwrap();
    (rows, audited)
}

/// The newest `n` audit entries as (action, entity), newest first.
async fn last_audited(pool: &PgPool, n: i64) -> Vec<(String, String)> {
    sqlx::query_as("SELECT action, entity FROM audit_log ORDER BY id DESC LIMIT $1")
        .bind(n)
        .fetch_all(pool)
        .await
        .unwrap()
}

/// A cluster cardhour knows (a queue mapping may name only such), with one hour of ClusterQueue `cq-vision`'s
/// quota in October 2026: 8 cards guaranteed, 3 used within.
async fn seed_cluster_and_quota(pool: &PgPool) {
    sqlx::query("INSERT INTO clusters (name, prometheus_url) VALUES ('gpu-a', 'http://prometheus:9090')")
        .execute(pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO quota_hourly (cluster, hour, scope_kind, scope, guaranteed_card_seconds, used_within_card_seconds,
             borrowed_card_seconds, reserved_idle_card_seconds)
         VALUES ('gpu-a', '2026-10-05T00:00:00Z', 'cluster_queue', 'cq-vision', 28800, 10800, 0, 18000)",
    )
    .execute(pool)
    .await
    .unwrap();
}

/// The teams of `cq-vision`'s figures in the October 2026 quota report, with their guaranteed card-hours.
async fn quota_teams(api: &TestApi) -> Vec<(String, f64)> {
    let (status, q) = api.call(Method::GET, "/api/v1/reports/quotas/2026-10", Some(&api.finance), None).await;
    assert_eq!(status, 200, "{q}");
    q["teams"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["scopes"].as_array().unwrap().iter().any(|s| s["scope"] == "cq-vision"))
        .map(|t| (t["team"].as_str().unwrap().to_string(), t["guaranteed_card_hours"].as_f64().unwrap()))
        .collect()
}

/// A file as a CMDB exports it: a column of its own (a Chinese description, ignored), the dates as typed.
const FILE: &str = "queue_kind,queue,team,valid_from,cluster,description\n\
                    cluster_queue,cq-vision,vision,2026/10/1,,视觉训练队列\n\
                    volcano_queue,vq-nlp,nlp,20261001,gpu-a,自然语言处理\n\
                    cluster_queue,cq-shared,nlp,2026-10-01,gpu-a,共享队列\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_file_imports_once_whatever_its_encoding_and_takes_effect() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    seed_cluster_and_quota(&pool).await;
    assert_eq!(quota_teams(&api).await, [("unassigned".to_string(), 8.0)], "no mapping yet");
    let (gbk, _, unmappable) = encoding_rs::GBK.encode(FILE);
    assert!(!unmappable && std::str::from_utf8(&gbk).is_err(), "a real GBK file, not UTF-8");

    // a dry run reports what would happen and writes nothing
    let before = stored(&pool).await;
    let (status, dry) = import(&api, "?dry_run=true", gbk.to_vec()).await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(dry["dry_run"], true);
    assert_eq!(actions(&dry), [(2, "insert".into()), (3, "insert".into()), (4, "insert".into())]);
    assert_eq!(dry["mappings"], json!([]));
    assert_eq!(stored(&pool).await, before, "a dry run writes nothing");

    // the GBK file itself: every date format read, every row audited as the single POST audits
    let (status, done) = import(&api, "", gbk.to_vec()).await;
    assert_eq!(status, 201, "{done}");
    assert_eq!(actions(&done), actions(&dry), "the dry run said what the import did");
    assert_eq!(done["inserted"], 3);
    assert_eq!(done["mappings"].as_array().unwrap().len(), 3);
    assert!(!done["mappings"][0]["created_by"].as_str().unwrap().is_empty(), "{done}");
    let oct1 = "2026-10-01".to_string();
    let (rows, audited) = stored(&pool).await;
    // by kind, queue, cluster (every cluster first) and day
    let want: Vec<(Option<String>, String, String, String, String)> = vec![
        (Some("gpu-a".into()), "cluster_queue".into(), "cq-shared".into(), "nlp".into(), oct1.clone()),
        (None, "cluster_queue".into(), "cq-vision".into(), "vision".into(), oct1.clone()),
        (Some("gpu-a".into()), "volcano_queue".into(), "vq-nlp".into(), "nlp".into(), oct1.clone()),
    ];
    assert_eq!(rows, want);
    assert_eq!(audited, before.1 + 3);
    assert_eq!(
        last_audited(&pool, 3).await,
        [
            ("queue_mapping.create".into(), "queue:cluster_queue/cq-shared".into()),
            ("queue_mapping.create".into(), "queue:volcano_queue/vq-nlp".into()),
            ("queue_mapping.create".into(), "queue:cluster_queue/cq-vision".into()),
        ]
    );
    let (_, listed) = api.call(Method::GET, "/api/v1/queue-mappings", Some(&api.viewer), None).await;
    assert_eq!(listed.as_array().unwrap().len(), 3, "{listed}");
    assert_eq!(quota_teams(&api).await, [("vision".to_string(), 8.0)], "the queue's quota is its team's now");

    // the same file again, now UTF-8 with a BOM, then without, then GBK: unchanged, 200, nothing written or audited
    let bom = [b"\xef\xbb\xbf".as_slice(), FILE.as_bytes()].concat();
    for body in [bom, FILE.as_bytes().to_vec(), gbk.to_vec()] {
        let now = stored(&pool).await;
        let (status, again) = import(&api, "", body).await;
        assert_eq!(status, 200, "{again}");
        assert_eq!(actions(&again), [(2, "unchanged".into()), (3, "unchanged".into()), (4, "unchanged".into())]);
        assert_eq!((again["unchanged"].as_u64(), again["inserted"].as_u64()), (Some(3), Some(0)));
        assert_eq!(stored(&pool).await, now, "no write, no audit noise");
    }

    // one queue moved to another team, one as stored, one new: an update and an insert, both audited
    let changed = "queue_kind,queue,team,valid_from,cluster\ncluster_queue,cq-vision,nlp,2026-10-01,\n\
                   volcano_queue,vq-nlp,nlp,2026/10/01,gpu-a\nvolcano_queue,vq-new,vision,2026/11/1,\n";
    let before = stored(&pool).await;
    let (status, report) = import(&api, "?dry_run=true", changed.into()).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(actions(&report), [(2, "update".into()), (3, "unchanged".into()), (4, "insert".into())]);
    assert_eq!(report["rows"][0]["previous_team"], "vision");
    assert_eq!(stored(&pool).await, before);
    let (status, report) = import(&api, "", changed.into()).await;
    assert_eq!(status, 201, "{report}");
    assert_eq!((report["updated"].as_u64(), report["inserted"].as_u64()), (Some(1), Some(1)));
    let (rows, audited) = stored(&pool).await;
    assert_eq!(audited, before.1 + 2);
    assert_eq!(
        last_audited(&pool, 2).await,
        [
            ("queue_mapping.create".into(), "queue:volcano_queue/vq-new".into()),
            ("queue_mapping.update".into(), "queue:cluster_queue/cq-vision".into()),
        ]
    );
    let (b, a): (Value, Value) = sqlx::query_as(
        "SELECT before, after FROM audit_log WHERE action = 'queue_mapping.update' ORDER BY id DESC LIMIT 1",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((b["team_id"].as_str(), a["team_id"].as_str()), (Some("vision"), Some("nlp")));
    assert!(rows.iter().any(|r| r.2 == "cq-vision" && r.3 == "nlp"), "{rows:?}");
    assert_eq!(rows.len(), 4);
    assert_eq!(quota_teams(&api).await, [("nlp".to_string(), 8.0)], "the update takes effect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_file_is_refused_with_every_problem_and_nothing_written() {
    let db = TestDb::migrated().unwrap();
    let pool = PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool.clone()).await;
    seed_cluster_and_quota(&pool).await;
    let before = stored(&pool).await;

    // an unknown team, a bad kind, a bad date, an unknown cluster, a bad queue, a contradiction: all at once
    let bad = "queue_kind,queue,team,valid_from,cluster\n\
               cluster_queue,cq-ok,vision,2026-10-01,\n\
               cluster_queue,cq-a,nobody,2026-10-01,\n\
               kueue,cq-b,vision,2026-10-01,\n\
               cluster_queue,cq-c,vision,2026/13/01,\n\
               cluster_queue,cq-d,vision,2026-10-01,nowhere\n\
               volcano_queue,vq a,nlp,2026-10-01,\n\
               cluster_queue,cq-ok,nlp,2026-10-01,\n";
    for query in ["", "?dry_run=true"] {
        let (status, err) = import(&api, query, bad.into()).await;
        assert_eq!(status, 422, "{err}");
        assert_eq!(err["code"], "invalid_input", "{err}");
        assert_eq!(
            fields(&err),
            ["row 3: team", "row 4: queue_kind", "row 5: valid_from", "row 6: cluster", "row 7: queue", "row 8: team"],
            "{err}"
        );
        assert_eq!(err["field"], "row 3: team");
        assert!(err.to_string().contains("unknown team `nobody`"), "{err}");
        assert_eq!(stored(&pool).await, before, "all rows or none");
    }
    // the unknown team alone: still refused, the good row not written either
    let (status, err) =
        import(&api, "", "queue_kind,queue,team,valid_from\ncluster_queue,cq-ok,vision,2026-10-01\ncluster_queue,cq-x,ghost,2026-10-01\n".into())
            .await;
    assert_eq!((status, fields(&err)), (422, vec!["row 3: team".to_string()]), "{err}");
    assert_eq!(stored(&pool).await, before);
    // a missing column, named once by the header's line
    let (status, err) = import(&api, "", "queue,team,valid_from\ncq-a,vision,2026-10-01\n".into()).await;
    assert_eq!((status, fields(&err)), (422, vec!["row 1: queue_kind".to_string()]), "{err}");
    // bytes that are neither UTF-8 nor GB18030, and a header without rows
    let (status, err) = import(&api, "", b"queue_kind,queue,team,valid_from\n\x80\xff,x,y,2026-10-01\n".to_vec()).await;
    assert_eq!((status, err["field"].as_str()), (422, Some("body")), "{err}");
    let (status, err) = import(&api, "", "queue_kind,queue,team,valid_from\n".into()).await;
    assert_eq!((status, err["field"].as_str()), (422, Some("body")), "{err}");
    // only finance and admin import
    for token in [&api.viewer, &api.lead] {
        let (status, err) = import_as(&api, token, "", FILE.into()).await;
        assert_eq!(status, 403, "{err}");
    }
    assert_eq!(stored(&pool).await, before);

    // the command line: the same rules, its errors as JSON on standard error and a non-zero exit, and its dry run
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queues.csv");
    std::fs::write(&path, bad).unwrap();
    let out = run_cardhour(["queue-mappings", "import", path.to_str().unwrap()], &db.env());
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("6 problem(s); nothing imported"), "{stderr}");
    let json_line = stderr.lines().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("{stderr}"));
    let errors: Value = serde_json::from_str(json_line).unwrap();
    assert_eq!(fields(&errors)[..2], ["row 3: team", "row 4: queue_kind"]);
    assert_eq!(stored(&pool).await, before);
    let (gbk, _, _) = encoding_rs::GBK.encode(FILE);
    std::fs::write(&path, &gbk).unwrap();
    let out = run_cardhour(["queue-mappings", "import", path.to_str().unwrap(), "--dry-run"], &db.env());
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((report["inserted"].as_u64(), report["dry_run"].as_bool()), (Some(3), Some(true)));
    assert_eq!(stored(&pool).await, before, "a dry run writes nothing");
    let out = run_cardhour(["queue-mappings", "import", path.to_str().unwrap()], &db.env());
    assert!(out.status.success(), "{out:?}");
    assert_eq!(last_audited(&pool, 1).await[0].0, "queue_mapping.create");
    let created_by: String =
        sqlx::query_scalar("SELECT DISTINCT created_by FROM queue_mappings").fetch_one(&pool).await.unwrap();
    assert!(!created_by.is_empty());
    let again = run_cardhour(["queue-mappings", "import", path.to_str().unwrap()], &db.env());
    assert!(again.status.success(), "{again:?}");
    let report: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!((report["unchanged"].as_u64(), report["inserted"].as_u64()), (Some(3), Some(0)));
}

// --- the admin page ---------------------------------------------------------------------------------------------

async fn get(portal: &TestPortal, c: &reqwest::Client, path: &str) -> (u16, String) {
    let r = c.get(portal.url(path)).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn signed_in(portal: &TestPortal, user: &str) -> reqwest::Client {
    let c = visitor();
    let answer = portal.login(&c, user, PASSWORD).await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    c
}

/// The session's CSRF token (the home page's logout form carries it).
async fn csrf(portal: &TestPortal, c: &reqwest::Client) -> String {
    hidden(&get(portal, c, "/").await.1, "csrf").expect("the home page's logout form")
}

/// A multipart upload of `bytes` as `file` to the page's preview.
async fn upload(portal: &TestPortal, c: &reqwest::Client, bytes: Vec<u8>) -> (u16, String) {
    let token = csrf(portal, c).await;
    let part = reqwest::multipart::Part::bytes(bytes).file_name("queues.csv").mime_str("text/csv").unwrap();
    let form = reqwest::multipart::Form::new().text("csrf", token).part("file", part);
    let r = c.post(portal.url("/admin/queue-mappings/preview")).multipart(form).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The rows of a preview page: (line, class) in page order.
fn preview_rows(page: &str) -> Vec<(usize, String)> {
    page.split(r#"<tr class="row-"#)
        .skip(1)
        .map(|rest| {
            let class = rest.split('"').next().unwrap().to_string();
            let line = rest.split(r#"<td class="num">"#).nth(1).unwrap().split('<').next().unwrap().parse().unwrap();
            (line, class)
        })
        .collect()
}

#[sqlx::test]
async fn an_upload_is_previewed_then_applied_exactly(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let portal = TestPortal::start(pool.clone()).await;
    seed_cluster_and_quota(&pool).await;
    let finance = signed_in(&portal, "finance").await;
    let m = json!({"queue_kind": "cluster_queue", "queue": "cq-vision", "team_id": "nlp", "valid_from": "2026-10-01"});
    assert_eq!(api.call(Method::POST, "/api/v1/queue-mappings", Some(&api.finance), Some(m)).await.0, 201);

    // the page offers the upload to writers only
    let (status, page) = get(&portal, &finance, "/admin/queue-mappings").await;
    assert_eq!(status, 200);
    assert!(page.contains(r#"action="/admin/queue-mappings/preview""#) && page.contains("上传队列归属 CSV"), "{page}");
    let viewer = signed_in(&portal, "viewer").await;
    let (_, page) = get(&portal, &viewer, "/admin/queue-mappings").await;
    assert!(!page.contains("/admin/queue-mappings/preview"), "{page}");

    // a GBK file: one row changes a mapping, two add one
    let (gbk, _, _) = encoding_rs::GBK.encode(FILE);
    let gbk = gbk.into_owned();
    let before = stored(&pool).await;
    let (status, preview) = upload(&portal, &finance, gbk.clone()).await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(stored(&pool).await, before, "a preview writes nothing");
    // exactly what the API's dry run of the same bytes reports
    let (_, dry) = import(&api, "?dry_run=true", gbk.clone()).await;
    let class = |a: &str| match a {
        "insert" => "added",
        "update" => "changed",
        _ => "unchanged",
    };
    let want: Vec<(usize, String)> =
        actions(&dry).into_iter().map(|(l, a)| (l as usize, class(&a).to_string())).collect();
    assert_eq!(want, [(2, "changed".into()), (3, "added".into()), (4, "added".into())], "{dry}");
    assert_eq!(preview_rows(&preview), want, "{preview}");
    assert!(preview.contains("<td><code>cq-vision</code></td>") && preview.contains("Kueue 集群队列"), "{preview}");
    // every word Chinese, but the data, the file's column names and product names
    let data = ["cq-vision", "vq-nlp", "cq-shared", "vision", "nlp", "gpu-a", "queues.csv", "2026-10-01"];
    let shown = visible(&preview);
    let english = cardhour::glossary::english_words(&shown, &data);
    assert!(english.is_empty(), "English on a zh page: {english:?}");

    let file = hidden(&preview, "file").expect("an apply form");
    let plan = hidden(&preview, "plan").unwrap();
    let sig = hidden(&preview, "sig").unwrap();
    let token = hidden(&preview, "csrf").unwrap();
    let apply = |file: String, plan: String, sig: String| {
        let (portal, finance, token) = (&portal, &finance, token.clone());
        async move {
            let fields = [
                ("csrf", token.as_str()),
                ("file", &file),
                ("plan", &plan),
                ("sig", &sig),
                ("file_name", "queues.csv"),
            ];
            portal.post_form(finance, "/admin/queue-mappings/apply", &fields).await
        }
    };

    // tampered: another file or another plan — refused, nothing written
    use base64::Engine;
    let other = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(FILE.replace("vq-nlp,nlp", "vq-nlp,vision"));
    for (f, p, s) in [(other, plan.clone(), sig.clone()), (file.clone(), "0".repeat(64), sig.clone())] {
        let a: Answer = apply(f, p, s).await;
        assert_eq!(a.status, 422, "{}", a.body);
        assert!(a.body.contains("预览的文件被改动过"), "{}", a.body);
        assert_eq!(stored(&pool).await, before);
    }
    // a namespace mapping preview's signature is no queue mapping preview's: another session's neither
    let other_session = signed_in(&portal, "finance").await;
    let other_token = csrf(&portal, &other_session).await;
    let fields = [("csrf", other_token.as_str()), ("file", &file), ("plan", &plan), ("sig", &sig)];
    let a = portal.post_form(&other_session, "/admin/queue-mappings/apply", &fields).await;
    assert!(a.status == 422 && a.body.contains("预览的文件被改动过"), "{}", a.body);

    // stale: the mappings changed since the preview — refused, nothing of the file written, a fresh preview back
    let m = json!({"queue_kind": "cluster_queue", "queue": "cq-shared", "cluster": "gpu-a", "team_id": "vision",
                   "valid_from": "2026-10-01"});
    assert_eq!(api.call(Method::POST, "/api/v1/queue-mappings", Some(&api.finance), Some(m)).await.0, 201);
    let changed = stored(&pool).await;
    let a = apply(file.clone(), plan.clone(), sig.clone()).await;
    assert_eq!(a.status, 422, "{}", a.body);
    assert!(a.body.contains("预览之后映射已有变化"), "{}", a.body);
    assert_eq!(stored(&pool).await, changed);
    assert_eq!(preview_rows(&a.body), [(2, "changed".into()), (3, "added".into()), (4, "changed".into())]);

    // the fresh preview applied: exactly its changes are written, by the signed-in user
    let (file, plan, sig) =
        (hidden(&a.body, "file").unwrap(), hidden(&a.body, "plan").unwrap(), hidden(&a.body, "sig").unwrap());
    let a = apply(file, plan, sig).await;
    assert_eq!(
        (a.status, a.location.as_deref()),
        (303, Some("/admin/queue-mappings?added=1&changed=2&unchanged=0")),
        "{}",
        a.body
    );
    let (rows, audited) = stored(&pool).await;
    assert_eq!(audited, changed.1 + 3);
    let teams: Vec<(&str, &str)> = rows.iter().map(|r| (r.2.as_str(), r.3.as_str())).collect();
    assert_eq!(teams, [("cq-shared", "nlp"), ("cq-vision", "vision"), ("vq-nlp", "nlp")]);
    let actors: Vec<String> =
        sqlx::query_scalar("SELECT actor FROM audit_log ORDER BY id DESC LIMIT 3").fetch_all(&pool).await.unwrap();
    assert!(actors.iter().all(|a| a == "user:finance"), "{actors:?}");
    let (_, page) = get(&portal, &finance, "/admin/queue-mappings?added=1&changed=2&unchanged=0").await;
    assert!(page.contains("已导入： 1 新增 · 2 修改 · 0 不变"), "{page}");

    // a bad file: every problem at its line, in Chinese, no apply form, nothing written
    let bad = "queue_kind,queue,team,valid_from,cluster\ncluster_queue,cq-a,nobody,2026-10-01,\n\
               kueue,cq-b,vision,2026-10-01,\ncluster_queue,cq-c,vision,2026/13/01,\n\
               cluster_queue,cq-d,vision,2026-10-01,nowhere\n";
    let now = stored(&pool).await;
    let (status, page) = upload(&portal, &finance, bad.into()).await;
    assert_eq!(status, 422, "{page}");
    assert_eq!(
        preview_rows(&page),
        [(2, "error".into()), (3, "error".into()), (4, "error".into()), (5, "error".into())]
    );
    for zh in ["团队 `nobody` 不存在", "`kueue` 不是队列类型", "`2026/13/01` 不是日期", "集群 `nowhere` 不存在"]
    {
        assert!(page.contains(zh), "{zh}: {page}");
    }
    assert!(hidden(&page, "plan").is_none(), "no apply form for a bad file");
    let data = [
        "nobody",
        "kueue",
        "vision",
        "nowhere",
        "queues.csv",
        "2026/13/01",
        "queue_kind",
        "team",
        "valid_from",
        "cluster",
        "cluster_queue",
        "volcano_queue",
    ];
    let shown = visible(&page);
    let english = cardhour::glossary::english_words(&shown, &data);
    assert!(english.is_empty(), "English on a zh page: {english:?}");
    // in English on request
    let token = csrf(&portal, &finance).await;
    let part = reqwest::multipart::Part::bytes(bad.as_bytes().to_vec()).file_name("queues.csv");
    let form = reqwest::multipart::Form::new().text("csrf", token).part("file", part);
    let r = finance.post(portal.url("/admin/queue-mappings/preview?lang=en")).multipart(form).send().await.unwrap();
    let page = r.text().await.unwrap();
    assert!(page.contains("unknown team `nobody`") && page.contains("is not a queue kind"), "{page}");
    // no file at all
    let token = csrf(&portal, &finance).await;
    let form = reqwest::multipart::Form::new().text("csrf", token);
    // (the English request above set the language cookie: back to Chinese)
    let r = finance.post(portal.url("/admin/queue-mappings/preview?lang=zh-CN")).multipart(form).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 422);
    let page = r.text().await.unwrap();
    assert!(page.contains("请选择一个 CSV 文件"), "{page}");
    // a viewer may not upload
    let token = csrf(&portal, &viewer).await;
    let part = reqwest::multipart::Part::bytes(gbk.clone()).file_name("queues.csv");
    let form = reqwest::multipart::Form::new().text("csrf", token).part("file", part);
    let r = viewer.post(portal.url("/admin/queue-mappings/preview")).multipart(form).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(stored(&pool).await, now);
}
