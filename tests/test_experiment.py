"""The experiment toolbox (lab.toolbox): pure parts without a broker, then Run against a real one."""
import calendar
import os
import shutil
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from lab.errors import LabError
from lab.toolbox import (TONES, Exercise, Param, Result, Run, RunStopped, Spec, Task, Timeline, grep, java_events,
                            lab_lines, log_time)
from lab.record import evidence
from lab.toolbox import run as run_module
from lab.toolbox.result import expect
from lab.runtime.processes import wait_until

ROOT = Path(__file__).resolve().parent.parent

SPEC = Spec(
    Param("downtime_s", 90, "how long the apps stay down", lo=1, hi=3600, unit="s",
          why="offsets.retention.minutes is at least 1"),
    Param("reset", "earliest", "auto.offset.reset after expiry", choices=("earliest", "latest")),
    Param("ratio", 1.0, "load over the quota", lo=0.1, hi=3.0),
    Param("limit", None, "how many records", lo=1, none="no limit"),
    Param("caching", True, "cache the store"),
    rules=(lambda p: "RATIO above 2 needs CACHING" if p["ratio"] > 2 and not p["caching"] else None,),
)


# ---------------------------------------------------------------- params

def test_spec_fills_defaults_and_coerces():
    assert SPEC.validate() == {"downtime_s": 90, "reset": "earliest", "ratio": 1.0, "limit": None, "caching": True}
    p = SPEC.validate(downtime_s=20.0, ratio=1, limit=5)
    assert p["downtime_s"] == 20 and type(p["downtime_s"]) is int and type(p["ratio"]) is float
    assert SPEC.validate(downtime_s=1)["downtime_s"] == 1 and SPEC.validate(downtime_s=3600)["downtime_s"] == 3600


@pytest.mark.parametrize("values, message", [
    ({"downtime_s": 0}, r"DOWNTIME_S=0 is outside 1\.\.3600 s: offsets.retention.minutes is at least 1"),
    ({"downtime_s": 2.5}, r"DOWNTIME_S=2.5 must be int \(how long the apps stay down\)"),
    ({"downtime_s": True}, r"DOWNTIME_S=True must be int"),
    ({"reset": "none"}, r"RESET='none' is not one of \['earliest', 'latest'\]"),
    ({"ratio": "x"}, r"RATIO='x' must be float \(load over the quota\)"),
    ({"limit": 0}, r"LIMIT=0(\.0)? is outside >= 1"),
    ({"caching": "yes"}, r"CACHING='yes' must be bool"),
    ({"downtime_s": None}, r"DOWNTIME_S needs a value"),
    ({"ratio": 2.5, "caching": False}, r"RATIO above 2 needs CACHING"),
])
def test_refusals_name_the_parameter_its_range_and_why(values, message):
    with pytest.raises(LabError, match=message):
        SPEC.validate(**values)


def test_unknown_names_get_a_suggestion():
    with pytest.raises(LabError, match=r"'downtime' \(did you mean 'downtime_s'\?\).*takes \['downtime_s'"):
        SPEC.validate(downtime=5)
    with pytest.raises(LabError, match=r"Unknown parameter\(s\) 'zzz';"):
        SPEC.validate(zzz=1)


def test_none_is_allowed_only_where_it_means_something():
    assert SPEC.validate(limit=None)["limit"] is None


def test_from_notebook_reads_upper_case_names_it_knows():
    namespace = {"DOWNTIME_S": 30, "RESET": "latest", "INTERACTIVE": False, "downtime_s": 999, "In": []}
    assert SPEC.from_notebook(namespace) == {**SPEC.defaults, "downtime_s": 30, "reset": "latest"}
    with pytest.raises(LabError, match="DOWNTIME_S=0"):
        SPEC.from_notebook({"DOWNTIME_S": 0})


def test_markdown_table_lists_every_parameter():
    table = SPEC.markdown().splitlines()
    assert table[0] == "| parameter | default | range | meaning |" and len(table) == 2 + len(SPEC.params)
    assert "| `DOWNTIME_S` | `90` | 1..3600 s | how long the apps stay down |" in table
    assert "| `RESET` | `'earliest'` | earliest, latest | auto.offset.reset after expiry |" in table
    assert "| `LIMIT` | `None` | >= 1 | how many records (None: no limit) |" in table


def test_param_check_hook_refuses():
    def no_99(v):
        if v == 99:
            raise LabError("Maven Central has no 99")
    spec = Spec(Param("n", 1, "n", check=no_99))
    with pytest.raises(LabError, match="no 99"):
        spec.validate(n=99)


def test_a_list_param_refuses_a_repeated_value():
    spec = Spec(Param("sizes", [1, 2], "sizes, one round each", lo=1, hi=10),
                Param("modes", ["a", "b"], "modes, side by side", choices=("a", "b", "c")))
    assert spec.validate(sizes="3, 1", modes=["c"]) == {"sizes": [3, 1], "modes": ["c"]}
    with pytest.raises(LabError, match=r"^SIZES=\[2, 5, 2\] names a value twice\.$"):
        spec.validate(sizes=[2, 5, 2])
    with pytest.raises(LabError, match=r"^MODES=\['a', 'a'\] names a value twice\.$"):
        spec.validate(modes="a, a")     # text from a panel too


# ---------------------------------------------------------------- evidence

