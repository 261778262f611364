#!/usr/bin/env bash
# Regenerate .sqlx/ (sqlx's offline query data) without sqlx-cli, after adding or changing a query! macro or a
# migration. Commit the result: builds and CI use SQLX_OFFLINE=true and read only .sqlx/.
#
#   bash scripts/sqlx-prepare.sh
#
# How: a scratch database (cardhour_sqlx_prepare, or $SQLX_PREPARE_DB, on the server of DATABASE_URL) is recreated and migrated with psql
# from migrations/*.sql; every .rs file is touched so the macros expand again; `cargo check --all-targets` runs with
# SQLX_OFFLINE=false, DATABASE_URL=<scratch db> and SQLX_OFFLINE_DIR=<a new directory>, into which sqlx 0.8's macros
# write one query-<hash>.json per query; on success that directory replaces .sqlx/ (so stale entries disappear).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

ensure_postgres
scratch_db="${SQLX_PREPARE_DB:-cardhour_sqlx_prepare}"
admin_url="$(_url_with_db "$DATABASE_URL" postgres)"
scratch_url="$(_url_with_db "$DATABASE_URL" "$scratch_db")"

log "recreating database $scratch_db"
PGOPTIONS="-c client_min_messages=warning" psql "$admin_url" -XqAt -v ON_ERROR_STOP=1 \
    -c "drop database if exists $scratch_db with (force)" >/dev/null
psql "$admin_url" -XqAt -v ON_ERROR_STOP=1 -c "create database $scratch_db" >/dev/null

# sqlx migrations: <version>_<description>.sql, or .up.sql/.down.sql pairs; applied in version order, each in a
# transaction unless its first line is `-- no-transaction` (as sqlx does).
shopt -s nullglob
migrations=()
for f in migrations/*.sql; do
    [[ "$f" == *.down.sql ]] || migrations+=("$f")
done
shopt -u nullglob
if [[ ${#migrations[@]} -gt 0 ]]; then
    while IFS= read -r f; do
        log "applying $f"
        if head -n 1 "$f" | grep -q -- '-- no-transaction'; then
            psql "$scratch_url" -Xq -v ON_ERROR_STOP=1 -f "$f" >/dev/null
        else
            psql "$scratch_url" -Xq -v ON_ERROR_STOP=1 -1 -f "$f" >/dev/null
        fi
    done < <(printf '%s\n' "${migrations[@]}" | sort -t/ -k2 -V)
else
    warn "no migrations/*.sql: the scratch database is empty"
fi

out="$(mktemp -d "${TMPDIR:-/tmp}/cardhour-sqlx.XXXXXX")"
trap 'rm -rf "$out"' EXIT
# The macros read DATABASE_URL at expansion time, which cargo does not track: make every crate expand again.
find src tests benches examples -name '*.rs' -exec touch {} + 2>/dev/null || true

log "cargo check --all-targets (SQLX_OFFLINE=false, writing query data)"
SQLX_OFFLINE=false SQLX_OFFLINE_DIR="$out" DATABASE_URL="$scratch_url" cargo check --all-targets

mkdir -p .sqlx
rm -f .sqlx/query-*.json
shopt -s nullglob
files=("$out"/query-*.json)
shopt -u nullglob
if [[ ${#files[@]} -gt 0 ]]; then
    cp "${files[@]}" .sqlx/
fi
log "wrote ${#files[@]} query files to .sqlx/"

psql "$admin_url" -XqAt -c "drop database if exists $scratch_db with (force)" >/dev/null || true
