//! `Idempotency-Key` on POSTs: the same key with the same request replays the first answer (status and body)
//! without writing again; the same key with another request is a 422 naming the header; a key whose first
//! request is still running is a 409. Keys are per caller (its token's digest) and expire after a day. The caller
//! is authenticated before anything is claimed or replayed: a revoked or expired token gets its 401, never a
//! stored answer.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::AppState;
use super::error::ApiError;
use crate::api::bearer::{AuthRejection, bearer_token};
use crate::auth::hash_token;
use crate::db;

pub const HEADER: &str = "Idempotency-Key";
const TTL_SECS: i64 = 24 * 3600;
/// A claim unanswered this long belongs to a request that died (longer than the request timeout).
const STALE_SECS: i64 = 600;

/// The caller a key belongs to: its token's digest.
fn bearer(req: &Request) -> Option<String> {
    bearer_token(req.headers()).ok().map(hash_token)
}

/// What makes two requests the same: method, path and query, content type and body.
fn fingerprint(req: &axum::http::request::Parts, body: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(req.method.as_str());
    h.update([0u8]);
    h.update(req.uri.path_and_query().map_or("", |p| p.as_str()));
    h.update([0u8]);
    h.update(req.headers.get(header::CONTENT_TYPE).map_or(&b""[..], HeaderValue::as_bytes));
    h.update([0u8]);
    h.update(body);
    crate::digest::hex(&h.finalize())
}

fn valid_key(v: &HeaderValue) -> Option<&str> {
    let s = v.to_str().ok()?;
    (!s.is_empty() && s.len() <= 255 && s.bytes().all(|b| b.is_ascii_graphic())).then_some(s)
}

/// Answers worth replaying: not the ones a retry could change (authentication, server errors, timeouts).
fn keep(status: StatusCode) -> bool {
    !(status.is_server_error()
        || matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN | StatusCode::REQUEST_TIMEOUT))
}

pub async fn layer(State(s): State<AppState>, req: Request, next: Next) -> Response {
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let Some(raw) = req.headers().get(HEADER).cloned() else { return next.run(req).await };
    let Some(key) = valid_key(&raw).map(str::to_string) else {
        return ApiError::invalid(HEADER, "must be 1 to 255 visible ASCII characters").into_response();
    };
    // without a token the request is refused anyway; nothing to remember
    let Some(caller) = bearer(&req) else { return next.run(req).await };
    // a stored answer is the caller's: only a caller who still is one gets it (the handler's extractor checks the
    // role as for any request)
    match db::tokens::find_active(&s.pool, &caller).await {
        Ok(Some(_)) => {}
        Ok(None) => return AuthRejection::InvalidToken.into_response(),
        Err(e) => return ApiError::from(e).into_response(),
    }
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, super::BODY_LIMIT).await {
        Ok(b) => b,
        Err(_) => return ApiError::PayloadTooLarge(super::BODY_LIMIT).into_response(),
    };
    let fp = fingerprint(&parts, &body);
    match db::idempotency::claim(&s.pool, &caller, &key, &fp, TTL_SECS, STALE_SECS).await {
        Err(e) => return ApiError::from(e).into_response(),
        Ok(Some(stored)) if stored.fingerprint != fp => {
            return ApiError::invalid(HEADER, "was used already for a different request").into_response();
        }
        Ok(Some(db::idempotency::Stored { status: Some(status), content_type, body, .. })) => {
            let mut resp = Response::new(Body::from(body.unwrap_or_default()));
            *resp.status_mut() = StatusCode::from_u16(status as u16).unwrap_or(StatusCode::OK);
            if let Some(ct) = content_type.and_then(|c| HeaderValue::from_str(&c).ok()) {
                resp.headers_mut().insert(header::CONTENT_TYPE, ct);
            }
            resp.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
            return resp;
        }
        Ok(Some(_)) => {
            return ApiError::Conflict {
                field: Some(HEADER.into()),
                message: "the first request with this key is still being answered; retry later".into(),
            }
            .into_response();
        }
        Ok(None) => {}
    }
    let resp = next.run(Request::from_parts(parts, Body::from(body))).await;
    let status = resp.status();
    if !keep(status) {
        if let Err(e) = db::idempotency::release(&s.pool, &caller, &key).await {
            tracing::error!(error = ?e, "cannot release an idempotency key");
        }
        return resp;
    }
    let (rparts, rbody) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(rbody, 64 * 1024 * 1024).await else {
        let _ = db::idempotency::release(&s.pool, &caller, &key).await;
        return ApiError::Internal(anyhow::anyhow!("cannot buffer an answer to store")).into_response();
    };
    let ct = rparts.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
    if let Err(e) = db::idempotency::answer(&s.pool, &caller, &key, status.as_u16() as i16, ct, &bytes).await {
        // the write is done; the caller gets its answer, a retry with the key would wait for the stale claim
        tracing::error!(error = ?e, "cannot store an idempotent answer");
    }
    Response::from_parts(rparts, Body::from(bytes))
}
