#!/usr/bin/env bash
# The longer differential exactness harness (tests/exactness.rs, `random_seeds_longer_span`): a random seed each
# run (EXACTNESS_SEED fixes it), 30 hours across a month's start (EXACTNESS_HOURS), two nodes of each of the
# exactness profile's 19 types (EXACTNESS_GPUS=304), read by every path and checked per pod-hour against the truth.
#
#   bash scripts/exactness.sh [runs]      (default 1; each prints its seed and the table of errors)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

runs=${1:-1}
ensure_postgres
ensure_prometheus_tools
ensure_apt_packages victoria-metrics
export SQLX_OFFLINE=true
for ((i = 1; i <= runs; i++)); do
    log "exactness run $i of $runs"
    cargo test --test suite exactness::random_seeds_longer_span -- --ignored --nocapture
done
