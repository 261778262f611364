#!/usr/bin/env bash
# The scale benchmark of issue 11 (BENCHMARKS.md "Issue 11: several workers, ten clusters"): leased `cardhour
# worker` processes backfilling many clusters into one database, and how their cost grows with a cluster's size.
#
#   bash scripts/bench-scale.sh
#
# 1. `cargo build --release`; PostgreSQL (DATABASE_URL's server) and the Prometheus tools.
# 2. Base: SCALE_CLUSTERS simulated clusters (default 10 × 64 GPUs × 7 days at a 60 s scrape interval, seeds
#    SCALE_SEED+1 …, all ending at the same whole hour ≥ 4 h ago), each backfilled into its own Prometheus on a free
#    loopback port (from 9591); the OpenMetrics files are deleted once backfilled.
#    A later run reuses the backfilled TSDBs when sizes, seeds and end are unchanged (SCALE_FRESH=1 re-simulates).
# 3. For each worker count of SCALE_WORKERS (default "1 2 4"): a fresh database (cardhour_scale_w<N>), then N
#    `cardhour worker --config clusters.toml --from … --to … --once` started together, each under /usr/bin/time -v,
#    until all exit. Recorded: wall time (to the last `stored` line of the logs, and to the last exit: with --once
#    a worker that finds only leased hours left polls every 30 s); per worker user+sys CPU, max RSS and the hours it stored (its log's
#    `stored` lines); the CPU of every Prometheus and of PostgreSQL's backends of that database (sampled from
#    /proc every 0.2 s); usage rows, ingested hours, database size; the md5 of the stored tables (usage, capacity,
#    rollups, anomalies: the digest of tests/worker_faults.rs), which must equal the 1-worker run's; each
#    (cluster, hour) stored exactly once across the workers' logs and none missing; CPU seconds per cluster-hour;
#    load average before and after.
# 4. Growth: one cluster of each size in SCALE_GROWTH_GPUS (default "128 512 2048": 1×, 4×, 16×) over the last
#    SCALE_GROWTH_HOURS hours (12) of the same window, each in its own Prometheus, ingested by one worker into a
#    fresh database (cardhour_scale_g<GPUS>): CPU and memory against the cluster's size.
# 5. The extrapolation to SCALE_TARGET_CLUSTERS × SCALE_TARGET_GPUS × SCALE_TARGET_DAYS (10 × 2,000 × 30) from the
#    growth curve (a least-squares line per cluster-hour against GPUs), with the arithmetic printed.
# 6. A summary (also .cardhour/bench-scale/summary.md). Every Prometheus this script started is stopped on exit.
#
# Data lives in .cardhour/bench-scale/ (gitignored; SCALE_DIR). Environment: DATABASE_URL (default
# postgres://postgres@127.0.0.1:5432/cardhour; its server is used, the databases cardhour_scale_* are dropped and
# re-created), SCALE_CLUSTERS (10), SCALE_GPUS (64), SCALE_DAYS (7), SCALE_SEED (100), SCALE_WORKERS ("1 2 4"),
# SCALE_SOURCE (remote-read; or query, auto), SCALE_BATCH_HOURS (6), SCALE_GROWTH_GPUS ("128 512 2048"),
# SCALE_GROWTH_HOURS (12), SCALE_TARGET_CLUSTERS (10), SCALE_TARGET_GPUS (2000), SCALE_TARGET_DAYS (30),
# SCALE_PORT (9591, first port tried), SCALE_END (the window's end, a whole hour ≥ 4 h ago; default the previous
# run's when its data is reused, else the latest such hour), SCALE_FRESH=1 (simulate and backfill again),
# SCALE_SKIP_BASE=1 / SCALE_SKIP_GROWTH=1 (skip step 3 / step 4), SCALE_NO_BUILD=1 (use the built binary).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

bench_args "$@"

