#!/usr/bin/env bash
# A real RabbitMQ node on loopback for Weir's queue-source tests: Debian's
# `rabbitmq-server` package (installed here with apt-get when it is missing;
# Erlang, no JVM), run as a private node of its own (its own node name, Erlang
# port mapper port, cookie, data and logs), never the package's service.
#
#   rabbitmq.sh install   apt-get install rabbitmq-server when it is missing
#   rabbitmq.sh start     fresh data, start, wait until it answers, print the URL
#   rabbitmq.sh restart   stop it (or find it killed) and start it on the same data
#   rabbitmq.sh stop      stop it (and its port mapper)
#   rabbitmq.sh status    exit 0 when it is running
#   rabbitmq.sh url       print the URL clients use
#   rabbitmq.sh ctl ARGS  rabbitmqctl ARGS against this node (e.g. `ctl list_queues`)
#
# Environment:
#   WEIR_AMQP_HOME   where nodes keep data and logs (default ~/.cache/weir/rabbitmq)
#   WEIR_AMQP_PORT   AMQP port (default 19672; Erlang distribution port+1, its
#                    port mapper port+2)
# Clients connect to amqp://guest:guest@127.0.0.1:$WEIR_AMQP_PORT/%2f (`guest`
# may log in over loopback only). `start` on a running node is a no-op.
set -euo pipefail

home="${WEIR_AMQP_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/weir/rabbitmq}"
port="${WEIR_AMQP_PORT:-19672}"
dist_port=$((port + 1))
epmd_port=$((port + 2))
state="$home/node-$port"
node="weir$port@localhost"
bin=/usr/lib/rabbitmq/bin
url="amqp://guest:guest@127.0.0.1:$port/%2f"

log() { echo "rabbitmq: $*" >&2; }

install() {
    [[ -x "$bin/rabbitmq-server" ]] && return
    command -v apt-get >/dev/null || { log "rabbitmq-server is missing and there is no apt-get to install it"; exit 1; }
    log "installing Debian's rabbitmq-server package"
    local sudo=
    [[ "$(id -u)" == 0 ]] || sudo=sudo
    $sudo apt-get update -qq >&2
    # The package's own service is never started here (no systemd in CI; and
    # a private node needs none of it).
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq rabbitmq-server >&2
}

# The environment every rabbitmq command of this node runs in: its own cookie
# (HOME), port mapper, node name, ports, files (a crash dump too, never the
# working directory's).
node_env() {
    env HOME="$state" ERL_CRASH_DUMP="$state/erl_crash.dump" ERL_EPMD_PORT="$epmd_port" ERL_EPMD_ADDRESS=127.0.0.1 RABBITMQ_NODENAME="$node" \
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}" \
        RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 RABBITMQ_NODE_PORT="$port" RABBITMQ_DIST_PORT="$dist_port" \
        RABBITMQ_CONFIG_FILE="$state/rabbitmq.conf" RABBITMQ_ADVANCED_CONFIG_FILE="$state/advanced.config" \
        RABBITMQ_ENABLED_PLUGINS_FILE="$state/enabled_plugins" RABBITMQ_CONF_ENV_FILE="$state/rabbitmq-env.conf" \
        RABBITMQ_MNESIA_BASE="$state/mnesia" RABBITMQ_LOG_BASE="$state/log" RABBITMQ_PID_FILE="$state/node.pid" \
        "$@"
}

ctl() { node_env "$bin/rabbitmqctl" -n "$node" "$@"; }

running() {
    [[ -f "$state/node.pid" ]] && kill -0 "$(cat "$state/node.pid")" 2>/dev/null
}

start() {
    install
    if running; then
        log "already running on 127.0.0.1:$port (pid $(cat "$state/node.pid"))"
        echo "$url"
        return
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        log "port $port on 127.0.0.1 is taken by another process"
        exit 1
    fi
    rm -rf "$state"
    mkdir -p "$state/mnesia" "$state/log"
    head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$state/.erlang.cookie"
    chmod 400 "$state/.erlang.cookie"
    echo "[]." >"$state/enabled_plugins"
    echo "[]." >"$state/advanced.config"
    : >"$state/rabbitmq-env.conf"
    cat >"$state/rabbitmq.conf" <<EOF
listeners.tcp.default = 127.0.0.1:$port
log.console = false
log.file.level = warning
# A test node: small limits that a busy test machine does not trip.
disk_free_limit.absolute = 50MB
vm_memory_high_watermark.relative = 0.5
EOF
    launch
    echo "$url"
}

# Start the node on the data in $state and wait until it answers.
launch() {
    node_env nohup "$bin/rabbitmq-server" >"$state/stdout.log" 2>&1 &
    local wrapper=$!
    log "starting $node on 127.0.0.1:$port"
    for _ in $(seq 1 120); do
        if ! kill -0 "$wrapper" 2>/dev/null && ! running; then
            log "the node exited; its output:"
            tail -n 40 "$state/stdout.log" "$state"/log/*.log >&2 2>/dev/null || true
            exit 1
        fi
        if running && ctl await_startup --timeout 5 >/dev/null 2>&1; then
            log "ready (pid $(cat "$state/node.pid"))"
            return
        fi
        sleep 1
    done
    log "not ready after 120 s"
    stop
    exit 1
}

stop() {
    if running; then
        local pid
        pid="$(cat "$state/node.pid")"
        ctl stop >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 30); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 1
        done
        kill -9 "$pid" 2>/dev/null || true
        log "stopped"
    fi
    rm -f "$state/node.pid"
    # The node's own port mapper, started by the node on its port.
    if [[ -d "$state" ]] && command -v epmd >/dev/null; then
        node_env epmd -port "$epmd_port" -kill >/dev/null 2>&1 || true
    fi
}

restart() {
    [[ -f "$state/rabbitmq.conf" ]] || { log "no node data in $state to restart on: start first"; exit 1; }
    stop
    launch
    echo "$url"
}

case "${1:-}" in
    install) install ;;
    start) start ;;
    restart) restart ;;
    stop) stop ;;
    status) running ;;
    url) echo "$url" ;;
    ctl) shift; ctl "$@" ;;
    *) echo "usage: $0 install|start|restart|stop|status|url|ctl ARGS" >&2; exit 2 ;;
esac
