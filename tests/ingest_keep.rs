//! Nothing stored is lost (SPEC §6): a re-ingest from a Prometheus that no longer has the hours keeps them and
//! says so; the worker never shrinks an hour; a forced replacement is audited and `ingest undo` puts the rows
//! back exactly (usage, capacity, anomalies, rollups and the serving engines' counters).

use crate::common;

use std::path::Path;

use common::{TestDb, TestPrometheus, run_cardhour, run_cardhour_ok, simulate_run};

const INTERVAL: u32 = 60;

fn digest(db: &TestDb) -> String {
    db.psql(
        "SELECT md5(coalesce(string_agg(u::text, '|' ORDER BY u::text), '')) FROM gpu_usage_hourly u
         UNION ALL SELECT md5(coalesce(string_agg(c::text, '|' ORDER BY c::text), '')) FROM node_capacity_hourly c
         UNION ALL SELECT md5(coalesce(string_agg(a::text, '|' ORDER BY a::text), '')) FROM ingest_anomalies a
         UNION ALL SELECT md5(coalesce(string_agg(n::text, '|' ORDER BY n::text), '')) FROM usage_namespace_hourly n
         UNION ALL SELECT md5(coalesce(string_agg(d::text, '|' ORDER BY d::text), '')) FROM usage_namespace_daily d
         UNION ALL SELECT md5(coalesce(string_agg(k::text, '|' ORDER BY k::text), '')) FROM capacity_daily k
         UNION ALL SELECT md5(coalesce(string_agg(p::text, '|' ORDER BY p::text), '')) FROM usage_pod_daily p
         UNION ALL SELECT md5(coalesce(string_agg(s::text, '|' ORDER BY s::text), '')) FROM serving_hourly s",
    )
    .unwrap()
}

fn scalar(db: &TestDb, sql: &str) -> i64 {
    db.psql(sql).unwrap().trim().parse().unwrap()
}

/// A Prometheus that has lost the cluster's data (past its retention, restarted without its head block, or simply
/// the wrong one): one unrelated old sample.
fn empty_prometheus(dir: &Path) -> TestPrometheus {
    let path = dir.join("empty.om");
    std::fs::write(&path, "# TYPE up gauge\nup{job=\"other\"} 1 1000000000\n# EOF\n").unwrap();
    TestPrometheus::from_openmetrics(&path).unwrap()
}

