//! The signed close event (issue 30, SPEC §11) on a real Postgres with real loopback receivers: two endpoints, one
//! down at first; a month closed through the API POSTs one signed event to each — the signature verified here with
//! an HMAC computed independently, each statement's hash checked against the bytes the API serves for it — the
//! endpoint that was down gets it on a later run once it answers, exactly once even with two deliverers at once,
//! and nothing after. Who may configure endpoints, bad input naming its field with nothing written, the secret
//! never answered, a close refused leaving no event; the admin page shows the deliveries' states in Chinese, and
//! `cardhour close-events deliver` sends a retry once it is due.

use crate::common;

use std::time::Duration;

use chrono::Utc;
use common::api::{SEED_MONTH, TestApi, seed};
use common::portal::{PASSWORD, TestPortal, visitor};
use common::webhook::{Recorded, recorder};
use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use sqlx::PgPool;

use cardhour::usecase::close_events::{DeliveryRun, deliver_due};

const GOOD_SECRET: &str = "good-secret-0123456789";
const BAD_SECRET: &str = "down-secret-abcdefghij";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `sha256=<hex>` of HMAC-SHA256(secret, body), computed here, not by cardhour.
fn hmac_of(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    format!("sha256={}", hex(&mac.finalize().into_bytes()))
}

async fn count(pool: &PgPool, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table}")).fetch_one(pool).await.unwrap()
}

fn posts(r: &Recorded) -> Vec<common::webhook::Received> {
    r.lock().unwrap().clone()
}

/// Waits (at most 20 s) until every delivery of the month's event has been tried at least once: the close's own
/// run, spawned after it returned.
async fn tried_once(pool: &PgPool) {
    for _ in 0..200 {
        let untried: i64 = sqlx::query_scalar("SELECT count(*) FROM close_deliveries WHERE attempts = 0")
            .fetch_one(pool)
            .await
            .unwrap();
        if untried == 0 && count(pool, "close_deliveries").await > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the close's delivery run did not try every endpoint");
}

fn header(r: &common::webhook::Received, name: &str) -> String {
    r.headers.get(name).unwrap_or_else(|| panic!("no {name}")).to_str().unwrap().to_string()
}

async fn raw_get(api: &TestApi, path: &str) -> Vec<u8> {
    let resp = api.client.get(format!("{}{path}", api.base)).bearer_auth(&api.finance).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200, "{path}");
    resp.bytes().await.unwrap().to_vec()
}

fn close_body() -> Value {
    json!({"mode": "showback", "unallocated": "kept_by_platform"})
}

/// Two endpoints configured; the month closed (by override: the seed has 7 hours of it).
async fn closed_with_two_endpoints(api: &TestApi, good: &str, bad: &str) -> (i64, i64) {
    let fin = Some(api.finance.as_str());
    let mut ids = Vec::new();
    for (url, secret) in [(good, GOOD_SECRET), (bad, BAD_SECRET)] {
        let (status, e) =
            api.call(Method::POST, "/api/v1/close-endpoints", fin, Some(json!({"url": url, "secret": secret}))).await;
        assert_eq!(status, 201, "{e}");
        ids.push(e["id"].as_i64().unwrap());
    }
    let mut body = close_body();
    body["override"] = json!({"reason": "月底对账"});
    let (status, closed) = api.call(Method::POST, &format!("/api/v1/bills/{SEED_MONTH}/close"), fin, Some(body)).await;
    assert_eq!(status, 201, "{closed}");
    (ids[0], ids[1])
}

