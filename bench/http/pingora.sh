#!/usr/bin/env bash
# weir-pingora vs a plain Pingora proxy (the module's overhead) vs weir-gateway vs nginx, same
# box, same upstream, one worker each.
#
#   bench/http/pingora.sh [ROUNDS] [DURATION]        (defaults: 3 rounds of 5s)
#
# Same method as bench/http/run.sh: a fast upstream (a separate nginx answering 200 "ok" from
# memory, 1 worker); proxy path = a token bucket that never rejects (nginx: limit_req with a
# huge rate), reject path = 1 per minute (every request but the first is 429; the plain proxy
# has no limiter and sits this one out). Servers alternate within each round; every server is
# restarted per run, warmed up for 1 s, then loaded with wrk --latency -t1 -c32 -dDURATION.
# Access logs off everywhere. Prints one line per run and a table of medians with ratios to
# weir-pingora. Each run also records the server's CPU time (user + system, all its threads,
# from /proc) per request served: every proxy here saturates one core, so CPU per request is
# what decides req/s, and it moves far less than req/s with other load on the machine.
set -euo pipefail

ROUNDS=${1:-3}
DUR=${2:-5s}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/weir-bench-pingora.XXXXXX)
# shellcheck source=bench/http/lib.sh
. "$ROOT/bench/http/lib.sh"
trap cleanup EXIT
ensure_tools wrk:wrk nginx:nginx-light
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

(cd "$ROOT" && cargo build --release -q -p weir-gateway -p weir-pingora --bin weir-gateway --bin weir-pingora --example plain)
GATEWAY="$ROOT/target/release/weir-gateway"
PINGORA="$ROOT/target/release/weir-pingora"
PLAIN="$ROOT/target/release/examples/plain"

UP=$(free_port)
PORT=$(free_port)
ADMIN=$(free_port)

start_upstream "$UP"

# start SERVER PATH: starts it on $PORT, sets PID.
start() {
    local who=$1 path=$2 rate per burst ngrate ngburst
    if [ "$path" = proxy ]; then rate=1000000 per=1s burst=1000000 ngrate=100000000r/s ngburst=100000
    else rate=1 per=60s burst=1 ngrate=1r/m ngburst=0; fi
    case $who in
    nginx)
        local lr="limit_req zone=z;"
        [ "$ngburst" != 0 ] && lr="limit_req zone=z burst=$ngburst nodelay;"
        nginx_conf "$WORK/ng" "
    limit_req_zone \$server_name zone=z:1m rate=$ngrate;
    limit_req_status 429;
    upstream up { server 127.0.0.1:$UP; keepalive 64; }
    server {
        listen 127.0.0.1:$PORT reuseport;
        server_name bench;
        location / {
            $lr
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }
    }"
        "$NGINX" -p "$WORK/ng" -c "$WORK/ng/nginx.conf" &
        ;;
    plain)
        "$PLAIN" "127.0.0.1:$PORT" "127.0.0.1:$UP" 1 >/dev/null 2>"$WORK/plain.err" &
        ;;
    gateway | pingora)
        weir_conf "$PORT" "$ADMIN" "$UP" "$rate" "$per" "$burst"
        local bin=$GATEWAY
        [ "$who" = pingora ] && bin=$PINGORA
        "$bin" --config "$WORK/weir.toml" >/dev/null 2>"$WORK/$who.err" &
        ;;
    esac
    PID=$!
    wait_port "$PORT"
}

stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # user + system, in clock ticks
TICK=$(getconf CLK_TCK)

load() { # prints "req/s p50_ms p99_ms non2xx requests"
    wrk --latency -t1 -c32 -d"$DUR" "http://127.0.0.1:$PORT/" >"$WORK/wrk.out"
    python3 - "$WORK/wrk.out" <<'EOF'
import re, sys
t = open(sys.argv[1]).read()
def ms(label):
    m = re.search(r"^\s*" + label + r"\s+([\d.]+)(us|ms|s)\s*$", t, re.M)
    v, u = float(m.group(1)), m.group(2)
    return v / 1000 if u == "us" else v * 1000 if u == "s" else v
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
non = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", t)
n = int(re.search(r"(\d+) requests in", t).group(1))
print(f"{rps:.0f} {ms('50%'):.3f} {ms('99%'):.3f} {non.group(1) if non else 0} {n}")
EOF
}

RESULTS="$WORK/results"
: >"$RESULTS"
run_path() { # $1 path, $2.. servers
    local path=$1
    shift
    for r in $(seq "$ROUNDS"); do
        for who in "$@"; do
            start "$who" "$path"
            wrk -t1 -c32 -d1s "http://127.0.0.1:$PORT/" >/dev/null
            t0=$(cpu_ticks "$PID")
            read -r rps p50 p99 non n <<<"$(load)"
            t1=$(cpu_ticks "$PID")
            stop "$PID"
            cpu=$(python3 -c "print(f'{($t1 - $t0) / $TICK * 1e6 / max($n, 1):.1f}')")
            printf '%-6s round %d %-8s %8s req/s  p50 %7s ms  p99 %7s ms  non-2xx %-7s CPU %6s us/req\n' "$path" "$r" "$who" "$rps" "$p50" "$p99" "$non" "$cpu"
            echo "$path $who $rps $p50 $p99 $cpu $r" >>"$RESULTS"
        done
    done
}

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cpus; uptime before: $(uptime)"
echo "# nginx $("$NGINX" -v 2>&1 | sed 's/.*\///'), wrk -t1 -c32 -d$DUR, $ROUNDS rounds, 1 worker each"
run_path proxy plain pingora gateway nginx
run_path reject pingora gateway nginx
echo "# uptime after: $(uptime)"

python3 - "$RESULTS" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print()
print("| path | server | req/s (median) | p50 ms | p99 ms | CPU us/req (median) | req/s vs weir-pingora |")
print("|---|---|---:|---:|---:|---:|---:|")
for path in ("proxy", "reject"):
    med = {}
    for who in ("plain", "pingora", "gateway", "nginx"):
        rs = [r for r in rows if r[0] == path and r[1] == who]
        if rs:
            med[who] = [statistics.median(float(r[i]) for r in rs) for i in (2, 3, 4, 5)]
    for who, (rps, p50, p99, cpu) in med.items():
        ratio = f"{rps / med['pingora'][0]:.2f}x"
        print(f"| {path} | {who} | {rps:.0f} | {p50:.2f} | {p99:.2f} | {cpu:.1f} | {ratio} |")
    if "plain" in med:
        # Per-round ratios (plain and weir-pingora run back to back within a round).
        per = {}
        for r in rows:
            if r[0] == path and r[1] in ("plain", "pingora"):
                per.setdefault(r[6], {})[r[1]] = (float(r[2]), float(r[5]))
        pairs = [v for v in per.values() if len(v) == 2]
        rps_r = [v["pingora"][0] / v["plain"][0] for v in pairs]
        cpu_r = [v["plain"][1] / v["pingora"][1] for v in pairs]
        print(f"\n{path}: weir-pingora / plain Pingora = {med['pingora'][0] / med['plain'][0]:.3f} (req/s), p99 {med['pingora'][2] / med['plain'][2]:.2f}x")
        print(f"{path}: per round, req/s ratio " + ", ".join(f"{x:.2f}" for x in rps_r)
              + f" (median {statistics.median(rps_r):.3f}); CPU per request, plain / weir-pingora "
              + ", ".join(f"{x:.2f}" for x in cpu_r) + f" (median {statistics.median(cpu_r):.3f})")
EOF
