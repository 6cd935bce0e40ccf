#!/usr/bin/env bash
# weir-gateway with a local limit vs a global limit on one Redis server and on a Redis
# Cluster (each with lease 0 and lease > 0), same box, same upstream, one worker,
# alternating rounds (issue 7's throughput ratio; issue 21's cluster figures).
#
#   bench/http/global.sh [ROUNDS] [DURATION] [LEASE]    (defaults: 3 rounds of 5s, lease 1000)
#
# Installs wrk, nginx-light (the upstream) and redis-server with apt when missing, builds
# weir-gateway --release, starts a fast upstream (nginx answering 200 from memory) and a
# redis-server and a Redis Cluster (three masters, one replica each: six more redis-server
# processes joined with redis-cli --cluster create) on free loopback ports, then runs the
# gateway with the same token bucket (never rejecting) as scope = "local", and "global"
# with lease = 0 and lease = LEASE on the single server and on the cluster. Prints one
# line per run and a table of medians and ratios to local.
set -euo pipefail

ROUNDS=${1:-3}
DUR=${2:-5s}
LEASE=${3:-1000}
# shellcheck source=bench/http/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init global wrk:wrk nginx:nginx-light redis-server:redis-server redis-cli:redis-tools

build_gateway


free_ports UP RP WG WA

start_upstream "$UP"
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no >/dev/null &
PIDS+=($!)
wait_port "$RP"

# The cluster: client and bus ports all free ones; ready when every node says ok.
CPORTS=()
for i in 0 1 2 3 4 5; do
    p=$(free_port)
    CPORTS+=("$p")
    redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no \
        --cluster-enabled yes --cluster-node-timeout 1000 --cluster-port "$(free_port)" \
        --cluster-config-file "$WORK/nodes-$i.conf" --dir "$WORK" >/dev/null &
    PIDS+=($!)
done
for p in "${CPORTS[@]}"; do wait_port "$p"; done
redis-cli --cluster create $(printf '127.0.0.1:%s ' "${CPORTS[@]}") \
    --cluster-replicas 1 --cluster-yes >/dev/null
for _ in $(seq 100); do
    ok=0
    for p in "${CPORTS[@]}"; do
        redis-cli -p "$p" CLUSTER INFO | grep -q cluster_state:ok && ok=$((ok + 1))
    done
    [ "$ok" = 6 ] && break
    sleep 0.1
done
SEEDS=$(printf '"127.0.0.1:%s", ' "${CPORTS[@]}")
SEEDS="[${SEEDS%, }]"

start_weir() { # $1 scope line(s), $2 lease, $3 the store's address line
    weir_conf "$WG" "$WA" "$UP" 100000000 1s 100000000 "[store]
kind = \"redis\"
$3
timeout_ms = 100
lease = $2" "$1"
    "$WEIR" --config "$WORK/weir.toml" 2>"$WORK/weir.err" &
    WGPID=$!
    wait_port "$WG"
}

RESULTS="$WORK/results"
: >"$RESULTS"
echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cpus; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# wrk -t1 -c32 -d$DUR, $ROUNDS rounds, 1 worker, token bucket never rejecting"
for r in $(seq "$ROUNDS"); do
    for mode in local global-lease0 "global-lease$LEASE" cluster-lease0 "cluster-lease$LEASE"; do
        global=$'scope = "global"\non_store_error = "deny"'
        single="url = \"redis://127.0.0.1:$RP/0\""
        cluster="cluster = $SEEDS"
        case $mode in
            local) start_weir 'scope = "local"' 0 "$single" ;;
            global-lease0) start_weir "$global" 0 "$single" ;;
            global-*) start_weir "$global" "$LEASE" "$single" ;;
            cluster-lease0) start_weir "$global" 0 "$cluster" ;;
            *) start_weir "$global" "$LEASE" "$cluster" ;;
        esac
        wrk -t1 -c32 -d1s "http://127.0.0.1:$WG/" >/dev/null
        read -r rps _ p99 non _ <<<"$(wrk_load "$WG")"
        stop "$WGPID"
        printf 'round %d %-18s %8s req/s  p99 %7s ms  non-2xx %s\n' "$r" "$mode" "$rps" "$p99" "$non"
        echo "$mode $rps $p99 $non" >>"$RESULTS"
    done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$RESULTS" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
modes = list(dict.fromkeys(r[0] for r in rows))
med = {m: [statistics.median(float(r[i]) for r in rows if r[0] == m) for i in (1, 2, 3)] for m in modes}
print()
print("| limit | req/s (median) | p99 ms | non-2xx | vs local req/s |")
print("|---|---:|---:|---:|---:|")
for m in modes:
    rps, p99, non = med[m]
    print(f"| {m} | {rps:.0f} | {p99:.2f} | {non:.0f} | {rps / med['local'][0]:.2f}x |")
EOF
