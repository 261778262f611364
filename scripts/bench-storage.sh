#!/usr/bin/env bash
# Storage for years (issue 11): on a year of a 2,000-GPU cluster (scripts/bench-seed.sh), the size of every table
# and index (per monthly partition too), the plans of the main reads with their partition pruning, and how sizes
# and the pages' p99 grow with the data: the same database cut to its last 3, 6 and 12 months, each measured with
# wrk (scripts/bench-portal.sh) on the team statement and the home pages.
#
#   bash scripts/bench-storage.sh                        # seeds cardhour_bench_storage once (a few minutes)
#   BENCH_SECONDS=30 BENCH_MONTHS="3 6 12" bash scripts/bench-storage.sh
#
# Environment: BENCH_SECONDS (30 s per page and size), BENCH_CONNECTIONS (16), BENCH_WARMUP (5 s),
# BENCH_MONTHS ("3 6 12"), BENCH_DB (cardhour_bench_storage: the seeded year, never cut; the cuts are made in
# ${BENCH_DB}_cut, re-created from it), BENCH_LOAD=0 to print sizes and plans only, BENCH_RESEED=1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

ensure_postgres
export SQLX_OFFLINE=true
cargo build --release --quiet
bin=target/release/cardhour
db=${BENCH_DB:-cardhour_bench_storage}
cut_db="${db}_cut"
admin_url="$(_url_with_db "$DATABASE_URL" postgres)"
url="$(_url_with_db "$DATABASE_URL" "$db")"
cut_url="$(_url_with_db "$DATABASE_URL" "$cut_db")"
# shellcheck source=scripts/bench-seed.sh
source scripts/bench-seed.sh
DATABASE_URL="$url" "$bin" migrate >/dev/null

q() { psql "$1" -XqAt -v ON_ERROR_STOP=1 -c "$2"; }
tables="'gpu_usage_hourly', 'usage_namespace_hourly', 'node_capacity_hourly', 'usage_namespace_daily',
        'usage_pod_daily', 'capacity_daily', 'ingested_hours', 'closed_months'"

# sizes URL: per table (partitions summed), rows (counted), heap and indexes
sizes() {
    echo "| table | rows | table | indexes | total |"
    echo "|---|---:|---:|---:|---:|"
    psql "$1" -XqAt -F ' | ' -v ON_ERROR_STOP=1 -c "
        WITH t AS (SELECT c.oid, c.relname FROM pg_class c WHERE c.relname IN ($tables)),
             p AS (SELECT t.relname AS tbl, coalesce(i.inhrelid, t.oid) AS part
                   FROM t LEFT JOIN pg_inherits i ON i.inhparent = t.oid)
        SELECT '| ' || tbl,
               to_char(sum((xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM ONLY %s',
                   part::regclass), false, true, '')))[1]::text::bigint), 'FM999,999,999'),
               pg_size_pretty(sum(pg_table_size(part))), pg_size_pretty(sum(pg_indexes_size(part))),
               pg_size_pretty(sum(pg_total_relation_size(part))) || ' |'
        FROM p
        GROUP BY tbl ORDER BY sum(pg_total_relation_size(part)) DESC"
    echo
    echo "database: $(q "$1" "SELECT pg_size_pretty(pg_database_size(current_database()))")"
}

# partitions URL: per monthly partition of the hourly usage and the namespace rollups, with each index
partitions() {
    echo "| partition | rows | table | primary key | other indexes |"
    echo "|---|---:|---:|---:|---:|"
    psql "$1" -XqAt -F ' | ' -v ON_ERROR_STOP=1 -c "
        SELECT '| ' || c.relname, to_char(s.n_live_tup, 'FM999,999,999'), pg_size_pretty(pg_table_size(c.oid)),
               pg_size_pretty(sum(pg_relation_size(x.indexrelid)) FILTER (WHERE x.indisprimary)),
               pg_size_pretty(coalesce(sum(pg_relation_size(x.indexrelid)) FILTER (WHERE NOT x.indisprimary), 0)) || ' |'
        FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        JOIN pg_stat_user_tables s ON s.relid = c.oid
        LEFT JOIN pg_index x ON x.indrelid = c.oid
        WHERE i.inhparent IN ('gpu_usage_hourly'::regclass, 'usage_namespace_hourly'::regclass)
        GROUP BY c.relname, c.oid, s.n_live_tup ORDER BY c.relname"
}

