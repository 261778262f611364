//! Every error answer is JSON: axum's own rejections (a bad path parameter, a non-UTF-8 body, 405, 413…) are
//! rewritten into the [`ErrorBody`] shape, unknown routes get a JSON 404 and slow requests a JSON 503.

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, ErrorBody};
use crate::usecase;

/// A use case's refusal as the HTTP answer it is: the same status, code and fields whichever use case refused.
impl From<usecase::Error> for ApiError {
    fn from(e: usecase::Error) -> Self {
        use usecase::Error as E;
        match e {
            E::Invalid(errors) => ApiError::Invalid(errors),
            E::NotFound(what) => ApiError::NotFound(what),
            E::NotFoundField { field, message } => ApiError::NotFoundField { field, message },
            E::Conflict { field, message } => ApiError::Conflict { field, message },
            E::NotReady(r) => ApiError::NotReady(r),
            e @ E::NotEnded(_) => ApiError::Conflict { field: Some("month".into()), message: e.to_string() },
            E::Forbidden => ApiError::Forbidden,
            E::Timeout => ApiError::Timeout,
            E::Internal(e) => ApiError::Internal(e),
        }
    }
}

/// The unknown-route answer.
pub async fn not_found(req: Request) -> ApiError {
    ApiError::NotFound(format!("route {} {}", req.method(), req.uri().path()))
}

/// Cancels a read that takes longer than `limit`. A write is not cut: dropping it after its `COMMIT` was sent and
/// before the reply came would answer 503 for what the database did apply; its statements are bounded by the
/// statement timeout instead, so its answer is always its outcome.
pub async fn timeout(limit: Duration, req: Request, next: Next) -> Response {
    if !matches!(*req.method(), axum::http::Method::GET | axum::http::Method::HEAD) {
        return next.run(req).await;
    }
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(resp) => resp,
        Err(_) => {
            tracing::warn!(?limit, "request cancelled by the request timeout");
            ApiError::Timeout.into_response()
        }
    }
}

fn is_json(resp: &Response) -> bool {
    resp.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// The field an axum rejection's text names: "Cannot parse `id` with value …" → `id`; a route's only
/// parameter (`/rates/{id}`: axum does not name it); a body that is not UTF-8 → `body`.
fn field_of_rejection(status: StatusCode, text: &str, route: Option<&str>) -> Option<String> {
    if let Some(rest) = text.split("Cannot parse `").nth(1)
        && text.contains("` with value `")
    {
        return rest.split('`').next().map(str::to_string);
    }
    if text.starts_with("Invalid URL") || text.contains("path argument") || text.contains("UTF-8 in `") {
        let params: Vec<&str> =
            route.unwrap_or("").split('/').filter_map(|s| s.strip_prefix('{')?.strip_suffix('}')).collect();
        return Some(if let [only] = params[..] { only.to_string() } else { "path".into() });
    }
    match status {
        StatusCode::BAD_REQUEST | StatusCode::PAYLOAD_TOO_LARGE | StatusCode::UNSUPPORTED_MEDIA_TYPE => {
            Some("body".into())
        }
        _ => None,
    }
}

fn code_of(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::FORBIDDEN => "forbidden",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::CONFLICT => "conflict",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::UNPROCESSABLE_ENTITY => "invalid_input",
        StatusCode::URI_TOO_LONG => "uri_too_long",
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => "headers_too_large",
        StatusCode::REQUEST_TIMEOUT | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT => "timeout",
        s if s.is_server_error() => "internal",
        _ => "error",
    }
}

/// The JSON error body of `status` with `message` (naming `field`), for answers made outside the application.
pub fn error_body(status: StatusCode, field: Option<&str>, message: &str) -> Vec<u8> {
    let body = ErrorBody {
        status: status.as_u16(),
        code: code_of(status).into(),
        field: field.map(str::to_string),
        message: message.to_string(),
        errors: vec![],
        blockers: vec![],
    };
    serde_json::to_vec(&body).unwrap_or_default()
}

