//! Shared harness for the integration tests (`use crate::common;` in a module of `tests/suite.rs`).
//!
//! - [`TestPrometheus`]: a real Prometheus (2.42 from Debian, as `scripts/test.sh` installs it) serving an
//!   OpenMetrics file backfilled with `promtool` (or scraping the targets of a config, [`TestPrometheus::scraping`]),
//!   on a free loopback port, killed on drop.
//! - [`TestVictoria`]: a real VictoriaMetrics (Debian's `victoria-metrics`) holding the same backfill, copied
//!   into it with `vmctl`; [`truth`]: stored rows against the simulator's truth, shared by the truth tests.
//! - [`TestDb`]: a fresh, uniquely named PostgreSQL database next to `DATABASE_URL`, dropped on drop.
//! - [`cardhour_bin`], [`run_cardhour`], [`run_cardhour_ok`]: run the binary under test.
//! - [`simulate`], [`simulate_run`]: `cardhour simulate` with an end at least 4 h in the past, on the hour.
//! - [`om::Om`]: OpenMetrics text for hand-made clusters; [`files`]: a PDF's text, a CSV's rows, a page's visible text.
//! - [`api::TestApi`] (an in-process API server with a token per role) and [`webhook::receiver`] are async.
//!
//! Everything else here is blocking std code (no async runtime needed). Not every test file uses every helper.
#![allow(dead_code)]

pub mod api;
pub mod browser;
pub mod contract;
pub mod exactness;
pub mod files;
pub mod months;
pub mod om;
pub mod pg;
pub mod portal;
pub mod truth;
pub mod victoria;
pub mod webhook;

#[allow(unused_imports)] // not every test file starts a VictoriaMetrics
pub use victoria::TestVictoria;

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use chrono::{DateTime, DurationRound, SecondsFormat, TimeDelta, Utc};

/// promtool rounds this down to its largest block range (39366 h), so a backfill becomes one block and promtool
/// parses the file twice instead of once per 2-hour block (the same value as `scripts/lib.sh`).
pub const PROMTOOL_MAX_BLOCK_DURATION: &str = "100000h";

/// How long a test Prometheus may take to answer `/-/ready` (tests run in parallel on 2 shared cores).
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// The default database URL of `scripts/lib.sh` (used when `DATABASE_URL` is unset).
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/cardhour";

/// The URL of a `sqlx::test` database (for the CLI run against it).
pub async fn db_url(pool: &sqlx::PgPool) -> String {
    let name: String = sqlx::query_scalar("SELECT current_database()").fetch_one(pool).await.unwrap();
    let base = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.into());
    let mut url = url::Url::parse(&base).unwrap();
    url.set_path(&format!("/{name}"));
    url.to_string()
}

/// `$PROMTOOL` / `$PROMETHEUS` (and `$VICTORIA_METRICS` / `$VMCTL`) override the binaries found on PATH.
pub fn tool(env_var: &str, default: &str) -> PathBuf {
    std::env::var_os(env_var).map_or_else(|| PathBuf::from(default), PathBuf::from)
}

/// A Prometheus serving backfilled blocks only (no scrape targets), listening on `127.0.0.1:<port>`.
/// Its data lives in a temporary directory; the process is killed and reaped on drop.
pub struct TestPrometheus {
    /// `http://127.0.0.1:<port>`, no trailing slash.
    pub url: String,
    pub port: u16,
    child: Child,
    dir: tempfile::TempDir,
}

