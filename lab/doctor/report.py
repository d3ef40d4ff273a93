"""What the diagnosis returns: findings (one risk each), what could not be read, the raw facts."""
from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field

from ..errors import LabError
from .checks import CheckStatus

SEVERITIES = ("high", "medium", "low")
COLUMNS = ["severity", "rule", "subject", "when", "evidence", "consequence", "notebook"]


@dataclass(frozen=True)
class Finding:
    rule: str           # offsets-expire, transactional-id-expires, producer-id-expires, quota-on-streams-eos-producer,
    severity: str       # client-version-bug, streams-group-without-standbys; severity high | medium | low
    subject: str        # the group, transactional id, producer, client id or client version it is about
    evidence: str       # the configs and records read
    consequence: str    # what will happen, and when
    when_ms: int | None  # epoch ms when it can start to bite (None: under load, not on a clock)
    notebook: str       # the course notebook that reproduces it ("": none does)
    rereads: int | None = None   # offsets-expire: records a restart with `earliest` re-reads (log start to committed;
                                 # counted read_committed, else the offsets: an upper bound)
    quota_bytes_s: float | None = None      # quota-on-streams-eos-producer: the producer byte-rate quota
    headroom_bytes_s: float | None = None   # ... minus what its producers send now (JMX; None without it)

    def sort_key(self):
        return SEVERITIES.index(self.severity), self.when_ms if self.when_ms is not None else 2 ** 62, self.subject


# The exit codes of `python -m lab doctor` (lab/doctor/cli.py), for a pipeline to tell apart.
EXIT_CLEAN, EXIT_FINDINGS, EXIT_UNREADABLE, EXIT_PARTIAL, EXIT_USAGE = 0, 1, 2, 3, 4


class UsageError(LabError):
    """An argument the doctor cannot take, said before anything is read (EXIT_USAGE on the command line)."""


@dataclass
class Diagnosis:
    findings: list[Finding]
    unreadable: dict[str, str] = field(default_factory=dict)   # section -> what could not be read, what to do
    facts: dict = field(default_factory=dict)
    seconds: float = 0.0
    bootstrap: str = ""
    now_ms: int = 0
    checks: list[CheckStatus] = field(default_factory=list)   # one per check: ran, partial, not run or skipped

    def __post_init__(self):
        self.findings = sorted(self.findings, key=Finding.sort_key)

    @property
    def partial(self) -> bool:
        """Some check could not run, or ran without a section that sharpens it."""
        return not all(c.complete for c in self.checks)

    def at_or_above(self, fail_on: str) -> list[Finding]:
        """The findings of severity `fail_on` or higher (none for "never")."""
        if fail_on == "never":
            return []
        return [f for f in self.findings if SEVERITIES.index(f.severity) <= SEVERITIES.index(fail_on)]

    def exit_code(self, fail_on: str = "never") -> int:
        """1 when a finding reaches `fail_on`, else 3 when the diagnosis was partial, else 0."""
        return EXIT_FINDINGS if self.at_or_above(fail_on) else EXIT_PARTIAL if self.partial else EXIT_CLEAN

    def table(self):
        import pandas as pd
        rows = [{**asdict(f), "when": when_text(f.when_ms, self.now_ms)} for f in self.findings]
        return pd.DataFrame(rows, columns=COLUMNS)

    def text(self, width: int = 110) -> str:
        """A terminal report: one block per finding, then what could not be read."""
        head = (f"lab doctor: {self.bootstrap or 'cluster'} read in {self.seconds:.1f} s: "
                f"{len(self.findings)} finding(s)" + (", partial: some checks could not read all they need"
                                                      if self.partial else ""))
        lines = [head, "=" * min(width, len(head))]
        for f in self.findings:
            lines += [f"[{f.severity.upper():6}] {f.rule}  {f.subject}  ({when_text(f.when_ms, self.now_ms)})",
                      *_wrap("what:     ", f.consequence, width), *_wrap("evidence: ", f.evidence, width),
                      *(["  notebook: " + f.notebook] if f.notebook else []), ""]
        if not self.findings:
            lines += ["No finding: no risk this course reproduces is visible in the cluster's metadata.", ""]
        if self.checks:   # what could not be read is named by the checks that needed it
            lines += ["", "checks:"] + [line for c in self.checks
                                        for line in _wrap("", f"{c.state:8} {c.rule}" + (f": {c.why}" if c.why else ""),
                                                          width)]
        return "\n".join(lines).rstrip() + "\n"

    def as_record(self) -> dict:
        return {"bootstrap": self.bootstrap, "now_ms": self.now_ms, "seconds": round(self.seconds, 3),
                "findings": [asdict(f) for f in self.findings], "unreadable": dict(self.unreadable),
                "checks": [asdict(c) for c in self.checks], "partial": self.partial, "facts": self.facts}


def _wrap(label: str, text: str, width: int) -> list[str]:
    import textwrap
    return textwrap.wrap(text, width, initial_indent="  " + label, subsequent_indent=" " * (2 + len(label)))


def duration_text(ms: float) -> str:
    """3 h 12 min, 45 s, 6 d 23 h: two units at most."""
    s = int(abs(ms) // 1000)
    units = [("d", 86400), ("h", 3600), ("min", 60), ("s", 1)]
    parts = []
    for name, size in units:
        if s >= size or (name == "s" and not parts):
            parts.append(f"{s // size} {name}")
            s %= size
        if len(parts) == 2:
            break
    return " ".join(parts)


def when_text(when_ms: int | None, now_ms: int | None = None) -> str:
    if when_ms is None:
        return "when triggered"   # a quota under load, a client bug when its conditions arise: no clock
    now_ms = now_ms or int(time.time() * 1000)
    at, left = stamp(when_ms), when_ms - now_ms
    return f"in {duration_text(left)} ({at})" if left > 0 else f"due now ({at}, {duration_text(left)} ago)"


# ---------------------------------------------------------------------------------------------------- text helpers (rules)

def version_tuple(version: str) -> tuple[int, int, int] | None:
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", version or "")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) if m else None


def stamp(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def short_offsets(committed: dict, n: int = 4) -> str:
    items = sorted(committed.items())
    return ", ".join(f"{tp}={o}" for tp, o in items[:n]) + (f" (+{len(items) - n} more)" if len(items) > n else "")


def entity_text(entity: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(entity.items()))


def rates_text(rates: dict) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in sorted(rates.items()))
