"""What notebook 00's check measured (SetupResult, the lesson's outcome): the versions that ran, the counts of the
copy under each isolation level, its end offset and the audit's verdict; the verdict, the table and the explanation
computed from them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...audit import Verdict
from ...toolbox import Result

DUPLICATES = 1   # the copier writes the first id twice, in the transaction it commits


@dataclass
class SetupResult(Result):
    java: int = 0
    java_from: str = ""
    kafka_version: str = ""
    bootstrap: str = ""
    produced: int = 0
    consumed: int = 0
    spark_committed: int = 0
    spark_uncommitted: int = 0
    aborted_injected: int = 0
    duplicates_injected: int = DUPLICATES
    copy_end_offset: int = 0     # the copy's partition end offset: the offset its next record would get
    audit: Verdict | None = None

    title: ClassVar[str] = "Setup check: what ran, and when"
    not_reproduced: ClassVar[str] = "in this run the audit did not find exactly the faults the check plants"

    @property
    def counts(self) -> dict:
        return self.audit.counts

    @property
    def failed(self) -> bool:
        """The faults under study (the injected ones) were reproduced and the audit saw exactly them."""
        return (self.counts.get("duplicate") == self.duplicates_injected
                and self.counts.get("aborted_read") == self.aborted_injected and self.counts.get("lost") == 0)

    def verdict(self) -> str:
        c = self.counts
        seen = f"duplicate={c.get('duplicate')}, aborted_read={c.get('aborted_read')}, lost={c.get('lost')}"
        if self.failed:
            return (f"the audit found exactly the injected faults ({seen}); read_committed "
                    f"{self.spark_committed}, read_uncommitted {self.spark_uncommitted}")
        return (f"the audit found {seen}, but {self.duplicates_injected} duplicate and "
                f"{self.aborted_injected} aborted records were injected: something is off in the setup")

    def record_fields(self) -> dict:
        return {"java": self.java, "java_from": self.java_from, "kafka_version": self.kafka_version,
                "produced": self.produced, "consumed": self.consumed, "spark_committed": self.spark_committed,
                "spark_uncommitted": self.spark_uncommitted, "aborted_injected": self.aborted_injected,
                "duplicates_injected": self.duplicates_injected, "copy_end_offset": self.copy_end_offset,
                "audit": self.audit.as_dict()}

    def table(self):
        return self.audit.table()

    def explain(self) -> str:
        c, m, a = self.counts, self.produced, self.aborted_injected
        gap = self.spark_uncommitted - self.spark_committed
        aborted = (f"* `read_uncommitted − read_committed` = {gap}: the {a} records of the aborted transaction. "
                   "The broker keeps them in the log, marked by an abort control record; only the isolation "
                   "level decides whether a reader sees them." if a else
                   f"* `read_uncommitted − read_committed` = {gap}: no transaction was aborted (`ABORTED = 0`), "
                   "so both isolation levels read the same copy.")
        return "\n".join([
            f"* the copy's partition ends at offset {self.copy_end_offset}, yet no reader sees more than "
            f"{self.spark_uncommitted} records: ending a transaction writes a control record (a marker) into the "
            "log too. It takes an offset, and no consumer ever receives it.",
            aborted,
            f"* `duplicate = {c.get('duplicate')}`: the id written twice in a committed transaction. "
            "Transactions make a *write* atomic; they do not make the same input idempotent.",
            f"* `lost = {c.get('lost')}`: " + (f"every one of the {m} produced ids is in the committed copy."
                                                if not c.get("lost") else "produced ids are missing from the copy."),
        ])
