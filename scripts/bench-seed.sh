#!/usr/bin/env bash
# The read-path benchmarks' data (scripts/bench-api.sh, scripts/bench-portal.sh): a year of hourly usage of a
# 2,000-GPU cluster written straight into the tables the ingest writes (per pod and hour, per namespace and hour, per
# day, capacity), with the shapes a real cluster gives: 660 pods holding ~1,650 cards at any hour, 200 namespaces of
# 100 teams, 3 GPU models, 250 nodes. Sourced after scripts/lib.sh, with $admin_url, $url, $db and $bin set;
# seeds once and reuses the database (BENCH_RESEED=1 to redo it).

# the seed's shape changed once (12 → 100 teams): an older seed is redone
seeded() { psql "$url" -XqAt -c "select count(*) from rate_versions where exists (select from teams having count(*) >= 100)" 2>/dev/null || echo 0; }
if [[ -n "${BENCH_RESEED:-}" || "$(seeded)" -lt 4 ]]; then
    log "seeding a year of a 2,000-GPU cluster into $db (a few minutes)"
    psql "$admin_url" -XqAt -c "drop database if exists $db with (force)" -c "create database $db" >/dev/null
    DATABASE_URL="$url" "$bin" migrate >/dev/null
    t0=$SECONDS
    psql "$url" -Xq -v ON_ERROR_STOP=1 <<'SQL'
SET client_min_messages = warning;
INSERT INTO clusters (name, prometheus_url) VALUES ('bench', 'http://127.0.0.1:9');
-- the months' partitions, as the ingest makes them before it writes (else the rows would sit in DEFAULT)
SELECT ensure_month_partitions('2025-11-30T16:00:00Z', '2026-11-30T15:00:00Z');
INSERT INTO teams (id, name, owner)
SELECT 'team' || lpad(t::text, 2, '0'), '算法团队' || t, 'owner' || t FROM generate_series(0, 99) t;
-- a year in Shanghai months: 2025-12 .. 2026-11
CREATE TEMP TABLE hours AS
SELECT h FROM generate_series('2025-11-30T16:00:00Z'::timestamptz, '2026-11-30T15:00:00Z', interval '1 hour') h;
CREATE TEMP TABLE pods AS
SELECT p, 'ns' || lpad((p % 200)::text, 3, '0') AS namespace,
       'team' || lpad((p % 200 % 100)::text, 2, '0') AS team,
       (ARRAY['NVIDIA A100-SXM4-80GB', 'NVIDIA H100 80GB HBM3', 'NVIDIA L40S'])[1 + p % 3] AS model,
       CASE WHEN p % 10 = 0 THEN 'mig' ELSE 'whole' END AS kind,
       CASE WHEN p % 10 = 0 THEN 3.0 / 7 ELSE 1 END AS fraction,
       1 + p % 4 AS units, (p * 37 % 100) / 100.0 AS util
FROM generate_series(0, 659) p;
INSERT INTO gpu_usage_hourly (cluster, hour, namespace, pod, container, resource, gpu_model, kind, mig_profile, node,
    units, fraction, gpu_seconds, effective_gpu_seconds, unmetered_gpu_seconds, util_source, peak_fb_used_mib,
    label_team, team)
SELECT 'bench', h, namespace, 'pod-' || p || '-' || (extract(epoch FROM h)::bigint / 86400 % 7), 'main',
       CASE WHEN kind = 'mig' THEN 'nvidia_com_mig_3g_40gb' ELSE 'nvidia_com_gpu' END, model, kind,
       CASE WHEN kind = 'mig' THEN '3g.40gb' END, 'node-' || (p % 250), units, fraction,
       units * fraction * 3600, units * fraction * 3600 * util, 0, 'sm_active', 20000, team, team
FROM hours CROSS JOIN pods;
INSERT INTO usage_namespace_hourly
SELECT cluster, hour, namespace, max(team), gpu_model, kind, sum(gpu_seconds), sum(effective_gpu_seconds),
       sum(unmetered_gpu_seconds)
FROM gpu_usage_hourly GROUP BY cluster, hour, namespace, gpu_model, kind;
INSERT INTO node_capacity_hourly (cluster, hour, node, gpu_model, cards, card_seconds)
SELECT 'bench', h, 'node-' || n, (ARRAY['NVIDIA A100-SXM4-80GB', 'NVIDIA H100 80GB HBM3', 'NVIDIA L40S'])[1 + n % 3],
       8, 8 * 3600
FROM hours CROSS JOIN generate_series(0, 249) n;
INSERT INTO ingested_hours (cluster, hour, scrape_interval_ms, usage_rows) SELECT 'bench', h, 60000, 660 FROM hours;
SELECT count(*) FROM (SELECT refresh_daily('bench', d::date)
                      FROM generate_series('2025-12-01'::date, '2026-11-30', interval '1 day') d) x;
-- the per-pod UTC-day rollup the idle list reads, as the ingest keeps it
SELECT count(refresh_pod_daily('bench', d::date))
FROM generate_series('2025-11-30'::date, '2026-11-30', interval '1 day') d;
INSERT INTO rate_versions (gpu_model, effective_from, rate, created_by) VALUES
    ('A100-80GB', '2025-12-01', 5.6893, 'bench'), ('H100-80GB', '2025-12-01', 18.5, 'bench'),
    ('H100-80GB', '2026-10-15', 21, 'bench'), ('L40S', '2025-12-01', 6.25, 'bench');
ANALYZE;
SQL
    log "seeded in $((SECONDS - t0)) s"
fi