STAMP = calendar.timegm((2026, 11, 23, 12, 3, 14)) + 0.123


def test_lab_lines_parses_python_and_log4j_prefixed_lines_and_skips_cut_ones(tmp_path):
    text = "\n".join([
        'LAB {"kind": "commit", "ts": 1.5, "offset": 3}',
        '[2026-11-23 12:03:14,123] INFO [main] LAB {"kind": "read", "ts": 2.0, "id": "a"} (IdleProducer)',
        'LAB {"kind": "read", "ts": 3.0, "id": "b"',            # cut short by a kill -9
        'noise LAB not json', 'LAB ["not", "a", "dict"]', "",
        'LAB {"kind": "read", "ts": 4.0, "id": "c"}',
    ])
    rows = lab_lines(text)
    assert [r["kind"] for r in rows] == ["commit", "read", "read"]
    assert lab_lines(text, kind="read", id="c") == [{"kind": "read", "ts": 4.0, "id": "c"}]
    log = tmp_path / "app.log"
    log.write_text(text)
    assert lab_lines(log) == rows
    assert lab_lines(tmp_path / "missing.log") == []


def test_emit_writes_a_line_lab_lines_reads(capsys):
    row = evidence.emit("restart", app="a1", incarnation=2)
    assert lab_lines(capsys.readouterr().out) == [row]


@pytest.mark.parametrize("line", [
    "[2026-11-23 12:03:14,123] INFO started (kafka.server.KafkaServer)",      # log4j 1 pattern
    "[2026-11-23T12:03:14,123] INFO started (KafkaRaftServer)",               # log4j2 %d{ISO8601}
    "[2026-11-23 12:03:14.123] WARN x",
])
def test_log_time_reads_both_stamp_formats_as_utc(line):
    assert log_time(line) == pytest.approx(STAMP)


def test_log_time_without_a_stamp_is_none():
    assert log_time("\tat org.apache.kafka.Foo.bar(Foo.java:1)") is None
    assert log_time("LAB {}") is None


LOG = textwrap.dedent("""\
    [2026-11-23 12:03:14,123] INFO [t1] State transition from RUNNING to REBALANCING (KafkaStreams)
    [2026-11-23 12:03:20,000] ERROR [t1] Encountered the following exception during processing and the registered exception handler opted to SHUTDOWN_CLIENT (StreamThread)
    org.apache.kafka.common.errors.InvalidPidMappingException: The producer attempted to use a producer id which is not currently assigned to its transactional id.
    \tat org.apache.kafka.clients.producer.internals.Sender.run(Sender.java:1)
    Caused by: org.apache.kafka.common.errors.ProducerFencedException: fenced
    [2026-11-23 12:03:25,500] INFO [t1] Request joining group due to: rebalance (ConsumerCoordinator)
    an unstamped line about ProducerFencedException that is not a stack trace
""")


def test_grep_with_since_and_stack_trace_lines(tmp_path):
    log = tmp_path / "streams.log"
    log.write_text(LOG)
    found = grep(log, r"Exception")
    # stack-trace (and other unstamped) lines take the last stamp seen
    assert [round(ts - STAMP, 3) for ts, _ in found] == [5.877, 5.877, 11.377]
    assert found[0][1].startswith("org.apache.kafka.common.errors.InvalidPidMappingException")
    assert grep(log, r"State transition|joining", since=STAMP + 1) == [
        (STAMP + 11.377, LOG.splitlines()[5])]
    assert grep(log, r"nothing like this") == []


def test_java_events_classifies_lines_most_specific_first(tmp_path):
    log = tmp_path / "streams.log"
    log.write_text(LOG)
    events = java_events(log)
    assert [e["kind"] for e in events] == ["state transition", "thread died", "InvalidPidMappingException",
                                           "ProducerFencedException", "rebalance"]
    assert events[0]["level"] == "INFO" and events[1]["level"] == "ERROR" and events[2]["level"] == "TRACE"
    assert events[2]["ts"] == pytest.approx(STAMP + 5.877)
    assert java_events(LOG, patterns=[("joins", r"joining group")])[0]["kind"] == "joins"


def test_java_program_reads_its_log_through_evidence(tmp_path):
    from lab.runtime.programs import JavaProgram
    program = JavaProgram("app", "3.9.1", "Main", [], folder=tmp_path)
    program.log_path.write_text(LOG + '[2026-11-23 12:03:26,000] INFO [main] LAB {"kind": "stale", "ts": 1} (W)\n')
    assert [e["kind"] for e in program.events()][:2] == ["state transition", "thread died"]
    assert program.events()[0]["program"] == "app" and program.events()[0]["version"] == "3.9.1"
    assert program.lab_lines(kind="stale") == [{"kind": "stale", "ts": 1}]
    program.stop()   # never started: nothing to stop, no error


# ---------------------------------------------------------------- timeline

