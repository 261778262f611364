#!/usr/bin/env bash
# Issue 9's benchmark: the exact ingest through each sample source against the one-shot PromQL query a user would
# otherwise run, side by side in one run on the same backfilled data, on Prometheus (remote read) and on
# VictoriaMetrics (export).
#
#   bash scripts/bench-sources.sh                       # both data sets, 5 rounds
#   BENCH_SETS=dense BENCH_ROUNDS=3 bash scripts/bench-sources.sh
#
# Data sets (BENCH_SETS, default "dense sparse long"):
#   dense   256 GPUs for 7 days, 60 s scrape interval (the ingest benchmark's cluster, scripts/bench-ingest.sh)
#   sparse  64 GPUs (a few hundred pods at a time) for 30 days, 120 s scrape interval
#   long    64 GPUs (a few hundred pods at a time) for 90 days, 120 s scrape interval: a long sparse history
#   small   64 GPUs for 1 day (a try of the script itself)
# Each is simulated once (seed BENCH_SEED, default 7, ending on the whole hour BENCH_END, default the latest one at
# least 4 h ago), backfilled with promtool into a Prometheus 2.42 and copied with vmctl into a VictoriaMetrics on
# free loopback ports; metrics.om is deleted once both hold it (truth.json is kept).
#
# Then BENCH_ROUNDS rounds (default 5), each interleaving, in this order:
#   prom-oneshot  the one-shot query sum_over_time(sum by (namespace)(requests * on(pod) group_left() running)[Nd:1h])
#                 on Prometheus (a fresh evaluation every time: Prometheus caches no query results)
#   prom-floor    the floor: Prometheus reading every sample the exact ingest reads, once — one
#                 count(count_over_time(<selector>[Nd])) per metric the ingest reads, one after another, summed
#   prom-ingest   `cardhour ingest --source remote-read` of the whole span into a freshly migrated database
#   prom-before   the same with the binary of BENCH_BEFORE (a git revision; the side is left out without it)
#   vm-oneshot, vm-floor, vm-ingest, vm-before: the same on VictoriaMetrics (nocache=1; `--source vm-export`)
# and once after the rounds, `--source query` against each backend (the universal fallback, for the record).
# Every ingest: wall time, cardhour's CPU (user + sys) and peak RSS (/usr/bin/time), the backend's CPU and
# PostgreSQL's CPU while it ran (a PostgreSQL of the benchmark's own, started with initdb on a free port, so no other
# client's work is counted: its postmaster's CPU and that of the backends it reaped), the split cardhour reports
# (read, decode, meter, write; the stages overlap, so the parts add up to more than the wall), its batches, its
# GPU-hours against truth.json, and the md5 of the stored usage rows (equal digests: identical rows). Load average
# before and after every round.
#
# Output: .cardhour/bench-sources/<set>/results.tsv (every figure) and summary.md (min / median / max per side,
# median ratios, the targets). Environment: BENCH_DIR, BENCH_CHUNK (passed as --chunk-hours when set),
# BENCH_SAMPLES (passed as --batch-samples when set), BENCH_BEFORE (a revision to compare with, built in
# .cardhour/bench-sources/before/ with the same target directory; cardhour's own release artifacts are cleaned
# after it, so the next `cargo build --release` of this checkout compiles cardhour again, ~3 min).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

bench_args "$@"

SETS="${BENCH_SETS:-dense sparse long}"
ROUNDS="${BENCH_ROUNDS:-5}"
SEED="${BENCH_SEED:-7}"
INGEST_FLAGS=()
[[ -n "${BENCH_CHUNK:-}" ]] && INGEST_FLAGS+=(--chunk-hours "$BENCH_CHUNK")
[[ -n "${BENCH_SAMPLES:-}" ]] && INGEST_FLAGS+=(--batch-samples "$BENCH_SAMPLES")
BENCH_DB=cardhour_bench_sources
BASE="${BENCH_DIR:-$PWD/.cardhour/bench-sources}"
mkdir -p "$BASE"
BASE="$(cd "$BASE" && pwd)"

