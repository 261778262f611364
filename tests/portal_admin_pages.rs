//! The admin pages over HTTP, signed in through the login form, against the API's JSON as the truth: a team made on
//! the page is the API's team, the CSV preview lists exactly the changes the API's dry run reports and its apply
//! writes exactly those (a tampered or stale apply writes nothing), a token is shown once and works as a bearer,
//! setting a password ends the user's other sessions, bad input gets the form back (422) with the field's message
//! in the page's language and nothing written, and whoever may not open a page gets the not-found page.

use crate::common;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::api::{TestApi, write_counts};
use common::portal::{Answer, PASSWORD, TestPortal, hidden, visitor};
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

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

/// The CSRF token of the page at `path` (every page carries it in the header's logout form at least).
async fn csrf(portal: &TestPortal, c: &reqwest::Client, path: &str) -> String {
    let (status, page) = get(portal, c, path).await;
    assert!(status == 200 || status == 404, "{path}: {status}");
    // the not-found page has no form: take the token from the home page then
    match hidden(&page, "csrf") {
        Some(t) => t,
        None => hidden(&get(portal, c, "/").await.1, "csrf").expect("the home page's logout form"),
    }
}

/// POSTs a form with the session's CSRF token and these fields.
async fn post(portal: &TestPortal, c: &reqwest::Client, path: &str, fields: &[(&str, &str)]) -> Answer {
    let token = csrf(portal, c, "/").await;
    let mut all = vec![("csrf", token.as_str())];
    all.extend_from_slice(fields);
    portal.post_form(c, path, &all).await
}

/// The not-found page, as a path that names nothing gets it.
async fn missing(portal: &TestPortal, c: &reqwest::Client) -> String {
    let (status, page) = get(portal, c, "/no/such/page").await;
    assert_eq!(status, 404);
    page
}

async fn audit(api: &TestApi) -> Vec<Value> {
    let (status, v) = api.call(Method::GET, "/api/v1/audit?limit=1000", Some(&api.admin), None).await;
    assert_eq!(status, 200, "{v}");
    v.as_array().unwrap().clone()
}

async fn api_json(api: &TestApi, path: &str) -> Value {
    let (status, v) = api.call(Method::GET, path, Some(&api.admin), None).await;
    assert_eq!(status, 200, "{path}: {v}");
    v
}

