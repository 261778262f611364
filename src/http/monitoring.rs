//! The worker's monitoring port: `/metrics` ([`crate::telemetry`]) and the probes ([`crate::api::probes`]) on a
//! listener of its own, for a process that serves no API.

use sqlx::PgPool;

/// The worker's monitoring port (`--metrics-listen`): `/metrics` and the probes `cardhour serve` has, with the
/// request durations recorded, until `stop` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    pool: PgPool,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::routing::get;
    let app = axum::Router::new()
        .route("/metrics", get(crate::telemetry::metrics_handler))
        .route("/healthz", get(crate::api::probes::healthz))
        .route("/readyz", get(crate::api::probes::readyz))
        .fallback(|| async { axum::http::StatusCode::NOT_FOUND })
        .layer(axum::middleware::from_fn(crate::telemetry::http::record))
        .with_state(pool);
    axum::serve(listener, app).with_graceful_shutdown(stop).await
}
