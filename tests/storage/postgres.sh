#!/usr/bin/env bash
# A real PostgreSQL on loopback for Weir's tests: Debian's `postgresql`
# package (installed here with apt-get when it is missing), a throwaway
# cluster of its own (initdb), password (SCRAM) logins over TCP.
#
#   postgres.sh install   apt-get install postgresql when it is missing
#   postgres.sh start     fresh cluster, start, wait until it answers
#   postgres.sh stop      stop it
#   postgres.sh status    exit 0 when it is running
#
# Environment:
#   WEIR_PG_HOME   where the cluster lives (default /var/tmp/weir-postgres-$USER:
#                  the server's own user must reach it, and root's home is closed)
#   WEIR_PG_PORT   TCP port (default 54329)
# Clients connect to postgres://postgres:weir-test@127.0.0.1:$WEIR_PG_PORT/postgres
# (`fsync` off: a test server, not a store).
set -euo pipefail

home="${WEIR_PG_HOME:-/var/tmp/weir-postgres-$(id -un)}"
port="${WEIR_PG_PORT:-54329}"
state="$home/pg-$port"
password=weir-test

log() { echo "postgres: $*" >&2; }

bin() {
    local dir
    dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
    [[ -n "$dir" && -x "$dir/initdb" ]] || return 1
    echo "$dir"
}

install() {
    bin >/dev/null && return
    command -v apt-get >/dev/null || { log "PostgreSQL is missing and there is no apt-get to install it"; exit 1; }
    log "installing Debian's postgresql package"
    local sudo=
    [[ "$(id -u)" == 0 ]] || sudo=sudo
    $sudo apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >&2
}

# The server runs as the package's `postgres` user when this runs as root
# (initdb refuses root), else as whoever runs this.
as_owner() {
    if [[ "$(id -u)" == 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

running() {
    local b
    b="$(bin)" || return 1
    [[ -f "$state/data/postmaster.pid" ]] && as_owner "$b/pg_ctl" -D "$state/data" status >/dev/null 2>&1
}

start() {
    install
    local b
    b="$(bin)"
    if running; then
        log "already running on 127.0.0.1:$port"
        return
    fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        log "port $port on 127.0.0.1 is taken by another process"
        exit 1
    fi
    rm -rf "$state"
    mkdir -p "$state"
    chmod 755 "$home"
    [[ "$(id -u)" == 0 ]] && chown postgres "$state"
    echo "$password" >"$state/pwfile"
    [[ "$(id -u)" == 0 ]] && chown postgres "$state/pwfile"
    as_owner "$b/initdb" -D "$state/data" -U postgres --pwfile="$state/pwfile" \
        --auth-local=trust --auth-host=scram-sha-256 --no-sync -E UTF8 --locale=C.UTF-8 >"$state/initdb.log" 2>&1 ||
        { log "initdb failed:"; cat "$state/initdb.log" >&2; exit 1; }
    as_owner "$b/pg_ctl" -D "$state/data" -l "$state/server.log" -w -t 60 \
        -o "-h 127.0.0.1 -p $port -k $state -F -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
        start >/dev/null ||
        { log "the server did not start:"; tail -n 40 "$state/server.log" >&2; exit 1; }
    log "ready on 127.0.0.1:$port"
}

stop() {
    local b
    if running; then
        b="$(bin)"
        as_owner "$b/pg_ctl" -D "$state/data" -m fast -w stop >/dev/null 2>&1 || true
        log "stopped"
    fi
}

case "${1:-}" in
    install) install ;;
    start) start ;;
    stop) stop ;;
    status) running ;;
    *) echo "usage: $0 install|start|stop|status" >&2; exit 2 ;;
esac
