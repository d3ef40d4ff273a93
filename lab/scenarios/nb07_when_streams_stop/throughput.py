"""What lessons 07b and 07c share: StreamsApp, the instances
of one lab/java/ThroughputApp.java app under one application.id (lab.toolbox.streams_app), and start_and_settle(),
which starts apps together and waits until each has settled (its group stable, every task assigned); the lessons
then measure each app's rates over a window.
"""
from __future__ import annotations

import time
import uuid

from ...config import KAFKA_VERSION
from ...toolbox import streams_app

HEAP_MB = 160
STICKY_ASSIGNOR = "org.apache.kafka.streams.processor.assignment.assignors.StickyTaskAssignor"   # KIP-924


class StreamsApp(streams_app.StreamsApp):
    """`instances` JVMs of ThroughputApp sharing one application.id."""

    def __init__(self, lab, name: str, topic: str, *, instances: int, threads: int = 1, work_ms: float = 0,
                 lookup_url: str = "", lookup_mode: str = "plain", batch_size: int = 1, lookup_latency_ms: float = 0,
                 group_protocol: str = "classic"):
        self.lab, self.name, self.topic, self.group_protocol = lab, name, topic, group_protocol
        app_id = f"tput-{name}-{uuid.uuid4().hex[:4]}"
        self.admin, self._stable_since = lab.cluster.admin(), None
        output = lab.topics(f"{topic}-{name}-out", partitions=1)[0]
        super().__init__(lab, app_id, [f"{name}-{i}" for i in range(instances)], KAFKA_VERSION, "ThroughputApp",
                         ["ThroughputApp.java", "Lab.java", "LabStreams.java"], lambda i: {
                             "processing.guarantee": "at_least_once", "commit.interval.ms": 1000,
                             "num.stream.threads": threads, "state.dir": lab.folder / app_id / str(i),
                             "consumer.auto.offset.reset": "earliest", "producer.linger.ms": 5,
                             # streams (KIP-1071): the broker assigns the tasks, not the app's leader
                             **({"group.protocol": group_protocol} if group_protocol != "classic" else {}),
                             # sticky: the default (high-availability) assignor hands stateless tasks to the least
                             # loaded instance, not their owner, and with more instances than tasks they moved
                             # from one to another for 40 s before the group settled
                             "task.assignor.class": STICKY_ASSIGNOR,
                             # about a second of work between two polls: a rebalance waits for every member's
                             # next poll, and Streams' cooperative rebalance needs two of them
                             "consumer.max.poll.records": max(1, int(1000 / max(work_ms, 1))) if not lookup_url
                             else max(1, int(1000 / max(lookup_latency_ms, 1))),
                             "lab.input.topic": topic, "lab.output.topic": output, "lab.app": f"{name}-{i}",
                             "lab.work.ms": int(work_ms), "lab.lookup.url": lookup_url,
                             "lab.lookup.mode": lookup_mode, "lab.batch.size": batch_size},
                         heap=f"{HEAP_MB}m")

    def _group_state(self) -> str:
        description = self.admin.describe_consumer_groups([self.app_id], request_timeout=10)[self.app_id]
        try:
            return description.result().state.name
        except Exception:   # not known to the coordinator yet
            return "UNKNOWN"

    def tasks(self) -> dict[str, list[str]]:
        """instance -> its active tasks, from its last progress line."""
        return {p.name: self.last(p).get("tasks", []) for p in self.programs}

    def settled(self, partitions: int, stable_s: float = 5.0) -> bool:
        """The group STABLE (no rebalance under way, nor a follow-up; asked of a classic group only), every instance
        RUNNING, every partition's task assigned, and no change for `stable_s`."""
        now = time.time()
        # a streams group (KIP-1071) is no consumer group to describe: its instances' own states and tasks decide
        if self.group_protocol == "classic" and self._group_state() != "STABLE":
            self._stable_since = None
            return False
        self._stable_since = self._stable_since or now
        if now - self._stable_since < stable_s:
            return False
        self.check_alive()
        for p in self.programs:
            if not self.running(p):
                return False
            rows = self.reports(p)
            recent = [r for r in rows if r["ts"] >= now - stable_s]
            if rows[0]["ts"] > now - stable_s or any(r.get("tasks") != rows[-1].get("tasks") or
                                                     r.get("state") != "RUNNING" for r in recent):
                return False
        return sum(len(t) for t in self.tasks().values()) >= partitions

    def processed(self, program, at: float) -> int:
        """Records the instance had processed by epoch time `at` (its last report before it)."""
        before = [r for r in self.reports(program) if r["ts"] <= at]
        return before[-1]["processed"] if before else 0

    def rates(self, start: float, end: float) -> dict[str, float]:
        """instance -> records per second over [start, end]."""
        return {p.name: (self.processed(p, end) - self.processed(p, start)) / (end - start) for p in self.programs}

    def calls(self, start: float, end: float) -> int:
        def at(p, t):
            before = [r for r in self.reports(p) if r["ts"] <= t]
            return before[-1].get("calls", 0) if before else 0
        return sum(at(p, end) - at(p, start) for p in self.programs)


def start_and_settle(lab, apps, partitions: int, what: str, timeout: float = 120) -> None:
    """Start every app, then wait until all have settled. Each app is asked on every round (no short
    circuit): each one's stable clock runs at the same time, not one app's after another's."""
    apps = list(apps)
    for app in apps:
        app.start()
    lab.wait(lambda: all([a.settled(partitions) for a in apps]), timeout, what,
             evidence=lambda: {a.name: a.tasks() for a in apps})


stop_apps = streams_app.stop_all   # every instance of every app closed at once (each Streams close takes a second)
