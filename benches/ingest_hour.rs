//! Processing cost of one recorded hour, without Prometheus: JSON parsing, normalisation and metering.
//!
//! `cargo bench --bench ingest_hour -- record <prometheus-url> <hour RFC 3339> <dir>` records the six answers of
//! one hour; `cargo bench --bench ingest_hour -- <dir>` measures them. `cargo test` runs this binary without
//! `--bench`, and then it does nothing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cardhour::ingest::{FetchSpec, Fetched, ksm_margin_ms, selectors};
use cardhour::metering::{MeterConfig, meter_hour};
use cardhour::prom::{PromClient, parse_response};

const HOUR_MS: i64 = 3_600_000;

// the allocator of the `cardhour` binary, so the figures are the binary's
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn spec() -> FetchSpec {
    FetchSpec { matchers: None, team_label: "label_team".into() }
}

/// User + system CPU time of this process (Linux: /proc/self/stat, in clock ticks of 1/100 s).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = after.split_whitespace().skip(11).take(2).filter_map(|x| x.parse().ok()).collect();
    Duration::from_millis(f.iter().sum::<u64>() * 10)
}

/// Peak resident memory of this process in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn record(url: &str, hour: &str, dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let hour_ms = chrono::DateTime::parse_from_rfc3339(hour)?.timestamp_millis();
    std::fs::create_dir_all(dir)?;
    let rt = tokio::runtime::Runtime::new()?;
    let client = PromClient::new(url, Duration::from_secs(300))?;
    for (i, (selector, before, after)) in
        selectors(&spec(), ksm_margin_ms(&MeterConfig::default())).into_iter().enumerate()
    {
        let body = rt.block_on(client.raw_samples_body(&selector, hour_ms - before, hour_ms + HOUR_MS + after))?;
        std::fs::write(dir.join(format!("q{i}.json")), &body)?;
        println!("recorded q{i}: {} bytes  {selector}", body.len());
    }
    std::fs::write(dir.join("hour_ms"), hour_ms.to_string())?;
    Ok(())
}

fn measure(dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let hour_ms: i64 = std::fs::read_to_string(dir.join("hour_ms"))?.trim().parse()?;
    let paths: Vec<PathBuf> = (0..6).map(|i| dir.join(format!("q{i}.json"))).collect();
    let bytes: u64 = paths.iter().map(|p| std::fs::metadata(p).map_or(0, |m| m.len())).sum();
    let mut runs = Vec::new();
    for _ in 0..5 {
        let (cpu0, wall0) = (cpu_time(), Instant::now());
        // as the ingest does: each answer parsed and normalised as it arrives, its JSON dropped
        let mut fetched = Fetched::default();
        // largest answer first (DCGM), while nothing else is held
        for i in [4, 0, 1, 5, 3, 2] {
            let path = &paths[i];
            let answer = parse_response(&std::fs::read(path)?)?;
            fetched.absorb(&spec(), i, answer);
        }
        let t_parse = wall0.elapsed();
        let (input, _) = fetched.into_hours(&[hour_ms]).pop().ok_or("no hour")?;
        let out = meter_hour(&input, &MeterConfig::default());
        let (wall, cpu) = (wall0.elapsed(), cpu_time() - cpu0);
        let gpus: f64 = out.capacity.iter().map(|c| c.cards).sum();
        runs.push((wall, cpu, t_parse, out.rows.len(), gpus, input.devices.len()));
    }
    runs.sort_by_key(|r| r.0);
    let (wall, cpu, parse, rows, gpus, devices) = runs[runs.len() / 2];
    println!(
        "recorded hour: {:.1} MB of JSON, {gpus} cards, {devices} DCGM series → {rows} usage rows",
        bytes as f64 / 1e6
    );
    println!(
        "median of 5: wall {:.3} s (parse {:.3} s), CPU {:.2} s, peak RSS {:.0} MiB",
        wall.as_secs_f64(),
        parse.as_secs_f64(),
        cpu.as_secs_f64(),
        peak_rss_mib()
    );
    println!(
        "targets: CPU < 1 s → {:.2}× of target; memory < 256 MiB → {:.2}× of target",
        cpu.as_secs_f64(),
        peak_rss_mib() / 256.0
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if !std::env::args().any(|a| a == "--bench") {
        return Ok(()); // run by `cargo test --all-targets`: nothing to measure
    }
    match args.as_slice() {
        [cmd, url, hour, dir] if cmd == "record" => record(url, hour, &PathBuf::from(dir)),
        [dir] => measure(&PathBuf::from(dir)),
        _ => Err("usage: ingest_hour record <prometheus-url> <hour> <dir> | ingest_hour <dir>".into()),
    }
}