NCLUSTERS="${SCALE_CLUSTERS:-10}"
GPUS="${SCALE_GPUS:-64}"
DAYS="${SCALE_DAYS:-7}"
SEED="${SCALE_SEED:-100}"
WORKERS="${SCALE_WORKERS:-1 2 4}"
SOURCE="${SCALE_SOURCE:-remote-read}"
BATCH="${SCALE_BATCH_HOURS:-6}"
GROWTH_GPUS="${SCALE_GROWTH_GPUS:-128 512 2048}"
GROWTH_HOURS="${SCALE_GROWTH_HOURS:-12}"
T_CLUSTERS="${SCALE_TARGET_CLUSTERS:-10}"
T_GPUS="${SCALE_TARGET_GPUS:-2000}"
T_DAYS="${SCALE_TARGET_DAYS:-30}"
SCRAPE=60
DB_PREFIX=cardhour_scale

SCALE="${SCALE_DIR:-$PWD/.cardhour/bench-scale}"
mkdir -p "$SCALE"
SCALE="$(cd "$SCALE" && pwd)"
OUT="$SCALE/results"
RES="$OUT/results.tsv"
mkdir -p "$OUT"
: >"$RES"

T_SCRIPT=$SECONDS
iso() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }
now_ns() { date +%s%N; }
secs_since() { python3 -c 'import sys,time; print(f"{(time.time_ns()-int(sys.argv[1]))/1e9:.3f}")' "$1"; }
rec() {
    printf '%s\t%s\n' "$1" "$2" >>"$RES"
    printf '    %-40s %s\n' "$1" "$2" >&2
}
val() { awk -F'\t' -v k="$1" '$1 == k { v = $2 } END { print v }' "$RES"; }

# Load sampler: 1-min load average and the number of rustc processes (other developers' builds) every 5 s.
LOADLOG="$OUT/load.tsv"
: >"$LOADLOG"
sample_load "$LOADLOG" &
SAMPLER_PID=$!

PROM_DIRS=()
WORKER_PIDS=()
PG_SAMPLER_PID=""
cleanup() {
    local rc=$? d p
    kill "$SAMPLER_PID" 2>/dev/null || true
    [[ -z "$PG_SAMPLER_PID" ]] || kill "$PG_SAMPLER_PID" 2>/dev/null || true
    # each pid is a /usr/bin/time of this script; its child is the worker
    for p in "${WORKER_PIDS[@]}"; do
        pkill -TERM -P "$p" 2>/dev/null || true
        kill "$p" 2>/dev/null || true
    done
    for d in "${PROM_DIRS[@]}"; do stop_prometheus "$d" || true; done
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# prom_cpu DIR: user+system CPU seconds of the prometheus started on DIR so far; prom_rss_mib DIR: its peak RSS.
prom_cpu() { cpu_of "$(<"$1/prometheus.pid")"; }
prom_rss_mib() { awk '/^VmHWM:/ { printf "%.0f", $2 / 1024 }' "/proc/$(<"$1/prometheus.pid")/status"; }
prom_cpu_sum() {
    local d s=0
    for d in "$@"; do s="$(python3 -c "print(f'{$s + $(prom_cpu "$d"):.2f}')")"; done
    printf '%s' "$s"
}

# start_prometheus DIR PORT: a prometheus on the TSDB already in DIR/tsdb (as backfill_and_start_prometheus starts it).
start_prometheus() {
    local dir="$1" port="$2" pid
    stop_prometheus "$dir"
    setsid prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/tsdb" \
        --storage.tsdb.retention.time=100y --web.listen-address="127.0.0.1:$port" \
        </dev/null >"$dir/prometheus.log" 2>&1 &
    pid=$!
    echo "$pid" >"$dir/prometheus.pid"
    local deadline=$((SECONDS + 120))
    until curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$port/-/ready" 2>/dev/null; do
        kill -0 "$pid" 2>/dev/null || die "prometheus on $dir exited (log: $dir/prometheus.log)"
        ((SECONDS < deadline)) || die "prometheus on $dir not ready after 120 s"
        sleep 0.2
    done
    log "prometheus ready at http://127.0.0.1:$port (pid $pid, reused $dir/tsdb)"
}

# --- 1. build and tools ------------------------------------------------------------------------------------------

rec machine "$(nproc) cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo), $(free -h | awk '/^Mem:/ { print $2 " total, " $7 " available" }')"
rec load_at_start "$(loadavg)"
_have cargo python3 || die "cargo and python3 are needed"
[[ -x /usr/bin/time ]] || ensure_apt_packages time
ensure_prometheus_tools
rec prometheus_version "$(prometheus --version 2>&1 | awk 'NR == 1 { print $3 }')"
if [[ -z "${SCALE_NO_BUILD:-}" ]]; then
    log "cargo build --release"
    SQLX_OFFLINE=true nice -n 10 cargo build --release
fi
target_dir="$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')"
BIN="${target_dir:-$PWD/target}/release/cardhour"
[[ -x "$BIN" ]] || die "no binary at $BIN (cargo build --release)"
rec commit "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD -- src 2>/dev/null || echo ' (src modified)')"

export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/cardhour}"
ensure_postgres
ADMIN_URL="$(_url_with_db "$DATABASE_URL" postgres)"
# fresh_db NAME: drop, create and migrate database NAME; prints its URL.
fresh_db() {
    PGOPTIONS="-c client_min_messages=warning" psql "$ADMIN_URL" -XqAt -v ON_ERROR_STOP=1 \
        -c "drop database if exists \"$1\" with (force)" >/dev/null
    psql "$ADMIN_URL" -XqAt -v ON_ERROR_STOP=1 -c "create database \"$1\"" >/dev/null
    DATABASE_URL="$(_url_with_db "$DATABASE_URL" "$1")" "$BIN" migrate >/dev/null
    _url_with_db "$DATABASE_URL" "$1"
}

