//! The versioned REST API `/api/v1` for billing systems and the portal: JSON in and out, OpenAPI documented,
//! bearer tokens with roles; Swagger UI served from the binary.

mod adjustments;
mod audit;
pub mod bearer;
mod bills;
mod budgets;
mod close_events;
pub mod doc;
pub mod error;
mod errors;
mod etag;
mod extract;
mod idempotency;
mod ingest;
mod nodes;
mod page;
pub mod probes;
mod quotas;
mod rates;
mod report_exports;
mod reports;
mod reservations;
mod teams;
mod unit_cost;
mod usage;
mod views;
mod waste;

use axum::Router;
use utoipa::openapi::OpenApi as OpenApiSpec;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

pub use extract::{ApiJson, ApiPath, ApiQuery};

use crate::usecase::state::AppState;
use crate::usecase::state::BODY_LIMIT;

#[derive(OpenApi)]
#[openapi(
    info(title = "cardhour", version = env!("CARGO_PKG_VERSION"),
        description = "GPU FinOps cost accounting: GPU-hours, rates, bills."),
    modifiers(&BearerAuth),
    // named by the shared declarations of `doc` (which utoipa does not follow) and by `GroupBy` parameters
    components(schemas(error::ErrorBody, views::GroupBy, crate::export::json_view::MonthView,
        crate::export::json_view::TeamStatementView,
        views::AuditEntry, crate::usecase::usage::UsageRow, crate::waste::IdlePod, views::Mapping)),
    tags(
        (name = "usage", description = "Stored GPU-hours"),
        (name = "teams", description = "Teams and namespace mappings"),
        (name = "bills", description = "Month statements, closing months"),
        (name = "rates", description = "Rates per card-hour: TCO, history, cloud references"),
        (name = "audit", description = "Who changed what"),
        (name = "waste", description = "The idle-waste list"),
        (name = "budgets", description = "Monthly budgets, forecasts and alerts"),
        (name = "ingest", description = "Ingest health: watermark, lag, kept hours, anomalies"),
        (name = "reports", description = "Low-utilization top N, monthly utilization, team ranking"),
        (name = "nodes", description = "Nodes a month marks (model unknown, cards not counted); assigning their settings"),
    )
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut OpenApiSpec) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    }
}

/// The `/api/v1` routes and utoipa's document of exactly them (see [`openapi_json`] for the one served).
pub fn api() -> (Router<AppState>, OpenApiSpec) {
    let v1 = OpenApiRouter::new()
        .merge(teams::router())
        .merge(rates::router())
        .merge(bills::router())
        .merge(usage::router())
        .merge(audit::router())
        .merge(waste::router())
        .merge(reports::router())
        .merge(unit_cost::router())
        .merge(quotas::router())
        .merge(reservations::router())
        .merge(close_events::router())
        .merge(adjustments::router())
        .merge(budgets::router())
        .merge(ingest::router())
        .merge(report_exports::router())
        .merge(nodes::router());
    OpenApiRouter::with_openapi(ApiDoc::openapi()).nest("/api/v1", v1).split_for_parts()
}

/// The OpenAPI document as committed in `openapi/openapi.json` and served at `/api/v1/openapi.json`: utoipa's,
/// with the input rules of `validate` written in.
pub fn openapi_json() -> String {
    let (_, spec) = api();
    serde_json::to_string_pretty(&doc::apply_rules(&spec)).unwrap_or_default() + "\n"
}

/// The JSON face: `/api/v1`, its spec, Swagger UI and the probes (the layers of the whole application, [`json_errors`]
/// among them, are [`crate::http::server`]'s).
pub fn routes(state: AppState) -> Router<AppState> {
    let (api, spec) = api();
    // the spec is never sent to an outside validator (Swagger UI's default would)
    let swagger = SwaggerUi::new("/swagger-ui")
        .external_url_unchecked("/api/v1/openapi.json", doc::apply_rules(&spec))
        .config(utoipa_swagger_ui::Config::default().validator_url("none"));
    api.layer(axum::middleware::from_fn_with_state(state, idempotency::layer))
        .merge(swagger)
        .route("/healthz", axum::routing::get(probes::healthz))
        .route("/readyz", axum::routing::get(probes::readyz))
}

/// Rewrites an error answer that is not JSON into the JSON error body: the outermost layer of the whole
/// application for the API's paths, so that the body limit's and the router's answers are JSON too.
pub async fn json_errors(req: axum::extract::Request, next: axum::middleware::Next) -> axum::response::Response {
    errors::json_errors(req, next).await
}

/// The JSON error body (as every error of the API carries) of an answer made outside the application: a request
/// the server could not read, a body that did not arrive in time.
pub fn error_body(status: axum::http::StatusCode, field: Option<&str>, message: &str) -> Vec<u8> {
    errors::error_body(status, field, message)
}

/// The answer to an unknown route under the API's paths.
pub async fn not_found(req: axum::extract::Request) -> axum::response::Response {
    axum::response::IntoResponse::into_response(errors::not_found(req).await)
}

/// Cancels a request that takes longer than `limit` (dropping its future rolls its transaction back).
pub async fn timeout(
    limit: std::time::Duration,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    errors::timeout(limit, req, next).await
}
