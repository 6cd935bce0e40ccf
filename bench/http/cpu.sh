#!/usr/bin/env bash
# weir-gateway vs nginx: CPU time per request (user and system separately), per-round ratios,
# p99 at a fixed offered rate below saturation, and (OPS=1) io_uring operations / syscalls per
# request. Same upstream, same policies, same worker count.
#
#   bench/http/cpu.sh [ROUNDS] [DURATION] [WORKERS]      (defaults: 3 rounds of 5s, 1 worker)
#
# Environment:
#   RATE=N      offered rate of the paced (constant-rate) runs, requests/s (default 8000 per
#               worker; 0 skips them). The paced client (weir-gateway's `paced` example) sends
#               on a fixed schedule over 32 connections per worker and measures each latency
#               from the request's *intended* send time, so a stall is not hidden by the
#               client waiting for it (no coordinated omission).
#   LATE_MAX=MS a paced run whose client sent its requests later than this at p99 (default 0.5 ms:
#               the client was descheduled, so the run measured the machine) is run again, at
#               most twice; the last try counts, and the summary says how many tries each took.
#   PACED=BIN   another build of the paced client (to compare clients on the same servers).
#   OPS=1       one more counted run per server and path: io_uring submissions, completions,
#               poll arms, task-work items and io_uring_enter calls per request for
#               weir-gateway; recv/send/writev/readv/epoll_wait/... calls per request for nginx
#               (perf tracepoints, `perf stat -p`).
#   PIN=1       servers on CPU 0, wrk, the paced client and the upstream on CPU 1 (lib.sh; for
#               one worker: two workers pinned to one CPU would measure contention).
#   ALSO="NAME=BIN ..."  also runs each BIN (e.g. a copy of an older weir-gateway build) as
#               NAME, in the same interleaved rounds, for a before/after figure that the load
#               cannot skew.
#               `bench/examples/floor.rs` is such a BIN: a server that only answers 429 on
#               io_uring, the floor under the reject path (read its reject rows only).
#
# Servers: nginx (`proxy_pass` + `limit_req`, keep-alive upstream; WORKERS worker processes)
# and weir-gateway (io_uring; `workers = WORKERS`), one route with a token bucket. Proxy path:
# a limit that never rejects; reject path: 1 per minute (all but the first request are 429).
# Servers alternate within each round and are restarted per run, warmed up for 1 s, then loaded
# with `wrk --latency -tWORKERS -c(32 x WORKERS) -dDURATION`. CPU = utime and stime of the
# server process and its children (nginx's workers), from /proc, over the measured run only,
# divided by the requests wrk completed. Every process here shares the machine's cores with
# wrk and the upstream, so req/s moves with other load while CPU per request barely does: the
# figure that decides is the ratio weir / nginx of CPU per request within a round.
set -euo pipefail

ROUNDS=${1:-3}
DUR=${2:-5s}
WORKERS=${3:-1}
RATE=${RATE:-$((8000 * WORKERS))}
LATE_MAX=${LATE_MAX:-0.5}
# shellcheck source=bench/http/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init cpu wrk:wrk nginx:nginx-light

(cd "$ROOT" && cargo build --release -q -p weir-gateway --bin weir-gateway --example paced)
GATEWAY="$ROOT/target/release/weir-gateway"
PACED=${PACED:-"$ROOT/target/release/examples/paced"}
export WEIR_WORKERS=$WORKERS

UP=$(free_port)
PORT=$(free_port)
ADMIN=$(free_port)
start_upstream "$UP"

