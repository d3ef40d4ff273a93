"""A diagnosis in the formats a pipeline shows: JSON, SARIF 2.1.0 (code-scanning annotations) and JUnit XML.

SARIF: one rule per check, one result per finding (its group, transactional id or client as the location); the
checks that could not run are the invocation's notifications. JUnit: one test case per check, failed when the check
found something, skipped when it could not run.
"""
from __future__ import annotations

import hashlib
import json
import time
import xml.etree.ElementTree as ET
from urllib.parse import quote

from .checks import CHECKS
from .report import Diagnosis, when_text

FORMATS = ("text", "json", "sarif", "junit")
LEVELS = {"high": "error", "medium": "warning", "low": "note"}   # severity -> SARIF level
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def render(d: Diagnosis, fmt: str, *, compact: bool = False) -> str:
    """The diagnosis as `fmt` (one of FORMATS); `compact` JSON is one line (for --watch logs)."""
    if fmt == "text":
        return d.text()
    if fmt == "json":
        return json.dumps(d.as_record(), indent=None if compact else 1) + "\n"
    if fmt == "sarif":
        return json.dumps(sarif(d), indent=1) + "\n"
    if fmt == "junit":
        return junit(d)
    raise ValueError(f"no format {fmt!r}: {', '.join(FORMATS)}")


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def _subject_path(subject: str) -> str:
    """'group billing' -> 'kafka/group/billing': where code scanning shows the finding (not a file of the repo)."""
    kind, _, name = subject.partition(" ")
    return "kafka/" + "/".join(quote(part, safe="") for part in (kind, name.replace(" ", "_")) if part)


def sarif(d: Diagnosis) -> dict:
    from importlib.metadata import PackageNotFoundError, version
    try:
        tool_version = version("kafka-failure-lab")
    except PackageNotFoundError:   # run from a checkout that was not installed
        tool_version = "0+unknown"
    rules = [{"id": c.rule, "name": "".join(w.title() for w in c.rule.split("-")),
              "shortDescription": {"text": c.title[0].upper() + c.title[1:]},
              "fullDescription": {"text": f"lab doctor looks for {c.title}, from the cluster's metadata "
                                          "(read-only)."},
              "defaultConfiguration": {"level": "error"}} for c in CHECKS]
    index = {c.rule: i for i, c in enumerate(CHECKS)}
    results = []
    for f in d.findings:
        fingerprint = hashlib.sha256(f"{f.rule}\0{f.subject}".encode()).hexdigest()[:32]
        results.append({
            "ruleId": f.rule, "ruleIndex": index[f.rule], "level": LEVELS[f.severity],
            "message": {"text": f"{f.consequence} ({when_text(f.when_ms, d.now_ms)})"},
            "locations": [{
                "physicalLocation": {"artifactLocation": {"uri": _subject_path(f.subject)}},
                "logicalLocations": [{"name": f.subject, "fullyQualifiedName": f"{d.bootstrap}/{f.subject}",
                                      "kind": "resource"}]}],
            "partialFingerprints": {"ruleSubject/v1": fingerprint},
            "properties": {"severity": f.severity, "evidence": f.evidence, "notebook": f.notebook,
                           **({"when": _iso(f.when_ms)} if f.when_ms else {})}})
    notes = [{"level": "warning" if c.state == "partial" else "error",
              "message": {"text": f"check {c.rule} {c.state}: {c.why}"},
              "descriptor": {"id": c.rule, "index": index[c.rule]}}
             for c in d.checks if not c.complete]
    invocation = {"executionSuccessful": not d.partial, "endTimeUtc": _iso(d.now_ms),
                  "properties": {"bootstrap": d.bootstrap, "seconds": round(d.seconds, 3)}}
    if notes:
        invocation["toolExecutionNotifications"] = notes
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "lab doctor", "version": tool_version, "rules": rules}},
                      "invocations": [invocation], "results": results}]}


def junit(d: Diagnosis) -> str:
    status = {c.rule: c for c in d.checks}
    suite = ET.Element("testsuite", name=f"lab doctor {d.bootstrap}".strip(), timestamp=_iso(d.now_ms),
                       time=f"{d.seconds:.3f}")
    counts = {"tests": 0, "failures": 0, "skipped": 0}
    for check in CHECKS:
        case = ET.SubElement(suite, "testcase", classname="lab.doctor", name=check.rule, time="0")
        counts["tests"] += 1
        found = [f for f in d.findings if f.rule == check.rule]
        state = status.get(check.rule)
        if found:
            counts["failures"] += 1
            worst = found[0].severity   # findings are sorted, the most severe first
            failure = ET.SubElement(case, "failure", type=worst,
                                    message=f"{len(found)} finding(s), the worst {worst}: {found[0].subject}")
            failure.text = "\n\n".join(f"[{f.severity}] {f.subject} ({when_text(f.when_ms, d.now_ms)})\n"
                                       f"{f.consequence}\nevidence: {f.evidence}" for f in found)
        elif state and state.state in ("not run", "skipped"):
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=f"{state.state}: {state.why}")
        if state and state.state == "partial":
            ET.SubElement(case, "system-out").text = f"partial: {state.why}"
    for key, value in counts.items():
        suite.set(key, str(value))
    suite.set("errors", "0")
    root = ET.Element("testsuites", name="lab doctor", **{k: str(v) for k, v in counts.items()}, errors="0")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"

