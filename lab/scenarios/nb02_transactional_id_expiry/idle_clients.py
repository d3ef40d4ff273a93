"""Lesson 02a, an idle id expires: the Python client (lab/apps/eos_app.py) in each mode of PYTHON_MODES (one way of
handling the error each; the run the question asks about has `plain` alone) and a lone Java producer per
kafka-clients version commit, sit idle IDLE_S past the expiration, then get one input each. The Mitigate cell runs
the other modes (without the Java producers, `mitigate_base`); a fix of the expiration runs `plain` alone."""
from __future__ import annotations

from ...toolbox import Run
from ...toolbox.markers import transaction_versions
from ...toolbox.lesson import Lesson
from ...toolbox.params import something_to_run
from . import txn_expiry as chapter
from .exercises import EXERCISES


def clients_in_the_round(p: dict) -> int:
    # one idle round: every Python mode and every Java producer run together
    return len(p["python_modes"]) + len(p["java_clients"])


def run_lesson(lab: Run, p: dict) -> chapter.TxnExpiryResult:
    """The idle round, then which transaction version (KIP-890) its clients' commits ran on: the level the broker
    finalized, and per client whether the coordinator bumped the epoch at each commit (version 2's mark)."""
    result = chapter.idle_rounds(lab, p)
    ids = {f"{lab.id}-{name}".replace(".", "_"): name for name in result.clients}   # as txn_clients._Client.txn_id
    result.transaction_version = transaction_versions(lab, ids.get)
    return result


lesson = Lesson("clients", "An idle transactional id", needs=chapter.needs, body=run_lesson,
                params=chapter.params(*chapter.IDLE, "python_modes", "heartbeat_ms", "heartbeat_misses",
                                      "java_clients"),
                rules=[chapter.at_most_8_clients, something_to_run("python_modes", "java_clients")],
                question=chapter.question, measured_answer=chapter.clients_answer, exercises=EXERCISES["clients"],
                apps=("lab.apps.eos_app", "IdleTransactionalProducer"), spark_audit=True,
                apps_at_once=clients_in_the_round,
                mitigate_base={"java_clients": []})
