#!/usr/bin/env bash
# Issue 9's benchmark: the exact ingest through each sample source against the one-shot PromQL query a user would
# otherwise run, side by side in one run on the same backfilled data, on Prometheus (remote read) and on
# VictoriaMetrics (export).
#
#   bash scripts/bench-sources.sh                       # both data sets, 5 rounds
#   BENCH_SETS=dense BENCH_ROUNDS=3 bash scripts/bench-sources.sh
#
# Data sets (BENCH_SETS, default "dense sparse"):
#   dense   256 GPUs for 7 days, 60 s scrape interval (the ingest benchmark's cluster, scripts/bench-ingest.sh)
#   sparse  64 GPUs (a few hundred pods at a time) for 30 days, 120 s scrape interval
#   small   64 GPUs for 1 day (a try of the script itself)
# Each is simulated once (seed BENCH_SEED, default 7, ending on the whole hour BENCH_END, default the latest one at
# least 4 h ago), backfilled with promtool into a Prometheus 2.42 and copied with vmctl into a VictoriaMetrics on
# free loopback ports; metrics.om is deleted once both hold it (truth.json is kept).
#
# Then BENCH_ROUNDS rounds (default 5), each interleaving, in this order:
#   prom-oneshot  the one-shot query sum_over_time(sum by (namespace)(requests * on(pod) group_left() running)[Nd:1h])
#                 on Prometheus (a fresh evaluation every time: Prometheus caches no query results)
#   prom-ingest   `cardhour ingest --source remote-read` of the whole span into a freshly migrated database
#   vm-oneshot    the same query on VictoriaMetrics with nocache=1 (so its rollup cache does not answer it)
#   vm-ingest     `cardhour ingest --source vm-export`, likewise
# and once after the rounds, `--source query` against each backend (the universal fallback, for the record).
# Every ingest: wall time, cardhour's CPU (user + sys) and peak RSS (/usr/bin/time), the backend's CPU while it ran,
# the split cardhour reports (read, decode, meter, write; reading overlaps metering and writing, so the parts add up
# to more than the wall), its GPU-hours against truth.json, and the md5 of the stored usage rows (equal digests: the
# sources stored identical rows). Load average before and after every round.
#
# Output: .cardhour/bench-sources/<set>/results.tsv (every figure) and summary.md (min / median / max per side,
# median ratios, the targets). Environment: DATABASE_URL (its server; the database cardhour_bench_sources is dropped
# and re-created before every ingest), BENCH_DIR, BENCH_CHUNK (the ingest's --chunk-hours, default cardhour's 6).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

bench_args "$@"

SETS="${BENCH_SETS:-dense sparse}"
ROUNDS="${BENCH_ROUNDS:-5}"
SEED="${BENCH_SEED:-7}"
CHUNK="${BENCH_CHUNK:-6}"
BENCH_DB=cardhour_bench_sources
BASE="${BENCH_DIR:-$PWD/.cardhour/bench-sources}"
mkdir -p "$BASE"
BASE="$(cd "$BASE" && pwd)"

export SQLX_OFFLINE=true
ensure_postgres
ensure_prometheus_tools
ensure_apt_packages victoria-metrics time
_have python3 curl || die "python3 and curl are needed"
log "cargo build --release"
cargo build --release --quiet
BIN="$PWD/target/release/cardhour"

export DATABASE_URL="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/cardhour}"
DB_URL="$(_url_with_db "$DATABASE_URL" "$BENCH_DB")"
ADMIN_URL="$(_url_with_db "$DATABASE_URL" postgres)"

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

