//! The HTTP side: instant queries of range selectors (raw samples) and `query_range` split under the point limit.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::PromError;
use super::auth::SourceAuth;
use super::backend::{BUILD_INFO_PATH, BuildInfo, RangeEnds, range_ends};
use super::model::{RawSeries, parse_response};

/// Prometheus refuses a `query_range` of more than 11,000 points per series.
pub const QUERY_RANGE_MAX_POINTS: i64 = 11_000;

#[derive(Debug, Clone)]
pub struct PromClient {
    http: reqwest::Client,
    base: String,
    timeout: Duration,
    /// Nanoseconds spent decoding answers (JSON or chunks), shared by every clone: the benchmark's split.
    decode_ns: Arc<AtomicU64>,
    /// The server's range ends once its build info was read, shared by every clone.
    range_ends: Arc<tokio::sync::OnceCell<RangeEnds>>,
    /// Who asks: credentials, client certificate, headers (its `Debug` redacts every secret).
    auth: Arc<SourceAuth>,
}

/// Prometheus' time parameter: seconds with millisecond precision, exact for integer milliseconds.
pub(super) fn prom_time(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

impl PromClient {
    pub fn new(base: &str, timeout: Duration) -> Result<Self, PromError> {
        Self::with_auth(base, timeout, SourceAuth::default())
    }

    /// A client that tells the server who asks: `auth`'s TLS settings are read now, its credential files at every
    /// request.
    pub fn with_auth(base: &str, timeout: Duration, auth: SourceAuth) -> Result<Self, PromError> {
        Self::check_url(base)?;
        let credentials = |reason: String| PromError::Credentials { url: base.to_string(), reason };
        auth.check(base).map_err(credentials)?;
        let builder = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .user_agent(concat!("cardhour/", env!("CARGO_PKG_VERSION")));
        let http = auth
            .configure(builder)
            .map_err(credentials)?
            .build()
            .map_err(|e| credentials(format!("the HTTP client cannot be built: {e}")))?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            timeout,
            decode_ns: Arc::default(),
            range_ends: Arc::default(),
            auth: Arc::new(auth),
        })
    }

    /// A base URL this client takes: absolute http(s) with a host.
    pub fn check_url(base: &str) -> Result<(), PromError> {
        let parsed = url::Url::parse(base).map_err(|_| PromError::BadUrl(base.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(PromError::BadUrl(base.to_string()));
        }
        Ok(())
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// A request to `path` of the server, with the credentials and headers of [`Self::with_auth`].
    pub(super) async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
    ) -> Result<reqwest::RequestBuilder, PromError> {
        let request = self.http.request(method, format!("{}{path}", self.base));
        self.auth.apply(request).await.map_err(|reason| PromError::Credentials { url: self.base.clone(), reason })
    }

    /// Sends `request`; a refusal of who asks (401, 403) is [`PromError::Denied`], whichever API was asked.
    pub(super) async fn send(&self, request: reqwest::RequestBuilder) -> Result<reqwest::Response, PromError> {
        let resp = request.send().await.map_err(|e| self.transport_error(e))?;
        let status = resp.status().as_u16();
        if matches!(status, 401 | 403) {
            let body: String = resp.text().await.unwrap_or_default().chars().take(200).collect();
            return Err(PromError::Denied { url: self.base.clone(), status, body: body.trim().to_string() });
        }
        Ok(resp)
    }

    pub(super) fn range_ends_cell(&self) -> &tokio::sync::OnceCell<RangeEnds> {
        &self.range_ends
    }

    /// Time spent decoding answers so far, by this client and its clones.
    pub fn decode_time(&self) -> Duration {
        Duration::from_nanos(self.decode_ns.load(Ordering::Relaxed))
    }

    /// Runs `f`, adding its time to [`Self::decode_time`].
    pub(super) fn decoding<T>(&self, f: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = f();
        self.decode_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        out
    }

    async fn post(&self, path: &str, form: &[(&str, String)]) -> Result<Vec<RawSeries>, PromError> {
        let (status, body) = self.post_raw(path, form).await?;
        match self.decoding(|| parse_response(&body)) {
            // Prometheus answers 400/422/503 with a JSON error: its words are better than the status code
            Err(PromError::Malformed(_)) if !status.is_success() => Err(PromError::Status {
                status: status.as_u16(),
                body: String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned(),
            }),
            other => other,
        }
    }

    async fn post_raw(
        &self,
        path: &str,
        form: &[(&str, String)],
    ) -> Result<(reqwest::StatusCode, bytes::Bytes), PromError> {
        let resp = self.send(self.request(reqwest::Method::POST, path).await?.form(form)).await?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| self.transport_error(e))?;
        Ok((status, body))
    }

    pub(super) fn transport_error(&self, e: reqwest::Error) -> PromError {
        if e.is_timeout() {
            return PromError::Timeout { url: self.base.clone(), seconds: self.timeout.as_secs() };
        }
        let mut reason = e.to_string();
        let mut tls = false;
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            reason = format!("{reason}: {s}");
            tls |= is_tls_failure(s);
            source = s.source();
        }
        if tls {
            PromError::Tls { url: self.base.clone(), reason }
        } else {
            PromError::Unreachable { url: self.base.clone(), reason }
        }
    }

    /// Raw samples of `selector` in `[start_ms, end_ms)`, tiled by the samples' own timestamps: the range selector
    /// `selector[<end−start>ms]` evaluated at `end − 1 ms` covers `[start − 1 ms, end − 1 ms]` on Prometheus 2.x
    /// (both ends included) and `(start − 1 ms, end − 1 ms]` on Prometheus 3 and VictoriaMetrics (left end
    /// excluded); trimmed to `[start, end)`, every backend gives each sample to exactly one window.
    pub async fn raw_samples(&self, selector: &str, start_ms: i64, end_ms: i64) -> Result<Vec<RawSeries>, PromError> {
        let (query, time) = raw_query(selector, start_ms, end_ms);
        let series = self.post("/api/v1/query", &[("query", query), ("time", time)]).await?;
        Ok(trim(series, start_ms, end_ms))
    }

    /// The undecoded answer of [`Self::raw_samples`], for recording fixtures and benchmarks.
    pub async fn raw_samples_body(&self, selector: &str, start_ms: i64, end_ms: i64) -> Result<Vec<u8>, PromError> {
        let (query, time) = raw_query(selector, start_ms, end_ms);
        let (_, body) = self.post_raw("/api/v1/query", &[("query", query), ("time", time)]).await?;
        Ok(body.to_vec())
    }

    /// An instant query.
    pub async fn query(&self, query: &str, time_ms: i64) -> Result<Vec<RawSeries>, PromError> {
        self.post("/api/v1/query", &[("query", query.to_string()), ("time", prom_time(time_ms))]).await
    }

    /// A range query over `[start, end]` at `step`, split into requests of at most 11,000 points and merged.
    pub async fn query_range(
        &self,
        query: &str,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
    ) -> Result<Vec<RawSeries>, PromError> {
        if step_ms <= 0 || end_ms < start_ms {
            return Err(PromError::Query {
                error_type: "bad_data".into(),
                error: "query_range needs step > 0 and end ≥ start".into(),
            });
        }
        let mut merged: BTreeMap<BTreeMap<String, String>, RawSeries> = BTreeMap::new();
        for (s, e) in range_chunks(start_ms, end_ms, step_ms) {
            let form = [
                ("query", query.to_string()),
                ("start", prom_time(s)),
                ("end", prom_time(e)),
                ("step", prom_time(step_ms)),
            ];
            for series in self.post("/api/v1/query_range", &form).await? {
                let entry = merged
                    .entry(series.labels.clone())
                    .or_insert_with(|| RawSeries { labels: series.labels.clone(), ..RawSeries::default() });
                entry.samples.extend(series.samples);
                entry.non_finite.extend(series.non_finite);
            }
        }
        Ok(merged.into_values().collect())
    }
}

