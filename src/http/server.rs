//! The whole HTTP application: the JSON API ([`crate::api`]) and the portal's pages ([`crate::web`]) side by side
//! under one set of layers (request timeout, body limit, tracing, request durations); an unknown path is answered in
//! the face's own language (JSON under `/api/`, a page elsewhere). `/metrics` ([`crate::telemetry`]) sits beside
//! the probes, outside the API's authentication and its OpenAPI document. [`serve`] runs it on a listener with
//! the limits that cut slow clients off ([`ClientLimits`]).

use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;

use crate::usecase::state::{AppState, BODY_LIMIT, REQUEST_TIMEOUT};

/// The application as `cardhour serve` runs it.
pub fn app(state: AppState) -> Router {
    app_with_timeout(state, REQUEST_TIMEOUT)
}

/// [`app`] with another request timeout (tests).
pub fn app_with_timeout(state: AppState, timeout: Duration) -> Router {
    crate::telemetry::install("serve");
    // sessions only where pages are: the API keeps its bearer tokens and never sets or reads a cookie
    let pages = crate::web::router(state.clone())
        .layer(axum::middleware::map_response(page_headers))
        .layer(crate::auth::session::layer(state.pool.clone(), &state.portal.session));
    crate::api::routes(state.clone())
        .merge(pages)
        .route("/metrics", axum::routing::get(crate::telemetry::metrics_handler))
        .fallback(not_found)
        .layer(axum::middleware::from_fn(move |req: Request, next: Next| crate::api::timeout(timeout, req, next)))
        .layer(axum::extract::DefaultBodyLimit::max(BODY_LIMIT))
        .layer(tower_http::limit::RequestBodyLimitLayer::new(BODY_LIMIT))
        .layer(axum::middleware::from_fn(errors_per_face))
        .layer(tower_http::trace::TraceLayer::new_for_http())
        // outermost: the status recorded is the one sent, whichever layer answered
        .layer(axum::middleware::from_fn(crate::telemetry::http::record))
        .with_state(state)
}

/// What every page answer says to the browser: never framed by another site (clickjacking a form), forms post
/// only here, no content sniffing, no full URL in the Referer sent elsewhere.
async fn page_headers(mut r: Response) -> Response {
    use axum::http::HeaderValue;
    use axum::http::header::{CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS};
    let h = r.headers_mut();
    h.entry(CONTENT_SECURITY_POLICY).or_insert(HeaderValue::from_static(
        "frame-ancestors 'none'; form-action 'self'; base-uri 'self'; object-src 'none'",
    ));
    h.entry(X_FRAME_OPTIONS).or_insert(HeaderValue::from_static("DENY"));
    h.entry(X_CONTENT_TYPE_OPTIONS).or_insert(HeaderValue::from_static("nosniff"));
    h.entry(REFERRER_POLICY).or_insert(HeaderValue::from_static("same-origin"));
    r
}

/// Whether `path` is the JSON face's. Compared without case: `/API/V1/teams` is no route, but a client asking it
/// speaks to the API and is answered in JSON.
fn is_api_path(path: &str) -> bool {
    let starts = |p: &str| path.get(..p.len()).is_some_and(|head| head.eq_ignore_ascii_case(p));
    ["/api/", "/swagger-ui", "/healthz", "/readyz", "/metrics"].into_iter().any(starts)
        || path.eq_ignore_ascii_case("/api")
}

/// Every error under the API's paths is JSON, whichever layer answered it (the body limit, the router, a handler).
async fn errors_per_face(req: Request, next: Next) -> Response {
    if is_api_path(req.uri().path()) { crate::api::json_errors(req, next).await } else { next.run(req).await }
}

async fn not_found(req: Request) -> Response {
    if is_api_path(req.uri().path()) { crate::api::not_found(req).await } else { crate::web::not_found(req).await }
}

pub use conn::{ClientLimits, serve};

/// Serving connections: hyper with a header read timeout, a deadline on every request body, and the answers hyper
/// makes itself to a request it cannot parse rewritten in the face's language.
mod conn {
    use std::convert::Infallible;
    use std::future::Future;
    use std::io;
    use std::net::SocketAddr;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::task::{Context, Poll, ready};
    use std::time::Duration;

    use axum::Router;
    use axum::body::Body;
    use axum::extract::ConnectInfo;
    use axum::http::{HeaderValue, Request, Response, StatusCode, header};
    use bytes::Bytes;
    use http_body::{Body as HttpBody, Frame, SizeHint};
    use hyper::body::Incoming;
    use hyper::server::conn::http1::Builder;
    use hyper_util::rt::{TokioIo, TokioTimer};
    use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
    use tokio::net::{TcpListener, TcpStream};
    use tower::ServiceExt;

