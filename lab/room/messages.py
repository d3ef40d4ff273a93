"""What a learner's lab may send to the room, and the lessons the room knows.

A message is one JSON object, checked against SCHEMA before anything is stored: the room keeps nothing that is not
one of these three kinds, for one of the course's lessons, within these sizes.
"""
from __future__ import annotations

import json
import math
from functools import lru_cache

import jsonschema

MAX_BYTES = 8 * 1024   # one message; a run's is under 2 KB
HEX32 = {"type": "string", "pattern": "^[0-9a-f]{32}$", "maxLength": 32}   # $ also matches before a "\n"
TEXT = {"type": "string", "maxLength": 200}
SHORT = {"type": "string", "maxLength": 40}
ANSWER = {"anyOf": [TEXT, {"type": "number"}, {"type": "null"}]}

_COMMON = {"v": {"const": 1}, "id": HEX32, "laptop": HEX32, "lesson": {"type": "string", "maxLength": 64}}


def _kind(kind: str, fields: dict, required: list[str]) -> dict:
    return {"type": "object", "additionalProperties": False,
            "properties": {**_COMMON, "kind": {"const": kind}, **fields},
            "required": [*_COMMON, "kind", *required]}


SCHEMA = {"oneOf": [
    # the prediction as the run took it (None: the learner made none)
    _kind("vote", {"answer": ANSWER,
                   "choices": {"anyOf": [{"type": "array", "items": TEXT, "maxItems": 10}, {"type": "null"}]}},
          ["answer", "choices"]),
    # the run's end: what it measured, whether the failure reproduced, its headline figures, where it ran
    _kind("run", {"reproduced": {"type": "boolean"}, "measured": ANSWER,
                  "right": {"type": ["boolean", "null"]},
                  "seconds": {"type": "number", "minimum": 0, "maximum": 86400},
                  "figures": {"type": "object", "maxProperties": 40,
                              "propertyNames": {"pattern": "^[a-z0-9_]{1,64}$"},
                              "additionalProperties": {"type": ["number", "boolean"]}},
                  "platform": {"type": "object", "additionalProperties": False,
                               "properties": {k: SHORT for k in ("os", "arch", "python", "java")},
                               "required": ["os", "arch", "python", "java"]}},
          ["reproduced", "measured", "right", "seconds", "figures", "platform"]),
    # one answer to an exercise: right or not, after how many wrong answers (each one got a hint)
    _kind("exercise", {"number": {"type": "integer", "minimum": 1, "maximum": 20},
                       "right": {"type": "boolean"}, "hints": {"type": "integer", "minimum": 0, "maximum": 100}},
          ["number", "right", "hints"]),
]}
_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


class BadMessage(ValueError):
    """A message the room refuses: its reason, for the 400 the sender gets."""


MOST_DIGITS = 15   # a whole number a float holds exactly; a longer one is no measurement of a lesson


def _no_constant(name: str):
    raise BadMessage(f"{name} is not a number the room takes")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadMessage(f"{text[:20]} is not a number the room takes")
    return value


def _short_int(text: str) -> int:
    if len(text.lstrip("-")) > MOST_DIGITS:
        raise BadMessage(f"a whole number of more than {MOST_DIGITS} digits is not one the room takes")
    return int(text)


def parse(body: bytes) -> dict:
    """A request's body as a checked message; BadMessage (why) otherwise. NaN, Infinity, 1e400 and 4,000-digit
    numbers, which Python's JSON reader takes, are refused: the summary would carry them into JSON no browser reads,
    or fail on them."""
    try:
        message = json.loads(body, parse_constant=_no_constant, parse_float=_finite, parse_int=_short_int)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise BadMessage("not JSON, or nested too deep") from exc
    return check(message)


def check(message) -> dict:
    """The message when it is one the room takes; BadMessage (why) otherwise."""
    if not isinstance(message, dict):
        raise BadMessage("a message is one JSON object")
    kind = message.get("kind")
    if kind not in ("vote", "run", "exercise"):
        raise BadMessage("kind must be vote, run or exercise")
    errors = sorted(_VALIDATOR.iter_errors(message), key=lambda e: len(e.path))
    if errors:
        # oneOf reports every branch: name the first problem of the message's own kind
        own = [e for err in errors for e in (err.context or [err])
               if e.schema_path and e.schema_path[0] == ("vote", "run", "exercise").index(kind)] or errors
        where = "/".join(str(p) for p in own[0].absolute_path) or "message"
        raise BadMessage(f"{where}: {own[0].message[:200]}")
    if message["lesson"] not in lessons():
        raise BadMessage("lesson: not a lesson of this course")
    return message


@lru_cache(maxsize=1)
def lessons() -> dict:
    """{lesson key: {number, title, question, choices}} in course order: the question as the notebook's defaults
    ask it, which labels the page's bars."""
    from ..scenarios import COURSE
    known = {}
    for entry in COURSE:
        lesson = entry.lesson
        asked = lesson.question(entry.defaults())
        known[lesson.key] = {"number": entry.number, "title": lesson.title, "question": asked[0],
                             "choices": list(asked[1]) if asked[1] else None}
    return known