# --- the window -------------------------------------------------------------------------------------------------

if [[ -n "${SCALE_END:-}" ]]; then
    END_TS="$(date -u -d "$SCALE_END" +%s)"
elif [[ -z "${SCALE_FRESH:-}" && -f "$SCALE/end" ]]; then
    END_TS="$(<"$SCALE/end")"
else
    END_TS=$((($(date -u +%s) / 3600) * 3600 - 4 * 3600))
fi
((END_TS % 3600 == 0 && END_TS <= $(date -u +%s) - 4 * 3600)) || die "the window's end $(iso "$END_TS") must be a whole hour at least 4 h ago"
echo "$END_TS" >"$SCALE/end"
TO="$(iso "$END_TS")"
rec window_end "$TO"

PORT="${SCALE_PORT:-9591}"
# cluster_prometheus NAME GPUS HOURS SEED: simulate and backfill (or reuse) the cluster NAME into $SCALE/NAME/prom,
# started on a free port; sets PROM_URL and appends the directory to PROM_DIRS.
cluster_prometheus() {
    local name="$1" gpus="$2" hours="$3" seed="$4" dir="$SCALE/$1" want t0
    want="gpus=$gpus hours=$hours seed=$seed scrape=$SCRAPE end=$END_TS"
    mkdir -p "$dir"
    PORT="$(free_port "$PORT")"
    PROM_DIRS+=("$dir/prom")
    if [[ -z "${SCALE_FRESH:-}" && -f "$dir/params" && "$(<"$dir/params")" == "$want" && -d "$dir/prom/tsdb" ]]; then
        start_prometheus "$dir/prom" "$PORT"
    else
        rm -f "$dir/params"
        stop_prometheus "$dir/prom"
        rm -rf "$dir/sim" "$dir/prom"
        log "simulating $name: $gpus GPUs, $hours h ending $TO (seed $seed)"
        t0=$(now_ns)
        "$BIN" simulate --gpus "$gpus" --hours "$hours" --scrape-interval "${SCRAPE}s" --seed "$seed" --end "$TO" \
            --out "$dir/sim" >"$dir/simulate.txt"
        rec "${name}_simulate_s" "$(secs_since "$t0")"
        rec "${name}_metrics_om" "$(du -h "$dir/sim/metrics.om" | cut -f1)"
        t0=$(now_ns)
        backfill_and_start_prometheus "$dir/sim/metrics.om" "$dir/prom" "$PORT"
        rec "${name}_backfill_s" "$(secs_since "$t0")"
        rm -f "$dir/sim/metrics.om"
        echo "$want" >"$dir/params"
    fi
    rec "${name}_simulation" "$(head -n 1 "$dir/simulate.txt")"
    rec "${name}_tsdb" "$(du -sh "$dir/prom/tsdb" | cut -f1)"
    PROM_URL="http://127.0.0.1:$PORT"
    PORT=$((PORT + 1))
}

