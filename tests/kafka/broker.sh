#!/usr/bin/env bash
# A real single-node Apache Kafka broker (KRaft, broker+controller) on loopback,
# for Weir's tests and local development. Jars come from Maven Central once
# (tests/kafka/pom.xml) into a cache; the machine's Java 17 runs them.
#
#   broker.sh fetch     download the jars (once)
#   broker.sh start     fresh storage, start, wait until the broker answers
#   broker.sh restart   stop it and start it again on the same storage
#   broker.sh stop      stop it
#   broker.sh status    exit 0 when it is running
#
# Environment:
#   WEIR_KAFKA_HOME   cache of jars and broker state (default ~/.cache/weir/kafka)
#   WEIR_KAFKA_PORT   client port (default 19092; the controller uses port+1)
# Clients connect to 127.0.0.1:$WEIR_KAFKA_PORT.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
home="${WEIR_KAFKA_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/weir/kafka}"
port="${WEIR_KAFKA_PORT:-19092}"
controller_port=$((port + 1))
version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")"
libs="$home/libs-$version"
state="$home/broker-$port"
pidfile="$state/broker.pid"

log() { echo "kafka: $*" >&2; }

fetch() {
    if [[ -f "$libs/.complete" ]]; then
        return
    fi
    command -v mvn >/dev/null || { log "Maven (mvn) is needed to fetch Kafka"; exit 1; }
    log "fetching Apache Kafka $version jars from Maven Central into $libs"
    rm -rf "$libs"
    mkdir -p "$libs"
    mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies \
        -DoutputDirectory="$libs" -DincludeScope=runtime >&2
    touch "$libs/.complete"
}

running() {
    [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

java_cmd() {
    java -Xms256m -Xmx1g -XX:+UseG1GC -Dlog4j2.configurationFile="$state/log4j2.xml" \
        -cp "$libs/*" "$@"
}

start() {
    fetch
    if running; then
        log "already running on 127.0.0.1:$port (pid $(cat "$pidfile"))"
        return
    fi
    command -v java >/dev/null || { log "Java 17 is needed to run Kafka"; exit 1; }
    rm -rf "$state"
    mkdir -p "$state/data"
    cat > "$state/server.properties" <<EOF
process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
controller.quorum.bootstrap.servers=127.0.0.1:$controller_port
log.dirs=$state/data
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# A test and development broker: keep data minutes, not days, so that
# benchmarks and tests cannot fill the disk (segments roll so they can go).
log.retention.minutes=10
log.retention.check.interval.ms=60000
log.segment.bytes=67108864
log.roll.ms=120000
EOF
    cat > "$state/log4j2.xml" <<EOF
<Configuration status="warn">
  <Appenders><File name="file" fileName="$state/broker.log"><PatternLayout pattern="%d %p %c{1} %m%n"/></File></Appenders>
  <Loggers><Root level="warn"><AppenderRef ref="file"/></Root><Logger name="kafka.server.KafkaServer" level="info"/></Loggers>
</Configuration>
EOF
    local cluster_id
    cluster_id="$(java_cmd kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)"
    java_cmd kafka.tools.StorageTool format --standalone --cluster-id "$cluster_id" \
        --config "$state/server.properties" >"$state/format.log" 2>&1 \
        || { log "storage format failed:"; cat "$state/format.log" >&2; exit 1; }
    launch
}

# Start the broker on the storage in $state and wait until it answers.
launch() {
    nohup java -Xms256m -Xmx1g -XX:+UseG1GC -Dlog4j2.configurationFile="$state/log4j2.xml" \
        -cp "$libs/*" kafka.Kafka "$state/server.properties" >"$state/stdout.log" 2>&1 &
    echo $! >"$pidfile"
    log "starting on 127.0.0.1:$port (pid $(cat "$pidfile"))"
    # Ready when the broker lists topics through its client port.
    for _ in $(seq 1 120); do
        if ! running; then
            log "the broker exited; its output:"
            tail -n 40 "$state/stdout.log" "$state/broker.log" >&2 2>/dev/null || true
            exit 1
        fi
        if java_cmd org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$port" --list \
            >/dev/null 2>&1; then
            log "ready"
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
        pid="$(cat "$pidfile")"
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 30); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 1
        done
        kill -9 "$pid" 2>/dev/null || true
        log "stopped"
    fi
    rm -f "$pidfile"
}

restart() {
    [[ -f "$state/server.properties" ]] || { log "no broker storage in $state to restart on: start first"; exit 1; }
    stop
    launch
}

case "${1:-}" in
    fetch) fetch ;;
    start) start ;;
    restart) restart ;;
    stop) stop ;;
    status) running ;;
    *) echo "usage: $0 fetch|start|restart|stop|status" >&2; exit 2 ;;
esac
