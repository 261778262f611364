#!/usr/bin/env bash
# From a fresh clone to a GPU-hour table in one command.
#
#   bash scripts/quickstart.sh          # set up, build, ingest, print usage per team
#   bash scripts/quickstart.sh --stop   # stop the simulated cluster's Prometheus
#
# 1. PostgreSQL (installed and started if needed; DATABASE_URL, default postgres://postgres@127.0.0.1:5432/cardhour),
#    the fonts PDF statements are set in (fonts-noto-cjk, with fonts-dejavu-core and fonts-symbola for symbols and
#    emoji, as scripts/test.sh installs them), `cargo build --release`, `cardhour migrate`.
# 2. Without CARDHOUR_PROMETHEUS_URL: simulates a cluster (64 GPUs, 7 days at a 120 s scrape interval, ending on the
#    whole hour at least 4 h ago) into .cardhour/sim/{metrics.om,truth.json}, backfills it into .cardhour/sim/prom and
#    serves it with Prometheus on 127.0.0.1:9390 (kept running, and reused by the next run if it holds the same
#    data), ingests those hours as cluster `sim` and prints `cardhour usage --group-by team` for them.
#    With CARDHOUR_PROMETHEUS_URL (and CARDHOUR_CLUSTER, default `default`): ingests that Prometheus for the last
#    complete UTC day instead, and prints the same table for it.
# 3. The portal: a rate per GPU model the usage has (where none is set), users `finance` and `lead` (a team lead of
#    the first team) with new passwords, and `cardhour serve` on $CARDHOUR_LISTEN (default 127.0.0.1:8080) kept
#    running in the background (log in .cardhour/serve/log); prints the URL and how to log in.
# Running it again redoes the same work with the same result (ingest replaces the hours it covers).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

SIM_DIR=.cardhour/sim
PROM_DIR=$SIM_DIR/prom
PROM_PORT=9390
SIM_GPUS=64
# a week, so that the previous month has bills (its last days) and the current one a forecast
SIM_DAYS=7
SIM_SEED=42
SCRAPE_INTERVAL=120
PORTAL_LISTEN="${CARDHOUR_LISTEN:-127.0.0.1:8080}"
SERVE_DIR=.cardhour/serve

case "${1:-}" in
"") ;;
--stop)
    stop_prometheus "$PROM_DIR"
    stop_pidfile "$SERVE_DIR/pid"
    exit 0
    ;;
-h | --help)
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
    exit 0
    ;;
*) die "unknown argument: $1 (try --help)" ;;
esac

iso() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }

_have cargo || die "cargo not found: install Rust 1.85 or newer (rustup)"
ensure_postgres
# PDF statements are set in Noto Sans CJK with DejaVu Sans and Symbola as fallbacks: without them a statement PDF
# cannot be made (the health answer says so; a font installed later is picked up without a restart)
log "fonts for PDF statements"
ensure_apt_packages fonts-noto-cjk fonts-dejavu-core fonts-symbola

log "cargo build --release"
cargo build --release
target_dir="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
BIN="${target_dir:-$PWD/target}/release/cardhour"
[[ -x "$BIN" ]] || die "no binary at $BIN after cargo build --release"

log "cardhour migrate"
"$BIN" migrate

if [[ -z "${CARDHOUR_PROMETHEUS_URL:-}" ]]; then
    ensure_prometheus_tools
    now=$(date -u +%s)
    end=$((now / 3600 * 3600 - 4 * 3600))
    start=$((end - SIM_DAYS * 86400))
    from="$(iso "$start")"
    to="$(iso "$end")"

    log "simulating $SIM_GPUS GPUs for $SIM_DAYS days ending $to (seed $SIM_SEED)"
    mkdir -p "$SIM_DIR"
    rm -rf "$SIM_DIR/new"
    "$BIN" simulate --gpus "$SIM_GPUS" --days "$SIM_DAYS" --scrape-interval "$SCRAPE_INTERVAL" \
        --seed "$SIM_SEED" --end "$to" --out "$SIM_DIR/new"
    [[ -f "$SIM_DIR/new/metrics.om" ]] || die "cardhour simulate wrote no $SIM_DIR/new/metrics.om"
    mv -f "$SIM_DIR/new/metrics.om" "$SIM_DIR/new/truth.json" "$SIM_DIR/"
    rm -rf "$SIM_DIR/new"

    sha="$(sha256sum <"$SIM_DIR/metrics.om" | cut -d' ' -f1)"
    if prometheus_running "$PROM_DIR" "$PROM_PORT" && [[ "$(cat "$PROM_DIR/source.sha256" 2>/dev/null)" == "$sha" ]]; then
        log "reusing the running Prometheus on 127.0.0.1:$PROM_PORT (same data)"
    else
        backfill_and_start_prometheus "$SIM_DIR/metrics.om" "$PROM_DIR" "$PROM_PORT"
    fi
    cluster=sim
    prom_url="http://127.0.0.1:$PROM_PORT"
    # a new simulation is a new world: it replaces the hours an earlier one stored, even where it holds fewer rows
    # (audited; `cardhour ingest undo RUN` would put them back)
    replace=(--replace-smaller)