def test_timeline_add_band_frame_and_figure_with_every_tone():
    t0 = 1000.0
    tl = Timeline(t0)
    for i, tone in enumerate(TONES):
        tl.add("app-1" if i % 2 else "app-2", f"{tone} event", t0 + i, tone=tone, detail="evidence line")
    tl.add("broker", "down", t0 + 1, end=t0 + 4, tone="fault")
    tl.band("idle", t0 + 2, t0 + 5)
    assert tl.first("broker").end == 4.0 and tl.first(kind="failure event").t == 0.0
    assert len(tl.rows(lane="app-1")) == len(TONES) // 2
    tl.add("control", "commit", t0 + 11, tone="control")
    tl.band("retention", t0 + 10, t0 + 12, tone="wait")
    assert tl.first("control").t == 11.0 and [b.t for b in tl.bands] == [2.0, 10.0]
    frame = tl.frame()
    assert list(frame.columns) == ["t", "lane", "kind", "detail", "tone", "end"]
    assert len(frame) == len(TONES) + 2 and frame["t"].is_monotonic_increasing
    fig = tl.figure("every tone")
    assert fig.layout.title.text == "every tone"
    colours = {trace.marker.color for trace in fig.data}
    assert colours == set(TONES.values())
    assert len(fig.layout.shapes) == 2   # the two bands


def test_timeline_refuses_an_unknown_tone():
    with pytest.raises(ValueError, match="tone 'red' is not one of"):
        Timeline(0).add("x", "y", 1, tone="red")


# ---------------------------------------------------------------- tasks, waits, stop (no broker needed)

def test_task_hands_its_exception_back():
    def boom():
        raise RuntimeError("the background producer failed")
    task = Task("producer", boom, (), {})
    with pytest.raises(RuntimeError, match="background producer failed"):
        task.result(5)
    assert Task("ok", lambda x: x * 2, (21,), {}).result(5) == 42
    slow = Task("slow", time.sleep, (2,), {})
    with pytest.raises(LabError, match="slow did not finish within 0 s"):
        slow.result(0.1)


def test_wait_returns_the_value_and_its_timeout_names_what_and_the_last_evidence():
    run = Run("unit", progress=False)
    assert run.wait(lambda: 7, 1, "a seven") == 7
    seen = iter(range(100))
    with pytest.raises(LabError, match=r"Timed out after 1 s waiting for app-1 to commit.*Last seen: \d+ commits"):
        run.wait(lambda: False, 1, "app-1 to commit", evidence=lambda: f"{next(seen)} commits", interval=0.05)


def test_a_failed_background_task_ends_the_wait():
    run = Run("unit", progress=False)
    task = run.background(lambda: 1 / 0, name="divider")
    task._thread.join(5)
    with pytest.raises(ZeroDivisionError):
        run.wait(lambda: False, 5, "never")


def test_stop_makes_the_next_wait_raise_run_stopped():
    run = Run("unit", progress=False)
    threading_stop = Task("stopper", lambda: (time.sleep(0.3), run.stop()), (), {})
    with pytest.raises(RunStopped, match=f"run {run.id} was stopped"):
        run.wait(lambda: False, 30, "something that never comes")
    threading_stop.result(5)
    with pytest.raises(RunStopped):
        run.countdown("the retention", seconds=10)


def test_a_wait_that_ends_early_because_its_condition_came_fills_its_bar_and_only_a_failure_leaves_it_short():
    from contextlib import contextmanager
    bars = []

    class Bar:
        n, total = 0.0, 0.0
        def refresh(self):
            pass

    class Recording(run_module.Progress):
        @contextmanager
        def bar(self, what, total, delay=0.0):
            b = Bar()
            b.total = total
            bars.append(b)
            yield b

    run = Run("unit", progress=False)
    run.progress = Recording(enabled=False)
    start = time.time()
    run.countdown("the retention", seconds=30, done=lambda: time.time() - start > 0.6)
    assert bars[-1].n == bars[-1].total == 30               # complete: not drawn as a failure
    with pytest.raises(LabError):
        run.wait(lambda: False, 0.5, "something that never comes", interval=0.05)
    assert bars[-1].n < bars[-1].total                        # a wait that failed stays short


# ---------------------------------------------------------------- result

def _count_exercise(result, answer):
    expect(answer == result.duplicates, "count the duplicates again")


@dataclass
class CountResult(Result):
    duplicates: int = 0
    exercises = {1: Exercise(check=_count_exercise, solution=lambda r: r.duplicates,
                             why="Each key read twice is one duplicate.", wrong=lambda r: r.duplicates + 1,
                             closer="a duplicate is a key read twice", needs_failure=True)}

    @property
    def failed(self):
        return self.duplicates > 0

    def verdict(self):
        return f"{self.duplicates} duplicate(s)"

    def record_fields(self):
        return {"duplicates": self.duplicates}


def test_result_as_record_and_check(capsys):
    r = CountResult("demo", {"downtime_s": 20, "reset": "earliest"}, "demo-1", Timeline(0), duplicates=3)
    assert r.as_record() == {"scenario": "demo", "run_id": "demo-1", "failure_reproduced": True,
                             "verdict": "3 duplicate(s)", "param_downtime_s": 20, "param_reset": "earliest",
                             "duplicates": 3}
    assert CountResult("demo", {}, "demo-2", Timeline(0)).as_record()["failure_reproduced"] is False
    assert not r.check(1, None) and "not answered yet" in capsys.readouterr().out
    assert r.check(1, 3) and capsys.readouterr().out == "✓ Exercise 1: right.\n"
    assert r.check(1, 3)._ipython_display_() is None      # a notebook cell shows the message only
    capsys.readouterr()
    # wrong: a cross and the hint, no exception reaching the notebook; from the second wrong answer on, a closer hint
    first = r.check(1, 2)
    out = capsys.readouterr().out
    assert not first and first.said.startswith("Not quite: count the duplicates again") and out.startswith("✗")
    assert "Closer" not in out and "Traceback" not in out and "expect(" not in out
    second = r.check(1, 4)
    assert not second and "Closer: a duplicate is a key read twice" in capsys.readouterr().out
    # an exercise that needs the failure: a clean run says so instead of judging (0 would be "right" there)
    clean = CountResult("demo", {}, "demo-3", Timeline(0))
    assert not clean.check(1, 0) and "did not reproduce the failure" in capsys.readouterr().out
    clean.solution(1, display=lambda shown: pytest.fail(f"a solution shown for a clean run: {shown}"))
    assert "no solution to show" in capsys.readouterr().out
    with pytest.raises(LookupError, match="no exercise 2"):
        r.check(2, 3)
    assert r.table().empty and r.figure().layout.title.text == Result.title


