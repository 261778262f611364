//! Cursor pagination of `/usage`, `/idle`, `/mappings` and `/audit`: walking every page (following
//! `Link: <…>; rel="next"`) gives exactly the unpaged answer, and rows added between pages — before and after the
//! cursor in the list's order — make no row come twice and none of the first rows go missing (keyset, not offset).

use crate::common;

use std::collections::BTreeSet;

use cardhour::metering::HourOutput;
use common::api::{SEED_FROM, SEED_TO, TestApi, row, seed};
use reqwest::Method;
use serde_json::{Value, json};
use sqlx::PgPool;

/// One page: its rows and the next page's path (from `Link`).
async fn page(api: &TestApi, path: &str) -> (Vec<Value>, Option<String>) {
    let resp = api.client.get(format!("{}{path}", api.base)).bearer_auth(&api.admin).send().await.unwrap();
    assert_eq!(resp.status(), 200, "{path}");
    let next = resp.headers().get("link").map(|l| {
        let l = l.to_str().unwrap();
        assert!(l.ends_with("; rel=\"next\""), "{l}");
        l.split(';').next().unwrap().trim_matches(['<', '>', ' ']).to_string()
    });
    (resp.json::<Vec<Value>>().await.unwrap(), next)
}

/// Every page from `first`, and the number of pages.
async fn walk(api: &TestApi, first: &str) -> (Vec<Value>, usize) {
    let (mut rows, mut next) = page(api, first).await;
    let mut pages = 1;
    while let Some(path) = next {
        let (more, n) = page(api, &path).await;
        assert!(!more.is_empty(), "a page named by Link is never empty");
        rows.extend(more);
        next = n;
        pages += 1;
    }
    (rows, pages)
}

/// `n` pods of cluster `cluster` in the seed's first hour, namespaces `<prefix>-<i % 5>`.
async fn add_pods(api: &TestApi, cluster: &str, prefix: &str, n: usize) {
    let out = HourOutput {
        interval_ms: Some(60_000),
        rows: (0..n).map(|i| row(&format!("{prefix}-{}", i % 5), &format!("pod-{i:02}"), "vision", 1.0)).collect(),
        ..HourOutput::default()
    };
    let hour = SEED_FROM.parse::<chrono::DateTime<chrono::Utc>>().unwrap();
    let mut tx = api.pool.begin().await.unwrap();
    cardhour::db::clusters::upsert(&mut tx, cluster, "http://127.0.0.1:9").await.unwrap();
    cardhour::db::usage::replace_hour(&mut tx, cluster, hour, &out).await.unwrap();
    tx.commit().await.unwrap();
}

async fn add_mapping(api: &TestApi, namespace: &str) {
    let m = json!({"namespace": namespace, "team_id": "vision", "valid_from": "2026-09-01"});
    assert_eq!(api.call(Method::POST, "/api/v1/mappings", Some(&api.finance), Some(m)).await.0, 201, "{namespace}");
}

fn usage_key(r: &Value) -> (String, String) {
    (r["namespace"].as_str().unwrap().to_string(), r["pod"].as_str().unwrap().to_string())
}

#[sqlx::test]
async fn walking_every_page_equals_the_unpaged_answer(pool: PgPool) {
    let api = TestApi::start(pool).await;
    seed(&api).await;
    add_pods(&api, "c2", "batch", 23).await;
    for i in 0..10 {
        add_mapping(&api, &format!("team-ns-{i}")).await;
    }
    let range = format!("from={SEED_FROM}&to={SEED_TO}");
    let lists = [
        // 2 pods of the seed + 23 = 25 rows
        (format!("/api/v1/usage?{range}&group_by=pod"), 25),
        (format!("/api/v1/usage?{range}&group_by=namespace"), 7),
        (format!("/api/v1/idle?to={SEED_TO}&include_ended=true"), 25),
        ("/api/v1/mappings".to_string(), 12),
        // a rate, 2 + 10 mappings, 2 budgets
        ("/api/v1/audit".to_string(), 15),
    ];
    for (path, rows) in lists {
        let sep = if path.contains('?') { '&' } else { '?' };
        let (whole, _) = page(&api, &format!("{path}{sep}limit=1000")).await;
        assert_eq!(whole.len(), rows, "{path}");
        let (walked, pages) = walk(&api, &format!("{path}{sep}limit=4")).await;
        assert_eq!(pages, rows.div_ceil(4), "{path}");
        assert_eq!(walked, whole, "{path}: the pages differ from the whole list");
    }
    // the default page is 100 rows; more than 1000 is refused, as is a cursor this server did not make
    let (status, err) = api.call(Method::GET, "/api/v1/mappings?limit=1001", Some(&api.admin), None).await;
    assert_eq!((status, err["field"].as_str()), (422, Some("limit")));
    let (status, err) = api.call(Method::GET, "/api/v1/audit?after=bm9wZQ", Some(&api.admin), None).await;
    assert_eq!((status, err["field"].as_str()), (422, Some("after")));
}

