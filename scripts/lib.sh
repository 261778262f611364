# shellcheck shell=bash
# Shared helpers for cardhour's scripts. Source it; do not run it:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# Safe under `set -euo pipefail`. Every function either succeeds or returns non-zero after saying why on stderr.
#
#   ensure_apt_packages PKG...          install the Debian packages that are missing (one `apt-get update` at most)
#   ensure_postgres                     a reachable PostgreSQL and the database of $DATABASE_URL (exported)
#   ensure_prometheus_tools             `prometheus`, `promtool` and `curl` on PATH
#   backfill_and_start_prometheus OM DIR PORT
#                                       OpenMetrics file -> TSDB blocks in DIR/tsdb -> prometheus on 127.0.0.1:PORT
#   prometheus_running DIR [PORT]       is the prometheus started on DIR alive (and listening on PORT)?
#   stop_prometheus DIR                 stop the prometheus started on DIR, if any

if [[ -n "${CARDHOUR_LIB_SH_LOADED:-}" ]]; then
    return 0
fi
CARDHOUR_LIB_SH_LOADED=1

CARDHOUR_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARDHOUR_ROOT

# promtool aligns blocks to the largest of 2h·3^k (k ≤ 9, i.e. 39366h ≈ 4.5 years) not above this value; a block
# this large holds any backfill in one block, so promtool parses the file twice (min/max, then the block) instead of
# once per 2 h block (measured on a 185 MB file: 3 s instead of 21 s).
CARDHOUR_PROMTOOL_MAX_BLOCK_DURATION="${CARDHOUR_PROMTOOL_MAX_BLOCK_DURATION:-100000h}"

log() { printf '==> %s\n' "$*" >&2; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

# bench_args "$@": a benchmark script's arguments, of which there are none but --help, which prints the script's
# header comment (called from the script itself, whose file is the caller's).
bench_args() {
    case "${1:-}" in
    "") ;;
    -h | --help)
        awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[1]}"
        exit 0
        ;;
    *) die "unknown argument: $1 (try --help)" ;;
    esac
}

# The 1-, 5- and 15-minute load averages.
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# free_port FROM: the first loopback port from FROM on that nothing listens on.
free_port() {
    local p="$1"
    while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
    printf '%s' "$p"
}

# sample_load FILE: every 5 s, appends the time, the 1-min load average and the number of rustc processes (other
# developers' builds) to FILE, until killed (run it in the background).
sample_load() {
    while :; do
        printf '%s\t%s\t%s\n' "$(date +%s)" "$(cut -d' ' -f1 /proc/loadavg)" "$(pgrep -c -x rustc || true)"
        sleep 5
    done >>"$1" 2>/dev/null
}

# cpu_of PID: user+system CPU seconds the process used so far.
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13) / hz }' "/proc/$1/stat"; }

# _have CMD...: all of them are on PATH.
_have() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || return 1
    done
}

# find_python: prints a Python >= 3.12: pyenv's, newest 3.12 first (the version the tools' pins were verified with),
# then 3.13, then the system's `python3` when it is new enough; fails when there is none.
find_python() {
    local candidate
    for candidate in "$HOME"/.pyenv/versions/3.12*/bin/python3 "$HOME"/.pyenv/versions/3.13*/bin/python3 \
        "$(command -v python3 || true)"; do
        if [[ -n "$candidate" && -x "$candidate" ]] &&
            "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then
            printf '%s' "$candidate"
            return 0
        fi
    done
    die "no Python >= 3.12 (looked in ~/.pyenv/versions/3.12*, 3.13* and python3): install one"
}

# Prefix a command with sudo when not root (and sudo exists).
_as_root() {
    if [[ "$(id -u)" -eq 0 ]]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        printf 'error: need root (or sudo) for: %s\n' "$*" >&2
        return 1
    fi
}