impl TestPrometheus {
    /// Backfills `path` (OpenMetrics text ending in `# EOF`, samples older than 3 h) into a fresh TSDB with
    /// promtool, then starts Prometheus on it (retention 100y) and waits until it is ready.
    pub fn from_openmetrics(path: &Path) -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("cardhour-prom-").tempdir()?;
        let tsdb = dir.path().join("tsdb");
        fs::create_dir_all(&tsdb)?;
        promtool_backfill(path, &tsdb)?;
        Self::serve(dir)
    }

    /// Starts Prometheus on the blocks in `tsdb` (a [`promtool_backfill`] another backend reads too), linked into
    /// its own directory.
    pub fn from_blocks(tsdb: &Path) -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("cardhour-prom-").tempdir()?;
        link_tree(tsdb, &dir.path().join("tsdb"))?;
        Self::serve(dir)
    }

    /// Starts Prometheus (retention 100y) on the backfilled blocks in `dir/tsdb` and waits until it is ready.
    fn serve(dir: tempfile::TempDir) -> Result<Self> {
        Self::launch(dir, "# cardhour test harness: serves backfilled blocks only\nscrape_configs: []\n")
    }

    /// A Prometheus on an empty TSDB running `config` (prometheus.yml text: e.g. scrape jobs of loopback targets),
    /// ready.
    pub fn scraping(config: &str) -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("cardhour-prom-").tempdir()?;
        fs::create_dir_all(dir.path().join("tsdb"))?;
        Self::launch(dir, config)
    }

    /// Starts Prometheus on `dir/tsdb` with `config` as `dir/prometheus.yml`, on a free port.
    fn launch(dir: tempfile::TempDir, config_text: &str) -> Result<Self> {
        fs::write(dir.path().join("prometheus.yml"), config_text)?;

        // A port picked free can be taken by a parallel test before Prometheus binds it: retry on a new one.
        let mut attempts = 0;
        loop {
            attempts += 1;
            let port = free_port()?;
            match spawn_prometheus(dir.path(), port) {
                Ok(child) => return Ok(Self { url: format!("http://127.0.0.1:{port}"), port, child, dir }),
                Err((log, exited)) => {
                    if exited && log.contains("address already in use") && attempts < 5 {
                        continue;
                    }
                    bail!("prometheus on 127.0.0.1:{port} did not start; log tail:\n{}", tail(&log, 20));
                }
            }
        }
    }

    /// Stops Prometheus (SIGKILL, as an outage would), keeping its data and port for [`Self::start`].
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts Prometheus again on the same port and data after [`Self::stop`].
    pub fn start(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match spawn_prometheus(self.dir.path(), self.port) {
                Ok(child) => {
                    self.child = child;
                    return Ok(());
                }
                // the old listener may linger for a moment
                Err((log, true)) if log.contains("address already in use") && Instant::now() < deadline => {
                    sleep(Duration::from_millis(200))
                }
                Err((log, _)) => bail!("prometheus did not start again; log tail:\n{}", tail(&log, 20)),
            }
        }
    }

    /// The directory holding `tsdb/`, `prometheus.yml` and `prometheus.log`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Prometheus' log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// `GET <url><path_and_query>`; returns the status code and body.
    pub fn get(&self, path_and_query: &str) -> Result<(u16, String)> {
        http_get(self.port, path_and_query)
    }

    /// An instant query evaluated at `time`; returns `data` of the API response (errors on a non-success status).
    pub fn query(&self, promql: &str, time: DateTime<Utc>) -> Result<serde_json::Value> {
        let q: String = url::form_urlencoded::byte_serialize(promql.as_bytes()).collect();
        let t = format!("{}.{:03}", time.timestamp(), time.timestamp_subsec_millis());
        let (code, body) = self.get(&format!("/api/v1/query?query={q}&time={t}"))?;
        let v: serde_json::Value =
            serde_json::from_str(&body).with_context(|| format!("HTTP {code}, not JSON: {body}"))?;
        if v["status"] != "success" {
            bail!("query {promql:?} failed: HTTP {code}: {body}");
        }
        Ok(v["data"].clone())
    }
}

impl Drop for TestPrometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Prometheus on `dir/tsdb` with `dir/prometheus.yml` on `127.0.0.1:port`, logging to `dir/prometheus.log`,
/// and waits until it is ready. On failure: the log and whether the process exited (else it was not ready in time).
fn spawn_prometheus(dir: &Path, port: u16) -> std::result::Result<Child, (String, bool)> {
    let log_path = dir.join("prometheus.log");
    let spawned = fs::File::create(&log_path).and_then(|log| {
        Command::new(tool("PROMETHEUS", "prometheus"))
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
            .arg("--storage.tsdb.retention.time=100y")
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
    });
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return Err((format!("spawning prometheus (run scripts/test.sh, which installs it): {e}"), true)),
    };
    match wait_ready(&mut child, port) {
        Ok(()) => Ok(child),
        Err(exited) => {
            let _ = child.kill();
            let _ = child.wait();
            let mut log = fs::read_to_string(&log_path).unwrap_or_default();
            if exited.is_none() {
                log.push_str(&format!("\n(not ready after {READY_TIMEOUT:?})"));
            }
            Err((log, exited.is_some()))
        }
    }
}

