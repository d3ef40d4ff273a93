/* The teacher's page of the room (issue 53): the room's summary, redrawn on every server-sent `summary` event.

   Everything a learner sent (answers, figure names, platforms) is data: it goes in with textContent or
   createTextNode, never innerHTML. Nothing inline in the HTML (the page's CSP forbids it); bar widths are set
   through the CSSOM (element.style), which that CSP allows.

   Hooks for tests (tests/test_room_page.py), stable:
     header  [data-testid=laptops] [data-testid=messages]  the room's counts (digits only)
             [data-testid=status]  "live" or "reconnecting…" (class live / reconnecting / closed)
             [data-testid=export-json] [data-testid=export-csv]  links carrying the token
             [data-testid=empty]   shown while no lesson is active; [data-testid=notice] a problem (no token)
     card    [data-testid=lesson][data-lesson=KEY]  one per active lesson, course order
             [data-testid=number] [data-testid=title] [data-testid=question]
             [data-testid=votes-total]  "N predictions"
             [data-testid=bar][data-kind=choice|bin|other|none]  one per bar, in drawing order, holding
               [data-testid=bar-label] [data-testid=bar-count] (digits) [data-testid=bar-pct] ("43%")
             [data-testid=reveal]  the Reveal/Hide button (aria-pressed)
             [data-testid=results] only when revealed, holding
               [data-testid=reproduced] [data-testid=runs-laptops] [data-testid=right] (digits)
               [data-testid=seconds]  "min … · median … · max …"
               [data-testid=figure][data-name=NAME]  rows: name, n, min, median, max
               [data-testid=platform]  rows: platform, laptops, reproduced, median seconds
               [data-testid=exercise][data-number=N]  rows holding [data-testid=answered|solved|stuck|hints]
*/
"use strict";

