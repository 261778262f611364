#!/usr/bin/env bash
# API read-path benchmark (issues 3 and 4): with a year of hourly usage of a 2,000-GPU cluster stored, how fast do a
# team's month bill, the all-teams usage summary, the idle-waste list and the month's CSV and PDF exports answer
# over HTTP? Measured with wrk (p50/p90/p99); the idle list's SQL also side by side with the former query (psql).
#
#   bash scripts/bench-api.sh            # seeds .cardhour/bench-api (database cardhour_bench_api) once, reuses it
#   BENCH_RESEED=1 bash scripts/bench-api.sh
#
# The year is written straight into the tables the ingest writes (per pod and hour, per namespace and hour, per
# day, capacity), with the shapes a real 2,000-GPU cluster gives: 660 pods holding ~1,650 cards at any hour,
# 200 namespaces of 100 teams, 3 GPU models, 250 nodes. Only the read path is measured here; the ingest has its own
# benchmark (scripts/bench-ingest.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

ensure_postgres
ensure_apt_packages wrk fonts-noto-cjk poppler-utils
export SQLX_OFFLINE=true
cargo build --release --quiet
bin=target/release/cardhour

db=cardhour_bench_api
admin_url="$(_url_with_db "$DATABASE_URL" postgres)"
url="$(_url_with_db "$DATABASE_URL" "$db")"
port=${BENCH_PORT:-18080}
duration=${BENCH_SECONDS:-20}

# shellcheck source=scripts/bench-seed.sh
source scripts/bench-seed.sh
rows=$(psql "$url" -XqAt -c "select count(*) from gpu_usage_hourly")
finance=$(DATABASE_URL="$url" "$bin" token create --name bench --role finance 2>/dev/null)
lead=$(DATABASE_URL="$url" "$bin" token create --name bench-lead --role team_lead --team team03 2>/dev/null)

DATABASE_URL="$url" CARDHOUR_LOG=warn "$bin" serve --listen "127.0.0.1:$port" &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true' EXIT
until curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null; do sleep 0.2; done

# Cold: the first request for a month computes its bills (later ones are served from the statement cache until an
# ingest, a rate, mapping or team change, or a close changes what they depend on).
cold=()
for m in 2025-12 2026-01 2026-02 2026-03 2026-04 2026-05 2026-06 2026-07 2026-08 2026-09 2026-11; do
    cold+=("$(curl -fsS -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $finance" \
        "http://127.0.0.1:$port/api/v1/bills/$m/teams/team03")")
done
# the month PDF, cold: 2026-10's bills are not computed yet (it is not in the loop above)
pdf_cold=$(curl -fsS -o "${TMPDIR:-/tmp}/bench-statements.pdf" -w '%{time_total}' -H "Authorization: Bearer $finance" \
    "http://127.0.0.1:$port/api/v1/exports/2026-10/statements.pdf")
pdf_pages=$(pdfinfo "${TMPDIR:-/tmp}/bench-statements.pdf" 2>/dev/null | awk '/^Pages:/ {print $2}')
pdf_bytes=$(stat -c %s "${TMPDIR:-/tmp}/bench-statements.pdf")
cold_sorted=$(printf '%s\n' "${cold[@]}" | sort -n)
cold_median=$(sed -n 6p <<<"$cold_sorted")
cold_max=$(tail -n 1 <<<"$cold_sorted")

lua=$(mktemp --suffix .lua)
cat >"$lua" <<'LUA'
wrk.headers["Authorization"] = "Bearer " .. os.getenv("TOKEN")
LUA
# Every request a new cache key (min_memory_mib=1024.<thread><n>, which selects the same pods): what computing the
# answer costs, not what serving it again from the cache costs.
lua_uncached=$(mktemp --suffix .lua)
cat >"$lua_uncached" <<'LUA'
wrk.headers["Authorization"] = "Bearer " .. os.getenv("TOKEN")
local threads = 0
function setup(thread)
    thread:set("id", threads)
    threads = threads + 1
end
local n = 0
function request()
    n = n + 1
    return wrk.format(nil, wrk.path .. string.format("&min_memory_mib=1024.%d%07d", id, n))
