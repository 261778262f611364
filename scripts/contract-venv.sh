#!/usr/bin/env bash
# The contract tools (openapi-spec-validator, openapi-python-client, schemathesis) in a venv of their own:
#
#   bash scripts/contract-venv.sh        # prints the venv's path on stdout
#
# Python >= 3.12 (schemathesis 4 needs it) from pyenv (~/.pyenv/versions/3.12*, else 3.13*), or `python3` when it
# is new enough. Versions are pinned in scripts/contract-requirements.txt; the venv is made again when that file
# changes (its checksum is kept in the venv). Lives under .cardhour/ (git-ignored), so a clean clone makes it once.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

venv="${CARDHOUR_CONTRACT_VENV:-$CARDHOUR_ROOT/.cardhour/contract-venv}"
reqs="$CARDHOUR_ROOT/scripts/contract-requirements.txt"
want="$(sha256sum <"$reqs" | cut -d' ' -f1)"

if [[ -x "$venv/bin/python" && "$(cat "$venv/.requirements.sha256" 2>/dev/null)" == "$want" ]]; then
    echo "$venv"
    exit 0
fi

python="$(find_python)"

log "making the contract venv at $venv with $python"
rm -rf "$venv"
mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir -r "$reqs" >&2 ||
    die "pip install -r $reqs failed"
echo "$want" >"$venv/.requirements.sha256"
echo "$venv"
