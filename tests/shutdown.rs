//! SIGTERM is a graceful stop: `serve` answers the request in flight and exits 0; `worker` finishes the hour it
//! is storing and exits 0, every stored hour whole; `ingest` stops after its hour and says how far it got.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{TestDb, TestPrometheus, cardhour_bin, free_port, run_cardhour_ok, simulate_run};

const INTERVAL: u32 = 60;

fn sigterm(child: &Child) {
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("run kill");
    assert!(status.success());
}

/// Waits for the child to exit, at most `bound`.
fn wait_bounded(child: &mut Child, bound: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > bound {
            child.kill().unwrap();
            panic!("the process did not exit within {bound:?} of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn digest(db: &TestDb) -> String {
    db.psql(
        "SELECT md5(coalesce(string_agg(u::text, '|' ORDER BY u::text), '')) FROM gpu_usage_hourly u
         UNION ALL SELECT md5(coalesce(string_agg(c::text, '|' ORDER BY c::text), '')) FROM node_capacity_hourly c",
    )
    .unwrap()
}

/// Runs `args` until its stderr has said "stored hour" twice, then sends SIGTERM; returns the exit status and the
/// rest of its stderr.
fn term_after_two_hours(args: &[&str], db: &TestDb) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(cardhour_bin())
        .args(args)
        .env("DATABASE_URL", &db.url)
        .env("CARDHOUR_LOG", "cardhour=debug")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut stored = 0;
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 {
        if line.contains("stored hour") {
            stored += 1;
            if stored == 2 {
                sigterm(&child);
                break;
            }
        }
        line.clear();
    }
    assert_eq!(stored, 2, "the process ended before storing two hours");
    let reader = std::thread::spawn(move || {
        let mut rest = String::new();
        stderr.read_to_string(&mut rest).unwrap();
        rest
    });
    let status = wait_bounded(&mut child, Duration::from_secs(15));
    (status, reader.join().unwrap())
}

/// Every stored hour is whole: the watermark ends right after the last stored hour.
fn assert_hours_whole(db: &TestDb, total: i64) -> i64 {
    let partial: i64 = db.psql("SELECT count(*) FROM ingested_hours").unwrap().trim().parse().unwrap();
    assert!((2..total).contains(&partial), "stopped after {partial} of {total} hours");
    let mark = db
        .psql(
            "SELECT complete_until = (SELECT max(hour) + interval '1 hour' FROM ingested_hours) FROM ingest_watermarks",
        )
        .unwrap();
    assert_eq!(mark.trim(), "t");
    partial
}

#[test]
fn sigterm_stops_the_worker_and_the_ingest_after_a_whole_hour() {
    let dir = tempfile::tempdir().unwrap();
    let sim = simulate_run(dir.path(), 16, 72, INTERVAL, 11);
    let prom = TestPrometheus::from_openmetrics(&sim.metrics).unwrap();
    let (from, to) = (sim.start_arg(), sim.end_arg());
    let ingest =
        ["ingest", "--cluster", "sim", "--prometheus", &prom.url, "--from", &from, "--to", &to, "--chunk-hours", "1"];
    let clean = TestDb::migrated().unwrap();
    run_cardhour_ok(ingest, &clean.env());

    // the worker: exit 0, after the hour it was storing
    let worker_db = TestDb::migrated().unwrap();
    let hours_back = ((chrono::Utc::now() - sim.start).num_hours() + 1).to_string();
    let worker = [
        "worker",
        "--once",
        "--cluster",
        "sim",
        "--prometheus",
        &prom.url,
        "--initial-hours",
        &hours_back,
        "--chunk-hours",
        "1",
    ];
    let (status, stderr) = term_after_two_hours(&worker, &worker_db);
    assert!(status.success(), "worker exit {status:?}: {stderr}");
    assert!(stderr.contains("stopping after the batch being stored"), "{stderr}");
    assert_hours_whole(&worker_db, 72);
    // what it did not do, the next run does: the same rows as a clean run
    run_cardhour_ok(ingest, &worker_db.env());
    assert_eq!(digest(&worker_db), digest(&clean));

    // the one-off ingest: stops after its hour, says how far it got, exits non-zero
    let ingest_db = TestDb::migrated().unwrap();
    let (status, stderr) = term_after_two_hours(&ingest, &ingest_db);
    assert!(!status.success(), "an interrupted ingest is not a success");
    let partial = assert_hours_whole(&ingest_db, 72);
    assert!(stderr.contains(&format!("stopped by a signal after {partial} of 72 hours")), "{stderr}");
    run_cardhour_ok(ingest, &ingest_db.env());
    assert_eq!(digest(&ingest_db), digest(&clean));
}

#[test]
fn sigterm_lets_serve_answer_the_request_in_flight_then_exit_0() {
    let db = TestDb::migrated().unwrap();
    let out = run_cardhour_ok(["token", "create", "--name", "t", "--role", "viewer"], &db.env());
    let token = out.split_whitespace().find(|w| w.starts_with("chr_")).expect("the token is printed").to_string();
    let port = free_port().unwrap();
    let listen = format!("127.0.0.1:{port}");
    let mut child = Command::new(cardhour_bin())
        .args(["serve", "--listen", &listen])
        .env("DATABASE_URL", &db.url)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut conn = loop {
        match TcpStream::connect(&listen) {
            Ok(c) => break c,
            Err(_) if start.elapsed() < Duration::from_secs(20) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("serve did not listen: {e}"),
        }
    };
    let body = r#"{"card_price": "80000", "server_share_per_card": "40000", "depreciation_years": "5",
        "avg_power_kw": "0.5", "pue": "1.4", "electricity_price": "0.8", "system_factor": "1.2",
        "datacenter_per_card_year": "3000", "staff_per_card_year": "2000", "recovery_utilization": "0.7"}"#;
    let (head, tail) = body.split_at(body.len() / 2);
    write!(
        conn,
        "POST /api/v1/rates/preview HTTP/1.1\r\nHost: {listen}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{head}",
        body.len()
    )
    .unwrap();
    conn.flush().unwrap();
    // the request is in flight (headers read, body half sent) when SIGTERM arrives
    std::thread::sleep(Duration::from_millis(300));
    sigterm(&child);
    std::thread::sleep(Duration::from_millis(300));
    // no new connection is accepted any more
    assert!(TcpStream::connect(&listen).is_err(), "a stopping server accepts no new connections");
    conn.write_all(tail.as_bytes()).unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    // the SPEC's worked example: 0.5 kW × 8760 × 1.4 × 0.8 = 4,905.60 yuan per card per year before the factor
    assert!(answer.contains("4905.60"), "{answer}");
    let status = wait_bounded(&mut child, Duration::from_secs(10));
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(status.success(), "serve exit {status:?}: {stderr}");
    assert!(stderr.contains("server stopped"), "{stderr}");
}
