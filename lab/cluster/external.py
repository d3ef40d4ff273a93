"""A cluster the lab does not own: KAFKA_LAB_BOOTSTRAP, the broker of docker-compose.yml.

The lessons write to it (topics, consumer groups, transactions), so KAFKA_LAB_BOOTSTRAP alone never sends them to
a cluster someone may care about: the lab takes only the Compose broker, known by its cluster id, or a cluster whose
id the user names in KAFKA_LAB_WRITABLE_CLUSTER_ID. Reading a cluster (notebook 08's *Your cluster* cell,
`lab doctor`) takes the address as an argument and never comes here.
"""
from __future__ import annotations

import os
import time

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, ConfigResource

from ..config import BOOTSTRAP_ENV, CLIENT_PROPERTIES_ENV, COMPOSE_CLUSTER_ID, WRITABLE_CLUSTER_ENV
from ..connection import explain_failure, kafka_config
from ..errors import LabError


ANSWER_S = 10   # how long a cluster that does not answer is waited for


def _refused(error) -> bool:
    """An error no wait mends: the cluster refused the client's password or certificate."""
    return isinstance(error, KafkaError) and (error.code() in (KafkaError._AUTHENTICATION, KafkaError._SSL)
                                              or "SSL handshake failed" in error.str())


def writable(cluster_id: str | None) -> bool:
    """The lessons may write to this cluster: the Compose broker, or the one the user named."""
    return bool(cluster_id) and cluster_id in (COMPOSE_CLUSTER_ID, os.environ.get(WRITABLE_CLUSTER_ENV))


class ExternalCluster:
    owns_broker = False   # no kill, restart, broker log, quotas or static configs from the lab

    def __init__(self, bootstrap: str, version: str = "external"):
        self.bootstrap, self.version = bootstrap, version
        errors: list = []   # librdkafka reports authentication failures here, the call itself only times out
        admin = AdminClient(kafka_config(bootstrap, {"log_level": 0, "error_cb": errors.append}))
        deadline = time.monotonic() + ANSWER_S
        while True:   # in one-second slices: a refused password or certificate is said at once, not after 10 s
            try:
                md = admin.list_topics(timeout=1)
                break
            except Exception as exc:
                admin.poll(0.2)   # serves error_cb: the reason (authentication) behind the timeout
                if time.monotonic() >= deadline or any(_refused(e) for e in errors):
                    why = explain_failure(f"listing topics ({BOOTSTRAP_ENV})", bootstrap, [*errors, exc])
                    start = "start it (e.g. `docker compose up -d`), " if "does not answer" in str(why) else ""
                    raise LabError(f"{why} To go on, {start}fix {CLIENT_PROPERTIES_ENV}, or unset {BOOTSTRAP_ENV} to "
                                   f"use the embedded broker.") from None
        self.node_ids = sorted(md.brokers)
        self.cluster_id = md.cluster_id
        if not writable(self.cluster_id):
            raise LabError(
                f"{BOOTSTRAP_ENV}={bootstrap} is a cluster the lab did not start (cluster id {self.cluster_id}), not "
                f"the broker of docker-compose.yml. The lessons create topics, consumer groups and transactions, so "
                f"they do not run there unless you say so. To run them on the lab's own broker, unset "
                f"{BOOTSTRAP_ENV}. To diagnose that cluster read-only, use notebook 08's *Your cluster* cell or "
                f"`make doctor BOOTSTRAP={bootstrap}`. If it is a throwaway cluster of yours, set "
                f"{WRITABLE_CLUSTER_ENV}={self.cluster_id}.")
        self.broker_config: dict = {}

    running = True

    def fits(self, nodes: int, version: str, broker_config: dict, extra_listener: str | None = None) -> bool:
        return True

    def start(self, timeout: float = 60):
        return self

    def stop(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def admin(self) -> AdminClient:
        return AdminClient(kafka_config(self.bootstrap, {"log_level": 0}))

    def require_broker_config(self, wanted: dict) -> None:
        """The lab cannot change static broker configs here; check the cluster already has them."""
        if not wanted:
            return
        resource = ConfigResource(ConfigResource.Type.BROKER, str(self.node_ids[0]))
        admin = self.admin()  # keep the client alive until the future resolves
        actual = admin.describe_configs([resource])[resource].result(timeout=10)
        wrong = {k: (str(v), actual[k].value if k in actual else None)
                 for k, v in wanted.items() if k not in actual or actual[k].value != str(v)}
        if wrong:
            lines = ", ".join(f"{k}={want} (cluster has {have})" for k, (want, have) in wrong.items())
            raise LabError(f"This scenario needs broker configs the external cluster at {self.bootstrap} "
                           f"does not have: {lines}. Static broker configs cannot be changed from the lab: "
                           f"restart that cluster with them, or unset {BOOTSTRAP_ENV} to use the embedded broker.")

    def _cannot(self, what: str):
        raise LabError(f"This scenario needs to {what}, which the lab can only do on the embedded "
                       f"broker it launches. Unset {BOOTSTRAP_ENV} to use it.")

    def kill_node(self, node_id):
        self._cannot("kill a broker")

    stop_node = start_node = restart_node = kill_node

    def grep_log(self, pattern, node_id=None):
        self._cannot("read the broker's log")

    log_path = grep_log

    def transaction_markers(self, *topics):
        self._cannot("read the broker's log segments (its transaction markers)")

    def set_quota(self, client_id, **rates):
        self._cannot("set client quotas (use kafka-configs.sh on your cluster)")

    remove_quota = quotas = set_quota
