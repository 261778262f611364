//! The XOR chunk decoder on answers Prometheus 2.42 itself wrote, recorded in `tests/fixtures/remote_read/`: each
//! streamed remote-read answer must decode to exactly what the query API answered for the same window (its
//! independent truth), across counter resets, NaN and ±Inf, stale markers, irregular intervals and chunk
//! boundaries; damaged copies of them are errors, never panics.
//!
//! Refresh the recordings (needs promtool and prometheus, as `scripts/test.sh` installs them):
//! `cargo test --test suite remote_read_fixtures::record -- --ignored`.

use crate::common;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cardhour::prom::proto::{ChunkEncoding, ChunkedReadResponse};
use cardhour::prom::remote_read::decode_stream;
use cardhour::prom::xor::{STALE_NAN_BITS, decode};
use cardhour::prom::{PromClient, RawSeries, parse_response, trim};
use common::{TestPrometheus, free_port, http_get};
use prost::Message;
use serde_json::{Value, json};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/remote_read")
}

/// The recorded fixtures: (name, selector, start ms, end ms, streamed answer, query API answer).
/// Name, selector, start, end, the streamed answer and the query API's answer of each recorded fixture.
type Fixture = (String, String, i64, i64, Vec<u8>, Vec<u8>);

fn fixtures() -> Vec<Fixture> {
    let mut out = Vec::new();
    for name in ["backfilled", "scraped"] {
        let meta: Value = serde_json::from_slice(&fs::read(dir().join(format!("{name}.meta.json"))).unwrap()).unwrap();
        out.push((
            name.to_string(),
            meta["selector"].as_str().unwrap().to_string(),
            meta["start_ms"].as_i64().unwrap(),
            meta["end_ms"].as_i64().unwrap(),
            fs::read(dir().join(format!("{name}.bin"))).unwrap(),
            fs::read(dir().join(format!("{name}.query.json"))).unwrap(),
        ));
    }
    out
}

/// The frames of a streamed answer: (offset, end) of each, and its message.
fn frames(body: &[u8]) -> Vec<(usize, usize, ChunkedReadResponse)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let (mut len, mut shift, mut n) = (0usize, 0, 0);
        loop {
            let b = body[at + n];
            len |= usize::from(b & 0x7f) << shift;
            shift += 7;
            n += 1;
            if b < 0x80 {
                break;
            }
        }
        let payload = at + n + 4;
        out.push((at, payload + len, ChunkedReadResponse::decode(&body[payload..payload + len]).unwrap()));
        at = payload + len;
    }
    out
}

fn sorted(mut s: Vec<RawSeries>) -> Vec<RawSeries> {
    s.sort_by(|a, b| a.labels.cmp(&b.labels));
    s
}

#[test]
fn recorded_chunks_decode_to_what_the_query_api_answered() {
    for (name, _, start, end, bin, json) in fixtures() {
        let streamed = sorted(decode_stream(&bin, start, end).unwrap());
        let truth = sorted(trim(parse_response(&json).unwrap(), start, end));
        assert!(!truth.is_empty(), "{name}: the query API answered series");
        assert_eq!(streamed.len(), truth.len(), "{name}: series");
        for (s, t) in streamed.iter().zip(&truth) {
            assert_eq!(s.labels, t.labels, "{name}");
            assert!(!t.samples.is_empty() || !t.non_finite.is_empty());
            // bit for bit: the query API's JSON floats round-trip exactly
            let bits = |r: &RawSeries| r.samples.iter().map(|p| (p.t_ms, p.v.to_bits())).collect::<Vec<_>>();
            assert_eq!(bits(s), bits(t), "{name} {:?}", s.labels);
            assert_eq!(s.non_finite, t.non_finite, "{name} {:?}", s.labels);
        }
    }
}

