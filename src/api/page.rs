//! Cursor pagination of the lists that grow without bound: `limit` rows after an opaque `after` cursor (the
//! base64url JSON of the last row's sort key) in a total order on a unique key, and `Link: <…>; rel="next"` while
//! there is more. Keyset, not offset: a row added while a client walks the pages shifts no page, so every row
//! that existed when the walk began comes exactly once.

use axum::http::header::LINK;
use axum::http::{HeaderMap, HeaderValue, Uri};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::validate;

/// What a cursor looks like (base64url without padding); which ones are this list's, only the server knows.
pub const CURSOR_PATTERN: &str = "^[A-Za-z0-9_-]+$";

/// `limit` and `after` of a paged request, checked.
#[derive(Debug, Clone)]
pub struct PageRequest<K> {
    pub limit: usize,
    pub after: Option<K>,
}

impl<K: DeserializeOwned> PageRequest<K> {
    /// `limit` within 1 ..= [`validate::PAGE_MAX`] (default [`validate::PAGE_DEFAULT`]); `after` a cursor this
    /// server made for this list, else a 422 naming it.
    pub fn parse(limit: Option<i64>, after: Option<&str>) -> Result<Self, ApiError> {
        let limit = validate::bounded("limit", limit.unwrap_or(validate::PAGE_DEFAULT), 1, validate::PAGE_MAX)?;
        let after = after
            .map(|c| {
                URL_SAFE_NO_PAD
                    .decode(c)
                    .ok()
                    .and_then(|bytes| serde_json::from_slice::<K>(&bytes).ok())
                    .ok_or_else(|| ApiError::invalid("after", "not a cursor of this list (take it from `Link`)"))
            })
            .transpose()?;
        Ok(PageRequest { limit: limit as usize, after })
    }
}

/// The opaque cursor of a sort key.
pub fn cursor<K: Serialize>(key: &K) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(key).unwrap_or_default())
}

/// One page of `rows` in the order of `key` (which must be unique per row): the rows after the cursor, at most
/// `limit`, and the cursor of the next page when more follow.
pub fn page<T, K: Ord + Serialize>(
    mut rows: Vec<T>,
    key: impl Fn(&T) -> K,
    req: &PageRequest<K>,
) -> (Vec<T>, Option<String>) {
    rows.sort_by_cached_key(|r| key(r));
    let mut rest: Vec<T> = match &req.after {
        Some(after) => rows.into_iter().filter(|r| key(r) > *after).collect(),
        None => rows,
    };
    let more = rest.len() > req.limit;
    rest.truncate(req.limit);
    let next = if more { rest.last().map(|r| cursor(&key(r))) } else { None };
    (rest, next)
}

/// The `Link` header naming the next page: the request's own URI with `after` (and `pinned` parameters, such as a
/// window's resolved end) set, every other parameter kept.
pub fn link(uri: &Uri, next: Option<&str>, pinned: &[(&str, String)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    let Some(next) = next else { return headers };
    let replaced = |k: &str| k == "after" || pinned.iter().any(|(p, _)| *p == k);
    let kept: Vec<(String, String)> = url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .filter(|(k, _)| !replaced(k))
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let mut query = url::form_urlencoded::Serializer::new(String::new());
    query.extend_pairs(kept);
    query.extend_pairs(pinned.iter().map(|(k, v)| (*k, v.as_str())));
    query.append_pair("after", next);
    if let Ok(v) = HeaderValue::from_str(&format!("<{}?{}>; rel=\"next\"", uri.path(), query.finish())) {
        headers.insert(LINK, v);
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_walk_every_row_once_in_key_order() {
        let rows: Vec<u32> = vec![5, 3, 9, 1, 7];
        let mut req = PageRequest::<u32>::parse(Some(2), None).unwrap();
        let mut seen = Vec::new();
        loop {
            let (rows, next) = page(rows.clone(), |r| *r, &req);
            seen.extend(rows);
            let Some(c) = next else { break };
            req = PageRequest::parse(Some(2), Some(&c)).unwrap();
        }
        assert_eq!(seen, [1, 3, 5, 7, 9]);
        assert!(PageRequest::<u32>::parse(Some(0), None).is_err());
        assert!(PageRequest::<u32>::parse(Some(validate::PAGE_MAX + 1), None).is_err());
        assert!(PageRequest::<u32>::parse(None, Some("not a cursor")).is_err());
    }

    #[test]
    fn link_keeps_the_query_and_sets_after() {
        let uri: Uri = "/api/v1/usage?from=a&after=old&limit=2&to=b".parse().unwrap();
        let h = link(&uri, Some("Ng"), &[("to", "c".into())]);
        assert_eq!(h[LINK], "</api/v1/usage?from=a&limit=2&to=c&after=Ng>; rel=\"next\"");
        assert!(link(&uri, None, &[]).is_empty());
    }
}
