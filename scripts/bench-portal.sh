#!/usr/bin/env bash
# Portal page benchmark (issue 8): with a year of a 2,000-GPU cluster stored (the API benchmark's data,
# scripts/bench-seed.sh), how fast do the home pages and a team statement answer to a signed-in browser?
# Measured with wrk (p50/p90/p99) over HTTP with a real session cookie from the login form.
#
#   bash scripts/bench-portal.sh            # seeds .cardhour/bench-api's database once (shared with bench-api.sh)
#   BENCH_SECONDS=20 bash scripts/bench-portal.sh
#
# Environment: BENCH_SECONDS (10), BENCH_CONNECTIONS (8), BENCH_WARMUP (0 s of wrk before each measured run),
# BENCH_DB (cardhour_bench_api), BENCH_PAGES (an extended regex: only the pages whose name matches),
# BENCH_PORT (18081). Each row also gives the server's CPU seconds over the measured run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

ensure_postgres
ensure_apt_packages wrk
export SQLX_OFFLINE=true
cargo build --release --quiet
bin=target/release/cardhour

db=${BENCH_DB:-cardhour_bench_api}
admin_url="$(_url_with_db "$DATABASE_URL" postgres)"
url="$(_url_with_db "$DATABASE_URL" "$db")"
port=${BENCH_PORT:-18081}
duration=${BENCH_SECONDS:-10}
# shellcheck source=scripts/bench-seed.sh
source scripts/bench-seed.sh

password="bench-$(head -c 9 /dev/urandom | base64 | tr -d '/+=')"
set_user() { # USER ROLE [--team T]
    local user="$1" role="$2"
    shift 2
    if DATABASE_URL="$url" "$bin" user list | grep -qE "^$user[[:space:]]"; then
        printf '%s\n' "$password" | DATABASE_URL="$url" "$bin" user set-password "$user" --password-stdin >/dev/null
    else
        printf '%s\n' "$password" |
            DATABASE_URL="$url" "$bin" user create --username "$user" --role "$role" "$@" --password-stdin >/dev/null
    fi
}
set_user bench-finance finance
set_user bench-lead team_lead --team team03

DATABASE_URL="$url" CARDHOUR_LOG=warn "$bin" serve --listen "127.0.0.1:$port" &
server=$!
jar=$(mktemp)
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; rm -f "$jar"' EXIT
until curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null; do sleep 0.2; done
base="http://127.0.0.1:$port"

# login USER: the session cookie's value after signing in through the form (its CSRF token included)
login() {
    : >"$jar"
    local csrf
    csrf=$(curl -fsS -c "$jar" -b "$jar" "$base/login" | grep -oE 'name="csrf" value="[^"]+"' | head -1 | cut -d'"' -f4)
    curl -fsS -o /dev/null -c "$jar" -b "$jar" --data-urlencode "username=$1" --data-urlencode "password=$password" \
        --data-urlencode "csrf=$csrf" "$base/login"
    awk '$6 == "cardhour_session" {print $7}' "$jar" | tail -1
}
finance=$(login bench-finance)
lead=$(login bench-lead)
[[ -n "$finance" && -n "$lead" ]] || die "could not sign in"

# the cold first requests: each month's bills are computed on the first page that needs them
cold() { curl -fsS -o /dev/null -w '%{time_total}' -H "Cookie: cardhour_session=$1" "$base$2"; }
cold_finance_home=$(cold "$finance" "/?month=2026-10")
cold_lead_home=$(cold "$lead" "/?month=2026-08")

lua=$(mktemp --suffix .lua)
cat >"$lua" <<'LUA'
wrk.headers["Cookie"] = "cardhour_session=" .. os.getenv("SESSION")
wrk.headers["Accept-Language"] = "zh-CN"
LUA
# the server's user + system CPU seconds so far (/proc/PID/stat fields 14 and 15, in clock ticks)
server_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$server/stat"; }
# run NAME SESSION PATH [CONNECTIONS]
run() {
    local name="$1" session="$2" path="$3" connections="${4:-${BENCH_CONNECTIONS:-8}}"
    [[ -z "${BENCH_PAGES:-}" ]] || grep -qE "$BENCH_PAGES" <<<"$name" || return 0
    local status
    status=$(curl -sS -o /dev/null -w '%{http_code}' -H "Cookie: cardhour_session=$session" "$base$path")
    [[ "$status" == 200 ]] || die "$path answers $status, not 200"
    if [[ "${BENCH_WARMUP:-0}" -gt 0 ]]; then
        SESSION="$session" wrk -t"$((connections < 2 ? 1 : 2))" -c"$connections" -d"${BENCH_WARMUP}s" -s "$lua" \
            "$base$path" >/dev/null
    fi
    local out cpu0 cpu1
    cpu0=$(server_cpu)
    out=$(SESSION="$session" wrk -t"$((connections < 2 ? 1 : 2))" -c"$connections" -d"${duration}s" --latency \
        -s "$lua" "$base$path")
    local rps p50 p90 p99 non2xx
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p90=$(awk '$1 == "90%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    cpu1=$(server_cpu)
    non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
    [[ -z "$non2xx" ]] || die "$path: $non2xx answers were not 2xx under load"
    printf '| %s | %s | %s | %s | %s | %s |\n' "$name" "$p50" "$p90" "$p99" "$rps" \
        "$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { printf "%.1f", b - a }')"
}
rows=$(psql "$url" -XqAt -c "select count(*) from gpu_usage_hourly")
echo
echo "stored: $rows pod-hours of usage (2,000 GPUs); wrk -t2 -c${BENCH_CONNECTIONS:-8} -d${duration}s" \
    "(after ${BENCH_WARMUP:-0} s of warm-up) on $(nproc) cores, signed in; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| page | p50 | p90 | p99 | requests/s | server CPU s |"
echo "|---|---|---|---|---|---|"
run "finance home, the month at a glance, \`/?month=2026-10\`" "$finance" "/?month=2026-10"
run "finance home, the current month, \`/\`" "$finance" "/"
run "team lead home (own team, 12-month trend, idle and low-efficiency pods), \`/?month=2026-10\`" "$lead" "/?month=2026-10"
run "team lead home, the current month, \`/\`" "$lead" "/"
run "team home seen by finance, \`/teams/team03?month=2026-10\`" "$finance" "/teams/team03?month=2026-10"
run "team statement (finance), \`/bills/2026-10/teams/team03\`" "$finance" "/bills/2026-10/teams/team03"
run "team statement (team lead), \`/bills/2026-10/teams/team03\`" "$lead" "/bills/2026-10/teams/team03"
run "month's teams, \`/bills/2026-10\`" "$finance" "/bills/2026-10"
run "bills list (13 months with status), \`/bills\`" "$finance" "/bills"
run "utilization report with heatmap, \`/reports/utilization?month=2026-10\`" "$finance" "/reports/utilization?month=2026-10"
run "efficiency tiers, \`/reports/tiers?month=2026-10\`" "$finance" "/reports/tiers?month=2026-10"
rm -f "$lua"
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "cold first requests: finance home of 2026-10 ${cold_finance_home}s; team lead home of 2026-08 (its 12 months'"
echo "bills computed, none before) ${cold_lead_home}s"
