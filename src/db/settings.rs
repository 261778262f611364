//! Settings shared by SQL and the application (the billing time zone).

use sqlx::PgPool;

/// The billing time zone; months, rate dates and mapping dates are in it.
pub async fn billing_tz(pool: &PgPool) -> Result<chrono_tz::Tz, sqlx::Error> {
    let name = sqlx::query_scalar!("SELECT value FROM settings WHERE key = 'billing_timezone'")
        .fetch_optional(pool)
        .await?
        .unwrap_or_else(|| "Asia/Shanghai".into());
    name.parse().map_err(|_| sqlx::Error::Protocol(format!("settings.billing_timezone `{name}` is not a time zone")))
}