/// A TLS failure among an error's sources: rustls reports a failed handshake (a certificate refused on either
/// side, an alert from the peer) as an I/O error of kind `InvalidData` carrying its own error, which the connector
/// may wrap in further I/O errors (whose `source` skips what they carry, so they are unwrapped here).
fn is_tls_failure(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut e = e;
    while let Some(io) = e.downcast_ref::<std::io::Error>() {
        match io.get_ref() {
            Some(_) if io.kind() == std::io::ErrorKind::InvalidData => return true,
            Some(inner) => e = inner,
            None => return false,
        }
    }
    false
}

/// The instant query (and its time) whose range selector covers `[start_ms, end_ms)` on every backend.
fn raw_query(selector: &str, start_ms: i64, end_ms: i64) -> (String, String) {
    let range = (end_ms - start_ms).max(1);
    (format!("{selector}[{range}ms]"), prom_time(end_ms - 1))
}

/// Each series cut to the samples of `[start_ms, end_ms)`; series left with none are dropped.
pub fn trim(series: Vec<RawSeries>, start_ms: i64, end_ms: i64) -> Vec<RawSeries> {
    series
        .into_iter()
        .filter_map(|mut s| {
            s.samples.retain(|p| p.t_ms >= start_ms && p.t_ms < end_ms);
            s.non_finite.retain(|t| *t >= start_ms && *t < end_ms);
            (!s.samples.is_empty() || !s.non_finite.is_empty()).then_some(s)
        })
        .collect()
}