#[sqlx::test]
async fn rows_added_between_pages_make_no_row_come_twice_or_go_missing(pool: PgPool) {
    let api = TestApi::start(pool).await;
    seed(&api).await;
    add_pods(&api, "c2", "mid", 20).await;
    for i in 0..9 {
        add_mapping(&api, &format!("mid-{i}")).await;
    }
    let range = format!("from={SEED_FROM}&to={SEED_TO}");

    // usage by pod: before each page, pods sorting first (`aaa-…`) and last (`zzz-…`) appear in other clusters
    let (first, _) = page(&api, &format!("/api/v1/usage?{range}&group_by=pod&limit=1000")).await;
    let before: BTreeSet<_> = first.iter().map(usage_key).collect();
    assert_eq!(before.len(), 22);
    let (mut seen, mut next) = page(&api, &format!("/api/v1/usage?{range}&group_by=pod&limit=5")).await;
    let mut round = 0;
    while let Some(path) = next {
        round += 1;
        add_pods(&api, &format!("early{round}"), &format!("aaa{round}"), 3).await;
        add_pods(&api, &format!("late{round}"), &format!("zzz{round}"), 3).await;
        let (more, n) = page(&api, &path).await;
        seen.extend(more);
        next = n;
    }
    assert!(round >= 4, "{round} pages");
    let keys: Vec<_> = seen.iter().map(usage_key).collect();
    let unique: BTreeSet<_> = keys.iter().cloned().collect();
    assert_eq!(keys.len(), unique.len(), "a pod came twice");
    assert!(before.is_subset(&unique), "a pod that was there from the start went missing");
    // the late pods sort after every cursor: the walk reached them
    assert!(unique.iter().any(|(ns, _)| ns.starts_with("zzz")));

    // mappings: new namespaces before and after the cursor; the audit log grows at its head meanwhile
    let (first, _) = page(&api, "/api/v1/mappings?limit=1000").await;
    let ids_before: BTreeSet<i64> = first.iter().map(|m| m["id"].as_i64().unwrap()).collect();
    let (audit_first, _) = page(&api, "/api/v1/audit?limit=1000").await;
    let audit_before: BTreeSet<i64> = audit_first.iter().map(|e| e["id"].as_i64().unwrap()).collect();
    let (mut mappings, mut next_m) = page(&api, "/api/v1/mappings?limit=3").await;
    let (mut audit, mut next_a) = page(&api, "/api/v1/audit?limit=3").await;
    let mut round = 0;
    while next_m.is_some() || next_a.is_some() {
        round += 1;
        add_mapping(&api, &format!("aaa-{round}")).await;
        add_mapping(&api, &format!("zzz-{round}")).await;
        if let Some(path) = next_m.take() {
            let (more, n) = page(&api, &path).await;
            mappings.extend(more);
            next_m = n;
        }
        if let Some(path) = next_a.take() {
            let (more, n) = page(&api, &path).await;
            audit.extend(more);
            next_a = n;
        }
    }
    for (what, rows, before) in [("mapping", &mappings, &ids_before), ("audit entry", &audit, &audit_before)] {
        let ids: Vec<i64> = rows.iter().map(|r| r["id"].as_i64().unwrap()).collect();
        let unique: BTreeSet<i64> = ids.iter().copied().collect();
        assert_eq!(ids.len(), unique.len(), "a {what} came twice");
        assert!(before.is_subset(&unique), "a {what} that was there from the start went missing");
    }
    // the audit log is newest first and grows at its head: a walk begun earlier sees none of the new entries
    assert_eq!(audit.len(), audit_before.len());
}
