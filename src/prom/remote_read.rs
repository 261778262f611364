//! Prometheus remote read (`POST /api/v1/read`) with the `STREAMED_XOR_CHUNKS` answer: a snappy-compressed
//! protobuf request; frames of varint length + big-endian CRC32-Castagnoli + `ChunkedReadResponse`, decoded as
//! they arrive into raw samples trimmed to the half-open window.

use std::collections::BTreeMap;

use prost::Message;

use super::PromError;
use super::client::PromClient;
use super::model::RawSeries;
use super::proto::{ChunkEncoding, ChunkedReadResponse, Query, ReadRequest, ResponseType};
use super::{selector, xor};
use crate::metering::Sample;

pub const REMOTE_READ_PATH: &str = "/api/v1/read";
const STREAMED_CONTENT_TYPE: &str = "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse";
/// Prometheus' frames hold at most `--storage.remote.read-max-bytes-in-frame` (1 MiB by default): a length far
/// beyond that is a corrupt stream, not a frame to allocate.
const MAX_FRAME_BYTES: u64 = 64 << 20;

const CASTAGNOLI: crc::Crc<u32> = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI);

/// The request body (snappy-compressed protobuf) asking for `selector` in `[start_ms, end_ms]`.
pub fn request_body(selector: &str, start_ms: i64, end_ms: i64) -> Result<Vec<u8>, PromError> {
    let matchers =
        selector::parse(selector).map_err(|e| PromError::Query { error_type: "bad_data".into(), error: e })?;
    let req = ReadRequest {
        queries: vec![Query { start_timestamp_ms: start_ms, end_timestamp_ms: end_ms, matchers }],
        accepted_response_types: vec![ResponseType::StreamedXorChunks as i32],
    };
    snap::raw::Encoder::new()
        .compress_vec(&req.encode_to_vec())
        .map_err(|e| PromError::Malformed(format!("snappy-compressing the remote-read request: {e}")))
}

/// Decodes a streamed answer frame by frame; [`StreamDecoder::finish`] gives the series of `[start, end)`.
#[derive(Debug)]
pub struct StreamDecoder {
    buf: Vec<u8>,
    start_ms: i64,
    end_ms: i64,
    frames: u64,
    /// Labels → every point read in the window, in the order read (sorted at the end if chunks overlap).
    series: BTreeMap<BTreeMap<String, String>, Vec<(i64, f64)>>,
}

impl StreamDecoder {
    pub fn new(start_ms: i64, end_ms: i64) -> Self {
        Self { buf: Vec::new(), start_ms, end_ms, frames: 0, series: BTreeMap::new() }
    }

    /// Adds bytes of the answer; decodes every frame now complete.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.buf.extend_from_slice(bytes);
        let mut at = 0;
        while let Some((frame, next)) = self.frame_at(at)? {
            let range = frame.clone();
            self.absorb(range)?;
            at = next;
        }
        self.buf.drain(..at);
        Ok(())
    }

    /// The frame starting at `at` of the buffer, if it is all there: (payload range, offset after it).
    fn frame_at(&self, at: usize) -> Result<Option<(std::ops::Range<usize>, usize)>, String> {
        let rest = &self.buf[at..];
        let Some((len, n)) = uvarint(rest) else {
            if rest.len() >= 10 {
                return Err(format!("frame {}: bad length varint", self.frames + 1));
            }
            return Ok(None);
        };
        if len > MAX_FRAME_BYTES {
            return Err(format!("frame {}: length {len} bytes is not a frame (corrupt stream)", self.frames + 1));
        }
        let payload = at + n + 4;
        let end = payload + len as usize;
        if self.buf.len() < end {
            return Ok(None);
        }
        let crc = u32::from_be_bytes(self.buf[at + n..payload].try_into().unwrap_or_default());
        let got = CASTAGNOLI.checksum(&self.buf[payload..end]);
        if crc != got {
            return Err(format!("frame {}: checksum mismatch (sent {crc:08x}, computed {got:08x})", self.frames + 1));
        }
        Ok(Some((payload..end, end)))
    }

    fn absorb(&mut self, range: std::ops::Range<usize>) -> Result<(), String> {
        self.frames += 1;
        let frame = self.frames;
        let msg = ChunkedReadResponse::decode(&self.buf[range])
            .map_err(|e| format!("frame {frame}: not a ChunkedReadResponse: {e}"))?;
        if msg.query_index != 0 {
            return Err(format!("frame {frame}: answers query {} of a request of one", msg.query_index));
        }
        let (start, end) = (self.start_ms, self.end_ms);
        for s in msg.chunked_series {
            let labels: BTreeMap<String, String> = s.labels.into_iter().map(|l| (l.name, l.value)).collect();
            // a series longer than a frame continues in the next one under the same labels
            let points = self.series.entry(labels).or_default();
            for c in s.chunks {
                if c.r#type != ChunkEncoding::Xor as i32 {
                    let enc =
                        ChunkEncoding::try_from(c.r#type).map_or_else(|_| c.r#type.to_string(), |e| format!("{e:?}"));
                    return Err(format!("frame {frame}: chunk encoding {enc} (only XOR float chunks are read)"));
                }
                if c.max_time_ms < start || c.min_time_ms >= end {
                    continue;
                }
                let decoded = xor::decode(&c.data).map_err(|e| format!("frame {frame}: corrupt chunk: {e}"))?;
                points.extend(decoded.into_iter().filter(|&(t, _)| t >= start && t < end));
            }
        }
        Ok(())
    }

    /// The series read, each sorted by time with one point per timestamp; stale markers dropped (as the query API
    /// drops them), NaN and ±Inf listed in `non_finite`; series with nothing in the window left out.
    pub fn finish(self) -> Result<Vec<RawSeries>, String> {
        if !self.buf.is_empty() {
            return Err(format!(
                "truncated frame: the answer ends {} bytes into frame {}",
                self.buf.len(),
                self.frames + 1
            ));
        }
        let mut out = Vec::with_capacity(self.series.len());
        for (labels, mut points) in self.series {
            if !points.is_sorted_by(|a, b| a.0 < b.0) {
                // overlapping or out-of-order chunks: one sample per timestamp, the first read
                points.sort_by_key(|p| p.0);
                points.dedup_by_key(|p| p.0);
            }
            let mut s = RawSeries { labels, samples: Vec::with_capacity(points.len()), non_finite: Vec::new() };
            for (t, v) in points {
                if v.is_finite() {
                    s.samples.push(Sample::new(t, v));
                } else if v.to_bits() != xor::STALE_NAN_BITS {
                    s.non_finite.push(t);
                }
            }
            if !s.samples.is_empty() || !s.non_finite.is_empty() {
                out.push(s);
            }
        }
        Ok(out)
    }
}

