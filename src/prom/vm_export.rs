//! VictoriaMetrics' export API (`/api/v1/export`): JSON lines of `{"metric", "values", "timestamps"}`, decoded
//! line by line as they arrive into raw samples of the half-open window.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Visitor};

use super::PromError;
use super::client::PromClient;
use super::model::RawSeries;
use crate::metering::Sample;

pub const VM_EXPORT_PATH: &str = "/api/v1/export";
/// A line (one series block) this long is a broken stream, not a series to buffer: VictoriaMetrics writes blocks
/// of at most a few thousand samples.
const MAX_LINE_BYTES: usize = 256 << 20;

#[derive(Deserialize)]
struct Line {
    metric: BTreeMap<String, String>,
    values: Vec<Value>,
    timestamps: Vec<i64>,
}

/// One exported value. VictoriaMetrics writes numbers, `null` for NaN and strings for ±Inf (`"Infinity"` in its
/// template; the other spellings are taken too) — or, before that template (1.79, Debian 12's), bare `+Inf` and
/// `-Inf`, which [`quote_bare_non_finite`] turns into strings. It stores no NaN but Prometheus' staleness marker
/// (plain NaNs are dropped on ingestion), so `null` is a stale marker: dropped as the query API drops it, not
/// counted.
enum Value {
    Finite(f64),
    Stale,
    NonFinite,
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Value;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number, null or an infinity as a string")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
                Ok(if v.is_finite() { Value::Finite(v) } else { Value::NonFinite })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
                Ok(Value::Finite(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
                Ok(Value::Finite(v as f64))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
                Ok(Value::Stale)
            }
            fn visit_none<E: de::Error>(self) -> Result<Value, E> {
                Ok(Value::Stale)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
                match s {
                    "NaN" | "Inf" | "+Inf" | "-Inf" | "Infinity" | "+Infinity" | "-Infinity" => Ok(Value::NonFinite),
                    _ => match s.parse::<f64>() {
                        Ok(v) if v.is_finite() => Ok(Value::Finite(v)),
                        _ => Err(E::custom(format!("`{s}` is not a number"))),
                    },
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// A series' labels.
type Labels = BTreeMap<String, String>;
/// A series' finite points and the timestamps of its non-finite values.
type Points = (Vec<(i64, f64)>, Vec<i64>);

/// Decodes an export answer line by line; [`ExportDecoder::finish`] gives the series of `[start, end)`.
#[derive(Debug)]
pub struct ExportDecoder {
    buf: Vec<u8>,
    start_ms: i64,
    end_ms: i64,
    lines: u64,
    /// Labels → (finite points, non-finite timestamps) in the window; a series may span several lines.
    series: BTreeMap<Labels, Points>,
}

impl ExportDecoder {
    pub fn new(start_ms: i64, end_ms: i64) -> Self {
        Self { buf: Vec::new(), start_ms, end_ms, lines: 0, series: BTreeMap::new() }
    }

    /// Adds bytes of the answer; decodes every line now complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), String> {
        // only the new bytes can hold the newline that completes a line
        let scan_from = self.buf.len();
        self.buf.extend_from_slice(bytes);
        let mut at = 0;
        let mut search = scan_from;
        while let Some(nl) = self.buf[search..].iter().position(|&b| b == b'\n') {
            let end = search + nl;
            let line = std::mem::take(&mut self.buf);
            let r = self.absorb(&line[at..end]);
            self.buf = line;
            r?;
            at = end + 1;
            search = at;
        }
        self.buf.drain(..at);
        if self.buf.len() > MAX_LINE_BYTES {
            return Err(format!("line {}: longer than {MAX_LINE_BYTES} bytes (corrupt stream)", self.lines + 1));
        }
        Ok(())
    }

    fn absorb(&mut self, raw: &[u8]) -> Result<(), String> {
        self.lines += 1;
        let n = self.lines;
        if raw.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let line: Line = serde_json::from_slice(raw)
            .or_else(|e| match quote_bare_non_finite(raw) {
                Some(quoted) => serde_json::from_slice(&quoted),
                None => Err(e),
            })
            .map_err(|e| {
                let shown = String::from_utf8_lossy(&raw[..raw.len().min(80)]).into_owned();
                format!("line {n} is not an export line ({e}): `{shown}`")
            })?;
        if line.values.len() != line.timestamps.len() {
            return Err(format!("line {n}: {} values for {} timestamps", line.values.len(), line.timestamps.len()));
        }
        let (start, end) = (self.start_ms, self.end_ms);
        let (points, non_finite) = self.series.entry(line.metric).or_default();
        for (v, t) in line.values.into_iter().zip(line.timestamps) {
            if t < start || t >= end {
                continue;
            }
            match v {
                Value::Finite(v) => points.push((t, v)),
                Value::NonFinite => non_finite.push(t),
                Value::Stale => {}
            }
        }
        Ok(())
    }

    /// The series read, each sorted by time with one point per timestamp; series with nothing in the window left
    /// out. An answer whose last line has no newline was cut off: VictoriaMetrics ends every line with one.
    pub fn finish(self) -> Result<Vec<RawSeries>, String> {
        if !self.buf.iter().all(u8::is_ascii_whitespace) {
            return Err(format!(
                "truncated answer: it ends {} bytes into line {} with no newline",
                self.buf.len(),
                self.lines + 1
            ));
        }
        let mut out = Vec::with_capacity(self.series.len());
        for (labels, (mut points, mut non_finite)) in self.series {
            if !points.is_sorted_by(|a, b| a.0 < b.0) {
                points.sort_by_key(|p| p.0);
                points.dedup_by_key(|p| p.0);
            }
            non_finite.sort_unstable();
            non_finite.dedup();
            if points.is_empty() && non_finite.is_empty() {
                continue;
            }
            let samples = points.into_iter().map(|(t, v)| Sample::new(t, v)).collect();
            out.push(RawSeries { labels, samples, non_finite });
        }
        Ok(out)
    }
}

/// The line with every bare `+Inf`, `-Inf`, `Inf` or `NaN` outside a string quoted (not JSON, but what
/// VictoriaMetrics 1.79 writes for ±Inf); `None` if there is none. Only lines that fail to decode are scanned.
fn quote_bare_non_finite(raw: &[u8]) -> Option<Vec<u8>> {
    const TOKENS: [&[u8]; 4] = [b"+Inf", b"-Inf", b"Inf", b"NaN"];
    let mut out = Vec::with_capacity(raw.len() + 16);
    let (mut in_string, mut escaped, mut changed) = (false, false, false);
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if let Some(token) = TOKENS.iter().find(|t| raw[i..].starts_with(t)) {
            out.push(b'"');
            out.extend_from_slice(token);
            out.push(b'"');
            i += token.len();
            changed = true;
            continue;
        }
        out.push(b);
        i += 1;
    }
    changed.then_some(out)
}

/// Decodes a whole recorded answer (fixtures, benchmarks).
pub fn decode_export(body: &[u8], start_ms: i64, end_ms: i64) -> Result<Vec<RawSeries>, String> {
    let mut d = ExportDecoder::new(start_ms, end_ms);
    d.feed(body)?;
    d.finish()
}

impl PromClient {
    fn vm_export_error(&self, reason: impl Into<String>, transient: bool) -> PromError {
        PromError::VmExport { url: format!("{}{VM_EXPORT_PATH}", self.base_url()), reason: reason.into(), transient }
    }

    /// Asks for `selector` in `[start_ms, end_ms]` (both included, as VictoriaMetrics reads them); the response
    /// once its status says it is an export.
    async fn vm_export_response(
        &self,
        selector: &str,
        start_ms: i64,
        end_ms: i64,
    ) -> Result<reqwest::Response, PromError> {
        let form = [
            ("match[]", selector.to_string()),
            ("start", super::client::prom_time(start_ms)),
            ("end", super::client::prom_time(end_ms)),
        ];
        let resp = self.send(self.request(reqwest::Method::POST, VM_EXPORT_PATH).await?.form(&form)).await?;
        if !resp.status().is_success() {
            let (why, transient) =
                super::client::refusal(resp, "not a VictoriaMetrics, or its export is not served here").await;
            return Err(self.vm_export_error(why, transient));
        }
        Ok(resp)
    }

    /// Raw samples of `selector` in `[start_ms, end_ms)` by VictoriaMetrics' export: every sample by its own
    /// timestamp, decoded line by line as the answer streams in.
    pub async fn vm_export(&self, selector: &str, start_ms: i64, end_ms: i64) -> Result<Vec<RawSeries>, PromError> {
        let mut resp = self.vm_export_response(selector, start_ms, end_ms - 1).await?;
        let mut decoder = ExportDecoder::new(start_ms, end_ms);
        // a connection cut mid-answer is a truncated export: the same request may well succeed again
        while let Some(bytes) =
            resp.chunk().await.map_err(|e| self.vm_export_error(format!("the answer broke off: {e}"), true))?
        {
            self.decoding(|| decoder.feed(&bytes)).map_err(|e| self.vm_export_error(e, false))?;
        }
        self.decoding(|| decoder.finish()).map_err(|e| self.vm_export_error(e, false))
    }

    /// The undecoded answer of [`Self::vm_export`], for recording fixtures and benchmarks.
    pub async fn vm_export_body(&self, selector: &str, start_ms: i64, end_ms: i64) -> Result<Vec<u8>, PromError> {
        let resp = self.vm_export_response(selector, start_ms, end_ms - 1).await?;
        Ok(resp.bytes().await.map_err(|e| self.transport_error(e))?.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = concat!(
        r#"{"metric":{"__name__":"a","x":"1"},"values":[1,2.5,null,"Infinity",5],"timestamps":[1000,2000,3000,4000,5000]}"#,
        "\n",
        r#"{"metric":{"__name__":"b"},"values":[7],"timestamps":[9000]}"#,
        "\n",
        // the same series again, out of order with a duplicate timestamp (the first read is kept)
        r#"{"metric":{"x":"1","__name__":"a"},"values":[0,99,"-Inf"],"timestamps":[500,2000,6000]}"#,
        "\n",
    );

    #[test]
    fn lines_are_decoded_merged_and_trimmed_to_the_half_open_window() {
        let mut d = ExportDecoder::new(1_000, 9_000);
        // fed byte by byte: a line completes at any split
        for b in BODY.as_bytes() {
            d.feed(std::slice::from_ref(b)).unwrap();
        }
        let s = d.finish().unwrap();
        assert_eq!(s.len(), 1, "b's only sample is at the window's end, which is excluded");
        assert_eq!(s[0].name(), "a");
        let got: Vec<(i64, f64)> = s[0].samples.iter().map(|p| (p.t_ms, p.v)).collect();
        assert_eq!(got, vec![(1_000, 1.0), (2_000, 2.5), (5_000, 5.0)]);
        // the stale marker (null) is gone; the infinities are counted
        assert_eq!(s[0].non_finite, vec![4_000, 6_000]);
        assert_eq!(decode_export(BODY.as_bytes(), 0, 10_000).unwrap().len(), 2);
        assert!(decode_export(b"", 0, 1).unwrap().is_empty());
    }

    #[test]
    fn bare_infinities_of_victoria_metrics_1_79_are_counted() {
        // as VictoriaMetrics 1.79 exports an imported +Inf (its NaN never reaches storage); a label holding the
        // same words stays as it is
        let body = concat!(
            r#"{"metric":{"__name__":"n1","note":"+Inf, NaN \"-Inf\""},"values":[5,+Inf,-Inf,7],"#,
            r#""timestamps":[1000,2000,3000,4000]}"#,
            "\n"
        );
        let s = decode_export(body.as_bytes(), 0, 10_000).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].label("note"), Some(r#"+Inf, NaN "-Inf""#));
        assert_eq!(s[0].samples.iter().map(|p| (p.t_ms, p.v)).collect::<Vec<_>>(), vec![(1_000, 5.0), (4_000, 7.0)]);
        assert_eq!(s[0].non_finite, vec![2_000, 3_000]);
        assert_eq!(quote_bare_non_finite(br#"{"values":[1,2]}"#), None);
    }

    #[test]
    fn broken_answers_are_errors() {
        let cut = decode_export(&BODY.as_bytes()[..BODY.len() - 10], 0, 10_000).unwrap_err();
        assert!(cut.contains("truncated answer"), "{cut}");
        let html = decode_export(b"<html>oops</html>\n", 0, 1).unwrap_err();
        assert!(html.contains("line 1 is not an export line"), "{html}");
        let mismatch = decode_export(b"{\"metric\":{},\"values\":[1,2],\"timestamps\":[1]}\n", 0, 1).unwrap_err();
        assert!(mismatch.contains("2 values for 1 timestamps"), "{mismatch}");
        let word = decode_export(b"{\"metric\":{},\"values\":[\"x\"],\"timestamps\":[1]}\n", 0, 9).unwrap_err();
        assert!(word.contains("`x` is not a number"), "{word}");
    }
}