# clusters_file FILE NAME=URL...: the workers' clusters file.
clusters_file() {
    local file="$1" kv
    shift
    {
        printf '# written by scripts/bench-scale.sh\n[defaults]\nsource = "%s"\nbatch_hours = %s\nscrape_interval = "%ss"\n' \
            "$SOURCE" "$BATCH" "$SCRAPE"
        for kv in "$@"; do printf '\n[clusters.%s]\nprometheus = "%s"\n' "${kv%%=*}" "${kv#*=}"; done
    } >"$file"
}

DIGEST="SET TimeZone = 'UTC';
    SELECT 'usage ' || md5(coalesce(string_agg(u::text, '|' ORDER BY u::text), '')) FROM gpu_usage_hourly u
    UNION ALL SELECT 'capacity ' || md5(coalesce(string_agg(c::text, '|' ORDER BY c::text), '')) FROM node_capacity_hourly c
    UNION ALL SELECT 'namespace_hourly ' || md5(coalesce(string_agg(n::text, '|' ORDER BY n::text), '')) FROM usage_namespace_hourly n
    UNION ALL SELECT 'namespace_daily ' || md5(coalesce(string_agg(d::text, '|' ORDER BY d::text), '')) FROM usage_namespace_daily d
    UNION ALL SELECT 'capacity_daily ' || md5(coalesce(string_agg(d::text, '|' ORDER BY d::text), '')) FROM capacity_daily d
    UNION ALL SELECT 'pod_daily ' || md5(coalesce(string_agg(p::text, '|' ORDER BY p::text), '')) FROM usage_pod_daily p
    UNION ALL SELECT 'anomalies ' || md5(coalesce(string_agg(a::text, '|' ORDER BY a::text), '')) FROM ingest_anomalies a"

# The CPU of PostgreSQL's backends serving database $1 (their process titles name it), sampled every 0.2 s until
# SIGTERM, then written to $2 in seconds (what a backend used after the last sample before it exited is missed).
pg_cpu_sampler() {
    python3 - "$1" "$2" <<'PY' &
import os, signal, sys, time
db, out = sys.argv[1], sys.argv[2]
hz = os.sysconf("SC_CLK_TCK")
seen = {}
stop = False
def on_term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
def sample():
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            if not cmd.startswith("postgres: ") or f" {db} " not in cmd:
                continue
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            seen[pid] = (int(fields[11]) + int(fields[12])) / hz
        except OSError:
            pass
while not stop:
    sample()
    time.sleep(0.2)
sample()
with open(out, "w") as f:
    f.write(f"{sum(seen.values()):.2f} {len(seen)}\n")
PY
    PG_SAMPLER_PID=$!
}

# time_v FILE KEY: a figure from /usr/bin/time -v's report.
time_v() { awk -F': ' -v k="$2" '$1 ~ k { print $2; exit }' "$1"; }

