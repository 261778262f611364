#!/usr/bin/env bash
# The tools tests/deploy_kubernetes.rs validates the Kubernetes manifests with, installed from the package
# registries only (nothing is downloaded when they run):
#
#   bash scripts/kube-tools.sh     # prints KUBE_PYTHON=<venv python> and KUBE_CRDS=<dir with validate.mjs>
#
# - a venv with kubernetes-validate (scripts/kube-requirements.txt): the strict JSON schemas of Kubernetes releases,
#   shipped inside the PyPI package;
# - scripts/kube-crds/ installed with `npm ci` (package-lock.json): validators and TypeScript types generated from
#   the CRDs of the Prometheus Operator and CloudNativePG, for the custom resources (scripts/kube-crds/validate.mjs).
# Each is made again when its pins change. Both live under .cardhour/ (git-ignored). Needs Python >= 3.12 (pyenv),
# Node.js and npm (Debian's nodejs and npm are installed when missing), and kubectl for `kubectl kustomize`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

tools="${CARDHOUR_KUBE_TOOLS:-$CARDHOUR_ROOT/.cardhour/kube-tools}"
mkdir -p "$tools"

# --- kubernetes-validate ------------------------------------------------------------------------------------------
venv="$tools/venv"
reqs="$CARDHOUR_ROOT/scripts/kube-requirements.txt"
want="$(sha256sum <"$reqs" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" || "$(cat "$venv/.requirements.sha256" 2>/dev/null)" != "$want" ]]; then
    python="$(find_python)"
    log "making the Kubernetes validation venv at $venv with $python"
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir -r "$reqs" >&2 ||
        die "pip install -r $reqs failed"
    echo "$want" >"$venv/.requirements.sha256"
fi

# --- the CRDs' validators -----------------------------------------------------------------------------------------
_have node npm || ensure_apt_packages nodejs npm
crds="$tools/crds"
lock="$CARDHOUR_ROOT/scripts/kube-crds/package-lock.json"
want="$(cat "$CARDHOUR_ROOT/scripts/kube-crds/package.json" "$lock" | sha256sum | cut -d' ' -f1)"
if [[ ! -d "$crds/node_modules" || "$(cat "$crds/.lock.sha256" 2>/dev/null)" != "$want" ]]; then
    log "installing the CRDs' validators at $crds (npm ci)"
    rm -rf "$crds"
    mkdir -p "$crds"
    cp "$CARDHOUR_ROOT/scripts/kube-crds/package.json" "$lock" "$crds/"
    # the packages ask for Node 22 in `engines` but run on Node 20 (the check itself is what tests/deploy_kubernetes.rs
    # proves on known-good and known-bad objects)
    (cd "$crds" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2) || die "npm ci in $crds failed"
    echo "$want" >"$crds/.lock.sha256"
fi
# the script itself is copied at every run, so an edit takes effect without a reinstall
cp "$CARDHOUR_ROOT/scripts/kube-crds/validate.mjs" "$crds/validate.mjs"

_have kubectl || die "kubectl not found: tests/deploy_kubernetes.rs renders the overlays with \`kubectl kustomize\`"

echo "KUBE_PYTHON=$venv/bin/python"
echo "KUBE_CRDS=$crds"
