//! JSON and query-string extractors whose rejections are [`ApiError`]s naming the field.

use axum::extract::path::ErrorKind;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::error::ApiError;

/// `axum::Json` with JSON errors: a missing or mistyped field is a 422 naming it. Every body of the API is a JSON
/// object: anything else is refused before it is read into `T` (serde's derived structs would also read an array
/// such as `[null, null]` as their fields in order, which the document does not allow).
#[derive(Debug)]
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        // content type, size and syntax as axum's `Json` checks them; the shape next; the fields last
        let axum::Json(raw) = axum::Json::<Box<RawValue>>::from_request(req, state).await?;
        if !raw.get().trim_start().starts_with('{') {
            return Err(ApiError::invalid("body", "the body must be a JSON object"));
        }
        let axum::Json(value) = axum::Json::<T>::from_bytes(raw.get().as_bytes())?;
        Ok(Self(value))
    }
}

/// `axum::extract::Query` with JSON errors naming the parameter.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// `axum::extract::Path` with JSON errors: a value its type refuses (a month outside 2000-01 ..= 2100-12, a team id
/// with a capital) is a 422 naming the route's parameter (`month`, `team`). Handlers take the typed values —
/// `ApiPath<Month>`, `ApiPath<(Month, TeamId)>` — and never parse a path segment themselves.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

impl From<PathRejection> for ApiError {
    fn from(r: PathRejection) -> Self {
        let PathRejection::FailedToDeserializePathParams(e) = r else {
            // no path parameters at all: a route wired to the wrong extractor
            return ApiError::Internal(anyhow::anyhow!("{}", r.body_text()));
        };
        match e.into_kind() {
            ErrorKind::DeserializeError { key, message, .. } => ApiError::invalid(key, message),
            ErrorKind::ParseErrorAtKey { key, expected_type, .. } => {
                ApiError::invalid(key, format!("expected {expected_type}"))
            }
            ErrorKind::InvalidUtf8InPathParam { key } => ApiError::bad_request(key, "not UTF-8 once percent-decoded"),
            kind @ (ErrorKind::ParseErrorAtIndex { .. } | ErrorKind::ParseError { .. }) => {
                ApiError::BadRequest { field: None, message: kind.to_string() }
            }
            kind => ApiError::Internal(anyhow::anyhow!("path parameters: {kind}")),
        }
    }
}

/// The field a serde message names and the message without axum's path prefix: serde names the culprit in
/// backticks ("missing field `pue`", "unknown field `extra`"), axum prefixes the JSON path of the value that
/// failed ("tco: missing field `pue`" → `tco.pue`; "extra: unknown field `extra`" → `extra`, named once).
fn split_field(message: &str) -> (Option<String>, &str) {
    let (path, rest) = match message.split_once(": ") {
        Some((p, r)) if is_path(p) => (Some(p.trim()).filter(|p| *p != "."), r),
        _ => (None, message),
    };
    let name = rest.split("field `").nth(1).and_then(|r| r.split('`').next()).filter(|n| !n.is_empty());
    let field = match (path, name) {
        (Some(p), Some(n)) if p == n || p.ends_with(&format!(".{n}")) => Some(p.to_string()),
        (Some(p), Some(n)) => Some(format!("{p}.{n}")),
        (None, Some(n)) => Some(n.to_string()),
        (p, None) => p.map(str::to_string),
    };
    (field, rest)
}

#[cfg(test)]
fn field_of(message: &str) -> Option<String> {
    split_field(message).0
}

fn is_path(p: &str) -> bool {
    !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']'))
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        let message = r.body_text();
        match r {
            JsonRejection::JsonDataError(_) => {
                let detail = message.trim_start_matches("Failed to deserialize the JSON body into the target type: ");
                let (field, rest) = split_field(detail);
                ApiError::invalid(field.unwrap_or_else(|| "body".into()), rest.to_string())
            }
            JsonRejection::BytesRejection(ref b) if b.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::PayloadTooLarge(super::BODY_LIMIT)
            }
            _ => ApiError::BadRequest { field: Some("body".into()), message },
        }
    }
}

