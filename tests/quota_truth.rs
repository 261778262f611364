//! Issue 29 on a real Prometheus against the simulator's truth: quota scopes — namespaces' ResourceQuotas (one
//! raised mid-window, one namespace with two objects and an ignored `limits.` entry), Kueue ClusterQueues (a
//! cohort, HA follower duplicates that must be dropped, +Inf borrowing limits) with their pods labelled, a
//! namespace with both a ResourceQuota and a LocalQueue (the queue wins) — and the queue wait of GPU pods (Pending
//! spans before Running, pods that never run), read in 1-hour and 6-hour batches to the same rows, equal to the
//! truth hour by hour and pod by pod; then the month's reports of the API per team, a ClusterQueue mapped to a
//! team, and a team lead's view.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Datelike, NaiveDate, Utc};
use common::api::TestApi;
use common::truth::{self, digest};
use common::{Simulation, TestDb, TestPrometheus, simulate_run};
use reqwest::Method;
use rust_decimal::Decimal;
use serde_json::{Value, json};

const GPUS: u32 = 56;
const HOURS: u32 = 12;
const INTERVAL: u32 = 60;

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} in {v}"))
}

fn close(what: &str, a: f64, b: f64) {
    assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "{what}: stored {a}, truth {b}");
}

fn ms(t: &str) -> i64 {
    t.parse::<DateTime<Utc>>().unwrap().timestamp_millis()
}

/// Stored quota rows: (hour, kind, scope) → (guaranteed, within, borrowed, idle).
fn stored_quota(db: &TestDb) -> BTreeMap<(i64, String, String), [f64; 4]> {
    let out = db
        .psql(
            "SELECT (extract(epoch FROM hour) * 1000)::int8, scope_kind, scope, guaranteed_card_seconds,
                 used_within_card_seconds, borrowed_card_seconds, reserved_idle_card_seconds
             FROM quota_hourly ORDER BY 1, 2, 3",
        )
        .unwrap();
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split('|').collect();
            let n = |i: usize| c[i].parse::<f64>().unwrap();
            ((c[0].parse().unwrap(), c[1].to_string(), c[2].to_string()), [n(3), n(4), n(5), n(6)])
        })
        .collect()
}

/// Stored use of the scopes by GPU model: (hour, kind, scope, model) → (used, within).
fn stored_quota_models(db: &TestDb) -> BTreeMap<(i64, String, String, String), [f64; 2]> {
    let out = db
        .psql(
            "SELECT (extract(epoch FROM hour) * 1000)::int8, scope_kind, scope, gpu_model, used_card_seconds,
                 used_within_card_seconds
             FROM quota_model_hourly ORDER BY 1, 2, 3, 4",
        )
        .unwrap();
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split('|').collect();
            let n = |i: usize| c[i].parse::<f64>().unwrap();
            ((c[0].parse().unwrap(), c[1].to_string(), c[2].to_string(), c[3].to_string()), [n(4), n(5)])
        })
        .collect()
}

/// Stored waits per pod object: uid → (first pending ms, first running ms, last seen ms, pending card-seconds).
fn stored_waits(db: &TestDb) -> BTreeMap<String, (Option<i64>, Option<i64>, i64, f64)> {
    let out = db
        .psql(
            "SELECT uid, (extract(epoch FROM min(first_pending)) * 1000)::int8,
                 (extract(epoch FROM min(first_running)) * 1000)::int8, (extract(epoch FROM max(last_seen)) * 1000)::int8,
                 sum(pending_card_seconds)
             FROM pod_wait_hourly GROUP BY uid ORDER BY uid",
        )
        .unwrap();
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split('|').collect();
            let t = |i: usize| (!c[i].is_empty()).then(|| c[i].parse::<i64>().unwrap());
            (c[0].to_string(), (t(1), t(2), c[3].parse().unwrap(), c[4].parse().unwrap()))
        })
        .collect()
}

/// The p-th percentile by nearest rank, computed here on its own.
fn rank(sorted: &[i64], p: usize) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let r = (p * sorted.len()).div_ceil(100).max(1);
    Some(sorted[r - 1])
}

