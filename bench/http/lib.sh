# Helpers shared by the bench/http scripts (sourced, not run).

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

# A loopback port that was free a moment ago.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

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

# nginx_conf DIR HTTP_BODY — a one-worker, foreground nginx config in DIR/nginx.conf.
nginx_conf() {
    mkdir -p "$1"
    cat >"$1/nginx.conf" <<EOF
worker_processes 1;
daemon off;
master_process off;
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

# start_upstream PORT — the upstream every proxy under test forwards to: nginx ($NGINX)
# answering 200 "ok" on 127.0.0.1:PORT.
start_upstream() {
    nginx_conf "$WORK/up" "    server { listen 127.0.0.1:$1; location / { return 200 \"ok\"; } }"
    "$NGINX" -p "$WORK/up" -c "$WORK/up/nginx.conf" &
    PIDS+=($!)
    wait_port "$1"
}

# weir_conf LISTEN_PORT ADMIN_PORT UP_PORT RATE PER BURST [STORE] [RATE_LIMIT_EXTRA] — the
# benchmark's weir config in $WORK/weir.toml: one worker, access log off, one route over the
# upstream with a token bucket keyed by route; STORE goes before the upstreams (a [store]
# table), RATE_LIMIT_EXTRA after the rate-limit keys (e.g. scope = "global").
weir_conf() {
    cat >"$WORK/weir.toml" <<EOF
[server]
listen = "127.0.0.1:$1"
admin = "127.0.0.1:$2"
instance = "bench"
workers = 1
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
