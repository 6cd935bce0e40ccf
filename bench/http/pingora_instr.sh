#!/usr/bin/env bash
# User-space instructions per proxied request, plain Pingora vs weir-pingora, under valgrind's
# callgrind: a figure that other load on a shared machine cannot move (unlike req/s). Kernel
# work (syscalls, TCP) is not counted, so this measures the module's own CPU overhead only.
#
#   bench/http/pingora_instr.sh [N]        (default N = 4000)
#
# Same upstream (nginx answering 200 "ok"), same config as bench/http/pingora.sh's proxy path
# (token bucket that never rejects, access log off, one worker). Each server is run twice,
# for 300 and 300 + N keep-alive GETs over 4 connections; the difference / N removes start-up.
set -euo pipefail

N=${1:-4000}
# shellcheck source=bench/http/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init instr nginx:nginx-light valgrind:valgrind
(cd "$ROOT" && cargo build --release -q -p weir-pingora --bin weir-pingora --example plain)

UP=$(free_port)
PORT=$(free_port)
ADMIN=$(free_port)
start_upstream "$UP"
weir_conf "$PORT" "$ADMIN" "$UP" 1000000 1s 1000000

total() { # $1 plain|pingora, $2 requests -> total instructions
    local out="$WORK/cg.$1.$2" pid
    if [ "$1" = plain ]; then
        valgrind --tool=callgrind --callgrind-out-file="$out" "$ROOT/target/release/examples/plain" \
            "127.0.0.1:$PORT" "127.0.0.1:$UP" 1 >/dev/null 2>"$WORK/vg.err" &
    else
        valgrind --tool=callgrind --callgrind-out-file="$out" "$ROOT/target/release/weir-pingora" \
            --config "$WORK/weir.toml" >/dev/null 2>"$WORK/vg.err" &
    fi
    pid=$!
    callgrind_total "$pid" "$PORT" "$2" "$out"
}

declare -A PER
for who in plain pingora; do
    a=$(total "$who" 300)
    b=$(total "$who" $((300 + N)))
    PER[$who]=$(((b - a) / N))
    echo "$who: ${PER[$who]} instructions/request (user space)"
done
python3 -c "print(f'weir-pingora / plain: {${PER[pingora]} / ${PER[plain]}:.2f}x instructions per request')"