/// A Go `binary.Uvarint` at the start of `b`: (value, bytes used); `None` if incomplete or over 10 bytes.
fn uvarint(b: &[u8]) -> Option<(u64, usize)> {
    let mut x = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        if i == 9 && byte > 1 {
            return None;
        }
        x |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Some((x, i + 1));
        }
    }
    None
}

/// Decodes a whole recorded answer (fixtures, benchmarks).
pub fn decode_stream(body: &[u8], start_ms: i64, end_ms: i64) -> Result<Vec<RawSeries>, String> {
    let mut d = StreamDecoder::new(start_ms, end_ms);
    d.feed(body)?;
    d.finish()
}

impl PromClient {
    fn remote_read_error(&self, reason: impl Into<String>, transient: bool) -> PromError {
        PromError::RemoteRead {
            url: format!("{}{REMOTE_READ_PATH}", self.base_url()),
            reason: reason.into(),
            transient,
        }
    }

    /// Sends a remote-read request; the response once its status and content type say it is a streamed answer.
    async fn remote_read_response(&self, body: Vec<u8>) -> Result<reqwest::Response, PromError> {
        let request = self
            .request(reqwest::Method::POST, REMOTE_READ_PATH)
            .await?
            .header("Content-Type", "application/x-protobuf")
            .header("Content-Encoding", "snappy")
            .header("X-Prometheus-Remote-Read-Version", "0.1.0")
            .body(body);
        let resp = self.send(request).await?;
        if !resp.status().is_success() {
            let (why, transient) =
                super::client::refusal(resp, "not a Prometheus ≥ 2.13, or remote read is not served here").await;
            return Err(self.remote_read_error(why, transient));
        }
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        if !content_type.starts_with(STREAMED_CONTENT_TYPE.split(';').next().unwrap_or_default()) {
            return Err(self.remote_read_error(
                format!("non-streamed answer (Content-Type `{content_type}`, expected `{STREAMED_CONTENT_TYPE}`)"),
                false,
            ));
        }
        Ok(resp)
    }

    /// Raw samples of `selector` in `[start_ms, end_ms)` by remote read: every sample by its own timestamp, so the
    /// range semantics of the query API (which ends it includes) do not matter here.
    pub async fn remote_read(&self, selector: &str, start_ms: i64, end_ms: i64) -> Result<Vec<RawSeries>, PromError> {
        let body = request_body(selector, start_ms, end_ms - 1)?;
        let mut resp = self.remote_read_response(body).await?;
        let mut decoder = StreamDecoder::new(start_ms, end_ms);
        while let Some(bytes) = resp.chunk().await.map_err(|e| self.transport_error(e))? {
            self.decoding(|| decoder.feed(&bytes)).map_err(|e| self.remote_read_error(e, false))?;
        }
        self.decoding(|| decoder.finish()).map_err(|e| self.remote_read_error(e, false))
    }