/// `promtool tsdb create-blocks-from openmetrics` of `openmetrics` (samples older than 3 h) into `tsdb`.
pub fn promtool_backfill(openmetrics: &Path, tsdb: &Path) -> Result<()> {
    let promtool = tool("PROMTOOL", "promtool");
    let out = Command::new(&promtool)
        .args(["tsdb", "create-blocks-from", "openmetrics", "--quiet"])
        .arg(format!("--max-block-duration={PROMTOOL_MAX_BLOCK_DURATION}"))
        .arg(openmetrics)
        .arg(tsdb)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {} (run scripts/test.sh, which installs it)", promtool.display()))?;
    if !out.status.success() {
        bail!(
            "promtool create-blocks-from openmetrics {} failed ({}): {}{}",
            openmetrics.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// `to` as a copy of the tree `from`, its files hard-linked (copied across file systems): blocks are never
/// written in place, so two servers can read one backfill.
pub fn link_tree(from: &Path, to: &Path) -> Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type()?.is_dir() {
            link_tree(&src, &dst)?;
        } else if fs::hard_link(&src, &dst).is_err() {
            fs::copy(&src, &dst).with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
        }
    }
    Ok(())
}

/// Polls `/-/ready` until it answers 200. `Err(Some(status))`: the process exited; `Err(None)`: timed out.
fn wait_ready(child: &mut Child, port: u16) -> std::result::Result<(), Option<ExitStatus>> {
    wait_for(child, port, "/-/ready")
}

/// Polls `path` until it answers 200 (see [`wait_ready`]).
pub fn wait_for(child: &mut Child, port: u16, path: &str) -> std::result::Result<(), Option<ExitStatus>> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Some(status));
        }
        if matches!(http_get(port, path), Ok((200, _))) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(None);
        }
        sleep(Duration::from_millis(50));
    }
}

/// A port that was free on 127.0.0.1 a moment ago.
pub fn free_port() -> Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}

/// A minimal blocking HTTP/1.0 GET to `127.0.0.1:port` (the response body is read to EOF).
pub fn http_get(port: u16, path_and_query: &str) -> Result<(u16, String)> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    write!(stream, "GET {path_and_query} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(|| anyhow!("malformed HTTP response: {text}"))?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| anyhow!("malformed HTTP status line: {head}"))?;
    Ok((code, body.to_string()))
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

// --- the binary under test --------------------------------------------------------------------------------------

/// The `cardhour` binary cargo built for this test run.
pub fn cardhour_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_cardhour"))
}

/// Runs `cardhour ARGS` with `env` added to the test's environment, minus every inherited `CARDHOUR_*`
/// variable (so a developer's shell does not leak into tests). `DATABASE_URL` is inherited unless `env` sets it.
/// Panics only if the binary cannot be started; check `status` yourself or use [`run_cardhour_ok`].
pub fn run_cardhour<I, S>(args: I, env: &[(&str, &str)]) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new(cardhour_bin());
    cmd.args(args).stdin(Stdio::null());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("CARDHOUR_") {
            cmd.env_remove(&key);
        }
    }
    cmd.envs(env.iter().copied());
    cmd.output().unwrap_or_else(|e| panic!("cannot run {}: {e}", cardhour_bin().display()))
}

/// [`run_cardhour`] that panics (showing the command, stdout and stderr) unless it exits 0; returns stdout.
pub fn run_cardhour_ok<I, S>(args: I, env: &[(&str, &str)]) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let out = run_cardhour(&args, env);
    assert!(
        out.status.success(),
        "cardhour {:?} failed ({}):\n--- stdout\n{}\n--- stderr\n{}",
        args,
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("cardhour wrote non-UTF-8 to stdout")
}

// --- simulated clusters -----------------------------------------------------------------------------------------

