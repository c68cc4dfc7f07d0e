#!/bin/bash
# The official zookeeper image's start-up, for the local stand-in (zookeeper.Containerfile):
# write $ZOO_CONF_DIR/zoo.cfg from the ZOO_* variables unless one exists, then run a
# standalone server in the foreground with its log on stdout.
set -euo pipefail

config="$ZOO_CONF_DIR/zoo.cfg"
if [[ ! -f "$config" ]]; then
    {
        echo "dataDir=$ZOO_DATA_DIR"
        echo "dataLogDir=$ZOO_DATA_LOG_DIR"
        echo "tickTime=$ZOO_TICK_TIME"
        echo "initLimit=$ZOO_INIT_LIMIT"
        echo "syncLimit=$ZOO_SYNC_LIMIT"
        echo "maxClientCnxns=$ZOO_MAX_CLIENT_CNXNS"
        echo "standaloneEnabled=$ZOO_STANDALONE_ENABLED"
        echo "admin.enableServer=$ZOO_ADMINSERVER_ENABLED"
        echo "clientPort=2181"
        if [[ -n "${ZOO_4LW_COMMANDS_WHITELIST:-}" ]]; then
            echo "4lw.commands.whitelist=$ZOO_4LW_COMMANDS_WHITELIST"
        fi
    } >"$config"
fi
cat >"$ZOO_CONF_DIR/log4j.properties" <<'LOG4J'
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} [myid:%X{myid}] - %-5p [%t:%C{1}@%L] - %m%n
LOG4J

classpath=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar
# exec: java is PID 1 and gets `docker stop`'s SIGTERM itself.
# shellcheck disable=SC2086  # JVMFLAGS is a list of flags
exec java $JVMFLAGS -Dlog4j.configuration="file:$ZOO_CONF_DIR/log4j.properties" \
    -cp "$classpath" org.apache.zookeeper.server.quorum.QuorumPeerMain "$config"
