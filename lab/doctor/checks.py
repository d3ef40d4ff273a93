"""Which checks ran: each rule needs some sections of what the doctor read; one it could not read names the right
(or the flag) it takes, in one line.

A check is `ran` when every section it uses was read, `partial` when it ran without one that sharpens it (the commit
times, the broker settings), `not run` when a section it cannot do without is missing, and `skipped` when it was not
asked for (client versions without --jmx). A diagnosis with a partial or unrun check is partial.
"""
from __future__ import annotations

from dataclasses import dataclass

# What a principal needs to read each section, from Kafka's authorizer (KafkaApis, 4.3).
NEEDS = {
    "broker_configs": "DESCRIBE_CONFIGS on the cluster",
    "topics": "DESCRIBE and DESCRIBE_CONFIGS on the topics",
    "topic_offsets": "DESCRIBE on the topics",
    "groups": "DESCRIBE on the groups (and on the cluster, to list them all)",
    "transactions": "DESCRIBE on the transactional ids",
    "producers": "READ on the topics (DescribeProducers)",
    "quotas": "DESCRIBE_CONFIGS on the cluster",
    "commit_log": "READ on the topic __consumer_offsets",
    "group_log": "READ on the topic __consumer_offsets",
    "transaction_log": "READ on the topic __transaction_state",
    "clients": "--jmx host:port (the brokers' JMX port)",
    "produce_rates": "--jmx host:port (the brokers' JMX port)",
}
# The request a section needs that older brokers do not answer (UnsupportedVersionException), from Kafka's source.
TOO_OLD = {
    "transactions": "the brokers are too old: ListTransactions and DescribeTransactions came in Kafka 3.0 (KIP-664)",
    "producers": "the brokers are too old: DescribeProducers came in Kafka 2.8 (KIP-664)",
    "quotas": "the brokers are too old: DescribeClientQuotas came in Kafka 2.6 (KIP-546)",
}
# When a section failed for another reason than a right.
OTHER_CAUSES = [
    ("Timeout", "the cluster did not answer in time: raise --timeout, or check the brokers' health"),
    ("took longer", "the read ran out of time: raise --timeout"),
    ("SecurityException", "JMX needs credentials: give a JMX endpoint without auth on a trusted network"),
    ("ConnectException", "nothing answers on that JMX port: check --jmx host:port (the broker's JMX_PORT)"),
]
LOGS = {"commit_log": "__consumer_offsets", "group_log": "__consumer_offsets", "transaction_log": "__transaction_state"}


@dataclass(frozen=True)
class Check:
    rule: str                    # the rule's id, as findings name it
    title: str                   # what it looks for, in one line
    needs: tuple[str, ...]       # sections it cannot run without
    sharpens: tuple[str, ...]    # sections it runs without, less precisely


CHECKS = [
    Check("offsets-expire", "committed offsets of empty groups that the coordinator will delete",
          ("groups",), ("commit_log", "broker_configs", "topics", "topic_offsets")),
    Check("transactional-id-expires", "idle transactional ids that the transaction coordinator will forget",
          ("transactions", "transaction_log"), ("broker_configs",)),
    Check("producer-id-expires", "idle idempotent producers whose state the partition leaders will drop",
          ("producers",), ("transactions", "transaction_log", "broker_configs")),
    Check("quota-on-streams-eos-producer", "byte-rate quotas that can throttle a Kafka Streams exactly-once producer",
          ("quotas",), ("groups",)),
    Check("client-version-bug", "Java client versions with a bug this course reproduces",
          ("clients",), ()),
    Check("streams-group-without-standbys", "Kafka Streams groups (KIP-1071) of several instances with state and no "
          "standby task", ("groups",), ()),
]


@dataclass(frozen=True)
class CheckStatus:
    rule: str
    state: str          # ran | partial | not run | skipped
    why: str = ""       # one line: what is missing and what it needs

    @property
    def complete(self) -> bool:
        return self.state in ("ran", "skipped")


def statuses(facts: dict) -> list[CheckStatus]:
    """One status per check, from what the collector could and could not read."""
    out = []
    for check in CHECKS:
        if check.rule == "client-version-bug" and not isinstance(facts.get("clients"), (list, dict)):   # no --jmx
            out.append(CheckStatus(check.rule, "skipped", "client versions need " + NEEDS["clients"]))
            continue
        missing = [s for s in check.needs if problem(facts, s)]
        blurred = [s for s in check.sharpens if problem(facts, s)]
        state = "not run" if missing else "partial" if blurred else "ran"
        why = "; ".join(dict.fromkeys(problem(facts, s) for s in missing + blurred))
        out.append(CheckStatus(check.rule, state, why))
    return out


def problem(facts: dict, name: str) -> str:
    """'' when the section was read whole, else one line: what is missing and what it takes."""
    value = facts.get(name)
    if isinstance(value, dict) and "error" in value:
        return f"{name}: {cause(value['error'], name)}"
    if value is None or isinstance(value, str):
        return f"{name} not read: needs {NEEDS[name]}"
    if name == "clients" and value == []:
        return ("clients: the brokers' JMX shows no client software versions (KIP-511's connection metrics came in "
                "Kafka 2.5)")
    if name in ("producers", "groups") and isinstance(value, dict):   # entries that failed on their own
        failed = [v.get("error") or v.get("offsets_error") for v in value.values()
                  if isinstance(v, dict) and ("error" in v or "offsets_error" in v)]
        if failed:
            return f"{name} ({len(failed)} of {len(value)}): {cause(failed[0], name)}"
    return _incomplete_read(facts, name)


def cause(error, name: str) -> str:
    first = str(error).splitlines()[0]
    if "Authoriz" in first:
        return f"needs {NEEDS[name]} ({first.split(':')[0]})"
    if "UnsupportedVersion" in first:
        return TOO_OLD.get(name, "the brokers are too old for this request")
    return next((why for word, why in OTHER_CAUSES if word in first), first[:200])


def _incomplete_read(facts: dict, name: str) -> str:
    """An internal topic read that stopped at its bound (time or bytes): how far it got."""
    read = (facts.get("log_reads") or {}).get(LOGS.get(name, ""))
    if not read or not read.get("stopped"):
        return ""
    done, asked = len(read.get("complete") or []), len(read.get("partitions") or [])
    bound = (f"{read.get('bound_ms', 0) / 1000:g} s (--timeout)" if read["stopped"] == "time"
             else f"{read.get('bound_bytes', 0) / 2**20:g} MB (--max-read-mb)")
    return (f"{LOGS[name]} read {done} of {asked} partition(s) ({read.get('bytes', 0) / 2**20:.1f} MB) before its "
            f"bound of {bound}: {read.get('unknown_count', 0)} id(s) unknown; raise the bound")
