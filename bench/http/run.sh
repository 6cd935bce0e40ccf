#!/usr/bin/env bash
# weir-gateway vs nginx, same box, same upstream, one worker each.
#
#   bench/http/run.sh [ROUNDS] [DURATION]        (defaults: 3 rounds of 5s)
#
# Installs wrk and nginx-light with apt when missing, builds weir-gateway --release, starts
# a fast upstream (a separate nginx instance answering 200 "ok" from memory, 1 worker), then:
#   proxy path:  nginx (proxy_pass + limit_req that never rejects) and weir-gateway (a token
#                bucket that never rejects), alternating, ROUNDS rounds each;
#   reject path: the same with a limit of 1 per minute (every request but the first is 429).
# Load: wrk --latency -t1 -c32 -dDURATION. Access logs off on both. Prints one line per run
# and a table of medians and weir/nginx ratios. Everything runs on 127.0.0.1 and is stopped
# on exit.
set -euo pipefail

ROUNDS=${1:-3}
DUR=${2:-5s}
# shellcheck source=bench/http/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init http wrk:wrk nginx:nginx-light

build_gateway

free_ports UP NG WG WA

# The upstream both proxies forward to.
start_upstream "$UP"

start_nginx() { # $1 rate (e.g. 100000000r/s or 1r/m), $2 burst (0: none)
    start_nginx_proxy "$NG" "$UP" "$1" "$2"
}

start_weir() { # $1 rate, $2 per, $3 burst
    weir_conf "$WG" "$WA" "$UP" "$1" "$2" "$3"
    "$WEIR" --config "$WORK/weir.toml" 2>"$WORK/weir.err" &
    WGPID=$!
    wait_port "$WG"
}

RESULTS="$WORK/results"
: >"$RESULTS"
run_path() { # $1 label, $2 nginx rate, $3 nginx burst, $4 weir rate, $5 weir per, $6 weir burst
    for r in $(seq "$ROUNDS"); do
        for who in nginx weir; do
            if [ $who = nginx ]; then start_nginx "$2" "$3"; port=$NG; pid=$NGPID
            else start_weir "$4" "$5" "$6"; port=$WG; pid=$WGPID; fi
            # warm-up: open upstream keep-alive connections, fault in code paths
            wrk -t1 -c32 -d1s "http://127.0.0.1:$port/" >/dev/null
            read -r rps p50 p99 non _ <<<"$(wrk_load "$port")"
            stop "$pid"
            printf '%-7s round %d %-6s %8s req/s  p50 %7s ms  p99 %7s ms  non-2xx %s\n' "$1" "$r" $who "$rps" "$p50" "$p99" "$non"
            echo "$1 $who $rps $p50 $p99" >>"$RESULTS"
        done
    done
}

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cpus; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# nginx $("$NGINX" -v 2>&1 | sed 's/.*\///'), wrk -t1 -c32 -d$DUR, $ROUNDS rounds, 1 worker each"
run_path proxy 100000000r/s 100000 1000000 1s 1000000
run_path reject 1r/m 0 1 60s 1
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$RESULTS" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print()
print("| path | server | req/s (median) | p50 ms | p99 ms | weir/nginx req/s | p99 weir/nginx |")
print("|---|---|---:|---:|---:|---:|---:|")
for path in ("proxy", "reject"):
    med = {}
    for who in ("nginx", "weir"):
        rs = [r for r in rows if r[0] == path and r[1] == who]
        med[who] = [statistics.median(float(r[i]) for r in rs) for i in (2, 3, 4)]
    for who in ("nginx", "weir"):
        rps, p50, p99 = med[who]
        ratio = f"{med['weir'][0] / med['nginx'][0]:.2f}x" if who == "weir" else ""
        pr = f"{med['weir'][2] / med['nginx'][2]:.2f}x" if who == "weir" else ""
        print(f"| {path} | {who} | {rps:.0f} | {p50:.2f} | {p99:.2f} | {ratio} | {pr} |")
EOF
