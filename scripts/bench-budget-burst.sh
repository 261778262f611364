#!/usr/bin/env bash
# Budget-write burst (issue 27, item 2): finance sets 20 teams' budgets of the current month at once. How long does
# each PUT take, and how long does an unrelated read (`GET /api/v1/teams`) wait meanwhile? Before issue 27 every PUT's
# budget check waited for a global advisory lock while holding a pooled connection, and the check holding the lock
# needed further connections: the pool (16) drained, PUTs took 10–22 s and reads waited as long.
#
#   bash scripts/bench-budget-burst.sh                     # the binary of this tree (debug build, as the tests)
#   BENCH_BIN=/path/to/older/cardhour bash scripts/bench-budget-burst.sh   # another build, e.g. before the fix
#   BENCH_ROUNDS=10 bash scripts/bench-budget-burst.sh
#
# Data: the current billing month (Asia/Shanghai) so far, written straight into the tables the ingest writes —
# 660 pods of 100 teams on 250 nodes (3 GPU models), every hour from the month's start to 3 hours ago — so each
# budget check computes a real month statement. Each round sends 20 PUTs at once (one per team, amounts that change
# every round, so none is a no-op) with curl, while a reader loops `GET /api/v1/teams` until the burst is over.
# Prints p50/p99/max of the PUTs and of the reads, the errors (any non-2xx), and the load average.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
bench_args "$@"

ensure_postgres
export SQLX_OFFLINE=true
if [[ -n "${BENCH_BIN:-}" ]]; then
    bin="$BENCH_BIN"
else
    cargo build --quiet --bin cardhour
    bin=target/debug/cardhour
