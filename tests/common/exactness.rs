//! The differential exactness harness (issue 34): one `cardhour simulate --profile exactness` run read back by
//! every way cardhour reads hours — remote read, the query API and VictoriaMetrics' export in batches from one hour
//! to a week, shuffled batches each in a fresh process, two workers hour by hour, a restart between batches, a
//! re-ingest — each into its own database, every stored pod-hour against the simulator's truth (`by_pod_hour`),
//! and the stored rows' md5 equal whatever the path.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use chrono::{DateTime, Datelike, TimeDelta, TimeZone, Utc};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

use super::truth::digest;
use super::{Simulation, TestDb, TestPrometheus, TestVictoria, cardhour_bin, rfc3339, run_cardhour_ok, sim_end};

const HOUR_S: f64 = 3600.0;

/// One simulation: the exactness profile (with KSM gaps) or another.
pub struct ExactRun {
    /// `exactness` (with `--ksm-gaps`), `standard` or `shared`.
    pub profile: &'static str,
    pub gpus: u32,
    pub hours: u32,
    /// kube-state-metrics' scrape interval (s); DCGM and HAMi's monitor run on 1.5 times it, each node on its phase.
    pub ksm_interval: u32,
    pub seed: u64,
}

/// The window's end: two hours after the latest month start (UTC) that leaves the window before [`sim_end`], so the
/// window crosses the UTC month's start and, `hours` ≥ 11, the billing time zone's (Asia/Shanghai, 8 h earlier).
pub fn month_crossing_end() -> DateTime<Utc> {
    let latest = sim_end();
    let mut month = Utc.with_ymd_and_hms(latest.year(), latest.month(), 1, 0, 0, 0).unwrap();
    while month + TimeDelta::hours(2) > latest {
        let prev = month - TimeDelta::days(1);
        month = Utc.with_ymd_and_hms(prev.year(), prev.month(), 1, 0, 0, 0).unwrap();
    }
    month + TimeDelta::hours(2)
}

/// `cardhour simulate --profile <profile>` of `run` (the exactness profile `--ksm-gaps`), ending at `end`.
pub fn simulate(dir: &Path, run: &ExactRun, end: DateTime<Utc>) -> Simulation {
    let start = end - TimeDelta::hours(i64::from(run.hours));
    let gaps: &[&str] = if run.profile == "exactness" { &["--ksm-gaps"] } else { &[] };
    let args: Vec<OsString> = [
        "simulate",
        "--profile",
        run.profile,
        "--gpus",
        &run.gpus.to_string(),
        "--hours",
        &run.hours.to_string(),
        "--scrape-interval",
        &run.ksm_interval.to_string(),
        "--seed",
        &run.seed.to_string(),
        "--end",
        &rfc3339(end),
        "--out",
    ]
    .into_iter()
    .map(OsString::from)
    .chain([dir.as_os_str().to_owned()])
    .chain(gaps.iter().map(OsString::from))
    .collect();
    run_cardhour_ok(args, &[]);
    Simulation { dir: dir.into(), metrics: dir.join("metrics.om"), truth: dir.join("truth.json"), start, end }
}

/// Where the hours are read from.
pub struct Backends<'a> {
    pub prom: &'a TestPrometheus,
    pub vm: &'a TestVictoria,
}

/// One way of reading the simulation's hours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadPath {
    /// Prometheus' remote read, 6-hour batches (the default).
    RemoteRead6h,
    /// The query API of Prometheus, one-hour batches.
    Query1h,
    /// VictoriaMetrics' export, one-week batches.
    VmExport1w,
    /// Batches of random size ≤ 5 h in random order, each by a fresh `cardhour ingest` (remote read).
    Shuffled,
    /// Two workers side by side sharing the span hour by hour (`worker --once --from --to --chunk-hours 1`).
    Workers,
    /// A first process stops after some batches, a second reads the rest.
    Restart,
    /// The whole span read twice into the same database (remote read, then the query API in 2-hour batches).
    Reingest,
    /// Remote read in batches sized by samples (`--batch-samples` of 2.5 hours of the simulation: 1, 2, 2, … h).
    RemoteReadBySamples,
    /// VictoriaMetrics' export with the default sample budget and no `--chunk-hours` (1, 4, … h).
    VmExportDefault,
}

