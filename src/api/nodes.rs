//! `/nodes`: the nodes a month's data marks (a GPU model nothing names, cards not counted), what assigning a
//! node's model, cards or replicas will move (GPU-hours and ¥ per team) — computed before saving — and saving it
//! (finance, admin; audited). What `cardhour nodes` does, without the command line.

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::doc::{PolicyConflict, ReaderErrors, WriterErrors};
use super::error::ApiError;
use super::{ApiJson, ApiPath, ApiQuery, AppState};
use crate::api::bearer::{Finance, GlobalReader};
use crate::billing::Month;
use crate::usecase::nodes::{self, MarkedNode, NodePreview, NodeSettingsView};
use crate::validate;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(marked_nodes)).routes(routes!(preview_node)).routes(routes!(set_node))
}

/// The nodes a month's data marks: `unknown_gpu_model` (its cards billed at nothing), `unverified_node` and
/// `default_replicas` (cards not counted, taken at face value or by a default) — with the hours marked, the
/// GPU-hours held and the capacity on each, and what configuration says of it now (global readers).
#[utoipa::path(get, path = "/nodes/marked/{month}", tag = "nodes", security(("bearer" = [])),
    params(("month" = String, Path, description = "YYYY-MM")),
    responses((status = 200, description = "The month's marked nodes", body = Vec<MarkedNode>), ReaderErrors))]
async fn marked_nodes(
    State(s): State<AppState>,
    GlobalReader(reader): GlobalReader,
    ApiPath(month): ApiPath<Month>,
) -> Result<Json<Vec<MarkedNode>>, ApiError> {
    Ok(Json(nodes::marked(&s.cases, &reader.scope(), month).await?))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PreviewQuery {
    /// The month whose figures move (YYYY-MM).
    #[param(value_type = String)]
    pub month: Month,
    /// An open month's draft under this bill mode (default: the configured one); a closed month only its own.
    pub mode: Option<String>,
    /// An open month's draft under this unallocated policy (default: the configured one); a closed month only its own.
    pub unallocated: Option<String>,
}

/// What setting a node's model, cards or replicas (the body, as it would be saved) will move in a month once its
/// hours are metered again: per team the GPU-hours and the total before and after, the capacity card-hours and
/// cost, the unallocated and platform-kept amounts. Nothing is saved (global readers). A closed month's moves
/// become restatements on the next open month.
#[utoipa::path(post, path = "/nodes/{cluster}/{node}/preview", tag = "nodes", security(("bearer" = [])),
    params(("cluster" = String, Path, description = "cluster"), ("node" = String, Path, description = "node name"), PreviewQuery),
    request_body = NodeSettingsView,
    responses((status = 200, description = "What the change will move", body = NodePreview), ReaderErrors, PolicyConflict))]
async fn preview_node(
    State(s): State<AppState>,
    GlobalReader(reader): GlobalReader,
    Path((cluster, node)): Path<(String, String)>,
    ApiQuery(q): ApiQuery<PreviewQuery>,
    ApiJson(body): ApiJson<NodeSettingsView>,
) -> Result<Json<NodePreview>, ApiError> {
    let month = q.month;
    let choice = validate::policy_choice(q.mode.as_deref(), q.unallocated.as_deref(), None)?;
    Ok(Json(nodes::preview(&s.cases, &reader.scope(), month, choice, &cluster, &node, &body).await?))
}

/// Sets a node's cards, replicas, GPU model or sharing (fields left out are cleared; none at all removes the
/// settings) — finance, admin; audited (`node.settings`, before and after). The node's hours take them when
/// metered again; look at `preview` first.
#[utoipa::path(put, path = "/nodes/{cluster}/{node}", tag = "nodes", security(("bearer" = [])),
    params(("cluster" = String, Path, description = "cluster"), ("node" = String, Path, description = "node name")),
    request_body = NodeSettingsView,
    responses((status = 200, description = "The node's settings as saved", body = NodeSettingsView), ReaderErrors, WriterErrors))]
async fn set_node(
    State(s): State<AppState>,
    Finance(writer): Finance,
    Path((cluster, node)): Path<(String, String)>,
    ApiJson(body): ApiJson<NodeSettingsView>,
) -> Result<Json<NodeSettingsView>, ApiError> {
    Ok(Json(nodes::assign(&s.cases, &writer, &cluster, &node, &body).await?))
}
