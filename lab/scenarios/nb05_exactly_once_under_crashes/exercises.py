"""Chapter 05's exercises, one per lesson, each on a case its run did not show: 05a how many inputs a crash writes
twice at another rate and commit timing, 05b what each handler does with a record the deserializer cannot read,
05c how many inputs come out when only some keys have old state, 05d the smallest limit that takes the refused
record. Each check judges by the mechanism, and by what this run measured where it ran the case.
`printed` gives what a learner could copy from the notebook above the exercise: each check refuses it."""
from __future__ import annotations

from ...errors import LabError
from ...toolbox.result import Exercise, called, count, expect, number, shown
from .streams_app import HANDLERS
from .. import written_fix


# ---------------------------------------------------------------- 05a: how many inputs a crash writes twice

# The case: an at-least-once app at a rate and commit interval this lesson's runs did not use, halted this long
# after its last commit.
TWICE = {"rate": 200, "commit_interval_ms": 5000, "since_commit_ms": 1200}
_SINCE_S, _INTERVAL_S = TWICE["since_commit_ms"] / 1000, TWICE["commit_interval_ms"] / 1000


def _interval_worth() -> int:
    """What the app reads in a whole commit interval: the most a halt just before a commit redoes."""
    return round(TWICE["rate"] * _INTERVAL_S)


def _twice(result) -> int:
    """The exercise: what was processed since the last commit, which the restart processes and sends again."""
    return round(TWICE["rate"] * _SINCE_S)


def _alos_rows(result) -> list:
    return [c for c in result.crashes.values() if c.guarantee == "at_least_once" and c.m["crashed"]]


def _twice_looked_up(result) -> int:
    """The look-up: the most this run wrote twice (else a whole commit interval's worth)."""
    return max((c.m["duplicates"] for c in _alos_rows(result)), default=_interval_worth())


def _check_twice(result, answer) -> None:
    given, right, interval = number(answer, "the inputs written twice"), _twice(result), _interval_worth()
    near = lambda x, to: abs(x - to) <= 0.05 * to  # noqa: E731   "about": 5 % either way
    expect(given > 0, "under at-least-once an output is visible as soon as it is sent, and the input offsets are "
           "committed later: what happens to the outputs sent since the last commit when the restart reads on?")
    looked_up = {c.m["duplicates"] for c in _alos_rows(result)}
    expect(given not in looked_up or near(given, right), f"{given:g} is what this run wrote twice, at its own rate "
           f"and its own time since a commit: work it out for {TWICE['rate']} records/s and {_SINCE_S:g} s")
    expect(not near(given, interval), f"{given:g} is a whole commit interval's worth; the last commit came "
           f"{_SINCE_S:g} s before the halt: what had the app processed since then?")
    expect(given <= interval, f"{given:g} is more than the app reads in a whole commit interval: mind the units "
           "(records per second, seconds)")
    expect(near(given, right), f"{given:g} is not what the app processed between its last commit and the halt: the "
           "restart reads on from the last committed offsets, and at-least-once had already sent the outputs of "
           "everything processed since")
    rate, twice = result.params.get("rate"), [c.m["duplicates"] for c in _alos_rows(result) if c.m["duplicates"]]
    if rate and twice:   # the same rule, read backwards on this run's own rows
        print(f"In this run, at {rate:g} records/s, at-least-once wrote {', '.join(map(str, twice))} inputs twice: "
              f"by the same rule its halts came about {', '.join(f'{d / rate:.2f}' for d in twice)} s after a commit.")


def _twice_printed(result) -> list:
    """The table's counts and the run's parameters, as a learner could copy them."""
    p = result.params
    rows = [c.m for c in result.crashes.values()]
    return shown(*(m.get(k) for m in rows for k in ("duplicates", "overcount", "restored", "aborted_visible",
                                                              "commit_markers", "aborts_after")),
                          *(p.get(k) for k in ("crash_at", "records", "rate", "commit_interval_ms")))


# ---------------------------------------------------------------- 05b: what each handler does with which record

FATES = ("stuck", "dropped", "kept aside")
RECORDS = ("poison", "malformed")   # the processor throws on it; the input's deserializer throws on it


def fate(handler, record):
    # only the handler that Kafka Streams asks for that failure gets the app past it; Kafka's defaults fail
    covered = handler in ("continue", "dead_letter") if record == "poison" else handler == "deserialization"
    if not covered:
        return "stuck"
    return "kept aside" if handler == "dead_letter" else "dropped"


def _fate_by_handler(handler, record):
    """The tempting rule: a handler does the same with any record the app cannot take, whatever threw."""
    return {"continue": "dropped", "dead_letter": "kept aside", "deserialization": "dropped"}.get(handler, "stuck")


def _measured_fate(run) -> str | None:
    """What a handler run did with its record, in FATES' words (None: none of them, judged by the mechanism)."""
    outcome = run.outcome
    if "carried on" in outcome:
        return None
    if outcome.startswith(("crash loop", "app stopped")):
        return "stuck"
    if outcome == "records dropped" or (outcome == "clean" and run.m.get("dropped_records")):
        return "dropped"
    return "kept aside" if outcome.startswith("clean: ") else None