/// Rewrites an error answer that is not JSON (axum's plain-text rejections, empty 405s, tower-http's 413) into
/// the JSON every client expects; headers such as `Allow` are kept. 5xx texts are logged, never sent.
pub async fn json_errors(req: Request, next: Next) -> Response {
    let route = req.extensions().get::<axum::extract::MatchedPath>().map(|p| p.as_str().to_string());
    let resp = next.run(req).await;
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error()) || is_json(&resp) {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, 16 * 1024).await.map(|b| String::from_utf8_lossy(&b).into_owned());
    let text = text.unwrap_or_default();
    let message = if status.is_server_error() {
        tracing::error!(%status, body = %text, "a non-JSON server error");
        "internal error".to_string()
    } else {
        match status {
            StatusCode::METHOD_NOT_ALLOWED => "this route does not allow that method (see `Allow`)".into(),
            StatusCode::PAYLOAD_TOO_LARGE => format!("the request body is larger than {} bytes", super::BODY_LIMIT),
            StatusCode::NOT_FOUND if text.is_empty() => "not found".into(),
            _ if text.is_empty() => status.canonical_reason().unwrap_or("error").to_string(),
            _ => text.clone(),
        }
    };
    let field = if status.is_server_error() { None } else { field_of_rejection(status, &text, route.as_deref()) };
    let body = ErrorBody {
        status: status.as_u16(),
        code: code_of(status).into(),
        field,
        message,
        errors: vec![],
        blockers: vec![],
    };
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_use_case_refusal_is_its_http_answer() {
        let m: crate::billing::Month = "2026-11".parse().unwrap();
        let answer = |e: usecase::Error| {
            let e = ApiError::from(e);
            let field = match &e {
                ApiError::Conflict { field, .. } => field.clone(),
                ApiError::Invalid(list) => list.first().map(|f| f.field.clone()),
                ApiError::NotFoundField { field, .. } => Some(field.clone()),
                _ => None,
            };
            (e.status().as_u16(), field)
        };
        let conflict = usecase::Error::Conflict { field: Some("effective_from".into()), message: "taken".into() };
        assert_eq!(answer(conflict), (409, Some("effective_from".into())));
        assert_eq!(answer(usecase::Error::NotEnded(m)), (409, Some("month".into())));
        assert_eq!(answer(usecase::Error::invalid("pue", "must be at least 1.0")), (422, Some("pue".into())));
        assert_eq!(answer(usecase::Error::NotFound("team x".into())), (404, None));
        let unknown = usecase::Error::NotFoundField { field: "team".into(), message: "unknown team x".into() };
        assert_eq!(answer(unknown), (404, Some("team".into())));
        assert_eq!(answer(usecase::Error::Forbidden), (403, None));
        assert_eq!(answer(usecase::Error::Timeout), (503, None));
        assert_eq!(answer(usecase::Error::Internal(anyhow::anyhow!("boom"))), (500, None));
        // the database's refusals reach the API through the same reading
        let taken = crate::db::constraint::fake::refused("23505", Some("teams_pkey"));
        assert_eq!((ApiError::from(taken).status().as_u16()), 409);
        assert_eq!(ApiError::from(sqlx::Error::PoolTimedOut).status().as_u16(), 503);
    }

    #[test]
    fn rejection_fields() {
        let bad = StatusCode::BAD_REQUEST;
        let field = |text: &str, route: Option<&str>| field_of_rejection(bad, text, route);
        assert_eq!(field("Invalid URL: Cannot parse `id` with value `x` to a `i64`", None).as_deref(), Some("id"));
        assert_eq!(field("Invalid URL: Cannot parse `x` to a `i64`", None).as_deref(), Some("path"));
        assert_eq!(
            field("Invalid URL: Cannot parse `x` to a `i64`", Some("/api/v1/rates/{id}")).as_deref(),
            Some("id")
        );
        assert_eq!(field("Request body didn't contain valid UTF-8: invalid utf-8", None).as_deref(), Some("body"));
        assert_eq!(field_of_rejection(StatusCode::METHOD_NOT_ALLOWED, "", None), None);
    }
}