# run_workers NAME DB N CONFIG FROM TO HOURS_EXPECTED PROM_DIR...: N workers together into a fresh database DB.
run_workers() {
    local name="$1" db="$2" n="$3" config="$4" from="$5" to="$6" expected="$7" url i t0 cpu0 rc fail=0
    shift 7
    local proms=("$@")
    url="$(fresh_db "$db")"
    rm -f "$OUT/$name".worker*.{log,time}
    log "$name: $n worker(s), $expected cluster-hours $from .. $to, load $(loadavg)"
    rec "${name}_load_before" "$(loadavg)"
    cpu0="$(prom_cpu_sum "${proms[@]}")"
    pg_cpu_sampler "$db" "$OUT/$name.pgcpu"
    WORKER_PIDS=()
    t0=$(now_ns)
    for ((i = 1; i <= n; i++)); do
        # shellcheck disable=SC2046 # one -u per CARDHOUR_ variable of the caller: the clusters file rules
        env $(env | awk -F= '/^CARDHOUR_/ { printf "-u %s ", $1 }') DATABASE_URL="$url" CARDHOUR_LOG=cardhour=info \
            /usr/bin/time -v -o "$OUT/$name.worker$i.time" "$BIN" worker --config "$config" --from "$from" --to "$to" \
            --once </dev/null >"$OUT/$name.worker$i.log" 2>&1 &
        WORKER_PIDS+=($!)
    done
    for ((i = 1; i <= n; i++)); do
        rc=0
        wait "${WORKER_PIDS[$((i - 1))]}" || rc=$?
        if ((rc != 0)); then
            tail -n 20 "$OUT/$name.worker$i.log" >&2
            fail=1
        fi
    done
    rec "${name}_wall_s" "$(secs_since "$t0")"
    WORKER_PIDS=()
    kill "$PG_SAMPLER_PID"
    wait "$PG_SAMPLER_PID" || true
    PG_SAMPLER_PID=""
    ((fail == 0)) || die "$name: a worker failed (logs: $OUT/$name.worker*.log): a failure of cardhour itself"
    rec "${name}_load_after" "$(loadavg)"
    rec "${name}_prometheus_cpu_s" "$(python3 -c "print(f'{$(prom_cpu_sum "${proms[@]}") - $cpu0:.2f}')")"
    rec "${name}_postgres_cpu_s" "$(cut -d' ' -f1 "$OUT/$name.pgcpu") (backends: $(cut -d' ' -f2 "$OUT/$name.pgcpu"))"
    # per worker: CPU, max RSS, the hours its log says it stored
    python3 - "$OUT" "$name" "$n" "$expected" "$t0" <<'PY' >"$OUT/$name.workers.tsv"
import re, sys
from datetime import datetime, timedelta
out, name, n, expected, t0 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]) / 1e9
last = 0.0
def tv(path, key):
    for line in open(path):
        k, _, v = line.strip().partition(": ")
        if k == key:
            return v
seen = {}
tot_cpu = 0.0
for i in range(1, n + 1):
    t = f"{out}/{name}.worker{i}.time"
    user, sys_ = float(tv(t, "User time (seconds)")), float(tv(t, "System time (seconds)"))
    rss = int(tv(t, "Maximum resident set size (kbytes)")) / 1024
    hours = 0
    for line in open(f"{out}/{name}.worker{i}.log", errors="replace"):
        if not re.search(r"\bstored\b", line):
            continue
        f = dict(re.findall(r"\b(cluster|from|to)=(\S+)", line))
        if len(f) < 3:
            continue
        last = max(last, datetime.fromisoformat(line.split()[0].replace("Z", "+00:00")).timestamp())
        a = datetime.fromisoformat(f["from"].replace("Z", "+00:00"))
        b = datetime.fromisoformat(f["to"].replace("Z", "+00:00"))
        while a < b:
            seen[(f["cluster"], a)] = seen.get((f["cluster"], a), 0) + 1
            hours += 1
            a += timedelta(hours=1)
    cpu = user + sys_
    tot_cpu += cpu
    per = f"{cpu / hours * 1000:.1f}" if hours else "-"
    print(f"worker{i}\t{cpu:.2f} s CPU (user {user:.2f} + sys {sys_:.2f}), max RSS {rss:.1f} MiB, "
          f"{hours} cluster-hours stored, {per} ms CPU per cluster-hour")
twice = sum(1 for v in seen.values() if v > 1)
print(f"last_stored_s\t{last - t0:.3f}")
print(f"workers_cpu_s\t{tot_cpu:.2f}")
print(f"cpu_ms_per_cluster_hour\t{tot_cpu / expected * 1000:.1f}")
print(f"log_hours\t{len(seen)} distinct cluster-hours stored of {expected} expected, {twice} stored more than once, "
      f"{expected - len(seen)} missing")
