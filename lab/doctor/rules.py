"""Pure rules: the raw facts lab.doctor read (see facts.py / ClusterFacts.java) -> findings. No JVM, no cluster.

Each rule names the mechanism of one failure this course reproduces (/work/shared/reference/failures.md) and the
notebook that measures it. A healthy cluster (long retentions, active groups, no quota on a Streams producer,
current clients) gives no finding.
"""
from __future__ import annotations

import re

from .report import Finding, duration_text, entity_text, rates_text, short_offsets, stamp, version_tuple

NOTEBOOKS = {"offsets": "01_quiet_service.ipynb", "txn": "02a_idle_clients.ipynb",
             "quota": "03a_over_quota.ipynb", "standby": "04_store_reads.ipynb"}
DEFAULTS = {"offsets.retention.minutes": 10080, "offsets.retention.check.interval.ms": 600000,
            "transactional.id.expiration.ms": 604800000, "producer.id.expiration.ms": 86400000,
            "transaction.remove.expired.transaction.cleanup.interval.ms": 3600000}
HOUR_MS, DAY_MS = 3600_000, 86400_000
IDLE_STATES = {"Empty", "CompleteCommit", "CompleteAbort"}      # what the transaction coordinator may expire
# A Streams EOS producer's client id: <client.id>-StreamThread-N-producer (EOS v2), or with a task id (EOS alpha).
STREAMS_EOS_PRODUCER = re.compile(r"-StreamThread-\d+(-\d+_\d+)?-producer$")
BYTE_RATES = ("producer_byte_rate", "request_percentage")
PRODUCER_ID_EXPIRATION = "producer.id.expiration.ms"
STANDBY_CONFIG = "streams.num.standby.replicas"   # a streams group's config (KIP-1071)


def severity(when_ms: int | None, now_ms: int) -> str:
    """By how soon: within an hour (or overdue) high, within a day medium, later low."""
    if when_ms is None:
        return "high"
    left = when_ms - now_ms
    return "high" if left <= HOUR_MS else "medium" if left <= DAY_MS else "low"