else
    # The last complete UTC day.
    end=$(($(date -u +%s) / 86400 * 86400))
    from="$(iso $((end - 86400)))"
    to="$(iso "$end")"
    cluster="${CARDHOUR_CLUSTER:-default}"
    prom_url="$CARDHOUR_PROMETHEUS_URL"
    replace=()
fi

log "cardhour ingest --cluster $cluster --prometheus $prom_url --from $from --to $to"
"$BIN" ingest --cluster "$cluster" --prometheus "$prom_url" --from "$from" --to "$to" "${replace[@]}"

log "cardhour usage --from $from --to $to --group-by team --cluster $cluster"
"$BIN" usage --from "$from" --to "$to" --group-by team --format table --cluster "$cluster"

# --- the portal ---------------------------------------------------------------------------------------------------
stop_pidfile "$SERVE_DIR/pid"
mkdir -p "$SERVE_DIR"
log "cardhour serve --listen $PORTAL_LISTEN (log: $SERVE_DIR/log)"
nohup "$BIN" serve --listen "$PORTAL_LISTEN" >"$SERVE_DIR/log" 2>&1 &
echo $! >"$SERVE_DIR/pid"
base="http://$PORTAL_LISTEN"
for _ in $(seq 1 50); do
    curl -fsS "$base/readyz" >/dev/null 2>&1 && break
    kill -0 "$(cat "$SERVE_DIR/pid")" 2>/dev/null || die "cardhour serve stopped: $(tail -5 "$SERVE_DIR/log")"
    sleep 0.2
done
curl -fsS "$base/readyz" >/dev/null || die "cardhour serve is not ready on $base: $(tail -5 "$SERVE_DIR/log")"
grep -q "PDF exports will fail" "$SERVE_DIR/log" && warn "$(grep -m1 "PDF exports will fail" "$SERVE_DIR/log")"

# rates: one per GPU model of the ingested usage that has none yet, from the first day of the first month (an
# admin token for these calls only, revoked at once)
token="$("$BIN" token create --name quickstart --role admin --expires-in 10m 2>/dev/null)"
month_start="$(date -u -d "$from" +%Y-%m-01)"
rates="$(curl -fsS -H "Authorization: Bearer $token" "$base/api/v1/rates")"
"$BIN" usage --from "$from" --to "$to" --group-by model --format csv --cluster "$cluster" | tail -n +2 |
    cut -d, -f1 | sort -u | while IFS= read -r model; do
    [[ -n "$model" && "$model" != unknown ]] || continue
    grep -q "\"gpu_model\":\"$model\"" <<<"$rates" && continue
    case "$model" in
    *B200*) rate=55 ;; *H200*) rate=38 ;; *H100* | *H800*) rate=30 ;; *A100* | *A800*) rate=14 ;;
    *L40S*) rate=9 ;; *A30*) rate=6 ;; *L4*) rate=3.5 ;; *T4*) rate=2 ;; *) rate=10 ;;
    esac
    # 409: a rate from that day exists already (stored under the model's pricing key, which the grep above
    # cannot see: an earlier run set it)
    code="$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" -H 'content-type: application/json' \
        -d "{\"gpu_model\":\"$model\",\"effective_from\":\"$month_start\",\"rate\":\"$rate\"}" "$base/api/v1/rates")"
    case "$code" in
    201) log "rate of $model: ¥$rate per card-hour from $month_start" ;;
    409) ;;
    *) warn "could not set the rate of $model (HTTP $code)" ;;
    esac
done
# the simulated cluster's Kueue ClusterQueues belong to the teams whose namespaces they queue (SPEC §10)
if [[ "$cluster" == sim ]]; then
    for pair in cq-nlp:nlp cq-vision:vision; do
        queue="${pair%%:*}" queue_team="${pair##*:}"
        code="$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" \
            -H 'content-type: application/json' -d "{\"queue_kind\":\"cluster_queue\",\"queue\":\"$queue\",\"team_id\":\"$queue_team\",\"valid_from\":\"$month_start\"}" \
            "$base/api/v1/queue-mappings")"
        case "$code" in
        201) log "queue $queue belongs to team $queue_team from $month_start" ;;
        409) ;; # mapped by an earlier run
        *) warn "could not map queue $queue to team $queue_team (HTTP $code)" ;;
        esac
    done
