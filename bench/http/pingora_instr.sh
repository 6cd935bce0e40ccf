#!/usr/bin/env bash
# User-space instructions per proxied request, plain Pingora (bare and with weir's headers and
# timeouts) vs weir-pingora (defaults and lean, see bench/http/pingora.sh), under valgrind's
# callgrind: a figure that other load on a shared machine cannot move (unlike req/s). Kernel
# work (syscalls, TCP) is not counted, so this measures the module's own CPU overhead only.
#
#   bench/http/pingora_instr.sh [N]        (default N = 4000; WHO="pingora ..." for a subset,
#                                           KEEP=DIR to keep the callgrind profiles,
#                                           PLAIN=BIN / PINGORA=BIN to count other builds of
#                                           the two binaries instead of this tree's,
#                                           CACHE=1 to simulate the caches as well and
#                                           print misses per request)
#
# Same upstream (nginx answering 200 "ok"), same config as bench/http/pingora.sh's proxy path
# (token bucket that never rejects, access log off, one worker). Each server is run twice,
# for 300 and 300 + N keep-alive GETs over 4 connections; the difference / N removes start-up.
set -euo pipefail

N=${1:-4000}
# shellcheck source=bench/http/lib.sh
. "$(dirname "$0")/lib.sh"
bench_init instr nginx:nginx-light valgrind:valgrind
if [ -z "${PLAIN:-}" ] || [ -z "${PINGORA:-}" ]; then
    (cd "$ROOT" && cargo build --release -q -p weir-pingora --bin weir-pingora --example plain)
fi
PLAIN=${PLAIN:-$ROOT/target/release/examples/plain}
PINGORA=${PINGORA:-$ROOT/target/release/weir-pingora}

UP=$(free_port)
PORT=$(free_port)
ADMIN=$(free_port)
start_upstream "$UP"
weir_conf "$PORT" "$ADMIN" "$UP" 1000000 1s 1000000

cp "$WORK/weir.toml" "$WORK/lean.toml"
weir_lean "$WORK/lean.toml"

total() { # $1 plain|plain-hdr|pingora|pingora-lean, $2 requests -> total instructions
    local out="$WORK/cg.$1.$2" pid cmd
    case $1 in
    plain) cmd=("$PLAIN" "127.0.0.1:$PORT" "127.0.0.1:$UP" 1) ;;
    plain-hdr) cmd=("$PLAIN" "127.0.0.1:$PORT" "127.0.0.1:$UP" 1 headers) ;;
    pingora) cmd=("$PINGORA" --config "$WORK/weir.toml") ;;
    pingora-lean) cmd=("$PINGORA" --config "$WORK/lean.toml") ;;
    esac
    valgrind --tool=callgrind ${CACHE:+--cache-sim=yes} --callgrind-out-file="$out" "${cmd[@]}" >/dev/null 2>"$WORK/vg.err" &
    pid=$!
    callgrind_total "$pid" "$PORT" "$2" "$out"
}

declare -A PER
for who in ${WHO:-plain plain-hdr pingora pingora-lean}; do
    a=$(total "$who" 300)
    b=$(total "$who" $((300 + N)))
    PER[$who]=$(((${b%% *} - ${a%% *}) / N))
    echo "$who: ${PER[$who]} instructions/request (user space)"
    if [ -n "${CACHE:-}" ]; then
        events=$(sed -n 's/^events: *//p' "$WORK/cg.$who.$((300 + N))")
        python3 - "$who" "$N" "$a" "$b" "$events" <<'P'
import sys
who, n, a, b, names = sys.argv[1], int(sys.argv[2]), *(x.split() for x in sys.argv[3:6])
per = [(int(y) - int(x)) / n for x, y in zip(a, b)]
print(f"{who}: per request " + ", ".join(f"{k} {v:.1f}" for k, v in zip(names, per)))
P
    fi
    # KEEP=DIR keeps the larger profile, for a look at where the instructions go.
    if [ -n "${KEEP:-}" ]; then cp "$WORK/cg.$who.$((300 + N))" "$KEEP/cg.$who"; fi
done
ratio() {
    [ -n "${PER[$1]:-}" ] && [ -n "${PER[$2]:-}" ] || return 0
    python3 -c "print(f'$1 / $2: {${PER[$1]} / ${PER[$2]}:.3f}x instructions per request')"
}
ratio pingora plain-hdr
ratio pingora-lean plain
ratio pingora plain
