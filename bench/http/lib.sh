# Helpers shared by the bench/http scripts (sourced, not run).

# The repository root.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

# bench_init NAME BIN:PACKAGE... — the common start of a script: a scratch directory $WORK
# (/tmp/weir-bench-NAME.*) removed on exit with every process in PIDS, the Debian packages
# whose binaries are missing installed, and $NGINX set.
bench_init() {
    WORK=$(mktemp -d "/tmp/weir-bench-$1.XXXXXX")
    shift
    trap cleanup EXIT
    ensure_tools "$@"
    NGINX=$(command -v nginx || echo /usr/sbin/nginx)
}

# ensure_tools BIN:PACKAGE... — installs the Debian packages whose binaries are missing.
ensure_tools() {
    local missing=() pair
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${pair%%:*}" ] || missing+=("${pair#*:}")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        local sudo=""
        [ "$(id -u)" != 0 ] && sudo=sudo
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
}

# PIN=1 splits the two cores: the server under test runs on CPU 0, the load generator and
# the upstream on CPU 1, as commands prefixed "${ON_SERVER[@]}" and "${ON_LOAD[@]}" (taskset,
# which execs the command: `$!` stays the server's PID, as the CPU readings from /proc need).
# Without PIN both prefixes are empty.
# Why: on a 2-vCPU machine the scheduler moves a multi-threaded server (Pingora's runtime)
# onto wrk's core in some runs and not in others, and CPU per request then falls in two
# groups ~1.7x apart for the same binary (docs/perf-log/2026-12-02-pingora-fat-lto.md).
ON_SERVER=()
ON_LOAD=()
if [ "${PIN:-0}" = 1 ]; then
    ON_SERVER=(taskset -c 0)
    ON_LOAD=(taskset -c 1)
fi

# rotated K ITEM... — the items, one per line, starting at index K (mod their number): a
# round's server order, shifted each round so that no server always runs in the same slot or
# after the same one (the first run after a round's restart measured consistently apart).
rotated() {
    local k=$1 i
    shift
    local items=("$@")
    for i in $(seq 0 $(($# - 1))); do echo "${items[$(((i + k) % $#))]}"; done
}

# A loopback port that was free a moment ago.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# free_ports NAME...: sets each variable NAME to a free loopback port.
free_ports() {
    local name
    for name in "$@"; do printf -v "$name" '%s' "$(free_port)"; done
}

# build_gateway: builds weir-gateway (release) and sets WEIR to the binary.
build_gateway() {
    (cd "$ROOT" && cargo build --release -q -p weir-gateway)
    WEIR="$ROOT/target/release/weir-gateway"
}

# Waits until something listens on 127.0.0.1:$1 (10 s at most).
wait_port() {
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "nothing listens on $1" >&2
    exit 1
}

# Processes to stop and the scratch directory ($WORK) to remove on exit: a script sets WORK,
# appends the PIDs it starts to PIDS and runs `trap cleanup EXIT`.
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}

# stop PID — ends a server started in the background and reaps it.
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# wrk_load PORT [THREADS CONNS] — one wrk --latency -d$DUR run against 127.0.0.1:PORT
# (-t1 -c32 unless given); prints "req/s p50_ms p99_ms non2xx requests".
wrk_load() {
    "${ON_LOAD[@]}" wrk --latency -t"${2:-1}" -c"${3:-32}" -d"$DUR" "http://127.0.0.1:$1/" >"$WORK/wrk.out"
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

# nginx_conf DIR HTTP_BODY [WORKERS] — a foreground nginx config in DIR/nginx.conf: one
# process (no master) by default; with WORKERS > 1, a master and WORKERS worker processes.
nginx_conf() {
    mkdir -p "$1"
    local master=off
    [ "${3:-1}" -gt 1 ] && master=on
    cat >"$1/nginx.conf" <<EOF
worker_processes ${3:-1};
daemon off;
master_process $master;
error_log $1/error.log warn;
pid $1/nginx.pid;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $1/body;
    proxy_temp_path $1/proxy;
    fastcgi_temp_path $1/fastcgi;
    uwsgi_temp_path $1/uwsgi;
    scgi_temp_path $1/scgi;
    keepalive_requests 1000000;
$2
}
EOF
}

# start_nginx_proxy PORT UP_PORT RATE BURST [WORKERS] — nginx ($NGINX) as the proxy under
# test on 127.0.0.1:PORT: limit_req at RATE (e.g. 100000000r/s, 1r/m; BURST 0 = none, else
# nodelay) in front of keep-alive proxy_pass to 127.0.0.1:UP_PORT, answering 429 when
# limited; WORKERS worker processes (default 1). Sets NGPID.
start_nginx_proxy() {
    local lr="limit_req zone=z;"
    [ "$4" != 0 ] && lr="limit_req zone=z burst=$4 nodelay;"
    nginx_conf "$WORK/ng" "
    limit_req_zone \$server_name zone=z:1m rate=$3;
    limit_req_status 429;
    # nginx logs every rejected request at this level (default: error, a write(2) to the
    # error log per 429). weir-gateway runs with its access log off here, so nginx must not
    # log either: info is below error_log's level and the line is not even formatted.
    limit_req_log_level info;
    upstream up { server 127.0.0.1:$2; keepalive 64; }
    server {
        listen 127.0.0.1:$1 reuseport;
        server_name bench;  # the limit_req key: an empty key would not be limited at all
        location / {
            $lr
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }
    }" "${5:-1}"
    "${ON_SERVER[@]}" "$NGINX" -p "$WORK/ng" -c "$WORK/ng/nginx.conf" &
    NGPID=$!
    wait_port "$1"
}

# start_upstream PORT — the upstream every proxy under test forwards to: nginx ($NGINX)
# answering 200 "ok" on 127.0.0.1:PORT.
start_upstream() {
    nginx_conf "$WORK/up" "    server { listen 127.0.0.1:$1; location / { return 200 \"ok\"; } }"
    "${ON_LOAD[@]}" "$NGINX" -p "$WORK/up" -c "$WORK/up/nginx.conf" &
    PIDS+=($!)
    wait_port "$1"
}

# weir_conf LISTEN_PORT ADMIN_PORT UP_PORT RATE PER BURST [STORE] [RATE_LIMIT_EXTRA] — the
# benchmark's weir config in $WORK/weir.toml: $WEIR_WORKERS workers (default 1), access log
# off, one route over the upstream with a token bucket keyed by route; STORE goes before the upstreams (a [store]
# table), RATE_LIMIT_EXTRA after the rate-limit keys (e.g. scope = "global").
weir_conf() {
    cat >"$WORK/weir.toml" <<EOF
[server]
listen = "127.0.0.1:$1"
admin = "127.0.0.1:$2"
instance = "bench"
workers = ${WEIR_WORKERS:-1}
[log]
access = "off"
${7:-}
[[upstreams]]
name = "up"
endpoints = ["127.0.0.1:$3"]
[[routes]]
id = "all"
match = { path_prefix = "/" }
upstream = "up"
[routes.rate_limit]
algorithm = "token_bucket"
rate = $4
per = "$5"
burst = $6
key = ["route"]
${8:-}
EOF
}

# weir_lean FILE — turns a weir_conf config into the benchmark's lean one: no evidence
# headers (`[server] evidence_headers = false`), no RateLimit fields (`headers = false`).
weir_lean() {
    sed -i -e 's/^instance = "bench"$/&\nevidence_headers = false/' -e 's/^key = \["route"\]$/&\nheaders = false/' "$1"
}

# callgrind_total PID PORT N OUT [STATUS] — for a server (PID) started under
# `valgrind --tool=callgrind --callgrind-out-file=OUT`: once it listens on PORT, N GETs over
# four keep-alive connections (each must answer 200; with STATUS, all but the first must
# answer STATUS), then SIGINT (callgrind writes OUT), a stop, and the instruction total
# from OUT (with `--cache-sim=yes`, every event's total, in the order of OUT's `events:`
# line).
callgrind_total() {
    wait_port "$2"
    python3 - "$2" "$3" "${5:-200}" <<'P'
import http.client, sys
port, n, want = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
cs = [http.client.HTTPConnection("127.0.0.1", port) for _ in range(4)]
for i in range(n):
    c = cs[i % 4]
    c.request("GET", "/", headers={"user-agent": "bench"})
    r = c.getresponse()
    r.read()
    assert r.status == want or (i == 0 and r.status == 200), r.status
P
    kill -INT "$1" 2>/dev/null || true
    sleep 2
    stop "$1"
    callgrind_annotate "$4" 2>/dev/null | awk '/PROGRAM TOTALS/ {
        gsub(",", "")
        out = ""
        for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/) out = out (out == "" ? "" : " ") $i
        print out
    }'
}