pub const READ_PATHS: [ReadPath; 9] = [
    ReadPath::RemoteRead6h,
    ReadPath::Query1h,
    ReadPath::VmExport1w,
    ReadPath::Shuffled,
    ReadPath::Workers,
    ReadPath::Restart,
    ReadPath::Reingest,
    ReadPath::RemoteReadBySamples,
    ReadPath::VmExportDefault,
];

impl ReadPath {
    pub fn name(self) -> &'static str {
        match self {
            ReadPath::RemoteRead6h => "remote-read 6h",
            ReadPath::Query1h => "query 1h",
            ReadPath::VmExport1w => "vm-export 1w",
            ReadPath::Shuffled => "shuffled ≤5h",
            ReadPath::Workers => "2 workers 1h",
            ReadPath::Restart => "restart",
            ReadPath::Reingest => "re-ingest",
            ReadPath::RemoteReadBySamples => "remote-read by samples",
            ReadPath::VmExportDefault => "vm-export default",
        }
    }
}

/// How a `cardhour ingest` sizes its batches.
#[derive(Clone, Copy)]
enum Batches {
    /// `--chunk-hours N` (with the default sample budget, which these small simulations never reach).
    Hours(u32),
    /// `--batch-samples N`, no `--chunk-hours`.
    Samples(u64),
    /// Neither flag.
    Default,
}

/// `cardhour ingest` of `[from, to)` from `url` into `db`.
fn ingest(db: &TestDb, url: &str, from: DateTime<Utc>, to: DateTime<Utc>, source: &str, chunk: u32) {
    ingest_by(db, url, (from, to), source, Batches::Hours(chunk));
}

fn ingest_by(db: &TestDb, url: &str, (from, to): (DateTime<Utc>, DateTime<Utc>), source: &str, batches: Batches) {
    let (from, to) = (rfc3339(from), rfc3339(to));
    let mut args: Vec<String> = ["ingest", "--cluster", "exact", "--prometheus", url, "--from", &from, "--to", &to]
        .into_iter()
        .map(String::from)
        .collect();
    args.extend(["--source", source, "--format", "json"].map(String::from));
    match batches {
        Batches::Hours(n) => args.extend(["--chunk-hours".to_string(), n.to_string()]),
        Batches::Samples(n) => args.extend(["--batch-samples".to_string(), n.to_string()]),
        Batches::Default => {}
    }
    run_cardhour_ok(args.iter().map(String::as_str), &db.env());
}

/// The samples of an hour of the simulation, about: its OpenMetrics lines (one sample each) over its hours.
fn samples_per_hour(sim: &Simulation) -> u64 {
    let lines = std::io::BufRead::lines(std::io::BufReader::new(std::fs::File::open(&sim.metrics).unwrap())).count();
    lines as u64 / (sim.end - sim.start).num_hours().max(1) as u64
}

