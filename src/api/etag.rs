//! Conditional GETs of the statement representations (month and team JSON, CSV, PDF): each answers with a strong
//! `ETag`, the sha256 of its body bytes, so every representation has its own; `If-None-Match` naming it (or `*`)
//! is a 304 without a body. A closed month never changes: clients may keep it a year without asking again. An open
//! one must be revalidated on every use. The answers depend on the caller's token (a team lead sees its own teams),
//! hence `private` and `Vary: Authorization`.

use axum::body::Body;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, ETAG, VARY};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use headers::{ETag, HeaderMapExt, IfNoneMatch};

/// `Cache-Control` of a closed month's representations.
pub const CLOSED: &str = "private, max-age=31536000, immutable";
/// `Cache-Control` of an open month's.
pub const OPEN: &str = "private, no-cache";

/// The strong entity tag of `body`: `"<sha256 hex>"`.
pub fn tag(body: &[u8]) -> String {
    format!("\"{}\"", crate::digest::sha256_hex(body))
}

/// Whether `If-None-Match` (every such header, RFC 9110 §13.1.2, read by `headers::IfNoneMatch`) names `etag` or
/// is `*`. The comparison is the weak one the RFC prescribes for this header: `W/"x"` matches `"x"`.
pub fn none_match(headers: &HeaderMap, etag: &str) -> bool {
    let Ok(etag) = etag.parse::<ETag>() else { return false };
    headers.typed_get::<IfNoneMatch>().is_some_and(|h| !h.precondition_passes(&etag))
}

/// The answer of a statement representation: 200 with `body`, or 304 when the request's `If-None-Match` names it;
/// either way with its `ETag` and `Cache-Control`. `extra` headers (e.g. `Content-Disposition`) go on a 200 only.
pub fn respond(
    request: &HeaderMap,
    closed: bool,
    content_type: HeaderValue,
    extra: &[(HeaderName, HeaderValue)],
    body: Vec<u8>,
) -> Response {
    let etag = tag(&body);
    let mut headers = HeaderMap::new();
    // hex in quotes: always a valid header value
    headers.insert(ETAG, HeaderValue::from_str(&etag).expect("a quoted hex string"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static(if closed { CLOSED } else { OPEN }));
    headers.insert(VARY, HeaderValue::from_static("authorization"));
    if none_match(request, &etag) {
        return (StatusCode::NOT_MODIFIED, headers, Body::empty()).into_response();
    }
    headers.insert(CONTENT_TYPE, content_type);
    for (name, value) in extra {
        headers.insert(name.clone(), value.clone());
    }
    (StatusCode::OK, headers, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header::IF_NONE_MATCH;

    fn one(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(IF_NONE_MATCH, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn if_none_match_lists() {
        let etag = tag(b"x");
        assert_eq!(etag, "\"2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881\"");
        for yes in
            [etag.clone(), format!("W/{etag}"), format!("\"a\", {etag}"), format!("\"a,b\",W/{etag} "), "*".into()]
        {
            assert!(none_match(&one(&yes), &etag), "{yes}");
        }
        let stale = tag(b"y");
        for no in [
            stale.clone(),
            String::new(),
            etag.trim_matches('"').to_string(),
            format!("{stale}, \"{etag}"),
            "\"".into(),
        ] {
            assert!(!none_match(&one(&no), &etag), "{no}");
        }
        let mut h = HeaderMap::new();
        h.append(IF_NONE_MATCH, HeaderValue::from_str(&stale).unwrap());
        assert!(!none_match(&h, &etag));
        h.append(IF_NONE_MATCH, HeaderValue::from_str(&etag).unwrap());
        assert!(none_match(&h, &etag), "a second header counts too");
    }

    #[test]
    fn not_modified_has_no_body_and_the_same_validators() {
        let body = b"{\"a\":1}".to_vec();
        let ok = respond(&HeaderMap::new(), true, HeaderValue::from_static("application/json"), &[], body.clone());
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(ok.headers()[CACHE_CONTROL], CLOSED);
        let etag = ok.headers()[ETAG].clone();
        let mut req = HeaderMap::new();
        req.insert(IF_NONE_MATCH, etag.clone());
        let not = respond(&req, false, HeaderValue::from_static("application/json"), &[], body);
        assert_eq!(not.status(), StatusCode::NOT_MODIFIED);
        assert_eq!((not.headers()[ETAG].clone(), not.headers()[CACHE_CONTROL].clone()), (etag, OPEN.parse().unwrap()));
        assert!(not.headers().get(CONTENT_TYPE).is_none());
    }
}