# ingest SOURCE URL TAG PID: one ingest (PID: the backend, whose CPU is counted) of the span into a fresh database; records its figures.
ingest() {
    local source="$1" url="$2" tag="$3" cpu0 t
    psql "$ADMIN_URL" -XqAt -v ON_ERROR_STOP=1 -c "drop database if exists \"$BENCH_DB\" with (force)" \
        -c "create database \"$BENCH_DB\"" >/dev/null
    DATABASE_URL="$DB_URL" "$BIN" migrate >/dev/null
    cpu0="$(cpu_of "$4")"
    /usr/bin/time -o "$SET_DIR/time.txt" -f '%e %U %S %M' "$BIN" ingest --database-url "$DB_URL" --cluster bench \
        --prometheus "$url" --source "$source" --chunk-hours "$CHUNK" --from "$FROM" --to "$TO" --format json \
        >"$SET_DIR/ingest.json" 2>"$SET_DIR/ingest.log" || die "ingest $tag failed: $(tail -5 "$SET_DIR/ingest.log")"
    t="$(python3 -c "print(f'{$(cpu_of "$4") - $cpu0:.2f}')")"
    read -r wall user sys rss <"$SET_DIR/time.txt"
    python3 - "$SET_DIR/ingest.json" "$SIM/truth.json" "$tag" "$wall" "$user" "$sys" "$rss" "$t" >>"$RES" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
truth = json.load(open(sys.argv[2]))
tag, wall, user, sys_, rss, backend = sys.argv[3:]
t = s["timings"]
want = sum(n["gpu_hours"] for n in truth["by_namespace"])
got = s["gpu_hours"]
for k, v in [("wall_s", wall), ("cpu_s", f"{float(user) + float(sys_):.2f}"), ("rss_mib", f"{int(rss) / 1024:.1f}"),
             ("backend_cpu_s", backend), ("read_s", f"{t['read_s']:.3f}"), ("decode_s", f"{t['decode_s']:.3f}"),
             ("meter_s", f"{t['meter_s']:.3f}"), ("write_s", f"{t['write_s']:.3f}"), ("hours", s["hours"]),
             ("rows", s["usage_rows"]), ("samples", s["samples_read"]), ("gpu_h_rel_err", f"{(got - want) / want:.1e}")]:
    print(f"{tag}\t{k}\t{v}")
PY
    printf '%s\tmd5\t%s\n' "$tag" "$(psql "$DB_URL" -XqAt -c \
        "select md5(string_agg(t::text, ',' order by t::text)) from gpu_usage_hourly t")" >>"$RES"
}

for set in $SETS; do
    case "$set" in
    dense) GPUS=256 DAYS=7 SCRAPE=60 ;;
    sparse) GPUS=64 DAYS=30 SCRAPE=120 ;;
    small) GPUS=64 DAYS=1 SCRAPE=60 ;;
    *) die "unknown data set $set: dense, sparse or small" ;;
    esac
    SET_DIR="$BASE/$set"
    SIM="$SET_DIR/sim"
    RES="$SET_DIR/results.tsv"
    mkdir -p "$SET_DIR"
    FROM="$(iso $((END_TS - DAYS * 86400)))"
    TO="$(iso "$END_TS")"
    QUERY="sum_over_time(sum by (namespace)(kube_pod_container_resource_requests{resource=\"nvidia_com_gpu\"} * on(pod) group_left() (kube_pod_status_phase{phase=\"Running\"} == 1))[${DAYS}d:1h])"
    : >"$RES"
    printf 'set\tshape\t%s GPUs, %s days, %s s scrape, %s .. %s, seed %s, --chunk-hours %s\n' "$GPUS" "$DAYS" "$SCRAPE" \
        "$FROM" "$TO" "$SEED" "$CHUNK" >>"$RES"
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
        ingest remote-read "$PROM_URL" prom-ingest "$PROM_PID"
        c0="$(cpu_of "$VM_PID")"
        printf 'vm-oneshot\twall_s\t%s\n' "$(oneshot "$VM_URL" "--data-urlencode nocache=1" "$SET_DIR/vm-oneshot.json")" >>"$RES"
        printf 'vm-oneshot\tbackend_cpu_s\t%s\n' "$(python3 -c "print(f'{$(cpu_of "$VM_PID") - $c0:.2f}')")" >>"$RES"
        ingest vm-export "$VM_URL" vm-ingest "$VM_PID"
        printf 'round%s\tload_after\t%s\n' "$r" "$(loadavg)" >>"$RES"
    done
    log "[$set] the query API on both backends (once)"
    ingest query "$PROM_URL" prom-query-ingest "$PROM_PID"
    ingest query "$VM_URL" vm-query-ingest "$VM_PID"
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
    return [float(v) for v in fig[side][key]]
