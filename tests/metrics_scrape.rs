//! cardhour's own metrics scraped by a real Prometheus: a worker ingests a simulated cluster (`good`) from a real
//! test Prometheus, a second worker reads a cluster whose source is down (`bad`), `cardhour serve` answers a few
//! API and page requests; then a second Prometheus scrapes serve's and both workers' `/metrics` every second and
//! its PromQL answers are checked against the database and the requests made: the lag per cluster is now − the
//! stored watermark, hours and rows written are those stored, the down source's errors are counted by kind, the
//! request counts per route and status are those sent. Every dashboard expression is evaluated there too.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use chrono::{Duration as TimeDelta, Utc};
use chrono_tz::Asia::Shanghai;
use common::{TestDb, TestPrometheus, cardhour_bin, free_port, http_get, rfc3339, run_cardhour, run_cardhour_ok};
use serde_json::Value;

/// A `cardhour` process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(args: &[&str], db: &TestDb) -> Proc {
    let mut cmd = Command::new(cardhour_bin());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CARDHOUR_") {
            cmd.env_remove(&key);
        }
    }
    let child = cmd
        .args(args)
        .env("DATABASE_URL", &db.url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Proc(child)
}

/// A blocking HTTP/1.0 request with an optional bearer token and JSON body: (status, body).
fn http(port: u16, method: &str, path: &str, token: Option<&str>, body: Option<&str>) -> (u16, String) {
    let mut s =
        TcpStream::connect_timeout(&SocketAddr::from((Ipv4Addr::LOCALHOST, port)), Duration::from_secs(2)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n");
    if let Some(t) = token {
        req += &format!("Authorization: Bearer {t}\r\n");
    }
    let body = body.unwrap_or("");
    if !body.is_empty() {
        req += &format!("Content-Type: application/json\r\nContent-Length: {}\r\n", body.len());
    }
    req += "\r\n";
    req += body;
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, rest) = raw.split_once("\r\n\r\n").unwrap();
    (head.split_whitespace().nth(1).unwrap().parse().unwrap(), rest.to_string())
}

fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        sleep(Duration::from_millis(100));
    }
}

/// An instant query's vector as (labels, value).
fn vector(prom: &TestPrometheus, q: &str) -> Vec<(BTreeMap<String, String>, f64)> {
    let data = prom.query(q, Utc::now()).unwrap();
    data["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{q}: {data}"))
        .iter()
        .map(|r| {
            let labels = serde_json::from_value(r["metric"].clone()).unwrap();
            (labels, r["value"][1].as_str().unwrap().parse().unwrap())
        })
        .collect()
}

/// The one value of `q`, which must answer exactly one series.
fn scalar(prom: &TestPrometheus, q: &str) -> f64 {
    let v = vector(prom, q);
    assert_eq!(v.len(), 1, "{q}: {v:?}");
    v[0].1
}

fn psql_i64(db: &TestDb, sql: &str) -> i64 {
    db.psql(sql).unwrap().trim().parse().unwrap_or_else(|e| panic!("{sql}: {e}"))
}