/// A worker sharing `[from, to)` with the others hour by hour, exiting when no hour is left.
fn spawn_worker(db: &TestDb, url: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> Child {
    Command::new(cardhour_bin())
        .args(["worker", "--once", "--cluster", "exact", "--prometheus", url, "--chunk-hours", "1"])
        .args(["--source", "remote-read", "--from", &rfc3339(from), "--to", &rfc3339(to)])
        .env("DATABASE_URL", &db.url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning cardhour worker")
}

/// Reads the simulation's hours by `path` into a fresh database; `seed` draws the shuffled batches and the
/// restart's split.
pub fn read(sim: &Simulation, b: &Backends, path: ReadPath, seed: u64) -> TestDb {
    let db = TestDb::migrated().unwrap();
    let (start, end) = (sim.start, sim.end);
    let hours = (end - start).num_hours();
    let at = |h: i64| start + TimeDelta::hours(h);
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    match path {
        ReadPath::RemoteRead6h => ingest(&db, &b.prom.url, start, end, "remote-read", 6),
        ReadPath::Query1h => ingest(&db, &b.prom.url, start, end, "query", 1),
        ReadPath::VmExport1w => ingest(&db, &b.vm.url, start, end, "vm-export", 168),
        ReadPath::Shuffled => {
            let mut batches = Vec::new();
            let mut h = 0;
            while h < hours {
                let n = rng.random_range(1..=5).min(hours - h);
                batches.push((h, h + n));
                h += n;
            }
            batches.shuffle(&mut rng);
            for (a, z) in batches {
                let chunk = rng.random_range(1..=(z - a) as u32);
                ingest(&db, &b.prom.url, at(a), at(z), "remote-read", chunk);
            }
        }
        ReadPath::Workers => {
            let workers: Vec<Child> = (0..2).map(|_| spawn_worker(&db, &b.prom.url, start, end)).collect();
            for w in workers {
                let out = w.wait_with_output().unwrap();
                assert!(out.status.success(), "worker failed: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
        ReadPath::Restart => {
            let split = rng.random_range(1..hours);
            ingest(&db, &b.prom.url, start, at(split), "remote-read", 3);
            ingest(&db, &b.prom.url, at(split), end, "remote-read", 3);
        }
        ReadPath::Reingest => {
            ingest(&db, &b.prom.url, start, end, "remote-read", 6);
            ingest(&db, &b.prom.url, start, end, "query", 2);
        }
        ReadPath::RemoteReadBySamples => {
            // the least budget the flag takes is 10,000 samples: tiny simulations read one hour at a time
            let budget = (samples_per_hour(sim) * 5 / 2).max(10_000);
            ingest_by(&db, &b.prom.url, (start, end), "remote-read", Batches::Samples(budget));
        }
        ReadPath::VmExportDefault => ingest_by(&db, &b.vm.url, (start, end), "vm-export", Batches::Default),
    }
    db
}

/// GPU-hours, effective and unmetered GPU-hours.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Fig {
    pub gpu: f64,
    pub eff: f64,
    pub unm: f64,
}

/// Stored per (hour, namespace, pod), summed over its rows (containers, resources, models).
pub fn stored_pod_hours(db: &TestDb) -> BTreeMap<(String, String, String), Fig> {
    let out = db
        .psql(
            "SELECT to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), namespace, pod,
                    sum(gpu_seconds), sum(effective_gpu_seconds), sum(unmetered_gpu_seconds)
             FROM gpu_usage_hourly GROUP BY 1, 2, 3",
        )
        .unwrap();
    out.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let c: Vec<&str> = l.split('|').collect();
            let f = |i: usize| c[i].parse::<f64>().unwrap() / HOUR_S;
            ((c[0].into(), c[1].into(), c[2].into()), Fig { gpu: f(3), eff: f(4), unm: f(5) })
        })
        .collect()
}

/// (hour, namespace, pod, model, engine) → (input tokens, output tokens, requests); tokens `None` for Triton.
pub type ServingRows = BTreeMap<(String, String, String, String, String), (Option<i64>, Option<i64>, i64)>;

/// The stored serving rows.
pub fn stored_serving(db: &TestDb) -> ServingRows {
    db.psql(
        "SELECT to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), namespace, pod, model, engine,
                input_tokens, output_tokens, requests FROM serving_hourly",
    )
    .unwrap()
    .lines()
    .filter(|l| !l.is_empty())
    .map(|l| {
        let c: Vec<&str> = l.split('|').collect();
        let n = |s: &str| (!s.is_empty()).then(|| s.parse::<i64>().unwrap());
        let key = (c[0].into(), c[1].into(), c[2].into(), c[3].into(), c[4].into());
        (key, (n(c[5]), n(c[6]), c[7].parse().unwrap()))
    })
    .collect()
}

/// The simulation's serving truth (`serving` in truth.json).
pub fn truth_serving(truth: &Value) -> ServingRows {
    truth["serving"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap().to_string();
            let key = (s("hour"), s("namespace"), s("pod"), s("model"), s("engine"));
            (key, (r["input_tokens"].as_i64(), r["output_tokens"].as_i64(), r["requests"].as_i64().unwrap()))
        })
        .collect()
}

/// The truth per (hour, namespace, pod) with the node type it ran on. Pods of the node nothing counts are stored at
/// face value (a unit is a card) until configured: their truth is scaled to it.
pub fn truth_pod_hours(truth: &Value) -> BTreeMap<(String, String, String), (String, Fig)> {
    let face: BTreeMap<(&str, &str), f64> = truth["by_pod"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["unverified"] == true)
        .map(|p| ((p["namespace"].as_str().unwrap(), p["pod"].as_str().unwrap()), p["fraction"].as_f64().unwrap()))
        .collect();
    let rows = truth["by_pod_hour"].as_array().expect("truth.json has by_pod_hour");
    rows.iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap().to_string();
            let n = |k: &str| r[k].as_f64().unwrap();
            let scale =
                face.get(&(r["namespace"].as_str().unwrap(), r["pod"].as_str().unwrap())).map_or(1.0, |f| 1.0 / f);
            let fig = Fig {
                gpu: n("gpu_hours") * scale,
                eff: n("effective_gpu_hours"),
                unm: n("unmetered_gpu_hours") * scale,
            };
            ((s("hour"), s("namespace"), s("pod")), (s("node_type"), fig))
        })
        .collect()
}

