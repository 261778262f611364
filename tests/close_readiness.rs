//! A close only of a complete month (SPEC §6): the readiness lists what stands in the way — an hour not
//! ingested, the watermark short of the month's end, a GPU model without a rate, a read that failed (recorded by a
//! real `cardhour ingest` against a dead source, made good by a later read from a real Prometheus) — closing such
//! a month is a 409 naming them, an override with a reason closes it with the reason in the audit log and in the
//! PDF's text, and a complete month closes without one.
//!
//! Ground truth, by hand: cluster `c1` stores every hour of October 2026 in Asia/Shanghai (2026-09-30T16:00Z ..
//! 2026-10-31T16:00Z, 744 hours) but 2026-10-15T03:00Z, and every hour of November; one 8-card A100 node.

use crate::common;

use common::api::TestApi;
use common::{TestDb, TestPrometheus, free_port, run_cardhour, run_cardhour_ok};
use reqwest::Method;
use serde_json::{Value, json};

const MISSING: &str = "2026-10-15T03:00:00Z";

fn kinds(readiness: &Value) -> Vec<String> {
    let mut k: Vec<String> = readiness["blockers"]
        .as_array()
        .unwrap_or_else(|| panic!("blockers: {readiness}"))
        .iter()
        .map(|b| b["kind"].as_str().unwrap().to_string())
        .collect();
    k.sort();
    k
}

/// The stored state of `c1`: hours, node capacity (rolled up per billing day) and the watermark, as an ingest
/// leaves them.
fn store_cluster(db: &TestDb) {
    db.psql(&format!(
        "INSERT INTO clusters (name, prometheus_url) VALUES ('c1', 'http://127.0.0.1:1');
         INSERT INTO ingested_hours (cluster, hour, scrape_interval_ms, usage_rows)
         SELECT 'c1', h, 60000, 0 FROM generate_series('2026-09-30T16:00:00Z'::timestamptz,
                                                       '2026-11-30T15:00:00Z', interval '1 hour') h
         WHERE h <> '{MISSING}';
         INSERT INTO node_capacity_hourly (cluster, hour, node, gpu_model, cards, card_seconds)
         SELECT cluster, hour, 'n1', 'NVIDIA A100-SXM4-80GB', 8, 8 * 3600 FROM ingested_hours;
         SELECT refresh_daily('c1', d::date) FROM generate_series('2026-10-01'::date, '2026-11-30', '1 day') d;
         INSERT INTO ingest_watermarks (cluster, complete_until) VALUES ('c1', '{MISSING}');"
    ))
    .unwrap();
}

async fn bytes(api: &TestApi, path: &str, token: &str) -> Vec<u8> {
    let r = api.client.get(format!("{}{path}", api.base)).bearer_auth(token).send().await.unwrap();
    assert_eq!(r.status(), 200, "{path}");
    r.bytes().await.unwrap().to_vec()
}

