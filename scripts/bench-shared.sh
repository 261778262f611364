#!/usr/bin/env bash
# The shared-card benchmark (BENCHMARKS.md, issue 16): ingest cost per sample read on the shared-card simulation
# (`simulate --profile shared`: copies per replica, per-pod series, GFD labels) against the standard simulation of
# the same size, each backfilled into its own Prometheus and ingested by remote read into an empty database.
# The cost is the cardhour process's user + system CPU time (GNU time), so Prometheus' own work is not in it.
#
#   bash scripts/bench-shared.sh
#
# Environment: BENCH_GPUS (72), BENCH_HOURS (48), BENCH_SEED (16), CARDHOUR (target/release/cardhour),
# DATABASE_URL (postgres://postgres@127.0.0.1:5432/cardhour; databases cardhour_bench_<profile> are re-created),
# BENCH_PORT (9591, first port), BENCH_DIR (.cardhour/bench-shared).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh
ensure_postgres
ensure_prometheus_tools
GPUS="${BENCH_GPUS:-72}"
HOURS="${BENCH_HOURS:-48}"
SEED="${BENCH_SEED:-16}"
BIN="${CARDHOUR:-target/release/cardhour}"
PORT="${BENCH_PORT:-9591}"
DIR="${BENCH_DIR:-$PWD/.cardhour/bench-shared}"
mkdir -p "$DIR"
END="$(date -u -d "$(date -u +%Y-%m-%dT%H:00:00Z) - 4 hours" +%Y-%m-%dT%H:00:00Z)"
START="$(date -u -d "$END - $HOURS hours" +%Y-%m-%dT%H:00:00Z)"
trap 'for p in standard shared; do stop_prometheus "$DIR/prom-$p" || true; done' EXIT
printf 'profile\tsamples\tcpu_s\tus_per_sample\n' >"$DIR/results.tsv"
for profile in standard shared; do
    "$BIN" simulate --profile "$profile" --gpus "$GPUS" --hours "$HOURS" --seed "$SEED" --end "$END" \
        --out "$DIR/sim-$profile" >/dev/null
    backfill_and_start_prometheus "$DIR/sim-$profile/metrics.om" "$DIR/prom-$profile" "$PORT"
    db="cardhour_bench_$profile"
    url="$(_url_with_db "$DATABASE_URL" "$db")"
    psql "$(_url_with_db "$DATABASE_URL" postgres)" -XqAt -c "drop database if exists $db with (force)" -c "create database $db" >/dev/null
    DATABASE_URL="$url" "$BIN" migrate >/dev/null
    /usr/bin/time -f '%U %S' -o "$DIR/time-$profile" env DATABASE_URL="$url" "$BIN" ingest --cluster bench \
        --prometheus "http://127.0.0.1:$PORT" --from "$START" --to "$END" --source remote-read --format json \
        >"$DIR/ingest-$profile.json"
    samples="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["samples_read"])' "$DIR/ingest-$profile.json")"
    cpu="$(awk '{ print $1 + $2 }' "$DIR/time-$profile")"
    printf '%s\t%s\t%s\t%s\n' "$profile" "$samples" "$cpu" "$(awk -v c="$cpu" -v s="$samples" 'BEGIN { printf "%.4f", 1e6 * c / s }')" >>"$DIR/results.tsv"
    stop_prometheus "$DIR/prom-$profile"
    PORT=$((PORT + 1))
done
column -t "$DIR/results.tsv"
awk 'NR == 2 { s = $4 } NR == 3 { printf "ratio shared / standard per sample: %.3f\n", $4 / s }' "$DIR/results.tsv"
