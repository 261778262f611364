//! `/close-endpoints` and `/close-events`: where the signed close event goes (finance configures it), and every
//! event recorded with its deliveries and each POST of them (SPEC §11).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::{ReaderErrors, WriterErrors};
use super::error::ApiError;
use super::extract::ApiJson;
use super::{ApiPath, ApiQuery, AppState};
use crate::api::bearer::{Finance, GlobalReader};
use crate::usecase::close_events::{self, EndpointInput, EndpointView, EventView};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_endpoints, create_endpoint))
        .routes(routes!(deactivate_endpoint))
        .routes(routes!(list_events))
}

/// Every close-event endpoint, the newest first, secrets masked (global readers).
#[utoipa::path(get, path = "/close-endpoints", tag = "bills", security(("bearer" = [])),
    responses((status = 200, description = "Every endpoint, its secret masked", body = Vec<EndpointView>), ReaderErrors))]
async fn list_endpoints(
    State(s): State<AppState>,
    GlobalReader(reader): GlobalReader,
) -> Result<Json<Vec<EndpointView>>, ApiError> {
    Ok(Json(close_events::endpoints(&s.cases, &reader.scope()).await?))
}

/// Adds an endpoint every later close POSTs its signed event to (finance, admin): `X-Cardhour-Signature:
/// sha256=<hex HMAC-SHA256(secret, body)>`, `X-Cardhour-Event-Id` and `Idempotency-Key` the event's id; retried
/// with backoff (30 s doubling, at most 1 h) until a 2xx. The secret is never answered again but masked. Audited.
#[utoipa::path(post, path = "/close-endpoints", tag = "bills", security(("bearer" = [])),
    request_body = EndpointInput,
    responses((status = 201, description = "The endpoint as stored, its secret masked", body = EndpointView), ReaderErrors, WriterErrors))]
async fn create_endpoint(
    State(s): State<AppState>,
    Finance(writer): Finance,
    ApiJson(input): ApiJson<EndpointInput>,
) -> Result<(StatusCode, Json<EndpointView>), ApiError> {
    Ok((StatusCode::CREATED, Json(close_events::create(&s.cases, &writer, &input).await?)))
}

/// Deactivates an endpoint (finance, admin): no later close's event goes to it, and its deliveries not yet
/// acknowledged are not sent. Deactivating an inactive endpoint changes nothing. Audited.
#[utoipa::path(post, path = "/close-endpoints/{id}/deactivate", tag = "bills", security(("bearer" = [])),
    params(("id" = i64, Path, description = "endpoint id")),
    responses((status = 200, description = "The endpoint, inactive", body = EndpointView), ReaderErrors, WriterErrors))]
async fn deactivate_endpoint(
    State(s): State<AppState>,
    Finance(writer): Finance,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<EndpointView>, ApiError> {
    Ok(Json(close_events::deactivate(&s.cases, &writer, id).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// At most this many events, the newest first (1–1000, default 100, as every `limit` of the API).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
}

/// The close events recorded, the newest first: each body exactly as POSTed, its deliveries (state, attempts,
/// last answer, next try) and every POST of them (global readers).
#[utoipa::path(get, path = "/close-events", tag = "bills", security(("bearer" = [])), params(EventsQuery),
    responses((status = 200, description = "The latest close events with their deliveries and attempts", body = Vec<EventView>), ReaderErrors))]
async fn list_events(
    State(s): State<AppState>,
    GlobalReader(reader): GlobalReader,
    ApiQuery(q): ApiQuery<EventsQuery>,
) -> Result<Json<Vec<EventView>>, ApiError> {
    let limit = crate::validate::bounded(
        "limit",
        q.limit.unwrap_or(crate::validate::PAGE_DEFAULT),
        1,
        crate::validate::PAGE_MAX,
    )?;
    Ok(Json(close_events::events(&s.cases, &reader.scope(), limit).await?))
}