#[test]
fn recorded_chunks_hold_what_they_are_meant_to_test() {
    let all = fixtures();
    let chunks = |bin: &[u8]| -> Vec<(String, Vec<(i64, f64)>)> {
        frames(bin)
            .into_iter()
            .flat_map(|(_, _, f)| f.chunked_series)
            .flat_map(|s| {
                let case = s.labels.iter().find(|l| l.name == "case").map_or(String::new(), |l| l.value.clone());
                s.chunks.into_iter().map(move |c| {
                    assert_eq!(c.r#type, ChunkEncoding::Xor as i32);
                    let samples = decode(&c.data).unwrap();
                    assert_eq!(samples.first().map(|p| p.0), Some(c.min_time_ms));
                    assert_eq!(samples.last().map(|p| p.0), Some(c.max_time_ms));
                    (case.clone(), samples)
                })
            })
            .collect()
    };
    let backfilled = chunks(&all[0].4);
    // several chunks per series, so values and timestamps are read across chunk boundaries
    let resets: Vec<&(String, Vec<(i64, f64)>)> = backfilled.iter().filter(|c| c.0 == "resets").collect();
    assert!(resets.len() >= 3, "{} chunks", resets.len());
    let values: Vec<f64> = resets.iter().flat_map(|c| c.1.iter().map(|p| p.1)).collect();
    assert!(values.windows(2).filter(|w| w[1] < w[0]).count() >= 3, "counter resets");
    let special: Vec<f64> =
        backfilled.iter().filter(|c| c.0 == "special").flat_map(|c| c.1.iter().map(|p| p.1)).collect();
    assert!(
        special.iter().any(|v| v.is_nan()) && special.contains(&f64::INFINITY) && special.contains(&f64::NEG_INFINITY)
    );
    // Prometheus wrote stale markers when a scraped series went away; the decoder keeps them, the source drops them
    let scraped = chunks(&all[1].4);
    let stale = scraped.iter().flat_map(|c| &c.1).filter(|p| p.1.to_bits() == STALE_NAN_BITS).count();
    let nan = scraped.iter().flat_map(|c| &c.1).filter(|p| p.1.is_nan() && p.1.to_bits() != STALE_NAN_BITS).count();
    assert!(stale >= 1 && nan >= 1, "stale markers {stale}, NaN {nan}");
    let read = decode_stream(&all[1].4, all[1].2, all[1].3).unwrap();
    let non_finite: usize = read.iter().map(|s| s.non_finite.len()).sum();
    assert_eq!(non_finite, nan, "NaN counted, stale markers not");
}

#[test]
fn damaged_recordings_are_errors() {
    for (name, _, start, end, bin, _) in fixtures() {
        let fr = frames(&bin);
        assert!(!fr.is_empty());
        // cut anywhere inside a frame (a cut between frames is a shorter, valid answer)
        for (a, b, _) in &fr {
            for cut in (a + 1..*b).step_by(((b - a) / 97).max(1)) {
                let e = decode_stream(&bin[..cut], start, end).unwrap_err();
                assert!(e.contains("truncated frame") || e.contains("checksum"), "{name} cut {cut}: {e}");
            }
        }
        // any byte changed
        for at in (0..bin.len()).step_by((bin.len() / 499).max(1)) {
            let mut bad = bin.clone();
            bad[at] ^= 0x5a;
            assert!(decode_stream(&bad, start, end).is_err(), "{name}: byte {at} changed and still decoded");
        }
        // a chunk whose bytes are damaged under a valid CRC
        let (_, _, first) = &fr[0];
        let mut msg = first.clone();
        let data = &mut msg.chunked_series[0].chunks[0].data;
        data.truncate(data.len() / 2);
        let payload = msg.encode_to_vec();
        let mut f = Vec::new();
        let mut n = payload.len();
        while n >= 0x80 {
            f.push(n as u8 | 0x80);
            n >>= 7;
        }
        f.push(n as u8);
        f.extend_from_slice(&crc::Crc::<u32>::new(&crc::CRC_32_ISCSI).checksum(&payload).to_be_bytes());
        f.extend_from_slice(&payload);
        let e = decode_stream(&f, start, end).unwrap_err();
        assert!(e.contains("corrupt chunk"), "{name}: {e}");
    }
}

// --- recording ----------------------------------------------------------------------------------------------------

const HOUR_MS: i64 = 3_600_000;

/// Two hours ending at least 4 h ago (backfilled data must not reach the head block), every 15 s: a counter
/// reset every 100 samples, a gauge with NaN/±Inf and irregular gaps, a gauge of many-bit floats.
fn backfill_text(start_ms: i64) -> String {
    let mut om = String::from("# TYPE fixture_counter counter\n");
    let mut v = 0.0f64;
    for i in 0..480i64 {
        v = if i % 100 == 99 { 1.0 } else { v + (i % 7) as f64 * 0.25 };
        let jitter = if i % 13 == 0 { 7 } else { 0 }; // a few ms late now and then
        om += &format!("fixture_counter_total{{case=\"resets\"}} {v} {}\n", secs(start_ms + i * 15_000 + jitter));
    }
    om += "# TYPE fixture_gauge gauge\n";
    let mut t = start_ms;
    for i in 0..300i64 {
        let value = match i % 50 {
            10 => "NaN".to_string(),
            20 => "+Inf".to_string(),
            30 => "-Inf".to_string(),
            _ => format!("{}", (i as f64).sin() * 1e3),
        };
        om += &format!("fixture_gauge{{case=\"special\"}} {value} {}\n", secs(t));
        // mostly 15 s, sometimes 1 ms, sometimes 10 min: every delta-of-delta width
        t += match i % 37 {
            5 => 1,
            17 => 600_000,
            _ => 15_000,
        };
    }
    for i in 0..200i64 {
        om +=
            &format!("fixture_gauge{{case=\"floats\"}} {:e} {}\n", 1.0 / (i as f64 + 3.0), secs(start_ms + i * 30_000));
    }
    om + "# EOF\n"
}

fn secs(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

fn save(name: &str, selector: &str, start_ms: i64, end_ms: i64, url: &str) {
    let client = PromClient::new(url, Duration::from_secs(30)).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let bin = rt.block_on(client.remote_read_body(selector, start_ms, end_ms)).unwrap();
    let json = rt.block_on(client.raw_samples_body(selector, start_ms, end_ms)).unwrap();
    fs::create_dir_all(dir()).unwrap();
    fs::write(dir().join(format!("{name}.bin")), &bin).unwrap();
    fs::write(dir().join(format!("{name}.query.json")), &json).unwrap();
    let meta = json!({"selector": selector, "start_ms": start_ms, "end_ms": end_ms,
        "recorded_with": "Prometheus 2.42 (Debian), tests/remote_read_fixtures.rs record"});
    fs::write(dir().join(format!("{name}.meta.json")), serde_json::to_string_pretty(&meta).unwrap() + "\n").unwrap();
}

/// A target exposing three series, one of which goes away after `gone_after` (Prometheus then writes a stale
/// marker for it); one is NaN now and then.
fn serve_target(listener: TcpListener, gone_after: Instant, stop: Arc<AtomicBool>) {
    listener.set_nonblocking(true).unwrap();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut s, _)) => {
                s.set_nonblocking(false).unwrap();
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                n += 1;
                let mut body = format!("fixture_scraped{{case=\"steady\"}} {n}\n");
                body += &format!(
                    "fixture_scraped{{case=\"nan\"}} {}\n",
                    if n.is_multiple_of(3) { "NaN".into() } else { n.to_string() }
                );
                if Instant::now() < gone_after {
                    body += "fixture_scraped{case=\"gone\"} 1\n";
                }
                let _ = write!(
                    s,
                    "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

#[test]
#[ignore = "records tests/fixtures/remote_read/ from a real Prometheus (promtool and prometheus needed)"]
fn record() {
    // backfilled blocks
    let tmp = tempfile::tempdir().unwrap();
    let end_ms = (chrono::Utc::now().timestamp_millis() / HOUR_MS - 5) * HOUR_MS;
    let start_ms = end_ms - 2 * HOUR_MS;
    let om = tmp.path().join("fixture.om");
    fs::write(&om, backfill_text(start_ms)).unwrap();
    let prom = TestPrometheus::from_openmetrics(&om).unwrap();
    save("backfilled", r#"{__name__=~"fixture_.+"}"#, start_ms, end_ms + 10 * 60_000, &prom.url);
    drop(prom);

    // a scraped head block with stale markers
    let target = TcpListener::bind("127.0.0.1:0").unwrap();
    let target_port = target.local_addr().unwrap().port();
    let stop = Arc::new(AtomicBool::new(false));
    let gone_after = Instant::now() + Duration::from_secs(6);
    let server = {
        let stop = stop.clone();
        std::thread::spawn(move || serve_target(target, gone_after, stop))
    };
    let data = tempfile::tempdir().unwrap();
    let config = data.path().join("prometheus.yml");
    fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 1s}}\nscrape_configs:\n  - job_name: fixture\n    static_configs: [{{targets: ['127.0.0.1:{target_port}']}}]\n"
        ),
    )
    .unwrap();
    let port = free_port().unwrap();
    let started = chrono::Utc::now().timestamp_millis();
    let mut child = Command::new(std::env::var("PROMETHEUS").unwrap_or_else(|_| "prometheus".into()))
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", data.path().join("tsdb").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !matches!(http_get(port, "/-/ready"), Ok((200, _))) {
        assert!(Instant::now() < deadline, "prometheus not ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(14));
    // a little in the past, so no scrape of the window is still being appended between the two reads
    let now = chrono::Utc::now().timestamp_millis() - 2_000;
    save("scraped", r#"fixture_scraped"#, started - 60_000, now, &format!("http://127.0.0.1:{port}"));
    let _ = child.kill();
    let _ = child.wait();
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
}
