//! Storage that grows for years (issue 11), on a real Postgres: the hourly tables and the big rollups are
//! partitioned by month (migrations/20261210000100_month_partitions.sql) — rows land in their month's partition,
//! a month's read touches only its partitions, existing rows survive the conversion unchanged — and
//! `cardhour retention` drops the raw hourly rows of closed, old months only: every closed bill is then served
//! byte for byte as before, every rollup row is kept, an open month is never touched, and what could rebuild a
//! rollup from the dropped rows is refused.
//!
//! Ground truth: the months of `common::months` (Shanghai billing months; hours by UTC). With `--now` on
//! 2026-12-04 and September and October closed, `--keep-months 0` makes November the first month to keep; its
//! first hour is 2026-10-31T16:00Z, so UTC October's partition (which holds November's first 8 hours) is kept
//! and only UTC September's is dropped: its 3 hours × 2 containers = 6 rows.

use crate::common;

use std::borrow::Cow;

use common::api::TestApi;
use common::months::{self, KEPT};
use common::{run_cardhour, run_cardhour_ok};
use sqlx::PgPool;

/// The partition each row of `table` sits in, by its key (`hour`, as UTC text, or `day`): (key, partition).
async fn partitions_of(pool: &PgPool, table: &str, key: &str) -> Vec<(String, String)> {
    let key = if key == "hour" { "to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI')" } else { "day::text" };
    sqlx::query_as(&format!("SELECT DISTINCT {key}, tableoid::regclass::text FROM {table} ORDER BY 1"))
        .fetch_all(pool)
        .await
        .unwrap()
}

/// Rows written by the ingest land in their UTC month's partition (the hourly tables) or their day's month (the
/// daily rollups), never in a DEFAULT partition; a month's query plans only its month's partitions.
#[sqlx::test]
async fn rows_land_in_their_months_partition_and_reads_prune(pool: PgPool) {
    months::store(&pool, "2026-10-31T22:00:00Z", 4, 2.0).await.unwrap(); // 22:00 Oct 31 → 01:00 Nov 1 UTC
    let got = partitions_of(&pool, "gpu_usage_hourly", "hour").await;
    let want: Vec<(String, String)> = [
        ("2026-10-31 22:00", "gpu_usage_hourly_p2026_10"),
        ("2026-10-31 23:00", "gpu_usage_hourly_p2026_10"),
        ("2026-11-01 00:00", "gpu_usage_hourly_p2026_11"),
        ("2026-11-01 01:00", "gpu_usage_hourly_p2026_11"),
    ]
    .map(|(h, p)| (h.to_string(), p.to_string()))
    .to_vec();
    assert_eq!(got, want);
    // Shanghai billing days: 10-31 22:00Z is 11-01 06:00 there; the pod rollup is by UTC day
    let ns_days = partitions_of(&pool, "usage_namespace_daily", "day").await;
    assert_eq!(ns_days, [("2026-11-01".to_string(), "usage_namespace_daily_p2026_11".to_string())]);
    let pod_days = partitions_of(&pool, "usage_pod_daily", "day").await;
    assert_eq!(
        pod_days,
        [
            ("2026-10-31".to_string(), "usage_pod_daily_p2026_10".to_string()),
            ("2026-11-01".to_string(), "usage_pod_daily_p2026_11".to_string())
        ]
    );
    for t in [
        "gpu_usage_hourly",
        "usage_namespace_hourly",
        "node_capacity_hourly",
        "usage_namespace_daily",
        "usage_pod_daily",
    ] {
        let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM {t}_default")).fetch_one(&pool).await.unwrap();
        assert_eq!(n, 0, "{t}: nothing in the DEFAULT partition");
        let parts: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_inherits WHERE inhparent = $1::regclass")
            .bind(t)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert!(parts >= 3, "{t}: {parts} partitions");
    }
    // a month's read (bound as a parameter, as the service binds it): only that month's partition is scanned
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
         SELECT sum(gpu_seconds) FROM gpu_usage_hourly WHERE hour >= '2026-11-01T00:00:00Z' AND hour < '2026-12-01T00:00:00Z'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let plan = plan.join("\n");
    assert!(
        plan.contains("gpu_usage_hourly_p2026_11") && !plan.contains("p2026_10") && !plan.contains("_default"),
        "{plan}"
    );

    // a row written without its partition (no ensure first) lands in DEFAULT and moves when the month is made
    sqlx::query(
        "INSERT INTO node_capacity_hourly (cluster, hour, node, gpu_model, cards, card_seconds)
         VALUES ('c1', '2027-03-05T01:00:00Z', 'node-z', 'm', 8, 28800)",
    )
    .execute(&pool)
    .await
    .unwrap();
    assert_eq!(
        partitions_of(&pool, "node_capacity_hourly", "hour").await.last().unwrap().1,
        "node_capacity_hourly_default"
    );
    let made: i32 =
        sqlx::query_scalar("SELECT ensure_month_partitions('2027-03-05T01:00:00Z', '2027-03-05T01:00:00Z')")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(made, 5, "March 2027 of the five tables");
    let last = partitions_of(&pool, "node_capacity_hourly", "hour").await.pop().unwrap();
    assert_eq!(last, ("2027-03-05 01:00".into(), "node_capacity_hourly_p2027_03".into()));
    let again: i32 =
        sqlx::query_scalar("SELECT ensure_month_partitions('2027-03-05T01:00:00Z', '2027-03-05T02:00:00Z')")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(again, 0, "made once");
}