def test_a_solution_shows_why_and_this_runs_answer_only_when_asked():
    r = CountResult("demo", {}, "demo-1", Timeline(0), duplicates=3)
    shown = []
    r.solution(1, display=shown.append)
    assert len(shown) == 1 and "Each key read twice" in shown[0].data and "For this run: `3`" in shown[0].data

    # an exercise that asks for a function shows the function
    def expires(idle_s):
        return 60 - idle_s
    asks_a_function = CountResult("demo", {}, "demo-2", Timeline(0))
    asks_a_function.exercises = {1: Exercise(check=_count_exercise, solution=lambda _: expires, why="The clock.",
                                             wrong=lambda _: None)}
    asks_a_function.solution(1, display=shown.append)
    assert "For this run:\n\n```python\ndef expires(idle_s):\n    return 60 - idle_s\n```" in shown[1].data


# ---------------------------------------------------------------- prune (no broker: a fake work folder)

def test_prune_keeps_the_newest_and_never_one_in_use(tmp_path, monkeypatch):
    monkeypatch.setattr(run_module, "WORK_DIR", tmp_path)
    monkeypatch.setattr(run_module, "PRUNE_AFTER_S", 0)
    now = time.time()
    folders = []
    for i in range(6):  # run-0 is the oldest
        folder = tmp_path / "runs" / f"run-{i}"
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / "app.log").write_text("x")
        for path in (folder, folder / "sub", folder / "sub" / "app.log"):
            os.utime(path, (now - 1000 + i, now - 1000 + i))
        folders.append(folder)

    class InUse:
        folder = folders[0]
    run_module._active_runs.add(InUse)
    # another process (a broker of another kernel) names run-2 on its command line
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)",
                               str(folders[2] / "cluster" / "server.properties")])
    wait_until(lambda: any(str(folders[2]) in arg for arg in psutil.Process(holder.pid).cmdline()), 10,
               "the holder process to exec")
    try:
        removed = run_module.prune(keep=2)
    finally:
        run_module._active_runs.discard(InUse)
        holder.kill()
        holder.wait()
    assert sorted(p.name for p in removed) == ["run-1", "run-3"]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["run-0", "run-2", "run-4", "run-5"]


def test_prune_takes_a_folder_that_another_process_pruned_meanwhile(tmp_path, monkeypatch):
    """Two notebooks at once each prune when a run ends: a folder listed by one can be gone before it looks."""
    monkeypatch.setattr(run_module, "WORK_DIR", tmp_path)
    monkeypatch.setattr(run_module, "PRUNE_AFTER_S", 0)
    for i in range(4):
        folder = tmp_path / "runs" / f"run-{i}"
        folder.mkdir(parents=True)
        os.utime(folder, (time.time() - 1000 + i,) * 2)
    last_write = run_module._last_write

    def the_other_process_prunes_first(path):
        if path.name == "run-0":
            shutil.rmtree(path, ignore_errors=True)
        return last_write(path)
    monkeypatch.setattr(run_module, "_last_write", the_other_process_prunes_first)
    removed = run_module.prune(keep=2)
    assert sorted(p.name for p in removed) == ["run-1"]
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["run-2", "run-3"]
    assert last_write(tmp_path / "runs" / "gone") == 0.0


def test_prune_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run_module, "WORK_DIR", tmp_path)
    from lab.commands import main as cli
    monkeypatch.setattr(sys, "argv", ["python -m lab", "prune", "--keep", "3"])
    cli.main()
    assert "0 folder(s) removed" in capsys.readouterr().out


# ---------------------------------------------------------------- generated tables (docs/parameters.md, README)

def _scenarios():
    from lab.scenarios import COURSE
    return [pytest.param(entry, id=entry.scenario) for entry in COURSE]


def _params_block() -> str:
    """docs/parameters.md's generated block, between its markers."""
    from lab.commands.main import PARAMS_DOC, PARAMS_END, PARAMS_START
    text = PARAMS_DOC.read_text()
    assert PARAMS_START in text and PARAMS_END in text, "docs/parameters.md has lost its params markers"
    return text.split(PARAMS_START, 1)[1].split(PARAMS_END, 1)[0]


