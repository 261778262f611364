//! Several workers over the same clusters, killed at random points, and the faults a worker must ride out
//! (Prometheus down, PostgreSQL restarted): the stored state ends byte-identical (md5) to a clean single-worker
//! run, no hour is stored twice, and the health report shows the failures and the recovery.
//!
//! The kill schedule is drawn from a seed, printed at the start: `CARDHOUR_FAULT_SEED=<seed> cargo test --test
//! suite worker_faults::` replays it; `CARDHOUR_FAULT_KILLS` sets the number of kills per round (50 by default).

use crate::common;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use common::pg::TestPostgres;
use common::{Simulation, TestDb, TestPrometheus, cardhour_bin, run_cardhour, run_cardhour_ok, simulate_run};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const GPUS: u32 = 16;
const HOURS: u32 = 168;
const INTERVAL: u32 = 120;
const CLUSTERS: [&str; 4] = ["east", "west", "north", "south"];

/// Every table the ingest writes that a bill or report reads, as md5 of its rows in a fixed order (columns that
/// record when or by which run a row was written are left out: they differ between runs by design).
const DIGEST: &str = "SET TimeZone = 'UTC';
    SELECT 'usage ' || md5(coalesce(string_agg(u::text, '|' ORDER BY u::text), '')) FROM gpu_usage_hourly u
    UNION ALL SELECT 'capacity ' || md5(coalesce(string_agg(c::text, '|' ORDER BY c::text), '')) FROM node_capacity_hourly c
    UNION ALL SELECT 'namespace_hourly ' || md5(coalesce(string_agg(n::text, '|' ORDER BY n::text), '')) FROM usage_namespace_hourly n
    UNION ALL SELECT 'namespace_daily ' || md5(coalesce(string_agg(d::text, '|' ORDER BY d::text), '')) FROM usage_namespace_daily d
    UNION ALL SELECT 'capacity_daily ' || md5(coalesce(string_agg(d::text, '|' ORDER BY d::text), '')) FROM capacity_daily d
    UNION ALL SELECT 'pod_daily ' || md5(coalesce(string_agg(p::text, '|' ORDER BY p::text), '')) FROM usage_pod_daily p
    UNION ALL SELECT 'anomalies ' || md5(coalesce(string_agg(a::text, '|' ORDER BY a::text), '')) FROM ingest_anomalies a
    UNION ALL SELECT 'hours ' || count(*) || ' rows ' || sum(usage_rows) FROM ingested_hours
    UNION ALL SELECT 'watermarks ' || string_agg(cluster || '=' || complete_until, ',' ORDER BY cluster) FROM ingest_watermarks";

fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim_end().to_string()
}

/// A clusters file naming every cluster of [`CLUSTERS`] at one Prometheus.
fn clusters_file(dir: &Path, prometheus: &str) -> PathBuf {
    let path = dir.join("clusters.toml");
    let mut text = String::from("[defaults]\nsource = \"remote-read\"\nbatch_hours = 2\n");
    for c in CLUSTERS {
        text.push_str(&format!("\n[clusters.{c}]\nprometheus = \"{prometheus}\"\n"));
    }
    fs::write(&path, text).unwrap();
    path
}

/// `cardhour worker` over the clusters file for the simulation's span, its log appended to `log`.
fn worker(db_url: &str, config: &Path, sim: &Simulation, log: &Path, once: bool) -> Child {
    worker_with(db_url, config, sim, log, once, &[])
}

