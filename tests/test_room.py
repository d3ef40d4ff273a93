"""The room (lab/room, lab/toolbox/room.py): the real server as `make room` starts it, on loopback.

- Under load: 100 simulated laptops, each voting, reporting a run and answering an exercise for 3 lessons, all at
  once; every message is kept once, none lost, and the summary the teacher's page draws counts exactly what was sent.
- Bad input: a wrong room code, a wrong teacher's token, malformed JSON, an unknown lesson, kind or field, an
  oversized message, a laptop that floods and an address that floods: each refused with a 4xx, nothing kept, and the
  server still answers.
- A restarted server resumes its room (same code, token and data); --new opens a fresh one.
- The learner's side: send() returns at once even while the room holds the request; a room that does not answer costs
  one line, once.
"""
from __future__ import annotations

import csv
import http.client
import io
import json
import random
import socket
import time
import urllib.parse
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from lab.room.messages import lessons
from lab.scenarios import COURSE
from lab.toolbox import room as learner
from tests.room_server import kept, message, running_room

LESSONS = ("poll_loop", "clients", "over_quota")   # three lessons at once, each a choice question
LAPTOPS = 100


def laptop() -> str:
    return uuid.uuid4().hex


def run_message(lesson: str, who: str, reproduced: bool, seconds: float) -> dict:
    return message("run", lesson, who, reproduced=reproduced, measured="x", right=None, seconds=seconds,
                   figures={"records_lost": 3, "stuck": True},
                   platform={"os": "Linux", "arch": "x86_64", "python": "3.13.0", "java": "21 (bundled)"})


def test_a_hundred_laptops_at_once(tmp_path):
    rng = random.Random(53)
    sent = []
    for _ in range(LAPTOPS):
        who = laptop()
        for key in LESSONS:
            choices = lessons()[key]["choices"]
            sent += [message("vote", key, who, answer=rng.choice(choices), choices=choices),
                     run_message(key, who, reproduced=rng.random() < 0.7, seconds=rng.uniform(10, 90)),
                     message("exercise", key, who, number=1, right=rng.random() < 0.5, hints=rng.randint(0, 3))]
    with running_room(tmp_path / "room.sqlite") as room:
        link = learner.RoomLink(room.url, laptop="0" * 32)   # the learner's own post, laptop id per message
        with ThreadPoolExecutor(32) as pool:   # every laptop at once
            replies = list(pool.map(link.post, sent))
        assert replies == [{"stored": True}] * len(sent)
        summary = room.summary()
        kept = json.loads(urllib.request.urlopen(f"{room.url}/export.json?token={room.token}").read())
    assert sorted(m["id"] for m in kept) == sorted(m["id"] for m in sent), "each message kept once, none lost"
    assert summary["laptops"] == LAPTOPS and summary["messages"] == len(sent)
    by_key = {entry["lesson"]: entry for entry in summary["lessons"]}
    for key in LESSONS:
        mine = [m for m in sent if m["lesson"] == key]
        votes, runs, answers = ([m for m in mine if m["kind"] == kind] for kind in ("vote", "run", "exercise"))
        page = by_key[key]
        assert page["active"] and page["votes"]["total"] == LAPTOPS
        assert page["votes"]["counts"] == {c: n for c in page["choices"] if (n := sum(v["answer"] == c for v in votes))}
        assert page["runs"]["laptops"] == LAPTOPS
        assert page["runs"]["reproduced"] == sum(r["reproduced"] for r in runs)
        assert page["runs"]["seconds"]["max"] == pytest.approx(max(r["seconds"] for r in runs))
        assert page["runs"]["platforms"][0]["laptops"] == LAPTOPS
        assert page["exercises"] == [{"number": 1, "answered": LAPTOPS, "solved": sum(a["right"] for a in answers),
                                      "hints_mean": pytest.approx(sum(a["hints"] if a["right"] else 1 for a in answers)
                                                                  / LAPTOPS, abs=0.01)}]
    assert not [e for e in by_key.values() if e["active"] and e["lesson"] not in LESSONS]


