#!/usr/bin/env bash
# Debian's Chromium for the status-page test, installed when it is missing
# (the test runs it headless to read and screenshot the page).
#
#   chromium.sh path    print the browser's path, installing it first if needed
#
# Environment:
#   WEIR_CHROMIUM   a browser to use instead (nothing is installed then)
# Installing needs root or sudo, and Debian's package lists (apt-get update
# runs when the first attempt finds no package).
set -euo pipefail

log() { echo "chromium: $*" >&2; }

path() {
    if [[ -n "${WEIR_CHROMIUM:-}" ]]; then
        [[ -x "$WEIR_CHROMIUM" ]] || { log "WEIR_CHROMIUM=$WEIR_CHROMIUM is not an executable"; exit 1; }
        echo "$WEIR_CHROMIUM"
        return
    fi
    if ! command -v chromium >/dev/null; then
        command -v apt-get >/dev/null ||
            { log "Chromium is missing and this machine has no apt-get: install it, or set WEIR_CHROMIUM"; exit 1; }
        local sudo=""
        if [[ "$(id -u)" != 0 ]]; then
            command -v sudo >/dev/null || { log "installing Chromium needs root or sudo"; exit 1; }
            sudo="sudo"
        fi
        export DEBIAN_FRONTEND=noninteractive
        log "installing Debian's chromium package (once)"
        # One installer at a time: test binaries may ask at once.
        exec 9>/tmp/weir-chromium-install.lock
        flock 9
        if ! command -v chromium >/dev/null; then
            $sudo apt-get install -y -qq chromium >&2 ||
                { $sudo apt-get update -qq >&2 && $sudo apt-get install -y -qq chromium >&2; }
        fi
    fi
    command -v chromium
}

case "${1:-}" in
    path) path ;;
    *) echo "usage: $0 path" >&2; exit 2 ;;
esac
