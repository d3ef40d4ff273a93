"""The shared experiment toolbox every scenario is written on.

- run.Run          one experiment: id, folder, t0, cluster, children, waits, countdowns, topics
- params.Spec      a scenario's parameters: validation, panel controls, docs
- evidence         `LAB {json}` lines from programs under test; one log-timestamp rule
- timeline         one event schema, one figure, one colour vocabulary
- result.Result    what every scenario returns: as_record(), table(), figure(), verdict()
- panel.panel      the tune-and-re-run panel, generated from a Spec
- lesson.Lesson    one lesson of a lesson notebook: spec, needs, run, question, Mitigate step, exercises
- predict.predict  a lesson's Predict step: a question before the run, its answer beside the measurement
- admin            where topics and consumer groups stand: end offsets, committed offsets (read, set),
                   topic configs, transactional ids the coordinator expired
- streaming        Spark jobs: a checkpointed Structured Streaming query, audits side by side
- apps             programs under test stopped together, Kafka Streams clients watched until RUNNING
- checks           parameter checks run before anything starts (a version resolved and compiled against)
- consume          reading a topic: one reader (read_committed or not, to the end, until done, kept open),
                   or a consumer group
- markers          the broker's transaction markers (cluster.transaction_markers) around a fault, on a timeline
"""
from ..record.evidence import emit, grep, java_events, lab_lines, log_time
from .params import Param, Spec, something_to_run
from .result import Exercise, Result
from .run import Run, RunStopped, Task, prune
from .timeline import TONES, Event, Timeline

__all__ = ["Run", "RunStopped", "Task", "prune", "Param", "Spec", "something_to_run", "Result", "Exercise", "Event", "Timeline", "TONES",
           "emit", "grep", "java_events", "lab_lines", "log_time"]
