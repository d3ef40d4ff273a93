"""Lesson 02b, Kafka Streams before and after 3.8: WordCountDemo under exactly-once, one idle round per version,
idle IDLE_S past the expiration, then one input."""
from __future__ import annotations

from ...toolbox.lesson import Lesson
from ...toolbox.params import something_to_run
from . import txn_expiry as chapter
from .exercises import EXERCISES

lesson = Lesson("streams", "An idle Kafka Streams app", needs=chapter.needs, body=chapter.idle_rounds,
                params=chapter.params(*chapter.IDLE, "streams_versions"), rules=[something_to_run("streams_versions")],
                question=chapter.streams_question, measured_answer=chapter.streams_answer,
                exercises=EXERCISES["streams"], apps=("WordCountDemo",),
                spark_audit=True)