/// The largest relative errors of one setup on one read path, and the worst pod-hour.
#[derive(Clone, Debug, Default)]
pub struct Errors {
    pub gpu: f64,
    pub eff: f64,
    pub unm: f64,
    pub pod_hours: u64,
    /// (error, "hour ns/pod: stored … vs truth …") of the worst pod-hour.
    pub worst: Option<(f64, String)>,
}

/// Relative error; effective and unmetered relative to the larger of themselves and a millionth of the GPU-hours,
/// so a figure that should be 0 and is 1e-20 does not count as infinitely wrong.
fn rel(got: f64, want: f64, gpu: f64) -> f64 {
    let den = want.abs().max(gpu.abs() * 1e-6).max(1e-15);
    (got - want).abs() / den
}

/// Every stored pod-hour against the truth, per node type (setup). A pod-hour only one side has counts as
/// relative error 1 (GPU-hours) unless both are zero.
pub fn compare(
    truth: &BTreeMap<(String, String, String), (String, Fig)>,
    stored: &BTreeMap<(String, String, String), Fig>,
) -> BTreeMap<String, Errors> {
    let mut out: BTreeMap<String, Errors> = BTreeMap::new();
    let node_of_pod: BTreeMap<(&str, &str), &str> =
        truth.iter().map(|((_, ns, pod), (ty, _))| ((ns.as_str(), pod.as_str()), ty.as_str())).collect();
    let mut keys: Vec<&(String, String, String)> = truth.keys().chain(stored.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let ty = truth
            .get(k)
            .map(|t| t.0.as_str())
            .or_else(|| node_of_pod.get(&(k.1.as_str(), k.2.as_str())).copied())
            .unwrap_or("(not in the truth)");
        let want = truth.get(k).map(|t| t.1).unwrap_or_default();
        let got = stored.get(k).copied().unwrap_or_default();
        if want.gpu == 0.0 && got.gpu == 0.0 && got.eff == 0.0 {
            continue;
        }
        let e = out.entry(ty.to_string()).or_default();
        e.pod_hours += 1;
        let (g, f) = (rel(got.gpu, want.gpu, want.gpu), rel(got.eff, want.eff, want.gpu));
        // unmetered is mostly 0: its error as a share of the pod-hour's GPU-hours
        let u = (got.unm - want.unm).abs() / want.gpu.abs().max(1e-15);
        e.gpu = e.gpu.max(g);
        e.eff = e.eff.max(f);
        e.unm = e.unm.max(u);
        let worst = g.max(f);
        if worst > 0.0 && e.worst.as_ref().is_none_or(|w| worst > w.0) {
            e.worst = Some((
                worst,
                format!(
                    "{} {}/{}: stored ({:.9}, {:.9}, {:.9}) vs truth ({:.9}, {:.9}, {:.9}) GPU-h, effective, unmetered",
                    k.0, k.1, k.2, got.gpu, got.eff, got.unm, want.gpu, want.eff, want.unm
                ),
            ));
        }
    }
    out
}