fn pdftotext(pdf: &[u8]) -> String {
    assert!(pdf.starts_with(b"%PDF-"));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.pdf");
    std::fs::write(&path, pdf).unwrap();
    let out = std::process::Command::new("pdftotext").arg(&path).arg("-").output().expect("pdftotext (poppler-utils)");
    assert!(out.status.success());
    // the reason may be wrapped over lines
    String::from_utf8(out.stdout).unwrap().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A Prometheus holding nothing of `c1` (one unrelated old sample).
fn empty_prometheus(dir: &std::path::Path) -> TestPrometheus {
    let path = dir.join("empty.om");
    std::fs::write(&path, "# TYPE up gauge\nup{job=\"other\"} 1 1000000000\n# EOF\n").unwrap();
    TestPrometheus::from_openmetrics(&path).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_incomplete_month_closes_only_by_an_override_with_a_reason() {
    let db = TestDb::migrated().unwrap();
    store_cluster(&db);
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool).await;
    let fin = Some(api.finance.as_str());

    // what stands in the way: the hour, the watermark, the A100 without a rate
    let (status, r) = api.call(Method::GET, "/api/v1/bills/2026-10/readiness", fin, None).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["ready"], false);
    assert_eq!(kinds(&r), ["missing_hours", "unknown_gpu_model", "watermark_before_month_end"], "{r}");
    let missing = r["blockers"].as_array().unwrap().iter().find(|b| b["kind"] == "missing_hours").unwrap();
    assert_eq!(missing["cluster"], "c1");
    assert_eq!(missing["hours"], 1);
    assert_eq!(missing["spans"], json!([{"from": MISSING, "to": "2026-10-15T04:00:00Z"}]));
    let model = r["blockers"].as_array().unwrap().iter().find(|b| b["kind"] == "unknown_gpu_model").unwrap();
    // 744 hours × 8 cards of capacity, none used
    assert_eq!((model["gpu_model"].as_str(), model["capacity_card_hours"].as_str()), (Some("A100-80GB"), Some("5944")));
    // only global readers see cluster-wide problems
    let (status, _) = api.call(Method::GET, "/api/v1/bills/2026-10/readiness", Some(&api.lead), None).await;
    assert_eq!(status, 403);

    let (status, rate) = api
        .call(
            Method::POST,
            "/api/v1/rates",
            fin,
            Some(json!({"gpu_model": "NVIDIA A100-SXM4-80GB", "effective_from": "2026-01-01", "rate": "12.5"})),
        )
        .await;
    assert_eq!(status, 201, "{rate}");
    let (_, r) = api.call(Method::GET, "/api/v1/bills/2026-10/readiness", fin, None).await;
    assert_eq!(kinds(&r), ["missing_hours", "watermark_before_month_end"], "a rate settles the model: {r}");

    // a close without an override is refused with the list; nothing is frozen
    let (status, err) = api
        .call(
            Method::POST,
            "/api/v1/bills/2026-10/close",
            fin,
            Some(json!({"mode": "showback", "unallocated": "kept_by_platform"})),
        )
        .await;
    assert_eq!(status, 409, "{err}");
    assert_eq!((err["code"].as_str(), err["field"].as_str()), (Some("not_ready"), Some("month")));
    assert!(err["message"].as_str().unwrap().contains(MISSING), "the message names the hour: {err}");
    assert_eq!(kinds(&err), ["missing_hours", "watermark_before_month_end"]);
    assert_eq!(db.psql("SELECT count(*) FROM closed_months").unwrap(), "0");
    for bad in [
        json!({"mode": "showback", "unallocated": "kept_by_platform", "override": {"reason": "  "}}),
        json!({"mode": "showback", "unallocated": "kept_by_platform", "override": {}}),
        json!({"mode": "showback", "unallocated": "kept_by_platform", "override": {"reason": "x", "y": 1}}),
    ] {
        let (status, err) = api.call(Method::POST, "/api/v1/bills/2026-10/close", fin, Some(bad.clone())).await;
        assert_eq!(status, 422, "{bad} → {err}");
        assert!(err["field"].as_str().unwrap().starts_with("override"), "{bad} → {err}");
    }
    assert_eq!(db.psql("SELECT count(*) FROM closed_months").unwrap(), "0");

    // with a reason: closed, the reason audited and printed
    let reason = "Prometheus lost 2026-10-15 03:00 UTC to a disk failure; finance accepts the hour as idle";
    let (status, closed) = api
        .call(
            Method::POST,
            "/api/v1/bills/2026-10/close",
            fin,
            Some(json!({"mode": "showback", "unallocated": "kept_by_platform", "override": {"reason": reason}})),
        )
        .await;
    assert_eq!(status, 201, "{closed}");
    assert_eq!(closed["close_override"]["reason"], reason);
    assert_eq!(closed["close_override"]["by"], closed["closed_by"]);
    assert!(closed["closed_by"].as_str().unwrap().ends_with(":finance"), "{closed}");
    assert_eq!(closed["close_override"]["blockers"].as_array().map(Vec::len), Some(2));
    let audit = db
        .psql("SELECT action || '|' || (after->'override'->>'reason') FROM audit_log WHERE entity = 'month:2026-10'")
        .unwrap();
    assert_eq!(audit, format!("month.close_override|{reason}"));
    let text = pdftotext(&bytes(&api, "/api/v1/exports/2026-10/statements.pdf", &api.finance).await);
    assert!(text.contains(reason), "the reason is on the statement: {text}");
    // what stood in the way, in the statement's words and the billing time zone (layout 4): 03:00Z is 11:00 in
    // Shanghai
    assert!(
        text.contains("集群 c1：1 小时未采集（2026-10-15 11:00 (Asia/Shanghai)"),
        "and what stood in the way: {text}"
    );
    // the reason is frozen with the month: read back after the close
    let (_, month) = api.call(Method::GET, "/api/v1/bills/2026-10", fin, None).await;
    assert_eq!(month["close_override"]["reason"], reason);

    // November: complete, but then a read of 10 Nov 00:00–06:00 fails against a dead source
    let dead = format!("http://127.0.0.1:{}", free_port().unwrap());
    let env = db.env();
    let out = tokio::task::spawn_blocking({
        let (url, dead) = (db.url.clone(), dead.clone());
        move || {
            run_cardhour(
                [
                    "ingest",
                    "--cluster",
                    "c1",
                    "--prometheus",
                    &dead,
                    "--from",
                    "2026-11-10T00:00:00Z",
                    "--to",
                    "2026-11-10T06:00:00Z",
                ],
                &[("DATABASE_URL", url.as_str())],
            )
        }
    })
    .await
    .unwrap();
    assert!(!out.status.success());
    let (_, r) = api.call(Method::GET, "/api/v1/bills/2026-11/readiness", fin, None).await;
    assert_eq!(kinds(&r), ["failed_window"], "{r}");
    let failed = &r["blockers"][0];
    assert_eq!(
        (failed["cluster"].as_str(), failed["from"].as_str(), failed["to"].as_str()),
        (Some("c1"), Some("2026-11-10T00:00:00Z"), Some("2026-11-10T06:00:00Z"))
    );
    assert_eq!(failed["hours_not_read_since"], 6);
    let health: Value = serde_json::from_str(&run_cardhour_ok(["health", "--format", "json"], &env)).unwrap();
    assert_eq!(health["clusters"][0]["failed_windows"][0]["hours_not_read_since"], 6, "{health}");
    let (status, err) = api
        .call(
            Method::POST,
            "/api/v1/bills/2026-11/close",
            fin,
            Some(json!({"mode": "showback", "unallocated": "kept_by_platform"})),
        )
        .await;
    assert_eq!(status, 409, "{err}");
    let cli =
        run_cardhour(["close", "--month", "2026-11", "--mode", "showback", "--unallocated", "kept-by-platform"], &env);
    assert!(!cli.status.success());
    let stderr = String::from_utf8_lossy(&cli.stderr);
    assert!(stderr.contains("2026-11-10T00:00:00Z") && stderr.contains("--override"), "{stderr}");
    let cli = run_cardhour(["readiness", "--month", "2026-11"], &env);
    assert_eq!(cli.status.code(), Some(1));

    // read again (the source answers, holding nothing: the stored empty hours stay as large): made good
    let dir = tempfile::tempdir().unwrap();
    let prom = empty_prometheus(dir.path());
    let ingest = [
        "ingest",
        "--cluster",
        "c1",
        "--prometheus",
        &prom.url,
        "--from",
        "2026-11-10T00:00:00Z",
        "--to",
        "2026-11-10T06:00:00Z",
    ];
    tokio::task::spawn_blocking({
        let url = db.url.clone();
        let args: Vec<String> = ingest.iter().map(|s| s.to_string()).collect();
        move || run_cardhour_ok(args, &[("DATABASE_URL", url.as_str())])
    })
    .await
    .unwrap();
    let (_, r) = api.call(Method::GET, "/api/v1/bills/2026-11/readiness", fin, None).await;
    assert_eq!(r["ready"], true, "{r}");
    let out = run_cardhour_ok(["readiness", "--month", "2026-11"], &env);
    assert!(out.contains("ready to close"), "{out}");
    let out =
        run_cardhour_ok(["close", "--month", "2026-11", "--mode", "showback", "--policy", "kept-by-platform"], &env);
    assert!(out.contains("closed 2026-11 (content hash "), "{out}");
    assert!(!out.contains("override"), "{out}");
    let (_, month) = api.call(Method::GET, "/api/v1/bills/2026-11", fin, None).await;
    assert_eq!(month["status"], "closed");
    assert!(month.get("close_override").is_none(), "{month}");
    assert_eq!(db.psql("SELECT action FROM audit_log WHERE entity = 'month:2026-11'").unwrap(), "month.close");
}
