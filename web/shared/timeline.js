// The payment-trace timeline, one component for the operator console and the inspector: one row
// per actor (client attempts, gateway, ledger, upstream, chain, reconciler, admin), every event a
// button at its time, focusable and labelled with its time, detail and structured facts. A cursor
// (setCursor) marks the events not yet played as "future" and the last one played as "current".
// Every value is put in the page as text, never as markup: details are written by whoever calls
// the gateway.
"use strict";

window.AgentPayTimeline = (function () {
  const LANES = ["client", "gateway", "ledger", "upstream", "chain", "reconciler", "admin"];

  // The row of an actor: the background workers' chain decisions are the reconciler's; the hold
  // sweeper and anything unknown are the gateway's own.
  function laneOf(event) {
    const actor = String(event.actor || "").toLowerCase();
    if (actor.startsWith("client")) return "client";
    if (actor === "worker") return /hold/.test(event.kind) ? "gateway" : "reconciler";
    return LANES.includes(actor) ? actor : "gateway";
  }

  // "bad" for what needs a look, "money" for what moves money, "" for the rest.
  function tone(kind) {
    const k = String(kind || "");
    if (/fail|void|expired|kept|pending|refus|reject|alert|unknown|reorganised/.test(k)) return "bad";
    if (/hold|capture|release|refund|settled|deposit/.test(k)) return "money";
    return "";
  }

  // The structured facts of an event as short text: "attempt 2 · amount 1000 · HTTP 200 · …".
  function factsText(event) {
    const parts = [];
    if (event.attempt) parts.push("attempt " + event.attempt);
    if (event.amount !== undefined) parts.push("amount " + event.amount);
    if (event.http_status) parts.push("HTTP " + event.http_status);
    if (event.tx_hash) parts.push("tx " + event.tx_hash);
    if (event.block !== undefined) parts.push("block " + event.block);
    if (event.reason) parts.push("reason " + event.reason);
    return parts.join(" · ");
  }

  function offset(event, t0) { return Math.max(0, Number(event.at_ms) - t0); }

  // "actor kind: detail (facts)": an event as one line of text.
  function describe(event) {
    const facts = factsText(event);
    return event.actor + " " + event.kind + ": " + event.detail + (facts ? " (" + facts + ")" : "");
  }

  function label(event, t0) { return "+" + offset(event, t0) + " ms " + describe(event); }

  function node(tag, attrs, text) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
    if (text !== undefined) n.textContent = text;
    return n;
  }

  // Draws `events` (oldest first, as the trace endpoints answer) into `box`; `onSelect(i)` is
  // called when event i is chosen (click, Enter or Space).
  function draw(box, events, options) {
    const onSelect = (options && options.onSelect) || function () {};
    box.classList.add("ap-timeline");
    if (!events.length) { box.replaceChildren(node("p", { class: "ap-empty" }, "No events.")); return; }
    const t0 = Number(events[0].at_ms);
    const span = Math.max(1, Number(events[events.length - 1].at_ms) - t0);
    const lanes = LANES.filter((lane) => events.some((e) => laneOf(e) === lane));
    const rows = lanes.map((lane) => {
      const row = node("div", { class: "ap-lane", "data-lane": lane });
      row.append(node("span", { class: "ap-lane-name" }, lane));
      events.forEach((e, i) => {
        if (laneOf(e) !== lane) return;
        const mark = node("button", { type: "button", class: "ap-mark", "data-i": i, "data-tone": tone(e.kind),
          "aria-label": label(e, t0), title: label(e, t0) });
        mark.style.left = ((offset(e, t0) / span) * 96 + 2).toFixed(2) + "%";  // CSSOM: CSP allows it
        mark.addEventListener("click", () => onSelect(i));
        row.append(mark);
      });
      return row;
    });
    const head = node("div", { class: "ap-playhead", "aria-hidden": "true" });
    head.hidden = true;
    const lanesBox = node("div", { class: "ap-lanes" });
    lanesBox.append(...rows, head);
    box.replaceChildren(lanesBox);
    box.dataset.span = String(span);
  }

  // Marks events [cursor, n) as not yet played and event cursor-1 as the current one; the playhead
  // stands `t` ms after the first event (hidden when t is undefined).
  function setCursor(box, cursor, t) {
    for (const mark of box.querySelectorAll(".ap-mark")) {
      const i = Number(mark.dataset.i);
      mark.classList.toggle("future", i >= cursor);
      mark.classList.toggle("current", i === cursor - 1);
    }
    const head = box.querySelector(".ap-playhead");
    if (!head) return;
    head.hidden = t === undefined;
    const span = Number(box.dataset.span) || 1;
    if (t !== undefined) head.style.left = ((Math.min(Math.max(0, t), span) / span) * 96 + 2).toFixed(2) + "%";
  }

  return { LANES, laneOf, tone, factsText, describe, draw, setCursor };
})();
