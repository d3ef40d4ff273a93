"""Every log4j configuration the lab writes, built one way: a pattern, a root level, some loggers' levels, and
where the lines go. Log4j 1 (reload4j: the programs, ZooKeeper-era brokers) and log4j 2 (brokers 4.0+, Spark's
driver) spell the same thing differently; the patterns are what lab.record.evidence reads back.

    write_shared(folder / "log4j.properties", PROGRAMS)     # a program's JVM: -Dlog4j.configuration=file:...
"""
from __future__ import annotations

from pathlib import Path

PROGRAM_PATTERN = "[%d{yyyy-MM-dd HH:mm:ss,SSS}] %p [%t] %m (%c{1})%n"   # with the thread: Streams names it
BROKER_PATTERN = "[%d{ISO8601}] %p %m (%c{1})%n"
SPARK_PATTERN = "%d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n"

# Each client logs its whole configuration when it starts: pages of it per program.
CLIENT_LEVELS = {f"org.apache.kafka.{name}": "WARN" for name in (
    "clients.consumer.ConsumerConfig", "clients.producer.ProducerConfig", "clients.admin.AdminClientConfig",
    "streams.StreamsConfig", "common.utils.AppInfoParser", "common.metrics", "common.config.AbstractConfig")}
# A broker's controller speaks (the lessons read it); its Raft log and metadata image chatter.
BROKER_LEVELS = {"org.apache.kafka.controller": "INFO", "org.apache.kafka.raft": "WARN",
                 "org.apache.kafka.image": "WARN"}


def log4j1(pattern: str, root: str = "INFO", levels: dict | None = None) -> str:
    """A log4j 1 properties file: everything at `root` and up to the console (the program's log file)."""
    lines = [f"log4j.rootLogger={root}, out", "log4j.appender.out=org.apache.log4j.ConsoleAppender",
             "log4j.appender.out.layout=org.apache.log4j.PatternLayout",
             f"log4j.appender.out.layout.ConversionPattern={pattern}",
             *(f"log4j.logger.{name}={level}" for name, level in (levels or {}).items())]
    return "\n".join(lines) + "\n"


def log4j2(pattern: str | None, root: str = "INFO", levels: dict | None = None, *, file: Path | None = None,
           stderr: bool = False) -> str:
    """A log4j 2 properties file: to the console (stdout, or stderr), or to `file`; no pattern, no appender (for
    root level OFF)."""
    lines = ["status = error"]
    if pattern:
        lines += [f"appender.out.type = {'File' if file else 'Console'}", "appender.out.name = OUT"]
        if file:
            lines.append(f"appender.out.fileName = {file}")
        elif stderr:
            lines.append("appender.out.target = SYSTEM_ERR")
        lines += ["appender.out.layout.type = PatternLayout", f"appender.out.layout.pattern = {pattern}"]
    lines.append(f"rootLogger.level = {root}")
    if pattern:
        lines.append("rootLogger.appenderRef.out.ref = OUT")
    for i, (name, level) in enumerate((levels or {}).items()):
        lines += [f"logger.l{i}.name = {name}", f"logger.l{i}.level = {level}"]
    return "\n".join(lines) + "\n"


PROGRAMS = log4j1(PROGRAM_PATTERN, levels=CLIENT_LEVELS)
BROKER_LOG4J1 = log4j1(BROKER_PATTERN, levels=BROKER_LEVELS)
BROKER_LOG4J2 = log4j2(BROKER_PATTERN, levels=BROKER_LEVELS)


def spark_driver(log: Path | None) -> str:
    """Spark's driver: WARN and up to `log`, or to stderr (the cell) when there is none (verbose)."""
    return log4j2(SPARK_PATTERN, root="WARN", file=log, stderr=log is None)
