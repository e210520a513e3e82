#!/usr/bin/env bash
# A real standalone Apache Solr (no ZooKeeper) on loopback, for Weir's tests
# and local development. Jars come from Maven Central once
# (tests/search/solr/pom.xml) into a cache; the machine's Java 17 runs them
# through a small launcher (tests/search/solr/Launcher.java) that is compiled
# once into the same cache.
#
#   solr.sh fetch     download the jars and compile the launcher (once)
#   solr.sh start     fresh Solr home, start, wait until Solr answers, create core "weir"
#   solr.sh stop      stop it
#   solr.sh status    exit 0 when it is running
#
# Environment:
#   WEIR_SOLR_HOME   cache of jars and Solr state (default ~/.cache/weir/solr)
#   WEIR_SOLR_PORT   HTTP port (default 18983)
# Clients talk to http://127.0.0.1:$WEIR_SOLR_PORT/solr, core "weir" (e.g.
# .../solr/weir/update). More cores with the same schema can be made at run time:
#   curl "http://127.0.0.1:$WEIR_SOLR_PORT/solr/admin/cores?action=CREATE&name=NAME&configSet=weir"
# (configSet=weir-managed gives a core a mutable managed schema instead.)
# The configset (tests/search/solr/configset) has typed dynamic fields by
# suffix (*_s, *_i, *_t, ...), a multi-valued text catch-all for every other
# field, nested documents, an update log, and no auto soft commit: documents
# show up after commit=true or commitWithin.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
home="${WEIR_SOLR_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/weir/solr}"
port="${WEIR_SOLR_PORT:-18983}"
version="$(sed -n 's:.*<solr.version>\(.*\)</solr.version>.*:\1:p' "$here/solr/pom.xml")"
libs="$home/libs-$version"
launcher="$home/launcher-$version"
state="$home/solr-$port"
pidfile="$state/solr.pid"
url="http://127.0.0.1:$port/solr"

log() { echo "solr: $*" >&2; }

server=solr
what="Apache Solr $version"
# shellcheck source=tests/search/common.sh
source "$here/common.sh"


# The pid in the pidfile is ours only while that process still runs our
# launcher on this state folder (a stale pidfile may name a reused pid).
running() {
    [[ -f "$pidfile" ]] || return 1
    local pid
    pid="$(cat "$pidfile")"
    kill -0 "$pid" 2>/dev/null && ps -p "$pid" -o args= 2>/dev/null | grep -qF "Launcher $state/home "
}

show_logs() {
    tail -n 60 "$state/stdout.log" "$state/logs/solr.log" >&2 2>/dev/null || true
}

start() {
    fetch
    if running; then
        log "already running on $url (pid $(cat "$pidfile"))"
        return
    fi
    command -v java >/dev/null || { log "Java 17 is needed to run Solr"; exit 1; }
    command -v curl >/dev/null || { log "curl is needed to check on Solr"; exit 1; }
    # Someone else on the port would answer the readiness check for us.
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        log "port $port on 127.0.0.1 is taken by another process"
        exit 1
    fi
    rm -rf "$state"
    mkdir -p "$state/home/configsets" "$state/logs"
    # The jars carry no configset (Solr's _default ships only in its tarball):
    # cores are made from ours, found by name under $SOLR_HOME/configsets.
    cp -R "$here/solr/configset" "$state/home/configsets/weir"
    # "weir-managed": the same schema, managed and mutable, for plugins that
    # add fields through the Schema API (solr-indexer's vector fields).
    managed="$state/home/configsets/weir-managed"
    cp -R "$here/solr/configset" "$managed"
    mv "$managed/conf/schema.xml" "$managed/conf/managed-schema.xml"
    sed -i 's|<schemaFactory class="ClassicIndexSchemaFactory"/>|<schemaFactory class="ManagedIndexSchemaFactory"><bool name="mutable">true</bool><str name="managedSchemaResourceName">managed-schema.xml</str></schemaFactory>|' \
        "$managed/conf/solrconfig.xml"
    # Solr's defaults for everything (standalone mode; cores live in $SOLR_HOME).
    echo '<solr/>' >"$state/home/solr.xml"
    cat >"$state/log4j2.xml" <<EOF
<Configuration status="warn">
  <Appenders><File name="file" fileName="$state/logs/solr.log"><PatternLayout pattern="%d %p %c{1} %m%n"/></File></Appenders>
  <Loggers><Root level="warn"><AppenderRef ref="file"/></Root><Logger name="org.apache.solr.core.SolrCore" level="info"/><Logger name="org.apache.solr.core.SolrCore.Request" level="warn"/></Loggers>
</Configuration>
EOF
    nohup java -Xms256m -Xmx512m -XX:+UseG1GC -Djava.awt.headless=true -Dfile.encoding=UTF-8 \
        -Dsolr.log.dir="$state/logs" -Dlog4j2.configurationFile="$state/log4j2.xml" \
        -cp "$libs/*:$launcher" Launcher "$state/home" "$port" \
        >"$state/stdout.log" 2>&1 &
    echo $! >"$pidfile"
    log "starting on $url (pid $(cat "$pidfile"))"
    local ready=
    for _ in $(seq 1 240); do
        if ! running; then
            log "Solr exited; its output:"
            show_logs
            exit 1
        fi
        if curl -fsS --max-time 5 "$url/admin/cores?action=STATUS" >/dev/null 2>&1; then
            ready=1
            break
        fi
        sleep 0.5
    done
    if [[ -z "$ready" ]]; then
        log "not ready after 120 s; its output:"
        show_logs
        stop
        exit 1
    fi
    local created
    if ! created="$(curl -sS --max-time 60 "$url/admin/cores?action=CREATE&name=weir&configSet=weir" 2>&1)" ||
        ! grep -q '"status":0' <<<"$created"; then
        log "creating core weir failed: $created"
        show_logs
        stop
        exit 1
    fi
    log "ready (core weir)"
}


case "${1:-}" in
    fetch) fetch ;;
    start) start ;;
    stop) stop ;;
    status) running ;;
    *) echo "usage: $0 fetch|start|stop|status" >&2; exit 2 ;;
esac
