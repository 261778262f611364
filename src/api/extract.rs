//! JSON and query-string extractors whose rejections are [`ApiError`]s naming the field.

use axum::extract::rejection::{JsonRejection, QueryRejection};
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
    use super::field_of;

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