print(f"max_rss_mib\t{max(float(tv(f'{out}/{name}.worker{i}.time', 'Maximum resident set size (kbytes)')) for i in range(1, n + 1)) / 1024:.1f}")
PY
    local k v
    while IFS=$'\t' read -r k v; do rec "${name}_$k" "$v"; done <"$OUT/$name.workers.tsv"
    rec "${name}_ingested_hours" "$(psql "$url" -XqAt -c "select count(*) || ' hours, ' || coalesce(sum(usage_rows), 0) || ' usage rows by ingested_hours' from ingested_hours")"
    rec "${name}_usage_rows" "$(psql "$url" -XqAt -c 'select count(*) from gpu_usage_hourly')"
    rec "${name}_db_size_mib" "$(psql "$url" -XqAt -c 'select round(pg_database_size(current_database()) / 1048576.0, 1)')"
    psql "$url" -XqAt -v ON_ERROR_STOP=1 -c "$DIGEST" >"$OUT/$name.digest"
    rec "${name}_usage_md5" "$(awk '$1 == "usage" { print $2 }' "$OUT/$name.digest")"
    rec "${name}_digest_md5" "$(md5sum <"$OUT/$name.digest" | cut -d' ' -f1)"
}

# --- 2./3. the base: N clusters, 1/2/4 workers --------------------------------------------------------------------

BASE_HOURS=$((DAYS * 24))
BASE_FROM="$(iso $((END_TS - BASE_HOURS * 3600)))"
if [[ -z "${SCALE_SKIP_BASE:-}" ]]; then
    rec base "$NCLUSTERS clusters × $GPUS GPUs × $DAYS days ($BASE_FROM .. $TO), source $SOURCE, batch_hours $BATCH"
    entries=()
    base_proms=()
    for ((c = 1; c <= NCLUSTERS; c++)); do
        cname="$(printf 'scale-%02d' "$c")"
        cluster_prometheus "$cname" "$GPUS" "$BASE_HOURS" $((SEED + c))
        entries+=("$cname=$PROM_URL")
        base_proms+=("$SCALE/$cname/prom")
    done
    clusters_file "$SCALE/clusters.toml" "${entries[@]}"
    for n in $WORKERS; do
        run_workers "w$n" "${DB_PREFIX}_w$n" "$n" "$SCALE/clusters.toml" "$BASE_FROM" "$TO" $((NCLUSTERS * BASE_HOURS)) \
            "${base_proms[@]}"
    done
    for d in "${base_proms[@]}"; do rec "base_prometheus_peak_rss_mib" "$(prom_rss_mib "$d")"; done
    first="$(set -- $WORKERS; echo "$1")"
    for n in $WORKERS; do
        if [[ "$(val "w${n}_digest_md5")" == "$(val "w${first}_digest_md5")" ]]; then
            rec "w${n}_same_as_w$first" "yes: every digested table equal"
        else
            rec "w${n}_same_as_w$first" "NO: $(diff "$OUT/w$first.digest" "$OUT/w$n.digest" | tr '\n' ' ')"
        fi
    done
    for d in "${base_proms[@]}"; do stop_prometheus "$d"; done
fi

# --- 4. growth: one cluster at 1×, 4×, 16× the GPUs ---------------------------------------------------------------

GROWTH_FROM="$(iso $((END_TS - GROWTH_HOURS * 3600)))"
if [[ -z "${SCALE_SKIP_GROWTH:-}" ]]; then
    rec growth "one cluster of each of $GROWTH_GPUS GPUs × $GROWTH_HOURS h ($GROWTH_FROM .. $TO), 1 worker"
    for g in $GROWTH_GPUS; do
        cname="grow-$g"
        cluster_prometheus "$cname" "$g" "$GROWTH_HOURS" $((SEED + 50))
        clusters_file "$SCALE/$cname/clusters.toml" "$cname=$PROM_URL"
        run_workers "g$g" "${DB_PREFIX}_g$g" 1 "$SCALE/$cname/clusters.toml" "$GROWTH_FROM" "$TO" "$GROWTH_HOURS" \
            "$SCALE/$cname/prom"
        rec "g${g}_prometheus_peak_rss_mib" "$(prom_rss_mib "$SCALE/$cname/prom")"
        stop_prometheus "$SCALE/$cname/prom"
    done
fi

