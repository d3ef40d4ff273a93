"""Chapter 05's analysis of a run's history, pure functions (no broker, no JVM; tests/test_eos_crashes.py):
the output against the generator's truth (measure: duplicates, lost, wrong counts, aborted records; sections
2 and 5), the app's evidence lines by incarnation (app_events) and a failing app's failure rate (loop_rate;
sections 6 and 7).
"""
from __future__ import annotations

from ...toolbox import lab_lines


def measure(produced, committed: list, uncommitted: list, counts: list) -> dict:
    """What a read_committed reader got against the truth, and what read_uncommitted saw besides.

    produced: the generator's rows (id, key, true_value); committed / uncommitted: output rows (id, key,
    value, partition, offset); counts: committed count updates (key, count, partition, offset).
    """
    truth = {r["id"]: r for r in produced}
    ids = [r.get("id") for r in committed]
    seen, dup = set(), 0
    for i in ids:
        dup += i in seen
        seen.add(i)
    wrong = sum(1 for r in committed if r.get("id") in truth and truth[r["id"]].get("true_value") is not None
                and r.get("value") != truth[r["id"]]["true_value"])
    final_true: dict = {}
    for r in produced:
        if r.get("true_value") is not None:
            final_true[r["key"]] = max(final_true.get(r["key"], 0), int(r["true_value"]))
    final: dict = {}
    for r in sorted(counts, key=lambda r: (r["partition"], r["offset"])):   # one key lives in one partition
        final[r.get("key")] = r.get("count")
    over = sum(max(0, (final.get(k) or 0) - v) for k, v in final_true.items())
    under = sum(max(0, v - (final.get(k) or 0)) for k, v in final_true.items())
    committed_at = {(r["partition"], r["offset"]) for r in committed}
    aborted = [r for r in uncommitted if (r["partition"], r["offset"]) not in committed_at]
    return {"produced": len(truth), "outputs": len(committed), "duplicates": dup,
            "lost": len(set(truth) - seen), "lost_ids": sorted(set(truth) - seen, key=_id_order)[:20],
            "lost_all": set(truth) - seen, "lost_keys": len({truth[i].get("key") for i in set(truth) - seen}),
            "wrong_values": wrong, "overcount": over, "undercount": under,
            "aborted_visible": len(aborted), "aborted_ids": sorted({r.get("id") for r in aborted}, key=_id_order),
            "aborted_first_ts": min((r["kafka_ts"] for r in aborted), default=None),
            "aborted_last_ts": max((r["kafka_ts"] for r in aborted), default=None)}


def _id_order(i):
    tail = str(i).rsplit("-", 1)[-1]
    return (0, int(tail)) if tail.isdigit() else (1, str(i))


def app_events(source) -> dict:
    """The app's evidence lines, by kind and incarnation: crash, states, restores, commits, handler calls."""
    rows = lab_lines(source)
    by = lambda kind: [r for r in rows if r.get("kind") == kind]  # noqa: E731
    running = {}
    for r in by("state"):
        if r.get("to") == "RUNNING":
            running.setdefault(r["incarnation"], r["ts"])
    restores: dict = {}
    for r in by("restore_start") + by("restore_end"):
        inc = restores.setdefault(r["incarnation"], {"start": None, "end": None, "restored": 0})
        if r["kind"] == "restore_start":
            inc["start"] = r["ts"] if inc["start"] is None else min(inc["start"], r["ts"])
        else:
            inc["end"] = r["ts"] if inc["end"] is None else max(inc["end"], r["ts"])
            inc["restored"] += int(r.get("restored", 0))
    dropped = [r.get("dropped_records", 0) for r in by("metrics")]
    return {"crash": (by("crash") or [None])[0], "running": running, "restores": restores,
            "commits": by("commit"), "uncaught": by("uncaught"), "exits": by("exit"), "migrated": by("migrated"),
            "dropped_records": max(dropped, default=0), "started": by("started"), "padded": by("padded"),
            "refused": by("refused")}


def loop_rate(times: list, seconds: float | None = None) -> float | None:
    """Failures per minute over the span they cover (None for fewer than two)."""
    if len(times) < 2:
        return None
    span = seconds or (max(times) - min(times))
    return round(60 * (len(times) - 1) / span, 1) if span > 0 else None
