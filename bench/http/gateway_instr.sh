#!/usr/bin/env bash
# User-space instructions per proxied request of weir-gateway builds, under valgrind's
# callgrind: a figure that other load on a shared machine cannot move. Kernel work is not
# counted (see bench/http/cpu.sh for CPU time and io_uring operations per request).
#
#   bench/http/gateway_instr.sh [N] [BIN...]     (default N = 2000, BIN = this tree's release build)
#   REJECT=1 bench/http/gateway_instr.sh ...     the reject path instead (every request but
#                                                the first answered 429 by the limiter)
#   KEEP=DIR bench/http/gateway_instr.sh ...     keeps each binary's larger callgrind profile
#                                                in DIR (cg.1, cg.2, ... in BIN order)
#
# Config as bench/http/cpu.sh's proxy path (one worker, token bucket that never rejects,
# access log off; REJECT=1: 1 per minute) on the legacy (epoll) driver: valgrind does not see the kernel's writes to
# an io_uring ring, and a gateway on io_uring under it waits forever. The proxy, policy,
# timer and allocator work counted here is the same on both drivers. Each binary runs twice, for 300 and 300 + N keep-alive GETs over
# 4 connections; the difference / N removes start-up.
set -euo pipefail

N=${1:-2000}
shift || true
# shellcheck source=bench/http/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init ginstr nginx:nginx-light valgrind:valgrind
BINS=("$@")
if [ ${#BINS[@]} -eq 0 ]; then
    (cd "$ROOT" && cargo build --release -q -p weir-gateway --bin weir-gateway)
    BINS=("$ROOT/target/release/weir-gateway")
fi

UP=$(free_port)
PORT=$(free_port)
ADMIN=$(free_port)
start_upstream "$UP"
STATUS=200
if [ "${REJECT:-0}" = 1 ]; then
    weir_conf "$PORT" "$ADMIN" "$UP" 1 60s 1
    STATUS=429
else
    weir_conf "$PORT" "$ADMIN" "$UP" 1000000 1s 1000000
fi

total() { # $1 binary, $2 requests -> total instructions
    local out="$WORK/cg.$2" pid
    valgrind --tool=callgrind --callgrind-out-file="$out" "$1" --driver legacy --config "$WORK/weir.toml" \
        >/dev/null 2>"$WORK/vg.err" &
    pid=$!
    callgrind_total "$pid" "$PORT" "$2" "$out" "$STATUS"
}

for bin in "${BINS[@]}"; do
    a=$(total "$bin" 300)
    b=$(total "$bin" $((300 + N)))
    echo "$bin: $(((b - a) / N)) instructions/request (user space, $([ "$STATUS" = 429 ] && echo reject || echo proxy) path)"
    if [ -n "${KEEP:-}" ]; then
        k=$((${k:-0} + 1))
        cp "$WORK/cg.$((300 + N))" "$KEEP/cg.$k"
    fi
done
