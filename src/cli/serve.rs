//! `serve`: the REST API (and Swagger UI) until a signal, then the requests in flight.

use anyhow::Context;

use super::ServeArgs;
use crate::db;

pub(super) async fn serve_cmd(a: ServeArgs) -> anyhow::Result<()> {
    let pool = a.db.connect(16).await.context("cannot connect to the database")?;
    let billing_tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
    let app = crate::server::app(crate::state::AppState::new(pool, billing_tz));
    let listener =
        tokio::net::TcpListener::bind(a.listen).await.with_context(|| format!("cannot listen on {}", a.listen))?;
    // PDF statements need the CJK font: say so at start-up rather than on finance's first download
    match crate::export::FontChain::installed() {
        Ok(fonts) => tracing::info!(fonts = %fonts.describe(), "PDF statements are set in"),
        Err(e) => tracing::error!("{e}; PDF exports will fail until it is installed"),
    }
    tracing::info!("serving on http://{} (Swagger UI at /swagger-ui)", a.listen);
    let stop = crate::shutdown::on_signals("the server", a.shutdown_grace);
    // stops accepting at once, then waits for the requests in flight
    axum::serve(listener, app).with_graceful_shutdown(async move { stop.requested().await }).await?;
    tracing::info!("server stopped");
    Ok(())
}