/// A query string that parses but holds a bad value is invalid (422, naming the parameter); one that cannot
/// be read at all is a 400.
impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        let message = r.body_text();
        let detail = message.trim_start_matches("Failed to deserialize query string: ");
        match split_field(detail) {
            (Some(field), rest) => ApiError::invalid(field, rest.to_string()),
            (None, rest) => ApiError::BadRequest { field: Some("query".into()), message: rest.to_string() },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::billing::Month;
    use crate::validate::TeamId;
    use axum::extract::FromRequestParts;

    async fn path<T: serde::de::DeserializeOwned + Send + 'static>(route: &str, uri: &str) -> Result<T, ApiError> {
        // a router extracts through the real matcher, which is what fills the parameters in
        use tower::ServiceExt;
        let (tx, rx) = std::sync::mpsc::channel();
        let app = axum::Router::new().route(
            route,
            axum::routing::get(move |req: axum::extract::Request| {
                let tx = tx.clone();
                async move {
                    let (mut parts, _) = req.into_parts();
                    let _ = tx.send(ApiPath::<T>::from_request_parts(&mut parts, &()).await.map(|p| p.0));
                }
            }),
        );
        let req = axum::http::Request::get(uri).body(axum::body::Body::empty()).unwrap();
        app.oneshot(req).await.unwrap();
        rx.recv().unwrap()
    }

    fn field(e: ApiError) -> (u16, Option<String>) {
        let status = e.status().as_u16();
        match e {
            ApiError::Invalid(f) => (status, f.first().map(|f| f.field.clone())),
            ApiError::BadRequest { field, .. } => (status, field),
            _ => (status, None),
        }
    }

    #[tokio::test]
    async fn typed_paths_name_the_parameter() {
        let m: Month = path("/b/{month}", "/b/2026-11").await.unwrap();
        assert_eq!(m.to_string(), "2026-11");
        for bad in ["0000-01", "2101-01", "2026-13", "x"] {
            let e = path::<Month>("/b/{month}", &format!("/b/{bad}")).await.unwrap_err();
            assert_eq!(field(e), (422, Some("month".into())), "{bad}");
        }
        let (m, t): (Month, TeamId) = path("/b/{month}/t/{team}", "/b/2026-11/t/nlp").await.unwrap();
        assert_eq!((m.to_string(), t.as_str()), ("2026-11".into(), "nlp"));
        let e = path::<(Month, TeamId)>("/b/{month}/t/{team}", "/b/2026-11/t/NLP").await.unwrap_err();
        assert_eq!(field(e), (422, Some("team".into())));
        let e = path::<(Month, TeamId)>("/b/{month}/t/{team}", "/b/1999-12/t/NLP").await.unwrap_err();
        assert_eq!(field(e), (422, Some("month".into())), "the first parameter first");
    }

    #[test]
    fn finds_the_field() {
        assert_eq!(field_of("missing field `pue` at line 1 column 2").as_deref(), Some("pue"));
        assert_eq!(
            field_of("card_price: invalid type: string \"x\", expected a Decimal").as_deref(),
            Some("card_price")
        );
        assert_eq!(field_of("expected value at line 1 column 1"), None);
        assert_eq!(field_of("tco: missing field `pue` at line 1 column 9").as_deref(), Some("tco.pue"));
        // named once, not `extra.extra`, and the message does not repeat it
        assert_eq!(field_of("extra: unknown field `extra`, expected `a`").as_deref(), Some("extra"));
        assert_eq!(field_of("tco.x: unknown field `x`, expected `a`").as_deref(), Some("tco.x"));
        assert_eq!(super::split_field("rate: invalid type: string").1, "invalid type: string");
    }
}