rec load_at_end "$(loadavg)"
rec load_1min_during_run "$(awk -F'\t' 'NR == 1 { mn = mx = $2 } { s += $2; n++; if ($2 < mn) mn = $2; if ($2 > mx) mx = $2; if ($3 > 0) r++ }
    END { printf "min %.2f / mean %.2f / max %.2f over %d samples; rustc running in %d of them", mn, s / n, mx, n, r }' "$LOADLOG")"
rec run_total_s "$((SECONDS - T_SCRIPT))"

# --- 5./6. extrapolation and summary ------------------------------------------------------------------------------

python3 - "$RES" "$WORKERS" "$GROWTH_GPUS" "$GROWTH_HOURS" "$T_CLUSTERS" "$T_GPUS" "$T_DAYS" "$NCLUSTERS" "$BASE_HOURS" "$GPUS" \
    <<'PY' | tee "$SCALE/summary.md"
import re, sys
res = {}
for line in open(sys.argv[1]):
    k, _, v = line.rstrip("\n").partition("\t")
    res.setdefault(k, [])
    res[k].append(v)
g = lambda k: res.get(k, ["–"])[-1]
workers = sys.argv[2].split()
growth = [int(x) for x in sys.argv[3].split()]
ghours = int(sys.argv[4])
tc, tg, td = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
nclusters, base_hours, base_gpus = int(sys.argv[8]), int(sys.argv[9]), int(sys.argv[10])
num = lambda s: float(re.match(r"[-+0-9.e]+", s).group(0))

print("| figure | value |\n|---|---|")
for k in ("commit", "machine", "prometheus_version", "window_end", "load_at_start", "load_at_end",
          "load_1min_during_run", "run_total_s"):
    print(f"| {k} | {g(k)} |")
if "base" in res:
    print(f"| base | {g('base')} |")
    print(f"| base: Prometheus peak RSS (MiB), each | {', '.join(res.get('base_prometheus_peak_rss_mib', []))} |")
    for n in workers:
        p = f"w{n}"
        print(f"| **{n} worker(s)**: wall to the last hour stored / to the last exit (s) | {g(p + '_last_stored_s')} / {g(p + '_wall_s')} (load {g(p + '_load_before')} → {g(p + '_load_after')}) |")
        for i in range(1, int(n) + 1):
            print(f"| {n} worker(s): worker {i} | {g(f'{p}_worker{i}')} |")
        print(f"| {n} worker(s): workers' CPU (s) / per cluster-hour (ms) | {g(p + '_workers_cpu_s')} / {g(p + '_cpu_ms_per_cluster_hour')} |")
        print(f"| {n} worker(s): Prometheus CPU (s) / PostgreSQL backends' CPU (s) | {g(p + '_prometheus_cpu_s')} / {g(p + '_postgres_cpu_s')} |")
        print(f"| {n} worker(s): hours (workers' logs) | {g(p + '_log_hours')} |")
        print(f"| {n} worker(s): stored | {g(p + '_ingested_hours')}; {g(p + '_usage_rows')} rows in gpu_usage_hourly; database {g(p + '_db_size_mib')} MiB |")
        print(f"| {n} worker(s): md5 of gpu_usage_hourly | `{g(p + '_usage_md5')}` |")
        if f"{p}_same_as_w{workers[0]}" in res:
            print(f"| {n} worker(s): all digested tables equal to {workers[0]} worker(s)' | {g(p + '_same_as_w' + workers[0])} |")

