"""The teacher's page of the room (issue 53) in a real browser: the real server (`python -m lab room`), messages
POSTed as the learners' labs send them, the page driven by Playwright in Debian's chromium.

Votes sent before the page opens show as bars with their counts and percentages (choices in order, another answer,
"no prediction"; a number question as a histogram); votes sent while it is open redraw it live, without a reload;
the runs and exercises stay hidden until Reveal, which then shows what was sent ("4 of 5 laptops reproduced the
failure", the run lengths, the platforms, the exercises) and is remembered across a reload. An answer that is HTML
shows as text. No console error, no page error, no dialog, and every request the page makes goes to the server.

Without chromium or the playwright package the test is skipped and says why (as tests/test_browser.py does).
The page's hooks (data-testid) are listed at the top of lab/room/page/teacher.js.
"""
from __future__ import annotations

import json
import time
import urllib.request
import uuid

import pytest

from tests.room_server import message, running_room

LIVE_TIMEOUT_S = 10   # a change reaches the page within about 0.25 s; a loaded machine gets slack
HOSTILE = "<img src=x onerror=alert(1)>"

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]


def bars(page, lesson: str) -> list[tuple]:
    """A card's bars as drawn: (kind, label, count, percentage)."""
    return [tuple(row) for row in page.locator(f'[data-testid=lesson][data-lesson="{lesson}"] [data-testid=bar]')
            .evaluate_all("rows => rows.map(r => [r.dataset.kind, "
                          "...['bar-label', 'bar-count', 'bar-pct'].map("
                          "id => r.querySelector(`[data-testid=${id}]`).textContent)])")]


def eventually(read, expected, timeout: float = LIVE_TIMEOUT_S):
    """Wait until read() == expected (the page redraws when its next event comes); the last value otherwise."""
    deadline = time.monotonic() + timeout
    while (value := read()) != expected and time.monotonic() < deadline:
        time.sleep(0.1)
    return value


def text(page, selector: str) -> str:
    return page.locator(selector).inner_text()