export SQLX_OFFLINE=true
ensure_prometheus_tools
ensure_apt_packages victoria-metrics time postgresql
_have python3 curl || die "python3 and curl are needed"
log "cargo build --release"
cargo build --release --quiet
# a copy: building the before side in the same target directory overwrites target/release/cardhour
BIN="$BASE/cardhour-now"
cp target/release/cardhour "$BIN"
BIN_BEFORE=""
if [[ -n "${BENCH_BEFORE:-}" ]]; then
    rev="$(git rev-parse --short "$BENCH_BEFORE")" || die "BENCH_BEFORE: no revision $BENCH_BEFORE"
    log "cargo build --release of $rev (the before side), in $BASE/before"
    rm -rf "$BASE/before" && mkdir -p "$BASE/before"
    # extracted with today's times (-m): with the commit's, a revision committed after this checkout's last build
    # looks older than that build to cargo, and its fingerprint passes for fresh (the same binary again)
    git archive "$rev" | tar -x -m -C "$BASE/before"
    # the same target directory: only cardhour itself is built again. Cargo files both checkouts' cardhour under
    # one fingerprint (a path package's hash leaves out where it lies), so the before side's artifacts and
    # fingerprint would pass for this checkout's from then on: they are removed once its binary is copied aside
    CARGO_TARGET_DIR="$PWD/target" cargo build --release --quiet --manifest-path "$BASE/before/Cargo.toml"
    BIN_BEFORE="$BASE/cardhour-$rev"
    cp target/release/cardhour "$BIN_BEFORE"
    cargo clean --release --quiet -p cardhour
    # this checkout's binary back where a user looks for it (the next cargo build makes it anew, unfingerprinted)
    cp "$BIN" target/release/cardhour
    cmp -s "$BIN" "$BIN_BEFORE" && die "BENCH_BEFORE: $rev built the same binary as this checkout"
fi

# A PostgreSQL of the benchmark's own (initdb into $BASE/pg, a free port, run as the postgres user when root), so
# its CPU is the ingests' alone.
PG_DIR="$BASE/pg"
PG_BIN="/usr/lib/postgresql/$(ls /usr/lib/postgresql | sort -V | tail -n 1)/bin"
as_pg() { if ((EUID == 0)); then runuser -u postgres -- "$@"; else "$@"; fi; }
rm -rf "$PG_DIR" && mkdir -p "$PG_DIR"
((EUID == 0)) && chown postgres "$PG_DIR"
as_pg "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres --auth=trust >/dev/null
PG_PORT="$(free_port 15532)"
as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/pg.log" -w \
    -o "-p $PG_PORT -k $PG_DIR -c listen_addresses=127.0.0.1" start >/dev/null
PG_PID="$(head -n 1 "$PG_DIR/data/postmaster.pid")"
DB_URL="postgres://postgres@127.0.0.1:$PG_PORT/$BENCH_DB"
ADMIN_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres"

# cpu_tree_of PID: user+system CPU seconds of the process and of the children it reaped (a postmaster's backends).
cpu_tree_of() { awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f", ($12 + $13 + $14 + $15) / hz }' "/proc/$1/stat"; }

if [[ -n "${BENCH_END:-}" ]]; then
    END_TS="$(date -u -d "$BENCH_END" +%s)"
else
    END_TS=$((($(date -u +%s) / 3600) * 3600 - 4 * 3600))
fi
((END_TS % 3600 == 0 && END_TS <= $(date -u +%s) - 4 * 3600)) || die "BENCH_END must be a whole hour at least 4 h ago"
iso() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }

VM_PIDS=()
PROM_DIRS=()
cleanup() {
    local rc=$? d p
    for d in "${PROM_DIRS[@]}"; do stop_prometheus "$d" || true; done
    for p in "${VM_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m fast stop >/dev/null 2>&1 || true
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_vm DIR TSDB: VictoriaMetrics on a free port with the blocks of TSDB copied in by vmctl; sets VM_URL, VM_PID.
start_vm() {
    local dir="$1" tsdb="$2" port now n pad
    rm -rf "$dir" && mkdir -p "$dir/snap"
    # vmctl reads a snapshot directory: the blocks, hard-linked, and a block of padding series after them (vmctl 1.79
    # drops the series still queued in its importer when its reader ends; tests/common/victoria.rs)
    find "$tsdb" -mindepth 1 -maxdepth 1 -type d -name '01*' -exec cp -al {} "$dir/snap/" \;
    now=$(date -u +%s)
    pad="$dir/padding.om"
    {
        echo "# TYPE cardhour_vmctl_padding gauge"
        for n in $(seq 0 31); do echo "cardhour_vmctl_padding{n=\"$n\"} 0 $((now - 3600))"; done
        echo "# EOF"
    } >"$pad"
    promtool tsdb create-blocks-from openmetrics --quiet "$pad" "$dir/snap" >/dev/null
    port="$(free_port 18428)"
    victoria-metrics -storageDataPath="$dir/data" -retentionPeriod=100y -httpListenAddr="127.0.0.1:$port" \
        -search.disableCache >"$dir/vm.log" 2>&1 &
    VM_PID=$!
    VM_PIDS+=("$VM_PID")
    VM_URL="http://127.0.0.1:$port"
    until curl -fsS -o /dev/null "$VM_URL/health" 2>/dev/null; do
        kill -0 "$VM_PID" 2>/dev/null || die "victoria-metrics exited: $(tail -5 "$dir/vm.log")"
        sleep 0.2
    done
    log "vmctl: copying $tsdb into VictoriaMetrics at $VM_URL"
    # vmctl's progress bars need a terminal on stdin: a pseudo-terminal's master side will do
    local out sent
    out="$(vmctl prometheus -s --vm-disable-progress-bar --prom-concurrency=1 --vm-concurrency=2 \
        --prom-snapshot="$dir/snap" --vm-addr="$VM_URL" 0<>/dev/ptmx 2>&1)" || die "vmctl failed: $(tail -20 <<<"$out")"
    grep -q "Import finished!" <<<"$out" || die "vmctl did not finish: $(tail -20 <<<"$out")"
    sent="$(sed -n 's/^ *total samples: \([0-9]*\).*/\1/p' <<<"$out" | head -1)"
    [[ -n "$sent" ]] || die "vmctl printed no sample count: $(tail -20 <<<"$out")"
    local deadline=$((SECONDS + 300)) m received pending
    while :; do
        curl -fsS -o /dev/null "$VM_URL/internal/force_flush"
        m="$(curl -fsS "$VM_URL/metrics")"
        received="$(awk '$1 == "vm_rows_inserted_total{type=\"vmimport\"}" { print $2 }' <<<"$m")"
        pending="$(awk '$1 ~ /^vm_pending_rows\{type="(storage|indexdb)"\}$/ { s += $2 } END { print s + 0 }' <<<"$m")"
        [[ "$received" == "$sent" && "$pending" == 0 ]] && break
        ((SECONDS < deadline)) || die "VictoriaMetrics: $sent rows sent, $received received, $pending pending"
        sleep 0.5
    done
    log "VictoriaMetrics holds the $sent samples vmctl sent"
}

# oneshot URL EXTRA OUT: seconds the one-shot query took (curl), the answer in OUT.
oneshot() {
    curl -sS -o "$3" -w '%{time_total}' --max-time 900 --data-urlencode "query=$QUERY" \
        --data-urlencode "time=$END_TS" $2 "$1/api/v1/query"
}

# floor URL EXTRA: seconds Prometheus or VictoriaMetrics takes to read every sample the ingest reads, once: one
# count(count_over_time(<selector>[Nd])) per metric of the ingest's selectors (a range function drops the name, so
# the DCGM metrics one at a time), sent one after another; the seconds summed.
FLOOR_SELECTORS=(
    'kube_pod_container_resource_requests{unit="integer"}'
    'kube_pod_status_phase{phase="Running"}'
    'kube_namespace_labels'
    'kube_node_status_capacity{resource=~"nvidia_com_.+|amd_com_.+|habana_ai_.+|.*gpu.*"}'
    'DCGM_FI_PROF_SM_ACTIVE' 'DCGM_FI_PROF_GR_ENGINE_ACTIVE' 'DCGM_FI_DEV_GPU_UTIL' 'DCGM_FI_DEV_FB_USED'
    'hami_container_device_utilization_ratio'
    'kube_node_status_allocatable{resource=~"nvidia_com_.+|amd_com_.+|habana_ai_.+|.*gpu.*"}'
    'kube_node_spec_unschedulable'
    'kube_node_labels'
)
floor() {
    local url="$1" extra="$2" sel total=0 t
    for sel in "${FLOOR_SELECTORS[@]}"; do
        # shellcheck disable=SC2086 # extra is a list of curl arguments
        t="$(curl -fsS -o /dev/null -w '%{time_total}' --max-time 900 \
            --data-urlencode "query=count(count_over_time(${sel}[${DAYS}d]))" \
            --data-urlencode "time=$((END_TS - 1)).999" $extra "$url/api/v1/query")" || die "floor query failed: $sel"
        total="$(python3 -c "print($total + $t)")"
    done
    printf '%s' "$total"
}

# ingest BIN SOURCE URL TAG PID: one ingest by BIN (PID: the backend, whose CPU is counted) of the span into a
# fresh database; records its figures.
ingest() {
    local bin="$1" source="$2" url="$3" tag="$4" pid="$5" cpu0 pg0 t pg flags=("${INGEST_FLAGS[@]}")
    [[ "$bin" == "$BIN" ]] || flags=()
    psql "$ADMIN_URL" -XqAt -v ON_ERROR_STOP=1 -c "drop database if exists \"$BENCH_DB\" with (force)" \
        -c "create database \"$BENCH_DB\"" >/dev/null
    DATABASE_URL="$DB_URL" "$bin" migrate >/dev/null
    cpu0="$(cpu_of "$pid")"
    pg0="$(cpu_tree_of "$PG_PID")"
    /usr/bin/time -o "$SET_DIR/time.txt" -f '%e %U %S %M' "$bin" ingest --database-url "$DB_URL" --cluster bench \
        --prometheus "$url" --source "$source" "${flags[@]}" --from "$FROM" --to "$TO" --format json \
        >"$SET_DIR/ingest.json" 2>"$SET_DIR/ingest.log" || die "ingest $tag failed: $(tail -5 "$SET_DIR/ingest.log")"
    t="$(python3 -c "print(f'{$(cpu_of "$pid") - $cpu0:.2f}')")"
    pg="$(python3 -c "print(f'{$(cpu_tree_of "$PG_PID") - $pg0:.2f}')")"
    read -r wall user sys rss <"$SET_DIR/time.txt"
    python3 - "$SET_DIR/ingest.json" "$SIM/truth.json" "$tag" "$wall" "$user" "$sys" "$rss" "$t" "$pg" >>"$RES" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
truth = json.load(open(sys.argv[2]))
tag, wall, user, sys_, rss, backend, pg = sys.argv[3:]
t = s["timings"]
want = sum(n["gpu_hours"] for n in truth["by_namespace"])
got = s["gpu_hours"]
for k, v in [("wall_s", wall), ("cpu_s", f"{float(user) + float(sys_):.2f}"), ("rss_mib", f"{int(rss) / 1024:.1f}"),
             ("backend_cpu_s", backend), ("pg_cpu_s", pg), ("read_s", f"{t['read_s']:.3f}"),
             ("decode_s", f"{t['decode_s']:.3f}"), ("meter_s", f"{t['meter_s']:.3f}"), ("write_s", f"{t['write_s']:.3f}"),
             ("hours", s["hours"]), ("batches", s.get("batches", "-")), ("rows", s["usage_rows"]),
             ("serving_rows", s.get("serving_rows", 0)), ("tokens", s.get("tokens", 0)),
             ("samples", s["samples_read"]), ("gpu_h_rel_err", f"{(got - want) / want:.1e}")]:
    print(f"{tag}\t{k}\t{v}")
PY
    printf '%s\tmd5\t%s\n' "$tag" "$(psql "$DB_URL" -XqAt -c \
        "select md5(string_agg(t::text, ',' order by t::text)) from gpu_usage_hourly t")" >>"$RES"
}

for set in $SETS; do
    case "$set" in
    dense) GPUS=256 DAYS=7 SCRAPE=60 ;;
    sparse) GPUS=64 DAYS=30 SCRAPE=120 ;;
    long) GPUS=64 DAYS=90 SCRAPE=120 ;;
    small) GPUS=64 DAYS=1 SCRAPE=60 ;;
    *) die "unknown data set $set: dense, sparse, long or small" ;;
    esac
    SET_DIR="$BASE/$set"
    SIM="$SET_DIR/sim"
    RES="$SET_DIR/results.tsv"
    mkdir -p "$SET_DIR"
    FROM="$(iso $((END_TS - DAYS * 86400)))"
    TO="$(iso "$END_TS")"
    QUERY="sum_over_time(sum by (namespace)(kube_pod_container_resource_requests{resource=\"nvidia_com_gpu\"} * on(pod) group_left() (kube_pod_status_phase{phase=\"Running\"} == 1))[${DAYS}d:1h])"
    : >"$RES"
    printf 'set\tshape\t%s GPUs, %s days, %s s scrape, %s .. %s, seed %s, ingest flags: %s%s\n' "$GPUS" "$DAYS" \
        "$SCRAPE" "$FROM" "$TO" "$SEED" "${INGEST_FLAGS[*]:-defaults}" "${BIN_BEFORE:+, before: $(basename "$BIN_BEFORE")}" >>"$RES"
    printf 'set\tmachine\t%s cores, %s\n' "$(nproc)" "$(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)" >>"$RES"

    log "[$set] simulating $GPUS GPUs for $DAYS days at ${SCRAPE}s ending $TO"
    rm -rf "$SIM"
    "$BIN" simulate --gpus "$GPUS" --days "$DAYS" --scrape-interval "${SCRAPE}s" --seed "$SEED" --end "$TO" \
        --out "$SIM" >"$SET_DIR/simulate.txt"
    printf 'set\tsimulation\t%s\n' "$(head -n 1 "$SET_DIR/simulate.txt")" >>"$RES"
    PROM_DIR="$SET_DIR/prom"
    PROM_DIRS+=("$PROM_DIR")
    port="$(free_port 19491)"
    backfill_and_start_prometheus "$SIM/metrics.om" "$PROM_DIR" "$port"
    PROM_URL="http://127.0.0.1:$port"
    PROM_PID="$(<"$PROM_DIR/prometheus.pid")"
    start_vm "$SET_DIR/vm" "$PROM_DIR/tsdb"
    rm -f "$SIM/metrics.om"
    printf 'set\ttsdb\t%s (Prometheus), %s (VictoriaMetrics)\n' "$(du -sh "$PROM_DIR/tsdb" | cut -f1)" \
        "$(du -sh "$SET_DIR/vm/data" | cut -f1)" >>"$RES"

    for r in $(seq 1 "$ROUNDS"); do
        printf 'round%s\tload_before\t%s\n' "$r" "$(loadavg)" >>"$RES"
        log "[$set] round $r of $ROUNDS, load $(loadavg)"
        c0="$(cpu_of "$PROM_PID")"
        printf 'prom-oneshot\twall_s\t%s\n' "$(oneshot "$PROM_URL" "" "$SET_DIR/prom-oneshot.json")" >>"$RES"
        printf 'prom-oneshot\tbackend_cpu_s\t%s\n' "$(python3 -c "print(f'{$(cpu_of "$PROM_PID") - $c0:.2f}')")" >>"$RES"
        c0="$(cpu_of "$PROM_PID")"
        printf 'prom-floor\twall_s\t%s\n' "$(floor "$PROM_URL" "")" >>"$RES"
        printf 'prom-floor\tbackend_cpu_s\t%s\n' "$(python3 -c "print(f'{$(cpu_of "$PROM_PID") - $c0:.2f}')")" >>"$RES"
        ingest "$BIN" remote-read "$PROM_URL" prom-ingest "$PROM_PID"
        [[ -z "$BIN_BEFORE" ]] || ingest "$BIN_BEFORE" remote-read "$PROM_URL" prom-before "$PROM_PID"
        c0="$(cpu_of "$VM_PID")"
        printf 'vm-oneshot\twall_s\t%s\n' "$(oneshot "$VM_URL" "--data-urlencode nocache=1" "$SET_DIR/vm-oneshot.json")" >>"$RES"
        printf 'vm-oneshot\tbackend_cpu_s\t%s\n' "$(python3 -c "print(f'{$(cpu_of "$VM_PID") - $c0:.2f}')")" >>"$RES"
        c0="$(cpu_of "$VM_PID")"
        printf 'vm-floor\twall_s\t%s\n' "$(floor "$VM_URL" "--data-urlencode nocache=1")" >>"$RES"
        printf 'vm-floor\tbackend_cpu_s\t%s\n' "$(python3 -c "print(f'{$(cpu_of "$VM_PID") - $c0:.2f}')")" >>"$RES"
        ingest "$BIN" vm-export "$VM_URL" vm-ingest "$VM_PID"
        [[ -z "$BIN_BEFORE" ]] || ingest "$BIN_BEFORE" vm-export "$VM_URL" vm-before "$VM_PID"
        printf 'round%s\tload_after\t%s\n' "$r" "$(loadavg)" >>"$RES"
    done
    log "[$set] the query API on both backends (once)"
    ingest "$BIN" query "$PROM_URL" prom-query-ingest "$PROM_PID"
    ingest "$BIN" query "$VM_URL" vm-query-ingest "$VM_PID"
    for a in prom-oneshot vm-oneshot; do
        printf '%s\tstatus\t%s\n' "$a" "$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["status"], len(r["data"]["result"]), "series", round(sum(float(x["value"][1]) for x in r["data"]["result"]), 3), "GPU-h")' "$SET_DIR/$a.json")" >>"$RES"
    done

    python3 - "$RES" "$set" >"$SET_DIR/summary.md" <<'PY'
