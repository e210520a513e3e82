#!/usr/bin/env bash
# A real S3-compatible server on loopback for Weir's tests: S3Proxy (Apache
# 2.0, from Maven Central) over an in-memory blob store, checking AWS
# Signature V4 (and V2) with a fixed test key. The jar comes from Maven
# Central once into a cache; the machine's Java 17 runs it.
#
#   s3proxy.sh fetch     download the jar (once)
#   s3proxy.sh start     start, wait until it answers
#   s3proxy.sh stop      stop it
#   s3proxy.sh status    exit 0 when it is running
#
# Environment:
#   WEIR_S3_HOME   cache of the jar and server state (default ~/.cache/weir/s3proxy)
#   WEIR_S3_PORT   HTTP port (default 19000)
# Clients talk to http://127.0.0.1:$WEIR_S3_PORT (path-style, region
# us-east-1) with access key `weir-test` and secret key `weir-test-secret`.
# Buckets and objects live in memory: a restart empties the store.
set -euo pipefail

version=4.1.0
home="${WEIR_S3_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/weir/s3proxy}"
port="${WEIR_S3_PORT:-19000}"
jar="$home/s3proxy-$version.jar"
state="$home/s3proxy-$port"
pidfile="$state/s3proxy.pid"
url="http://127.0.0.1:$port"

log() { echo "s3proxy: $*" >&2; }

running() {
    [[ -f "$pidfile" ]] || return 1
    local pid
    pid="$(cat "$pidfile")"
    kill -0 "$pid" 2>/dev/null && ps -p "$pid" -o args= 2>/dev/null | grep -qF "$state/s3proxy.properties"
}

fetch() {
    [[ -f "$jar" ]] && return
    command -v mvn >/dev/null || { log "Maven (mvn) is needed to fetch S3Proxy"; exit 1; }
    log "fetching S3Proxy $version from Maven Central"
    mkdir -p "$home"
    local repo="$home/m2"
    mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$repo" dependency:get \
        -Dartifact="org.gaul:s3proxy:$version:jar:jar-with-dependencies" -Dtransitive=false >&2
    cp "$repo/org/gaul/s3proxy/$version/s3proxy-$version-jar-with-dependencies.jar" "$jar.part"
    mv "$jar.part" "$jar"
    rm -rf "$repo"
}

start() {
    fetch
    if running; then
        log "already running on $url (pid $(cat "$pidfile"))"
        return
    fi
    command -v java >/dev/null || { log "Java 17 is needed to run S3Proxy"; exit 1; }
    command -v curl >/dev/null || { log "curl is needed to check on S3Proxy"; exit 1; }
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        log "port $port on 127.0.0.1 is taken by another process"
        exit 1
    fi
    rm -rf "$state"
    mkdir -p "$state"
    cat >"$state/s3proxy.properties" <<EOF
s3proxy.endpoint=$url
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=weir-test
s3proxy.credential=weir-test-secret
jclouds.provider=transient
jclouds.identity=weir-test
jclouds.credential=weir-test-secret
EOF
    nohup java -Xms64m -Xmx512m -jar "$jar" --properties "$state/s3proxy.properties" \
        >"$state/stdout.log" 2>&1 &
    echo $! >"$pidfile"
    log "starting on $url (pid $(cat "$pidfile"))"
    for _ in $(seq 1 240); do
        if ! running; then
            log "S3Proxy exited; its output:"
            tail -n 40 "$state/stdout.log" >&2 || true
            exit 1
        fi
        # Any HTTP answer (403 without a signature) means it is up.
        if [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$url/" || true)" != "000" ]]; then
            log "ready"
            return
        fi
        sleep 0.25
    done
    log "not ready after 60 s; its output:"
    tail -n 40 "$state/stdout.log" >&2 || true
    stop
    exit 1
}

stop() {
    if running; then
        local pid
        pid="$(cat "$pidfile")"
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -9 "$pid" 2>/dev/null || true
        log "stopped"
    fi
    rm -f "$pidfile"
}

case "${1:-}" in
    fetch) fetch ;;
    start) start ;;
    stop) stop ;;
    status) running ;;
    *) echo "usage: $0 fetch|start|stop|status" >&2; exit 2 ;;
esac
