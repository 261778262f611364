//! A real VictoriaMetrics (Debian's `victoria-metrics`, as `scripts/test.sh` installs it) holding a simulated
//! cluster: the OpenMetrics backfilled with promtool as for [`super::TestPrometheus`], copied in with `vmctl
//! prometheus --prom-snapshot` (a promtool TSDB is a snapshot's layout), flushed and counted before it is used.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::{free_port, http_get, link_tree, promtool_backfill, tail, tool, wait_for};

/// Padding series after the data, more than vmctl's importer queues (`4 × --vm-concurrency`).
const VMCTL_PADDING: u64 = 32;
const VMCTL_CONCURRENCY: &str = "--vm-concurrency=2";

/// How long VictoriaMetrics may take to answer `/health`, and the imported samples to become searchable.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// A single-node VictoriaMetrics on `127.0.0.1:<port>` with its own data directory (retention 100y), killed and
/// reaped on drop.
pub struct TestVictoria {
    /// `http://127.0.0.1:<port>`, no trailing slash.
    pub url: String,
    pub port: u16,
    /// The samples of the OpenMetrics vmctl sent (its NaN samples among them).
    pub sent: u64,
    /// The samples of the OpenMetrics VictoriaMetrics holds (NaN samples are dropped on ingestion).
    pub stored: u64,
    child: Child,
    dir: tempfile::TempDir,
}

