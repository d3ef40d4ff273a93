"""Each chapter-05 lesson's Predict answer, from what its run recorded: the fates of an app that meets a record it
cannot take, the sets of runs the questions' choices name, and the functions that find the measured choice."""
from __future__ import annotations

from ...toolbox.predict import choice_table, labels, which

# Crash points where records processed since the last commit are in flight, so at-least-once redoes them.
IN_FLIGHT = ("before_read", "during_processing", "after_send_before_commit")
# A Failing outcome: the app stopped, a restart carried it past the record.
CARRIED_ON = "app stopped once, then carried on after a restart"

# What an app does with the record it cannot take, by Failing.outcome (fate, the answer key of the exercises and the
# tests): stuck, carried on after one restart, dropped, kept aside, clean. An app that stops and is restarted into the
# same failure, and a thread replaced into it, are one fate: stuck.
FATES = ("it is stuck: the same record fails again at every attempt (each new thread, each restart)",
         "it stops once; restarted, it carries on past that record",
         "it keeps going, without that record",
         "it keeps going, and that record is kept aside where someone can find it",
         "it keeps going: Kafka Streams retries that record until it goes through")

# The Predict questions: each choice names a set of runs (05a: crash points under at-least-once that wrote
# duplicates; 05b, 05d: runs that got the app past the record), and the run's answer is the choice whose set is the
# one measured.
ALOS_POINTS = ("before_read", "during_processing", "after_send_before_commit", "after_commit")
DUPLICATE_POINTS = choice_table((("none of them", ()),
                                 ("only after_send_before_commit", ("after_send_before_commit",)),
                                 ("during_processing and after_send_before_commit",
                                  ("during_processing", "after_send_before_commit")),
                                 ("before_read, during_processing and after_send_before_commit", IN_FLIGHT),
                                 ("all four", ALOS_POINTS)))
HANDLER_RUNS = ("shutdown_client", "replace_thread", "continue")
GOT_PAST = choice_table((("none of them", ()),
                         ("only continue", ("continue",)),
                         ("replace_thread and continue", ("replace_thread", "continue")),
                         ("shutdown_client and continue", ("shutdown_client", "continue")),
                         ("all three", HANDLER_RUNS)))
# 05d's three runs: Kafka's default handler and CONTINUE under at-least-once, CONTINUE under exactly-once
REFUSED_RUNS = (("default", "at_least_once"), ("continue", "at_least_once"), ("continue", "exactly_once_v2"))
REFUSED_PAST = choice_table((("none of them", ()),
                             ("only CONTINUE under at_least_once", (REFUSED_RUNS[1],)),
                             ("CONTINUE under both guarantees", REFUSED_RUNS[1:]),
                             ("all three", REFUSED_RUNS)))
# 05c: which of version 2's inputs come out under CONTINUE
SCHEMA_FATES = ("none: it is stuck at the first input whose key has old state, again at every attempt",
                "all but the first input of each key that has old state",
                "only the inputs of keys without old state: every input of a key that has old state is dropped",
                "all of them, but each key that has old state counts again from zero",
                "all of them, each key's count carrying on from version 1's")
DUPLICATE_ANSWERS, HANDLER_ANSWERS, REFUSED_ANSWERS = map(labels, (DUPLICATE_POINTS, GOT_PAST, REFUSED_PAST))


def fate(outcome: str, dropped: int = 0) -> str:
    """A Failing.outcome in FATES' words. A clean run that dropped records on purpose (the deserialization handler
    skipping a malformed input) kept going without that record."""
    clean = FATES[2] if dropped else FATES[4]
    for start, answer in (("crash loop", FATES[0]), (CARRIED_ON, FATES[1]), ("app stopped", FATES[0]),
                          ("records dropped", FATES[2]), ("clean: ", FATES[3]), ("clean", clean)):
        if outcome.startswith(start):
            return answer
    raise ValueError(outcome)


def got_past(outcome: str) -> bool:
    """Whether an app got past the record it could not take, to the inputs behind it: any fate but stuck."""
    return fate(outcome) != FATES[0]


# This run's answer to each lesson's Predict question, from what it recorded (None: it did not measure it).
def output_answer(record: dict, p: dict) -> str | None:
    """05a: the crash points at which the at-least-once app wrote duplicates (None: not all four ran and crashed)."""
    runs = {c["crash_point"]: c for c in record["crashes"].values() if c["guarantee"] == "at_least_once"}
    if not all(point in runs and runs[point]["crashed"] for point in ALOS_POINTS):
        return None
    return which({point for point in ALOS_POINTS if runs[point]["duplicates"]}, DUPLICATE_POINTS)


def handler_answer(record: dict, p: dict) -> str | None:
    """05b: which of shutdown_client, replace_thread and continue got the app past the poison record (None: not
    all three ran)."""
    runs = record["handlers"]
    if not all(h in runs for h in HANDLER_RUNS):
        return None
    return which({h for h in HANDLER_RUNS if got_past(runs[h]["outcome"])}, GOT_PAST)


def refused_answer(record: dict, p: dict) -> str | None:
    """05d: which of Kafka's default handler and CONTINUE under at-least-once, and CONTINUE under exactly-once, got
    the app past the refused record (`route` answers CONTINUE too, after its note: it stands in for `continue`).
    None: not all three ran."""
    found = {}
    for label, run in record["refused"].items():
        handler = label.split(" · ")[0]
        for h in (handler, "continue" if handler == "route" else None):
            if (h, run["guarantee"]) in REFUSED_RUNS:
                found.setdefault((h, run["guarantee"]), run)
    if not all(r in found for r in REFUSED_RUNS):
        return None
    return which({r for r in REFUSED_RUNS if past_with_the_rest(found[r])}, REFUSED_PAST)


def past_with_the_rest(run: dict) -> bool:
    """05d: past the refused record with the inputs behind it: not stuck, and no output missing but that one. Under
    exactly-once a CONTINUE may go on, restarted, without the outputs of a whole failed transaction: measured on
    4.3.1 (57 of 150 lost), beside runs where it stopped at every restart."""
    return got_past(run["outcome"]) and (run.get("lost") or 0) <= 1


def schema_answer(record: dict, p: dict) -> str | None:
    """05c: which of version 2's inputs came out under CONTINUE (None: continue did not run). Dropped inputs
    against the keys they belong to tell one dropped input per key from every input of a key."""
    run = record["schema"].get("continue")
    if run is None:
        return None
    if not got_past(run["outcome"]):
        return SCHEMA_FATES[0]
    if run["lost"]:
        return SCHEMA_FATES[1] if run["lost"] <= run["lost_keys"] else SCHEMA_FATES[2]
    return SCHEMA_FATES[3] if run["wrong_values"] else SCHEMA_FATES[4]