#[sqlx::test]
async fn a_close_posts_one_signed_event_to_each_endpoint_until_acknowledged(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let fin = Some(api.finance.as_str());
    // the good one answers at once; the other is down (503) and slow, so two deliverers overlap on it
    let (_, good, good_addr) = recorder(200, Duration::ZERO).await;
    let (bad_status, bad, bad_addr) = recorder(503, Duration::from_millis(300)).await;
    let (good_url, bad_url) = (format!("http://{good_addr}/hook"), format!("http://{bad_addr}/hook"));

    // only finance and admin configure endpoints; bad input is a 422 naming the field, nothing written
    let input = json!({"url": good_url, "secret": GOOD_SECRET});
    for token in [&api.lead, &api.viewer] {
        let (status, _) = api.call(Method::POST, "/api/v1/close-endpoints", Some(token), Some(input.clone())).await;
        assert_eq!(status, 403);
    }
    let audit_before = count(&pool, "audit_log").await;
    for (body, field) in [
        (json!({"url": "ftp://erp.example/hook", "secret": GOOD_SECRET}), "url"),
        (json!({"url": "/hook", "secret": GOOD_SECRET}), "url"),
        (json!({"url": "https://erp:pw@erp.example/hook", "secret": GOOD_SECRET}), "url"),
        (json!({"url": "HTTPS://erp.example/hook", "secret": GOOD_SECRET}), "url"),
        (json!({"url": good_url, "secret": "short-secret"}), "secret"),
    ] {
        let (status, e) = api.call(Method::POST, "/api/v1/close-endpoints", fin, Some(body.clone())).await;
        assert_eq!(status, 422, "{body}: {e}");
        assert_eq!(e["errors"][0]["field"], field, "{e}");
    }
    assert_eq!(count(&pool, "close_endpoints").await, 0);
    assert_eq!(count(&pool, "audit_log").await, audit_before);

    // a close refused for what stands in the way rolls back: no event, no delivery
    let (status, refused) =
        api.call(Method::POST, &format!("/api/v1/bills/{SEED_MONTH}/close"), fin, Some(close_body())).await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!((count(&pool, "close_events").await, count(&pool, "close_deliveries").await), (0, 0));

    let (good_id, bad_id) = closed_with_two_endpoints(&api, &good_url, &bad_url).await;
    tried_once(&pool).await;
    assert_eq!(count(&pool, "close_events").await, 1);

    // the secret is never answered again: masked in the list (readers too) and in the audit log
    for token in [&api.finance, &api.viewer, &api.admin] {
        let (status, list) = api.call(Method::GET, "/api/v1/close-endpoints", Some(token), None).await;
        assert_eq!(status, 200);
        let text = list.to_string();
        assert!(!text.contains(GOOD_SECRET) && !text.contains(BAD_SECRET), "{text}");
        // a fingerprint of the secret, none of its characters
        let fingerprint = format!("sha256:{}", &hex(&Sha256::digest(GOOD_SECRET.as_bytes()))[..8]);
        assert_eq!(list[1]["secret"], fingerprint.as_str(), "{list}");
    }
    assert_eq!(api.call(Method::GET, "/api/v1/close-endpoints", Some(&api.lead), None).await.0, 403);
    let (_, log) = api.call(Method::GET, "/api/v1/audit", fin, None).await;
    let creates: Vec<&Value> =
        log.as_array().unwrap().iter().filter(|e| e["action"] == "close_endpoint.create").collect();
    assert_eq!(creates.len(), 2, "{log}");
    assert!(!log.to_string().contains(GOOD_SECRET));

    // the good endpoint: exactly one POST, signed with its secret, of the recorded body
    let got = posts(&good);
    assert_eq!(got.len(), 1);
    let post = &got[0];
    let body: Value = serde_json::from_slice(&post.body).unwrap();
    let event_id = body["event_id"].as_str().unwrap().to_string();
    assert_eq!(header(post, "content-type"), "application/json");
    assert_eq!(header(post, "x-cardhour-event-id"), event_id);
    assert_eq!(header(post, "idempotency-key"), event_id);
    assert_eq!(header(post, "x-cardhour-signature"), hmac_of(GOOD_SECRET, &post.body));
    assert_ne!(header(post, "x-cardhour-signature"), hmac_of(BAD_SECRET, &post.body));
    assert_eq!((body["event"].as_str(), body["month"].as_str()), (Some("month.closed"), Some(SEED_MONTH)));
    let by = body["closed_by"].as_str().unwrap();
    assert!(by.starts_with("token:") && by.ends_with(":finance"), "{body}");
    assert_eq!(body["policy"]["mode"], "showback");
    assert!(body["capacity_cost"].is_string() && body["unallocated"].is_string(), "{body}");
    let stored: String = sqlx::query_scalar("SELECT payload FROM close_events").fetch_one(&pool).await.unwrap();
    assert_eq!(stored.as_bytes(), post.body.as_slice(), "the body POSTed is the one recorded");

    // each statement's hash is sha256 of the bytes the API serves for the closed month
    let statements = body["statements"].as_array().unwrap();
    let teams: Vec<&str> = statements.iter().map(|s| s["team"].as_str().unwrap()).collect();
    assert_eq!(teams, ["nlp", "vision"], "{body}");
    for s in statements {
        let team = s["team"].as_str().unwrap();
        assert_eq!(s["id"], format!("{SEED_MONTH}/{team}"));
        let served = raw_get(&api, &format!("/api/v1/bills/{SEED_MONTH}/teams/{team}")).await;
        assert_eq!(s["content_sha256"], hex(&Sha256::digest(&served)), "{team}");
        let statement: Value = serde_json::from_slice(&served).unwrap();
        assert_eq!(s["total"], statement["total"], "{team}");
    }

    // the endpoint that was down: tried once (503), retried with backoff — nothing before its time
    let got = posts(&bad);
    assert_eq!(got.iter().map(|r| r.answered).collect::<Vec<_>>(), [503]);
    assert_eq!(header(&got[0], "x-cardhour-signature"), hmac_of(BAD_SECRET, &got[0].body));
    assert_eq!(got[0].body, post.body, "every endpoint gets the same bytes");
    let (_, events) = api.call(Method::GET, "/api/v1/close-events", fin, None).await;
    let deliveries = &events[0]["deliveries"];
    let by_endpoint = |id: i64| deliveries.as_array().unwrap().iter().find(|d| d["endpoint_id"] == id).unwrap().clone();
    assert_eq!(by_endpoint(good_id)["state"], "delivered", "{events}");
    let retrying = by_endpoint(bad_id);
    assert_eq!((retrying["state"].as_str(), retrying["attempts"].as_i64()), (Some("retrying"), Some(1)), "{events}");
    assert_eq!(retrying["last_status"], 503);
    let tried: chrono::DateTime<Utc> = retrying["attempt_log"][0]["at"].as_str().unwrap().parse().unwrap();
    let next: chrono::DateTime<Utc> = retrying["next_attempt_at"].as_str().unwrap().parse().unwrap();
    assert_eq!(next - tried, chrono::Duration::seconds(30), "the first retry 30 s later");
    assert_eq!(deliver_due(&pool, Utc::now()).await.unwrap(), DeliveryRun::default(), "not due yet");
    assert_eq!(posts(&bad).len(), 1);

    // back up: two deliverers at once, the retry due for both — it is POSTed once
    bad_status.store(200, std::sync::atomic::Ordering::SeqCst);
    let later = Utc::now() + chrono::Duration::minutes(5);
    let (a, b) = tokio::join!(deliver_due(&pool, later), deliver_due(&pool, later));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!((a.delivered + b.delivered, a.failed + b.failed), (1, 0), "{a:?} {b:?}");
    assert_eq!(posts(&bad).iter().map(|r| r.answered).collect::<Vec<_>>(), [503, 200]);
    let ok = &posts(&bad)[1];
    assert_eq!((header(ok, "idempotency-key"), ok.body.as_slice()), (event_id.clone(), post.body.as_slice()));

    // acknowledged: never sent again, whatever the clock
    let much_later = Utc::now() + chrono::Duration::days(2);
    assert_eq!(deliver_due(&pool, much_later).await.unwrap(), DeliveryRun::default());
    assert_eq!((posts(&good).len(), posts(&bad).len()), (1, 2));
    let (_, events) = api.call(Method::GET, "/api/v1/close-events", Some(&api.viewer), None).await;
    let d = events[0]["deliveries"].as_array().unwrap();
    assert!(d.iter().all(|d| d["state"] == "delivered" && d["next_attempt_at"].is_null()), "{events}");
    let log = &d.iter().find(|d| d["endpoint_id"] == bad_id).unwrap()["attempt_log"];
    assert_eq!((log[0]["status"].as_i64(), log[1]["status"].as_i64()), (Some(503), Some(200)), "{log}");
    assert_eq!(api.call(Method::GET, "/api/v1/close-events", Some(&api.lead), None).await.0, 403);
    let (status, e) = api.call(Method::GET, "/api/v1/close-events?limit=0", fin, None).await;
    assert_eq!((status, e["errors"][0]["field"].as_str()), (422, Some("limit")), "{e}");

    // deactivating: finance (not a lead), audited once, idempotent
    let path = format!("/api/v1/close-endpoints/{bad_id}/deactivate");
    assert_eq!(api.call(Method::POST, &path, Some(&api.lead), None).await.0, 403);
    let (status, e) = api.call(Method::POST, &path, fin, None).await;
    assert_eq!((status, e["active"].as_bool()), (200, Some(false)), "{e}");
    assert_eq!(api.call(Method::POST, &path, fin, None).await.0, 200);
    let deactivations: i64 =
        sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE action = 'close_endpoint.deactivate'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(deactivations, 1);
    assert_eq!(api.call(Method::POST, "/api/v1/close-endpoints/999999/deactivate", fin, None).await.0, 404);
}

