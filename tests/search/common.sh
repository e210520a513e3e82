# shellcheck shell=bash disable=SC2154
# What tests/search/opensearch.sh and solr.sh share: fetching the jars and
# compiling the launcher, and stopping the server. Sourced, with these set:
#   here, libs, launcher, pidfile; server (the folder under tests/search with
#   pom.xml and Launcher.java); what (a name for messages); log; running.

fetch() {
    if [[ ! -f "$libs/.complete" ]]; then
        command -v mvn >/dev/null || { log "Maven (mvn) is needed to fetch $what"; exit 1; }
        log "fetching $what jars from Maven Central into $libs"
        rm -rf "$libs"
        mkdir -p "$libs"
        mvn -q -B -Dstyle.color=never -f "$here/$server/pom.xml" dependency:copy-dependencies \
            -DoutputDirectory="$libs" -DincludeScope=runtime >&2
        # Plugin zips (k-NN) hold the plugin jar and its own dependencies at the
        # top level; the classpath wildcard only sees *.jar, so unpack them
        # (with Python's zipfile: unzip is not on every machine).
        local z
        for z in "$libs"/*.zip; do
            [[ -e "$z" ]] || continue
            python3 - "$z" "$libs" <<'PY'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in z.namelist():
        if name.endswith(".jar") and "/" not in name.strip("/"):
            with open(os.path.join(sys.argv[2], os.path.basename(name)), "wb") as out:
                out.write(z.read(name))
PY
            rm -f "$z"
        done
        touch "$libs/.complete"
    fi
    # Recompiled when the source is newer than the compiled class.
    if [[ ! -f "$launcher/Launcher.class" || "$here/$server/Launcher.java" -nt "$launcher/Launcher.class" ]]; then
        command -v javac >/dev/null || { log "a JDK (javac) is needed to compile the launcher"; exit 1; }
        rm -rf "$launcher"
        mkdir -p "$launcher"
        javac -nowarn -d "$launcher" -cp "$libs/*" "$here/$server/Launcher.java"
    fi
}

stop() {
    if running; then
        local pid
        pid="$(cat "$pidfile")"
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 150); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "still running after 30 s: killing it"
            kill -9 "$pid" 2>/dev/null || true
            # SIGKILL is not instant: wait until the port is free again.
            for _ in $(seq 1 50); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.2
            done
        fi
        log "stopped"
    fi
    rm -f "$pidfile"
}