@pytest.mark.parametrize("entry", _scenarios())
def test_parameters_table_matches_the_spec(entry):
    spec = entry.lesson.spec if entry.lesson else getattr(entry.module(), "SPEC", None)
    if spec is None:
        pytest.skip(f"{entry.package}.{entry.scenario} has no SPEC")
    from lab.commands.main import params_markdown
    assert params_markdown({entry.scenario: spec}) in _params_block(), (
        f"docs/parameters.md's table for {entry.scenario} differs from its SPEC: "
        "run `.venv/bin/python -m lab params --write`")


def test_parameters_block_is_every_spec_in_course_order():
    from lab.commands.main import params_markdown, scenario_specs
    assert _params_block() == f"\n\n{params_markdown(scenario_specs())}\n\n", (
        "docs/parameters.md's params block is not what `.venv/bin/python -m lab params --write` writes: run it")


def test_readme_course_table_is_the_registry():
    from lab.commands.main import COURSE_END, COURSE_START, readme_course_table
    readme = (ROOT / "README.md").read_text()
    assert f"{COURSE_START}\n\n{readme_course_table()}\n\n{COURSE_END}" in readme, (
        "README's course table differs from lab.scenarios.COURSE: run `.venv/bin/python -m lab params --write`")


def test_params_write_rewrites_the_parameters_doc_and_the_readme_course_block(tmp_path, monkeypatch, capsys):
    from lab.commands import main as cli
    doc, readme = tmp_path / "docs" / "parameters.md", tmp_path / "README.md"
    doc.parent.mkdir()
    doc.write_text(f"# Parameters\n\n{cli.PARAMS_START}\nstale\n{cli.PARAMS_END}\n")
    readme.write_text(f"# Lab\n\n{cli.COURSE_START}\nstale\n{cli.COURSE_END}\n\nafter\n")
    monkeypatch.setattr(cli, "ROOT", tmp_path)
    monkeypatch.setattr(cli, "PARAMS_DOC", doc)
    monkeypatch.setattr(sys, "argv", ["python -m lab", "params", "--write"])
    cli.main()
    assert doc.read_text() == (f"# Parameters\n\n{cli.PARAMS_START}\n\n{cli.params_markdown(cli.scenario_specs())}"
                               f"\n\n{cli.PARAMS_END}\n")
    assert readme.read_text() == (f"# Lab\n\n{cli.COURSE_START}\n\n{cli.readme_course_table()}\n\n{cli.COURSE_END}"
                                  "\n\nafter\n")
    assert "docs/parameters.md" in capsys.readouterr().out


# ---------------------------------------------------------------- against a real broker

@pytest.fixture(scope="module")
def borrowed():
    from lab.cluster import kafka_cluster
    with kafka_cluster(name="test-experiment") as cluster:
        yield cluster


def test_run_starts_its_own_cluster_and_stops_it():
    with Run("own", progress=False) as run:
        assert run.owns_cluster and run.cluster.running and run.cluster.owns_broker
        assert run.folder.is_dir() and run.bootstrap == run.cluster.bootstrap
        cluster = run.cluster
    assert not cluster.running


def test_run_borrows_a_running_cluster_that_fits_and_readies_topics(borrowed, tmp_path):
    (tmp_path / "sleeper.py").write_text("import time\nprint('up', flush=True)\ntime.sleep(600)\n")
    with Run("borrow", cluster=borrowed, progress=False,
             broker_config={"group.initial.rebalance.delay.ms": 0}) as run:
        assert run.cluster is borrowed and not run.owns_cluster
        assert run.topics("exp-a", "exp-b", partitions=3) == ["exp-a", "exp-b"]
        md = borrowed.admin().list_topics(timeout=10)
        assert all(md.topics[t].partitions[p].leader >= 0 for t in ("exp-a", "exp-b") for p in range(3))
        run.topics("exp-a", partitions=3)   # an existing topic is kept
        child = run.spawn_python("sleeper", "sleeper", [], env={"PYTHONPATH": str(tmp_path)})
        run.wait(lambda: "up" in child.log(), 30, "the sleeper to start", child=child)
    assert not child.alive(), "a child spawned through the run outlived it"
    assert borrowed.running, "a borrowed cluster must not be stopped by the run"


def test_run_starts_its_own_when_the_given_cluster_does_not_fit_or_is_stopped(borrowed):
    from lab.cluster import kafka_cluster
    with Run("misfit", cluster=borrowed, progress=False, broker_config={"offsets.retention.minutes": 1}) as run:
        assert run.cluster is not borrowed and run.owns_cluster
        assert run.cluster.fits(1, borrowed.version, {"offsets.retention.minutes": 1})
    stopped = kafka_cluster(name="never-started")
    with Run("stopped", cluster=stopped, progress=False) as run:
        assert run.cluster is not stopped and run.owns_cluster and run.cluster.running
    assert borrowed.running


# ---------------------------------------------------------------- predict

def test_a_prediction_given_as_a_parameter_is_checked_at_once_and_compared_with_the_measurement(capsys):
    from lab.toolbox.predict import predict
    with pytest.raises(LabError, match="not one of the answers"):
        predict("Which way?", ["up", "down"], given="sideways")
    with pytest.raises(LabError, match="not a number"):
        predict("How many?", given="five")
    guess = predict("Which way?", ["up", "down"], given="up")
    assert "Your prediction: up" in capsys.readouterr().out
    assert guess.against("down") == "You said: up. This run measured: down. Not what you predicted: the cells " \
                                    "below show why."
    assert guess.as_record() == {"prediction": "up", "prediction_measured": "down", "prediction_right": False}
    number = predict("How many?", given=9, show=False)
    number.against(10)                                   # within 25 %
    assert number.right() is True and predict("How many?", given=5, show=False).against(10).endswith("why.")