#[sqlx::test]
async fn the_close_events_page_shows_the_deliveries_in_chinese(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    let portal = TestPortal::start(pool.clone()).await;
    seed(&api).await;
    let (_, _, good_addr) = recorder(200, Duration::ZERO).await;
    let (bad_status, bad, bad_addr) = recorder(503, Duration::ZERO).await;
    closed_with_two_endpoints(&api, &format!("http://{good_addr}/hook"), &format!("http://{bad_addr}/hook")).await;
    tried_once(&pool).await;

    let c = visitor();
    assert_eq!(portal.login(&c, "finance", PASSWORD).await.status, 303);
    let page = c.get(portal.url("/admin/close-events")).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let page = page.text().await.unwrap();
    let good_print = format!("sha256:{}", &hex(&Sha256::digest(GOOD_SECRET.as_bytes()))[..8]);
    let bad_print = format!("sha256:{}", &hex(&Sha256::digest(BAD_SECRET.as_bytes()))[..8]);
    for words in ["结账通知", "已送达", "重试中", "HTTP 503", "尝试次数", "下次重试", good_print.as_str(), SEED_MONTH]
    {
        assert!(page.contains(words), "{words} missing: {page}");
    }
    assert!(!page.contains(GOOD_SECRET) && !page.contains("delivered<"), "{page}");
    // times in the billing time zone, as the other pages print them
    assert!(page.contains("(Asia/Shanghai)"), "{page}");
    // every word Chinese but the data (the endpoints' URLs, the events' ids, the zone, an HTTP status)
    let ids: Vec<String> = sqlx::query_scalar("SELECT id FROM close_events").fetch_all(&pool).await.unwrap();
    let (good_url, bad_url) = (format!("http://{good_addr}/hook"), format!("http://{bad_addr}/hook"));
    let mut data = vec![good_url.as_str(), bad_url.as_str(), "Asia/Shanghai", "HTTP", "token:2:finance"];
    data.extend([good_print.as_str(), bad_print.as_str()]);
    data.extend(ids.iter().map(String::as_str));
    let text = common::files::visible(&page);
    let english = cardhour::glossary::english_words(&text, &data);
    assert!(english.is_empty(), "English on the zh page: {english:?}");
    let en = c.get(portal.url("/admin/close-events?lang=en")).send().await.unwrap().text().await.unwrap();
    assert!(en.contains("delivered") && en.contains("retrying"), "{en}");

    // `cardhour close-events deliver`: nothing before the retry's time; once it is due (the backoff made to pass
    // here) the endpoint, up again, gets it
    let o = pool.connect_options();
    let url =
        format!("postgres://{}@{}:{}/{}", o.get_username(), o.get_host(), o.get_port(), o.get_database().unwrap());
    // awaited, not blocking: the receivers are served by this test's runtime meanwhile
    let deliver = async || {
        tokio::process::Command::new(common::cardhour_bin())
            .args(["close-events", "deliver"])
            .env("DATABASE_URL", &url)
            .output()
            .await
            .unwrap()
    };
    // (the retry made surely not due yet: a loaded machine may take its 30 s to get here)
    sqlx::query("UPDATE close_deliveries SET next_attempt_at = now() + interval '1 hour' WHERE delivered_at IS NULL")
        .execute(&pool)
        .await
        .unwrap();
    let out = deliver().await;
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 delivered, 0 not delivered"), "{out:?}");
    bad_status.store(200, std::sync::atomic::Ordering::SeqCst);
    sqlx::query("UPDATE close_deliveries SET next_attempt_at = now() WHERE delivered_at IS NULL")
        .execute(&pool)
        .await
        .unwrap();
    let out = deliver().await;
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 delivered, 0 not delivered"), "{out:?}");
    assert_eq!(posts(&bad).iter().map(|r| r.answered).collect::<Vec<_>>(), [503, 200]);
    // (`?lang=` is remembered: back to zh-CN)
    let page = c.get(portal.url("/admin/close-events?lang=zh-CN")).send().await.unwrap().text().await.unwrap();
    assert!(!page.contains("重试中") && page.matches("已送达").count() >= 2, "{page}");
}