    /// The undecoded streamed answer of [`Self::remote_read`], for recording fixtures and benchmarks.
    pub async fn remote_read_body(&self, selector: &str, start_ms: i64, end_ms: i64) -> Result<Vec<u8>, PromError> {
        let body = request_body(selector, start_ms, end_ms - 1)?;
        let resp = self.remote_read_response(body).await?;
        Ok(resp.bytes().await.map_err(|e| self.transport_error(e))?.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prom::proto::{Chunk, ChunkedSeries, Label};

    fn frame(msg: &ChunkedReadResponse) -> Vec<u8> {
        let payload = msg.encode_to_vec();
        let mut out = Vec::new();
        let mut n = payload.len() as u64;
        while n >= 0x80 {
            out.push(n as u8 | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
        out.extend_from_slice(&CASTAGNOLI.checksum(&payload).to_be_bytes());
        out.extend_from_slice(&payload);
        out
    }

    fn series(name: &str, chunks: Vec<Vec<(i64, u64)>>) -> ChunkedSeries {
        ChunkedSeries {
            labels: vec![Label { name: "__name__".into(), value: name.into() }],
            chunks: chunks
                .into_iter()
                .map(|s| Chunk {
                    min_time_ms: s.first().map_or(0, |p| p.0),
                    max_time_ms: s.last().map_or(0, |p| p.0),
                    r#type: ChunkEncoding::Xor as i32,
                    data: xor::encode::chunk(&s),
                })
                .collect(),
        }
    }

    fn stream() -> Vec<u8> {
        let a = series(
            "a",
            vec![
                (0..10).map(|i| (i * 1000, (i as f64).to_bits())).collect(),
                (10..20).map(|i| (i * 1000, (i as f64).to_bits())).collect(),
            ],
        );
        // the same series continued in a second frame, with an out-of-order, overlapping chunk, a NaN and a
        // stale marker
        let mut nan = vec![(20_000, f64::NAN.to_bits()), (21_000, xor::STALE_NAN_BITS)];
        nan.insert(0, (5_000, 99f64.to_bits()));
        let a2 = series("a", vec![nan]);
        let b = series("b", vec![vec![(50_000, 1f64.to_bits())]]);
        let mut out = frame(&ChunkedReadResponse { chunked_series: vec![a], query_index: 0 });
        out.extend(frame(&ChunkedReadResponse { chunked_series: vec![a2, b], query_index: 0 }));
        out
    }

    #[test]
    fn frames_are_decoded_merged_and_trimmed_to_the_half_open_window() {
        let body = stream();
        // fed byte by byte: frames complete at any split
        let mut d = StreamDecoder::new(2_000, 50_000);
        for b in &body {
            d.feed(std::slice::from_ref(b)).unwrap();
        }
        let s = d.finish().unwrap();
        assert_eq!(s.len(), 1, "b's only sample is at the window's end, which is excluded");
        let ts: Vec<i64> = s[0].samples.iter().map(|p| p.t_ms).collect();
        assert_eq!(ts, (2..20).map(|i| i * 1000).collect::<Vec<_>>());
        // the duplicate at 5 s keeps the first value read; the stale marker is gone, the NaN is counted
        assert_eq!(s[0].samples[3], Sample::new(5_000, 5.0));
        assert_eq!(s[0].non_finite, vec![20_000]);
        assert_eq!(decode_stream(&body, 0, 60_000).unwrap().len(), 2);
    }

    #[test]
    fn broken_streams_are_errors() {
        let body = stream();
        let truncated = decode_stream(&body[..body.len() - 3], 0, 60_000).unwrap_err();
        assert!(truncated.contains("truncated frame"), "{truncated}");
        let mut bad_crc = body.clone();
        bad_crc[2] ^= 0x40;
        assert!(decode_stream(&bad_crc, 0, 60_000).unwrap_err().contains("checksum mismatch"));
        let mut corrupt =
            ChunkedReadResponse { chunked_series: vec![series("a", vec![vec![(0, 0), (1, 1)]])], query_index: 0 };
        let data = &mut corrupt.chunked_series[0].chunks[0].data;
        data.truncate(data.len() - 2);
        assert!(decode_stream(&frame(&corrupt), 0, 60_000).unwrap_err().contains("corrupt chunk"));
        assert!(decode_stream(&[0xff; 12], 0, 1).unwrap_err().contains("length"));
        let huge = [0x80, 0x80, 0x80, 0x80, 0x40, 0, 0, 0, 0];
        assert!(decode_stream(&huge, 0, 1).unwrap_err().contains("not a frame"));
        let not_proto = {
            let payload = [0xff, 0xff, 0xff];
            let mut f = vec![3];
            f.extend_from_slice(&CASTAGNOLI.checksum(&payload).to_be_bytes());
            f.extend_from_slice(&payload);
            f
        };
        assert!(decode_stream(&not_proto, 0, 1).unwrap_err().contains("not a ChunkedReadResponse"));
    }

    #[test]
    fn the_request_is_snappy_protobuf_with_matchers() {
        let body = request_body(r#"up{job="x"}"#, 5, 9).unwrap();
        let raw = snap::raw::Decoder::new().decompress_vec(&body).unwrap();
        let req = ReadRequest::decode(&raw[..]).unwrap();
        assert_eq!(req.accepted_response_types, vec![ResponseType::StreamedXorChunks as i32]);
        assert_eq!((req.queries[0].start_timestamp_ms, req.queries[0].end_timestamp_ms), (5, 9));
        assert_eq!(req.queries[0].matchers.len(), 2);
        assert!(request_body("up{", 0, 1).is_err());
    }
}