def test_a_prediction_left_to_the_widget_reads_it_when_compared_and_none_says_so():
    from lab.toolbox.predict import predict
    unanswered = predict("Which way?", ["up", "down"])
    assert unanswered.widget is not None and unanswered.answer is None
    assert unanswered.against("up") == "No prediction made; this run measured: up."
    assert unanswered.as_record() == {"prediction": None, "prediction_measured": "up", "prediction_right": None}
    clicked = predict("How many?")
    clicked.widget.value = "12"                          # what the learner typed
    clicked.against(12)
    assert clicked.as_record() == {"prediction": 12.0, "prediction_measured": 12, "prediction_right": True}
    assert predict("Which way?", ["up", "down"]).against(None).startswith("This run did not measure it")


def test_a_lesson_asks_its_question_checks_its_parameters_and_wraps_its_outcome(capsys):
    """lab.toolbox.lesson.Lesson: its question with its choices (a given answer checked), its parameters refused
    before anything starts, and a result that shows, records and checks through its outcome and its exercises."""
    from lab.toolbox.lesson import Lesson, LessonResult
    from lab.toolbox.result import Exercise, expect

    class Outcome:
        failed, audits = True, {"x": "verdict"}

        def as_record(self):
            return {"tiny": {"busy": 2}}

        def verdict(self):
            return "one idle"

    def body(lab, p):
        raise AssertionError("no run here")
    lesson = Lesson("tiny", "A tiny lesson", params=[Param("tiny_n", 3, "instances", lo=1, hi=4)], needs=lambda p: {},
                    body=body, question=lambda p: (f"{p['tiny_n']} instances: how many work?", None),
                    measured_answer=lambda record, p: record["tiny"]["busy"],
                    exercises={1: Exercise(check=lambda r, a: expect(a == 2, "two"), solution=lambda r: 2, why="",
                                           wrong=lambda r: 3)})
    from lab.config import KAFKA_VERSION
    assert lesson.needs({}) == {"nodes": 1, "version": KAFKA_VERSION, "broker_config": {}}
    from lab.scenarios.nb02_transactional_id_expiry.idle_clients import lesson as idle
    assert idle.needs({**idle.spec.defaults, "broker_version": "3.9.1"})["version"] == "3.9.1"   # a lesson's own
    with pytest.raises(LabError, match="TINY_N"):
        lesson.run(tiny_n=9)   # refused before anything starts: the body never runs
    with pytest.raises(LabError, match="is not a number"):
        lesson.predict(lesson.spec.defaults, "two", show=False)
    guess = lesson.predict(lesson.spec.defaults, 3, show=False)
    assert guess.question == "3 instances: how many work?" and guess.choices is None
    r = lesson.result(Outcome(), tiny_n=3)
    assert isinstance(r, LessonResult) and r.failed and r.verdict() == "one idle" and r.audits == {"x": "verdict"}
    record = r.as_record()
    assert record["tiny"] == {"busy": 2} and record["param_tiny_n"] == 3 and record["failure_reproduced"] is True
    assert r.check(1, 2) and not r.check(1, None)
    assert r.check(1, r.exercises[1].wrong(r)).said == "Not quite: two."   # a hint, not an exception
    assert lesson.mitigate.check(r.params, {"tiny_n": 2}) == {"tiny_n": 2}


def test_the_prediction_is_taken_when_the_run_starts_and_the_exercises_judge_that_run(monkeypatch, capsys):
    """An answer changed in the widget after the run started does not count; the run prints it beside what it
    measured; lesson.check judges the run the learner predicted (not a fix's, a panel's or an exercise's run), and
    says so, without a traceback, before any run."""
    from lab.toolbox import lesson as lesson_module
    from lab.toolbox.lesson import Lesson
    from lab.toolbox.predict import Prediction

    class Outcome:
        failed = True

        def __init__(self, busy):
            self.busy = busy

        def as_record(self):
            return {"busy": self.busy}

    class QuietRun:   # a Run that starts nothing
        def __init__(self, key, **kwargs):
            self.id, self.timeline = f"{key}-1", Timeline(0.0)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def phase(self, name):
            pass

        def background(self, fn, stop, pids):
            return type("Done", (), {"result": lambda self, timeout: {}})()

    monkeypatch.setattr(lesson_module, "Run", QuietRun)
    widget = type("Widget", (), {"value": "2", "disabled": False})()
    runs = []

    def body(lab, p):
        widget.value = "3"    # the learner changes the answer while the run shows its progress
        runs.append(p)
        return Outcome(p["tiny_n"] - 1)
    lesson = Lesson("tiny", "A tiny lesson", params=[Param("tiny_n", 3, "instances", lo=1, hi=4)], needs=lambda p: {},
                    body=body, question=lambda p: ("How many work?", None, 0),
                    measured_answer=lambda record, p: record["busy"],
                    exercises={1: Exercise(check=lambda r, a: expect(a == r.outcome.busy, "count them"),
                                           solution=lambda r: r.outcome.busy, why="", wrong=lambda r: 0,
                                           closer="one of them idles")})
    assert not lesson.check(1, 2) and "run the lesson first" in capsys.readouterr().out
    guess = Prediction("How many work?", None, None, 0, widget=widget)
    result = lesson.run(prediction=guess, tiny_n=3)
    out = capsys.readouterr().out
    assert widget.disabled and guess.answer == 2.0 and guess.right() is True, out
    assert out.splitlines()[0] == "Your prediction: 2." and "This run measured: 2. As you predicted." in out
    assert guess.as_record() == {"prediction": 2.0, "prediction_measured": 2, "prediction_right": True}
    assert lesson.last is result
    lesson.run(tiny_n=4)                      # a panel's or an exercise's run: not the one judged
    lesson.mitigate(result, tiny_n=2)         # nor a fix's
    assert lesson.last is result and len(runs) == 3
    assert lesson.check(1, 2) and not lesson.check(1, 3)
    assert "Closer: one of them idles" in (lesson.check(1, 4).message)