def test_the_teachers_page(browser, tmp_path):
    from lab.room.messages import lessons
    course = lessons()
    yes, no, *others = course["poll_loop"]["choices"]   # its other choices get no vote: a bar of 0 each
    idle = course["clients"]["choices"]
    assert course["partitions"]["choices"] is None and course["growth"]["choices"] is None   # number questions
    laptops = [uuid.uuid4().hex for _ in range(12)]

    with running_room(tmp_path / "room.sqlite") as room:
        def send(kind, lesson, laptop, **fields):
            status, reply = room.send(message(kind, lesson, laptop, **fields))
            assert status == 200 and reply == {"stored": True}, (status, reply, room.output)

        def vote(lesson, laptop, answer):
            send("vote", lesson, laptop, answer=answer, choices=course[lesson]["choices"])

        # before the page opens: 23 votes from 10 laptops in four lessons
        for laptop, answer in zip(laptops, [yes, yes, yes, no, no, None, HOSTILE]):
            vote("poll_loop", laptop, answer)
        vote("clients", laptops[0], idle[1])
        vote("clients", laptops[1], idle[1])
        for laptop, answer in zip(laptops, [1, 2, 2, 4]):
            vote("partitions", laptop, answer)
        for laptop, answer in zip(laptops[:10], range(10, 110, 10)):
            vote("growth", laptop, answer)   # ten distinct numbers: eight bins

        context = browser.new_context()
        page = context.new_page()
        console, errors, requests, dialogs = [], [], [], []
        page.on("console", lambda m: console.append(f"{m.text} ({m.location.get('url')})")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        try:
            response = page.goto(room.teacher_url)
            assert response.status == 200
            assert "default-src 'self'" in response.headers.get("content-security-policy", "")
            assert page.title() == "The room"
            page.locator('[data-testid=lesson][data-lesson="poll_loop"]').wait_for(timeout=LIVE_TIMEOUT_S * 1000)
            assert eventually(lambda: text(page, "[data-testid=status]"), "live") == "live"

            assert text(page, "[data-testid=laptops]") == "10"
            assert text(page, "[data-testid=messages]") == str(7 + 2 + 4 + 10)
            shown = page.locator("[data-testid=lesson]").evaluate_all("cards => cards.map(c => c.dataset.lesson)")
            assert shown == [k for k in course if k in ("poll_loop", "clients", "partitions", "growth")]
            card = page.locator('[data-testid=lesson][data-lesson="poll_loop"]')
            assert card.locator("[data-testid=number]").inner_text() == course["poll_loop"]["number"]
            assert card.locator("[data-testid=title]").inner_text() == course["poll_loop"]["title"]
            assert card.locator("[data-testid=question]").inner_text() == course["poll_loop"]["question"]
            assert card.locator("[data-testid=votes-total]").inner_text() == "7 predictions"
            assert bars(page, "poll_loop") == [("choice", yes, "3", "43%"), ("choice", no, "2", "29%"),
                                               *(("choice", c, "0", "0%") for c in others),
                                               ("other", HOSTILE, "1", "14%"), ("none", "no prediction", "1", "14%")]
            assert bars(page, "clients") == [("choice", c, "2" if c == idle[1] else "0",
                                                    "100%" if c == idle[1] else "0%") for c in idle]
            assert bars(page, "partitions") == [("bin", "1", "1", "25%"), ("bin", "2", "2", "50%"),
                                                ("bin", "4", "1", "25%")]
            growth = bars(page, "growth")
            assert len(growth) == 8 and {b[0] for b in growth} == {"bin"} and sum(int(b[2]) for b in growth) == 10
            assert growth[0][1].startswith("10") and growth[-1][1].endswith("100"), growth

            # the hostile answer is text: no element made of it, no dialog
            assert page.locator("img").count() == 0
            assert page.get_by_text(HOSTILE, exact=True).count() == 1

            # live: votes arrive while the page is open; a laptop's latest vote is the one that counts
            page.evaluate("window.notReloaded = true")
            vote("poll_loop", laptops[3], yes)
            vote("poll_loop", laptops[10], no)
            vote("poll_loop", laptops[11], no)
            expected = [("choice", yes, "4", "44%"), ("choice", no, "3", "33%"), *(("choice", c, "0", "0%") for c in others),
                        ("other", HOSTILE, "1", "11%"), ("none", "no prediction", "1", "11%")]
            assert eventually(lambda: bars(page, "poll_loop"), expected) == expected
            assert text(page, "[data-testid=laptops]") == "12"
            assert page.evaluate("window.notReloaded") is True

            # runs and exercises: hidden until Reveal
            platforms = {"linux": {"os": "Linux", "arch": "x86_64", "python": "3.12.3", "java": "21.0.5"},
                         "mac": {"os": "Darwin", "arch": "arm64", "python": "3.13.1", "java": "17.0.13"}}
            for laptop, reproduced, right, seconds, polls, where in zip(
                    laptops, [True, True, True, True, False], [True, True, False, None, False],
                    [20, 30, 40, 50, 60], [5, 3, 7, 6, 0], ["linux", "linux", "mac", "linux", "linux"]):
                send("run", "poll_loop", laptop, reproduced=reproduced, right=right, seconds=seconds,
                     measured=yes if reproduced else no, figures={"looped_polls": polls, "looped": reproduced},
                     platform=platforms[where])
            for laptop, number, right, hints in [(laptops[0], 1, True, 0), (laptops[1], 1, False, 0),
                                                 (laptops[1], 1, True, 1), (laptops[2], 1, False, 0),
                                                 (laptops[0], 2, False, 0)]:
                send("exercise", "poll_loop", laptop, number=number, right=right, hints=hints)
            total = str(7 + 2 + 4 + 10 + 3 + 5 + 5)
            assert eventually(lambda: text(page, "[data-testid=messages]"), total) == total
            assert card.locator("[data-testid=results]").count() == 0
            assert "reproduced" not in card.inner_text()

            reveal = card.locator("[data-testid=reveal]")
            reveal.click()
            results = card.locator("[data-testid=results]")
            results.wait_for()
            assert "4 of 5 laptops reproduced the failure" in results.inner_text()
            assert results.locator("[data-testid=reproduced]").inner_text() == "4"
            assert results.locator("[data-testid=runs-laptops]").inner_text() == "5"
            assert results.locator("[data-testid=right]").inner_text() == "2"
            assert results.locator("[data-testid=seconds]").inner_text() == "min 20 s · median 40 s · max 60 s"
            figure = results.locator('[data-testid=figure][data-name="looped_polls"] td').all_inner_texts()
            assert figure == ["looped_polls", "5", "0", "5", "7"]
            rows = [r.locator("td").all_inner_texts() for r in results.locator("[data-testid=platform]").all()]
            assert [r[:3] for r in rows] == [["Darwin arm64", "1", "1"], ["Linux x86_64", "4", "3"]]

            def exercise(number):
                row = results.locator(f'[data-testid=exercise][data-number="{number}"]')
                return [row.locator(f"[data-testid={k}]").inner_text()
                        for k in ("answered", "solved", "stuck", "hints")]
            assert exercise(1) == ["3", "2", "1", "0.67"]   # hints: 0, 1 (before its right answer), 1 (not solved)
            assert exercise(2) == ["1", "0", "1", "1"]
            assert page.locator('[data-lesson="clients"] [data-testid=results]').count() == 0

            # Reveal is remembered across a reload, per lesson; Hide hides again
            page.reload()
            results.wait_for(timeout=LIVE_TIMEOUT_S * 1000)
            assert reveal.get_attribute("aria-pressed") == "true"
            assert page.locator('[data-lesson="clients"] [data-testid=results]').count() == 0
            reveal.click()
            assert eventually(lambda: results.count(), 0) == 0

            # the export links carry the token, and what they give is every message
            href = page.locator("[data-testid=export-json]").evaluate("a => a.href")
            assert href == f"{room.url}/export.json?token={room.token}"
            assert page.locator("[data-testid=export-csv]").evaluate("a => a.href") == \
                f"{room.url}/export.csv?token={room.token}"
            with urllib.request.urlopen(href, timeout=10) as reply:
                assert len(json.loads(reply.read())) == int(total)

            assert page.locator("img").count() == 0
            assert not dialogs, dialogs
            assert not errors, errors
            assert not console, console
            outside = [url for url in requests if not url.startswith(room.origin + "/")]
            assert not outside, outside
            assert any(url.startswith(f"{room.url}/events?token=") for url in requests), requests
        finally:
            context.close()   # before the server stops: its end is no error of the page's
