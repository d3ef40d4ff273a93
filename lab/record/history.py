"""What a run did, written as it happens: one folder of JSON-lines files per run.

Generators and apps under test (other processes included) append to the same
folder: every line is one `os.write` on a file opened with O_APPEND, so lines
from several processes never interleave. The audit (lab.audit) reads it back.

Kinds and their fields (the contract every scenario writes to):
    produced   id, key, seq, topic, partition, offset, [true_value], [aborted]
    read       app, incarnation, group, topic, partition, offset, id
    committed  app, incarnation, group, topic, partition, offset   (next offset to read)
    restart    app, incarnation
Every line also carries run_id, kind and ts (time.time()).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..errors import LabError

KINDS = ("produced", "read", "committed", "restart")


class History:
    """One run's history: `History(folder, run_id).log("read", app=..., offset=...)`."""

    def __init__(self, folder: str | Path, run_id: str):
        if not run_id or not str(run_id).strip():
            raise LabError("A history needs a non-empty run_id (e.g. the scenario name plus a timestamp).")
        self.folder = Path(folder)
        self.run_id = str(run_id)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._fds: dict[str, int] = {}
        self._pid = os.getpid()

    def __repr__(self) -> str:
        return f"History({str(self.folder)!r}, run_id={self.run_id!r})"

    def __getstate__(self):  # picklable across processes: file descriptors are per process
        return {"folder": self.folder, "run_id": self.run_id}

    def __setstate__(self, state):
        self.__init__(state["folder"], state["run_id"])

    # -------------------------------------------------------------- writing
    def path(self, kind: str) -> Path:
        return self.folder / f"{kind}.jsonl"

    def log(self, kind: str, **fields) -> None:
        """Append one line {"run_id", "kind", "ts", **fields} to <folder>/<kind>.jsonl."""
        row = {"run_id": self.run_id, "kind": kind, "ts": time.time(), **fields}
        self._write(kind, (json.dumps(row, default=str) + "\n").encode())

    def log_many(self, kind: str, rows) -> int:
        """Append many rows of one kind in a single write (each row a dict; ts added if missing)."""
        now = time.time()
        lines = [json.dumps({"run_id": self.run_id, "kind": kind, "ts": now, **r}, default=str) for r in rows]
        if lines:
            self._write(kind, ("\n".join(lines) + "\n").encode())
        return len(lines)

    def _write(self, kind: str, data: bytes) -> None:
        if os.getpid() != self._pid:  # forked: do not share the parent's descriptors
            self._fds, self._pid = {}, os.getpid()
        fd = self._fds.get(kind)
        if fd is None:
            fd = self._fds[kind] = os.open(self.path(kind), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        view = memoryview(data)
        while view:  # regular files take the whole write at once; loop only for safety
            view = view[os.write(fd, view):]

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}

    def clear(self) -> None:
        """Remove every history file in the folder (start a run from nothing)."""
        self.close()
        for f in self.folder.glob("*.jsonl"):
            f.unlink()

    # -------------------------------------------------------------- reading
    def kinds(self) -> list[str]:
        """The kinds that have at least one line."""
        return sorted(f.stem for f in self.folder.glob("*.jsonl") if f.stat().st_size > 0)

    def rows(self, kind: str, all_runs: bool = False) -> list[dict]:
        """One kind's lines as dicts, in the order written (this run's only unless all_runs)."""
        path = self.path(kind)
        if not path.exists():
            return []
        rows = []
        with open(path, "rb") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:  # a line cut short by a kill -9: not a record
                    continue
                if all_runs or row.get("run_id") == self.run_id:
                    rows.append(row)
        return rows

    def frame(self, kind: str, all_runs: bool = False):
        """One kind as a pandas DataFrame (this run's lines only unless all_runs).

        Ids stay strings: lines are parsed with json, not guessed by pandas.
        """
        import pandas as pd
        rows = self.rows(kind, all_runs)
        return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["run_id", "kind", "ts"])

    def run_ids(self) -> dict[str, int]:
        """Lines per run_id over every kind: more than one key means mixed runs."""
        counts: dict[str, int] = {}
        for kind in self.kinds():
            for run, n in self.frame(kind, all_runs=True)["run_id"].value_counts().items():
                counts[run] = counts.get(run, 0) + int(n)
        return counts

    def start_time(self) -> float | None:
        """The earliest ts among the first line of each file (files are appended in time order)."""
        firsts = []
        for kind in self.kinds():
            with open(self.path(kind), "rb") as f:
                try:
                    firsts.append(float(json.loads(f.readline())["ts"]))
                except (ValueError, KeyError):
                    continue
        return min(firsts) if firsts else None