_pkg_installed() {
    [[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" == "installed" ]]
}

# ensure_apt_packages PKG...: installs the packages that are not installed yet, without recommends and without
# letting their maintainer scripts start services (no daemon of Debian's, e.g. prometheus on 0.0.0.0:9090, gets
# started behind our back; we start what we need ourselves, bound to loopback). Runs `apt-get update` at most once
# per script run (the flag is exported to child scripts).
ensure_apt_packages() {
    local missing=() pkg
    for pkg in "$@"; do
        _pkg_installed "$pkg" || missing+=("$pkg")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    command -v apt-get >/dev/null 2>&1 ||
        die "missing packages (${missing[*]}) and no apt-get: install them by hand"
    log "installing Debian packages: ${missing[*]}"
    if [[ -z "${CARDHOUR_APT_UPDATED:-}" ]]; then
        _as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq || return 1
        export CARDHOUR_APT_UPDATED=1
    fi
    local policy=/usr/sbin/policy-rc.d made_policy=""
    if [[ ! -e "$policy" && ! -d /run/systemd/system ]]; then
        printf '#!/bin/sh\n# temporary, from cardhour scripts/lib.sh: do not start services on install\nexit 101\n' |
            _as_root tee "$policy" >/dev/null && _as_root chmod 755 "$policy" && made_policy=1
    fi
    local rc=0
    _as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" ||
        rc=$?
    [[ -n "$made_policy" ]] && _as_root rm -f "$policy"
    [[ $rc -eq 0 ]] || die "apt-get install ${missing[*]} failed (exit $rc)"
}

# --- PostgreSQL ------------------------------------------------------------------------------------------------

# _url_host URL / _url_port URL / _url_db URL: parts of postgres://user[:pw]@host[:port]/db[?params]
_url_authority() {
    local rest="${1#*://}"
    rest="${rest%%/*}"
    rest="${rest%%\?*}"
    printf '%s' "${rest##*@}"
}
_url_host() {
    local a
    a="$(_url_authority "$1")"
    if [[ "$a" == \[* ]]; then
        a="${a#\[}"
        printf '%s' "${a%%\]*}"
    else
        printf '%s' "${a%%:*}"
    fi
}
_url_port() {
    local a
    a="$(_url_authority "$1")"
    a="${a##*\]}"
    if [[ "$a" == *:* ]]; then printf '%s' "${a##*:}"; else printf '5432'; fi
}
_url_db() {
    local rest="${1#*://}"
    [[ "$rest" == */* ]] || return 0
    rest="${rest#*/}"
    printf '%s' "${rest%%\?*}"
}
# The same URL with its database replaced by NAME.
_url_with_db() {
    local url="$1" name="$2" scheme rest authority query=""
    scheme="${url%%://*}"
    rest="${url#*://}"
    if [[ "$rest" == *\?* ]]; then query="?${rest#*\?}"; rest="${rest%%\?*}"; fi
    authority="${rest%%/*}"
    printf '%s://%s/%s%s' "$scheme" "$authority" "$name" "$query"
}

_is_loopback_host() {
    case "$1" in
    127.* | localhost | ::1 | "") return 0 ;;
    *) return 1 ;;
    esac
}

# The Debian cluster ("VERSION NAME") listening on PORT, empty if none.
_pg_cluster_on_port() {
    command -v pg_lsclusters >/dev/null 2>&1 || return 0
    pg_lsclusters -h 2>/dev/null | awk -v p="$1" '$3 == p { print $1, $2; exit }'
}

_pg_ctl() {
    if [[ -d /run/systemd/system ]]; then
        _as_root pg_ctlcluster "$@"
    else
        _as_root pg_ctlcluster --skip-systemctl-redirect "$@"
    fi
}

# ensure_postgres: exports DATABASE_URL (default postgres://postgres@127.0.0.1:5432/cardhour), makes sure the server
# answers and the database exists. For a loopback URL it installs Debian's `postgresql` if missing, creates a cluster
# on the URL's port if there is none, starts it if it is down, and — when the URL has no password and the server
# refuses it — adds `trust` for loopback TCP to that cluster's pg_hba.conf (a development database only; use a URL
# with a password otherwise). A non-loopback URL must already be reachable.
ensure_postgres() {
    export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/cardhour}"
    local host port db admin_url
    host="$(_url_host "$DATABASE_URL")"
    port="$(_url_port "$DATABASE_URL")"
    db="$(_url_db "$DATABASE_URL")"
    [[ -n "$db" ]] || die "DATABASE_URL names no database: $DATABASE_URL"
    admin_url="$(_url_with_db "$DATABASE_URL" postgres)"

    if ! _is_loopback_host "$host"; then
        _have pg_isready psql || ensure_apt_packages postgresql-client
        _pg_wait_ready "$admin_url" 30 || die "PostgreSQL at $host:$port is not reachable (DATABASE_URL=$DATABASE_URL)"
    else
        _have pg_isready psql || ensure_apt_packages postgresql-client
        if ! pg_isready -q -d "$admin_url" >/dev/null 2>&1; then
            _pg_start_local "$port"
            _pg_wait_ready "$admin_url" 60 || die "PostgreSQL on 127.0.0.1:$port did not become ready"
        fi
        if ! psql "$admin_url" -XAtqc 'select 1' >/dev/null 2>&1; then
            _pg_trust_loopback "$port" "$admin_url"
        fi
    fi

    local err
    err="$(psql "$admin_url" -XAtqc 'select 1' 2>&1 >/dev/null)" ||
        die "cannot connect to PostgreSQL with DATABASE_URL=$DATABASE_URL: $err"
    if [[ "$(psql "$admin_url" -XAtqc "select 1 from pg_database where datname = '${db//\'/\'\'}'")" != 1 ]]; then
        log "creating database $db"
        psql "$admin_url" -XqAt -v ON_ERROR_STOP=1 -c "create database \"${db//\"/\"\"}\"" >/dev/null ||
            die "could not create database $db"
    fi
}

# _pg_wait_ready URL SECONDS
_pg_wait_ready() {
    local url="$1" deadline=$((SECONDS + $2))
    while ((SECONDS < deadline)); do
        pg_isready -q -d "$url" >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    return 1
}

_pg_start_local() {
    local port="$1" cluster ver name
    ensure_apt_packages postgresql
    cluster="$(_pg_cluster_on_port "$port")"
    if [[ -z "$cluster" ]]; then
        [[ -z "$(pg_lsclusters -h 2>/dev/null)" ]] ||
            die "no PostgreSQL cluster on port $port (see pg_lsclusters): set DATABASE_URL to one that exists"
        # shellcheck disable=SC2012 # version directories are plain numbers
        ver="$(ls /usr/lib/postgresql 2>/dev/null | sort -V | tail -n 1)"
        [[ -n "$ver" ]] || die "postgresql is installed but /usr/lib/postgresql has no version"
        log "creating PostgreSQL cluster $ver/main on port $port"
        _as_root pg_createcluster --port "$port" "$ver" main >/dev/null
        cluster="$ver main"
    fi
    read -r ver name <<<"$cluster"
    if ! pg_lsclusters -h | awk -v v="$ver" -v n="$name" '$1 == v && $2 == n && $4 ~ /online/ { f = 1 } END { exit !f }'; then
        log "starting PostgreSQL cluster $ver/$name"
        _pg_ctl "$ver" "$name" start || warn "pg_ctlcluster $ver $name start failed; see /var/log/postgresql/"
    fi
}

# Add `host all all 127.0.0.1/32 trust` (and ::1) to the local cluster's pg_hba.conf, once, then reload.
_pg_trust_loopback() {
    local port="$1" admin_url="$2" cluster ver name hba
    local authority="${admin_url#*://}"
    authority="${authority%%/*}"
    # A URL with a password has a wrong password, not a missing auth method: leave pg_hba.conf alone.
    [[ "$authority" == *@* && "${authority%@*}" == *:* ]] && return 0
    cluster="$(_pg_cluster_on_port "$port")"
    [[ -n "$cluster" ]] || return 0
    read -r ver name <<<"$cluster"
    hba="/etc/postgresql/$ver/$name/pg_hba.conf"
    [[ -f "$hba" ]] || return 0
    grep -q 'cardhour scripts/lib.sh' "$hba" && return 0
    log "allowing passwordless loopback TCP connections in $hba (development database)"
    local tmp
    tmp="$(mktemp)"
    {
        echo '# added by cardhour scripts/lib.sh: passwordless loopback TCP for a development database'
        echo 'host    all             all             127.0.0.1/32            trust'
        echo 'host    all             all             ::1/128                 trust'
        cat "$hba"
    } >"$tmp"
    _as_root cp "$tmp" "$hba"
    rm -f "$tmp"
    _pg_ctl "$ver" "$name" reload >/dev/null
    sleep 0.5
}

# --- Prometheus ------------------------------------------------------------------------------------------------

# ensure_prometheus_tools: `prometheus` and `promtool` (Debian package prometheus, 2.42 on bookworm) and `curl`.
ensure_prometheus_tools() {
    _have prometheus promtool || ensure_apt_packages prometheus
    _have curl || ensure_apt_packages curl
    _have prometheus promtool ||
        die "prometheus/promtool still not on PATH after installing the prometheus package"
}

# prometheus_running DIR [PORT]: true when DIR/prometheus.pid names a live prometheus serving DIR/tsdb
# (and, with PORT, answering /-/ready on 127.0.0.1:PORT).
prometheus_running() {
    local dir="$1" port="${2:-}" pid
    [[ -f "$dir/prometheus.pid" ]] || return 1
    pid="$(<"$dir/prometheus.pid")"
    _is_our_prometheus "$pid" "$dir" || return 1
    [[ -z "$port" ]] || curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$port/-/ready" 2>/dev/null
}

# _is_our_prometheus PID DIR: PID is alive and is a prometheus whose command line names DIR/tsdb.
_is_our_prometheus() {
    local pid="$1" dir="$2" cmdline
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" || return 1
    [[ "$cmdline" == *prometheus* && "$cmdline" == *"--storage.tsdb.path=$(cd "$dir" && pwd)/tsdb"* ]]
}

# stop_prometheus DIR: SIGTERM (then SIGKILL after 30 s) the prometheus started on DIR; no-op when none runs.
stop_prometheus() {
    local dir="$1" pid
    [[ -f "$dir/prometheus.pid" ]] || return 0
    pid="$(<"$dir/prometheus.pid")"
    if _is_our_prometheus "$pid" "$dir"; then
        log "stopping prometheus (pid $pid, $dir)"
        kill -TERM "$pid" 2>/dev/null || true
        local deadline=$((SECONDS + 30))
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then
            warn "prometheus $pid ignored SIGTERM for 30 s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$dir/prometheus.pid"
}

# stop_pidfile PIDFILE: SIGTERM (then SIGKILL after 15 s) the `cardhour serve` whose pid PIDFILE holds; no-op when
# none runs (a pid reused by another program is left alone).
stop_pidfile() {
    local file="$1" pid cmdline
    [[ -f "$file" ]] || return 0
    pid="$(<"$file")"
    cmdline="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)"
    if [[ "$pid" =~ ^[0-9]+$ && "$cmdline" == *cardhour*serve* ]]; then
        log "stopping cardhour serve (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        local deadline=$((SECONDS + 15))
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
        kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
    fi
    rm -f "$file"
}

# backfill_and_start_prometheus OM DIR PORT: stops a prometheus previously started on DIR, replaces DIR/tsdb with
# blocks made by `promtool tsdb create-blocks-from openmetrics` from OM, writes DIR/prometheus.yml (no scrape
# targets), and starts `prometheus` on 127.0.0.1:PORT (retention 100y) in the background with DIR/prometheus.pid and
# DIR/prometheus.log; returns when /-/ready answers. DIR/source.sha256 records OM's checksum, so callers can tell
# whether a running instance already holds the same data. The samples in OM must be older than 3 hours (the head
# block's range) and in time order per series (promtool drops out-of-order samples).
backfill_and_start_prometheus() {
    local om="$1" dir="$2" port="$3"
    [[ -f "$om" ]] || die "no OpenMetrics file at $om"
    [[ "$port" =~ ^[0-9]+$ ]] || die "bad port: $port"
    ensure_prometheus_tools
    mkdir -p "$dir"
    dir="$(cd "$dir" && pwd)"
    stop_prometheus "$dir"
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        die "127.0.0.1:$port is already in use by another process"
    fi

    rm -rf "$dir/tsdb" "$dir/source.sha256"
    mkdir -p "$dir/tsdb"
    log "backfilling $om into $dir/tsdb"
    local t0=$SECONDS out
    out="$(promtool tsdb create-blocks-from openmetrics --quiet \
        --max-block-duration="$CARDHOUR_PROMTOOL_MAX_BLOCK_DURATION" "$om" "$dir/tsdb" 2>&1)" ||
        die "promtool create-blocks-from openmetrics failed: $out"
    log "backfill took $((SECONDS - t0)) s"

    cat >"$dir/prometheus.yml" <<'YAML'
# Written by cardhour scripts/lib.sh: a Prometheus that only serves backfilled blocks (nothing is scraped).
global:
  scrape_interval: 1m
scrape_configs: []
YAML

    # setsid: the server outlives the script and is not hit by the terminal's Ctrl-C.
    setsid prometheus \
        --config.file="$dir/prometheus.yml" \
        --storage.tsdb.path="$dir/tsdb" \
        --storage.tsdb.retention.time=100y \
        --web.listen-address="127.0.0.1:$port" \
        </dev/null >"$dir/prometheus.log" 2>&1 &
    local pid=$!
    echo "$pid" >"$dir/prometheus.pid"

    local deadline=$((SECONDS + 120))
    until curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$port/-/ready" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$dir/prometheus.pid"
            tail -n 20 "$dir/prometheus.log" >&2 || true
            die "prometheus exited before becoming ready (log: $dir/prometheus.log)"
        fi
        if ((SECONDS >= deadline)); then
            tail -n 20 "$dir/prometheus.log" >&2 || true
            stop_prometheus "$dir"
            die "prometheus not ready on 127.0.0.1:$port after 120 s (log: $dir/prometheus.log)"
        fi
        sleep 0.2
    done
    sha256sum <"$om" | cut -d' ' -f1 >"$dir/source.sha256"
    log "prometheus ready at http://127.0.0.1:$port (pid $pid, data $dir/tsdb)"
}
