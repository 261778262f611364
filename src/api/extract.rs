//! JSON and query-string extractors whose rejections are [`ApiError`]s naming the field.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts};

use crate::error::ApiError;

/// `axum::Json` with JSON errors: a missing or mistyped field is a 422 naming it.
#[derive(Debug, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

/// `axum::extract::Query` with JSON errors naming the parameter.
#[derive(Debug, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// serde names the culprit in backticks: "missing field `pue`", "unknown variant `x`, expected …".
fn field_of(message: &str) -> Option<String> {
    // axum prefixes the JSON path of the value that failed: "tco: missing field `pue`" → "tco.pue"
    let (path, rest) = match message.split_once(": ") {
        Some((p, r)) if is_path(p) => (Some(p.trim()), r),
        _ => (None, message),
    };
    if let Some(name) = rest.split("field `").nth(1).and_then(|r| r.split('`').next()) {
        return Some(path.map_or_else(|| name.to_string(), |p| format!("{p}.{name}")));
    }
    path.map(str::to_string)
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
                ApiError::invalid(field_of(detail).unwrap_or_else(|| "body".into()), detail.to_string())
            }
            _ => ApiError::BadRequest { field: Some("body".into()), message },
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        let message = r.body_text();
        let detail = message.trim_start_matches("Failed to deserialize query string: ").to_string();
        ApiError::BadRequest { field: Some(field_of(&detail).unwrap_or_else(|| "query".into())), message: detail }
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
    }
}
