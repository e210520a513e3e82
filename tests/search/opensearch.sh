#!/usr/bin/env bash
# A real single-node OpenSearch (plain HTTP, no security plugin) on loopback,
# for Weir's tests and local development. Jars come from Maven Central once
# (tests/search/opensearch/pom.xml) into a cache; the machine's Java 17 runs
# them through a small launcher (tests/search/opensearch/Launcher.java) that is
# compiled once into the same cache.
#
#   opensearch.sh fetch     download the jars and compile the launcher (once)
#   opensearch.sh start     fresh data, start, wait until the node answers
#   opensearch.sh stop      stop it
#   opensearch.sh status    exit 0 when it is running
#
# Environment:
#   WEIR_OPENSEARCH_HOME   cache of jars and node state
#                          (default ~/.cache/weir/opensearch)
#   WEIR_OPENSEARCH_PORT   HTTP port (default 19200); the node's internal
#                          transport takes a free port in 9300-9400
#   WEIR_OPENSEARCH_EXTRA_SETTINGS
#                          extra node settings, "key=value,key=value"; they
#                          apply at start, so stop the node to change them
# Clients talk to http://127.0.0.1:$WEIR_OPENSEARCH_PORT. New indices get no
# replicas (the persistent cluster setting cluster.default_number_of_replicas=0
# is applied at start), so they turn green on this one node.
#
# Forcing 429s: start the node with a tiny indexing-pressure budget, e.g.
#   WEIR_OPENSEARCH_EXTRA_SETTINGS=indexing_pressure.memory.limit=1kb opensearch.sh start
# Then a whole _bulk request is refused with HTTP 429 (rejected_execution_exception,
# "rejected execution of coordinating operation") once its accounted size passes
# 1 KiB. The node counts roughly twice the body, so bodies up to ~400 bytes (four
# small documents) still succeed and ~500 bytes or more are refused; retrying
# does not help. It is a node setting: stop the node to change it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
home="${WEIR_OPENSEARCH_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/weir/opensearch}"
port="${WEIR_OPENSEARCH_PORT:-19200}"
extra_settings="${WEIR_OPENSEARCH_EXTRA_SETTINGS:-}"
version="$(sed -n 's:.*<opensearch.runner.version>\(.*\)</opensearch.runner.version>.*:\1:p' "$here/opensearch/pom.xml")"
libs="$home/libs-$version-knn"
launcher="$home/launcher-$version"
state="$home/node-$port"
pidfile="$state/opensearch.pid"
url="http://127.0.0.1:$port"

log() { echo "opensearch: $*" >&2; }

server=opensearch
what="OpenSearch (runner $version)"
# shellcheck source=tests/search/common.sh
source "$here/common.sh"


# The pid in the pidfile is ours only while that process still runs our
# launcher on this state folder (a stale pidfile may name a reused pid).
running() {
    [[ -f "$pidfile" ]] || return 1
    local pid
    pid="$(cat "$pidfile")"
    kill -0 "$pid" 2>/dev/null && ps -p "$pid" -o args= 2>/dev/null | grep -qF "Launcher $state "
}

show_logs() {
    tail -n 60 "$state/stdout.log" >&2 2>/dev/null || true
}

start() {
    fetch
    if running; then
        log "already running on $url (pid $(cat "$pidfile"))"
        return
    fi
    command -v java >/dev/null || { log "Java 17 is needed to run OpenSearch"; exit 1; }
    command -v curl >/dev/null || { log "curl is needed to check on OpenSearch"; exit 1; }
    # Someone else on the port would answer the readiness check for us.
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        log "port $port on 127.0.0.1 is taken by another process"
        exit 1
    fi
    rm -rf "$state"
    mkdir -p "$state"
    local settings=()
    if [[ -n "$extra_settings" ]]; then
        IFS=, read -r -a settings <<<"$extra_settings"
    fi
    # The launcher lays out config/, data/ and logs/ under $state/node_1; the
    # node's log also goes to stdout.log.
    nohup java -Xms512m -Xmx512m -XX:+UseG1GC -Djava.awt.headless=true -Dfile.encoding=UTF-8 \
        -cp "$libs/*:$launcher" Launcher "$state" "$port" "${settings[@]}" \
        >"$state/stdout.log" 2>&1 &
    echo $! >"$pidfile"
    log "starting on $url (pid $(cat "$pidfile"))"
    # Ready when the cluster is at least yellow and the replica default is set.
    local setting='{"persistent":{"cluster.default_number_of_replicas":0}}'
    for _ in $(seq 1 240); do
        if ! running; then
            log "the node exited; its output:"
            show_logs
            exit 1
        fi
        if curl -fsS --max-time 5 "$url/_cluster/health?wait_for_status=yellow&timeout=1s" \
            >/dev/null 2>&1 &&
            curl -fsS --max-time 10 -X PUT -H 'Content-Type: application/json' \
                -d "$setting" "$url/_cluster/settings" 2>/dev/null | grep -q '"acknowledged":true'; then
            log "ready"
            return
        fi
        sleep 0.5
    done
    log "not ready after 120 s; its output:"
    show_logs
    stop
    exit 1
}


case "${1:-}" in
    fetch) fetch ;;
    start) start ;;
    stop) stop ;;
    status) running ;;
    *) echo "usage: $0 fetch|start|stop|status" >&2; exit 2 ;;
esac