    /// How long a client may take to send what it must. A client that sends its request head or body slowly (a
    /// byte every few seconds: slowloris) would otherwise hold its connection, and a task, for as long as it likes.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ClientLimits {
        /// From the moment the server waits for a request (a new connection, or the next request of a kept-alive
        /// one) until its whole head has arrived; past it the connection is closed.
        pub header_timeout: Duration,
        /// From the moment a request's head has arrived until its whole body has; past it the request is answered
        /// 408 and the connection closed. Every method: a PUT or POST body trickled a byte at a time is cut as a GET
        /// head would be.
        pub body_timeout: Duration,
    }

    impl Default for ClientLimits {
        fn default() -> Self {
            Self { header_timeout: Duration::from_secs(30), body_timeout: Duration::from_secs(30) }
        }
    }

    /// Serves `app` on `listener` until `stop` resolves; then accepts no more connections and waits for the
    /// requests in flight (each connection closes after its current request).
    pub async fn serve(
        listener: TcpListener,
        app: Router,
        limits: ClientLimits,
        stop: impl Future<Output = ()> + Send,
    ) -> io::Result<()> {
        // HTTP/1.1, as axum::serve served it here (hyper's own HTTP/2 would need its own limits)
        let mut builder = Builder::new();
        builder.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let mut stop = std::pin::pin!(stop);
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // out of file descriptors and the like: not a reason to stop serving the others
                        tracing::warn!(error = %e, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                () = &mut stop => break,
            };
            let _ = stream.set_nodelay(true);
            let app = app.clone();
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let app = app.clone();
                async move { Ok::<_, Infallible>(answer(app, req, peer, limits.body_timeout).await) }
            });
            let io = TokioIo::new(ErrorHeads::new(stream));
            let connection = graceful.watch(builder.serve_connection(io, service));
            tokio::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
            });
        }
        drop(listener);
        graceful.shutdown().await;
        Ok(())
    }

    /// One request through the application, its body under the deadline; a body that missed it is answered 408.
    async fn answer(app: Router, req: Request<Incoming>, peer: SocketAddr, body_timeout: Duration) -> Response<Body> {
        let (mut parts, body) = req.into_parts();
        parts.extensions.insert(ConnectInfo(peer));
        let late = Arc::new(AtomicBool::new(false));
        let body = if body.is_end_stream() {
            Body::new(body)
        } else {
            Body::new(Deadline::new(Body::new(body), body_timeout, late.clone()))
        };
        let api = super::is_api_path(parts.uri.path());
        let response = match app.oneshot(Request::from_parts(parts, body)).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
        if !late.load(Ordering::SeqCst) {
            return response;
        }
        tracing::info!(%peer, ?body_timeout, "a request body did not arrive in time: answered 408, connection closed");
        let message = format!("the request body did not arrive within {} s", body_timeout.as_secs_f64());
        let (content_type, bytes) = face(api, StatusCode::REQUEST_TIMEOUT, Some("body"), &message);
        let mut r = Response::new(Body::from(bytes));
        *r.status_mut() = StatusCode::REQUEST_TIMEOUT;
        r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        r
    }

    /// An error answer in the face's language: the API's JSON error body, or a small page in both languages.
    fn face(api: bool, status: StatusCode, field: Option<&str>, message: &str) -> (&'static str, Vec<u8>) {
        if api {
            ("application/json", crate::api::error_body(status, field, message))
        } else {
            let title = format!("{} {}", status.as_u16(), status.canonical_reason().unwrap_or(""));
            let zh = match status {
                StatusCode::REQUEST_TIMEOUT => "请求内容发送过慢，连接已关闭。",
                StatusCode::URI_TOO_LONG => "请求地址过长。",
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => "请求头过大。",
                _ => "无法读取此请求。",
            };
            let page = format!(
                "<!doctype html><meta charset=utf-8><title>{title}</title><h1>{title}</h1><p>{}<p>{zh}",
                html_escape(message)
            );
            ("text/html; charset=utf-8", page.into_bytes())
        }
    }

    fn html_escape(s: &str) -> String {
        s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
    }

    /// Why a body frame was refused: its deadline passed.
    #[derive(Debug)]
    struct BodyTimeout;

    impl std::fmt::Display for BodyTimeout {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("the request body did not arrive in time")
        }
    }

    impl std::error::Error for BodyTimeout {}

    /// A request body that must be complete by a deadline (set when the head arrived): past it, the next frame is
    /// an error (the handler's extractor refuses the body) and `late` says why.
    struct Deadline {
        inner: Body,
        sleep: Pin<Box<tokio::time::Sleep>>,
        late: Arc<AtomicBool>,
    }

    impl Deadline {
        fn new(inner: Body, limit: Duration, late: Arc<AtomicBool>) -> Self {
            Self { inner, sleep: Box::pin(tokio::time::sleep(limit)), late }
        }
    }

    impl HttpBody for Deadline {
        type Data = Bytes;
        type Error = axum::Error;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
            if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
                return Poll::Ready(frame);
            }
            ready!(self.sleep.as_mut().poll(cx));
            self.late.store(true, Ordering::SeqCst);
            Poll::Ready(Some(Err(axum::Error::new(BodyTimeout))))
        }

        fn is_end_stream(&self) -> bool {
            self.inner.is_end_stream()
        }

        fn size_hint(&self) -> SizeHint {
            self.inner.size_hint()
        }
    }

    /// How long, and how much, is read and dropped after an error answer before the connection is closed: a
    /// client still sending its (too large) request would otherwise get a reset instead of the answer.
    const LINGER: Duration = Duration::from_secs(2);
    const LINGER_BYTES: usize = 4 * 1024 * 1024;

    /// The connection as hyper sees it. hyper answers a request it cannot parse (a malformed request line, a URI
    /// over 64 KiB, a head over its buffer) by itself, with an empty body; this rewrites that answer into the face's
    /// language (JSON for the API's paths, judged by the first bytes of the request) and, before closing, reads what
    /// the client is still sending so it receives the answer.
    struct ErrorHeads {
        inner: TcpStream,
        /// The first bytes of the request being read (cleared when an answer goes out).
        head: Vec<u8>,
        /// A rewritten answer still to be written, and how much of it was.
        pending: Option<(Vec<u8>, usize)>,
        /// After a rewritten answer: the client's remaining bytes are drained until this deadline.
        linger: Option<(Pin<Box<tokio::time::Sleep>>, usize)>,
    }

    impl ErrorHeads {
        fn new(inner: TcpStream) -> Self {
            Self { inner, head: Vec::new(), pending: None, linger: None }
        }

        /// Writes out the rewritten answer, if any.
        fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            while let Some((bytes, written)) = &mut self.pending {
                if *written == bytes.len() {
                    self.pending = None;
                    break;
                }
                let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                *written += n;
            }
            Poll::Ready(Ok(()))
        }

        /// The rewritten answer when `buf` is hyper's own answer to a request it could not parse.
        fn rewrite(&self, buf: &[u8]) -> Option<Vec<u8>> {
            let status = bare_error_status(buf)?;
            // a page's path keeps the page's language; anything else (the API's, or no path at all) gets JSON
            let api = request_target(&self.head).is_none_or(|t| !t.starts_with('/') || super::is_api_path(t));
            let message = match status {
                StatusCode::URI_TOO_LONG => "the request URI is longer than the server reads (64 KiB)",
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => "the request head is larger than the server reads",
                _ => "the request could not be read: a malformed request line or header",
            };
            let (content_type, body) = face(api, status, None, message);
            let mut out = format!(
                "HTTP/1.1 {} {}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                status.as_u16(),
                status.canonical_reason().unwrap_or(""),
                body.len()
            )
            .into_bytes();
            out.extend_from_slice(&body);
            Some(out)
        }

        fn note_read(&mut self, bytes: &[u8]) {
            let room = 2048usize.saturating_sub(self.head.len());
            self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
    }

    /// The status of `buf` when it is exactly an answer hyper makes itself to a request it could not parse: a
    /// status line of 400, 414 or 431 and no header but `content-length: 0`, `date` and `connection`. The
    /// application never answers so: its errors always carry a body and its content type.
    fn bare_error_status(buf: &[u8]) -> Option<StatusCode> {
        let text = std::str::from_utf8(buf).ok()?;
        let head = text.strip_suffix("\r\n\r\n")?;
        let mut lines = head.split("\r\n");
        let status = lines.next()?.strip_prefix("HTTP/1.1 ")?.get(..3)?.parse::<u16>().ok()?;
        let status = StatusCode::from_u16(status).ok()?;
        if !matches!(
            status,
            StatusCode::BAD_REQUEST | StatusCode::URI_TOO_LONG | StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
        ) {
            return None;
        }
        let mut empty = false;
        for line in lines {
            let (name, value) = line.split_once(':')?;
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => empty = value.trim() == "0",
                "date" | "connection" => {}
                _ => return None,
            }
        }
        empty.then_some(status)
    }

    /// The request target of the first bytes of a request (`GET /api/v1/teams HTTP/1.1` → `/api/v1/teams`, as far
    /// as it was read); `None` when there is none to read.
    fn request_target(head: &[u8]) -> Option<&str> {
        let text = match std::str::from_utf8(head) {
            Ok(t) => t,
            Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or(""),
        };
        let line = text.trim_start_matches(['\r', '\n']).split(['\r', '\n']).next()?;
        let target = line.split(' ').nth(1)?;
        (!target.is_empty()).then_some(target)
    }

    impl AsyncRead for ErrorHeads {
        fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
            let before = buf.filled().len();
            ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
            let this = &mut *self;
            this.note_read(&buf.filled()[before..]);
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncWrite for ErrorHeads {
        fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            ready!(self.poll_pending(cx))?;
            if let Some(answer) = self.rewrite(buf) {
                self.pending = Some((answer, 0));
                self.head.clear();
                // the rest goes out on the next write, flush or shutdown
                let _ = self.poll_pending(cx)?;
                return Poll::Ready(Ok(buf.len()));
            }
            self.head.clear();
            Pin::new(&mut self.inner).poll_write(cx, buf)
        }

        fn poll_write_vectored(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            let mut non_empty = bufs.iter().filter(|b| !b.is_empty());
            if let (Some(only), None) = (non_empty.next(), non_empty.next()) {
                return self.poll_write(cx, only);
            }
            ready!(self.poll_pending(cx))?;
            self.head.clear();
            Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
        }

        fn is_write_vectored(&self) -> bool {
            self.inner.is_write_vectored()
        }

        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            ready!(self.poll_pending(cx))?;
            Pin::new(&mut self.inner).poll_flush(cx)
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            let rewritten = self.pending.is_some() || self.linger.is_some();
            ready!(self.poll_pending(cx))?;
            if !rewritten {
                return Pin::new(&mut self.inner).poll_shutdown(cx);
            }
            if self.linger.is_none() {
                ready!(Pin::new(&mut self.inner).poll_shutdown(cx))?;
                self.linger = Some((Box::pin(tokio::time::sleep(LINGER)), 0));
            }
            // the answer is out and the write side closed: drop what the client still sends, for a while
            let this = &mut *self;
            let Some((deadline, drained)) = &mut this.linger else { return Poll::Ready(Ok(())) };
            let mut scratch = [0u8; 8192];
            loop {
                if deadline.as_mut().poll(cx).is_ready() || *drained >= LINGER_BYTES {
                    return Poll::Ready(Ok(()));
                }
                let mut buf = ReadBuf::new(&mut scratch);
                match Pin::new(&mut this.inner).poll_read(cx, &mut buf) {
                    Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(Ok(())),
                    Poll::Ready(Ok(())) => *drained += buf.filled().len(),
                    Poll::Ready(Err(_)) => return Poll::Ready(Ok(())),
                    Poll::Pending => return Poll::Pending,
                }
            }
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn hypers_own_answers_are_told_from_the_applications() {
            let own = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: Sat, 05 Dec 2026 07:00:00 GMT\r\n\r\n";
            assert_eq!(bare_error_status(own), Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE));
            let own = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n";
            assert_eq!(bare_error_status(own), Some(StatusCode::BAD_REQUEST));
            for app in [
                &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n"[..],
                b"HTTP/1.1 400 Bad Request\r\ncontent-length: 12\r\n\r\n",
                b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
                b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n{}",
                b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n",
            ] {
                assert_eq!(bare_error_status(app), None, "{}", String::from_utf8_lossy(app));
            }
        }

        #[test]
        fn the_face_of_a_request_is_told_by_its_target() {
            assert_eq!(request_target(b"GET /api/v1/teams HTTP/1.1\r\nhost: x\r\n"), Some("/api/v1/teams"));
            assert_eq!(request_target(b"\r\nPUT /API/V1/x"), Some("/API/V1/x"));
            assert_eq!(request_target(b"GET /bills/2026-11 HT"), Some("/bills/2026-11"));
            assert_eq!(request_target(b"garbage"), None);
            assert_eq!(request_target(b""), None);
            assert!(super::super::is_api_path("/API/V1/teams") && super::super::is_api_path("/Api"));
            assert!(!super::super::is_api_path("/bills/2026-11") && !super::super::is_api_path("/apiary"));
        }
    }
}