/// The migration converts tables that hold rows: every row of the five tables is the same after it (compared as
/// row text), and lands in its month's partition.
#[sqlx::test(migrations = false)]
async fn the_conversion_keeps_every_row(pool: PgPool) {
    let all = &cardhour::db::MIGRATOR;
    let (before, _) = all.migrations.split_at(all.migrations.iter().position(|m| m.version == 20261210000100).unwrap());
    let earlier =
        sqlx::migrate::Migrator { migrations: Cow::Owned(before.to_vec()), ..sqlx::migrate::Migrator::DEFAULT };
    earlier.run(&pool).await.unwrap();
    // rows as the releases before wrote them (no partitions then): 3 UTC months, the rollups by their functions
    sqlx::raw_sql(
        "INSERT INTO clusters VALUES ('c1', 'http://127.0.0.1:9');
         INSERT INTO gpu_usage_hourly (cluster, hour, namespace, pod, container, resource, gpu_model, kind, node,
             units, fraction, gpu_seconds, effective_gpu_seconds, unmetered_gpu_seconds, util_source, team)
         SELECT 'c1', h, 'ns' || n, 'pod' || n, 'main', 'nvidia_com_gpu', 'm', 'whole', 'node', n, 1, n * 3600.0,
                n * 1000.0, 0, 'sm_active', 'team' || n
         FROM generate_series('2026-01-31T20:00:00Z'::timestamptz, '2026-03-01T03:00:00Z', interval '1 hour') h,
              generate_series(1, 3) n;
         INSERT INTO usage_namespace_hourly SELECT cluster, hour, namespace, max(team), gpu_model, kind,
             sum(gpu_seconds), sum(effective_gpu_seconds), sum(unmetered_gpu_seconds)
         FROM gpu_usage_hourly GROUP BY cluster, hour, namespace, gpu_model, kind;
         INSERT INTO node_capacity_hourly (cluster, hour, node, gpu_model, cards, card_seconds)
         SELECT 'c1', h, 'node', 'm', 8, 28800
         FROM generate_series('2026-01-31T20:00:00Z'::timestamptz, '2026-03-01T03:00:00Z', interval '1 hour') h;
         SELECT count(refresh_daily('c1', d::date)) FROM generate_series('2026-01-31'::date, '2026-03-01', '1 day') d;
         SELECT count(refresh_pod_daily('c1', d::date)) FROM generate_series('2026-01-31'::date, '2026-03-01', '1 day') d;",
    )
    .execute(&pool)
    .await
    .unwrap();
    let tables = [
        "gpu_usage_hourly",
        "usage_namespace_hourly",
        "node_capacity_hourly",
        "usage_namespace_daily",
        "usage_pod_daily",
        "capacity_daily",
    ];
    let digest = |pool: PgPool| async move {
        let mut out = Vec::new();
        for t in tables {
            let row: (i64, String) =
                sqlx::query_as(&format!("SELECT count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM {t} x"))
                    .fetch_one(&pool)
                    .await
                    .unwrap();
            out.push((t, row));
        }
        out
    };
    let then = digest(pool.clone()).await;
    assert_eq!(then[0].1.0, 3 * (4 + 28 * 24 + 4), "hourly rows seeded");
    assert!(then.iter().all(|(_, (n, _))| *n > 0), "{then:?}");
    cardhour::db::MIGRATOR.run(&pool).await.unwrap();
    assert_eq!(digest(pool.clone()).await, then, "every row, bit for bit");
    let by_partition: Vec<(String, i64)> =
        sqlx::query_as("SELECT tableoid::regclass::text, count(*) FROM gpu_usage_hourly GROUP BY 1 ORDER BY 1")
            .fetch_all(&pool)
            .await
            .unwrap();
    let want: Vec<(String, i64)> = [
        ("gpu_usage_hourly_p2026_01", 12),
        ("gpu_usage_hourly_p2026_02", 3 * 28 * 24),
        ("gpu_usage_hourly_p2026_03", 12),
    ]
    .map(|(p, n)| (p.to_string(), n))
    .to_vec();
    assert_eq!(by_partition, want);
    // the keys and triggers came back: a duplicate is refused, a write moves the data version
    let version =
        || async { sqlx::query_scalar::<_, i64>("SELECT version FROM data_version").fetch_one(&pool).await.unwrap() };
    let v0 = version().await;
    let dup = sqlx::query(
        "INSERT INTO gpu_usage_hourly SELECT * FROM gpu_usage_hourly WHERE hour = '2026-02-10T00:00:00Z' LIMIT 1",
    )
    .execute(&pool)
    .await
    .unwrap_err();
    assert!(dup.to_string().contains("gpu_usage_hourly_p2026_02_pkey"), "{dup}");
    sqlx::query("DELETE FROM usage_pod_daily WHERE day = '2026-02-10'").execute(&pool).await.unwrap();
    assert_eq!(version().await, v0 + 1, "the data version moved");
}