def refused(room, body: bytes, path: str = "send") -> int:
    request = urllib.request.Request(f"{room.url}/{path}", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        urllib.request.urlopen(request, timeout=10)
    except urllib.error.HTTPError as exc:
        assert "error" in json.loads(exc.read()), exc
        return exc.code
    return 200


def get_status(url: str) -> int:
    try:
        return urllib.request.urlopen(url, timeout=10).status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_bad_input_is_refused_and_nothing_kept(tmp_path):
    who = laptop()
    good = message("vote", "poll_loop", who, answer=None, choices=None)
    with running_room(tmp_path / "room.sqlite") as room:
        origin = room.origin
        wrong_room = urllib.parse.urlsplit(room.url)._replace(path="/" + "x" * len(room.code)).geturl()
        assert refused(type("R", (), {"url": wrong_room}), json.dumps(good).encode()) == 404
        for path in ("summary", "events", "teacher", "export.json", "export.csv"):
            assert get_status(f"{room.url}/{path}?token=wrong") == 403, path
            assert get_status(f"{room.url}/{path}") == 403, path
            assert get_status(f"{wrong_room}/{path}?token={room.token}") == 404, path
        assert get_status(f"{origin}/") == 404
        assert get_status(room.url) == 200 and get_status(wrong_room) == 404
        assert refused(room, b"{not json") == 400
        assert refused(room, b"\xff\xfe") == 400
        assert refused(room, b"[1, 2]") == 400
        for constant in (b"NaN", b"Infinity", b"-Infinity", b"1e400", b"1" * 20):   # Python's JSON takes them
            body = json.dumps({**good, "answer": 0}).encode().replace(b'"answer": 0', b'"answer": ' + constant)
            assert refused(room, body) == 400, constant
        for bad in (message("vote", "not_a_lesson", who, answer=None, choices=None),
                    message("shout", "poll_loop", who),
                    {**good, "id": "../../etc"}, {**good, "laptop": "A" * 32}, {**good, "extra": 1},
                    {**good, "answer": "x" * 201}, {**good, "choices": ["a"] * 11},
                    message("exercise", "poll_loop", who, number=99, right=True, hints=0),
                    {**run_message("poll_loop", who, True, 5), "figures": {"Bad Name": 1}}):
            assert refused(room, json.dumps(bad).encode()) == 400, bad
        assert refused(room, json.dumps({**good, "answer": None, "pad": "x" * 9000}).encode()) == 413
        assert room.summary()["messages"] == 0, "nothing refused is kept"
        # a laptop that floods: its burst (30) is taken, the rest refused; the room still answers
        flood = [room.send(message("exercise", "poll_loop", who, number=1, right=False, hints=0))[0]
                 for _ in range(40)]
        # its burst, then one a second while it floods (a busy machine may take a second or two over the forty)
        assert flood[:30] == [200] * 30 and 30 <= flood.count(200) < 35 and 429 in flood, flood
        assert set(flood) == {200, 429} and room.summary()["messages"] == flood.count(200)
    assert any("joined" in line for line in room.output)


def test_the_room_checks_messages_with_jsonschema_without_the_iri_parsers():
    """A lab process (a kernel, the room) imports jsonschema through plotly's nbformat and the room's messages, but
    never rfc3987_syntax, whose 35 parsers cost each process seconds at import; the schema is checked all the same."""
    import subprocess
    import sys
    script = ("import sys, json, lab.toolbox.panel, lab.room.messages as m\n"
              "assert 'jsonschema' in sys.modules and sys.modules['rfc3987_syntax'] is None\n"
              "good = {'v': 1, 'id': 'a' * 32, 'laptop': 'b' * 32, 'lesson': next(iter(m.lessons())), 'kind': 'exercise',"
              " 'number': 1, 'right': True, 'hints': 0}\n"
              "assert m.parse(json.dumps(good).encode())['kind'] == 'exercise'\n"
              "try:\n    m.parse(json.dumps({**good, 'hints': -1}).encode())\nexcept m.BadMessage:\n    print('refused')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "refused", done.stderr[-2000:]


def test_an_address_that_floods_is_refused(tmp_path):
    # one message a second from an address, ten at once: a sender that makes up laptop ids gets ten through
    with running_room(tmp_path / "room.sqlite", "--per-address", "1") as room:
        burst = [room.send(message("vote", "poll_loop", laptop(), answer=None, choices=None))[0] for _ in range(30)]
        taken = burst.count(200)
        assert burst[:10] == [200] * 10 and taken < 15 and set(burst) == {200, 429}, burst
        assert room.summary()["laptops"] == taken, "a refused laptop is not in the room"
    assert any("joined" in line for line in room.output)


def test_made_up_laptops_cannot_fill_the_room(tmp_path):
    # new laptop ids from one address: 150 at once (a room's worth), then one every 10 s
    with running_room(tmp_path / "room.sqlite") as room:
        burst = [room.send(message("vote", "poll_loop", laptop(), answer=None, choices=None)) for _ in range(160)]
        taken = [status for status, _ in burst].count(200)
        assert 150 <= taken < 155 and burst[-1] == (429, {"error": "too many new laptops from this address"}), taken
        assert room.summary()["laptops"] == taken


def test_a_laptop_leaves_at_most_its_share(tmp_path, monkeypatch):
    from lab.room import store as stores
    monkeypatch.setattr(stores, "MAX_PER_LAPTOP", 3)
    store, who = stores.Store(tmp_path / "room.sqlite"), laptop()
    for _ in range(3):
        assert store.full(who) is None and store.add(message("vote", "poll_loop", who, answer=None, choices=None))
    assert store.full(who) == "this laptop has sent the most a room keeps" and store.full(laptop()) is None
    store.close()


def test_a_restarted_room_resumes_and_new_starts_afresh(tmp_path):
    db = tmp_path / "room.sqlite"
    with running_room(db) as first:
        assert first.send(message("vote", "poll_loop", laptop(), answer="no, it moves on", choices=None))[0] == 200
    with running_room(db) as again:
        assert (again.code, again.token) == (first.code, first.token)
        assert again.output[0].startswith("Room resumed at") and again.summary()["messages"] == 1
    with running_room(db, "--new") as fresh:
        assert fresh.code != first.code and fresh.token != first.token and fresh.summary()["messages"] == 0


def test_the_page_streams_the_summary(tmp_path):
    with running_room(tmp_path / "room.sqlite") as room:
        parts = urllib.parse.urlsplit(room.url)
        stream = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        stream.request("GET", f"{parts.path}/events?token={room.token}")
        reply = stream.getresponse()
        assert reply.status == 200 and reply.getheader("Content-Type") == "text/event-stream"

        def next_summary() -> dict:
            while not (line := reply.readline().decode()).startswith("data: "):
                pass
            return json.loads(line[len("data: "):])
        assert next_summary()["messages"] == 0
        room.send(message("vote", "poll_loop", laptop(), answer="no, it moves on", choices=None))
        assert next_summary()["messages"] == 1
        stream.close()
        page = urllib.request.urlopen(room.teacher_url, timeout=10)
        assert "default-src 'self'" in page.headers["Content-Security-Policy"]
        # a learner's text opens in a spreadsheet as text, never as a formula
        room.send(message("vote", "poll_loop", laptop(), answer='=HYPERLINK("http://x","y")', choices=None))
        exported = urllib.request.urlopen(f"{room.url}/export.csv?token={room.token}", timeout=10).read().decode()
        rows = list(csv.DictReader(io.StringIO(exported)))
        assert [r["answer"] for r in rows] == ["no, it moves on", '\'=HYPERLINK("http://x","y")'], rows


# ---------------------------------------------------------------- the learner's side

def silent_listener():
    """A port that takes connections and never answers: a room that hangs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    return server


def test_sending_never_waits_and_an_unreachable_room_is_one_line(monkeypatch, capsys):
    monkeypatch.setattr(learner, "TIMEOUT_S", 0.5)
    server = silent_listener()
    try:
        link = learner.RoomLink(f"http://127.0.0.1:{server.getsockname()[1]}/code", laptop=laptop())
        for number in range(1, 4):
            link.send("exercise", "poll_loop", number=number, right=True, hints=0)   # queued: returns at once
        assert link.sent == 0 and link.queue.qsize() + 1 >= 3, "sent while the room has not answered"
        link.flush(10)
    finally:
        server.close()
    lines = [line for line in capsys.readouterr().out.splitlines() if line]
    assert len(lines) == 1 and "did not answer" in lines[0] and "goes on without it" in lines[0], lines
    assert link.sent == 0


def test_no_room_sends_nothing(monkeypatch):
    monkeypatch.delenv(learner.ROOM_ENV, raising=False)
    monkeypatch.setattr(learner, "_room", None)
    monkeypatch.setattr(learner, "_from_environment", False)
    learner.tell_room("vote", "poll_loop", answer=None, choices=None)
    assert learner.current_room() is None


@pytest.mark.parametrize("url", ["", "192.168.1.20:8765/abc", "http://host:8765/", "ftp://h/x", "http://h/a/b",
                                 "http://h:abc/CODE"])
def test_a_mistyped_room_is_said_before_anything(url):
    from lab.errors import LabError
    with pytest.raises(LabError, match="not a room's address"):
        learner.room_url(url)


def test_headline_figures_are_the_records_numbers():
    record = {"scenario": "x", "failure_reproduced": True, "param_poll_batch": 500, "records_lost": 480,
              "stuck": False, "time_to_failure_s": 12.5, "verdict": "text", "nan": float("nan"),
              "time_to_error_s": {"streams-3.7.0": 15.03}, "audit": {"app": {"lost": 0, "note": "x"}},
              "forever": float("inf"),
              "peak_rss_mb": {"apps": None, "brokers": 336.5}}
    assert learner.headline_figures(record) == {
        "records_lost": 480, "stuck": False, "time_to_failure_s": 12.5, "time_to_error_s_streams_3_7_0": 15.03,
        "audit_app_lost": 0, "peak_rss_mb_brokers": 336.5}


def test_the_predict_widget_votes_as_it_is_chosen(tmp_path, monkeypatch):
    """In a room, the learner's choice in the Predict widget is the laptop's vote before any run: the room votes,
    argues, votes again; the latest counts. A changed choice is sent once it settles."""
    from lab.scenarios import notebook
    lesson = notebook("07a").lesson
    with running_room(tmp_path / "room.sqlite") as room:
        monkeypatch.setattr(learner, "_room", learner.RoomLink(room.url, laptop=laptop()))
        monkeypatch.setattr(learner, "_from_environment", True)
        guess = lesson.predict(lesson.spec.validate(), show=True)
        first, second, *_ = lesson.question(lesson.spec.validate())[1]
        guess.widget.value = first
        guess.widget.value = second   # changed within the settling time: one vote, the second
        deadline = time.monotonic() + 30
        while not kept(room) and time.monotonic() < deadline:
            time.sleep(0.2)
        learner._room.flush(5)
        votes = kept(room)
        guess.take(quiet=True)
        guess.widget.value = first    # after the run took it: not a vote
        time.sleep(2)
        learner._room.flush(5)
        assert [v["answer"] for v in votes] == [second] and len(kept(room)) == 1, kept(room)
        assert room.summary()["lessons"][[e.lesson.key for e in COURSE].index("poll_loop")]["votes"]["counts"] == {
            second: 1}


def test_make_lab_checks_the_room_once(tmp_path):
    with running_room(tmp_path / "room.sqlite") as room:
        assert learner.room_answers(room.url)
        assert not learner.room_answers(room.url.rsplit("/", 1)[0] + "/wrongcode")
    assert not learner.room_answers(room.url)   # closed


def test_make_lab_in_a_room_gives_every_kernel_the_room(tmp_path, monkeypatch, capsys):
    """`make lab ROOM=...` (lab start --room): JupyterLab's environment, so every kernel's, carries the room; one line
    says whether it answers; a mistyped address stops it before anything starts."""
    from argparse import Namespace

    from lab.commands import main
    from lab.errors import LabError
    from lab.runtime.ports import free_port
    ran = []
    monkeypatch.setattr(main.subprocess, "run", lambda cmd, env, check: ran.append(env))
    with running_room(tmp_path / "room.sqlite") as room:
        main.start(Namespace(port=free_port(), ip="127.0.0.1", idle_minutes=0, playground=False, room=room.url + "/"))
    assert ran[0][learner.ROOM_ENV] == room.url
    assert f"In the room {room.url}:" in capsys.readouterr().out
    main.start(Namespace(port=free_port(), ip="127.0.0.1", idle_minutes=0, playground=False, room=room.url))
    assert "does not answer now" in capsys.readouterr().out   # closed: the lab starts anyway
    with pytest.raises(LabError, match="not a room's address"):
        main.start(Namespace(port=free_port(), ip="127.0.0.1", idle_minutes=0, playground=False, room="room-k7q2"))
    assert len(ran) == 2