def mmm(side, key, unit=""):
    v = nums(side, key)
    return f"{min(v):.3f} / {statistics.median(v):.3f} / {max(v):.3f}{unit}" if v else "-"
print(f"### {name}: {fig['set']['shape'][0]}\n")
print(f"{fig['set']['simulation'][0]}; TSDB {fig['set']['tsdb'][0]}; {fig['set']['machine'][0]}.\n")
rounds = sorted(k for k in fig if k.startswith("round"))
print("Load average before / after each round: " + "; ".join(
    f"{fig[r]['load_before'][0]} / {fig[r]['load_after'][0]}" for r in rounds) + "\n")
print("| side | wall s (min / median / max) | cardhour CPU s | backend CPU s | peak RSS MiB | read / decode / meter / write s (medians) | rows | md5 |")
print("|---|---|---|---|---|---|---|---|")
for side in ["prom-oneshot", "prom-ingest", "vm-oneshot", "vm-ingest", "prom-query-ingest", "vm-query-ingest"]:
    if side not in fig:
        continue
    f = fig[side]
    split = " / ".join(f"{statistics.median(nums(side, k)):.2f}" for k in ["read_s", "decode_s", "meter_s", "write_s"]) if f["read_s"] else "-"
    md5 = ", ".join(sorted(set(f["md5"])))[:12] if f["md5"] else "-"
    print(f"| {side} | {mmm(side, 'wall_s')} | {mmm(side, 'cpu_s') if f['cpu_s'] else '-'} | {mmm(side, 'backend_cpu_s')} "
          f"| {max(nums(side, 'rss_mib')) if f['rss_mib'] else '-'} | {split} | {f['rows'][0] if f['rows'] else '-'} | {md5} |")
print()
md5s = {s: set(fig[s]["md5"]) for s in fig if fig[s]["md5"]}
same = len(set().union(*md5s.values())) == 1 if md5s else False
print(f"Stored rows identical across every ingest and source (md5): **{'yes' if same else 'NO'}** ({len(md5s)} sides).")
errs = [float(e) for s in fig for e in fig[s]["gpu_h_rel_err"]]
if errs:
    print(f"GPU-hours against truth.json: relative error at most {max(abs(e) for e in errs):.1e}.")
for a, b in [("prom-ingest", "prom-oneshot"), ("vm-ingest", "vm-oneshot")]:
    if fig[a]["wall_s"] and fig[b]["wall_s"]:
        ratio = statistics.median(nums(a, "wall_s")) / statistics.median(nums(b, "wall_s"))
        cpu = statistics.median(nums(a, "cpu_s")) + statistics.median(nums(a, "backend_cpu_s"))
        ocpu = statistics.median(nums(b, "backend_cpu_s"))
        print(f"- {a} / {b}: **{ratio:.1f}×** wall (median / median; target ≤ 2×); CPU (cardhour + backend) "
              f"{cpu:.2f} s vs the query's {ocpu:.2f} s of backend CPU.")
for s in ["prom-oneshot", "vm-oneshot"]:
    if fig[s]["status"]:
        print(f"- {s} answer: {fig[s]['status'][0]}")
PY
    cat "$SET_DIR/summary.md"
    stop_prometheus "$PROM_DIR"
    kill "$VM_PID" 2>/dev/null || true
    wait "$VM_PID" 2>/dev/null || true
done