fn worker_with(db_url: &str, config: &Path, sim: &Simulation, log: &Path, once: bool, extra: &[&str]) -> Child {
    let mut cmd = Command::new(cardhour_bin());
    cmd.args(["worker", "--config"]).arg(config).args(extra);
    cmd.args(["--from", &sim.start_arg(), "--to", &sim.end_arg(), "--lease", "1s", "--max-backoff", "2s"]);
    if once {
        cmd.arg("--once");
    }
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CARDHOUR_") {
            cmd.env_remove(&key);
        }
    }
    let log = fs::OpenOptions::new().create(true).append(true).open(log).unwrap();
    cmd.env("DATABASE_URL", db_url)
        .env("CARDHOUR_LOG", "cardhour=info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn kill9(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Each `stored cluster=… from=… to=…` line of the workers' logs as (cluster, hour) → times stored.
fn stored_hours(logs: &[PathBuf]) -> BTreeMap<(String, DateTime<Utc>), u32> {
    let mut seen = BTreeMap::new();
    for log in logs {
        let text = fs::read_to_string(log).unwrap_or_default();
        for line in text.lines().filter(|l| l.contains(" stored ") || l.ends_with(" stored")) {
            let field = |name: &str| {
                line.split_whitespace().find_map(|w| w.strip_prefix(&format!("{name}="))).map(str::to_string)
            };
            let (Some(cluster), Some(from), Some(to)) = (field("cluster"), field("from"), field("to")) else {
                continue;
            };
            let (from, to): (DateTime<Utc>, DateTime<Utc>) = (from.parse().unwrap(), to.parse().unwrap());
            let mut h = from;
            while h < to {
                *seen.entry((cluster.clone(), h)).or_default() += 1;
                h += chrono::Duration::hours(1);
            }
        }
    }
    seen
}

fn seed() -> u64 {
    std::env::var("CARDHOUR_FAULT_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20261204)
}

fn kills_per_round() -> usize {
    std::env::var("CARDHOUR_FAULT_KILLS").ok().and_then(|s| s.parse().ok()).unwrap_or(50)
}

fn hours_stored(url: &str) -> i64 {
    psql(url, "SELECT count(*) FROM ingested_hours").parse().unwrap_or(0)
}

/// Runs `workers` workers until the span is stored, killing one (drawn from `rng`) with SIGKILL `kills` times,
/// each restarted at once. Kill `i` lands in the `i`-th of `kills` equal slices of the first 75 % of the backfill's
/// progress: at a drawn count of stored hours within the slice, then after a drawn delay (0–60 ms) — so the kills
/// spread over the backfill however fast it runs. Then every worker finishes. Returns the workers' logs.
fn killed_run(
    db: &TestDb,
    config: &Path,
    sim: &Simulation,
    workers: usize,
    kills: usize,
    rng: &mut ChaCha8Rng,
    dir: &Path,
) -> Vec<PathBuf> {
    let total = (HOURS as i64) * CLUSTERS.len() as i64;
    // the kills spread over the first 75 % of the hours: the killing loop must not fall behind the workers
    let slice = 0.75 * total as f64 / kills as f64;
    let logs: Vec<PathBuf> = (0..workers).map(|i| dir.join(format!("worker-{workers}-{i}.log"))).collect();
    let mut children: Vec<Child> = logs.iter().map(|l| worker(&db.url, config, sim, l, true)).collect();
    let mut landed = 0;
    for i in 0..kills {
        let at = ((i as f64 + rng.random_range(0.0..1.0)) * slice) as i64;
        let delay = Duration::from_millis(rng.random_range(0..=60));
        let victim = rng.random_range(0..workers);
        let waiting = Instant::now();
        while hours_stored(&db.url) < at {
            assert!(waiting.elapsed() < Duration::from_secs(120), "no progress to {at} hours in 2 minutes");
            sleep(Duration::from_millis(5));
        }
        sleep(delay);
        if hours_stored(&db.url) < total {
            landed += 1;
        }
        kill9(&mut children[victim]);
        children[victim] = worker(&db.url, config, sim, &logs[victim], true);
    }
    // the rest: every worker exits 0 once nothing is left (a dead worker's lease expires after 1 s)
    for (i, child) in children.iter_mut().enumerate() {
        let status = child.wait().unwrap();
        assert!(status.success(), "worker {i} exited {status:?}; log: {}", fs::read_to_string(&logs[i]).unwrap());
    }
    eprintln!("{workers} workers: {landed} of {kills} kills landed before the last hour was stored");
    assert_eq!(landed, kills, "only {landed} of {kills} kills landed during the backfill");
    logs
}

#[test]
fn workers_killed_at_random_points_store_what_one_clean_worker_stores() {
    let seed = seed();
    let kills = kills_per_round();
    eprintln!(
        "fault seed: {seed} (replay: CARDHOUR_FAULT_SEED={seed} cargo test --test suite worker_faults::), {kills} kills"
    );
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate_run(&dir.path().join("sim"), GPUS, HOURS, INTERVAL, 5);
    let prom = TestPrometheus::from_openmetrics(&sim.metrics).unwrap();
    let config = clusters_file(dir.path(), &prom.url);

    let clean = TestDb::migrated().unwrap();
    let started = Instant::now();
    let clean_log = dir.path().join("clean.log");
    let status = worker(&clean.url, &config, &sim, &clean_log, true).wait().unwrap();
    assert!(status.success(), "clean worker: {}", fs::read_to_string(&clean_log).unwrap());
    let clean_time = started.elapsed();
    let expected = psql(&clean.url, DIGEST);
    assert!(expected.contains(&format!("hours {} ", HOURS as usize * CLUSTERS.len())), "{expected}");
    let rows: i64 = psql(&clean.url, "SELECT count(*) FROM gpu_usage_hourly").parse().unwrap();
    assert!(rows > 1000, "the clean run stored {rows} usage rows");
    let once = stored_hours(std::slice::from_ref(&clean_log));
    assert_eq!(once.len(), HOURS as usize * CLUSTERS.len(), "the clean run's log names every hour once");
    eprintln!("clean single-worker run: {clean_time:?}, {rows} usage rows");

    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for workers in [2, 4] {
        let db = TestDb::migrated().unwrap();
        let started = Instant::now();
        let logs = killed_run(&db, &config, &sim, workers, kills, &mut rng, dir.path());
        eprintln!("{workers} workers with kills: {:?}", started.elapsed());
        assert_eq!(
            psql(&db.url, DIGEST),
            expected,
            "seed {seed}: {workers} workers killed {kills} times stored something else than a clean run"
        );
        assert_eq!(psql(&db.url, "SELECT count(*) FROM ingest_queue"), "0", "seed {seed}: hours left queued");
        // no hour was stored twice: each appears at most once among the workers' `stored` lines (a worker killed
        // between its commit and its log line stored an hour without naming it)
        let seen = stored_hours(&logs);
        assert!(!seen.is_empty(), "the workers logged no stored batch");
        let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
        assert!(twice.is_empty(), "seed {seed}: hours stored more than once: {twice:?}");
    }
}

fn sigterm(child: &Child) {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
}

/// Waits until `f` holds (polled every 100 ms), at most `limit`; then fails showing the workers' logs.
fn wait_for(what: &str, limit: Duration, logs: &[PathBuf], mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !f() {
        if Instant::now() >= deadline {
            let text: Vec<String> = logs.iter().map(|l| fs::read_to_string(l).unwrap_or_default()).collect();
            panic!("waited {limit:?} for {what}; the workers' logs:\n{}", text.join("\n---\n"));
        }
        sleep(Duration::from_millis(100));
    }
}

/// Like [`psql`], but an error (the server restarting) is `None`.
fn try_psql(url: &str, sql: &str) -> Option<String> {
    let out = Command::new("psql")
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .stdin(Stdio::null())
        .output()
        .ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

fn worker_health(url: &str) -> BTreeMap<String, serde_json::Value> {
    let out = run_cardhour_ok(["health", "--format", "json"], &[("DATABASE_URL", url)]);
    let health: serde_json::Value = serde_json::from_str(&out).unwrap();
    health["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["cluster"].as_str().unwrap().to_string(), c["worker"].clone()))
        .collect()
}

#[test]
fn prometheus_down_and_postgres_restarted_are_ridden_out() {
    const DAYS_HOURS: u32 = 48;
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate_run(&dir.path().join("sim"), GPUS, DAYS_HOURS, INTERVAL, 9);
    let mut prom = TestPrometheus::from_openmetrics(&sim.metrics).unwrap();
    let config = clusters_file(dir.path(), &prom.url);
    let total = i64::from(DAYS_HOURS) * CLUSTERS.len() as i64;

    let clean = TestDb::migrated().unwrap();
    let clean_log = dir.path().join("clean.log");
    let status = worker(&clean.url, &config, &sim, &clean_log, true).wait().unwrap();
    assert!(status.success(), "clean worker: {}", fs::read_to_string(&clean_log).unwrap());
    let expected = psql(&clean.url, DIGEST);

    // a server of this test's own, to restart
    let pg = TestPostgres::start().unwrap();
    let url = pg.url();
    run_cardhour_ok(["migrate"], &[("DATABASE_URL", &url)]);
    let logs: Vec<PathBuf> = (0..2).map(|i| dir.path().join(format!("outage-{i}.log"))).collect();
    let ports: Vec<u16> = (0..2).map(|_| common::free_port().unwrap()).collect();
    let workers: Vec<Child> = logs
        .iter()
        .zip(&ports)
        .map(|(l, p)| {
            let listen = format!("127.0.0.1:{p}");
            worker_with(&url, &config, &sim, l, false, &["--metrics-listen", &listen])
        })
        .collect();
    // each worker's own /metrics: what it counted, and what the database says of every cluster
    let metrics = |port: u16| common::http_get(port, "/metrics").map(|(_, body)| body).unwrap_or_default();
    let figure = |text: &str, series: &str| -> Option<f64> {
        text.lines().find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
    };
    let stored = || try_psql(&url, "SELECT count(*) FROM ingested_hours").and_then(|s| s.parse::<i64>().ok());

    // Prometheus down for a while: reads fail, hours go back to the queue, health says so
    wait_for("the first hours", Duration::from_secs(90), &logs, || stored().is_some_and(|n| n >= 6));
    prom.stop();
    let down_at = stored().unwrap();
    wait_for("a failure recorded", Duration::from_secs(30), &logs, || {
        worker_health(&url).values().any(|w| w["failures_in_row"].as_i64().unwrap_or(0) >= 2)
    });
    let during = worker_health(&url);
    let failing: Vec<_> = during.values().filter(|w| w["failures_in_row"].as_i64().unwrap_or(0) > 0).collect();
    assert!(!failing.is_empty(), "{during:?}");
    assert!(failing.iter().all(|w| w["last_error_kind"] == "unreachable"), "{failing:?}");
    assert!(failing.iter().any(|w| w["failing_hours"].as_i64().unwrap() > 0), "{failing:?}");
    assert!(stored().unwrap() <= down_at + 6, "hours were stored while Prometheus was down");
    // the metrics say the same: errors counted by kind, the failures in a row, ingest down
    let errors: f64 = ports
        .iter()
        .map(|&p| {
            let text = metrics(p);
            CLUSTERS
                .iter()
                .filter_map(|c| {
                    figure(&text, &format!("cardhour_source_errors_total{{cluster=\"{c}\",kind=\"unreachable\"}}"))
                })
                .sum::<f64>()
        })
        .sum();
    assert!(errors > 0.0, "no unreachable errors in the workers' metrics");
    let text = metrics(ports[0]);
    let failing: f64 = CLUSTERS
        .iter()
        .filter_map(|c| figure(&text, &format!("cardhour_ingest_failures_in_row{{cluster=\"{c}\"}}")))
        .sum();
    assert!(failing >= 1.0, "failures in a row not in the metrics:\n{text}");
    prom.start().unwrap();

    // then PostgreSQL restarted mid-backfill: the pools reconnect, the batch in flight is retried
    wait_for("progress after Prometheus came back", Duration::from_secs(90), &logs, || {
        stored().is_some_and(|n| n >= down_at + 12)
    });
    pg.stop().unwrap();
    sleep(Duration::from_secs(3));
    pg.restart().unwrap();
    wait_for("every hour stored", Duration::from_secs(180), &logs, || {
        stored() == Some(total) && try_psql(&url, "SELECT count(*) FROM ingest_queue").as_deref() == Some("0")
    });
    // recovered, in the metrics too: no failure in a row, a recovery time, ingest up in the worker that read last
    let text = metrics(ports[0]);
    for c in CLUSTERS {
        assert_eq!(
            figure(&text, &format!("cardhour_ingest_failures_in_row{{cluster=\"{c}\"}}")),
            Some(0.0),
            "{c}:\n{text}"
        );
        assert_eq!(figure(&text, &format!("cardhour_ingest_queued_hours{{cluster=\"{c}\"}}")), Some(0.0), "{c}");
    }
    assert!(
        CLUSTERS.iter().any(|c| figure(
            &text,
            &format!("cardhour_ingest_recovered_timestamp_seconds{{cluster=\"{c}\"}}")
        )
        .is_some()),
        "no recovery time in the metrics:\n{text}"
    );
    for w in &workers {
        sigterm(w);
    }
    for (mut w, log) in workers.into_iter().zip(&logs) {
        let status = w.wait().unwrap();
        assert!(status.success(), "worker exit {status:?}: {}", fs::read_to_string(log).unwrap());
    }
    assert_eq!(psql(&url, DIGEST), expected, "the faults changed what was stored");
    let all_logs: String = logs.iter().map(|l| fs::read_to_string(l).unwrap()).collect();
    assert!(all_logs.contains("batch failed"), "no failed batch was logged");
    // recovered: failures in a row back to 0, the recovery time set after the last error
    let after = worker_health(&url);
    assert_eq!(after.len(), CLUSTERS.len(), "{after:?}");
    for (cluster, w) in &after {
        assert_eq!(w["failures_in_row"], 0, "{cluster}: {w}");
        assert_eq!(w["queued_hours"], 0, "{cluster}: {w}");
    }
    let recovered: Vec<_> = after.values().filter(|w| !w["recovered_at"].is_null()).collect();
    assert!(!recovered.is_empty(), "no recovery recorded: {after:?}");
    for w in recovered {
        let (err, rec): (DateTime<Utc>, DateTime<Utc>) = (
            w["last_error_at"].as_str().unwrap().parse().unwrap(),
            w["recovered_at"].as_str().unwrap().parse().unwrap(),
        );
        assert!(rec > err, "{w}");
    }
    let _ = run_cardhour(["health"], &[("DATABASE_URL", &url)]);
}
