// The AgentPay inspector. It draws what GET /v1/sim returns; there is no model in JavaScript:
// every time, count and outcome on the page is read from the run's events and result. It also
// plays a real operation's payment trace (trace mode): one the console links to
// (#operation=<id>, read from the admin API with the console's token, on the admin listener) or a
// saved trace file; the timeline is the console's component (timeline.js).
"use strict";

(function () {
  const PARAMS = ["fault", "service_ms", "timeout_ms", "max_attempts", "initial_delay_ms",
    "jitter", "dedup", "retry_key", "retention_ms"];
  const DEFAULTS = {fault: "none", service_ms: 200, timeout_ms: 1000, max_attempts: 3,
    initial_delay_ms: 1000, jitter: false, dedup: "on", retry_key: "stable", retention_ms: 86400000};
  const EXPERIMENTS = {
    "slow-service": {set: {service_ms: 8000, timeout_ms: 1000, max_attempts: 3},
      note: "Every attempt times out long before the one operation commits at 8 s: the client gives up " +
        "(exhausted) although the effect happens, once, and its answers arrive as late acks."},
    "one-attempt": {set: {service_ms: 5000, timeout_ms: 1000, max_attempts: 1},
      note: "One attempt, 1 s of patience, 5 s of work: the client stops at 1 s; the server commits at 5 s."},
    "retention-zero": {set: {fault: "lost_response", service_ms: 500, timeout_ms: 1000, max_attempts: 3,
      retention_ms: 0},
      note: "The first commit's answer is lost; with retention 0 the retry finds the key forgotten and " +
        "starts again: two effects, a double charge made by forgetting."},
    "new-key": {set: {service_ms: 2000, timeout_ms: 1000, max_attempts: 3, retry_key: "new"},
      note: "Each retry carries a fresh key, so deduplication cannot recognise it: one operation per attempt."},
    "dedup-off": {set: {service_ms: 2000, timeout_ms: 1000, max_attempts: 3, dedup: "off"},
      note: "Without deduplication every retry starts a new operation, and each commits an effect."},
  };
  const $ = (id) => document.getElementById(id);

  const state = {run: null, t: 0, cursor: 0, playing: false, lastFrame: 0, seq: 0, end: 1, mode: "model"};
  const TOKEN_KEY = "agentpay-admin-token";  // the console's, in this tab's sessionStorage
  const MAX_TRACE_EVENTS = 10000;
  const MAX_TRACE_SPAN_MS = 366 * 86400000;  // a year: playable, and no infinite span from a file

  // ---- parameters -------------------------------------------------------------------------
  function readControls() {
    const query = new URLSearchParams();
    for (const name of PARAMS) {
      const el = $(name);
      if (el.type === "checkbox") { if (el.checked) query.set(name, "true"); continue; }
      query.set(name, el.value.trim());
    }
    return query;
  }

  function setControls(values) {
    for (const name of PARAMS) {
      const el = $(name);
      const value = name in values ? values[name] : DEFAULTS[name];
      if (el.type === "checkbox") el.checked = Boolean(value); else el.value = String(value);
    }
  }

  async function fetchRun() {
    const seq = ++state.seq;
    pause();
    setMode("model");
    setStatus("loading", "loading…");
    let body;
    try {
      const response = await fetch("../v1/sim?" + readControls().toString(), {cache: "no-store"});
      body = await response.json();
      if (seq !== state.seq) return;
      if (!response.ok) { setStatus("error", "error: " + (body.detail || body.title || response.status)); return; }
    } catch (error) {
      if (seq === state.seq) setStatus("error", "error: " + error.message);
      return;
    }
    loadRun(body);
    setStatus("ready", "ready: " + body.events.length + " events, " + body.result.client_outcome);
  }

  function setStatus(kind, text) {
    const el = $("run-status");
    el.dataset.state = kind;
    el.textContent = text;
  }

  // ---- run and playback ---------------------------------------------------------------------
  function loadRun(run) {
    state.run = run;
    const last = run.events.length ? run.events[run.events.length - 1].at_ms : 0;
    state.end = Math.max(1, last);
    $("timeline").max = String(state.end);
    if (state.mode === "trace") {
      AgentPayTimeline.draw($("trace-timeline"), run.events, {onSelect: (i) => {
        pause();
        seekTo(run.events[i].at_ms, i + 1);
      }});
    } else {
      showResult(run.result);
      drawChart();
    }
    seekTo(0, 0);
  }

  // ---- trace mode ---------------------------------------------------------------------------
  function setMode(mode) {
    state.mode = mode;
    const trace = mode === "trace";
    // The attribute, not the property: the chart is an SVG element, which has no `hidden` property.
    for (const id of ["controls", "chart", "legend", "panels", "result-panel", "lede-model", "experiments-nav"]) {
      $(id).toggleAttribute("hidden", trace);
    }
    for (const id of ["trace-timeline", "trace-panels", "back-to-model", "lede-trace"]) {
      $(id).toggleAttribute("hidden", !trace);
    }
  }

  // A trace answer ({"events": [...]}, oldest first) as a run whose times start at 0; null and a
  // reason when `doc` is not one.
  function traceRun(doc) {
    if (!doc || typeof doc !== "object" || !Array.isArray(doc.events)) return {error: "no \"events\" list"};
    if (doc.events.length > MAX_TRACE_EVENTS) return {error: "more than " + MAX_TRACE_EVENTS + " events"};
    // Only the fields the page draws, each of the type the trace endpoints answer; nothing else of
    // the file is kept.
    const events = [];
    for (const ev of doc.events) {
      if (!ev || typeof ev !== "object" || typeof ev.at_ms !== "number" || !Number.isFinite(ev.at_ms) ||
          typeof ev.actor !== "string" || typeof ev.kind !== "string" || typeof ev.detail !== "string") {
        return {error: "an event without a numeric at_ms and text actor, kind and detail"};
      }
      const clean = {at_ms: ev.at_ms, actor: ev.actor, kind: ev.kind, detail: ev.detail};
      for (const name of ["attempt", "http_status", "block"]) {
        if (typeof ev[name] === "number" && Number.isFinite(ev[name])) clean[name] = ev[name];
      }
      for (const name of ["amount", "tx_hash", "reason"]) {
        if (typeof ev[name] === "string") clean[name] = ev[name];
      }
      events.push(clean);
    }
    const sorted = events.map((ev, i) => ({ev, i})).sort((a, b) => a.ev.at_ms - b.ev.at_ms || a.i - b.i)
      .map((x) => x.ev);
    const t0 = sorted.length ? sorted[0].at_ms : 0;
    if (sorted.length && sorted[sorted.length - 1].at_ms - t0 > MAX_TRACE_SPAN_MS) {
      return {error: "its events span more than a year"};
    }
    return {run: {events: sorted.map((ev) => Object.assign(ev, {at_ms: ev.at_ms - t0}))}};
  }

  function openTrace(doc, source) {
    const parsed = traceRun(doc);
    if (parsed.error) { setStatus("error", "error: " + source + " is not a payment trace (" + parsed.error + ")"); return; }
    pause();
    setMode("trace");
    loadRun(parsed.run);
    $("t-operation").textContent = source;
    setStatus("ready", "ready: " + parsed.run.events.length + " events of " + source);
  }

  async function fetchOperationTrace(id) {
    const seq = ++state.seq;
    pause();
    setMode("trace");
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (!token) {
      setStatus("error", "error: sign in to the console on this address first (the token stays in its tab)");
      return;
    }
    setStatus("loading", "loading the trace of " + id + "…");
    let answer, body;
    try {
      answer = await fetch("../admin/v1/operations/" + encodeURIComponent(id) + "/trace",
        {cache: "no-store", headers: {Authorization: "Bearer " + token}});
      body = await answer.json();
    } catch (error) {
      if (seq === state.seq) setStatus("error", "error: " + error.message);
      return;
    }
    if (seq !== state.seq) return;
    if (!answer.ok) { setStatus("error", "error: " + (body.detail || body.title || answer.status)); return; }
    openTrace(body, id);
  }

  function openTraceFile(file) {
    if (!file) return;
    if (file.size > 16 * 1024 * 1024) { setStatus("error", "error: " + file.name + " is larger than 16 MiB"); return; }
    ++state.seq;
    file.text().then((text) => {
      let doc;
      try { doc = JSON.parse(text); } catch (error) {
        setStatus("error", "error: " + file.name + " is not JSON (" + error.message + ")");
        return;
      }
      history.replaceState(null, "", location.pathname);
      try { openTrace(doc, file.name); } catch (error) { setStatus("error", "error: " + error.message); }
    }, (error) => setStatus("error", "error: " + error.message));
  }

  function operationInHash() {
    const params = new URLSearchParams(location.hash.replace(/^#/, ""));
    const id = params.get("operation");
    return id && id.length <= 255 ? id : null;
  }

  // What the trace's events up to the cursor add up to: attempts, repeated arrivals, money.
  function renderTrace(events) {
    let attempts = 0, repeats = 0, status = null, tx = null, block = null;
    const money = {hold: 0, capture: 0, release: 0, refund: 0};
    let onChain = 0;
    for (const ev of events) {
      if (ev.attempt) attempts = Math.max(attempts, ev.attempt);
      if (ev.actor === "client" && ["replayed", "attached", "mismatch_refused"].includes(ev.kind)) repeats++;
      if (ev.http_status) status = ev.http_status;
      if (ev.tx_hash) tx = ev.tx_hash;
      if (ev.block !== undefined) block = ev.block;
      if (ev.actor === "ledger" && ev.kind in money && ev.amount !== undefined) money[ev.kind] += Number(ev.amount);
      // The chain's word on an x402 payment (a later reorganisation takes it back).
      if (ev.actor === "chain" && (ev.kind === "settled" || ev.kind === "mined") && ev.amount !== undefined) {
        onChain = Number(ev.amount);
      }
      if (ev.kind === "settlement_reorganised") onChain = 0;
    }
    $("t-attempts").textContent = String(attempts);
    $("t-repeats").textContent = String(repeats);
    $("t-status").textContent = status === null ? "–" : String(status);
    $("t-tx").textContent = tx || "–";
    $("t-block").textContent = block === null ? "–" : String(block);
    $("t-held").textContent = String(money.hold - money.capture - money.release);
    $("t-captured").textContent = String(money.capture - money.refund);
    $("t-released").textContent = String(money.release);
    $("t-refunded").textContent = String(money.refund);
    $("t-onchain").textContent = String(onChain);
    const current = events[events.length - 1];
    $("t-current").textContent = current ? describe(current) : "none yet";
  }

  function countAt(t) {
    let n = 0;
    for (const ev of state.run.events) { if (ev.at_ms <= t) n++; else break; }
    return n;
  }

  // Moves the playhead to model time t with `cursor` events applied (default: all events at or before t).
  function seekTo(t, cursor) {
    if (!state.run) return;
    state.t = Math.min(Math.max(0, t), state.end);
    state.cursor = cursor === undefined ? countAt(state.t) : cursor;
    render();
  }

  function nextEvent() {
    if (!state.run) return;
    pause();
    if (state.cursor >= state.run.events.length) return;
    const ev = state.run.events[state.cursor];
    seekTo(ev.at_ms, state.cursor + 1);
  }

  function speed() { return Number($("speed").value) || 1; }

  function play() {
    if (!state.run) return;
    if (state.cursor >= state.run.events.length) seekTo(0, 0);
    state.playing = true;
    state.lastFrame = performance.now();
    $("play").setAttribute("aria-pressed", "true");
    requestAnimationFrame(frame);
  }

  function pause() {
    state.playing = false;
    $("play").setAttribute("aria-pressed", "false");
  }

  function frame(now) {
    if (!state.playing) return;
    const elapsed = Math.max(0, now - state.lastFrame);
    state.lastFrame = now;
    seekTo(state.t + elapsed * speed());
    if (state.cursor >= state.run.events.length) { pause(); return; }
    requestAnimationFrame(frame);
  }

  // ---- derived view of the applied events --------------------------------------------------
  function applied() { return state.run.events.slice(0, state.cursor); }

  function describe(ev) {
    if (state.mode === "trace") return AgentPayTimeline.describe(ev);
    const a = ev.attempt ? " attempt " + ev.attempt : "";
    const o = ev.operation ? " op " + ev.operation : "";
    const k = ev.key ? " (" + ev.key + ")" : "";
    const text = {
      send: "sends" + a + k, ack: "ack for" + a + " from" + o, receive_503: "503 received by" + a,
      receive_400: "400 received by" + a, late_ack: "late ack for" + a + (o ? " from" + o : "") + ": ignored",
      timeout: "timeout of" + a + ": stops waiting, server work goes on",
      retry_scheduled: "retry scheduled:" + a, success: "client stops: success", rejected: "client stops: rejected",
      exhausted: "client stops: exhausted (reconciliation flag)",
      server_start: "starts" + o + " for" + a + k, attach: a + " attaches to" + o + " in flight",
      replay: "replays stored success of" + o + " to" + a, forget: "forgets" + k + " of" + o + " (past retention)",
      respond_503: "answers 503 to" + a, respond_400: "answers 400 to" + a, commit: "commits" + o + k + ": one effect",
      respond_success: "answers success to" + a + " (" + o.trim() + ")", response_lost: "loses response to" + a,
    }[ev.kind] || ev.kind + a + o + k;
    return text.replace(/\s+/g, " ").trim();
  }

  function clientView(events) {
    const attempts = new Map();
    let outcome = events.length ? "running" : "not started";
    for (const ev of events) {
      if (ev.actor !== "client") continue;
      if (ev.kind === "send") attempts.set(ev.attempt, {sent: ev.at_ms, key: ev.key, state: "waiting", late: 0});
      const at = attempts.get(ev.attempt);
      if (ev.kind === "ack") at.state = "ack at " + ev.at_ms + " ms";
      if (ev.kind === "timeout") at.state = "timed out at " + ev.at_ms + " ms";
      if (ev.kind === "receive_503") at.state = "503 at " + ev.at_ms + " ms";
      if (ev.kind === "receive_400") at.state = "400 at " + ev.at_ms + " ms";
      if (ev.kind === "late_ack" && at) at.late++;
      if (["success", "rejected", "exhausted"].includes(ev.kind)) outcome = ev.kind;
    }
    return {attempts, outcome};
  }

  function serverView(events) {
    const ops = new Map();
    const effects = [];
    for (const ev of events) {
      if (ev.actor !== "server") continue;
      if (ev.kind === "server_start") ops.set(ev.operation, {start: ev.at_ms, key: ev.key, attempts: [ev.attempt], notes: []});
      const op = ops.get(ev.operation);
      if (ev.kind === "attach") { op.attempts.push(ev.attempt); op.notes.push("attempt " + ev.attempt + " attached"); }
      if (ev.kind === "replay") op.notes.push("replayed to attempt " + ev.attempt + " at " + ev.at_ms + " ms");
      if (ev.kind === "forget") op.notes.push("key forgotten at " + ev.at_ms + " ms");
      if (ev.kind === "commit") { op.commit = ev.at_ms; effects.push(ev); }
    }
    return {ops, effects};
  }

  // ---- rendering ----------------------------------------------------------------------------
  function listInto(el, items) {
    el.replaceChildren(...items.map((item) => {
      const li = document.createElement("li");
      if (typeof item === "string") li.textContent = item; else { li.textContent = item.text; li.className = item.cls || ""; }
      return li;
    }));
  }

  function render() {
    if (!state.run) return;
    const events = applied();
    if (state.mode === "trace") renderTrace(events); else renderModel(events);
    const recent = events.slice(-10).reverse();
    listInto($("recent"), recent.map((ev, i) => ({text: "#" + (state.cursor - i) + "  " + ev.at_ms + " ms · " +
      ev.actor + " · " + describe(ev), cls: "actor-" + ev.actor + (i === 0 ? " newest" : "")})));
    $("event-count").textContent = state.cursor + " / " + state.run.events.length;
    $("timeline").value = String(state.t);
    $("timeline").setAttribute("aria-valuetext", Math.round(state.t) + " ms" +
      (state.mode === "trace" ? " after the first event" : " of model time"));
    $("model-ms").textContent = Math.round(state.t) + " ms";
    $("inspect-s").textContent = (state.t / speed() / 1000).toFixed(2) + " s";
    $("stage").dataset.cursor = String(state.cursor);
    $("stage").dataset.done = String(state.cursor >= state.run.events.length);
    if (state.mode === "trace") AgentPayTimeline.setCursor($("trace-timeline"), state.cursor, state.t);
    else updateChartPlayhead();
  }

  function renderModel(events) {
    const {attempts, outcome} = clientView(events);
    const {ops, effects} = serverView(events);
    const outcomeEl = $("client-outcome");
    outcomeEl.textContent = outcome;
    outcomeEl.className = "outcome-" + outcome.replace(" ", "-");
    listInto($("attempts"), [...attempts].map(([n, at]) => ({
      text: "Attempt " + n + " (" + at.key + "): sent " + at.sent + " ms, " + at.state +
        (at.late ? ", " + at.late + " late ack" : ""), cls: at.state === "waiting" ? "live" : ""})));
    listInto($("operations"), [...ops].map(([n, op]) => ({
      text: "Operation " + n + " (" + op.key + "): started " + op.start + " ms, " +
        (op.commit === undefined ? "in flight" : "committed " + op.commit + " ms") +
        (op.notes.length ? "; " + op.notes.join("; ") : ""), cls: op.commit === undefined ? "live" : ""})));
    $("ledger-effects").textContent = String(effects.length);
    $("ledger-noun").textContent = effects.length === 1 ? "effect" : "effects";
    $("ledger-panel").dataset.effects = String(effects.length);
    const verdict = effects.length === 0 ? "no effect yet" : effects.length === 1 ? "exactly the one intended"
      : "DUPLICATE: " + effects.length + " effects for 1 intent";
    $("ledger-verdict").textContent = verdict;
    $("ledger-panel").classList.toggle("dup", effects.length > 1);
    listInto($("ledger-list"), effects.map((ev, i) => "+1 at " + ev.at_ms + " ms (operation " + ev.operation +
      ", " + ev.key + ")" + (i > 0 ? " — duplicate" : "")));
  }

  function showResult(r) {
    $("r-outcome").textContent = r.client_outcome;
    $("r-attempts").textContent = String(r.attempts);
    $("r-operations").textContent = String(r.server_operations);
    $("r-effects").textContent = r.effects + " / " + r.intended;
    $("r-effects").className = r.effects > r.intended ? "bad" : r.effects === r.intended ? "good" : "warn";
    $("r-late").textContent = String(r.late_acks);
    $("r-flag").textContent = r.reconciliation_flag ? "raised (client must reconcile)" : "no";
  }

  // ---- chart (SVG) -------------------------------------------------------------------------
  const SVGNS = "http://www.w3.org/2000/svg";
  const chart = {x: null, width: 900, left: 120};

  function el(name, attrs, text) {
    const node = document.createElementNS(SVGNS, name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function drawChart() {
    const svg = $("chart");
    const run = state.run;
    const nAttempts = run.result.attempts, nOps = run.result.server_operations;
    const rowH = 22, top = 22;
    const rows = nAttempts + nOps + 1;
    const height = top + rows * rowH + 34;
    const width = chart.width, left = chart.left, right = 36;
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    svg.replaceChildren();
    const x = (t) => left + (t / state.end) * (width - left - right);
    chart.x = x;
    const yAttempt = (a) => top + (a - 1) * rowH;
    const yOp = (o) => top + (nAttempts + o - 1) * rowH;
    const yLedger = top + (nAttempts + nOps) * rowH;
    svg.append(el("text", {x: 4, y: yAttempt(1) + 15, class: "lane-title"}, "client"));
    if (nOps) svg.append(el("text", {x: 4, y: yOp(1) + 15, class: "lane-title"}, "server"));
    svg.append(el("text", {x: 4, y: yLedger + 15, class: "lane-title"}, "ledger"));
    for (let a = 1; a <= nAttempts; a++) svg.append(el("text", {x: 58, y: yAttempt(a) + 15, class: "row-label"}, "attempt " + a));
    for (let o = 1; o <= nOps; o++) svg.append(el("text", {x: 58, y: yOp(o) + 15, class: "row-label"}, "op " + o));
    svg.append(el("line", {x1: 4, x2: width - 4, y1: yOp(1) - 1, y2: yOp(1) - 1, class: "lane-sep"}));
    svg.append(el("line", {x1: 4, x2: width - 4, y1: yLedger - 1, y2: yLedger - 1, class: "lane-sep"}));
    const step = niceStep(state.end / 5);
    for (let t = 0; t <= state.end; t += step) {
      svg.append(el("line", {x1: x(t), x2: x(t), y1: top - 4, y2: yLedger + rowH, class: "grid"}));
      svg.append(el("text", {x: x(t), y: height - 6, class: "tick", "text-anchor": "middle"}, formatMs(t)));
    }
    drawSpans(svg, run.events, x, yAttempt, yOp);
    run.events.forEach((ev, i) => {
      const y = ev.kind === "commit" ? yLedger : ev.actor === "server" && ev.operation ? yOp(ev.operation)
        : ev.attempt ? yAttempt(ev.attempt) : yLedger;
      const mark = el("circle", {cx: x(ev.at_ms), cy: y + 11, r: ev.kind === "commit" ? 7 : 5,
        class: "ev k-" + ev.kind + " a-" + ev.actor, "data-i": i});
      mark.append(el("title", {}, ev.at_ms + " ms: " + describe(ev)));
      svg.append(mark);
    });
    svg.append(el("line", {id: "playhead", x1: left, x2: left, y1: top - 8, y2: yLedger + rowH, class: "playhead"}));
  }

  function niceStep(raw) {
    const power = Math.pow(10, Math.floor(Math.log10(Math.max(1, raw))));
    for (const m of [1, 2, 5, 10]) if (m * power >= raw) return Math.max(1, m * power);
    return 10 * power;
  }

  function formatMs(t) { return t >= 10000 && t % 1000 === 0 ? t / 1000 + " s" : t + " ms"; }

  // Bars from an attempt's send to its end (ack, timeout, 503, 400) and from an operation's start to its
  // commit; they grow with the playhead (updateChartPlayhead), so waiting visibly ends while work goes on.
  function drawSpans(svg, events, x, yAttempt, yOp) {
    const sends = new Map(), starts = new Map();
    const bar = (from, ev, y, cls) => svg.append(el("rect", {x: x(from.at), y: y + 6, height: 10, width: 0,
      class: "span " + cls, "data-from": from.at, "data-to": ev.at_ms, "data-i": from.i}));
    events.forEach((ev, i) => {
      if (ev.kind === "send") sends.set(ev.attempt, {at: ev.at_ms, i});
      if (ev.kind === "server_start") starts.set(ev.operation, {at: ev.at_ms, i});
      const endsAttempt = ["ack", "timeout", "receive_503", "receive_400"].includes(ev.kind);
      if (endsAttempt && sends.has(ev.attempt)) bar(sends.get(ev.attempt), ev, yAttempt(ev.attempt), "wait k-" + ev.kind);
      if (ev.kind === "commit" && starts.has(ev.operation)) bar(starts.get(ev.operation), ev, yOp(ev.operation), "work");
    });
  }

  function updateChartPlayhead() {
    if (!chart.x) return;
    const px = chart.x(state.t);
    const head = $("playhead");
    head.setAttribute("x1", px);
    head.setAttribute("x2", px);
    for (const mark of $("chart").querySelectorAll("circle.ev")) {
      mark.classList.toggle("future", Number(mark.dataset.i) >= state.cursor);
    }
    for (const span of $("chart").querySelectorAll("rect.span")) {
      const from = Number(span.dataset.from), to = Number(span.dataset.to);
      const started = Number(span.dataset.i) < state.cursor;
      const upTo = Math.min(state.t, to);
      span.setAttribute("width", started ? String(Math.max(2, chart.x(upTo) - chart.x(from))) : "0");
    }
  }

  // ---- wiring -------------------------------------------------------------------------------
  function runExperiment(name) {
    const experiment = EXPERIMENTS[name];
    setControls(Object.assign({}, DEFAULTS, experiment.set));
    $("experiment-note").textContent = experiment.note;
    for (const link of document.querySelectorAll("[data-experiment]")) {
      link.setAttribute("aria-current", link.dataset.experiment === name ? "true" : "false");
    }
    fetchRun();
  }

  function init() {
    setControls(DEFAULTS);
    for (const name of PARAMS) $(name).addEventListener("change", fetchRun);
    $("controls").addEventListener("submit", (e) => { e.preventDefault(); fetchRun(); });
    for (const link of document.querySelectorAll("[data-experiment]")) {
      link.addEventListener("click", (e) => { e.preventDefault(); runExperiment(link.dataset.experiment); });
    }
    $("play").addEventListener("click", play);
    $("pause").addEventListener("click", pause);
    $("next-event").addEventListener("click", nextEvent);
    $("restart").addEventListener("click", () => { pause(); seekTo(0, 0); });
    $("speed").addEventListener("change", render);
    const onSeek = () => { pause(); seekTo(Number($("timeline").value)); };
    $("timeline").addEventListener("input", onSeek);
    $("timeline").addEventListener("change", onSeek);
    $("trace-file").addEventListener("change", (e) => openTraceFile(e.target.files[0]));
    const fromHash = () => { const id = operationInHash(); if (id) fetchOperationTrace(id); else fetchRun(); };
    window.addEventListener("hashchange", fromHash);
    fromHash();
  }

  init();
})();