/// The output of one `cardhour simulate` run.
#[derive(Debug, Clone)]
pub struct Simulation {
    pub dir: PathBuf,
    /// `dir/metrics.om`, OpenMetrics for [`TestPrometheus::from_openmetrics`].
    pub metrics: PathBuf,
    /// `dir/truth.json`, the simulator's independent ground truth.
    pub truth: PathBuf,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

impl Simulation {
    /// `start` as RFC 3339 (`2026-01-01T00:00:00Z`), for `--from`.
    pub fn start_arg(&self) -> String {
        rfc3339(self.start)
    }
    /// `end` as RFC 3339, for `--to`.
    pub fn end_arg(&self) -> String {
        rfc3339(self.end)
    }
    /// `truth.json` parsed.
    pub fn truth_json(&self) -> serde_json::Value {
        let text = fs::read_to_string(&self.truth).unwrap_or_else(|e| panic!("{}: {e}", self.truth.display()));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", self.truth.display()))
    }
}

/// `2026-01-01T00:00:00Z`
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// The end every simulation uses: the whole hour at least 4 h before now, so backfilled samples never reach
/// the range of Prometheus' head block (the last ~3 h).
pub fn sim_end() -> DateTime<Utc> {
    Utc::now().duration_trunc(TimeDelta::hours(1)).expect("truncating now to the hour") - TimeDelta::hours(4)
}

/// Runs `cardhour simulate --gpus G --hours H --scrape-interval I --seed S --end <sim_end()> --out DIR`
/// and returns what it wrote. Panics if the simulation fails or wrote no `metrics.om`.
pub fn simulate_run(dir: &Path, gpus: u32, hours: u32, interval_secs: u32, seed: u64) -> Simulation {
    simulate_profile(dir, "standard", gpus, hours, interval_secs, seed, &[])
}

/// [`simulate_run`] of a `--profile` (`standard`, `shared`), with further `cardhour simulate` flags (e.g.
/// `--ksm-gaps`).
pub fn simulate_profile(
    dir: &Path,
    profile: &str,
    gpus: u32,
    hours: u32,
    interval_secs: u32,
    seed: u64,
    extra: &[&str],
) -> Simulation {
    let end = sim_end();
    let start = end - TimeDelta::hours(i64::from(hours));
    let args: Vec<OsString> = vec![
        "simulate".into(),
        "--profile".into(),
        profile.into(),
        "--gpus".into(),
        gpus.to_string().into(),
        "--hours".into(),
        hours.to_string().into(),
        "--scrape-interval".into(),
        interval_secs.to_string().into(),
        "--seed".into(),
        seed.to_string().into(),
        "--end".into(),
        rfc3339(end).into(),
        "--out".into(),
        dir.as_os_str().to_owned(),
    ];
    let args = args.into_iter().chain(extra.iter().map(OsString::from));
    run_cardhour_ok(args, &[]);
    let sim = Simulation {
        dir: dir.to_path_buf(),
        metrics: dir.join("metrics.om"),
        truth: dir.join("truth.json"),
        start,
        end,
    };
    assert!(sim.metrics.is_file(), "cardhour simulate wrote no {}", sim.metrics.display());
    sim
}

/// [`simulate_run`], returning the path of the OpenMetrics file (`dir/metrics.om`; the truth is `dir/truth.json`).
pub fn simulate(dir: &Path, gpus: u32, hours: u32, interval_secs: u32, seed: u64) -> PathBuf {
    simulate_run(dir, gpus, hours, interval_secs, seed).metrics
}

// --- PostgreSQL -------------------------------------------------------------------------------------------------

/// A fresh empty database `cardhour_test_<pid>_<n>` on the server of `DATABASE_URL` (default
/// [`DEFAULT_DATABASE_URL`]), created and dropped (`WITH (FORCE)`) with `psql`.
pub struct TestDb {
    /// The URL of the new database; pass it as `DATABASE_URL`.
    pub url: String,
    pub name: String,
    admin_url: String,
}

impl TestDb {
    pub fn new() -> Result<Self> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let base = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_string());
        let mut url = url::Url::parse(&base).with_context(|| format!("DATABASE_URL {base:?}"))?;
        let name = format!("cardhour_test_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed));
        url.set_path("/postgres");
        let admin_url = url.to_string();
        url.set_path(&format!("/{name}"));
        psql(&admin_url, &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))?;
        psql(&admin_url, &format!("CREATE DATABASE {name}"))?;
        Ok(Self { url: url.to_string(), name, admin_url })
    }

    /// A fresh database with `cardhour migrate` applied.
    pub fn migrated() -> Result<Self> {
        let db = Self::new()?;
        let out = run_cardhour(["migrate"], &[("DATABASE_URL", &db.url)]);
        if !out.status.success() {
            bail!("cardhour migrate failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
        }
        Ok(db)
    }

    /// Runs SQL on this database with psql; returns the unaligned, tuples-only output (`|`-separated columns).
    pub fn psql(&self, sql: &str) -> Result<String> {
        psql(&self.url, sql)
    }

    /// `[("DATABASE_URL", url)]`, for [`run_cardhour`]'s `env`.
    pub fn env(&self) -> [(&str, &str); 1] {
        [("DATABASE_URL", self.url.as_str())]
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = psql(&self.admin_url, &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name));
    }
}

fn psql(url: &str, sql: &str) -> Result<String> {
    let out = Command::new("psql")
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql])
        .stdin(Stdio::null())
        .output()
        .context("running psql (run scripts/test.sh, which installs PostgreSQL)")?;
    if !out.status.success() {
        bail!("psql {sql:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

/// An amount as a statement prints it (layout 3): `¥` and thousands separators, written here independently of
/// the code that prints it.
pub fn yuan(amount: &str) -> String {
    let (int, frac) = amount.split_once('.').unwrap_or((amount, "00"));
    let digits: Vec<char> = int.chars().collect();
    let mut grouped = String::new();
    for (i, c) in digits.iter().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(*c);
    }
    format!("¥{grouped}.{frac}")
}