impl TestVictoria {
    /// Backfills `path` (OpenMetrics ending in `# EOF`, samples older than 3 h) with promtool, starts
    /// VictoriaMetrics, imports the blocks with vmctl and waits until every imported sample is searchable.
    pub fn from_openmetrics(path: &Path) -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("cardhour-vm-").tempdir()?;
        let tsdb = dir.path().join("tsdb");
        fs::create_dir_all(&tsdb)?;
        promtool_backfill(path, &tsdb)?;
        Self::import(dir)
    }

    /// The blocks in `tsdb` (a [`promtool_backfill`] another backend reads too), linked into its own directory and
    /// imported as by [`Self::from_openmetrics`].
    pub fn from_blocks(tsdb: &Path) -> Result<Self> {
        let dir = tempfile::Builder::new().prefix("cardhour-vm-").tempdir()?;
        link_tree(tsdb, &dir.path().join("tsdb"))?;
        Self::import(dir)
    }

    /// Starts VictoriaMetrics and imports `dir/tsdb` into it.
    fn import(dir: tempfile::TempDir) -> Result<Self> {
        let tsdb = dir.path().join("tsdb");
        // vmctl 1.79 drops the series still queued when its reader ends (its importer's channel, 4 per worker, is
        // not drained on close): a block of padding series read after the data takes their place
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs();
        let mut pad = String::from("# TYPE cardhour_vmctl_padding gauge\n");
        for n in 0..VMCTL_PADDING {
            pad.push_str(&format!("cardhour_vmctl_padding{{n=\"{n}\"}} 0 {}\n", now - 3600));
        }
        pad.push_str("# EOF\n");
        let pad_path = dir.path().join("padding.om");
        fs::write(&pad_path, pad)?;
        promtool_backfill(&pad_path, &tsdb)?;

        let (child, port) = start(dir.path())?;
        let mut vm = Self { url: format!("http://127.0.0.1:{port}"), port, sent: 0, stored: 0, child, dir };
        let sent = vm.vmctl_import(&tsdb)?;
        vm.wait_searchable(sent)?;
        // every row is in and flushed, yet under load a first query has found no series at all (an index part
        // not yet searchable): asked again until the padding, which vmctl never loses whole, is seen
        let deadline = Instant::now() + READY_TIMEOUT;
        let padding = loop {
            match vm.count("cardhour_vmctl_padding") {
                Ok(n) => break n,
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => {
                    vm.get("/internal/force_flush")?;
                    sleep(Duration::from_millis(200));
                }
            }
        };
        (vm.sent, vm.stored) = (sent - padding, vm.count(r#"{__name__=~".+"}"#)? - padding);
        Ok(vm)
    }

    /// VictoriaMetrics' log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("victoria-metrics.log")).unwrap_or_default()
    }

    /// `GET <url><path_and_query>`; returns the status code and body.
    pub fn get(&self, path_and_query: &str) -> Result<(u16, String)> {
        http_get(self.port, path_and_query)
    }

    /// The samples of `selector` over the last ten years, counted now (no cached answer).
    fn count(&self, selector: &str) -> Result<u64> {
        let q = format!("sum(count_over_time({selector}[3650d]))");
        let q: String = url::form_urlencoded::byte_serialize(q.as_bytes()).collect();
        let (code, body) = self.get(&format!("/api/v1/query?query={q}"))?;
        let v: serde_json::Value = serde_json::from_str(&body).with_context(|| format!("HTTP {code}: {body}"))?;
        v["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|c| c.parse().ok())
            .with_context(|| format!("counting {selector}: HTTP {code}: {body}"))
    }

    /// `vmctl prometheus` of the blocks in `tsdb` (in time order, one at a time); the number of samples it sent.
    fn vmctl_import(&self, tsdb: &Path) -> Result<u64> {
        let vmctl = tool("VMCTL", "vmctl");
        // vmctl's progress bars (1.79) put the terminal on stdin into raw mode, and give up when stdin is not one:
        // a pseudo-terminal's master side will do
        let stdin =
            fs::OpenOptions::new().read(true).write(true).open("/dev/ptmx").map_or_else(|_| Stdio::null(), Stdio::from);
        let out = Command::new(&vmctl)
            .args(["prometheus", "-s", "--vm-disable-progress-bar", "--prom-concurrency=1", VMCTL_CONCURRENCY])
            .arg(format!("--prom-snapshot={}", tsdb.display()))
            .arg(format!("--vm-addr={}", self.url))
            .stdin(stdin)
            .output()
            .with_context(|| format!("running {} (run scripts/test.sh, which installs it)", vmctl.display()))?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        if !out.status.success() || !text.contains("Import finished!") {
            bail!("vmctl prometheus --prom-snapshot={} failed ({}):\n{}", tsdb.display(), out.status, tail(&text, 20));
        }
        let samples = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("total samples: "))
            .and_then(|n| n.trim_end_matches(';').parse().ok())
            .with_context(|| format!("vmctl printed no sample count:\n{}", tail(&text, 20)))?;
        Ok(samples)
    }

    /// Flushes VictoriaMetrics' in-memory buffers and waits until its own counters say every row vmctl sent was
    /// received and none is pending (not yet searchable), in its storage or its index. No query is asked before:
    /// an answer cached before the flush could outlive it.
    fn wait_searchable(&self, sent: u64) -> Result<()> {
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last = String::new();
        while Instant::now() < deadline {
            let (code, body) = self.get("/internal/force_flush")?;
            if code != 200 {
                bail!("/internal/force_flush answered HTTP {code}: {body}");
            }
            let (_, metrics) = self.get("/metrics")?;
            let value = |name: &str| {
                metrics.lines().find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok()).unwrap_or(-1.0)
            };
            let received = value(r#"vm_rows_inserted_total{type="vmimport"}"#);
            let pending = [value(r#"vm_pending_rows{type="storage"}"#), value(r#"vm_pending_rows{type="indexdb"}"#)];
            if received == sent as f64 && pending == [0.0, 0.0] {
                return Ok(());
            }
            last = format!("{received} rows received, {pending:?} pending");
            sleep(Duration::from_millis(100));
        }
        bail!("{sent} rows sent by vmctl, not all searchable after {READY_TIMEOUT:?}: {last}")
    }
}

impl Drop for TestVictoria {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts VictoriaMetrics on a free port with its data under `dir`; a port taken before it binds is retried.
fn start(dir: &Path) -> Result<(Child, u16)> {
    let log_path = dir.join("victoria-metrics.log");
    let mut attempts = 0;
    loop {
        attempts += 1;
        let port = free_port()?;
        let log = fs::File::create(&log_path)?;
        let mut child = Command::new(tool("VICTORIA_METRICS", "victoria-metrics"))
            .arg(format!("-storageDataPath={}", dir.join("data").display()))
            .arg("-retentionPeriod=100y")
            .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("spawning victoria-metrics (run scripts/test.sh, which installs it)")?;
        match wait_for(&mut child, port, "/health") {
            Ok(()) => return Ok((child, port)),
            Err(exited) => {
                let _ = child.kill();
                let _ = child.wait();
                let log = fs::read_to_string(&log_path).unwrap_or_default();
                if exited.is_some() && log.contains("address already in use") && attempts < 5 {
                    continue;
                }
                let why = match exited {
                    Some(status) => format!("exited ({status})"),
                    None => "was not ready in time".to_string(),
                };
                bail!("victoria-metrics on 127.0.0.1:{port} {why}; log tail:\n{}", tail(&log, 20));
            }
        }
    }
}
