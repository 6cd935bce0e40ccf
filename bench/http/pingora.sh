#!/usr/bin/env bash
# weir-pingora vs a plain Pingora proxy (the module's overhead) vs weir-gateway vs nginx, same
# box, same upstream, one worker each. Two plain proxies: `plain` (bare) and `plain-hdr` (the
# same request/response headers and timeouts weir sets, crates/weir-pingora/examples/plain.rs
# `headers`), and two weir-pingora configs: `pingora` (defaults) and `pingora-lean`
# (`evidence_headers = false`, RateLimit fields off: only `x-request-id` added).
#
#   bench/http/pingora.sh [ROUNDS] [DURATION]        (defaults: 3 rounds of 5s)
#   PIN=1 bench/http/pingora.sh ...                  servers on CPU 0, wrk and the upstream
#                                                    on CPU 1 (see lib.sh, PIN)
#   ONLY="plain-hdr pingora" bench/http/pingora.sh    only these servers, proxy path only (more
#                                                    rounds of one pair in the same time)
#
# Same method as bench/http/run.sh: a fast upstream (a separate nginx answering 200 "ok" from
# memory, 1 worker); proxy path = a token bucket that never rejects (nginx: limit_req with a
# huge rate), reject path = 1 per minute (every request but the first is 429; the plain proxy
# has no limiter and sits this one out). Servers alternate within each round, each round's
# order shifted by one (lib.sh `rotated`); every server is restarted per run, warmed up for
# 1 s, then loaded with wrk --latency -t1 -c32 -dDURATION.
# Access logs off everywhere. Prints one line per run and a table of medians with ratios to
# weir-pingora. Each run also records the server's CPU time (user and system separately, all
# its threads, from /proc) per request served: every proxy here saturates one core, so CPU per
# request is what decides req/s, and it moves far less than req/s with other load on the
# machine.
set -euo pipefail

ROUNDS=${1:-3}
DUR=${2:-5s}
# shellcheck source=bench/http/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init pingora wrk:wrk nginx:nginx-light

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
        start_nginx_proxy "$PORT" "$UP" "$ngrate" "$ngburst"
        PID=$NGPID
        return
        ;;
    plain)
        "${ON_SERVER[@]}" "$PLAIN" "127.0.0.1:$PORT" "127.0.0.1:$UP" 1 >/dev/null 2>"$WORK/plain.err" &
        ;;
    plain-hdr)
        "${ON_SERVER[@]}" "$PLAIN" "127.0.0.1:$PORT" "127.0.0.1:$UP" 1 headers >/dev/null 2>"$WORK/plain.err" &
        ;;
    gateway | pingora | pingora-lean)
        weir_conf "$PORT" "$ADMIN" "$UP" "$rate" "$per" "$burst"
        [ "$who" = pingora-lean ] && weir_lean "$WORK/weir.toml"
        local bin=$GATEWAY
        [ "$who" != gateway ] && bin=$PINGORA
        "${ON_SERVER[@]}" "$bin" --config "$WORK/weir.toml" >/dev/null 2>"$WORK/$who.err" &
        ;;
    esac
    PID=$!
    wait_port "$PORT"
}

cpu_ticks() { awk '{ print $14, $15 }' "/proc/$1/stat"; } # "user system", in clock ticks
TICK=$(getconf CLK_TCK)

RESULTS="$WORK/results"
: >"$RESULTS"
run_path() { # $1 path, $2.. servers
    local path=$1 who
    shift
    for r in $(seq "$ROUNDS"); do
        for who in $(rotated $((r - 1)) "$@"); do
            start "$who" "$path"
            "${ON_LOAD[@]}" wrk -t1 -c32 -d1s "http://127.0.0.1:$PORT/" >/dev/null
            read -r u0 s0 <<<"$(cpu_ticks "$PID")"
            read -r rps p50 p99 non n <<<"$(wrk_load "$PORT")"
            read -r u1 s1 <<<"$(cpu_ticks "$PID")"
            stop "$PID"
            read -r us ss cpu <<<"$(python3 -c "f = 1e6 / $TICK / max($n, 1); print(f'{($u1 - $u0) * f:.1f} {($s1 - $s0) * f:.1f} {($u1 + $s1 - $u0 - $s0) * f:.1f}')")"
            printf '%-6s round %d %-12s %8s req/s  p50 %7s ms  p99 %7s ms  non-2xx %-7s CPU %6s us/req (user %s, sys %s)\n' "$path" "$r" "$who" "$rps" "$p50" "$p99" "$non" "$cpu" "$us" "$ss"
            echo "$path $who $rps $p50 $p99 $cpu $r $us $ss" >>"$RESULTS"
        done
    done
}

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cpus; uptime before: $(uptime)"
echo "# nginx $("$NGINX" -v 2>&1 | sed 's/.*\///'), wrk -t1 -c32 -d$DUR, $ROUNDS rounds, 1 worker each, PIN=${PIN:-0}"
if [ -n "${ONLY:-}" ]; then
    # shellcheck disable=SC2086 # a list of server names
    run_path proxy $ONLY
else
    run_path proxy plain plain-hdr pingora pingora-lean gateway nginx
    run_path reject pingora pingora-lean gateway nginx
fi
echo "# uptime after: $(uptime)"

python3 - "$RESULTS" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
SERVERS = ("plain", "plain-hdr", "pingora", "pingora-lean", "gateway", "nginx")
print()
print("| path | server | req/s (median) | p50 ms | p99 ms | CPU us/req (median) | user | system | req/s vs weir-pingora |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for path in ("proxy", "reject"):
    med = {}
    for who in SERVERS:
        rs = [r for r in rows if r[0] == path and r[1] == who]
        if rs:
            med[who] = [statistics.median(float(r[i]) for r in rs) for i in (2, 3, 4, 5, 7, 8)]
    for who, (rps, p50, p99, cpu, us, ss) in med.items():
        ratio = f"{rps / med['pingora'][0]:.2f}x" if 'pingora' in med else '-'
        print(f"| {path} | {who} | {rps:.0f} | {p50:.2f} | {p99:.2f} | {cpu:.1f} | {us:.1f} | {ss:.1f} | {ratio} |")
    # Per-round CPU-per-request ratios (the servers of a round run back to back).
    for weir, base in (("pingora", "plain-hdr"), ("pingora-lean", "plain"), ("pingora", "plain")):
        per = {}
        for r in rows:
            if r[0] == path and r[1] in (weir, base):
                per.setdefault(r[6], {})[r[1]] = (float(r[2]), float(r[5]))
        pairs = [v for v in per.values() if len(v) == 2]
        if not pairs:
            continue
        cpu_r = [v[weir][1] / v[base][1] for v in pairs]
        rps_r = [v[weir][0] / v[base][0] for v in pairs]
        print(f"{path}: CPU per request, {weir} / {base}: per round "
              + ", ".join(f"{x:.3f}" for x in cpu_r) + f" (median {statistics.median(cpu_r):.3f}); "
              + f"req/s ratio median {statistics.median(rps_r):.3f}")
EOF
