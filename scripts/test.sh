#!/usr/bin/env bash
# The whole check, as CI runs it (.ci/run): formatting, clippy with warnings as errors, every test, then schemathesis
# against a test server.
#
#   bash scripts/test.sh [extra `cargo test` arguments, e.g. a test name filter]
#
# Installs/starts what the tests need (PostgreSQL; prometheus + promtool, which the integration tests start
# themselves on free loopback ports) and exports DATABASE_URL (default postgres://postgres@127.0.0.1:5432/cardhour).
# Builds with SQLX_OFFLINE=true: sqlx's query macros read .sqlx/ and need no database at compile time
# (after changing a query, run scripts/sqlx-prepare.sh). Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

started=$SECONDS
step() { log "$* [$((SECONDS - started)) s]"; }

_have cargo || die "cargo not found: install Rust 1.85 or newer (rustup)"
cargo fmt --version >/dev/null 2>&1 || die "rustfmt missing: rustup component add rustfmt"
cargo clippy --version >/dev/null 2>&1 || die "clippy missing: rustup component add clippy"

step "PostgreSQL"
ensure_postgres
step "Prometheus tools"
ensure_prometheus_tools
# VictoriaMetrics (vm-export source) and vmctl, which copies a promtool-built TSDB into it
ensure_apt_packages victoria-metrics
step "PDF tools (a CJK font and its fallbacks for statements, pdftotext for their tests)"
ensure_apt_packages fonts-noto-cjk fonts-dejavu-core fonts-symbola poppler-utils
# the portal's browser tests: headless Chromium driven over WebDriver (chromedriver)
ensure_apt_packages chromium chromium-driver

step "contract tools (openapi-spec-validator, openapi-python-client, schemathesis; scripts/contract-venv.sh)"
bash scripts/contract-venv.sh >/dev/null

# tests/deploy_kubernetes.rs: kubernetes-validate (PyPI) and the CRDs' validators (npm), installed from the registries
step "Kubernetes manifest validators (kubernetes-validate, the CRDs' schemas; scripts/kube-tools.sh)"
bash scripts/kube-tools.sh >/dev/null

export SQLX_OFFLINE=true
# CI builds once from a clean clone: incremental caches would only add gigabytes to a disk it shares (a CI run
# failed with "No space left on device" while linking the test binaries).
if [[ "${CI:-}" == true ]]; then
    export CARGO_INCREMENTAL=0
    # A CI cache, as hosted CI keeps ~/.cargo and target/ between runs: the dependencies compiled (and checked for
    # clippy) by an earlier run on this machine are reused from a build directory outside the clone, so a run
    # compiles cardhour itself, not the ~400 crates under it again (13 of a cold run's 26 minutes on 2 cores). The
    # earlier clones' own artifacts are removed first (each clone's path makes new ones), so the directory holds one
    # set of dependencies and one cardhour. Cargo's fingerprints decide what is stale; CARDHOUR_CI_COLD=1 (or a
    # CARGO_TARGET_DIR of the caller's) builds elsewhere.
    if [[ -z "${CARGO_TARGET_DIR:-}" && "${CARDHOUR_CI_COLD:-}" != 1 ]]; then
        export CARGO_TARGET_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/cardhour/ci-target"
        mkdir -p "$CARGO_TARGET_DIR"
        step "CI build cache at $CARGO_TARGET_DIR ($(du -sh "$CARGO_TARGET_DIR" 2>/dev/null | cut -f1))"
        cargo clean -p cardhour >/dev/null 2>&1 || true
    fi
fi
# Every CARDHOUR_* setting of the caller's shell stays out of the tests.
while IFS= read -r var; do unset "$var"; done < <(compgen -e | grep '^CARDHOUR_' | grep -vE '^CARDHOUR_ROOT$' || true)

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --all-targets -- -D warnings

log_file="$(mktemp)"
trap 'rm -f "$log_file"' EXIT
# cargo-nextest runs the test binaries side by side (.config/nextest.toml); plain cargo test runs them one after
# the other, which the suite's waits on real servers make minutes longer.
if cargo nextest --version >/dev/null 2>&1; then
    step "cargo nextest run --all-targets"
    if cargo nextest run --all-targets "$@" 2>&1 | tee "$log_file"; then status=0; else status=1; fi
else
    step "cargo test --all-targets (cargo-nextest not installed)"
    # one process for every test: the one that sets the font's environment variable runs alone, after the rest
    if cargo test --all-targets "$@" -- --skip pdf_fonts:: 2>&1 | tee "$log_file" \
        && cargo test --test suite pdf_fonts:: 2>&1 | tee -a "$log_file"; then status=0; else status=1; fi
fi

# Doc tests only when some doc comment has a Rust code block (building for them costs minutes on 2 cores).
if [[ $status -eq 0 && -f src/lib.rs ]] && grep -rqE '^[[:space:]]*//[/!][[:space:]]*```([[:space:]]*$|rust)' src; then
    step "cargo test --doc"
    if cargo test --doc "$@" 2>&1 | tee -a "$log_file"; then status=0; else status=1; fi
fi

# schemathesis with every check against a test server with data (tests/api_fuzz.rs, schemathesis.toml): the
# contract's own gate, after the other tests (it runs only when they passed).
if [[ $status -eq 0 ]]; then
    step "schemathesis (cargo test --test suite api_fuzz:: -- --ignored)"
    if cargo test --test suite api_fuzz:: -- --ignored --nocapture 2>&1 | tee -a "$log_file"; then status=0; else status=1; fi
fi

# One closing line for the whole suite: cargo prints one `test result` per test binary, the last of which may
# well be an empty one.
# (`|| true`: a grep that finds nothing, e.g. no "failed" in nextest's summary, is not a failure of the suite)
count() { { grep -oE "$1" "$log_file" || true; } | { grep -oE "$2" || true; } | awk -v f="$3" '{s += $f} END {print s + 0}'; }
passed=$(count 'test result: [a-zA-Z]+\. [0-9]+ passed' '[0-9]+ passed' 1)
failed=$(count 'test result: .*' '[0-9]+ failed' 1)
# nextest's summary line: "Summary [ 387.1s] 436 tests run: 436 passed (1 slow), 3 skipped"
passed=$((passed + $(count 'tests run: [0-9]+ passed' '[0-9]+ passed' 1)))
failed=$((failed + $(count 'tests run: .*' '[0-9]+ failed' 1)))
((status == 0)) || die "cargo test failed"
step "all checks passed"
echo "tests: $passed passed, $failed failed"