def _record_of(handler: str) -> str:
    return "malformed" if handler == "deserialization" else "poison"


def _measured_fates(result) -> dict:
    measured = {(h, _record_of(h)): _measured_fate(run) for h, run in result.handlers.items()}
    return {case: f for case, f in measured.items() if f is not None}


def _check_fate(result, fn) -> None:
    measured = _measured_fates(result)
    others = {(h, rec): fate(h, rec) for h in HANDLERS for rec in RECORDS if (h, rec) not in measured}
    for (handler, record), truth in {**measured, **others}.items():   # this run's rows first, then the others
        call = f"fate({handler!r}, {record!r})"
        given = called(fn, call, handler, record)
        expect(given in FATES, f"{call} returned {given!r}: return one of {', '.join(map(repr, FATES))}")
        where = "in this run it was" if (handler, record) in measured else "by the mechanism it is"
        expect(given == truth, f"{call} = {given!r}, but {where} {truth!r}: which handler does Kafka Streams ask "
               "when the processor throws, which when the deserializer does, and what do the others answer?")


def _fate_printed(result) -> list:
    """Look-ups of the handler table (and of the handler the Mitigate cell names), for the cases it lacks None,
    "stuck", or the fate of the same handler's row whatever the record; and that handler's name."""
    measured = _measured_fates(result)
    mitigate = written_fix("05b").get("handlers", [])
    shown = {**measured, **{(h, "poison"): "kept aside" for h in mitigate if h == "dead_letter"}}
    by_handler = {h: f for (h, _), f in shown.items()}
    return [lambda h, rec: measured.get((h, rec)),
            lambda h, rec: shown.get((h, rec), "stuck"),
            lambda h, rec: by_handler.get(h, "stuck"),
            *mitigate]


# ---------------------------------------------------------------- 05c: how many inputs come out under CONTINUE

# The case: version 1's state holds only some of the keys version 2 then reads (in this lesson's runs, all of them).
SOME_OLD = {"keys": 10, "old_keys": 6, "per_key": 40}


def _come_out(result) -> int:
    """The exercise: only the keys without old state; every input of a key with old state is dropped."""
    return (SOME_OLD["keys"] - SOME_OLD["old_keys"]) * SOME_OLD["per_key"]


def _schema_looked_up(result) -> int:
    """The look-up: what came out of the continue run (else all but one input of each old key)."""
    run = result.schema.get("continue")
    return run.m["outputs"] if run is not None else SOME_OLD["keys"] * SOME_OLD["per_key"] - SOME_OLD["old_keys"]


def _check_come_out(result, answer) -> None:
    given = count(answer, "inputs")
    keys, old, per_key = SOME_OLD["keys"], SOME_OLD["old_keys"], SOME_OLD["per_key"]
    total, right = keys * per_key, _come_out(result)
    expect(given > 0, "version 2 writes the state of a key version 1 never counted in its own format: those keys "
           "have nothing old to read")
    shown = {f.m.get(k) for f in result.schema.values() for k in ("outputs", "produced", "lost", "dropped_records")}
    expect(given not in shown or given == right, f"{given} is a count of this run, in which version 1 had counted "
           f"every key: here it counted {old} of {keys}")
    expect(given != total, f"all {total} come out only if version 2 can read every key's state: which keys hold "
           "version 1's format?")
    expect(given != total - old, "a key's first input fails to read its state; CONTINUE drops it and writes nothing "
           "back: what does the key's next input read?")
    expect(given != old * per_key, f"{given} inputs belong to keys with old state: are they the ones that come out?")
    expect(given == right, "which keys have state in version 1's format, and what becomes of each input of such a "
           "key under CONTINUE?")
    run = result.schema.get("continue")
    if run is not None:
        print(f"Measured in this run: under `continue`, {run.m['lost']} of version 2's inputs were dropped, over "
              f"{run.m['lost_keys']} keys with old state.")


def _schema_printed(result) -> list:
    p = result.params
    return [*shown(*(f.m.get(k) for f in result.schema.values()
                              for k in ("outputs", "produced", "lost", "dropped_records", "migrated")),
                            *(p.get(k) for k in ("keys", "records"))),
            *written_fix("05c").get("schema_modes", [])]


# ---------------------------------------------------------------- 05d: the smallest limit for the refused record

BATCH_HEADER = 61   # bytes of a record batch's header (format v2), before its records


def _refused_value_bytes(result) -> int:
    """The refused output's value in bytes, as the app made it, from any production-error run."""
    if not result.refused:
        raise LabError("this lesson was not run in this run (PRODUCTION_HANDLERS and OTHER_GUARANTEE_HANDLERS are empty): "
                       "give some of them and run the lesson again")
    sizes = [f.m["output_bytes"] for f in result.refused.values() if f.m.get("output_bytes")]
    if not sizes:
        raise LabError("no run of this lesson got as far as the large record: see the lesson's verdict")
    return max(sizes)


def _smallest_limit(result) -> int:
    """The exercise: a max.message.bytes just above one batch holding the refused record alone."""
    return _refused_value_bytes(result) + BATCH_HEADER + 40