/// Each case a bad form gets back: 422, the message next to its field, nothing written.
async fn refused(portal: &TestPortal, c: &reqwest::Client, path: &str, fields: &[(&str, &str)], message: &str) {
    let before = write_counts(&portal.pool).await;
    let users: i64 = sqlx::query_scalar("SELECT count(*) FROM users").fetch_one(&portal.pool).await.unwrap();
    let tokens: i64 = sqlx::query_scalar("SELECT count(*) FROM api_tokens").fetch_one(&portal.pool).await.unwrap();
    let a = post(portal, c, path, fields).await;
    assert_eq!(a.status, 422, "{path} {fields:?}: {}", a.body);
    assert!(
        a.body.contains(&format!(r#"<span class="field-error">{message}"#)),
        "{path} {fields:?}: no `{message}` in {}",
        a.body
    );
    assert_eq!(write_counts(&portal.pool).await, before, "{path} {fields:?} wrote something");
    let users_after: i64 = sqlx::query_scalar("SELECT count(*) FROM users").fetch_one(&portal.pool).await.unwrap();
    let tokens_after: i64 =
        sqlx::query_scalar("SELECT count(*) FROM api_tokens").fetch_one(&portal.pool).await.unwrap();
    assert_eq!((users_after, tokens_after), (users, tokens), "{path} {fields:?} wrote a user or token");
    if path.contains("lang=en") {
        // `?lang=` is remembered in a cookie: back to zh-CN for the next case
        assert_eq!(get(portal, c, "/?lang=zh-CN").await.0, 200);
    }
}

#[sqlx::test]
async fn teams_made_on_the_page_are_the_apis_teams(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let portal = TestPortal::start(pool.clone()).await;
    let admin = signed_in(&portal, "admin").await;

    // the page lists what the API lists
    let (status, page) = get(&portal, &admin, "/admin/teams").await;
    assert_eq!(status, 200, "{page}");
    let listed = api_json(&api, "/api/v1/teams").await;
    let listed = listed.as_array().unwrap();
    assert!(listed.iter().any(|t| t["id"] == "vision") && listed.iter().any(|t| t["id"] == "nlp"), "{listed:?}");
    for t in listed {
        assert!(page.contains(&format!("<code>{}</code>", t["id"].as_str().unwrap())), "{t}");
        assert!(page.contains(t["name"].as_str().unwrap()), "{t}");
    }
    // the header links the admin section
    assert!(page.contains(r#"<a href="/admin/teams" class="active" aria-current="page">管理</a>"#), "{page}");

    // created on the page: what the API returns, audited as the API's writes are
    let a = post(&portal, &admin, "/admin/teams", &[("id", "algo"), ("name", "算法团队"), ("owner", "张三")]).await;
    assert_eq!((a.status, a.location.as_deref()), (303, Some("/admin/teams?saved=algo")), "{}", a.body);
    assert_eq!(api_json(&api, "/api/v1/teams/algo").await, json!({"id": "algo", "name": "算法团队", "owner": "张三"}));
    let finance = signed_in(&portal, "finance").await;
    let a = post(&portal, &finance, "/admin/teams", &[("id", "equipe"), ("name", "ÉQUIPE"), ("owner", "")]).await;
    assert_eq!(a.status, 303, "{}", a.body);
    assert_eq!(api_json(&api, "/api/v1/teams/equipe").await, json!({"id": "equipe", "name": "ÉQUIPE", "owner": null}));
    let log = audit(&api).await;
    assert_eq!((log[0]["action"].as_str(), log[0]["entity"].as_str()), (Some("team.put"), Some("team:equipe")));
    assert_eq!(log[0]["actor"], "user:finance");
    assert_eq!(log[1]["actor"], "user:admin");
    assert_eq!(log[1]["after"], json!({"id": "algo", "name": "算法团队", "owner": "张三"}));
    let (_, page) = get(&portal, &admin, "/admin/teams?saved=algo").await;
    assert!(page.contains("算法团队") && page.contains("ÉQUIPE") && page.contains("已保存： algo"), "{page}");

    // edited: renamed, owner cleared; the path's id wins over the form's
    let (status, edit) = get(&portal, &admin, "/admin/teams/algo").await;
    assert_eq!(status, 200);
    assert!(edit.contains(r#"value="算法团队""#) && edit.contains(r#"action="/admin/teams/algo""#), "{edit}");
    let a =
        post(&portal, &admin, "/admin/teams/algo", &[("id", "vision"), ("name", "算法团队 2"), ("owner", " ")]).await;
    assert_eq!(a.status, 303, "{}", a.body);
    assert_eq!(api_json(&api, "/api/v1/teams/algo").await, json!({"id": "algo", "name": "算法团队 2", "owner": null}));
    assert_eq!(api_json(&api, "/api/v1/teams/vision").await["name"], "视觉组");
    let log = audit(&api).await;
    assert_eq!(log[0]["before"]["name"], "算法团队");

    // bad input: the form back with the field's message, in the page's language, nothing written
    let long = "名".repeat(201);
    for (fields, message) in [
        (vec![("id", "x1"), ("name", "")], "不能为空"),
        (vec![("id", "x1"), ("name", long.as_str())], "最多 200 个字符"),
        (vec![("id", "x1"), ("name", "a\0b")], "不能包含 NUL 字符"),
        (vec![("id", "x1"), ("name", "ok"), ("owner", "o\0")], "不能包含 NUL 字符"),
        (vec![("id", "Bad Id"), ("name", "ok")], "团队 ID 只能使用"),
        (vec![("id", ""), ("name", "ok")], "团队 ID 只能使用"),
        (vec![("id", "vision"), ("name", "taken")], "团队 `vision` 已存在"),
    ] {
        refused(&portal, &admin, "/admin/teams", &fields, message).await;
    }
    refused(&portal, &admin, "/admin/teams?lang=en", &[("id", "x1"), ("name", "")], "must not be blank").await;
    refused(&portal, &admin, "/admin/teams/algo", &[("name", "")], "不能为空").await;
    // a field of the wrong shape is not a form
    let before = write_counts(&pool).await;
    let r = admin.post(portal.url("/admin/teams")).form(&[("id", "x2"), ("name", "no token")]).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 403, "no CSRF token");
    assert_eq!(write_counts(&pool).await, before);

    // a viewer reads the list without a form and writes nothing; a team lead has no admin at all
    let viewer = signed_in(&portal, "viewer").await;
    let (status, page) = get(&portal, &viewer, "/admin/teams").await;
    assert_eq!(status, 200);
    assert!(page.contains("算法团队 2") && !page.contains(r#"action="/admin/teams""#), "{page}");
    let lead = signed_in(&portal, "lead").await;
    let not_found = missing(&portal, &lead).await;
    for (c, who) in [(&viewer, "viewer"), (&lead, "lead")] {
        let a = post(&portal, c, "/admin/teams", &[("id", "x3"), ("name", "nope")]).await;
        assert_eq!(a.status, 404, "{who}");
        let a = post(&portal, c, "/admin/teams/algo", &[("name", "nope")]).await;
        assert_eq!(a.status, 404, "{who}");
    }
    assert_eq!(write_counts(&pool).await, before);
    for path in
        ["/admin/teams", "/admin/teams/algo", "/admin/mappings", "/admin/audit", "/admin/users", "/admin/tokens"]
    {
        let (status, body) = get(&portal, &lead, path).await;
        assert_eq!((status, body == not_found), (404, true), "{path} for a team lead");
    }
    let (_, home) = get(&portal, &lead, "/").await;
    assert!(!home.contains("/admin/"), "a team lead's navigation has no admin");
    let (status, body) = get(&portal, &viewer, "/admin/teams/algo").await;
    assert_eq!((status, body == not_found), (404, true), "the edit form is for writers");
}

/// A multipart upload of `bytes` as `file` with the session's CSRF token.
async fn upload(portal: &TestPortal, c: &reqwest::Client, bytes: Vec<u8>) -> (u16, String) {
    let token = csrf(portal, c, "/").await;
    let part = reqwest::multipart::Part::bytes(bytes).file_name("cmdb.csv").mime_str("text/csv").unwrap();
    let form = reqwest::multipart::Form::new().text("csrf", token).part("file", part);
    let r = c.post(portal.url("/admin/mappings/preview")).multipart(form).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

/// The API's mappings as (namespace, cluster, team, valid_from), sorted.
async fn mappings(api: &TestApi) -> Vec<(String, Option<String>, String, String)> {
    let v = api_json(api, "/api/v1/mappings?limit=1000").await;
    let mut out: Vec<_> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["namespace"].as_str().unwrap().to_string(),
                m["cluster"].as_str().map(str::to_string),
                m["team_id"].as_str().unwrap().to_string(),
                m["valid_from"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
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
async fn a_cmdb_upload_is_previewed_then_applied_exactly(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let portal = TestPortal::start(pool.clone()).await;
    let finance = signed_in(&portal, "finance").await;

    // the form: a mapping added, then pointed at another team (dates as CMDBs write them)
    let a = post(
        &portal,
        &finance,
        "/admin/mappings",
        &[("namespace", "vision-train"), ("team_id", "vision"), ("valid_from", "2026/11/01")],
    )
    .await;
    assert_eq!(a.status, 303, "{}", a.body);
    assert_eq!(mappings(&api).await, [("vision-train".into(), None, "vision".into(), "2026-11-01".into())]);
    let a = post(
        &portal,
        &finance,
        "/admin/mappings",
        &[("namespace", "vision-train"), ("team_id", "nlp"), ("valid_from", "2026-11-01"), ("cluster", "")],
    )
    .await;
    assert_eq!(a.status, 303, "{}", a.body);
    assert_eq!(mappings(&api).await, [("vision-train".into(), None, "nlp".into(), "2026-11-01".into())]);
    let log = audit(&api).await;
    assert_eq!((log[0]["action"].as_str(), log[0]["actor"].as_str()), (Some("mapping.update"), Some("user:finance")));
    assert_eq!(
        (log[1]["action"].as_str(), log[1]["entity"].as_str()),
        (Some("mapping.create"), Some("namespace:vision-train"))
    );
    let m = json!({"namespace": "shared", "team_id": "vision", "valid_from": "2026-11-01"});
    assert_eq!(api.call(Method::POST, "/api/v1/mappings", Some(&api.finance), Some(m)).await.0, 201);
    let (status, page) = get(&portal, &finance, "/admin/mappings").await;
    assert_eq!(status, 200);
    for (ns, _, team, day) in mappings(&api).await {
        assert!(page.contains(&format!("<code>{ns}</code>")) && page.contains(&team) && page.contains(&day), "{ns}");
    }

    // bad input on the form
    for (fields, message) in [
        (vec![("namespace", "a"), ("team_id", "nope"), ("valid_from", "2026-11-01")], "团队 `nope` 不存在"),
        (
            vec![("namespace", "a"), ("team_id", "vision"), ("valid_from", "1999-12-31")],
            "必须在 2000-01-01 与 2100-12-31 之间",
        ),
        (vec![("namespace", "a"), ("team_id", "vision"), ("valid_from", "2026-13-01")], "`2026-13-01` 不是日期"),
        (vec![("namespace", "a"), ("team_id", "vision"), ("valid_from", "")], "必填"),
        (vec![("namespace", ""), ("team_id", "vision"), ("valid_from", "2026-11-01")], "不能为空"),
        (vec![("namespace", "a\0"), ("team_id", "vision"), ("valid_from", "2026-11-01")], "不能包含 NUL 字符"),
        (
            vec![("namespace", "a b"), ("team_id", "vision"), ("valid_from", "2026-11-01")],
            "必须是 Kubernetes 命名空间名",
        ),
        (
            vec![("namespace", "a"), ("team_id", "vision"), ("valid_from", "2026-11-01"), ("cluster", "bad cluster")],
            "只能使用 A-Z",
        ),
    ] {
        refused(&portal, &finance, "/admin/mappings", &fields, message).await;
    }
    refused(
        &portal,
        &finance,
        "/admin/mappings?lang=en",
        &[("namespace", "a"), ("team_id", "nope"), ("valid_from", "2026-11-01")],
        "unknown team `nope`",
    )
    .await;

    // a GBK file from Chinese Excel: one row changes a mapping, one adds one, one adds one with a new team, one is as stored
    let csv = "namespace,team,team_name,owner,valid_from\n\
               vision-train,vision,,,2026/11/01\n\
               nlp-prod,nlp,,,2026/11/1\n\
               recsys,rec,推荐算法组,张三,20261101\n\
               shared,vision,,,2026-11-01\n";
    let (gbk, _, lossy) = encoding_rs::GBK.encode(csv);
    assert!(!lossy);
    let gbk = gbk.into_owned();
    let before = write_counts(&pool).await;
    let stored = mappings(&api).await;
    let (status, preview) = upload(&portal, &finance, gbk.clone()).await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(write_counts(&pool).await, before, "a preview writes nothing");
    // exactly what the API's dry run of the same bytes reports
    let dry: Value = api
        .client
        .post(format!("{}/api/v1/mappings/import?dry_run=true", api.base))
        .bearer_auth(&api.finance)
        .header("content-type", "text/csv")
        .body(gbk.clone())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let class = |a: &str| match a {
        "insert" => "added",
        "update" => "changed",
        _ => "unchanged",
    };
    let want: Vec<(usize, String)> = dry["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["line"].as_u64().unwrap() as usize, class(r["action"].as_str().unwrap()).to_string()))
        .collect();
    assert_eq!(
        want,
        [(2, "changed".into()), (3, "added".into()), (4, "added".into()), (5, "unchanged".into())],
        "{dry}"
    );
    assert_eq!(preview_rows(&preview), want, "{preview}");
    assert!(preview.contains("推荐算法组") || preview.contains("rec"), "{preview}");
    assert!(
        preview.contains(r#"<td><code>vision-train</code></td>"#) && preview.contains("<td>nlp</td>"),
        "the team before"
    );
    assert_eq!(dry["teams_created"], 1);

    let file = hidden(&preview, "file").expect("an apply form");
    let plan = hidden(&preview, "plan").unwrap();
    let sig = hidden(&preview, "sig").unwrap();
    let token = hidden(&preview, "csrf").unwrap();
    let apply = |file: String, plan: String, sig: String| {
        let (portal, finance, token) = (&portal, &finance, token.clone());
        async move {
            let fields =
                [("csrf", token.as_str()), ("file", &file), ("plan", &plan), ("sig", &sig), ("file_name", "cmdb.csv")];
            portal.post_form(finance, "/admin/mappings/apply", &fields).await
        }
    };

    // tampered: another file, another plan, no signature — refused, nothing written
    let other = URL_SAFE_NO_PAD.encode(csv.replace("recsys,rec", "recsys,vision"));
    for (f, p, s) in [
        (other, plan.clone(), sig.clone()),
        (file.clone(), "0".repeat(64), sig.clone()),
        (file.clone(), plan.clone(), String::new()),
    ] {
        let a = apply(f, p, s).await;
        assert_eq!(a.status, 422, "{}", a.body);
        assert!(a.body.contains("预览的文件被改动过"), "{}", a.body);
        assert_eq!(write_counts(&pool).await, before);
    }

    // another session's preview, even of the same user, is not this session's
    let other_session = signed_in(&portal, "finance").await;
    let other_token = csrf(&portal, &other_session, "/").await;
    let fields = [("csrf", other_token.as_str()), ("file", &file), ("plan", &plan), ("sig", &sig)];
    let a = portal.post_form(&other_session, "/admin/mappings/apply", &fields).await;
    assert!(a.status == 422 && a.body.contains("预览的文件被改动过"), "{}", a.body);
    assert_eq!(write_counts(&pool).await, before);

    // stale: the mappings changed since the preview — refused, nothing of the file written, a fresh preview back
    let m = json!({"namespace": "nlp-prod", "team_id": "vision", "valid_from": "2026-11-01"});
    assert_eq!(api.call(Method::POST, "/api/v1/mappings", Some(&api.finance), Some(m)).await.0, 201);
    let changed = write_counts(&pool).await;
    let stored_now = mappings(&api).await;
    let a = apply(file.clone(), plan.clone(), sig.clone()).await;
    assert_eq!(a.status, 422, "{}", a.body);
    assert!(a.body.contains("预览之后映射已有变化"), "{}", a.body);
    assert_eq!(write_counts(&pool).await, changed);
    assert_eq!(mappings(&api).await, stored_now);
    assert_ne!(stored_now, stored);
    assert_eq!(
        preview_rows(&a.body),
        [(2, "changed".into()), (3, "changed".into()), (4, "added".into()), (5, "unchanged".into())]
    );

    // the fresh preview applied: exactly its changes are written
    let (file, plan, sig) =
        (hidden(&a.body, "file").unwrap(), hidden(&a.body, "plan").unwrap(), hidden(&a.body, "sig").unwrap());
    let a = apply(file, plan, sig).await;
    assert_eq!(
        (a.status, a.location.as_deref()),
        (303, Some("/admin/mappings?added=1&changed=2&unchanged=1")),
        "{}",
        a.body
    );
    let mut want = vec![
        ("nlp-prod".to_string(), None, "nlp".to_string(), "2026-11-01".to_string()),
        ("recsys".into(), None, "rec".into(), "2026-11-01".into()),
        ("shared".into(), None, "vision".into(), "2026-11-01".into()),
        ("vision-train".into(), None, "vision".into(), "2026-11-01".into()),
    ];
    want.sort();
    assert_eq!(mappings(&api).await, want);
    assert_eq!(api_json(&api, "/api/v1/teams/rec").await, json!({"id": "rec", "name": "推荐算法组", "owner": "张三"}));
    let log = audit(&api).await;
    let actions: Vec<&str> = log[..4].iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["mapping.create", "team.put", "mapping.update", "mapping.update"]);
    assert!(log[..4].iter().all(|e| e["actor"] == "user:finance"));
    let (_, page) = get(&portal, &finance, "/admin/mappings?added=1&changed=2&unchanged=1").await;
    assert!(page.contains("已导入： 1 新增 · 2 修改 · 1 不变"), "{page}");
    // applying the same preview again: the import would now decide otherwise (all unchanged) — refused
    let again = write_counts(&pool).await;
    let a =
        apply(hidden(&preview, "file").unwrap(), hidden(&preview, "plan").unwrap(), hidden(&preview, "sig").unwrap())
            .await;
    assert_eq!(a.status, 422);
    assert_eq!(write_counts(&pool).await, again);

    // a file with bad rows: every problem by row, the good rows' changes, no apply
    let bad = "namespace,team,valid_from\na,Bad Team,2026-11-01\nb,vision,2026-13-01\nc,vision,2026/11/01\n";
    let (status, page) = upload(&portal, &finance, bad.as_bytes().to_vec()).await;
    assert_eq!(status, 422, "{page}");
    assert_eq!(preview_rows(&page), [(2, "error".to_string()), (3, "error".into()), (4, "added".into())]);
    assert!(page.contains("<code>team</code>: `Bad Team` 不是团队 ID"), "{page}");
    assert!(page.contains("<code>valid_from</code>: `2026-13-01` 不是日期"), "{page}");
    assert!(!page.contains(r#"action="/admin/mappings/apply""#), "{page}");
    let (status, page) = upload(&portal, &finance, Vec::new()).await;
    assert_eq!(status, 422);
    assert!(page.contains(r#"<span class="field-error">请选择一个 CSV 文件"#), "{page}");
    assert_eq!(write_counts(&pool).await, again);

    // a viewer sees the list, uploads nothing; a lead has no such page
    let viewer = signed_in(&portal, "viewer").await;
    let (status, page) = get(&portal, &viewer, "/admin/mappings").await;
    assert_eq!(status, 200);
    assert!(page.contains("<code>recsys</code>") && !page.contains("/admin/mappings/preview"), "{page}");
    let (status, _) = upload(&portal, &viewer, csv.as_bytes().to_vec()).await;
    assert_eq!(status, 404);
    let a = post(
        &portal,
        &viewer,
        "/admin/mappings",
        &[("namespace", "z"), ("team_id", "vision"), ("valid_from", "2026-11-01")],
    )
    .await;
    assert_eq!(a.status, 404);
    assert_eq!(write_counts(&pool).await, again);
}

#[sqlx::test]
async fn users_are_made_disabled_and_a_new_password_ends_the_other_sessions(pool: PgPool) {
    let _api = TestApi::start(pool.clone()).await;
    let portal = TestPortal::start(pool.clone()).await;
    let admin = signed_in(&portal, "admin").await;
    let (status, page) = get(&portal, &admin, "/admin/users").await;
    assert_eq!(status, 200, "{page}");
    let state = cardhour::usecase::Services::new(pool.clone(), chrono_tz::Asia::Shanghai);
    let users = cardhour::usecase::users::list(&state).await.unwrap();
    assert_eq!(users.len(), 4);
    for u in &users {
        assert!(
            page.contains(&format!("<strong>{}</strong>", u.username)) && page.contains(&format!("({})", u.role)),
            "{}",
            u.username
        );
    }
    assert!(page.contains("团队负责人 (team_lead)") && page.contains("vision"), "{page}");

    let a = post(
        &portal,
        &admin,
        "/admin/users",
        &[("username", "kai"), ("role", "team_lead"), ("teams", "vision, nlp"), ("password", "another-pw-1")],
    )
    .await;
    assert_eq!((a.status, a.location.as_deref()), (303, Some("/admin/users?created=kai")), "{}", a.body);
    let kai = visitor();
    assert_eq!(portal.login(&kai, "kai", "another-pw-1").await.status, 303);
    let (_, whoami) = get(&portal, &kai, "/test/whoami").await;
    assert_eq!(whoami, "kai team_lead user:kai");
    let created: (String, Vec<String>) =
        sqlx::query_as("SELECT role, teams FROM users WHERE username = 'kai'").fetch_one(&pool).await.unwrap();
    assert_eq!(created, ("team_lead".into(), vec!["vision".into(), "nlp".into()]));
    let entry: (String, String) =
        sqlx::query_as("SELECT actor, action FROM audit_log ORDER BY id DESC LIMIT 1").fetch_one(&pool).await.unwrap();
    assert_eq!(entry, ("user:admin".into(), "user.create".into()));

    for (fields, message) in [
        (vec![("username", "mei"), ("role", "boss"), ("password", "another-pw-1")], "不是角色"),
        (vec![("username", "Mei Li"), ("role", "viewer"), ("password", "another-pw-1")], "只能使用 a-z、0-9"),
        (vec![("username", "m\0i"), ("role", "viewer"), ("password", "another-pw-1")], "只能使用 a-z、0-9"),
        (vec![("username", ""), ("role", "viewer"), ("password", "another-pw-1")], "只能使用 a-z、0-9"),
        (vec![("username", "mei"), ("role", "team_lead"), ("password", "another-pw-1")], "团队负责人至少需要一个团队"),
        (
            vec![("username", "mei"), ("role", "team_lead"), ("teams", "nope"), ("password", "another-pw-1")],
            "团队 `nope` 不存在",
        ),
        (
            vec![("username", "mei"), ("role", "viewer"), ("teams", "vision"), ("password", "another-pw-1")],
            "只有团队负责人才有团队",
        ),
        (vec![("username", "mei"), ("role", "viewer"), ("password", "x")], "至少"),
        (vec![("username", "mei"), ("role", "viewer"), ("password", "pass\0word-long")], "不能包含控制字符"),
        (vec![("username", "kai"), ("role", "viewer"), ("password", "another-pw-1")], "用户 `kai` 已存在"),
    ] {
        refused(&portal, &admin, "/admin/users", &fields, message).await;
    }
    refused(
        &portal,
        &admin,
        "/admin/users?lang=en",
        &[("username", "mei"), ("role", "viewer"), ("password", "x")],
        "must be at least",
    )
    .await;
    let a =
        post(&portal, &admin, "/admin/users", &[("username", "mei"), ("role", "viewer"), ("password", "secret-typed")])
            .await;
    assert_eq!(a.status, 303);
    let a =
        post(&portal, &admin, "/admin/users", &[("username", "mei"), ("role", "viewer"), ("password", "secret-typed")])
            .await;
    assert!(a.status == 422 && !a.body.contains("secret-typed"), "a password is never sent back");
    // the last login, when there was one
    let (_, page) = get(&portal, &admin, "/admin/users").await;
    let row = |name: &str| {
        page.split(&format!("<strong>{name}</strong>")).nth(1).unwrap().split("</tr>").next().unwrap().to_string()
    };
    assert_eq!(row("kai").matches("(Asia/Shanghai)").count(), 2, "created and last login: {}", row("kai"));
    assert!(row("mei").contains("从未登录"), "{}", row("mei"));

    // a new password: that user's every other session ends, the old password stops working
    let (f1, f2) = (signed_in(&portal, "finance").await, signed_in(&portal, "finance").await);
    refused(&portal, &admin, "/admin/users/finance/password", &[("password", "short")], "至少").await;
    assert_eq!(get(&portal, &f1, "/test/whoami").await.0, 200, "a refused password ends nothing");
    let a = post(&portal, &admin, "/admin/users/finance/password", &[("password", "a-new-password-9")]).await;
    assert_eq!((a.status, a.location.as_deref()), (303, Some("/admin/users?password=finance")), "{}", a.body);
    for c in [&f1, &f2] {
        let r = c.get(portal.url("/admin/teams")).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 303, "the other session ended");
        assert_eq!(r.headers()["location"], "/login?next=%2Fadmin%2Fteams");
    }
    assert_eq!(portal.login(&visitor(), "finance", PASSWORD).await.status, 401);
    assert_eq!(portal.login(&visitor(), "finance", "a-new-password-9").await.status, 303);
    // an admin setting its own password keeps the session it does it from, and only that one
    let admin2 = signed_in(&portal, "admin").await;
    let a = post(&portal, &admin, "/admin/users/admin/password", &[("password", "admins-new-pw-7")]).await;
    assert_eq!(a.status, 303);
    assert_eq!(get(&portal, &admin, "/test/whoami").await.0, 200);
    assert_eq!(admin2.get(portal.url("/test/whoami")).send().await.unwrap().status().as_u16(), 303);
    let entry: (String, String, String) =
        sqlx::query_as("SELECT actor, action, entity FROM audit_log ORDER BY id DESC LIMIT 1")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(entry, ("user:admin".into(), "user.set_password".into(), "user:admin".into()));
    assert_eq!(get(&portal, &admin, "/admin/users/nobody/password").await.0, 404);

    // disabled: its session stops at the next request
    let (status, _) = get(&portal, &kai, "/").await;
    assert_eq!(status, 200);
    let a = post(&portal, &admin, "/admin/users/kai/disable", &[]).await;
    assert_eq!(a.status, 303, "{}", a.body);
    assert_eq!(kai.get(portal.url("/")).send().await.unwrap().status().as_u16(), 303);
    let (_, page) = get(&portal, &admin, "/admin/users").await;
    assert!(page.contains(r#"<span class="badge disabled">已停用</span>"#), "{page}");
    let a = post(&portal, &admin, "/admin/users/admin/disable", &[]).await;
    assert!(a.status == 422 && a.body.contains("不能停用自己的账号"), "{}", a.body);

    // finance, viewer, a team lead: the not-found page, and their forms write nothing
    let viewer = signed_in(&portal, "viewer").await;
    let lead = signed_in(&portal, "lead").await;
    let finance = visitor();
    assert_eq!(portal.login(&finance, "finance", "a-new-password-9").await.status, 303);
    let not_found = missing(&portal, &viewer).await;
    let users_before: i64 = sqlx::query_scalar("SELECT count(*) FROM users").fetch_one(&pool).await.unwrap();
    let audit_before = write_counts(&pool).await;
    for c in [&finance, &viewer, &lead] {
        for path in ["/admin/users", "/admin/users/viewer/password", "/admin/tokens"] {
            let (status, body) = get(&portal, c, path).await;
            assert_eq!((status, body == not_found), (404, true), "{path}");
        }
        assert_eq!(
            post(&portal, c, "/admin/users", &[("username", "evil"), ("role", "admin"), ("password", "another-pw-1")])
                .await
                .status,
            404
        );
        assert_eq!(post(&portal, c, "/admin/users/viewer/password", &[("password", "another-pw-1")]).await.status, 404);
        assert_eq!(post(&portal, c, "/admin/users/mei/disable", &[]).await.status, 404);
        assert_eq!(post(&portal, c, "/admin/tokens", &[("name", "evil"), ("role", "admin")]).await.status, 404);
    }
    let users_after: i64 = sqlx::query_scalar("SELECT count(*) FROM users").fetch_one(&pool).await.unwrap();
    assert_eq!(users_after, users_before);
    assert_eq!(write_counts(&pool).await, audit_before);
    assert_eq!(portal.login(&visitor(), "viewer", PASSWORD).await.status, 303, "viewer's password unchanged");
    let disabled: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT disabled_at FROM users WHERE username = 'mei'").fetch_one(&pool).await.unwrap();
    assert!(disabled.is_none());
}

/// The secret on a page that just issued a token.
fn shown_secret(page: &str) -> Option<String> {
    let start = page.find(r#"id="new-token">"#)? + r#"id="new-token">"#.len();
    Some(page[start..].split('<').next()?.to_string())
}

#[sqlx::test]
async fn a_token_is_shown_once_and_works_on_the_api(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let portal = TestPortal::start(pool.clone()).await;
    let admin = signed_in(&portal, "admin").await;
    let (status, page) = get(&portal, &admin, "/admin/tokens").await;
    assert_eq!(status, 200, "{page}");
    let state = cardhour::usecase::Services::new(pool.clone(), chrono_tz::Asia::Shanghai);
    let listed = cardhour::usecase::tokens::list(&state).await.unwrap();
    assert_eq!(listed.len(), 4);
    for k in &listed {
        assert!(page.contains(&format!(r#"<td class="num">{}</td><td>{}</td>"#, k.id, k.name)), "{}", k.name);
    }

    let a = post(
        &portal,
        &admin,
        "/admin/tokens",
        &[("name", "billing-bot"), ("role", "team_lead"), ("teams", "vision"), ("expires", "2099-01-01")],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.body);
    let secret = shown_secret(&a.body).expect("the secret on the answer");
    assert!(secret.starts_with("chr_") && secret.len() == 47, "{secret}");
    assert!(a.body.contains("这是唯一一次显示该令牌"), "{}", a.body);
    // a bearer of the API, with the role and teams it was made with
    let (status, teams) = api.call(Method::GET, "/api/v1/teams", Some(&secret), None).await;
    assert_eq!(status, 200, "{teams}");
    assert_eq!(teams, json!([{"id": "vision", "name": "视觉组", "owner": "owner"}]));
    let (status, _) = api.call(Method::GET, "/api/v1/audit", Some(&secret), None).await;
    assert_eq!(status, 403, "a team lead token");
    // never again: not on the next visit, not in the database, not in the audit log
    let (_, again) = get(&portal, &admin, "/admin/tokens").await;
    assert!(!again.contains(&secret) && shown_secret(&again).is_none(), "shown twice");
    assert!(again.contains("billing-bot") && again.contains("2099-01-01 00:00 (Asia/Shanghai)"), "{again}");
    let dump: String = sqlx::query_scalar("SELECT (SELECT json_agg(t)::text FROM api_tokens t) || (SELECT json_agg(a)::text FROM audit_log a) || (SELECT coalesce(json_agg(s)::text, '') FROM portal_sessions s)").fetch_one(&pool).await.unwrap();
    assert!(!dump.contains(&secret), "the secret is stored somewhere");
    let log = audit(&api).await;
    assert_eq!((log[0]["action"].as_str(), log[0]["actor"].as_str()), (Some("token.create"), Some("user:admin")));
    let id = log[0]["after"]["id"].as_i64().unwrap();
    assert_eq!(log[0]["after"]["teams"], json!(["vision"]));

    // revoked: the API refuses it
    let a = post(&portal, &admin, &format!("/admin/tokens/{id}/revoke"), &[]).await;
    assert_eq!(a.status, 303, "{}", a.body);
    assert_eq!(api.call(Method::GET, "/api/v1/teams", Some(&secret), None).await.0, 401);
    assert_eq!(audit(&api).await[0]["action"], "token.revoke");
    let a = post(&portal, &admin, &format!("/admin/tokens/{id}/revoke"), &[]).await;
    assert_eq!(a.status, 404, "revoked already");
    assert_eq!(post(&portal, &admin, "/admin/tokens/abc/revoke", &[]).await.status, 404);

    let long = "x".repeat(101);
    for (fields, message) in [
        (vec![("name", ""), ("role", "viewer")], "不能为空"),
        (vec![("name", long.as_str()), ("role", "viewer")], "最多 100 个字符"),
        (vec![("name", "a\0"), ("role", "viewer")], "不能包含 NUL 字符"),
        (vec![("name", "bot"), ("role", "root")], "不是角色"),
        (vec![("name", "bot"), ("role", "team_lead")], "团队负责人的令牌至少需要一个团队"),
        (vec![("name", "bot"), ("role", "viewer"), ("teams", "vision")], "团队负责人的令牌至少需要一个团队"),
        (vec![("name", "bot"), ("role", "team_lead"), ("teams", "nope")], "团队 `nope` 不存在"),
        (vec![("name", "bot"), ("role", "viewer"), ("expires", "2020-01-01")], "必须晚于现在"),
        (vec![("name", "bot"), ("role", "viewer"), ("expires", "3000-01-01")], "必须在 2000-01-01 与 2100-12-31 之间"),
        (vec![("name", "bot"), ("role", "viewer"), ("expires", "soon")], "`soon` 不是日期"),
    ] {
        refused(&portal, &admin, "/admin/tokens", &fields, message).await;
    }
    refused(
        &portal,
        &admin,
        "/admin/tokens?lang=en",
        &[("name", "bot"), ("role", "viewer"), ("expires", "2020-01-01")],
        "2019-12-31T16:00:00+00:00 is not in the future",
    )
    .await;
}

#[sqlx::test]
async fn the_audit_log_pages_newest_first_as_the_api(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let portal = TestPortal::start(pool.clone()).await;
    for i in 0..57 {
        let t = json!({"name": format!("团队 {i}")});
        assert_eq!(api.call(Method::PUT, &format!("/api/v1/teams/t{i}"), Some(&api.finance), Some(t)).await.0, 200);
    }
    let log = audit(&api).await;
    // the portal's four users, then the 57 teams
    assert_eq!(log.len(), 61);
    let viewer = signed_in(&portal, "viewer").await;
    let ids = |page: &str| -> Vec<i64> {
        page.split("<tr><td class=\"num\">").skip(1).map(|r| r.split('<').next().unwrap().parse().unwrap()).collect()
    };
    let (status, first) = get(&portal, &viewer, "/admin/audit").await;
    assert_eq!(status, 200, "{first}");
    let want: Vec<i64> = log.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    assert_eq!(ids(&first), want[..50]);
    assert!(first.contains("team:t56") && first.contains("团队 56") && first.contains(":finance"), "{first}");
    let older = format!("/admin/audit?before={}", want[49]);
    assert!(first.contains(&format!(r#"href="{older}""#)), "{first}");
    let (_, second) = get(&portal, &viewer, &older).await;
    assert_eq!(ids(&second), want[50..]);
    // the last page links the newest, and no older one (the language switch keeps the page's own query)
    assert!(
        second.contains(r#"href="/admin/audit">最新"#) && !second.contains(r#"href="/admin/audit?before="#),
        "{second}"
    );
    assert_eq!(get(&portal, &viewer, "/admin/audit?before=abc").await.0, 404);
    let lead = signed_in(&portal, "lead").await;
    assert_eq!(get(&portal, &lead, "/admin/audit").await.0, 404);
}