#[test]
fn a_smaller_read_keeps_the_stored_hours_and_a_forced_one_can_be_undone() {
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate_run(dir.path(), 16, 24, INTERVAL, 21);
    let prom = TestPrometheus::from_openmetrics(&sim.metrics).unwrap();
    let empty = empty_prometheus(dir.path());
    let (from, to) = (sim.start_arg(), sim.end_arg());
    let ingest =
        |url: &str| ["ingest", "--cluster", "sim", "--prometheus", url, "--from", &from, "--to", &to].map(String::from);

    let db = TestDb::migrated().unwrap();
    run_cardhour_ok(ingest(&prom.url), &db.env());
    let stored = digest(&db);
    let rows = scalar(&db, "SELECT count(*) FROM gpu_usage_hourly");
    let gpu_hours = db.psql("SELECT round(sum(gpu_seconds)::numeric / 3600, 3) FROM gpu_usage_hourly").unwrap();
    assert!(rows > 100, "the day has usage: {rows} rows");
    // the simulated serving pods' counters are stored hours too: kept, replaced and put back with the rest
    let served = scalar(&db, "SELECT count(*) FROM serving_hourly");
    assert!(served > 10, "the day has served tokens: {served} rows");

    // the same samples again: every hour replaced by an equal read, no history kept
    run_cardhour_ok(ingest(&prom.url), &db.env());
    assert_eq!(digest(&db), stored);
    assert_eq!(scalar(&db, "SELECT count(*) FROM replaced_usage_hourly"), 0, "unchanged re-reads leave no history");

    // the same day from a Prometheus without it: kept, listed, non-zero exit
    let out = run_cardhour(ingest(&empty.url), &db.env());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a smaller read is not a silent success: {stderr}");
    assert!(stderr.contains("kept 24 stored hours"), "{stderr}");
    let first_hour = sim.start.to_rfc3339();
    assert!(stderr.contains(&first_hour), "the kept hours are named ({first_hour}): {stderr}");
    assert!(stderr.contains("rows") && stderr.contains("0 rows / 0 samples read"), "stored vs read: {stderr}");
    assert!(stderr.contains("--replace-smaller"), "{stderr}");
    assert_eq!(digest(&db), stored, "stored rows unchanged");
    assert_eq!(db.psql("SELECT round(sum(gpu_seconds)::numeric / 3600, 3) FROM gpu_usage_hourly").unwrap(), gpu_hours);
    assert_eq!(scalar(&db, "SELECT count(*) FROM kept_hours WHERE read_rows = 0 AND stored_rows > 0"), 24);

    // the worker against it: never shrinks an hour, records what it kept, exits 0. A cycle re-reads the hours of
    // its re-processed span stored before the cycle began (not those another run stored during it): the day is
    // made one stored two hours ago.
    db.psql("UPDATE ingested_hours SET ingested_at = ingested_at - interval '2 hours'").unwrap();
    let hours_back = ((chrono::Utc::now() - sim.start).num_hours() + 1).to_string();
    run_cardhour_ok(
        [
            "worker",
            "--once",
            "--cluster",
            "sim",
            "--prometheus",
            &empty.url,
            "--initial-hours",
            &hours_back,
            "--reprocess-hours",
            &hours_back,
        ],
        &db.env(),
    );
    assert_eq!(digest(&db), stored, "the worker shrank nothing");
    let by_worker = scalar(
        &db,
        "SELECT count(*) FROM kept_hours k JOIN ingest_runs r ON r.id = k.run_id WHERE r.command = 'worker'",
    );
    assert_eq!(by_worker, 24, "the worker's kept hours are recorded for ingest health");
    let health: serde_json::Value =
        serde_json::from_str(&run_cardhour_ok(["health", "--format", "json"], &db.env())).unwrap();
    let sim_health =
        health["clusters"].as_array().unwrap().iter().find(|c| c["cluster"] == "sim").expect("sim in health");
    let kept = sim_health["kept_hours"].as_array().unwrap();
    assert_eq!(kept.len(), 24, "ingest health lists the kept hours");
    assert!(kept.iter().all(|k| k["read_rows"] == 0 && k["stored_rows"].as_i64().unwrap() > 0), "{kept:?}");
    // the worker also stored the (empty) hours after the simulation up to the newest complete hour
    assert!(sim_health["hours_stored"].as_i64().unwrap() >= 24, "{sim_health}");
    // (the newest hour waits for the worker's 10 minutes of lateness)
    assert!(sim_health["lag_hours"].as_i64().unwrap() <= 1, "{sim_health}");
    let text = run_cardhour_ok(["health"], &db.env());
    assert!(text.contains("kept 24 stored hours over smaller reads"), "{text}");

    // forced: the hours are emptied, the run audited
    let out = run_cardhour_ok([&ingest(&empty.url)[..], &["--replace-smaller".to_string()]].concat(), &db.env());
    let run: i64 = out
        .lines()
        .find_map(|l| l.strip_prefix("run: "))
        .and_then(|l| l.split_whitespace().next())
        .expect("the run is printed")
        .parse()
        .unwrap();
    assert!(out.contains("24 stored hours changed"), "{out}");
    assert_eq!(scalar(&db, "SELECT count(*) FROM gpu_usage_hourly"), 0);
    assert_eq!(scalar(&db, "SELECT count(*) FROM kept_hours"), 0, "replaced hours are no longer kept ones");
    assert_eq!(
        scalar(
            &db,
            &format!(
                "SELECT count(*) FROM audit_log WHERE action = 'ingest.replace_smaller' AND after->>'run' = '{run}'"
            )
        ),
        1
    );
    assert_eq!(scalar(&db, &format!("SELECT count(*) FROM replaced_usage_hourly WHERE run_id = {run}")), rows);
    assert_eq!(scalar(&db, "SELECT count(*) FROM serving_hourly"), 0);
    assert_eq!(scalar(&db, &format!("SELECT count(*) FROM replaced_serving_hourly WHERE run_id = {run}")), served);

    // undo: every row back, compared by content (usage, capacity, anomalies and the rollups)
    let out = run_cardhour_ok(["ingest".to_string(), "undo".into(), run.to_string()], &db.env());
    assert!(out.contains("put back 24 hours of sim"), "{out}");
    assert_eq!(digest(&db), stored);
    assert_eq!(scalar(&db, "SELECT count(*) FROM audit_log WHERE action = 'ingest.undo'"), 1);
    // undoing it twice is refused, and an unknown run is a clear error
    let again = run_cardhour(["ingest".to_string(), "undo".into(), run.to_string()], &db.env());
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains(&format!("ingest run {run} was undone already")), "{err}");
    assert_eq!(digest(&db), stored);
    let unknown = run_cardhour(["ingest", "undo", "999999"], &db.env());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("ingest run 999999 does not exist"));
}