def idle_threshold_ms(expiration_ms: int) -> int:
    """How long a transactional id or producer must have been silent to count as idle: a tenth of the expiration,
    at most a minute. One that writes more often than that is active, and stays clear of the expiry."""
    return min(60_000, expiration_ms // 10)


def broker_config(facts: dict, name: str) -> int:
    """The value the brokers run with (the first broker that answered), else Kafka's default."""
    configs = facts.get("broker_configs")
    if isinstance(configs, dict) and "error" not in configs:
        for broker in configs.values():
            if name in broker and broker[name].get("value") not in (None, ""):
                return int(broker[name]["value"])
    return DEFAULTS[name]


def producer_id_expiration(facts: dict) -> tuple[int, str]:
    """How long a partition leader keeps an idle producer's state, and the setting that says so.

    `producer.id.expiration.ms` came in 3.4 (KIP-854); before, the leaders expired it after
    `transactional.id.expiration.ms`. A broker's DescribeConfigs lists every setting it knows, defaults included, so
    one that answered without `producer.id.expiration.ms` is older than 3.4."""
    configs = section(facts, "broker_configs")
    if configs is None:
        ms = DEFAULTS["producer.id.expiration.ms"]
        return ms, (f"broker settings unreadable: assumed producer.id.expiration.ms={ms} (3.4+'s default; a broker "
                    "before 3.4 keeps an idle producer id for transactional.id.expiration.ms, 7 days by default)")
    if any(PRODUCER_ID_EXPIRATION in broker for broker in configs.values()):
        ms = broker_config(facts, PRODUCER_ID_EXPIRATION)
        return ms, f"{PRODUCER_ID_EXPIRATION}={ms}"
    ms = broker_config(facts, "transactional.id.expiration.ms")
    return ms, (f"the brokers do not know {PRODUCER_ID_EXPIRATION} (added in 3.4, KIP-854): before 3.4 a leader "
                f"expires an idle producer id after transactional.id.expiration.ms={ms}")


def section(facts: dict, name: str):
    """A section's data, or None when it could not be read."""
    value = facts.get(name)
    return None if value is None or (isinstance(value, dict) and "error" in value) or isinstance(value, str) \
        else value


def counted_records(facts: dict, committed: dict) -> tuple[int, int] | None:
    """(records before a group's committed offsets, records from them to the end), over all its partitions, as the
    collector counted them read_committed (markers and aborted records left out); None when one was not counted."""
    counts = (section(facts, "group_records") or {}).get("partitions") or {}
    before = after = 0
    for tp, offset in committed.items():
        part = counts.get(tp) or {}
        if str(offset) not in (part.get("before") or {}):
            return None
        before += part["before"][str(offset)]
        after += part["records"] - part["before"][str(offset)]
    return before, after


def read_ms(facts: dict, name: str, now_ms: int) -> int:
    """When a section was read (its own moment, so that a slow reading of the rest counts no idle time), else now."""
    done = (facts.get("section_read_ms") or {}).get(name)
    return min(int(done), now_ms) if isinstance(done, (int, float)) else now_ms


def split_partition(tp: str) -> tuple[str, int]:
    topic, _, p = tp.rpartition("-")
    return topic, int(p)


def streams_client_ids(facts: dict) -> list[str]:
    """Client ids of group members that are Kafka Streams threads, and the ids of KIP-1071 streams groups."""
    out = []
    for gid, g in (section(facts, "groups") or {}).items():
        if str(g.get("type", "")).lower() == "streams":
            out.append(gid)
        out += [m["client_id"] for m in g.get("members") or [] if "-StreamThread-" in (m.get("client_id") or "")]
    return out


# ---------------------------------------------------------------------------------------------------- rules

def offsets_expire(facts: dict, now_ms: int) -> list[Finding]:
    """Empty groups with committed offsets: when the coordinator deletes them, and what a restart then does."""
    groups = section(facts, "groups") or {}
    commits = section(facts, "commit_log")
    group_log = section(facts, "group_log")
    topics = section(facts, "topics") or {}
    offsets = section(facts, "topic_offsets") or {}
    retention_min = broker_config(facts, "offsets.retention.minutes")
    retention_ms = retention_min * 60_000
    sweep_ms = broker_config(facts, "offsets.retention.check.interval.ms")
    findings = []
    for gid, g in groups.items():
        committed = g.get("offsets") or {}
        members = g.get("members")
        if not committed or not (g.get("state") == "Empty" or members == []):
            continue
        kind = str(g.get("type", "classic")).lower()
        kind = kind if kind in ("consumer", "streams") else "classic"   # unknown: the classic bound is the cautious one
        last = {tp: c["commit_ms"] for tp, c in ((commits or {}).get(gid) or {}).items() if tp in committed}
        reread = lag = 0
        windows = []
        for tp, offset in committed.items():
            log = offsets.get(tp) or {}
            if "earliest" in log:
                reread += max(0, offset - max(log["earliest"], 0))
                lag += max(0, log["latest"] - offset)
        records = counted_records(facts, committed)
        if records:
            markers, (reread, lag) = reread + lag - sum(records), records
            rereads_text = (f"re-reads {reread:,} records (counted from log start to committed offset, "
                            "read_committed" + (f"; {markers:,} other offsets hold transaction markers or aborted "
                                                "records: no consumer gets a marker, and only a read_uncommitted one "
                                                "the aborted records)" if markers > 0 else ")"))
        else:
            counting = facts.get("group_records") if isinstance(facts.get("group_records"), dict) else {}
            why = (f" ({str(counting['error'])[:160]})" if "error" in counting else
                   " (the read reached its bound: --timeout, --max-read-mb)" if counting.get("stopped") else "")
            rereads_text = (f"re-reads up to {reread:,} records (offsets from log start to committed offset; not "
                            f"counted{why}: transaction markers and aborted records take offsets too)")
        for topic in sorted({split_partition(tp)[0] for tp in committed}):
            t = topics.get(topic) or {}
            r = t.get("retention_ms")
            if r is None:
                continue
            if r < 0 or r > retention_ms:
                windows.append(f"topic {topic} retention {'forever' if r < 0 else duration_text(r)} > offsets "
                               f"retention {duration_text(retention_ms)}: the records before the committed offsets "
                               "are still there when the offsets go")
            else:
                windows.append(f"topic {topic} retention {duration_text(r)} <= offsets retention "
                               f"{duration_text(retention_ms)}: by then only what the topic still holds is re-read")
        # a classic group's record in __consumer_offsets says when it became Empty (currentStateTimestamp, 2.1+);
        # a group that only ever committed (a standalone consumer's) has no protocol type there, or no record at all
        record = (group_log or {}).get(gid) or {}
        empty_since = record.get("current_state_ms") if g.get("state") == "Empty" else None
        # (only where its commits were read: a group of a partition the bounded read did not finish is unknown)
        standalone = kind == "classic" and group_log is not None and bool(last) and not record.get("protocol_type")
        if kind == "classic" and empty_since and not standalone:
            when_ms = empty_since + retention_ms
        elif last:   # by commit time: each offset one retention after its own last commit, the first one first
            first_commit = min(last.values())
            when_ms = first_commit + retention_ms if kind != "classic" or standalone else max(last.values()) + retention_ms
        else:
            when_ms = None
        if standalone:
            clock = ("a group that only commits (no member ever joined: no protocol type in __consumer_offsets): each "
                     "offset expires at its own last commit + offsets.retention.minutes")
        elif kind == "classic" and empty_since:
            clock = (f"classic group: empty since {stamp(empty_since)} (its metadata record in __consumer_offsets, "
                     "currentStateTimestamp); the clock starts then, expiry at that + offsets.retention.minutes")
        elif kind == "classic":
            clock = ("classic group: the clock starts when the group became empty; with no record of when (its "
                     "metadata record could not be read), this is the earliest it can happen (last commit + "
                     "offsets.retention.minutes)")
        else:
            clock = (f"{kind} group (KIP-848): the clock is each offset's last commit time, expiry at last commit + "
                     "offsets.retention.minutes")
        when = ("when unknown: the commit times in __consumer_offsets could not be read" if when_ms is None else
                f"{'expire in ' + duration_text(when_ms - now_ms) if when_ms > now_ms else 'are due to expire now'}"
                f" if it stays empty (deleted at the coordinator's next sweep, every {duration_text(sweep_ms)})")
        consequence = (f"group {gid}: offsets {when}; on restart `earliest` {rereads_text}, `latest` skips the "
                       f"{lag:,} not yet consumed and all that arrive until the restart"
                       + ("; " + "; ".join(windows) if windows else ""))
        commit_text = ", ".join(f"{tp} @ {stamp(ms)}" for tp, ms in sorted(last.items())[:4]) or "unknown"
        evidence = (f"state {g.get('state')}, {len(members or [])} member(s), committed {short_offsets(committed)}; last "
                    f"commit {commit_text} (from __consumer_offsets); offsets.retention.minutes={retention_min}; "
                    f"{clock}")
        findings.append(Finding("offsets-expire", severity(when_ms, now_ms) if when_ms else "medium", f"group {gid}", evidence,
                                consequence, when_ms, NOTEBOOKS["offsets"], rereads=reread))
    return findings


def transactional_id_expires(facts: dict, now_ms: int) -> list[Finding]:
    """Idle transactional ids: the coordinator forgets them after transactional.id.expiration.ms."""
    txns = section(facts, "transactions") or {}
    log = section(facts, "transaction_log") or {}
    expiration = broker_config(facts, "transactional.id.expiration.ms")
    sweep = broker_config(facts, "transaction.remove.expired.transaction.cleanup.interval.ms")
    idle_after = idle_threshold_ms(expiration)
    streams = streams_client_ids(facts)
    findings = []
    seen_ms = read_ms(facts, "transaction_log", now_ms)
    for tid, t in txns.items():
        record = log.get(tid) or {}
        last = record.get("last_update_ms")
        if t.get("state") not in IDLE_STATES or last is None or seen_ms - last < idle_after:
            continue
        when_ms = last + expiration
        consequence = (f"transactional id {tid} idle for {duration_text(now_ms - last)}: "
                       f"{'expires in ' + duration_text(when_ms - now_ms) if when_ms > now_ms else 'due to expire now'}"
                       f" (next sweep within {duration_text(sweep)}); its producer's next transaction then fails with "
                       "InvalidPidMappingException (INVALID_PRODUCER_ID_MAPPING): abortable on Java clients 2.5-3.9, "
                       "fatal on 4.0+; a Kafka Streams EOS app < 3.8 dies on it (KAFKA-16699)"
                       + (" and this cluster runs Streams apps" if streams else ""))
        evidence = (f"state {t['state']}, producer id {t.get('producer_id')} epoch {t.get('producer_epoch')}, last "
                    f"update {stamp(last)} (from __transaction_state); transactional.id.expiration.ms={expiration}")
        findings.append(Finding("transactional-id-expires", severity(when_ms, now_ms), f"transactional id {tid}",
                                evidence, consequence, when_ms, NOTEBOOKS["txn"]))
    return findings


def producer_id_expires(facts: dict, now_ms: int) -> list[Finding]:
    """Idle idempotent producers: each partition leader forgets them after producer.id.expiration.ms (KIP-854).

    Transactional producers are left to transactional_id_expires (their transactional id holds the producer id).
    """
    producers = section(facts, "producers") or {}
    expiration, setting = producer_id_expiration(facts)
    idle_after = idle_threshold_ms(expiration)
    transactional = {t.get("producer_id") for t in (section(facts, "transactions") or {}).values()}
    transactional |= {t.get("producer_id") for t in (section(facts, "transaction_log") or {}).values()}
    latest: dict[int, tuple[int, list[str]]] = {}     # producer id -> (last write, partitions)
    for tp, states in producers.items():
        if not isinstance(states, list):
            continue
        for p in states:
            pid = p["producer_id"]
            if pid in transactional or p.get("txn_start_offset") is not None:
                continue
            last, tps = latest.get(pid, (0, []))
            latest[pid] = (max(last, p["last_timestamp"]), tps + [tp])
    findings = []
    seen_ms = read_ms(facts, "producers", now_ms)
    for pid, (last, tps) in sorted(latest.items()):
        if last <= 0 or seen_ms - last < idle_after:
            continue
        when_ms = last + expiration
        consequence = (f"producer id {pid} idle for {duration_text(now_ms - last)} on {len(tps)} partition(s): the "
                       f"brokers forget its sequence numbers {'in ' + duration_text(when_ms - now_ms) if when_ms > now_ms else 'now'}"
                       ": its next send is then taken as a new producer's, whatever its sequence number (no error "
                       "since 2.5, KIP-360), so a batch it retries across the gap is no longer deduplicated; this is "
                       "read from Kafka's source, not reproduced by the course")
        evidence = (f"describeProducers: last write {stamp(last)} on {', '.join(tps[:4])}"
                    f"{' ...' if len(tps) > 4 else ''}; {setting}")
        findings.append(Finding("producer-id-expires", severity(when_ms, now_ms), f"producer id {pid}", evidence,
                                consequence, when_ms, ""))   # no notebook reproduces it
    return findings


def quota_on_streams_eos_producer(facts: dict, now_ms: int) -> list[Finding]:
    """A byte-rate quota that throttles a Kafka Streams EOS producer: KAFKA-17455's fencing loop."""
    streams = streams_client_ids(facts)
    findings = []
    for q in section(facts, "quotas") or []:
        entity, rates = q.get("entity") or {}, {k: v for k, v in (q.get("quotas") or {}).items() if k in BYTE_RATES}
        if not rates:
            continue
        client = entity.get("client-id")
        user = entity.get("user")
        if client and client != "<default>" and STREAMS_EOS_PRODUCER.search(client):
            subject, why = f"client id {client}", "the client id is a Kafka Streams EOS producer's"
        elif (client == "<default>" or (client is None and user)) and streams:
            who = "every client id" if client == "<default>" else f"every client of user {user}"
            subject = f"quota {entity_text(entity)}"
            why = f"it applies to {who}, and Streams apps run here ({', '.join(sorted(set(streams))[:3])})"
        else:
            continue
        quota = rates.get("producer_byte_rate")
        rate = produce_rate(facts, entity)
        headroom = quota - rate if quota is not None and rate is not None else None
        consequence = (f"{subject}: when its EOS producer goes over {rates_text(rates)}, the broker throttles it; Streams "
                       "< 3.9.1 (Java clients before the KAFKA-17455 fix) stall past transaction.timeout.ms, get fenced "
                       "(InvalidProducerEpoch -> TaskMigrated) and rebalance, again and again; lesson 03a measured "
                       "3.8.1 and 3.9.0 fenced, 3.9.1 and 4.3.1 clean"
                       + (f"; its Streams producers send {rate:,.0f} B/s now: {headroom:,.0f} B/s of headroom"
                          if headroom is not None else ""))
        evidence = (f"describeClientQuotas: {entity_text(entity)} {rates_text(rates)}; {why}"
                    + (f"; byte-rate {rate:,.0f} B/s (the brokers' Produce metrics, JMX)" if rate is not None else ""))
        findings.append(Finding("quota-on-streams-eos-producer", "high", subject, evidence, consequence, None,
                                NOTEBOOKS["quota"], quota_bytes_s=quota, headroom_bytes_s=headroom))
    return findings


def produce_rate(facts: dict, entity: dict) -> float | None:
    """The highest byte rate the brokers measure (JMX) among the Streams EOS producers a quota entity covers."""
    client, user = entity.get("client-id"), entity.get("user")
    rates = [r.get("byte_rate") for r in section(facts, "produce_rates") or []
             if STREAMS_EOS_PRODUCER.search(r.get("client_id") or "")
             and client in (None, "<default>", r.get("client_id")) and user in (None, "<default>", r.get("user"))]
    rates = [r for r in rates if isinstance(r, (int, float))]
    return max(rates) if rates else None


# Known bugs by Java client version: (id, affected(version tuple), what happens, notebook).
KNOWN_BUGS = [
    ("KAFKA-14624", lambda v: (2, 6, 0) <= v < (3, 4, 1),
     ("stale reads from a cached state store after a standby -> active switch (fixed in 3.4.1 / 3.5.0; notebook 04 "
      "measured it on 3.3.1, not on 3.5.2)"), NOTEBOOKS["standby"]),
    ("KAFKA-17455", lambda v: v < (3, 9, 1),
     ("an EOS producer throttled by a quota stalls and is fenced in a loop (fixed in 3.9.1 / 4.0; lesson 03a measured "
      "3.8.1 and 3.9.0 fenced)"), NOTEBOOKS["quota"]),
    ("KAFKA-16699", lambda v: v < (3, 8, 0),
     ("an idle exactly-once Streams app dies with InvalidPidMappingException when its transactional id expires "
      "(3.8+ recovers)"), NOTEBOOKS["txn"]),
    ("KIP-572", lambda v: v < (2, 8, 0),
     "a broker bounce longer than delivery.timeout.ms kills the stream threads (2.8+ retries until task.timeout.ms)",
     ""),
]


def client_version_bug(facts: dict, now_ms: int) -> list[Finding]:
    """Java client versions (KIP-511, from the broker's socket-server metrics) in a known-bug range."""
    clients = section(facts, "clients") or []
    streams = bool(streams_client_ids(facts))
    versions: dict[str, int] = {}
    for c in clients:
        if c.get("connections", 0) <= 0:
            continue
        name = c.get("name") or ""
        if name == "apache-kafka-java" or name == "unknown":
            key = c.get("version") if name == "apache-kafka-java" else "unknown"
            versions[key] = versions.get(key, 0) + c["connections"]
    findings = []
    for version, connections in sorted(versions.items()):
        if version == "unknown":
            parsed, shown = (2, 3, 99), "an unknown version (no KIP-511: before 2.4)"
        else:
            parsed, shown = version_tuple(version), f"apache-kafka-java {version}"
            if parsed is None:
                continue
        for bug, affected, what, notebook in KNOWN_BUGS:
            if not affected(parsed) or (bug == "KAFKA-14624" and version == "unknown"):
                continue
            scope = ("the cluster runs Kafka Streams apps" if streams else
                     "if this client is a Kafka Streams app (KIP-511 does not tie a version to a client id)")
            consequence = f"{shown}: {what}; {scope}"
            evidence = f"socket-server-metrics clientSoftwareName/Version: {shown}, {connections} connection(s)"
            findings.append(Finding("client-version-bug", "high" if streams else "medium",
                                    f"clients {version} ({bug})", evidence, consequence, None, notebook))
    return findings


def streams_group_without_standbys(facts: dict, now_ms: int) -> list[Finding]:
    """Streams groups (KIP-1071) of two or more instances, with state, that the broker gave no standby task: on that
    protocol standbys are the group's config streams.num.standby.replicas, and the app's own setting is ignored."""
    findings = []
    for gid, g in (section(facts, "groups") or {}).items():
        members, changelogs = g.get("members") or [], g.get("changelogs") or []
        instances = {m.get("process_id") or m.get("client_id") for m in members}
        if str(g.get("type", "")).lower() != "streams" or len(instances) < 2 or not changelogs or \
                any(m.get("standby") for m in members):
            continue
        setting = g.get("standby_replicas") or {}
        configured = (f"{STANDBY_CONFIG}={setting.get('value')} ({setting.get('source')})" if setting else
                      f"{STANDBY_CONFIG} not read ({str(g.get('config_error', 'no value'))[:120]})")
        evidence = (f"streams group protocol, state {g.get('state')}, {len(instances)} instances, "
                    f"{sum(m.get('active') or 0 for m in members)} active and 0 standby tasks; state changelogs "
                    f"{', '.join(changelogs[:3])}{' ...' if len(changelogs) > 3 else ''}; {configured}")
        consequence = (f"group {gid}: no standby copy of its state; a task that moves (an instance stops, fails or "
                       "joins) restores its stores from the changelog before it processes again. On this protocol "
                       "the app's num.standby.replicas is ignored (Kafka Streams logs a WARN): set the group's "
                       f"{STANDBY_CONFIG} (kafka-configs --entity-type groups), at most the brokers' "
                       "group.streams.max.standby.replicas")
        findings.append(Finding("streams-group-without-standbys", "low", f"group {gid}", evidence, consequence, None,
                                NOTEBOOKS["standby"]))
    return findings


RULES = [offsets_expire, transactional_id_expires, producer_id_expires, quota_on_streams_eos_producer,
         client_version_bug, streams_group_without_standbys]


def findings(facts: dict, now_ms: int) -> list[Finding]:
    return [f for rule in RULES for f in rule(facts, now_ms)]
