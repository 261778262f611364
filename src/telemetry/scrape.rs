//! The gauges read at every scrape, from Postgres and the process's pool: the watermark and its lag per cluster,
//! failed windows not made good, undelivered budget alerts, readiness. Read fresh each time (never kept in the
//! recorder), so every process — a server, any number of workers — tells the same figures, and a cluster that
//! is gone leaves no stale series. A slow database cannot hold a scrape: past [`DB_TIMEOUT`] the database's
//! families are left out and `cardhour_metrics_database_up` is 0.

use std::fmt::Write as _;
use std::time::Duration;

use chrono::Utc;
use sqlx::PgPool;

use super::{
    ALERTS_UNDELIVERED, BATCH_HOURS, CATALOGUE, DATABASE_UP, FAILED_WINDOWS, FAILING_HOURS, FAILURES_IN_ROW,
    LEASED_HOURS, MIGRATIONS_PENDING, POOL_CONNECTIONS, POOL_MAX, QUEUED_HOURS, READY, RECOVERED, WATERMARK,
    WATERMARK_LAG,
};
use crate::db;

/// The longest a scrape waits for the database (Prometheus' default scrape timeout is 10 s).
pub const DB_TIMEOUT: Duration = Duration::from_secs(2);

/// What the database says now.
struct DbFigures {
    pending_migrations: usize,
    watermarks: Vec<db::telemetry::Watermark>,
    failed_windows: Vec<(String, i64)>,
    undelivered: db::telemetry::Undelivered,
    queues: Vec<db::queue::QueueHealth>,
}

async fn read(pool: &PgPool) -> anyhow::Result<DbFigures> {
    let schema = db::schema_status(pool).await?;
    let mut conn = pool.acquire().await?;
    Ok(DbFigures {
        pending_migrations: schema.pending.len(),
        watermarks: db::telemetry::watermarks(&mut conn).await?,
        failed_windows: db::telemetry::open_failed_windows(&mut conn).await?,
        undelivered: db::telemetry::undelivered_alerts(&mut conn).await?,
        queues: db::queue::health(pool).await?,
    })
}

/// The scrape-time families in Prometheus' text format.
pub async fn render(pool: &PgPool) -> String {
    let mut out = Text::default();
    let figures = match tokio::time::timeout(DB_TIMEOUT, read(pool)).await {
        Ok(Ok(f)) => Some(f),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "metrics: the database's figures cannot be read");
            None
        }
        Err(_) => {
            tracing::warn!(timeout = ?DB_TIMEOUT, "metrics: the database did not answer in time");
            None
        }
    };
    let now = Utc::now();
    out.family(DATABASE_UP);
    out.sample(DATABASE_UP, &[], if figures.is_some() { 1.0 } else { 0.0 });
    out.family(READY);
    out.sample(READY, &[], if figures.as_ref().is_some_and(|f| f.pending_migrations == 0) { 1.0 } else { 0.0 });
    if let Some(f) = &figures {
        out.family(MIGRATIONS_PENDING);
        out.sample(MIGRATIONS_PENDING, &[], f.pending_migrations as f64);
        out.family(WATERMARK);
        for w in &f.watermarks {
            out.sample(WATERMARK, &[("cluster", &w.cluster)], w.complete_until.timestamp() as f64);
        }
        out.family(WATERMARK_LAG);
        for w in &f.watermarks {
            let lag = (now - w.complete_until).num_milliseconds() as f64 / 1000.0;
            out.sample(WATERMARK_LAG, &[("cluster", &w.cluster)], lag);
        }
        out.family(FAILED_WINDOWS);
        // every cluster with a watermark has a figure, 0 included, so an alert sees it drop back
        for w in &f.watermarks {
            let n = f.failed_windows.iter().find(|(c, _)| *c == w.cluster).map_or(0, |(_, n)| *n);
            out.sample(FAILED_WINDOWS, &[("cluster", &w.cluster)], n as f64);
        }
        for (c, n) in f.failed_windows.iter().filter(|(c, _)| !f.watermarks.iter().any(|w| w.cluster == *c)) {
            out.sample(FAILED_WINDOWS, &[("cluster", c)], *n as f64);
        }
        type QueueFigure = fn(&db::queue::QueueHealth) -> Option<f64>;
        let figures: [(&str, QueueFigure); 6] = [
            (QUEUED_HOURS, |q| Some(q.queued_hours as f64)),
            (LEASED_HOURS, |q| Some(q.leased_hours as f64)),
            (FAILING_HOURS, |q| Some(q.failing_hours as f64)),
            (FAILURES_IN_ROW, |q| Some(f64::from(q.failures_in_row))),
            (BATCH_HOURS, |q| q.batch_hours.map(f64::from)),
            (RECOVERED, |q| q.recovered_at.map(|t| t.timestamp_millis() as f64 / 1000.0)),
        ];
        for (name, value) in figures {
            out.family(name);
            for q in &f.queues {
                if let Some(v) = value(q) {
                    out.sample(name, &[("cluster", &q.cluster)], v);
                }
            }
        }
        out.family(ALERTS_UNDELIVERED);
        out.sample(ALERTS_UNDELIVERED, &[("attempted", "true")], f.undelivered.attempted as f64);
        out.sample(ALERTS_UNDELIVERED, &[("attempted", "false")], f.undelivered.not_attempted as f64);
    }
    let (size, idle) = (pool.size(), pool.num_idle() as u32);
    out.family(POOL_CONNECTIONS);
    out.sample(POOL_CONNECTIONS, &[("state", "idle")], f64::from(idle));
    out.sample(POOL_CONNECTIONS, &[("state", "in_use")], f64::from(size.saturating_sub(idle)));
    out.family(POOL_MAX);
    out.sample(POOL_MAX, &[], f64::from(pool.options().get_max_connections()));
    out.0
}

/// Prometheus' text exposition format (version 0.0.4), for the few families written here.
#[derive(Default)]
struct Text(String);

impl Text {
    fn family(&mut self, name: &str) {
        let f = CATALOGUE.iter().find(|f| f.name == name).expect("every family written is in the catalogue");
        let help = f.help.replace('\\', r"\\").replace('\n', r"\n");
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} gauge");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{}\"", escape(v))).collect();
            let _ = write!(self.0, "{{{}}}", pairs.join(","));
        }
        let _ = writeln!(self.0, " {value}");
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', r"\\").replace('"', "\\\"").replace('\n', r"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_written_as_the_text_format_says() {
        let mut t = Text::default();
        t.family(WATERMARK_LAG);
        t.sample(WATERMARK_LAG, &[("cluster", "a\"b\\c\nd")], 1.5);
        t.sample(READY, &[], 1.0);
        let lines: Vec<&str> = t.0.lines().collect();
        assert!(lines[0].starts_with("# HELP cardhour_ingest_watermark_lag_seconds Seconds"));
        assert_eq!(lines[1], "# TYPE cardhour_ingest_watermark_lag_seconds gauge");
        assert_eq!(lines[2], r#"cardhour_ingest_watermark_lag_seconds{cluster="a\"b\\c\nd"} 1.5"#);
        assert_eq!(lines[3], "cardhour_ready 1");
    }
}