/// A close that fails at its commit, after its event and deliveries were written, leaves nothing: no closed month, no
/// event, no delivery, nothing POSTed (the outbox is the close's own transaction). A failure injected by a deferred
/// trigger on `close_events`, which fires at the commit.
#[sqlx::test]
async fn a_close_failing_at_its_commit_leaves_no_event(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    seed(&api).await;
    let (_, good, good_addr) = recorder(200, Duration::ZERO).await;
    let fin = Some(api.finance.as_str());
    let input = json!({"url": format!("http://{good_addr}/hook"), "secret": GOOD_SECRET});
    assert_eq!(api.call(Method::POST, "/api/v1/close-endpoints", fin, Some(input)).await.0, 201);
    for sql in [
        "CREATE FUNCTION fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RAISE EXCEPTION 'injected failure at commit'; END $$",
        "CREATE CONSTRAINT TRIGGER fail_at_commit AFTER INSERT ON close_events DEFERRABLE INITIALLY DEFERRED
             FOR EACH ROW EXECUTE FUNCTION fail_at_commit()",
    ] {
        sqlx::query(sql).execute(&pool).await.unwrap();
    }
    let mut body = close_body();
    body["override"] = json!({"reason": "月底对账"});
    let (status, e) =
        api.call(Method::POST, &format!("/api/v1/bills/{SEED_MONTH}/close"), fin, Some(body.clone())).await;
    assert_eq!(status, 500, "{e}");
    assert!(!e.to_string().contains("injected"), "a 5xx leaks nothing: {e}");
    let closed: i64 = sqlx::query_scalar("SELECT count(*) FROM closed_months").fetch_one(&pool).await.unwrap();
    assert_eq!((closed, count(&pool, "close_events").await, count(&pool, "close_deliveries").await), (0, 0, 0));
    // nothing is delivered later either, and the month still closes once the failure is gone
    let run = deliver_due(&pool, Utc::now()).await.unwrap();
    assert_eq!(run, DeliveryRun::default(), "{run:?}");
    assert!(posts(&good).is_empty());
    sqlx::query("DROP TRIGGER fail_at_commit ON close_events").execute(&pool).await.unwrap();
    let (status, closed) = api.call(Method::POST, &format!("/api/v1/bills/{SEED_MONTH}/close"), fin, Some(body)).await;
    assert_eq!(status, 201, "{closed}");
    assert_eq!(count(&pool, "close_events").await, 1);
}