/// The table: per setup × read path, the largest relative error of GPU-hours, of effective GPU-hours and (in
/// parentheses) of unmetered GPU-hours as a share of the GPU-hours.
pub fn table(results: &[(ReadPath, BTreeMap<String, Errors>, String)]) -> String {
    let mut setups: Vec<&String> = results.iter().flat_map(|r| r.1.keys()).collect();
    setups.sort();
    setups.dedup();
    let mut t = String::new();
    let _ = write!(t, "{:<20}", "setup \\ read path");
    for (p, _, _) in results {
        let _ = write!(t, " | {:<26}", p.name());
    }
    t.push('\n');
    for s in setups {
        let _ = write!(t, "{s:<20}");
        for (_, errs, _) in results {
            let e = errs.get(s).cloned().unwrap_or_default();
            let _ = write!(t, " | {:<26}", format!("{:.1e} {:.1e} ({:.1e})", e.gpu, e.eff, e.unm));
        }
        t.push('\n');
    }
    let _ = write!(t, "{:<20}", "md5");
    for (_, _, md5) in results {
        let _ = write!(t, " | {:<26}", &md5[..md5.len().min(26)]);
    }
    t.push('\n');
    t
}

/// The whole harness on one simulation: every read path, the table printed, then the assertions (pod-hours within
/// `tol` relative, GPU-hours and effective; every path's rows identical).
pub fn check(sim: &Simulation, seed: u64, tol: f64) {
    let truth = sim.truth_json();
    let truth_rows = truth_pod_hours(&truth);
    assert!(truth_rows.len() > 100, "the truth has pod-hours: {}", truth_rows.len());
    let blocks = tempfile::tempdir().unwrap();
    super::promtool_backfill(&sim.metrics, blocks.path()).unwrap();
    let (prom, vm) = std::thread::scope(|s| {
        let prom = s.spawn(|| TestPrometheus::from_blocks(blocks.path()).unwrap());
        let vm = TestVictoria::from_blocks(blocks.path()).unwrap();
        (prom.join().unwrap(), vm)
    });
    let b = Backends { prom: &prom, vm: &vm };
    // tokens and requests per hour, pod, model and engine: integers, equal on every path
    let serving = truth_serving(&truth);
    assert!(!serving.is_empty(), "the truth has serving rows");
    let serving_failures = std::sync::Mutex::new(Vec::<String>::new());
    let started = std::time::Instant::now();
    // two paths at a time: the machine has few cores, and each path waits on a server as much as it computes
    let mut results: Vec<(ReadPath, BTreeMap<String, Errors>, String)> = Vec::new();
    for pair in READ_PATHS.chunks(2) {
        let done: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = pair
                .iter()
                .map(|&p| {
                    let b = &b;
                    let truth_rows = &truth_rows;
                    let serving = &serving;
                    let serving_failures = &serving_failures;
                    s.spawn(move || {
                        let db = read(sim, b, p, seed);
                        let stored = stored_serving(&db);
                        if stored != *serving {
                            let diff: Vec<_> = serving.iter().filter(|(k, v)| stored.get(*k) != Some(v)).take(3).collect();
                            let extra: Vec<_> = stored.keys().filter(|k| !serving.contains_key(*k)).take(3).collect();
                            serving_failures.lock().unwrap().push(format!(
                                "{}: {} serving rows stored vs {} in the truth; differing {diff:?}, not in the truth {extra:?}",
                                p.name(),
                                stored.len(),
                                serving.len()
                            ));
                        }
                        (p, compare(truth_rows, &stored_pod_hours(&db)), digest(&db))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        results.extend(done);
    }
    eprintln!(
        "exactness: seed {seed}, {} .. {}, {} pod-hours, read paths in {:.0} s\n{}",
        sim.start_arg(),
        sim.end_arg(),
        truth_rows.len(),
        started.elapsed().as_secs_f64(),
        table(&results)
    );
    let mut failures = Vec::new();
    for (p, errs, _) in &results {
        for (setup, e) in errs {
            if e.gpu > tol || e.eff > tol {
                let worst = e.worst.as_ref().map_or(String::new(), |w| w.1.clone());
                failures.push(format!(
                    "{} on {setup}: GPU-h {:.2e}, effective {:.2e}; worst {worst}",
                    p.name(),
                    e.gpu,
                    e.eff
                ));
            }
        }
    }
    failures.extend(serving_failures.into_inner().unwrap());
    let md5s: Vec<&str> = results.iter().map(|r| r.2.as_str()).collect();
    if md5s.iter().any(|m| *m != md5s[0]) {
        failures.push(format!("the stored rows differ between read paths: {md5s:?}"));
    }
    let shown: Vec<&String> = failures.iter().take(40).collect();
    assert!(
        failures.is_empty(),
        "{} failures (first {}):\n{}",
        failures.len(),
        shown.len(),
        shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
    );
}