def test_a_lesson_that_reads_jmx_gets_a_broker_with_it_and_never_an_external_one(monkeypatch):
    """needs(p) may ask for JMX (notebook 08 reads the client versions there): kafka_cluster gives an embedded broker
    a free JMX port, also when KAFKA_LAB_BOOTSTRAP names a cluster (the lesson builds its risks on a broker of its
    own, never there); Lesson.run borrows no cluster without JMX, and the broker its run starts is made with it."""
    from lab.cluster import kafka_cluster
    from lab.config import BOOTSTRAP_ENV
    from lab.toolbox import lesson as lesson_module
    from lab.toolbox.lesson import Lesson
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    assert kafka_cluster(jmx=True, name="jmx").jmx_port and kafka_cluster(name="plain").jmx_port is None
    with pytest.raises(LabError, match="KRaft"):
        kafka_cluster(version="3.2.3", jmx=True)
    monkeypatch.setenv(BOOTSTRAP_ENV, "127.0.0.1:1")   # nothing listens there, and nothing asks it
    own = kafka_cluster(jmx=True)
    assert own.owns_broker and own.jmx_port
    lesson = Lesson("jmx", "A lesson that reads JMX", params=[Param("jmx_n", 1, "instances", lo=1, hi=2)],
                    needs=lambda p: {"jmx": True}, body=lambda lab, p: None, question=lambda p: ("How many?", None),
                    measured_answer=lambda record, p: None)
    assert lesson.needs({"jmx_n": 1})["jmx"] is True
    seen = {}

    class Started(Exception):
        pass

    class StartingRun:   # records what Lesson.run asks of its Run, then stops before anything starts
        def __init__(self, key, cluster=None, cluster_options=None, **kwargs):
            seen.update(cluster=cluster, options=cluster_options, kwargs=kwargs)

        def __enter__(self):
            raise Started

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(lesson_module, "Run", StartingRun)
    without = type("Cluster", (), {"owns_broker": True, "running": True, "nodes": 1, "jmx": None})()
    with_jmx = type("Cluster", (), {"owns_broker": True, "running": True, "nodes": 1, "jmx": "127.0.0.1:9999"})()
    for given, borrowed in ((without, None), (with_jmx, with_jmx), (None, None)):
        with pytest.raises(Started):
            lesson.run(cluster=given)
        assert seen["cluster"] is borrowed and seen["options"] == {"jmx": True} and "jmx" not in seen["kwargs"]


def test_the_prediction_line_is_shown_once_in_a_cell(capsys):
    from lab.toolbox.predict import predict
    line = predict("Which way?", ["up", "down"], given="up", show=False).against("up")
    assert line == "You said: up. This run measured: up. As you predicted." and capsys.readouterr().out == line + "\n"
    line._ipython_display_()   # what Jupyter calls for a cell's value: nothing more to show
    assert capsys.readouterr().out == ""


def test_an_exercise_tried_in_the_other_run_only_is_recorded_as_skipped_and_only_it():
    from lab.toolbox.result import Exercise, expect
    from tests.expectations import exercises, try_exercises

    class Tiny(Result):
        failed = False

        def verdict(self):
            return "tiny"
    Tiny.exercises = {1: Exercise(check=lambda r, a: expect(a == 2, "two"), solution=lambda r: 2, why="",
                                  wrong=lambda r: 3, printed=lambda r: [4]),
                      2: Exercise(check=lambda r, a: expect(False, "never"), solution=lambda r: 0, why="",
                                  wrong=lambda r: 1, printed=lambda r: [])}
    tried = try_exercises(Tiny("tiny", {}, "run", Timeline(0.0)), skip=(2,))
    assert tried[2] == {"skipped": True} and tried[1]["right"] == "correct"
    record = {"exercises": {str(k): v for k, v in tried.items()}}
    assert exercises(record, [1, 2], skipped=(2,)) == {1: 2, 2: None}
    with pytest.raises(AssertionError):
        exercises(record, [1, 2])   # a skipped exercise is only allowed where the expectations say so