fi
# reserved-quota billing's terms (SPEC §10): each simulated guarantee priced as the cluster's most used GPU model at
# 0.8 of its rate, so a draft previewed under `reserved` is priced (the quota metrics never say which model)
if [[ "$cluster" == sim ]]; then
    top_model="$("$BIN" usage --from "$from" --to "$to" --group-by model --format csv --cluster "$cluster" | tail -n +2 |
        grep -v '^unknown,' | sort -t, -k2 -g -r | head -1 | cut -d, -f1 || true)"
    scopes="$(for m in "$(date -u -d "$from" +%Y-%m)" "$(date -u -d "$to" +%Y-%m)"; do
        curl -fsS -H "Authorization: Bearer $token" "$base/api/v1/reports/quotas/$m"
    done | grep -oE '"scope_kind":"[a-z_]+","scope":"[^"]+"' | sed -E 's/"scope_kind":"([a-z_]+)","scope":"([^"]+)"/\1 \2/' |
        sort -u || true)"
    while read -r scope_kind scope; do
        [[ -n "$scope" && -n "$top_model" ]] || continue
        code="$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $token" \
            -H 'content-type: application/json' -d "{\"scope_kind\":\"$scope_kind\",\"scope\":\"$scope\",\"gpu_model\":\"$top_model\",\"factor\":\"0.8\",\"valid_from\":\"$month_start\"}" \
            "$base/api/v1/reservation-terms")"
        case "$code" in
        201) log "reservation terms of $scope_kind $scope: $top_model × 0.8 from $month_start" ;;
        409) ;; # stated by an earlier run
        *) warn "could not state the reservation terms of $scope_kind $scope (HTTP $code)" ;;
        esac
    done <<<"$scopes"
fi
# finance codes (SPEC §11): each simulated team's cost centre, GL account and legal entity from the month's start, as a
# CMDB would give them, so every statement line and export shows them (an earlier run's are found as stored: 200)
if [[ "$cluster" == sim ]]; then
    n=1000
    for t in nlp vision recsys platform; do
        n=$((n + 1))
        code="$(curl -sS -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $token" \
            -H 'content-type: application/json' \
            -d "{\"valid_from\":\"$month_start\",\"cost_centre\":\"CC-$n\",\"gl_account\":\"6602.01\",\"legal_entity\":\"示例科技有限公司\"}" \
            "$base/api/v1/teams/$t/finance-codes")"
        case "$code" in
        201) log "finance codes of team $t from $month_start: cost centre CC-$n, GL account 6602.01" ;;
        200 | 404) ;; # set by an earlier run, or no such team in this simulation
        *) warn "could not set the finance codes of team $t (HTTP $code)" ;;
        esac
    done
fi
"$BIN" token list --format json | tr -d ' \n' | grep -oE '\{"id":[0-9]+,"name":"quickstart"' | grep -oE '[0-9]+' |
    while IFS= read -r id; do "$BIN" token revoke "$id" >/dev/null 2>&1 || true; done

# users: finance, and the lead of the first team (new passwords every run)
team="$("$BIN" usage --from "$from" --to "$to" --group-by team --format csv --cluster "$cluster" | tail -n +2 |
    cut -d, -f1 | grep -v '^unassigned$' | head -1 || true)"
new_password() { head -c 12 /dev/urandom | base64 | tr -d '/+=' | cut -c1-14; }
set_user() { # USER ROLE [--team T]: creates the user, or gives it a new password; prints the password
    local user="$1" role="$2" password
    shift 2
    password="$(new_password)"
    if "$BIN" user list | grep -qE "^$user[[:space:]]"; then
        printf '%s\n' "$password" | "$BIN" user set-password "$user" --password-stdin >/dev/null
    else
        printf '%s\n' "$password" | "$BIN" user create --username "$user" --role "$role" "$@" --password-stdin >/dev/null
    fi
    echo "$password"
}
finance_password="$(set_user finance finance)"
logins="  finance:                 user finance, password $finance_password"
if [[ -n "$team" ]]; then
    lead_password="$(set_user lead team_lead --team "$team")"
    logins+=$'\n'"  team lead of \"$team\":    user lead, password $lead_password"
fi

cat >&2 <<EOF

The portal runs at $base — stop it and the simulated Prometheus with: bash scripts/quickstart.sh --stop
$logins
The REST API is under $base/api/v1 (Swagger UI: $base/swagger-ui; tokens: cardhour token create).
EOF
if [[ -z "${CARDHOUR_PROMETHEUS_URL:-}" ]]; then
    cat >&2 <<EOF
The simulator's ground truth is in $SIM_DIR/truth.json; its Prometheus keeps running at $prom_url.
The binary is $BIN.
EOF
fi