pts = []
if "growth" in res:
    print(f"| growth | {g('growth')} |")
    for G in growth:
        p = f"g{G}"
        if p + "_wall_s" not in res:
            continue
        cpu = num(g(p + "_workers_cpu_s"))
        prom = num(g(p + "_prometheus_cpu_s"))
        pg = num(g(p + "_postgres_cpu_s"))
        wall = num(g(p + "_last_stored_s"))
        rss = num(g(p + "_max_rss_mib"))
        rows = int(g(p + "_usage_rows"))
        db = num(g(p + "_db_size_mib"))
        pts.append((G, cpu / ghours, prom / ghours, pg / ghours, wall / ghours, rss, rows / ghours, db / ghours,
                    num(g(p + "_prometheus_peak_rss_mib"))))
        print(f"| **{G} GPUs**: wall to the last hour stored / to the exit (s) | {g(p + '_last_stored_s')} / {g(p + '_wall_s')} (load {g(p + '_load_before')} → {g(p + '_load_after')}) |")
        print(f"| {G} GPUs: worker | {g(p + '_worker1')} |")
        print(f"| {G} GPUs: Prometheus CPU (s) / PostgreSQL backends' CPU (s) | {g(p + '_prometheus_cpu_s')} / {g(p + '_postgres_cpu_s')} |")
        print(f"| {G} GPUs: stored | {g(p + '_ingested_hours')}; database {g(p + '_db_size_mib')} MiB |")
        print(f"| {G} GPUs: Prometheus peak RSS (MiB) | {g(p + '_prometheus_peak_rss_mib')} |")

if len(pts) >= 2:
    print("\n### Growth with the cluster's size (per cluster-hour)\n")
    print("| GPUs | worker CPU (ms) | Prometheus CPU (ms) | PostgreSQL CPU (ms) | wall, 1 worker (ms) | worker peak RSS (MiB) | usage rows | Prometheus peak RSS (MiB) |")
    print("|---|---|---|---|---|---|---|---|")
    for G, c, pr, pg, w, rss, rows, db, prss in pts:
        print(f"| {G} | {c*1000:.0f} | {pr*1000:.0f} | {pg*1000:.0f} | {w*1000:.0f} | {rss:.0f} | {rows:.0f} | {prss:.0f} |")

    def fit(ys):
        xs = [p[0] for p in pts]
        n = len(xs)
        mx, my = sum(xs) / n, sum(ys) / n
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        return my - b * mx, b

    H = tc * td * 24
    print(f"\n### Extrapolation to {tc} clusters × {tg:,} GPUs × {td} days\n")
    print(f"Cluster-hours: {tc} × {td} × 24 = {H:,}. Each figure per cluster-hour is a least-squares line "
          f"a + b·GPUs through the {len(pts)} growth points, evaluated at {tg:,} GPUs.\n")
    tot = {}
    for idx, label, unit in ((1, "worker CPU", "s"), (2, "Prometheus CPU", "s"), (3, "PostgreSQL backends' CPU", "s"),
                             (4, "wall, 1 worker", "s"), (6, "usage rows", ""), (7, "database growth", "MiB")):
        a, b = fit([p[idx] for p in pts])
        per = a + b * tg
        tot[label] = per * H
        if unit == "s":
            print(f"- {label}: {a*1000:.1f} ms + {b*1e6:.2f} µs × GPUs → {per*1000:.0f} ms per cluster-hour at {tg:,} GPUs; "
                  f"× {H:,} = **{per*H:,.0f} s** ({per*H/3600:.1f} h)")
        elif unit == "MiB":
            print(f"- {label}: {a:.3f} + {b*1000:.3f}e-3 × GPUs MiB → {per:.2f} MiB per cluster-hour; × {H:,} = "
                  f"**{per*H/1024:,.1f} GiB**")
        else:
            print(f"- {label}: {a:.1f} + {b:.3f} × GPUs → {per:,.0f} per cluster-hour; × {H:,} = **{per*H/1e6:,.1f} M rows**")
    cpu = tot["worker CPU"] + tot["Prometheus CPU"] + tot["PostgreSQL backends' CPU"]
    print(f"- CPU of the three together: {cpu:,.0f} s; on 2 cores at best {cpu/2:,.0f} s = **{cpu/2/3600:.1f} h** of wall "
          f"with 2 or more workers (1 worker: {tot['wall, 1 worker']/3600:.1f} h by the line above)")
    a, b = fit([p[5] for p in pts])
    print(f"- a worker's peak RSS: {a:.0f} + {b*1000:.1f}e-3 × GPUs MiB → **{a + b*tg:.0f} MiB** at {tg:,} GPUs "
          f"(a worker holds one batch of one cluster at a time, so neither the number of clusters nor the days add to it)")
PY
log "figures: $RES; summary: $SCALE/summary.md"