import collections, statistics, sys
res, name = sys.argv[1], sys.argv[2]
fig = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(res):
    side, key, value = line.rstrip("\n").split("\t", 2)
    fig[side][key].append(value)
def nums(side, key):
    return [float(v) for v in fig[side][key] if v not in ("", "-")]
def med(side, key):
    v = nums(side, key)
    return statistics.median(v) if v else None
def mmm(side, key):
    v = nums(side, key)
    return f"{min(v):.3f} / {statistics.median(v):.3f} / {max(v):.3f}" if v else "-"
print(f"### {name}: {fig['set']['shape'][0]}\n")
print(f"{fig['set']['simulation'][0]}; TSDB {fig['set']['tsdb'][0]}; {fig['set']['machine'][0]}.\n")
rounds = sorted(k for k in fig if k.startswith("round"))
print("Load average before / after each round: " + "; ".join(
    f"{fig[r]['load_before'][0]} / {fig[r]['load_after'][0]}" for r in rounds) + "\n")
print("| side | wall s (min / median / max) | cardhour CPU s | backend CPU s | PostgreSQL CPU s | peak RSS MiB "
      "| read / decode / meter / write s (medians) | batches | hours | rows | md5 |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
sides = ["prom-oneshot", "prom-floor", "prom-ingest", "prom-before", "vm-oneshot", "vm-floor", "vm-ingest", "vm-before",
         "prom-query-ingest", "vm-query-ingest"]
for side in sides:
    if side not in fig:
        continue
    f = fig[side]
    split = " / ".join(f"{med(side, k):.2f}" for k in ["read_s", "decode_s", "meter_s", "write_s"]) if f["read_s"] else "-"
    md5 = ", ".join(sorted(set(f["md5"])))[:12] if f["md5"] else "-"
    first = lambda k: f[k][0] if f[k] else "-"
    print(f"| {side} | {mmm(side, 'wall_s')} | {mmm(side, 'cpu_s')} | {mmm(side, 'backend_cpu_s')} "
          f"| {mmm(side, 'pg_cpu_s')} | {max(nums(side, 'rss_mib')) if f['rss_mib'] else '-'} | {split} "
          f"| {first('batches')} | {first('hours')} | {first('rows')} | {md5} |")
print()
md5s = {s: set(fig[s]["md5"]) for s in fig if fig[s]["md5"]}
same = len(set().union(*md5s.values())) == 1 if md5s else False
print(f"Stored rows identical across every ingest and source (md5): **{'yes' if same else 'NO'}** ({len(md5s)} sides).")
errs = [float(e) for s in fig for e in fig[s]["gpu_h_rel_err"]]
if errs:
    print(f"GPU-hours against truth.json: relative error at most {max(abs(e) for e in errs):.1e}.")
for b in ["prom", "vm"]:
    ing = f"{b}-ingest"
    if not fig[ing]["wall_s"]:
        continue
    w = med(ing, "wall_s")
    parts = []
    for other, target in [(f"{b}-oneshot", 2.5), (f"{b}-floor", 3.0), (f"{b}-before", None)]:
        if fig[other]["wall_s"]:
            r = w / med(other, "wall_s")
            verdict = "" if target is None else (" (≤ %.1f×: %s)" % (target, "met" if r <= target else "not met"))
            parts.append(f"{r:.2f}× {other.split('-')[1]}{verdict}")
    hours = med(ing, "hours") or 1
    cpu = [med(ing, k) for k in ("cpu_s", "backend_cpu_s", "pg_cpu_s")]
    print(f"- {ing}: median wall {w:.2f} s = " + "; ".join(parts) + ". CPU per stored hour (ms): cardhour "
          f"{cpu[0] / hours * 1000:.1f}, backend {cpu[1] / hours * 1000:.1f}, PostgreSQL {cpu[2] / hours * 1000:.1f}.")
    bef = f"{b}-before"
    if fig[bef]["wall_s"]:
        c = [med(bef, k) for k in ("cpu_s", "backend_cpu_s", "pg_cpu_s")]
        print(f"  before: median wall {med(bef, 'wall_s'):.2f} s; CPU per stored hour (ms): cardhour "
              f"{c[0] / hours * 1000:.1f}, backend {c[1] / hours * 1000:.1f}, PostgreSQL {c[2] / hours * 1000:.1f}; "
              f"peak RSS {max(nums(bef, 'rss_mib')):.1f} MiB against {max(nums(ing, 'rss_mib')):.1f} MiB now.")
print(f"- peak RSS ≤ 256 MiB with default settings: "
      + ", ".join(f"{s} {max(nums(s, 'rss_mib')):.1f}" for s in sides if fig[s]["rss_mib"] and not s.endswith("before")))
for s in ["prom-oneshot", "vm-oneshot"]:
    if fig[s]["status"]:
        print(f"- {s} answer: {fig[s]['status'][0]}")
PY
    cat "$SET_DIR/summary.md"
    stop_prometheus "$PROM_DIR"
    kill "$VM_PID" 2>/dev/null || true
    wait "$VM_PID" 2>/dev/null || true
done
