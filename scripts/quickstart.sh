#!/usr/bin/env bash
# From a fresh clone to a GPU-hour table in one command.
#
#   bash scripts/quickstart.sh          # set up, build, ingest, print usage per team
#   bash scripts/quickstart.sh --stop   # stop the simulated cluster's Prometheus
#
# 1. PostgreSQL (installed and started if needed; DATABASE_URL, default postgres://postgres@127.0.0.1:5432/cardhour),
#    `cargo build --release`, `cardhour migrate`.
# 2. Without CARDHOUR_PROMETHEUS_URL: simulates a cluster (64 GPUs, 2 days at a 60 s scrape interval, ending on the
#    whole hour at least 4 h ago) into .cardhour/sim/{metrics.om,truth.json}, backfills it into .cardhour/sim/prom and
#    serves it with Prometheus on 127.0.0.1:9390 (kept running, and reused by the next run if it holds the same
#    data), ingests those 48 hours as cluster `sim` and prints `cardhour usage --group-by team` for them.
#    With CARDHOUR_PROMETHEUS_URL (and CARDHOUR_CLUSTER, default `default`): ingests that Prometheus for the last
#    complete UTC day instead, and prints the same table for it.
# Running it again redoes the same work with the same result (ingest replaces the hours it covers).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

SIM_DIR=.cardhour/sim
PROM_DIR=$SIM_DIR/prom
PROM_PORT=9390
SIM_GPUS=64
SIM_DAYS=2
SIM_SEED=42
SCRAPE_INTERVAL=60

case "${1:-}" in
"") ;;
--stop)
    stop_prometheus "$PROM_DIR"
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

if [[ -z "${CARDHOUR_PROMETHEUS_URL:-}" ]]; then
    cat >&2 <<EOF

The simulator's ground truth is in $SIM_DIR/truth.json; its Prometheus keeps running at $prom_url
(stop it with: bash scripts/quickstart.sh --stop). The binary is $BIN.
EOF
fi
