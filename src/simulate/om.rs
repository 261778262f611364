//! A minimal, fast OpenMetrics text writer for backfilling with
//! `promtool tsdb create-blocks-from openmetrics`.
//!
//! Each series' label set is rendered once; a sample line is then the cached prefix, the value
//! and the timestamp, formatted into a reused line buffer without allocating. Timestamps are
//! seconds with exactly three decimals, so every sample time is an integer millisecond.

use std::io::{self, Write};

use super::model::{Cluster, Grid};

/// Writes families, series and samples; counts series and sample lines.
pub struct OmWriter<W: Write> {
    out: W,
    prefix: Vec<u8>,
    line: Vec<u8>,
    series_started: bool,
    pub series: u64,
    pub samples: u64,
}

impl<W: Write> OmWriter<W> {
    pub fn new(out: W) -> Self {
        OmWriter {
            out,
            prefix: Vec::with_capacity(512),
            line: Vec::with_capacity(1024),
            series_started: false,
            series: 0,
            samples: 0,
        }
    }

    /// Start a metric family (`# TYPE <name> gauge`). All its series must follow.
    pub fn family(&mut self, name: &str) -> io::Result<()> {
        self.out.write_all(b"# TYPE ")?;
        self.out.write_all(name.as_bytes())?;
        self.out.write_all(b" gauge\n")
    }

    /// Start a series; its samples must follow in increasing time. A series without samples
    /// writes nothing and is not counted.
    pub fn series<'a>(&mut self, name: &str, labels: impl IntoIterator<Item = (&'a str, &'a str)>) {
        self.prefix.clear();
        self.prefix.extend_from_slice(name.as_bytes());
        let mut first = true;
        for (k, v) in labels {
            self.prefix.push(if first { b'{' } else { b',' });
            first = false;
            self.prefix.extend_from_slice(k.as_bytes());
            self.prefix.extend_from_slice(b"=\"");
            escape_into(&mut self.prefix, v);
            self.prefix.push(b'"');
        }
        if !first {
            self.prefix.push(b'}');
        }
        self.prefix.push(b' ');
        self.series_started = false;
    }

    /// An integer-valued sample at `ts_ms`.
    pub fn sample_int(&mut self, v: i64, ts_ms: i64) -> io::Result<()> {
        self.line.clear();
        self.line.extend_from_slice(&self.prefix);
        push_i64(&mut self.line, v);
        self.end_line(ts_ms)
    }

    /// A float sample at `ts_ms`, written so it parses back to the same `f64`.
    pub fn sample_f64(&mut self, v: f64, ts_ms: i64) -> io::Result<()> {
        self.line.clear();
        self.line.extend_from_slice(&self.prefix);
        push_f64(&mut self.line, v);
        self.end_line(ts_ms)
    }

    fn end_line(&mut self, ts_ms: i64) -> io::Result<()> {
        self.line.push(b' ');
        push_ts(&mut self.line, ts_ms);
        self.line.push(b'\n');
        self.samples += 1;
        if !self.series_started {
            self.series_started = true;
            self.series += 1;
        }
        self.out.write_all(&self.line)
    }

    /// Write `# EOF`, flush and return the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.write_all(b"# EOF\n")?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Escape a label value (`\`, `"`, newline).
fn escape_into(buf: &mut Vec<u8>, v: &str) {
    for &b in v.as_bytes() {
        match b {
            b'\\' => buf.extend_from_slice(b"\\\\"),
            b'"' => buf.extend_from_slice(b"\\\""),
            b'\n' => buf.extend_from_slice(b"\\n"),
            _ => buf.push(b),
        }
    }
}

/// Append the decimal digits of `v`.
pub fn push_i64(buf: &mut Vec<u8>, v: i64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    let neg = v < 0;
    let mut n = v.unsigned_abs();
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if neg {
        buf.push(b'-');
    }
    buf.extend_from_slice(&tmp[i..]);
}

/// Append a timestamp in seconds with millisecond precision, e.g. `1732953600.007`.
pub fn push_ts(buf: &mut Vec<u8>, ts_ms: i64) {
    let secs = ts_ms.div_euclid(1000);
    let ms = ts_ms.rem_euclid(1000) as u32;
    push_i64(buf, secs);
    buf.push(b'.');
    buf.push(b'0' + (ms / 100) as u8);
    buf.push(b'0' + (ms / 10 % 10) as u8);
    buf.push(b'0' + (ms % 10) as u8);
}

/// Append a float: `NaN`/`+Inf`/`-Inf`, integers without a fraction, otherwise Rust's shortest
/// round-trip `Display`.
pub fn push_f64(buf: &mut Vec<u8>, v: f64) {
    if v.is_nan() {
        buf.extend_from_slice(b"NaN");
    } else if v.is_infinite() {
        buf.extend_from_slice(if v > 0.0 { b"+Inf" } else { b"-Inf" });
    } else if v == v.trunc() && v.abs() < 1e15 {
        push_i64(buf, v as i64);
    } else {
        // Writing into a Vec cannot fail.
        let _ = write!(buf, "{v}");
    }
}

/// A KSM series' value at the grid points `[ka, kb)` kube-state-metrics was scraped at.
pub(super) fn ksm_samples<W: Write>(
    w: &mut OmWriter<W>,
    c: &Cluster,
    grid: &Grid,
    ka: u64,
    kb: u64,
    v: i64,
) -> io::Result<()> {
    for k in (ka..kb).filter(|k| c.ksm_up(*k)) {
        w.sample_int(v, grid.at(k))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_numbers() {
        let mut b = Vec::new();
        push_ts(&mut b, 1_732_953_600_007);
        b.push(b' ');
        push_ts(&mut b, 1_732_953_600_000);
        b.push(b' ');
        push_i64(&mut b, -42);
        b.push(b' ');
        push_f64(&mut b, 0.1 + 0.2);
        b.push(b' ');
        push_f64(&mut b, f64::NAN);
        b.push(b' ');
        push_f64(&mut b, 20480.0);
        assert_eq!(String::from_utf8(b).unwrap(), "1732953600.007 1732953600.000 -42 0.30000000000000004 NaN 20480");
    }

    #[test]
    fn floats_round_trip() {
        for x in [0.8280600000000001, 1e-7, 0.1234, 1.0, 0.0, 123456.789] {
            let mut b = Vec::new();
            push_f64(&mut b, x);
            let back: f64 = std::str::from_utf8(&b).unwrap().parse().unwrap();
            assert_eq!(back.to_bits(), x.to_bits());
        }
    }

    #[test]
    fn writes_series() {
        let mut w = OmWriter::new(Vec::new());
        w.family("m").unwrap();
        w.series("m", [("a", "x\"y"), ("b", "z")]);
        w.sample_int(1, 1000).unwrap();
        w.series("m", []);
        w.series("m", [("a", "q")]);
        w.sample_f64(0.5, 2500).unwrap();
        assert_eq!((w.series, w.samples), (2, 2));
        let out = String::from_utf8(w.finish().unwrap()).unwrap();
        assert_eq!(out, "# TYPE m gauge\nm{a=\"x\\\"y\",b=\"z\"} 1 1.000\nm{a=\"q\"} 0.5 2.500\n# EOF\n");
    }
}