#[test]
fn prometheus_scrapes_serve_and_the_workers() {
    let t0 = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let sim = common::simulate_run(dir.path(), 16, 6, 60, 21);
    let source = TestPrometheus::from_openmetrics(&sim.metrics).unwrap();
    let db = TestDb::migrated().unwrap();
    let env = db.env();
    let hour = |h: i64| rfc3339(sim.start + TimeDelta::hours(h));

    // `bad`: one hour stored from the real source (it registers the cluster and the teams), then a read of the
    // next hour from a port nothing listens on fails and is recorded as a failed window
    run_cardhour_ok(
        ["ingest", "--cluster", "bad", "--prometheus", &source.url, "--from", &hour(0), "--to", &hour(1)],
        &env,
    );
    // on 127.0.0.2, where no test listens: a free port of 127.0.0.1 taken now may be another test's server by the
    // time the worker reads it (its 404s were once counted as `http_status` errors)
    let dead = format!("http://127.0.0.2:{}", free_port().unwrap());
    let failed = run_cardhour(
        [
            "ingest",
            "--cluster",
            "bad",
            "--prometheus",
            &dead,
            "--source",
            "query",
            "--from",
            &hour(1),
            "--to",
            &hour(2),
        ],
        &env,
    );
    assert!(!failed.status.success());

    // serve, a finance token, rates and a one-fen budget for the month the simulation ends in (one threshold)
    let serve_port = free_port().unwrap();
    let serve_listen = format!("127.0.0.1:{serve_port}");
    let _serve = spawn(&["serve", "--listen", &serve_listen], &db);
    wait_until("serve is ready", Duration::from_secs(20), || matches!(http_get(serve_port, "/readyz"), Ok((200, _))));
    let out = run_cardhour_ok(["token", "create", "--name", "t", "--role", "finance"], &env);
    let token = out.split_whitespace().find(|w| w.starts_with("chr_")).expect("the token is printed").to_string();
    let tok = Some(token.as_str());
    let mut sent: BTreeMap<(&str, &str, u16), u32> = BTreeMap::new();
    let mut call = |method: &'static str, path: &str, route: &'static str, token: Option<&str>, body: Option<&str>| {
        let (status, answer) = http(serve_port, method, path, token, body);
        *sent.entry((route, method, status)).or_default() += 1;
        (status, answer)
    };
    // a rate for every model of the stored hour; the budget of its busiest team for the month of that hour,
    // which the good worker ingests again
    let models = db.psql("SELECT DISTINCT gpu_model FROM gpu_usage_hourly ORDER BY 1").unwrap();
    assert!(!models.is_empty());
    for model in models.lines() {
        let body = format!(r#"{{"gpu_model": "{model}", "effective_from": "2020-01-01", "rate": "10"}}"#);
        let (status, answer) = call("POST", "/api/v1/rates", "/api/v1/rates", tok, Some(&body));
        assert_eq!(status, 201, "{answer}");
    }
    let team = db
        .psql("SELECT team FROM gpu_usage_hourly WHERE team <> 'unassigned' GROUP BY team ORDER BY sum(gpu_seconds) DESC, team LIMIT 1")
        .unwrap();
    assert!(!team.is_empty());
    let month = sim.start.with_timezone(&Shanghai).format("%Y-%m").to_string();
    let (status, answer) = call(
        "PUT",
        &format!("/api/v1/budgets/{month}/{team}"),
        "/api/v1/budgets/{month}/{team}",
        tok,
        Some(r#"{"amount": "0.01", "thresholds": ["1.0"]}"#),
    );
    assert_eq!(status, 200, "{answer}");
    for _ in 0..3 {
        assert_eq!(call("GET", "/api/v1/rates", "/api/v1/rates", tok, None).0, 200);
    }
    for _ in 0..2 {
        assert_eq!(call("GET", "/api/v1/rates", "/api/v1/rates", None, None).0, 401);
    }
    assert_eq!(call("GET", "/api/v1/no-such-thing", "unmatched", tok, None).0, 404);
    assert_eq!(call("GET", "/no/such/page", "unmatched", None, None).0, 404);
    assert_eq!(call("GET", "/healthz", "/healthz", None, None).0, 200);
    assert_eq!(call("DELETE", "/metrics", "/metrics", None, None).0, 405);

    // the workers: `good` ingests the simulation's 6 hours, checks the budget and cannot deliver its alerts (the
    // webhook is down); `bad` keeps retrying its dead source
    let (good_port, bad_port) = (free_port().unwrap(), free_port().unwrap());
    let (good_listen, bad_listen) = (format!("127.0.0.1:{good_port}"), format!("127.0.0.1:{bad_port}"));
    let hook = format!("http://127.0.0.1:{}/hook", free_port().unwrap());
    let common_args = ["worker", "--lateness", "4h", "--initial-hours", "6", "--reprocess-hours", "1"];
    let mut good_args = common_args.to_vec();
    good_args.extend(["--cluster", "good", "--prometheus", &source.url, "--webhook", &hook]);
    good_args.extend(["--metrics-listen", &good_listen]);
    let _good = spawn(&good_args, &db);
    let mut bad_args = common_args.to_vec();
    bad_args.extend(["--cluster", "bad", "--prometheus", &dead, "--source", "query", "--metrics-listen", &bad_listen]);
    let _bad = spawn(&bad_args, &db);
    let alerts_settled = "SELECT count(*) FILTER (WHERE attempts > 0) || '|' || count(*) FROM budget_alerts";
    wait_until("the good worker's cycle and its budget check", Duration::from_secs(60), || {
        let (tried, all) =
            db.psql(alerts_settled).unwrap().split_once('|').map(|(a, b)| (a.to_string(), b.to_string())).unwrap();
        all != "0" && tried == all
    });
    wait_until("the bad worker's port", Duration::from_secs(20), || {
        matches!(http_get(bad_port, "/readyz"), Ok((200, _)))
    });
    assert_eq!(http_get(good_port, "/healthz").unwrap(), (200, "ok".to_string()));
    assert_eq!(http_get(good_port, "/readyz").unwrap().0, 200);
    assert_eq!(http_get(good_port, "/api/v1/rates").unwrap().0, 404, "the worker's port serves monitoring only");
    let t_setup = t0.elapsed();

    // the raw exposition of each process names only families of the catalogue, with their kinds
    for port in [serve_port, good_port, bad_port] {
        let (status, text) = http_get(port, "/metrics").unwrap();
        assert_eq!(status, 200);
        let mut families = BTreeSet::new();
        for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let mut w = line.split_whitespace().skip(2);
            let (name, kind) = (w.next().unwrap(), w.next().unwrap());
            let f = cardhour::telemetry::CATALOGUE
                .iter()
                .find(|f| f.name == name)
                .unwrap_or_else(|| panic!("{name} not in the catalogue"));
            assert_eq!(format!("{:?}", f.kind).to_lowercase(), kind, "{name}");
            families.insert(name.to_string());
        }
        for scrape_time in
            cardhour::telemetry::CATALOGUE.iter().filter(|f| f.origin == cardhour::telemetry::Origin::Scrape)
        {
            assert!(families.contains(scrape_time.name), "port {port}: {} missing", scrape_time.name);
        }
        if port == good_port {
            for f in cardhour::telemetry::CATALOGUE.iter().filter(|f| {
                f.name.starts_with("cardhour_ingest_")
                    && f.origin == cardhour::telemetry::Origin::Process
                    && f.name != "cardhour_ingest_hours_kept_total"
            }) {
                assert!(families.contains(f.name), "the good worker exports {}", f.name);
            }
        }
    }

    // a second Prometheus scrapes the three processes every second
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n\
         - job_name: serve\n  static_configs: [{{targets: ['{serve_listen}']}}]\n\
         - job_name: worker-good\n  static_configs: [{{targets: ['{good_listen}']}}]\n\
         - job_name: worker-bad\n  static_configs: [{{targets: ['{bad_listen}']}}]\n"
    );
    let scraper = TestPrometheus::scraping(&config).unwrap();
    wait_until("three scrapes of every target", Duration::from_secs(30), || {
        let v = vector(&scraper, "count_over_time(up[1m]) >= 3 and up == 1");
        v.len() == 3
    });
    let t_scraped = t0.elapsed();

    // lag: now − the database's watermark, per cluster and in every process; each scraped sample against its own
    // scrape time
    for cluster in ["good", "bad"] {
        let mark = psql_i64(
            &db,
            &format!(
                "SELECT extract(epoch FROM complete_until)::bigint FROM ingest_watermarks WHERE cluster = '{cluster}'"
            ),
        );
        let marks = vector(&scraper, &format!("cardhour_ingest_watermark_timestamp_seconds{{cluster='{cluster}'}}"));
        assert_eq!(marks.len(), 3, "{cluster}: {marks:?}");
        assert!(marks.iter().all(|(_, v)| *v == mark as f64), "{cluster}: {marks:?} vs {mark}");
        let data = scraper
            .query(&format!("cardhour_ingest_watermark_lag_seconds{{cluster='{cluster}'}}[5s]"), Utc::now())
            .unwrap();
        let series = data["result"].as_array().unwrap();
        assert_eq!(series.len(), 3, "{data}");
        let mut samples = 0;
        for s in series {
            for v in s["values"].as_array().unwrap() {
                let (at, lag) = (v[0].as_f64().unwrap(), v[1].as_str().unwrap().parse::<f64>().unwrap());
                let expected = at - mark as f64;
                assert!(
                    (lag - expected).abs() <= 2.0,
                    "{cluster} {}: lag {lag} at {at}, expected {expected}",
                    s["metric"]
                );
                samples += 1;
            }
        }
        assert!(samples >= 3, "{data}");
    }
    // (the simulation's end, or an hour later if the clock passed a whole hour since it was made)
    let good_mark = psql_i64(
        &db,
        "SELECT extract(epoch FROM complete_until)::bigint FROM ingest_watermarks WHERE cluster = 'good'",
    );
    assert!([sim.end.timestamp(), sim.end.timestamp() + 3600].contains(&good_mark), "{good_mark}");

    // hours and rows written by the good worker = what is stored for `good`
    let stored = psql_i64(&db, "SELECT count(*) FROM ingested_hours WHERE cluster = 'good'");
    let rows = psql_i64(&db, "SELECT sum(usage_rows) FROM ingested_hours WHERE cluster = 'good'");
    assert_eq!(stored, 6);
    assert!(rows > 0);
    assert_eq!(scalar(&scraper, "cardhour_ingest_hours_total{job='worker-good',cluster='good'}"), stored as f64);
    assert_eq!(scalar(&scraper, "cardhour_ingest_usage_rows_total{job='worker-good',cluster='good'}"), rows as f64);
    assert!(
        scalar(&scraper, "cardhour_ingest_samples_total{job='worker-good',cluster='good',source='remote-read'}") > 0.0
    );
    // anomalies by kind = those stored with the hours (the simulation has NaN samples and an unknown resource)
    let stored_anomalies: BTreeMap<String, f64> = db
        .psql("SELECT kind || '|' || sum(count) FROM ingest_anomalies WHERE cluster = 'good' GROUP BY kind")
        .unwrap()
        .lines()
        .map(|l| l.split_once('|').map(|(k, n)| (k.to_string(), n.parse().unwrap())).unwrap())
        .collect();
    for kind in ["non_finite_sample", "unknown_resource"] {
        assert!(stored_anomalies.contains_key(kind), "{stored_anomalies:?}");
    }
    let counted_anomalies: BTreeMap<String, f64> =
        vector(&scraper, "cardhour_ingest_anomalies_total{job='worker-good',cluster='good'}")
            .into_iter()
            .map(|(l, v)| (l["kind"].clone(), v))
            .collect();
    assert_eq!(counted_anomalies, stored_anomalies);
    assert_eq!(scalar(&scraper, "cardhour_ingest_batch_duration_seconds_count{cluster='good',outcome='ok'}"), 1.0);
    assert_eq!(scalar(&scraper, "cardhour_ingest_up{cluster='good'}"), 1.0);
    let last = scalar(&scraper, "cardhour_ingest_last_success_timestamp_seconds{cluster='good'}");
    assert!((Utc::now().timestamp() as f64 - last) < t0.elapsed().as_secs_f64() + 1.0, "{last}");
    assert!(vector(&scraper, "cardhour_source_errors_total{cluster='good'}").is_empty());

    // the bad source: errors by kind (every attempt), retried, the cluster down, nothing written by its worker
    let errors = vector(&scraper, "sum by (kind) (cardhour_source_errors_total{job='worker-bad',cluster='bad'})");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].0["kind"], "unreachable");
    assert!(errors[0].1 >= 10.0, "at least one failed request per selector: {errors:?}");
    assert!(scalar(&scraper, "sum(cardhour_source_retries_total{cluster='bad',kind='unreachable'})") >= 10.0);
    assert_eq!(scalar(&scraper, "cardhour_ingest_up{cluster='bad'}"), 0.0);
    assert!(vector(&scraper, "cardhour_ingest_hours_total{job='worker-bad'}").is_empty());

    // failed windows as ingest health lists them; undelivered budget alerts as stored
    let health: Value = serde_json::from_str(&run_cardhour_ok(["health", "--format", "json"], &env)).unwrap();
    let open = |c: &str| {
        health["clusters"].as_array().unwrap().iter().find(|x| x["cluster"] == c).unwrap()["failed_windows"]
            .as_array()
            .unwrap()
            .len() as f64
    };
    assert_eq!(open("bad"), 1.0);
    assert_eq!(scalar(&scraper, "max(cardhour_ingest_failed_windows{cluster='bad'})"), open("bad"));
    assert_eq!(scalar(&scraper, "max(cardhour_ingest_failed_windows{cluster='good'})"), open("good"));
    let undelivered = psql_i64(&db, "SELECT count(*) FROM budget_alerts WHERE delivered_at IS NULL AND attempts > 0");
    assert_eq!(undelivered, 2, "one threshold, forecast and actual");
    let gauge = vector(&scraper, "cardhour_budget_alerts_undelivered{attempted='true'}");
    assert_eq!(gauge.len(), 3);
    assert!(gauge.iter().all(|(_, v)| *v == undelivered as f64), "{gauge:?}");

    // readiness, the pools, the processes
    assert_eq!(vector(&scraper, "cardhour_ready == 1 and cardhour_metrics_database_up == 1").len(), 3);
    assert_eq!(scalar(&scraper, "cardhour_db_pool_max_connections{job='serve'}"), 16.0);
    // a worker's pool: 4, and one more per cluster it ingests (up to 4 more)
    assert_eq!(scalar(&scraper, "cardhour_db_pool_max_connections{job='worker-good'}"), 5.0);
    assert_eq!(scalar(&scraper, "count(cardhour_build_info{process='worker'})"), 2.0);

    // HTTP: exactly the requests sent, by route template, method and status; the scrapes on their own route
    let counted =
        vector(&scraper, "cardhour_http_request_duration_seconds_count{job='serve',route!~'/metrics|/readyz'}");
    let counted: BTreeMap<(String, String, u16), f64> = counted
        .into_iter()
        .map(|(l, v)| ((l["route"].clone(), l["method"].clone(), l["status"].parse().unwrap()), v))
        .collect();
    let expected: BTreeMap<(String, String, u16), f64> = sent
        .iter()
        .filter(|((route, _, _), _)| *route != "/metrics")
        .map(|((r, m, s), n)| ((r.to_string(), m.to_string(), *s), f64::from(*n)))
        .collect();
    assert_eq!(counted, expected);
    assert_eq!(
        scalar(&scraper, "cardhour_http_request_duration_seconds_count{job='serve',route='/metrics',method='DELETE'}"),
        1.0
    );
    assert!(
        scalar(
            &scraper,
            "cardhour_http_request_duration_seconds_count{job='serve',route='/metrics',method='GET',status='200'}"
        ) >= 3.0
    );
    assert!(
        scalar(&scraper, "sum(cardhour_http_request_duration_seconds_count{job='worker-bad',route='/metrics'})") >= 3.0
    );

    // every dashboard expression runs on this Prometheus (Grafana's variables given values), most with data
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana-dashboard.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let (mut exprs, mut with_data) = (0, 0);
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            let e = t["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m")
                .replace("$cluster", ".*")
                .replace("$job", ".*");
            let data = scraper.query(&e, Utc::now()).unwrap_or_else(|err| panic!("dashboard expression {e}: {err}"));
            exprs += 1;
            if data["result"].as_array().is_some_and(|r| !r.is_empty()) {
                with_data += 1;
            }
        }
    }
    assert!(exprs >= 20 && with_data * 3 >= exprs * 2, "{with_data} of {exprs} dashboard expressions have data");

    eprintln!(
        "metrics_scrape: set-up {:.1} s, scraped {:.1} s, all {:.1} s; good: {stored} hours, {rows} rows, anomalies \
         {counted_anomalies:?}; bad: {} errors; {undelivered} alerts undelivered; requests {counted:?}; dashboard \
         {with_data}/{exprs} expressions with data",
        t_setup.as_secs_f64(),
        t_scraped.as_secs_f64(),
        t0.elapsed().as_secs_f64(),
        errors[0].1,
    );
}
