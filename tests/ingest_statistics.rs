//! Statistics after large backfills: the tables (or month partitions) a backfill grew past a fifth of their size
//! are analyzed by the ingest itself, before autovacuum would get to them.

use std::time::{Duration, Instant};

use cardhour::metering::{ContainerKey, HourOutput, UsageRow, UtilSource};
use chrono::{DateTime, Utc};
use sqlx::PgPool;

fn row(i: usize) -> UsageRow {
    UsageRow {
        key: ContainerKey { namespace: format!("ns{}", i % 50), pod: format!("pod-{i}"), container: "main".into() },
        resource: "nvidia_com_gpu".into(),
        kind: "whole",
        gpu_model: "NVIDIA A100-SXM4-80GB".into(),
        mig_profile: None,
        node: format!("node-{}", i % 100),
        units: 1.0,
        fraction: 1.0,
        memory_share: Some(1.0),
        gpu_seconds: 3600.0,
        effective_gpu_seconds: 1800.0,
        unmetered_gpu_seconds: 0.0,
        util_source: UtilSource::SmActive,
        peak_fb_used_mib: None,
        label_team: None,
        bridged_gpu_seconds: 0.0,
    }
}

#[sqlx::test]
async fn a_table_a_backfill_grew_is_analyzed_and_one_that_barely_changed_is_not(pool: PgPool) {
    sqlx::query("INSERT INTO clusters (name, prometheus_url) VALUES ('c1', 'http://127.0.0.1:9')")
        .execute(&pool)
        .await
        .unwrap();
    let hour: DateTime<Utc> = "2026-06-01T00:00:00Z".parse().unwrap();
    let out = HourOutput { rows: (0..30_000).map(row).collect(), interval_ms: Some(60_000), ..HourOutput::default() };
    let mut tx = pool.begin().await.unwrap();
    cardhour::db::usage::replace_hour(&mut tx, "c1", hour, &out).await.unwrap();
    tx.commit().await.unwrap();

    // the server counts changes a moment after the commit: ask until the grown tables show
    let deadline = Instant::now() + Duration::from_secs(30);
    let analyzed = loop {
        let analyzed = cardhour::db::usage::analyze_stale(&pool, 10_000).await.unwrap();
        if !analyzed.is_empty() || Instant::now() > deadline {
            break analyzed;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(analyzed.iter().any(|t| t.starts_with("gpu_usage_hourly")), "{analyzed:?}");
    // 30,000 usage rows, but only 50 namespaces × 1 hour in the rollup: under the floor, left to autovacuum
    assert!(!analyzed.iter().any(|t| t.starts_with("usage_namespace_hourly")), "{analyzed:?}");
    let (live, analyzed_at): (f64, Option<DateTime<Utc>>) = sqlx::query_as(
        "SELECT c.reltuples::float8, s.last_analyze FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
         WHERE s.relid::regclass::text = $1",
    )
    .bind(&analyzed[0])
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(analyzed_at.is_some(), "{} analyzed", analyzed[0]);
    assert!(live >= 29_000.0, "the planner now sees the rows: reltuples {live}");
    // analyzed once: nothing is stale right after
    assert!(cardhour::db::usage::analyze_stale(&pool, 10_000).await.unwrap().is_empty());
}