SERVERS=()
declare -A BIN
for pair in ${ALSO:-}; do
    SERVERS+=("${pair%%=*}")
    BIN[${pair%%=*}]=${pair#*=}
done
SERVERS+=(gateway nginx)
BIN[gateway]=$GATEWAY

# start SERVER PATH: starts it on $PORT, sets PID.
start() {
    local who=$1 path=$2 rate per burst ngrate ngburst
    if [ "$path" = proxy ]; then rate=1000000 per=1s burst=1000000 ngrate=100000000r/s ngburst=100000
    else rate=1 per=60s burst=1 ngrate=1r/m ngburst=0; fi
    if [ "$who" = nginx ]; then
        start_nginx_proxy "$PORT" "$UP" "$ngrate" "$ngburst" "$WORKERS"
        PID=$NGPID
        return
    fi
    weir_conf "$PORT" "$ADMIN" "$UP" "$rate" "$per" "$burst"
    "${ON_SERVER[@]}" "${BIN[$who]}" --config "$WORK/weir.toml" >/dev/null 2>"$WORK/$who.err" &
    PID=$!
    wait_port "$PORT"
}

# The server's processes: it and its children (nginx's workers).
procs() { echo "$1" $(cat /proc/"$1"/task/*/children 2>/dev/null); }
# "user system" clock ticks, summed over procs.
ticks() {
    local u=0 s=0 p a b
    for p in $(procs "$1"); do
        read -r a b < <(awk '{ print $14, $15 }' "/proc/$p/stat")
        u=$((u + a)) s=$((s + b))
    done
    echo "$u $s"
}
TICK=$(getconf CLK_TCK)
WRK_T=$WORKERS
WRK_C=$((32 * WORKERS))

# lib.sh's wrk_load with -t and -c scaled to the worker count; prints "req/s p99_ms requests".
load() { wrk_load "$PORT" "$WRK_T" "$WRK_C" | awk '{ print $1, $3, $5 }'; }

# The servers in round $1's order (lib.sh `rotated`).
order() { rotated "$1" "${SERVERS[@]}"; }

RESULTS="$WORK/results"
: >"$RESULTS"
saturated() { # $1 path
    local path=$1 r who u0 s0 u1 s1 rps p99 n us
    for r in $(seq "$ROUNDS"); do
        for who in $(order "$r"); do
            start "$who" "$path"
            "${ON_LOAD[@]}" wrk -t"$WRK_T" -c"$WRK_C" -d1s "http://127.0.0.1:$PORT/" >/dev/null
            read -r u0 s0 <<<"$(ticks "$PID")"
            read -r rps p99 n <<<"$(load)"
            read -r u1 s1 <<<"$(ticks "$PID")"
            stop "$PID"
            read -r us ss <<<"$(python3 -c "f = 1e6 / $TICK / max($n, 1); print(f'{($u1 - $u0) * f:.2f} {($s1 - $s0) * f:.2f}')")"
            printf '%-6s round %d %-8s %7s req/s  p99 %7s ms  CPU/req user %6s  sys %6s  total %6s us\n' \
                "$path" "$r" "$who" "$rps" "$p99" "$us" "$ss" "$(python3 -c "print(f'{$us + $ss:.2f}')")"
            echo "sat $path $who $r $rps $p99 $us $ss" >>"$RESULTS"
        done
    done
}

paced() { # $1 path
    local path=$1 r who out try
    for r in $(seq "$ROUNDS"); do
        for who in $(order "$r"); do
            for try in 1 2 3; do
                start "$who" "$path"
                "${ON_LOAD[@]}" wrk -t"$WRK_T" -c"$WRK_C" -d1s "http://127.0.0.1:$PORT/" >/dev/null
                out=$("${ON_LOAD[@]}" "$PACED" "127.0.0.1:$PORT" "$RATE" "${DUR%s}" "$WRK_C")
                stop "$PID"
                printf '%-6s round %d %-8s paced %s req/s (try %d): p99 p50 p99.9 max ms, done, errors, client lateness p99 ms: %s\n' "$path" "$r" "$who" "$RATE" "$try" "$out"
                # A round in which the client itself sent late measures the machine, not the
                # server: run it again (at most twice; the last try counts either way).
                python3 -c "import sys; sys.exit(float('$out'.split()[6]) > $LATE_MAX)" && break
            done
            echo "paced $path $who $r $out $try" >>"$RESULTS"
        done
    done
}

UR_EV=io_uring:io_uring_submit_req,io_uring:io_uring_complete,io_uring:io_uring_poll_arm,io_uring:io_uring_task_add,syscalls:sys_enter_io_uring_enter
SC_EV=$(printf 'syscalls:sys_enter_%s,' recvfrom sendto writev readv read write epoll_wait getsockopt io_uring_enter)
SC_EV=${SC_EV%,}
ops() { # $1 path
    local path=$1 who ev n pids
    for who in "${SERVERS[@]}"; do
        start "$who" "$path"
        wrk -t"$WRK_T" -c"$WRK_C" -d1s "http://127.0.0.1:$PORT/" >/dev/null
        ev=$UR_EV
        [ "$who" = nginx ] && ev=$SC_EV
        pids=$(procs "$PID" | tr ' ' ',')
        perf stat -x, -e "$ev" -p "$pids" -o "$WORK/perf.out" -- sleep "${DUR%s}" &
        local perf=$!
        read -r _ _ n <<<"$(load)"
        wait "$perf" || true
        stop "$PID"
        python3 - "$WORK/perf.out" "$n" "$path" "$who" <<'EOF'
import sys
n = int(sys.argv[2])
cells = []
for line in open(sys.argv[1]):
    f = line.strip().split(",")
    if len(f) > 2 and f[0].replace(".", "").isdigit():
        cells.append(f"{f[2].split(':')[-1].replace('sys_enter_', '').replace('io_uring_', 'ur_')} {int(float(f[0])) / n:.2f}")
print(f"ops {sys.argv[3]} {sys.argv[4]} per request ({n} requests): " + ", ".join(cells))
EOF
    done
}

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) cpus; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# nginx $("$NGINX" -v 2>&1 | sed 's/.*\///'), wrk -t$WRK_T -c$WRK_C -d$DUR, $ROUNDS rounds, $WORKERS worker(s) each, paced rate $RATE/s, PIN=${PIN:-0}"
saturated proxy
saturated reject
if [ "$RATE" != 0 ]; then
    paced proxy
    paced reject
fi
[ "${OPS:-0}" = 1 ] && ops proxy && ops reject
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$RESULTS" "${SERVERS[@]}" <<'EOF'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
servers = sys.argv[2:]
med = st.median
print()
print("| path | server | req/s | p99 ms (saturated) | CPU µs/req user | system | total | total / nginx (median of rounds) | paced p99 ms |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
for path in ("proxy", "reject"):
    sat = [r for r in rows if r[0] == "sat" and r[1] == path]
    by = lambda who: [r for r in sat if r[2] == who]
    tot = {(r[2], r[3]): float(r[6]) + float(r[7]) for r in sat}
    pace = [r for r in rows if r[0] == "paced" and r[1] == path]
    for who in servers:
        rs = by(who)
        rounds = sorted({r[3] for r in rs})
        ratios = [tot[(who, k)] / tot[("nginx", k)] for k in rounds if ("nginx", k) in tot]
        ratio = f"{med(ratios):.2f}x ({', '.join(f'{x:.2f}' for x in ratios)})" if who != "nginx" else ""
        p = [float(r[4]) for r in pace if r[2] == who]
        print(f"| {path} | {who} | {med(float(r[4]) for r in rs):.0f} | {med(float(r[5]) for r in rs):.2f} "
              f"| {med(float(r[6]) for r in rs):.2f} | {med(float(r[7]) for r in rs):.2f} "
              f"| {med(tot[(who, r[3])] for r in rs):.2f} | {ratio} | {f'{med(p):.2f}' if p else '-'} |")
    if pace:
        for who in servers:
            p = [f"{r[4]} ({r[11]} tries)" if r[11] != "1" else r[4] for r in pace if r[2] == who]
            print(f"{path} paced p99 per round, {who}: {', '.join(p)} ms")
EOF
