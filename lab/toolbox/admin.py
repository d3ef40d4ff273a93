"""Where topics and consumer groups stand, asked of the cluster the way an operator would.

    ends = topic_offsets(admin, "events", 2)                 # {0: 120, 1: 80}
    set_group_offsets(run, admin, "g", "events", {0: 0})     # kafka-consumer-groups --reset-offsets
    gone = group_offsets(admin, {"app": "g"}, "events")      # {"app": {0: None}}: expired
    set_topic_config(admin, "events", **{"retention.ms": "1000"})
    set_group_config(admin, "workers", **{"share.record.lock.duration.ms": "5000"})

The committed offsets an app reports in its own `LAB {"kind": "commit", "offsets": ...}` lines are
folded by `committed_offsets()`; `expired_at()` reads transactional-id tombstones.
"""
from __future__ import annotations



def topic_offsets(admin, topic: str, partitions: int = 1, spec: str = "latest",
                  committed: bool = False) -> dict[int, int]:
    """partition -> offset: "latest" (the end) or "earliest" (the log start, past what retention deleted);
    `committed`: the end a read_committed reader sees, the last stable offset (before any open transaction)."""
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec
    tps = [TopicPartition(topic, i) for i in range(partitions)]
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    futures = admin.list_offsets({tp: getattr(OffsetSpec, spec)() for tp in tps}, isolation_level=level,
                                 request_timeout=15)
    return {tp.partition: f.result().offset for tp, f in futures.items()}


def set_group_offsets(run, admin, group: str, topic: str, offsets: dict[int, int], timeout: float = 60) -> None:
    """AdminClient.alter_consumer_group_offsets, retried until the coordinator accepts it (a fresh broker
    creates __consumer_offsets on the first ask). The group must have no active member."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, part, off)
                                                   for part, off in sorted(offsets.items())])

    def accepted() -> bool:
        try:
            done = admin.alter_consumer_group_offsets([request], request_timeout=5)[group]
            return all(tp.error is None for tp in done.result().topic_partitions)
        except KafkaException:
            return False
    run.wait(accepted, timeout, f"the group coordinator to set {group} to {offsets}", interval=1)


def group_offsets(admin, groups: dict[str, str], topic: str) -> dict[str, dict[int, int | None]]:
    """name -> {partition: committed offset, None when it has none} for each group (name -> group.id) the
    coordinator answered for; a group it no longer knows has no offsets left ({})."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
    asked = {name: admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                     request_timeout=10)[group] for name, group in groups.items()}
    out = {}
    for name, f in asked.items():
        try:
            tps = f.result().topic_partitions or []
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:
                continue  # a transient coordinator error: no answer for this group this time
            tps = []      # the group itself is gone, offsets and all
        if not any(tp.error is not None for tp in tps):
            out[name] = {tp.partition: tp.offset if tp.offset >= 0 else None for tp in tps if tp.topic == topic}
    return out


def committed_offsets(commits: list[dict]) -> dict[int, int]:
    """Highest committed offset per partition from an app's `LAB {"kind": "commit", "offsets": {...}}` rows."""
    out: dict[int, int] = {}
    for row in commits:
        for part, off in row.get("offsets", {}).items():
            out[int(part)] = max(out.get(int(part), -1), int(off))
    return out


def set_topic_config(admin, topic: str, **config: str) -> None:
    """incrementalAlterConfigs SET on a topic (kafka-configs --alter --add-config)."""
    _set_config(admin, "TOPIC", topic, config)


def set_group_config(admin, group: str, **config: str) -> None:
    """incrementalAlterConfigs SET on a group (kafka-configs --entity-type groups --alter --add-config): a share
    group's lock duration, delivery limit, where it starts reading."""
    _set_config(admin, "GROUP", group, config)


def _set_config(admin, kind: str, name: str, config: dict) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    res = ConfigResource(getattr(ConfigResource.Type, kind), name, incremental_configs=[
        ConfigEntry(k, str(v), incremental_operation=AlterConfigOpType.SET) for k, v in config.items()])
    admin.incremental_alter_configs([res], request_timeout=15)[res].result()


def expired_at(records, prefixes: dict, since: float | None = None) -> dict:
    """name -> when the transaction coordinator expired its transactional id (a tombstone in
    __transaction_state, see consume.read_to_end), or None. Keys there are (int16 version, int16 length, id bytes);
    prefixes: name -> transactional.id (Kafka Streams: its application.id, which starts the id)."""
    found = {name: None for name in prefixes}
    for key, value, ts in records:
        if value is None and key and len(key) >= 4 and (since is None or ts >= since):
            txn_id = key[4:].decode(errors="replace")
            for name, prefix in prefixes.items():
                if txn_id.startswith(prefix) and found[name] is None:
                    found[name] = ts
    return found
