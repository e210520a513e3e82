#!/usr/bin/env bash
# A real embedding server on loopback for Weir's tests: server.py, a small
# model whose weights ship in its PyPI wheel (requirements.txt, installed
# once into $WEIR_TOOLS_DIR/embedder-<hash>, default ~/.cache/weir/tools).
#
#   embedder.sh start     start it and wait until it answers
#   embedder.sh stop      stop it
#   embedder.sh status    exit 0 when it is running
#
# Environment: WEIR_EMBEDDER_PORT (default 18090), WEIR_EMBEDDER_HOME (state,
# default ~/.cache/weir/embedder). Clients use http://127.0.0.1:$port.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port="${WEIR_EMBEDDER_PORT:-18090}"
home="${WEIR_EMBEDDER_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/weir/embedder}"
state="$home/run-$port"
pidfile="$state/pid"
req="$here/requirements.txt"
venv="${WEIR_TOOLS_DIR:-$HOME/.cache/weir/tools}/embedder-$(sha256sum "$req" | cut -c1-12)"

log() { echo "embedder: $*" >&2; }

install() {
    [[ -f $venv/.installed ]] && return
    mkdir -p "$(dirname "$venv")"
    exec 9>"$venv.lock"
    if command -v flock >/dev/null; then flock 9; fi
    if [[ ! -f $venv/.installed ]]; then
        log "installing the model server into $venv"
        rm -rf "$venv"
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
        touch "$venv/.installed"
    fi
    exec 9>&-
}

running() {
    [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null &&
        ps -p "$(cat "$pidfile")" -o args= 2>/dev/null | grep -qF "server.py $port"
}

answers() {
    python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null
}

case "${1:-}" in
start)
    if running; then log "already running on port $port"; exit 0; fi
    install
    mkdir -p "$state"
    HF_HUB_OFFLINE=1 nohup "$venv/bin/python" "$here/server.py" "$port" >"$state/server.log" 2>&1 &
    echo $! >"$pidfile"
    for _ in $(seq 1 120); do
        if answers; then log "ready on http://127.0.0.1:$port"; exit 0; fi
        running || { tail -n 30 "$state/server.log" >&2; log "did not start"; exit 1; }
        sleep 0.5
    done
    tail -n 30 "$state/server.log" >&2
    log "did not answer within 60 s"
    exit 1
    ;;
stop)
    if running; then kill "$(cat "$pidfile")"; log "stopped"; fi
    rm -f "$pidfile"
    ;;
status) running ;;
*) echo "usage: embedder.sh start|stop|status" >&2; exit 2 ;;
esac