/// `cardhour retention`: a dry run changes nothing; the raw rows of closed, old months go and nothing else does;
/// the open month is untouched; every closed bill is served byte for byte as before, by a new server too;
/// an ingest of a dropped hour, or an undo rebuilding its pod-days, is refused.
#[sqlx::test]
async fn retention_drops_closed_months_raw_rows_only(pool: PgPool) {
    let api = TestApi::start(pool.clone()).await;
    months::seed_four_months(&api).await;
    let url = common::db_url(&pool).await;
    let env = [("DATABASE_URL", url.as_str())];
    let mut closed = Vec::new();
    for m in ["2026-09", "2026-10"] {
        closed.push(months::representations(&api, m).await);
    }
    let kept = months::kept_digest(&pool).await;
    let raw = |pool: PgPool| async move {
        sqlx::query_as::<_, (String, i64)>(
            "SELECT to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24'), count(*) FROM gpu_usage_hourly GROUP BY 1 ORDER BY 1",
        )
        .fetch_all(&pool)
        .await
        .unwrap()
    };
    let raw_then = raw(pool.clone()).await;
    assert_eq!(raw_then.len(), 12);
    // tokens served in a September hour (stored, and replaced by a run) and in a November one (issue 36)
    for (table, run, hour, tokens) in [
        ("serving_hourly", "", "2026-09-20T00:00:00Z", 10),
        ("replaced_serving_hourly", "7, ", "2026-09-20T00:00:00Z", 9),
        ("serving_hourly", "", "2026-11-10T00:00:00Z", 20),
    ] {
        let columns = if run.is_empty() { "" } else { "run_id, " };
        sqlx::query(&format!(
            "INSERT INTO {table} ({columns}cluster, hour, namespace, pod, model, engine, input_tokens, output_tokens,
             requests) VALUES ({run}'c1', '{hour}', 'vision-train', 'vision-pod', 'qwen', 'vllm', {tokens}, 5, 1)"
        ))
        .execute(&pool)
        .await
        .unwrap();
    }
    let served = |pool: PgPool| async move {
        sqlx::query_as::<_, (String, i64)>(
            "SELECT 'stored ' || to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD'), input_tokens FROM serving_hourly
             UNION ALL SELECT 'replaced ' || to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM-DD'), input_tokens
             FROM replaced_serving_hourly ORDER BY 1",
        )
        .fetch_all(&pool)
        .await
        .unwrap()
    };
    let served_then = served(pool.clone()).await;
    assert_eq!(served_then.len(), 3);
    assert_eq!(raw_then[0].1, 3, "a September hour: 2 containers and a time-sliced replica");
    // November, open: its statement restates September and October from what is stored now (their bills computed
    // again), the time-sliced replica billed as a whole card included
    let november_then = String::from_utf8(months::representations(&api, "2026-11").await.swap_remove(0).2).unwrap();

    // an open month first: October closed, November not; nothing of November's rows may go, and they share UTC
    // October with October's
    let out = run_cardhour_ok(["retention", "--keep-months", "0", "--now", "2026-12-04T00:00:00Z", "--dry-run"], &env);
    assert!(out.contains("would drop 6 rows of gpu_usage_hourly_p2026_09"), "{out}");
    assert!(out.contains("would keep 3 rows of gpu_usage_hourly_p2026_09"), "{out}");
    assert!(out.contains("would be kept from 2026-10-01T00:00:00Z"), "{out}");
    assert_eq!(raw(pool.clone()).await, raw_then, "a dry run changes nothing");
    assert_eq!(served(pool.clone()).await, served_then, "a dry run deletes no tokens served");
    // keep the 3 months before December: September (closed) is one of them
    let out = run_cardhour_ok(["retention", "--keep-months", "3", "--now", "2026-12-04T00:00:00Z"], &env);
    assert!(
        out.starts_with(
            "nothing to drop: raw rows are kept from 2026-09-20T00:00:00Z; billing month 2026-09 is \
                         within 3 months of the current one (2026-12)"
        ),
        "{out}"
    );
    let out = run_cardhour_ok(["retention", "--keep-months", "0", "--now", "2026-12-04T00:00:00Z"], &env);
    assert!(out.contains("dropped 6 rows of gpu_usage_hourly_p2026_09"), "{out}");
    // September's tokens went with its hours, stored and replaced; November's stay
    assert!(out.contains("deleted 1 rows of serving_hourly"), "{out}");
    assert!(out.contains("deleted 1 rows of replaced_serving_hourly"), "{out}");
    assert_eq!(served(pool.clone()).await, [("stored 2026-11-10".to_string(), 20)]);
    assert_eq!(
        String::from_utf8_lossy(&months::representations(&api, "2026-11").await[0].2),
        november_then,
        "the open month's restatements"
    );
    let raw_now = raw(pool.clone()).await;
    let mut want = raw_then.clone();
    for h in &mut want[..3] {
        h.1 = 1; // the time-sliced row of each September hour stays
    }
    assert_eq!(raw_now, want, "September's hours went but their time-sliced rows, nothing else");
    let out = run_cardhour_ok(["retention", "--keep-months", "0", "--now", "2026-12-04T00:00:00Z"], &env);
    assert!(
        out.contains(
            "nothing to drop: raw rows are kept from 2026-10-01T00:00:00Z; billing month 2026-11 is not closed"
        ),
        "{out}"
    );

    // November closed: UTC October goes too (its November hours are now in a closed month); December stays
    months::close(&api, "2026-11").await;
    closed.push(months::representations(&api, "2026-11").await);
    let kept = {
        let mut k = kept;
        k.retain(|(t, _)| t != "closed_months");
        k
    };
    let december_then = String::from_utf8(months::representations(&api, "2026-12").await.swap_remove(0).2).unwrap();
    let out = run_cardhour_ok(["retention", "--keep-months", "0", "--now", "2026-12-04T00:00:00Z"], &env);
    assert!(out.contains("dropped 10 rows of gpu_usage_hourly_p2026_10"), "{out}");
    assert_eq!(
        String::from_utf8_lossy(&months::representations(&api, "2026-12").await[0].2),
        december_then,
        "the open month's restatements"
    );
    let hours: Vec<String> = raw(pool.clone()).await.into_iter().skip(3).map(|(h, _)| h).collect();
    assert_eq!(hours, ["2026-11-10 00", "2026-11-10 01", "2026-12-01 02", "2026-12-01 03"]);
    let mut kept_now = months::kept_digest(&pool).await;
    kept_now.retain(|(t, _)| t != "closed_months");
    assert_eq!(kept_now, kept, "every rollup row kept");
    assert_eq!(KEPT.len(), kept.len() + 1);
    // new tables of the kept rows (September's 3 time-sliced rows on one page; none of October's), not emptied
    // tables of the same size
    let sizes: Vec<i64> = sqlx::query_scalar(
        "SELECT pg_relation_size(oid) FROM pg_class
         WHERE relname IN ('gpu_usage_hourly_p2026_09', 'gpu_usage_hourly_p2026_10') ORDER BY relname",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(sizes, [8192, 0]);

    // every closed bill, byte for byte, from this server and a new one
    for api in [&api, &TestApi::start(pool.clone()).await] {
        for (month, reps) in ["2026-09", "2026-10", "2026-11"].iter().zip(&closed) {
            let now = months::representations(api, month).await;
            assert_eq!(now.len(), reps.len());
            for ((path, who, body), (_, _, then)) in now.iter().zip(reps) {
                assert!(body == then, "{who} {path}: a closed bill changed after retention");
            }
        }
    }

    // what would rebuild a rollup from the dropped rows is refused, and nothing is written
    let refused = months::store(&pool, "2026-10-05T01:00:00Z", 1, 9.0).await.unwrap_err();
    assert!(refused.to_string().contains("dropped by `cardhour retention`"), "{refused}");
    let undo = sqlx::query("SELECT refresh_pod_daily('c1', '2026-10-05')").execute(&pool).await.unwrap_err();
    assert!(
        undo.to_string().contains("usage_pod_daily_p2026_10 holds days whose raw hourly rows were dropped"),
        "{undo}"
    );
    assert_eq!(kept_now, {
        let mut k = months::kept_digest(&pool).await;
        k.retain(|(t, _)| t != "closed_months");
        k
    });
    // the open month still ingests
    months::store(&pool, "2026-12-01T04:00:00Z", 1, 1.0).await.unwrap();
}

/// Bad input: a clear error and a non-zero exit, before anything is read or written.
#[test]
fn retention_refuses_bad_input() {
    let env = [("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")];
    for (args, says) in [
        (vec!["retention"], "--keep-months"),
        (vec!["retention", "--keep-months", "-1"], "--keep-months"),
        (vec!["retention", "--keep-months", "twelve"], "invalid value 'twelve'"),
        (vec!["retention", "--keep-months", "1201"], "1201 is not in 0..=1200"),
        (vec!["retention", "--keep-months", "3", "--now", "yesterday"], "--now"),
    ] {
        let out = run_cardhour(&args, &env);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // a database that cannot be reached: exit 1, saying so
    let base = std::env::var("DATABASE_URL").unwrap_or_else(|_| common::DEFAULT_DATABASE_URL.into());
    let mut missing = url::Url::parse(&base).unwrap();
    missing.set_path("/cardhour_no_such_database");
    let out = run_cardhour(["retention", "--keep-months", "3"], &[("DATABASE_URL", missing.as_str())]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot connect to the database"));
}