end
LUA
# run NAME TOKEN PATH [CONNECTIONS] [uncached]
run() {
    local name="$1" token="$2" path="$3" connections="${4:-8}" script="$lua"
    [[ "${5:-}" == uncached ]] && script="$lua_uncached"
    curl -fsS -o /dev/null -H "Authorization: Bearer $token" "http://127.0.0.1:$port$path" ||
        die "$path does not answer 200"
    local out
    out=$(TOKEN="$token" wrk -t"$((connections < 2 ? 1 : 2))" -c"$connections" -d"${duration}s" --latency -s "$script" \
        "http://127.0.0.1:$port$path")
    local rps p50 p90 p99
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p90=$(awk '$1 == "90%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    printf '| %s | %s | %s | %s | %s |\n' "$name" "$p50" "$p90" "$p99" "$rps"
}
echo
echo "stored: $rows pod-hours of usage (a year, 2,000 GPUs); wrk -t2 -c8 -d${duration}s on $(nproc) cores"
echo
echo "| request | p50 | p90 | p99 | requests/s |"
echo "|---|---|---|---|---|"
run "team month bill (finance), GET /api/v1/bills/2026-10/teams/team03" "$finance" "/api/v1/bills/2026-10/teams/team03"
run "team month bill (team lead)" "$lead" "/api/v1/bills/2026-10/teams/team03"
run "all-teams usage summary of the month, GET /api/v1/usage?group_by=team" "$finance" \
    "/api/v1/usage?from=2026-09-30T16:00:00Z&to=2026-10-31T16:00:00Z&group_by=team"
run "month summary, GET /api/v1/bills/2026-10" "$finance" "/api/v1/bills/2026-10"
run "idle-waste list over 7 days, GET /api/v1/idle?to=…&hours=168, computed each time, one client (-c1)" \
    "$finance" "/api/v1/idle?to=2026-11-30T16:00:00Z&hours=168" 1 uncached
run "idle-waste list over 7 days, computed each time, 8 clients" "$finance" \
    "/api/v1/idle?to=2026-11-30T16:00:00Z&hours=168" 8 uncached
run "idle-waste list over 7 days, the same request again (served from the cache), 8 clients" "$finance" \
    "/api/v1/idle?to=2026-11-30T16:00:00Z&hours=168"
run "idle-waste list over 30 days (&hours=720), computed each time, one client" "$finance" \
    "/api/v1/idle?to=2026-11-30T16:00:00Z&hours=720" 1 uncached
run "month CSV export (100 teams), GET /api/v1/exports/2026-10/bills.csv, wrk -c1" "$finance" \
    "/api/v1/exports/2026-10/bills.csv" 1
run "month PDF statements (100 teams), GET /api/v1/exports/2026-10/statements.pdf, wrk -c1" "$finance" \
    "/api/v1/exports/2026-10/statements.pdf" 1
# A closed month's statement vs an open one's at 16 connections, then with a writer committing every 0.1 s (each
# commit moves the data version: the open month's answer is computed again, the closed one is served as frozen).
# 2026-09 is closed on the first run and stays closed (a 409 on later runs is expected); by override, as the
# benchmark's synthetic hours need not make a complete month.
curl -sS -o /dev/null -X POST -H "Authorization: Bearer $finance" -H 'content-type: application/json' \
    -d '{"mode": "showback", "unallocated": "kept_by_platform", "override": {"reason": "benchmark data"}}' \
    "http://127.0.0.1:$port/api/v1/bills/2026-09/close" || true
run "closed month's team statement (2026-09), 16 connections" "$finance" "/api/v1/bills/2026-09/teams/team03" 16
run "open month's team statement (2026-10), 16 connections" "$finance" "/api/v1/bills/2026-10/teams/team03" 16
(while :; do psql "$url" -Xqc "UPDATE teams SET owner = owner WHERE id = 'team00'" >/dev/null; sleep 0.1; done) &
writer=$!
run "closed month's team statement, 16 connections, a commit every 0.1 s" "$finance" \
    "/api/v1/bills/2026-09/teams/team03" 16
run "open month's team statement, 16 connections, a commit every 0.1 s" "$finance" \
    "/api/v1/bills/2026-10/teams/team03" 16
kill "$writer" 2>/dev/null || true
wait "$writer" 2>/dev/null || true
rm -f "$lua" "$lua_uncached"
echo
echo "cold (first request of a month, bills computed from the daily rollup), 11 months one after another:"
echo "median ${cold_median}s, max ${cold_max}s"
# The idle list's per-pod sums, side by side in one psql session: read through the per-pod daily rollup (as
# `cardhour serve` does, the SQL of src/db/waste.rs in spirit) vs straight from the hourly rows (the query of the
# release before the rollup). Same result; ten alternating runs each, median.
idle_sql() {
    local hours="$1" from to days_from days_to
    to='2026-11-30T16:00:00Z'
    from=$(date -u -d "$to - $hours hours" +%Y-%m-%dT%H:%M:%SZ)
    days_from=$(date -u -d "$(date -u -d "$from - 1 second + 1 day" +%Y-%m-%d)" +%Y-%m-%d)
    days_to=$(date -u -d "$to" +%Y-%m-%d)
    # prepared, as the server's queries are (sqlx prepares every statement)
    {
        cat <<'SQL'
PREPARE rollup(timestamptz, timestamptz, date, date) AS
WITH parts AS (SELECT cluster, namespace, pod, last_hour, team, gpu_model, cards, gpu_seconds, effective_gpu_seconds,
                      unmetered_gpu_seconds, peak_fb_used_mib FROM usage_pod_daily WHERE day >= $3 AND day < $4
               UNION ALL SELECT cluster, namespace, pod, hour, team, gpu_model, cards, gpu_seconds, effective_gpu_seconds,
                      unmetered_gpu_seconds, peak_fb_used_mib FROM usage_pod_hours(NULL, $1, $3::timestamp AT TIME ZONE 'UTC')
               UNION ALL SELECT cluster, namespace, pod, hour, team, gpu_model, cards, gpu_seconds, effective_gpu_seconds,
                      unmetered_gpu_seconds, peak_fb_used_mib FROM usage_pod_hours(NULL, $4::timestamp AT TIME ZONE 'UTC', $2)),
     w AS (SELECT DISTINCT ON (cluster, namespace, pod) cluster, namespace, pod, last_hour, team, gpu_model,
                  max(cards) OVER p, sum(gpu_seconds) OVER p, sum(effective_gpu_seconds) OVER p,
                  sum(unmetered_gpu_seconds) OVER p, max(peak_fb_used_mib) OVER p
           FROM parts WINDOW p AS (PARTITION BY cluster, namespace, pod ORDER BY last_hour DESC
                                   ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
           ORDER BY cluster, namespace, pod, last_hour DESC)
SELECT * FROM w;
-- the query of the release before the rollup
PREPARE hourly(timestamptz, timestamptz) AS
WITH w AS (SELECT cluster, namespace, pod, max(hour) AS last_hour, max(units * fraction), sum(gpu_seconds),
                  sum(effective_gpu_seconds), sum(unmetered_gpu_seconds), max(peak_fb_used_mib)
           FROM gpu_usage_hourly WHERE hour >= $1 AND hour < $2 GROUP BY cluster, namespace, pod)
SELECT w.*, l.team, l.gpu_model FROM w
CROSS JOIN LATERAL (SELECT x.team, x.gpu_model FROM gpu_usage_hourly x
                    WHERE x.cluster = w.cluster AND x.hour = w.last_hour AND x.namespace = w.namespace AND x.pod = w.pod
                    ORDER BY x.gpu_seconds DESC LIMIT 1) l;
\timing on
\o /dev/null
SQL
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            echo "EXECUTE rollup('$from', '$to', '$days_from', '$days_to');"
            echo "EXECUTE hourly('$from', '$to');"
        done
    } | psql "$url" -Xq 2>&1 | awk '/^Time:/ {print (n++ % 2 ? "hourly" : "rollup"), $2}' >"$times"
    local m1 m2
    m1=$(awk '$1 == "rollup" {print $2}' "$times" | sort -n | sed -n 5p)
    m2=$(awk '$1 == "hourly" {print $2}' "$times" | sort -n | sed -n 5p)
    awk -v a="$m1" -v b="$m2" 'BEGIN {printf "%.1f ms | %.1f ms | %.1f×", a, b, b / a}'
}
times=$(mktemp)
echo
echo "the idle list's per-pod sums in SQL, median of 10 alternating runs (psql):"
echo
echo "| window | daily rollup + partial days | straight from the hourly rows | ratio |"
echo "|---|---|---|---|"
echo "| 7 days | $(idle_sql 168) |"
echo "| 30 days | $(idle_sql 720) |"
rm -f "$times"
echo
echo "cold month PDF (2026-10, not requested before: bills, idle list, utilization, chart, 100 statements):"
echo "${pdf_cold}s, ${pdf_bytes} bytes, ${pdf_pages:-?} pages"