fi
rounds=${BENCH_ROUNDS:-10}
burst=20
db=cardhour_bench_burst_$$
admin_url="$(_url_with_db "$DATABASE_URL" postgres)"
url="$(_url_with_db "$DATABASE_URL" "$db")"
port=$(free_port 18480)
work=$(mktemp -d)
server=""
cleanup() {
    [[ -n "$server" ]] && { kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; }
    psql "$admin_url" -XqAt -c "drop database if exists $db with (force)" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

psql "$admin_url" -XqAt -c "create database $db" >/dev/null
DATABASE_URL="$url" "$bin" migrate >/dev/null
log "seeding the current month so far into $db"
psql "$url" -Xq -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
SET client_min_messages = warning;
INSERT INTO clusters (name, prometheus_url) VALUES ('bench', 'http://127.0.0.1:9');
CREATE TEMP TABLE hours AS
SELECT h FROM generate_series(date_trunc('month', now() AT TIME ZONE 'Asia/Shanghai') AT TIME ZONE 'Asia/Shanghai',
                              date_trunc('hour', now()) - interval '3 hours', interval '1 hour') h;
SELECT ensure_month_partitions((SELECT min(h) FROM hours), (SELECT max(h) + interval '1 hour' FROM hours));
INSERT INTO teams (id, name, owner)
SELECT 'team' || lpad(t::text, 2, '0'), '算法团队' || t, 'owner' || t FROM generate_series(0, 99) t;
CREATE TEMP TABLE pods AS
SELECT p, 'ns' || lpad((p % 200)::text, 3, '0') AS namespace,
       'team' || lpad((p % 200 % 100)::text, 2, '0') AS team,
       (ARRAY['NVIDIA A100-SXM4-80GB', 'NVIDIA H100 80GB HBM3', 'NVIDIA L40S'])[1 + p % 3] AS model,
       1 + p % 4 AS units, (p * 37 % 100) / 100.0 AS util
FROM generate_series(0, 659) p;
INSERT INTO gpu_usage_hourly (cluster, hour, namespace, pod, container, resource, gpu_model, kind, mig_profile, node,
    units, fraction, gpu_seconds, effective_gpu_seconds, unmetered_gpu_seconds, util_source, peak_fb_used_mib,
    label_team, team)
SELECT 'bench', h, namespace, 'pod-' || p, 'main', 'nvidia_com_gpu', model, 'whole', NULL, 'node-' || (p % 250),
       units, 1, units * 3600, units * 3600 * util, 0, 'sm_active', 20000, team, team
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
SELECT count(refresh_daily('bench', d::date))
FROM generate_series((SELECT min(h) AT TIME ZONE 'Asia/Shanghai' FROM hours)::date,
                     (SELECT max(h) AT TIME ZONE 'Asia/Shanghai' FROM hours)::date, interval '1 day') d;
INSERT INTO rate_versions (gpu_model, effective_from, rate, created_by) VALUES
    ('A100-80GB', '2025-12-01', 5.6893, 'bench'), ('H100-80GB', '2025-12-01', 18.5, 'bench'),
    ('L40S', '2025-12-01', 6.25, 'bench');
ANALYZE;
SQL
month=$(psql "$url" -XqAt -c "select to_char(now() AT TIME ZONE 'Asia/Shanghai', 'YYYY-MM')")
hours=$(psql "$url" -XqAt -c "select count(distinct hour) from gpu_usage_hourly")
finance=$(DATABASE_URL="$url" "$bin" token create --name bench --role finance 2>/dev/null)

DATABASE_URL="$url" CARDHOUR_LOG=warn "$bin" serve --listen "127.0.0.1:$port" 2>"$work/server.log" &
server=$!
until curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null; do sleep 0.2; done
base="http://127.0.0.1:$port/api/v1"
# warm: the token's first use, the month's statement once
curl -fsS -o /dev/null -H "Authorization: Bearer $finance" "$base/teams"
curl -fsS -o /dev/null -H "Authorization: Bearer $finance" "$base/budgets/$month"

# one PUT at a time first: what a single write costs (its budget check computes the month's statement)
for i in 1 2 3 4 5; do
    curl -sS -o /dev/null -w '%{http_code} %{time_total}\n' -X PUT -H "Authorization: Bearer $finance" \
        -H 'content-type: application/json' -d "{\"amount\": \"$((5000 + i))\"}" \
        "$base/budgets/$month/team99" >>"$work/alone"
done

load_before=$(loadavg)
started=$SECONDS
for r in $(seq 1 "$rounds"); do
    : >"$work/burst"
    (
        while [[ ! -e "$work/done.$r" ]]; do
            curl -sS -o /dev/null -w '%{http_code} %{time_total}\n' -H "Authorization: Bearer $finance" \
                "$base/teams" >>"$work/reads" || echo "000 99" >>"$work/reads"
        done
    ) &
    reader=$!
    sleep 0.2
    pids=()
    for t in $(seq 0 $((burst - 1))); do
        team=team$(printf '%02d' "$t")
        curl -sS -o /dev/null -w '%{http_code} %{time_total}\n' -X PUT -H "Authorization: Bearer $finance" \
            -H 'content-type: application/json' -d "{\"amount\": \"$((10000 + r * 100 + t))\"}" \
            "$base/budgets/$month/$team" >>"$work/puts" &
        pids+=($!)
    done
    wait "${pids[@]}"
    touch "$work/done.$r"
    wait "$reader"
done
elapsed=$((SECONDS - started))
load_after=$(loadavg)

# stats FILE: count, errors (non-2xx), p50 / p99 / max of the seconds column, in milliseconds
stats() {
    awk '{ if ($1 !~ /^2/) e++; print $2 * 1000 }' "$1" | sort -n | awk -v errors="$(awk '$1 !~ /^2/' "$1" | wc -l)" '
        { v[NR] = $1 }
        END {
            p50 = v[int((NR - 1) * 0.50) + 1]; p99 = v[int((NR - 1) * 0.99) + 1];
            printf "%d requests, %d errors; p50 %.0f ms, p99 %.0f ms, max %.0f ms\n", NR, errors, p50, p99, v[NR]
        }'
}
pool_timeouts=$(grep -c "pool timed out" "$work/server.log" || true)
lock_waits=$(grep -c "pg_advisory_xact_lock" "$work/server.log" || true)
echo "binary: $bin"
echo "data: month $month, $hours hours × 660 pods (100 teams, 250 nodes); $rounds rounds of $burst parallel PUTs"
echo "one PUT at a time:   $(stats "$work/alone")"
echo "budget PUTs:         $(stats "$work/puts")"
echo "GET /teams meanwhile: $(stats "$work/reads")"
echo "server log: $pool_timeouts 'pool timed out', $lock_waits slow advisory-lock statements"
echo "wall: ${elapsed} s; load average before: $load_before, after: $load_after"
