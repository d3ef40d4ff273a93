"""Lesson 03a, an app over its quota: the app under study (STREAMS_VERSION) beside its comparisons and
variants (lineup), each under its own producer byte-rate quota, its output audited on Spark, and each client
version's bytecode read for the KAFKA-17455 fix. Its key, "over_quota", names its runs: it is printed while a run
goes, so it names the setting, not what happens."""
from __future__ import annotations

from ...audit import audit
from ...toolbox import Run
from ...toolbox.markers import transaction_versions
from ...toolbox.lesson import Lesson
from ...record.history import History
from . import quota_fencing as chapter
from .exercises import EXERCISES
from .quota_fencing_report import QuotaResult, fencing_answer


def run_lesson(lab: Run, p: dict) -> QuotaResult:
    chapter.own_broker(lab)
    roles = chapter.lineup(p)
    main = chapter.measure(lab, list(roles.values()), p["duration_s"], audit=True)
    aborted = audit(History(lab.folder / "history", lab.id), bootstrap=lab.bootstrap, kinds=["aborted_read"],
                    output_topic=f"{main.tags[roles['app'].name]}-out", allow_empty=True).counts["aborted_read"]
    return QuotaResult("over_quota", p, lab.id, lab.timeline, roles=roles, main=main,
                       fix_in_bytecode=chapter.fixes(roles.values()), aborted_output_records=aborted,
                       cluster=lab.cluster, transaction_version=_transaction_version(lab, roles, main.tags))


def _transaction_version(lab: Run, roles: dict, tags: dict) -> dict | None:
    """Which transaction version (KIP-890) each app's commits ran on: the level the broker finalized, and per role
    whether the coordinator bumped the epoch at each commit (version 2's mark). Kafka Streams' transactional ids
    start with the application id, the librdkafka loop's with its group: both are the app's tag."""
    return transaction_versions(lab, lambda txn_id: next(
        (role for role, v in roles.items() if txn_id.startswith(f"{tags[v.name]}-")), None))


def apps_in_the_lineup(p: dict) -> int:
    # the app under study, its comparisons and its variants run side by side, each under its own quota
    return len(chapter.lineup(p))


# The Mitigate step runs the app under study again, alone, with the learner's setting.
lesson = Lesson("over_quota", "An app over its quota", needs=chapter.needs, body=run_lesson,
                params=chapter.params("streams_version", "other_version", "quota", *chapter.LOAD, "duration_s",
                                      "compare", "variants", "headroom", "variant_request_timeout_ms",
                                      "variant_transaction_timeout_ms"),
                question=chapter.question, measured_answer=fencing_answer, exercises=EXERCISES["over_quota"],
                apps=("QuotaStateApp", "lab.apps.quota_eos_loop"), spark_audit=True, apps_at_once=apps_in_the_lineup,
                mitigate_base={"compare": [], "variants": []})
