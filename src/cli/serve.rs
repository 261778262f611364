//! `serve`: the REST API (and Swagger UI) and the portal's pages until a signal, then the requests in flight.

use anyhow::Context;

use super::ServeArgs;
use crate::db;

pub(super) async fn serve_cmd(a: ServeArgs) -> anyhow::Result<()> {
    // a configuration mistake is said before anything is connected
    let sso = a.proxy.config().map_err(anyhow::Error::msg)?;
    let pool = a.db.connect(16).await.context("cannot connect to the database")?;
    let billing_tz = db::settings::billing_tz(&pool).await.context("reading settings (run `cardhour migrate`)")?;
    let portal = crate::auth::PortalConfig {
        session: crate::auth::session::SessionConfig { secure: a.secure_cookies, idle: a.session_idle },
    };
    let mut state = crate::usecase::state::AppState::new(pool.clone(), billing_tz).with_portal(portal);
    if let Some(sso) = sso {
        tracing::info!(
            trusted = ?sso.trusted.iter().map(ToString::to_string).collect::<Vec<_>>(),
            user_header = %sso.user_header,
            groups_header = %sso.groups_header,
            "SSO mode: the pages' users come from the proxy's headers"
        );
        state = state.with_sso(sso);
    }
    let app = crate::http::server::app(state);
    // expired sessions are never loaded; this only keeps their table small
    tokio::spawn(db::sessions::delete_expired_every(pool.clone(), std::time::Duration::from_secs(600)));
    // the close events due (retries whose time came; a close delivers its own at once)
    tokio::spawn(crate::usecase::close_events::deliver_every(pool, std::time::Duration::from_secs(60)));
    let listener =
        tokio::net::TcpListener::bind(a.listen).await.with_context(|| format!("cannot listen on {}", a.listen))?;
    // PDF statements need the CJK font: say so at start-up rather than on finance's first download
    match crate::export::FontChain::installed() {
        Ok(fonts) => tracing::info!(fonts = %fonts.describe(), "PDF statements are set in"),
        Err(e) => tracing::error!("{e}; PDF exports will fail until it is installed"),
    }
    tracing::info!("serving on http://{} (Swagger UI at /swagger-ui)", a.listen);
    let stop = crate::shutdown::on_signals("the server", a.shutdown_grace);
    // stops accepting at once, then waits for the requests in flight; each request knows its peer's address (the
    // login throttle counts per address, SSO trusts only proxy addresses); slow clients are cut off
    let limits = crate::http::server::ClientLimits { header_timeout: a.header_timeout, body_timeout: a.body_timeout };
    crate::http::server::serve(listener, app, limits, async move { stop.requested().await }).await?;
    tracing::info!("server stopped");
    Ok(())
}