/// `[start, end]` at `step` as consecutive closed chunks of at most [`QUERY_RANGE_MAX_POINTS`] points each.
pub fn range_chunks(start_ms: i64, end_ms: i64, step_ms: i64) -> Vec<(i64, i64)> {
    let span = (QUERY_RANGE_MAX_POINTS - 1) * step_ms;
    let mut out = Vec::new();
    let mut s = start_ms;
    while s <= end_ms {
        let e = (s + span).min(end_ms);
        out.push((s, e));
        s = e + step_ms;
    }
    out
}

/// Why an endpoint other than the query API refused a request, and whether trying again may help: an absent
/// endpoint gets `absent_hint`, any other status its first 200 characters. Absent is a 404 or 405 (a proxy that
/// routes only the query API), or VictoriaMetrics' 400 `unsupported path requested` (its remote read, say).
pub(super) async fn refusal(resp: reqwest::Response, absent_hint: &str) -> (String, bool) {
    let code = resp.status().as_u16();
    let text: String = resp.text().await.unwrap_or_default().chars().take(200).collect();
    let why = if is_absent(code, &text) {
        format!("endpoint absent (HTTP {code}): {absent_hint}")
    } else {
        format!("HTTP {code}: {}", text.trim())
    };
    (why, code >= 500 || code == 429)
}

/// The status and body of an endpoint the server does not have.
fn is_absent(code: u16, body: &str) -> bool {
    matches!(code, 404 | 405) || (code == 400 && body.contains("unsupported path requested"))
}

impl PromClient {
    /// The server's build info: `None` if it has none (any answer that is not one); an error only if it cannot be
    /// asked (unreachable, a timeout, a 5xx or 429 — worth asking again) or refuses who asks (401, 403).
    pub async fn build_info(&self) -> Result<Option<BuildInfo>, PromError> {
        let resp = self.send(self.request(reqwest::Method::GET, BUILD_INFO_PATH).await?).await?;
        let status = resp.status();
        let body = resp.bytes().await.map_err(|e| self.transport_error(e))?;
        if status.is_server_error() || status.as_u16() == 429 {
            let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
            return Err(PromError::Status { status: status.as_u16(), body: text });
        }
        Ok(if status.is_success() { BuildInfo::parse(&body) } else { None })
    }

    /// [`range_ends`] for this server: a VictoriaMetrics read by its export at once; otherwise its build info is
    /// asked once per client (and its clones) and the choice logged.
    pub async fn range_ends(&self, serves_export: bool) -> Result<RangeEnds, PromError> {
        if serves_export {
            return Ok(range_ends(true, None).0);
        }
        let ends = self
            .range_ends_cell()
            .get_or_try_init(|| async {
                let build = self.build_info().await?;
                let (ends, why) = range_ends(false, build.as_ref());
                tracing::info!(url = %self.base_url(), ?ends, reason = %why, "range selector ends");
                Ok::<_, PromError>(ends)
            })
            .await?;
        Ok(*ends)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_is_exact_milliseconds() {
        assert_eq!(prom_time(1_700_000_003_599_999), "1700000003599.999");
        assert_eq!(prom_time(7), "0.007");
        assert_eq!(prom_time(-1), "-1.999");
    }

    #[test]
    fn range_chunks_cover_every_step_once_under_the_limit() {
        let step = 15_000;
        let (start, end) = (0, 30 * 86_400_000);
        let chunks = range_chunks(start, end, step);
        let mut points = 0;
        let mut next = start;
        for (s, e) in &chunks {
            assert_eq!(*s, next);
            let n = (e - s) / step + 1;
            assert!(n <= QUERY_RANGE_MAX_POINTS);
            points += n;
            next = e + step;
        }
        assert_eq!(points, (end - start) / step + 1);
        assert_eq!(range_chunks(0, 0, step), vec![(0, 0)]);
    }

    #[test]
    fn absent_endpoints_are_known_by_their_answer() {
        // VictoriaMetrics 1.79's answer to POST /api/v1/read
        let vm =
            r#"remoteAddr: "127.0.0.1:37998"; requestURI: /api/v1/read; unsupported path requested: "/api/v1/read""#;
        assert!(is_absent(400, vm));
        assert!(is_absent(404, "404 page not found") && is_absent(405, ""));
        assert!(!is_absent(400, "bad_data: invalid parameter") && !is_absent(500, vm));
    }

    #[test]
    fn urls_are_checked() {
        assert!(PromClient::new("localhost:9090", Duration::from_secs(1)).is_err());
        assert!(PromClient::new("ftp://x", Duration::from_secs(1)).is_err());
        assert!(PromClient::new("http://127.0.0.1:9090/", Duration::from_secs(1)).is_ok());
    }
}