def _check_smallest_limit(result, answer) -> None:
    value = _refused_value_bytes(result)
    number(answer, "a number of bytes")
    expect(answer > value, f"{answer:,.0f} bytes is not even the record's value ({value:,} bytes, the `output bytes` "
           "column): the broker would refuse it again")
    expect(answer >= value + BATCH_HEADER, "the broker checks the record batch, not the value: the value, its key, "
           "the record's own framing (a few bytes of lengths and deltas) and the batch's header (61 bytes)")
    expect(answer <= value + 1024, f"{answer:,.0f} bytes lets it through, but it is not near the smallest limit: "
           "what does one batch holding only this record weigh?")
    print(f"Try it: `fixed = lesson.mitigate(result, output_max_bytes={int(answer)})` runs Kafka's default "
          "handler again with that limit.")


def _refused_printed(result) -> list:
    """The `output bytes` column, the topic's limit and padding of the parameters, the Mitigate cell's limit."""
    p = result.params
    return shown(*(f.m.get("output_bytes") for f in result.refused.values()),
                          p.get("output_max_bytes"), p.get("refuse_bytes"),
                          written_fix("05d").get("output_max_bytes"))


# Each lesson's exercise, by lesson
EXERCISES = {
    "crashes": Exercise(
        check=_check_twice,
        solution=_twice,
        why="At-least-once sends each output as soon as its record is processed, and commits the input offsets "
            f"only every `commit.interval.ms`. A halt {_SINCE_S:g} s after the last commit leaves {_SINCE_S:g} s of "
            "processed records whose offsets were never committed: the restarted app reads them again and sends "
            f"their outputs a second time. At {TWICE['rate']} records/s that is {TWICE['rate']} × {_SINCE_S:g} = "
            f"{_twice(None)} inputs. The commit interval only bounds it: a halt just before a commit would redo "
            f"almost {_INTERVAL_S:g} s, {_interval_worth():,} inputs. (A producer that lingers before it sends may "
            f"not have sent the last few yet: those come out once, so {_twice(None)} is the most.)",
        wrong=_twice_looked_up,
        closer="Count what the app had processed between its last commit and the halt, from the rate and the time "
               "since that commit; the commit interval is not the time that counts here.",
        printed=_twice_printed,
    ),
    "handlers": Exercise(
        check=_check_fate,
        solution=lambda r: fate,
        why="Kafka Streams asks a different handler for each failure. When the processor throws, it asks the "
            "processing exception handler (3.9+): `continue` answers CONTINUE and drops the record, `dead_letter` "
            "also writes it to the dead-letter topic (4.2+). When the input's deserializer throws, it asks the "
            "deserialization exception handler: `deserialization` answers CONTINUE and skips it. A handler not set "
            "is Kafka's default, which fails: the stream thread dies, and a restart or a new thread meets the same "
            "record again. So `continue` and `dead_letter` are stuck on a malformed input, and `deserialization` "
            "on a poison record.",
        wrong=lambda r: _fate_by_handler,
        closer="A handler only answers for the failure it is asked about. For each pair, find which handler Kafka "
               "Streams asks (the processor's exception or the deserializer's), whether that one is set, and what "
               "Kafka's default does when it is not.",
        printed=_fate_printed,
    ),
    "schema": Exercise(
        check=_check_come_out,
        solution=_come_out,
        why="Version 2's store is restored byte for byte from the changelog, so a key version 1 counted holds "
            "`{\"count\": n}`, and every read of it fails. CONTINUE drops the record and writes nothing back, so the "
            f"next input of that key fails the same way: every input of the {SOME_OLD['old_keys']} old keys is "
            f"dropped. The {SOME_OLD['keys'] - SOME_OLD['old_keys']} keys version 1 never counted have no state; "
            "version 2 writes theirs in its own format, and each of their inputs comes out: "
            f"{SOME_OLD['keys'] - SOME_OLD['old_keys']} × {SOME_OLD['per_key']} = {_come_out(None)}.",
        wrong=_schema_looked_up,
        closer="Split the keys in two: those whose stored state version 1 wrote, and those it never counted. What "
               "does version 2 read for each input of each group, and does CONTINUE ever change what is stored?",
        printed=_schema_printed,
    ),
    "refused": Exercise(
        check=_check_smallest_limit,
        solution=_smallest_limit,
        why="The broker compares `max.message.bytes` with the record batch it receives, after compression: the "
            "batch's header (61 bytes), then each record with its framing (a length, attributes, timestamp and "
            "offset deltas, the key's and the value's lengths: about a dozen bytes), its key and its value. The "
            "producer puts a record larger than `batch.size` in a batch of its own, and splits a refused batch of "
            "several records to try each alone; so the smallest limit that lets the record through is the value "
            "(the `output bytes` column) plus its key plus about 75 bytes. The solution rounds up a little.",
        wrong=_refused_value_bytes,   # the value alone: the batch around it is forgotten
        closer="The limit applies to what the producer sends the broker: a record batch, here holding this one "
               "record. Which parts of that batch are not the value, and roughly how many bytes does each add?",
        printed=_refused_printed,
    ),
}
