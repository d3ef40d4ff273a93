"""What the diagnosis returns: findings (one risk each), what could not be read, the raw facts."""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

SEVERITIES = ("high", "medium", "low")
COLUMNS = ["severity", "rule", "subject", "when", "evidence", "consequence", "notebook"]


@dataclass(frozen=True)
class Finding:
    rule: str           # offsets-expire, transactional-id-expires, producer-id-expires, quota-on-streams-eos-producer,
    severity: str       # client-version-bug; severity high | medium | low
    subject: str        # the group, transactional id, producer, client id or client version it is about
    evidence: str       # the configs and records read
    consequence: str    # what will happen, and when
    when_ms: int | None  # epoch ms when it can start to bite (None: under load, not on a clock)
    notebook: str       # the course notebook that reproduces it ("": none does)
    rereads: int | None = None   # offsets-expire: records a restart with `earliest` re-reads (log start to committed)

    def sort_key(self):
        return SEVERITIES.index(self.severity), self.when_ms if self.when_ms is not None else 2 ** 62, self.subject


@dataclass
class Diagnosis:
    findings: list[Finding]
    unreadable: dict[str, str] = field(default_factory=dict)   # section -> what could not be read, what to do
    facts: dict = field(default_factory=dict)
    seconds: float = 0.0
    bootstrap: str = ""
    now_ms: int = 0

    def __post_init__(self):
        self.findings = sorted(self.findings, key=Finding.sort_key)

    def table(self):
        import pandas as pd
        rows = [{**asdict(f), "when": when_text(f.when_ms, self.now_ms)} for f in self.findings]
        return pd.DataFrame(rows, columns=COLUMNS)

    def text(self, width: int = 110) -> str:
        """A terminal report: one block per finding, then what could not be read."""
        head = (f"lab doctor: {self.bootstrap or 'cluster'} read in {self.seconds:.1f} s: "
                f"{len(self.findings)} finding(s)" + (f", {len(self.unreadable)} section(s) unreadable"
                                                      if self.unreadable else ""))
        lines = [head, "=" * min(width, len(head))]
        for f in self.findings:
            lines += [f"[{f.severity.upper():6}] {f.rule}  {f.subject}  ({when_text(f.when_ms, self.now_ms)})",
                      *_wrap("what:     ", f.consequence, width), *_wrap("evidence: ", f.evidence, width),
                      *(["  notebook: " + f.notebook] if f.notebook else []), ""]
        if not self.findings:
            lines += ["No finding: no risk this course reproduces is visible in the cluster's metadata.", ""]
        for section, why in self.unreadable.items():
            lines += _wrap(f"could not read {section}: ", why, width)
        return "\n".join(lines).rstrip() + "\n"

    def as_record(self) -> dict:
        return {"bootstrap": self.bootstrap, "now_ms": self.now_ms, "seconds": round(self.seconds, 3),
                "findings": [asdict(f) for f in self.findings], "unreadable": dict(self.unreadable),
                "facts": self.facts}


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
    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(when_ms / 1000))
    left = when_ms - now_ms
    return f"in {duration_text(left)} ({stamp})" if left > 0 else f"due now ({stamp}, {duration_text(left)} ago)"