def test_the_mitigate_step_reruns_the_failure_with_the_fix_and_refuses_a_fix_that_changes_nothing():
    from lab.toolbox.mitigate import Mitigate

    @dataclass
    class Fake(Result):
        @property
        def failed(self):
            return self.params["caching"]

        def verdict(self):
            return f"caching {self.params['caching']}: {'stale' if self.failed else 'clean'}"

    spec = Spec(Param("caching", True, "the cache"), Param("side_by_side", False, "the fixes beside it"),
                Param("steps", 3, "steps", lo=1, hi=9))
    runs = []

    def run(cluster=None, progress=True, remember=None, **params):
        assert remember is False   # a fix's run is not the one the exercises judge
        runs.append(params)
        return Fake("fake", spec.validate(**params), "x", Timeline(0))

    mitigate = Mitigate(run, spec, base={"side_by_side": False})
    before = run(remember=False, **spec.validate(side_by_side=True))
    fixed = mitigate(before, caching=False)
    assert runs[-1] == {"caching": False, "side_by_side": False, "steps": 3}   # the failure's own run, alone
    assert fixed.clean and fixed.verdict().startswith("With caching=False: clean. caching False: clean")
    assert "before the fix: caching True: stale" in fixed.verdict()
    assert fixed.as_record()["mitigation"]["fix"] == {"caching": False}
    assert fixed.as_record()["mitigation"]["param_caching"] is False and fixed.params["caching"] is False
    # a fix that does not fix: said so, judged by the same measurement
    again = mitigate(run(remember=False, **spec.validate(caching=False)), steps=5, caching=True)
    assert not again.clean and "the failure happened again" in again.verdict()
    # refused before anything runs: a fix that changes nothing, an unknown name, a bad value, not a dict
    count = len(runs)
    for fix, words in (({"caching": True}, "caching=True is what the run that failed already has"),
                       ({"cache": False}, "did you mean 'caching'"), ({"steps": 99}, "STEPS=99 is outside 1..9"),):
        with pytest.raises(LabError, match=words):
            mitigate(before, **fix)
    with pytest.raises(LabError, match="A fix is parameters"):
        mitigate.check(before.params, "caching=False")
    other = 3 if before.params["steps"] != 3 else 4   # a value repeated beside one that changes: still a fix
    assert mitigate.check(before.params, {"caching": before.params["caching"], "steps": other})["steps"] == other
    assert len(runs) == count
    # no fix: the step is skipped, and each of its cells says so in one line
    skipped = mitigate(before)
    assert len(runs) == count and skipped.clean is None and skipped.as_record() == {"mitigation": None}
    assert "did not run" in skipped.verdict() and "did not run" in skipped.table().data
    assert mitigate.check(before.params, None) == {**before.params, "side_by_side": False}


# ---------------------------------------------------------------- what a run holds in memory: its programs at once

# The most programs (apps, clients, instances; not brokers, not Spark) each lesson runs side by side at its
# defaults, as its body starts them. 08 is the doctor's lesson: only its type is checked here.
APPS_AT_ONCE = {
    "00": 0,    # no program: the kernel produces, copies and reads
    "01": 7,    # every consumer-group variant, up together until the one stop
    "02a": 3,   # one idle round: the crash mode and the two Java producers
    "02b": 1,   # one Kafka Streams version per idle round
    "02c": 1,   # one Java producer per broker, one broker after the other
    "03a": 5,   # the app under study, two comparisons, two variants
    "03b": 6,   # three clients x two ratios, within a wave of 8
    "04": 3,    # PROGRAM "1 2 3": three instances up at the end; the variants run one after the other
    "05a": 1, "05b": 1, "05c": 1, "05d": 1,   # one app per run, the runs one after the other
    "06a": 1,   # one store kind (kv)
    "06b": 4,   # eos, alos, and the standby app's two instances
    "06c": 1,   # one config per partition-count round
    "06d": 1,   # one variant, its versions one after the other
    "06e": 1,   # one app per phase, the phases one after the other
    "07a": 3,   # three clients, the baseline each
    "07b": 7,   # 1 + 2 + 4 instances per partition-count round
    "07c": 1,   # one lookup mode
    "07d": 2,   # two releases ride the bounce together
    "09": 2,    # the share group's workers, side by side
}


def test_every_lesson_says_how_many_programs_it_runs_at_once():
    from lab.scenarios import COURSE
    lessons = {entry.number: entry.lesson for entry in COURSE if entry.lesson is not None}
    for number, lesson in lessons.items():
        n = lesson.apps_at_once(lesson.spec.defaults)
        assert isinstance(n, int) and not isinstance(n, bool) and n >= 0, (number, n)
    assert set(APPS_AT_ONCE) == set(lessons) - {"08"}
    assert {k: lessons[k].apps_at_once(lessons[k].spec.defaults) for k in APPS_AT_ONCE} == APPS_AT_ONCE
    # a parameter that adds programs side by side adds to the count; one that runs them in turn does not
    par = lessons["07b"]
    assert par.apps_at_once({**par.spec.defaults, "par_instances": [1, 2, 4, 8]}) == 15
    assert par.apps_at_once({**par.spec.defaults, "par_partitions": [1, 2, 4, 8]}) == 7
    standby = lessons["04"]
    assert standby.apps_at_once({**standby.spec.defaults, "program": "1 2 3 4 1 2"}) == 4
    assert standby.apps_at_once({**standby.spec.defaults, "program": "1 1 2", "compare": True}) == 1
    sweep = lessons["03b"]
    assert sweep.apps_at_once({**sweep.spec.defaults, "sweep_parallel": 4}) == 4
    old = lessons["02c"]
    assert old.apps_at_once({**old.spec.defaults, "zookeeper_brokers": []}) == 0   # the pinned ZooKeeper alone