# plans URL: the main reads as the service runs them (prepared, the generic plan: parameters are pruned on at
# executor start, \"Subplans Removed\"), EXPLAIN (ANALYZE, BUFFERS)
plans() {
    psql "$1" -Xq -v ON_ERROR_STOP=1 <<'SQL'
SET plan_cache_mode = force_generic_plan;
\echo '-- team statement: usage of the month (billing days), one team  (src/db/bills.rs usage_by_day)'
PREPARE usage_by_day(date, date, text[]) AS
    SELECT team, namespace, gpu_model, kind, day, sum(gpu_seconds), sum(effective_gpu_seconds),
           sum(unmetered_gpu_seconds)
    FROM usage_namespace_daily
    WHERE day >= $1 AND day < $2 AND ($3::text[] IS NULL OR team = ANY($3))
    GROUP BY team, namespace, gpu_model, kind, day;
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE usage_by_day('2026-10-01', '2026-11-01', '{team03}');
\echo '-- home page: the idle pods of the last week (usage_pod_daily + the partial days from gpu_usage_hourly; src/db/waste.rs pods)'
PREPARE idle(timestamptz, timestamptz, date, date, timestamptz, timestamptz) AS
    SELECT count(*) FROM (
        SELECT cluster, namespace, pod FROM usage_pod_daily WHERE day >= $3 AND day < $4
        UNION ALL SELECT cluster, namespace, pod FROM usage_pod_hours(NULL, $1, $5)
        UNION ALL SELECT cluster, namespace, pod FROM usage_pod_hours(NULL, $6, $2)) x;
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF)
    EXECUTE idle('2026-10-24T16:00:00Z', '2026-10-31T16:00:00Z', '2026-10-25', '2026-10-31',
                 '2026-10-25T00:00:00Z', '2026-10-31T00:00:00Z');
\echo '-- usage by namespace for a month of whole hours (src/db/usage.rs totals, group by namespace)'
PREPARE by_namespace(timestamptz, timestamptz) AS
    SELECT namespace, sum(gpu_seconds), sum(effective_gpu_seconds), sum(unmetered_gpu_seconds)
    FROM usage_namespace_hourly WHERE hour >= $1 AND hour < $2 GROUP BY 1 ORDER BY 1;
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE by_namespace('2026-09-30T16:00:00Z', '2026-10-31T16:00:00Z');
\echo '-- one pod-hour, by the primary key (an ingest replacing an hour reads and deletes by (cluster, hour))'
PREPARE one_hour(text, timestamptz) AS SELECT count(*) FROM gpu_usage_hourly WHERE cluster = $1 AND hour = $2;
EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) EXECUTE one_hour('bench', '2026-10-05T03:00:00Z');
SQL
}

# cut_to URL MONTHS: keeps the last MONTHS billing months of the seeded year (2025-12 .. 2026-11): drops the
# partitions of the months before and the other tables' rows of them, as if the cluster had been metered
# MONTHS months (the partition of the month before keeps its space: its rows are deleted, not dropped)
cut_to() {
    local first
    first=$(date -u -d "2026-12-01 - $2 months" +%Y-%m-01)
    psql "$1" -Xq -v ON_ERROR_STOP=1 -v first="$first" <<'SQL' >/dev/null
SET client_min_messages = warning;
SELECT format('DROP TABLE %I', c.relname) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE c.relname ~ '_p[0-9]{4}_[0-9]{2}$'
  AND to_date(substring(c.relname FROM '_p([0-9]{4}_[0-9]{2})$'), 'YYYY_MM') < date_trunc('month', :'first'::date - 1) \gexec
DELETE FROM gpu_usage_hourly WHERE hour < (:'first'::timestamp AT TIME ZONE 'Asia/Shanghai');
DELETE FROM usage_namespace_hourly WHERE hour < (:'first'::timestamp AT TIME ZONE 'Asia/Shanghai');
DELETE FROM node_capacity_hourly WHERE hour < (:'first'::timestamp AT TIME ZONE 'Asia/Shanghai');
DELETE FROM ingested_hours WHERE hour < (:'first'::timestamp AT TIME ZONE 'Asia/Shanghai');
DELETE FROM usage_namespace_daily WHERE day < :'first';
DELETE FROM usage_pod_daily WHERE day < :'first';
DELETE FROM capacity_daily WHERE day < :'first';
VACUUM ANALYZE;
SQL
}

echo "## Storage for years: a year of 2,000 GPUs ($db)"
echo
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "### Sizes, the whole year"
echo
sizes "$url"
echo
echo "### Per monthly partition (hourly usage and its namespace rollup)"
echo
partitions "$url"
echo
echo "### Plans (EXPLAIN ANALYZE, BUFFERS; generic plans, as prepared statements run)"
echo
echo '```'
plans "$url"
echo '```'

[[ "${BENCH_LOAD:-1}" != 0 ]] || exit 0
months_list=${BENCH_MONTHS:-3 6 12}
# the largest cut first: each smaller one is cut from it
sorted=$(tr ' ' '\n' <<<"$months_list" | sort -rn | tr '\n' ' ')
log "copying $db to $cut_db"
q "$admin_url" "DROP DATABASE IF EXISTS $cut_db WITH (FORCE)" >/dev/null
q "$admin_url" "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '$db'" >/dev/null
q "$admin_url" "CREATE DATABASE $cut_db TEMPLATE $db" >/dev/null
trap 'psql "$admin_url" -XqAt -c "DROP DATABASE IF EXISTS $cut_db WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
for m in $sorted; do
    cut_to "$cut_url" "$m"
    echo
    echo "### The last $m months"
    echo
    sizes "$cut_url"
    echo
    BENCH_DB="$cut_db" BENCH_SECONDS="${BENCH_SECONDS:-30}" BENCH_CONNECTIONS="${BENCH_CONNECTIONS:-16}" \
        BENCH_WARMUP="${BENCH_WARMUP:-5}" \
        BENCH_PAGES="${BENCH_PAGES:-^(finance home, the month|team lead home \(own|team statement \(finance)}" \
        bash scripts/bench-portal.sh
done