(function () {
  const BINS = 8;
  const token = new URLSearchParams(window.location.search).get("token") || "";
  let last = null;   // the latest summary: a Reveal click redraws from it

  // ---- small DOM helpers (text only, never HTML)
  function el(tag, options, ...children) {
    const node = document.createElement(tag);
    const o = options || {};
    if (o.cls) node.className = o.cls;
    if (o.testid) node.dataset.testid = o.testid;
    if (o.data) for (const [k, v] of Object.entries(o.data)) node.dataset[k] = String(v);
    for (const child of children) {
      if (child === null || child === undefined) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  const byId = (id) => document.querySelector(`[data-testid="${id}"]`);

  function fmt(x) {
    if (x === null || x === undefined) return "–";
    if (typeof x === "boolean") return x ? "yes" : "no";
    if (typeof x !== "number" || !Number.isFinite(x)) return String(x);
    const a = Math.abs(x);
    return x.toLocaleString("en", {maximumFractionDigits: Number.isInteger(x) || a >= 100 ? 0 : a >= 10 ? 1 : 2});
  }
  const plural = (n, word) => `${word}${n === 1 ? "" : "s"}`;
  const pct = (n, total) => (total > 0 ? Math.round((100 * n) / total) : 0);

  // ---- reveal, remembered per room and lesson (localStorage may be unavailable: then per page load)
  const revealed = new Set();
  const storeKey = (room, lesson) => `the-room:${room}:reveal:${lesson}`;
  function isRevealed(room, lesson) {
    try { return window.localStorage.getItem(storeKey(room, lesson)) === "1"; }
    catch (e) { return revealed.has(lesson); }
  }
  function setRevealed(room, lesson, on) {
    if (on) revealed.add(lesson); else revealed.delete(lesson);
    try {
      if (on) window.localStorage.setItem(storeKey(room, lesson), "1");
      else window.localStorage.removeItem(storeKey(room, lesson));
    } catch (e) { /* the Set above keeps it for this page */ }
  }

  // ---- the votes as bars
  function bins(numbers) {
    const sorted = numbers.filter((x) => typeof x === "number" && Number.isFinite(x)).sort((a, b) => a - b);
    if (!sorted.length) return [];
    const distinct = [...new Set(sorted)];
    if (distinct.length <= BINS) {   // few values (counts of things): one bar each, exact
      return distinct.map((v) => ({label: fmt(v), count: sorted.filter((x) => x === v).length}));
    }
    const lo = sorted[0], hi = sorted[sorted.length - 1], width = (hi - lo) / BINS;
    const out = Array.from({length: BINS},
      (_, i) => ({label: `${fmt(lo + i * width)} – ${fmt(lo + (i + 1) * width)}`, count: 0}));
    for (const x of sorted) out[Math.min(BINS - 1, Math.floor((x - lo) / width))].count += 1;
    return out;
  }

  function bar(kind, label, count, total) {
    const fill = el("span", {cls: `bar-fill ${kind}`});
    fill.style.width = `${pct(count, total)}%`;
    return el("div", {cls: `bar ${kind}`, testid: "bar", data: {kind}},
      el("span", {cls: "bar-label", testid: "bar-label"}, label),
      el("span", {cls: "bar-track"}, fill),
      el("span", {cls: "bar-count", testid: "bar-count"}, String(count)),
      el("span", {cls: "bar-pct", testid: "bar-pct"}, `${pct(count, total)}%`));
  }

  function votesBlock(lesson) {
    const v = lesson.votes || {total: 0, none: 0, counts: {}, numbers: []};
    const total = v.total || 0;
    const counts = v.counts || {};
    const rows = [];
    if (Array.isArray(lesson.choices)) {
      for (const choice of lesson.choices) rows.push(["choice", choice, counts[choice] || 0]);
      // a number sent to a choice question (an older notebook?) still shows, as another answer
      for (const b of bins(v.numbers || [])) rows.push(["other", b.label, b.count]);
    } else {
      for (const b of bins(v.numbers || [])) rows.push(["bin", b.label, b.count]);
    }
    const known = new Set(lesson.choices || []);
    Object.entries(counts).filter(([answer]) => !known.has(answer))
      .sort((a, b) => b[1] - a[1]).forEach(([answer, n]) => rows.push(["other", answer, n]));
    if (v.none) rows.push(["none", "no prediction", v.none]);
    const block = el("div", {cls: "votes"},
      el("p", {cls: "votes-total", testid: "votes-total"}, `${total} ${plural(total, "prediction")}`));
    if (!total) block.append(el("p", {cls: "quiet"}, "No predictions yet."));
    else for (const [kind, label, n] of rows) block.append(bar(kind, label, n, total));
    return block;
  }

  // ---- the runs and exercises, once revealed
  function table(headings, rows) {
    const head = el("tr", {}, ...headings.map((h) => el("th", {}, h)));
    return el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows));
  }
  const cell = (value, testid) => el("td", testid ? {testid} : {}, value);
  const spread = (s, unit) => (s
    ? `min ${fmt(s.min)}${unit} · median ${fmt(s.median)}${unit} · max ${fmt(s.max)}${unit}` : "–");

  function resultsBlock(lesson) {
    const runs = lesson.runs || {laptops: 0};
    const box = el("div", {cls: "results", testid: "results"});
    if (!runs.laptops) {
      box.append(el("p", {cls: "quiet"}, "No runs yet."));
    } else {
      box.append(
        el("p", {cls: "headline"},
          el("strong", {testid: "reproduced"}, String(runs.reproduced || 0)), " of ",
          el("strong", {testid: "runs-laptops"}, String(runs.laptops)),
          ` ${plural(runs.laptops, "laptop")} reproduced the failure`),
        el("p", {}, el("strong", {testid: "right"}, String(runs.right || 0)), " predicted it right"),
        el("p", {}, "Run length: ", el("span", {testid: "seconds"}, spread(runs.seconds, " s"))));
      const figures = Object.entries(runs.figures || {});
      if (figures.length) {
        box.append(el("h3", {}, "Figures"), table(["figure", "laptops", "min", "median", "max"],
          figures.map(([name, f]) => el("tr", {testid: "figure", data: {name}},
            cell(name), cell(fmt(f.n)), cell(fmt(f.min)), cell(fmt(f.median)), cell(fmt(f.max))))));
      }
      const platforms = runs.platforms || [];
      if (platforms.length) {
        box.append(el("h3", {}, "Platforms"), table(["platform", "laptops", "reproduced", "run length"],
          platforms.map((p) => el("tr", {testid: "platform"}, cell(p.platform), cell(fmt(p.laptops)),
            cell(fmt(p.reproduced)), cell(spread(p.seconds, " s"))))));
      }
    }
    const exercises = lesson.exercises || [];
    if (exercises.length) {
      box.append(el("h3", {}, "Exercises"), table(["exercise", "answered", "solved", "stuck", "hints (mean)"],
        exercises.map((x) => el("tr", {testid: "exercise", data: {number: x.number}},
          cell(fmt(x.number)), cell(String(x.answered), "answered"), cell(String(x.solved), "solved"),
          cell(String(x.answered - x.solved), "stuck"), cell(fmt(x.hints_mean), "hints")))));
    } else {
      box.append(el("p", {cls: "quiet"}, "No exercise answered yet."));
    }
    return box;
  }

  // ---- a card a lesson
  function card(room, lesson) {
    const open = isRevealed(room, lesson.lesson);
    const button = el("button", {cls: "reveal", testid: "reveal"}, open ? "Hide" : "Reveal");
    button.type = "button";
    button.setAttribute("aria-pressed", String(open));
    button.addEventListener("click", () => {
      setRevealed(room, lesson.lesson, !open);
      if (last) render(last);
    });
    const section = el("section", {cls: "card", testid: "lesson", data: {lesson: lesson.lesson}},
      el("header", {cls: "card-head"},
        el("span", {cls: "number", testid: "number"}, lesson.number || ""),
        el("h2", {testid: "title"}, lesson.title || lesson.lesson),
        button),
      el("p", {cls: "question", testid: "question"}, lesson.question || ""),
      votesBlock(lesson));
    if (open) section.append(resultsBlock(lesson));
    return section;
  }

  function render(summary) {
    last = summary;
    byId("laptops").textContent = String(summary.laptops || 0);
    byId("laptops-unit").textContent = plural(summary.laptops || 0, "laptop");
    byId("messages").textContent = String(summary.messages || 0);
    byId("messages-unit").textContent = plural(summary.messages || 0, "message");
    const active = (summary.lessons || []).filter((l) => l.active);
    byId("empty").hidden = active.length > 0;
    byId("lessons").replaceChildren(...active.map((l) => card(summary.room, l)));
  }

  function status(text, cls) {
    const node = byId("status");
    node.textContent = text;
    node.className = `status ${cls}`;
  }

  function connect() {
    const source = new EventSource(`events?token=${encodeURIComponent(token)}`);
    source.addEventListener("open", () => status("live", "live"));
    source.addEventListener("summary", (event) => {
      status("live", "live");
      try { render(JSON.parse(event.data)); }
      catch (e) { status("bad data", "closed"); }
    });
    source.addEventListener("error", () => {
      if (source.readyState === EventSource.CLOSED) {   // the browser gave up (server gone, refused): retry later
        status("reconnecting…", "reconnecting");
        source.close();
        window.setTimeout(connect, 5000);
      } else {
        status("reconnecting…", "reconnecting");
      }
    });
  }

  function start() {
    const query = `?token=${encodeURIComponent(token)}`;
    byId("export-json").href = `export.json${query}`;
    byId("export-csv").href = `export.csv${query}`;
    if (!token) {
      const notice = byId("notice");
      notice.textContent = "This page needs its token: open the teacher's link the server printed.";
      notice.hidden = false;
      status("no token", "closed");
      return;
    }
    connect();
  }

  start();
}());