/// A team's queue figures as the API gives them: Pending card-hours, started, waited, median s, p90 s, never ran.
type WaitFigures = (f64, u64, u64, Option<f64>, Option<f64>, u64);

fn ingest(sim: &Simulation, prom: &TestPrometheus, db: &TestDb, extra: &[&str]) -> Value {
    truth::ingest(sim, &prom.url, "sim", db, extra)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_and_waits_match_the_truth() {
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate_run(dir.path(), GPUS, HOURS, INTERVAL, 29);
    let truth = sim.truth_json();
    let prom = TestPrometheus::from_openmetrics(&sim.metrics).unwrap();

    // the same hours hour by hour and in 6-hour batches, by remote read and by the query API: identical rows
    let db = TestDb::migrated().unwrap();
    ingest(&sim, &prom, &db, &["--chunk-hours", "1", "--source", "remote-read"]);
    let batch_db = TestDb::migrated().unwrap();
    ingest(&sim, &prom, &batch_db, &["--chunk-hours", "6", "--source", "query"]);
    assert_eq!(digest(&batch_db), digest(&db), "1-hour remote read and 6-hour query batches");
    // again over the same hours: nothing changed
    let again = ingest(&sim, &prom, &db, &["--chunk-hours", "6"]);
    assert_eq!(again["hours_changed"], 0, "{again}");

    // quota scopes hour by hour
    let stored = stored_quota(&db);
    let rows = truth["quota"].as_array().expect("truth.quota");
    assert!(!rows.is_empty());
    let expected: BTreeMap<(i64, String, String), [f64; 4]> = rows
        .iter()
        .map(|r| {
            let key = (
                ms(r["hour"].as_str().unwrap()),
                r["scope_kind"].as_str().unwrap().to_string(),
                r["scope"].as_str().unwrap().to_string(),
            );
            let v = [
                f(r, "guaranteed_card_seconds"),
                f(r, "used_within_card_seconds"),
                f(r, "borrowed_card_seconds"),
                f(r, "reserved_idle_card_seconds"),
            ];
            (key, v)
        })
        .collect();
    assert_eq!(stored.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>(), "the scopes and hours");
    for (k, want) in &expected {
        for (i, what) in ["guaranteed", "used within", "borrowed", "reserved idle"].iter().enumerate() {
            close(&format!("{k:?} {what}"), stored[k][i], want[i]);
        }
    }
    let scopes: BTreeSet<(&str, &str)> = expected.keys().map(|(_, k, s)| (k.as_str(), s.as_str())).collect();
    // the queue wins: vision-train has a ResourceQuota and a LocalQueue, and is no scope of its own
    assert!(scopes.contains(&("cluster_queue", "cq-vision")) && scopes.contains(&("cluster_queue", "cq-nlp")));
    assert!(
        scopes.contains(&("namespace", "recsys")) && !scopes.contains(&("namespace", "vision-train")),
        "{scopes:?}"
    );
    // the follower's 999 never counted; recsys is the least of its two objects (8 cards), not 12
    let recsys: Vec<f64> = expected.iter().filter(|((_, _, s), _)| s == "recsys").map(|(_, v)| v[0]).collect();
    assert!(!recsys.is_empty() && recsys.iter().all(|g| *g <= 8.0 * 3600.0 + 1e-6), "{recsys:?}");
    // vision-dev's guarantee was raised in the window: 4 cards, then 8
    let dev: BTreeSet<i64> = expected
        .iter()
        .filter(|((_, _, s), _)| s == "vision-dev")
        .map(|(_, v)| (v[0] / 3600.0).round() as i64)
        .collect();
    assert!(dev.contains(&4) && dev.contains(&8), "{dev:?}");
    // both sides of the split happen somewhere: borrowing and idle reservations
    assert!(expected.values().any(|v| v[2] > 0.0) && expected.values().any(|v| v[3] > 0.0));

    // what each GPU model used of each scope, and its share of the used-within (pro rata over the models)
    let stored_models = stored_quota_models(&db);
    let mut expected_models: BTreeMap<(i64, String, String, String), [f64; 2]> = BTreeMap::new();
    for r in rows {
        for m in r["models"].as_array().expect("truth.quota[].models") {
            let key = (
                ms(r["hour"].as_str().unwrap()),
                r["scope_kind"].as_str().unwrap().to_string(),
                r["scope"].as_str().unwrap().to_string(),
                m["gpu_model"].as_str().unwrap().to_string(),
            );
            expected_models.insert(key, [f(m, "used_card_seconds"), f(m, "used_within_card_seconds")]);
        }
    }
    assert_eq!(
        stored_models.keys().collect::<Vec<_>>(),
        expected_models.keys().collect::<Vec<_>>(),
        "the scopes' models"
    );
    for (k, want) in &expected_models {
        close(&format!("{k:?} used"), stored_models[k][0], want[0]);
        close(&format!("{k:?} used within"), stored_models[k][1], want[1]);
    }
    // the case the split is for: a scope over its guarantee on several models at once
    assert!(
        rows.iter().any(|r| r["models"].as_array().unwrap().len() >= 2 && f(r, "borrowed_card_seconds") > 0.0),
        "a scope borrowing on two models"
    );

    // each GPU pod's wait
    let waits = stored_waits(&db);
    let pods: Vec<&Value> = truth["pending"]
        .as_array()
        .expect("truth.pending")
        .iter()
        .filter(|p| !p["first_pending"].is_null() || !p["first_running"].is_null())
        .collect();
    assert!(!pods.is_empty());
    let t = |p: &Value, k: &str| p[k].as_str().map(ms);
    for p in &pods {
        let uid = p["uid"].as_str().unwrap();
        let (pending, running, last, seconds) = waits.get(uid).unwrap_or_else(|| panic!("no wait stored for {p}"));
        assert_eq!((*pending, *running), (t(p, "first_pending"), t(p, "first_running")), "{p}");
        if p["never_ran"].as_bool().unwrap() {
            assert_eq!(Some(*last), t(p, "last_seen"), "{p}");
        }
        close(&format!("{uid} pending"), *seconds, f(p, "pending_card_seconds"));
    }
    assert_eq!(waits.len(), pods.len(), "no wait stored for a pod the truth does not have");
    let never_ran = pods.iter().filter(|p| p["never_ran"].as_bool().unwrap()).count();
    assert!(never_ran >= 2, "pods that never ran: {never_ran}");
    assert!(pods.iter().any(|p| t(p, "first_pending").is_some_and(|a| t(p, "first_running").is_some_and(|b| b > a))));

    // the month's reports per team, with the ClusterQueues mapped to their teams
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let api = TestApi::start(pool).await;
    let first_day = sim.start.with_timezone(&chrono_tz::Asia::Shanghai).date_naive().with_day0(0).unwrap();
    for (queue, team) in [("cq-nlp", "nlp"), ("cq-vision", "vision")] {
        let body = json!({"queue_kind": "cluster_queue", "queue": queue, "team_id": team, "valid_from": first_day});
        let (status, m) =
            api.call(Method::POST, "/api/v1/queue-mappings", Some(&api.finance), Some(body.clone())).await;
        assert_eq!(status, 201, "{m}");
        assert_eq!((m["queue"].as_str(), m["team_id"].as_str()), (Some(queue), Some(team)));
        // the same again: a conflict naming the field, nothing written twice
        let (status, e) = api.call(Method::POST, "/api/v1/queue-mappings", Some(&api.finance), Some(body)).await;
        assert_eq!(status, 409, "{e}");
    }
    let (status, e) = api
        .call(
            Method::POST,
            "/api/v1/queue-mappings",
            Some(&api.lead),
            Some(json!({"queue_kind": "cluster_queue", "queue": "cq-x", "team_id": "vision", "valid_from": first_day})),
        )
        .await;
    assert_eq!(status, 403, "a team lead maps no queue: {e}");
    let (status, e) = api
        .call(
            Method::POST,
            "/api/v1/queue-mappings",
            Some(&api.finance),
            Some(json!({"queue_kind": "cluster_queue", "queue": "cq-x", "team_id": "nobody", "valid_from": first_day})),
        )
        .await;
    assert_eq!(status, 422, "{e}");
    assert!(e.to_string().contains("team_id"), "{e}");

    let months: BTreeSet<String> = [sim.start, sim.end - chrono::TimeDelta::hours(1)]
        .iter()
        .map(|t| t.with_timezone(&chrono_tz::Asia::Shanghai).format("%Y-%m").to_string())
        .collect();
    let single = months.len() == 1;
    let mut quota_by_team: BTreeMap<String, [f64; 4]> = BTreeMap::new();
    let mut wait_by_team: BTreeMap<String, WaitFigures> = BTreeMap::new();
    for month in &months {
        let (status, q) =
            api.call(Method::GET, &format!("/api/v1/reports/quotas/{month}"), Some(&api.finance), None).await;
        assert_eq!(status, 200, "{q}");
        for t in q["teams"].as_array().unwrap() {
            let e = quota_by_team.entry(t["team"].as_str().unwrap().to_string()).or_default();
            for (i, k) in
                ["guaranteed_card_hours", "used_within_card_hours", "borrowed_card_hours", "reserved_idle_card_hours"]
                    .iter()
                    .enumerate()
            {
                e[i] += f(t, k);
            }
        }
        let (status, w) =
            api.call(Method::GET, &format!("/api/v1/reports/queue/{month}"), Some(&api.finance), None).await;
        assert_eq!(status, 200, "{w}");
        for t in w["teams"].as_array().unwrap() {
            let e = wait_by_team.entry(t["team"].as_str().unwrap().to_string()).or_default();
            e.0 += f(t, "pending_card_hours");
            e.1 += t["pods_started"].as_u64().unwrap();
            e.2 += t["pods_waited"].as_u64().unwrap();
            e.3 = t["median_wait_seconds"].as_f64();
            e.4 = t["p90_wait_seconds"].as_f64();
            e.5 += t["never_ran"].as_u64().unwrap();
        }
    }
    let mut want_quota: BTreeMap<String, [f64; 4]> = BTreeMap::new();
    for r in rows {
        let e = want_quota.entry(r["team"].as_str().unwrap().to_string()).or_default();
        for (i, k) in [
            "guaranteed_card_seconds",
            "used_within_card_seconds",
            "borrowed_card_seconds",
            "reserved_idle_card_seconds",
        ]
        .iter()
        .enumerate()
        {
            e[i] += f(r, k) / 3600.0;
        }
    }
    assert_eq!(quota_by_team.keys().collect::<Vec<_>>(), want_quota.keys().collect::<Vec<_>>());
    for (team, want) in &want_quota {
        for i in 0..4 {
            close(&format!("{team} quota figure {i}"), quota_by_team[team][i], want[i]);
        }
    }
    assert!(want_quota.contains_key("nlp") && want_quota["nlp"][0] > 0.0, "cq-nlp counts for nlp");

    let mut by_team: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for p in &pods {
        by_team.entry(p["team"].as_str().unwrap().to_string()).or_default().push(p);
    }
    for (team, ps) in &by_team {
        let got = wait_by_team.get(team).unwrap_or_else(|| panic!("no queue figures for {team}"));
        let pending: f64 = ps.iter().map(|p| f(p, "pending_card_seconds")).sum::<f64>() / 3600.0;
        close(&format!("{team} pending card-hours"), got.0, pending);
        let started = ps.iter().filter(|p| t(p, "first_running").is_some()).count() as u64;
        let mut waited: Vec<i64> = ps
            .iter()
            .filter_map(|p| Some(t(p, "first_running")? - t(p, "first_pending")?))
            .filter(|w| *w > 0)
            .collect();
        waited.sort_unstable();
        assert_eq!((got.1, got.2), (started, waited.len() as u64), "{team} pods started, waited");
        assert_eq!(got.5, ps.iter().filter(|p| p["never_ran"].as_bool().unwrap()).count() as u64, "{team} never ran");
        if single {
            let s = |v: Option<i64>| v.map(|ms| ms as f64 / 1000.0);
            assert_eq!((got.3, got.4), (s(rank(&waited, 50)), s(rank(&waited, 90))), "{team} median, p90");
        }
    }

    reserved_credits_by_model(&api, rows, &months, first_day).await;

    // the files say what the API says: the CSV (codes) a row per team and scope, the workbook's queue sheet
    let month = months.iter().next().unwrap();
    let services = cardhour::usecase::Services::new(api.pool.clone(), chrono_tz::Asia::Shanghai);
    let (_, q) = api.call(Method::GET, &format!("/api/v1/reports/quotas/{month}"), Some(&api.finance), None).await;
    let (_, w) = api.call(Method::GET, &format!("/api/v1/reports/queue/{month}"), Some(&api.finance), None).await;
    let m: cardhour::billing::Month = month.parse().unwrap();
    let all = cardhour::access::Scope::all();
    use cardhour::usecase::report_exports::{Format, quotas_file};
    let csv = quotas_file(&services, &all, m, false, Format::Csv, None).await.unwrap();
    let text = String::from_utf8(csv.bytes).unwrap();
    let mut reader = csv::Reader::from_reader(text.trim_start_matches('\u{feff}').as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(str::to_string).collect();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("{name} in {header:?}"));
    let lines: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    let scopes_in_api: usize =
        q["teams"].as_array().unwrap().iter().map(|t| t["scopes"].as_array().unwrap().len()).sum();
    assert_eq!(lines.len(), scopes_in_api + 1, "a row per scope and the total: {text}");
    for t in q["teams"].as_array().unwrap() {
        for sc in t["scopes"].as_array().unwrap() {
            let line =
                lines.iter().find(|l| l[col("scope")] == *sc["scope"].as_str().unwrap()).expect("the scope's row");
            assert_eq!(&line[col("team")], t["team"].as_str().unwrap());
            assert_eq!(
                line[col("guaranteed_card_hours")],
                format!("{:.3}", f(sc, "guaranteed_card_hours")),
                "{line:?}"
            );
            assert_eq!(line[col("borrowed_card_hours")], format!("{:.3}", f(sc, "borrowed_card_hours")), "{line:?}");
        }
    }
    let xlsx = quotas_file(&services, &all, m, false, Format::Xlsx, Some(cardhour::glossary::Lang::Zh)).await.unwrap();
    let mut wb: calamine::Xlsx<_> = calamine::open_workbook_from_rs(std::io::Cursor::new(xlsx.bytes)).unwrap();
    use calamine::{Data, Reader};
    let names = wb.sheet_names().to_vec();
    assert_eq!(names.len(), 2, "{names:?}");
    let sheet = wb.worksheet_range(&names[1]).unwrap();
    let cells: Vec<Vec<Data>> = sheet.rows().map(|r| r.to_vec()).collect();
    let fields = cells.iter().position(|r| r.contains(&Data::String("pods_waited".into()))).expect("the field row");
    let at = |name: &str| cells[fields].iter().position(|d| *d == Data::String(name.into())).unwrap();
    let mut checked = 0;
    for t in w["teams"].as_array().unwrap() {
        let row = cells[fields + 1..]
            .iter()
            // the workbook prints a team in words (`unassigned` is 未分配)
            .find(|r| {
                let id = t["team"].as_str().unwrap();
                r[0] == Data::String(cardhour::glossary::team_name(cardhour::glossary::Lang::Zh, id, id))
            })
            .unwrap_or_else(|| panic!("{t} in the workbook"));
        let number = |d: &Data| match d {
            Data::Float(x) => *x,
            Data::Int(x) => *x as f64,
            other => panic!("{other:?}"),
        };
        assert_eq!(number(&row[at("pods_waited")]), f(t, "pods_waited"), "{t}");
        assert_eq!(number(&row[at("median_wait_seconds")]), f(t, "median_wait_seconds").round(), "{t}");
        checked += 1;
    }
    assert!(checked >= 3, "{checked} teams in the workbook");

    // a team lead (of vision) sees its own team only
    let (_, q) = api.call(Method::GET, &format!("/api/v1/reports/quotas/{month}"), Some(&api.lead), None).await;
    let teams: Vec<&str> = q["teams"].as_array().unwrap().iter().map(|t| t["team"].as_str().unwrap()).collect();
    assert_eq!(teams, ["vision"], "{q}");
    let (_, w) = api.call(Method::GET, &format!("/api/v1/reports/queue/{month}"), Some(&api.lead), None).await;
    assert!(w["teams"].as_array().unwrap().iter().all(|t| t["team"] == "vision"), "{w}");
    let (status, e) = api.call(Method::GET, "/api/v1/reports/quotas/2026-13", Some(&api.finance), None).await;
    assert_eq!(status, 422, "{e}");
}

/// Reserved-quota billing credits what cq-nlp's pods ran within its guarantee at the rate of the model that ran
/// it (the rate its usage lines charged), not at the model its terms name: per month and model, −(Σ of the truth's
/// used-within card-hours) × that model's rate, to the fen.
async fn reserved_credits_by_model(api: &TestApi, rows: &[Value], months: &BTreeSet<String>, first_day: NaiveDate) {
    let fin = Some(api.finance.as_str());
    let month_of = |hour: &str| {
        hour.parse::<DateTime<Utc>>().unwrap().with_timezone(&chrono_tz::Asia::Shanghai).format("%Y-%m").to_string()
    };
    let key = |model: &str| cardhour::pricing::catalog::builtin_key(model).unwrap_or(model).to_string();
    // (month, pricing key) → card-hours within cq-nlp's guarantee
    let mut within: BTreeMap<(String, String), f64> = BTreeMap::new();
    for r in rows.iter().filter(|r| r["scope"] == "cq-nlp") {
        for m in r["models"].as_array().unwrap() {
            let e = within.entry((month_of(r["hour"].as_str().unwrap()), key(m["gpu_model"].as_str().unwrap())));
            *e.or_default() += f(m, "used_within_card_seconds") / 3600.0;
        }
    }
    let models: BTreeSet<&str> = within.keys().map(|(_, m)| m.as_str()).collect();
    assert!(models.len() >= 2, "cq-nlp runs on several models: {models:?}");
    // a rate per model (10, 11, … yuan), terms naming the first
    let rates: BTreeMap<&str, Decimal> =
        models.iter().enumerate().map(|(i, m)| (*m, Decimal::from(10 + i as i64))).collect();
    for (model, rate) in &rates {
        let body = json!({"gpu_model": model, "effective_from": first_day, "rate": rate.to_string()});
        let (status, r) = api.call(Method::POST, "/api/v1/rates", fin, Some(body)).await;
        assert_eq!(status, 201, "{r}");
    }
    let terms = json!({"scope_kind": "cluster_queue", "scope": "cq-nlp", "gpu_model": models.first().unwrap(),
                       "factor": "0.8", "valid_from": first_day});
    assert_eq!(api.call(Method::POST, "/api/v1/reservation-terms", fin, Some(terms)).await.0, 201);
    let mut credited = 0;
    for month in months {
        let (status, st) =
            api.call(Method::GET, &format!("/api/v1/bills/{month}/teams/nlp?mode=reserved"), fin, None).await;
        assert_eq!(status, 200, "{st}");
        let credits: BTreeMap<String, (Decimal, Decimal)> = st["lines"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| l["kind"] == "reservation_use")
            .map(|l| {
                assert_eq!(l["namespace"], "cluster_queue/cq-nlp", "{l}");
                let d = |k: &str| l[k].as_str().unwrap().parse::<Decimal>().unwrap();
                (l["gpu_model"].as_str().unwrap().to_string(), (d("reserved_card_hours"), d("amount")))
            })
            .collect();
        let want: BTreeMap<&str, f64> =
            within.iter().filter(|((m, _), h)| m == month && **h > 0.0).map(|((_, k), h)| (k.as_str(), *h)).collect();
        assert_eq!(credits.keys().map(String::as_str).collect::<Vec<_>>(), want.keys().copied().collect::<Vec<_>>());
        for (model, hours) in want {
            let (got_hours, got_amount) = credits[model];
            let exact = Decimal::from_f64_retain(hours).unwrap() * rates[model];
            let amount = -exact.round_dp_with_strategy(2, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
            assert!((got_hours + Decimal::from_f64_retain(hours).unwrap()).abs() < Decimal::new(1, 5), "{model}");
            assert!((got_amount - amount).abs() <= Decimal::new(1, 2), "{model}: {got_amount} ≠ {amount}");
            credited += 1;
        }
    }
    assert!(credited >= 2, "{credited} credits checked");
}
