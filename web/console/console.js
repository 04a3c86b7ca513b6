// AgentPay operator console: plain JavaScript, no dependencies, served by `agentpay serve` on the
// admin listener at /console/. Every number comes from the admin API (docs/console.md); the admin
// token lives in this tab's sessionStorage and travels only in the Authorization header of this
// page's own same-origin requests. Every value from the store is put in the page as text, never
// as markup: keys, routes, details and notes are written by whoever calls the gateway.
(function () {
  "use strict";

  const TOKEN_KEY = "agentpay-admin-token";
  const REFRESH_MS = 2000;
  const PAGE = 50;
  const VIEWS = ["signin", "overview", "alerts", "operations", "operation", "accounts", "account"];

  const $ = (id) => document.getElementById(id);
  const state = { route: null, shown: {}, drafts: {}, loading: false, operationsPages: 1 };

  // ------------------------------------------------------------------------------------ helpers

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "text") node.textContent = String(value);
      else if (name === "style") Object.assign(node.style, value);  // CSSOM: allowed by the CSP
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function time(ms) {
    if (ms === null || ms === undefined) return "—";
    return new Date(Number(ms)).toISOString().replace("T", " ").slice(0, 19) + " UTC";
  }

  function age(ms) {
    if (ms === null || ms === undefined) return "—";
    const s = Math.round(Number(ms) / 1000);
    if (s < 120) return s + " s";
    const m = Math.round(s / 60);
    if (m < 120) return m + " min";
    return Math.round(m / 60) + " h";
  }

  function stateBadge(name, value) {
    const bad = ["unknown", "failed", "void", "pending_retry"].includes(value);
    return el("span", { class: "state", "data-bad": bad, title: name, text: value });
  }

  function table(headers, rows, caption) {
    return el("div", { class: "scroll" },
      el("table", {},
        caption ? el("caption", { class: "note", text: caption }) : null,
        el("thead", {}, el("tr", {}, headers.map((h) => el("th", { scope: "col", text: h })))),
        el("tbody", {}, rows.map((cells) => el("tr", {}, cells.map((c) => el("td", {}, c)))))));
  }

  function operationLink(id) {
    return el("a", { href: "#/operations/" + encodeURIComponent(id), class: "mono", text: id });
  }

  function principalLink(principal) {
    if (principal && principal.startsWith("account:")) {
      const id = principal.slice("account:".length);
      return el("a", { href: "#/accounts/" + encodeURIComponent(id), class: "mono", text: principal });
    }
    return el("span", { class: "mono", text: principal });
  }

  function setLive(text) { $("live").textContent = text; }

  // Asks for a confirmation in a modal dialog; resolves true on Confirm.
  function confirmAction(text, confirmLabel) {
    const dialog = $("confirm");
    $("confirm-text").textContent = text;
    $("confirm-ok").textContent = confirmLabel || "Confirm";
    dialog.returnValue = "";
    dialog.showModal();
    $("confirm-ok").focus();
    return new Promise((resolve) => {
      dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    });
  }

  // ------------------------------------------------------------------------------------ the API

  class Unauthorized extends Error {}

  async function api(path, method, body) {
    const token = sessionStorage.getItem(TOKEN_KEY) || "";
    const headers = { Authorization: "Bearer " + token };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const response = await fetch(path, {
      method: method || "GET", headers, cache: "no-store", credentials: "omit",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    let json = null;
    try { json = await response.json(); } catch (e) { json = null; }
    if (response.status === 401) {
      signOut("The gateway refused the admin token: sign in again.");
      throw new Unauthorized();
    }
    return { status: response.status, json, replayed: response.headers.get("Idempotent-Replayed") };
  }

  function problemText(answer) {
    const j = answer.json || {};
    return (j.code ? j.code + ": " : "") + (j.detail || "HTTP " + answer.status);
  }

  // ------------------------------------------------------------------------------------ routing

  function parseRoute() {
    const hash = decodeURIComponent(location.hash.replace(/^#\/?/, "")).trim();
    const [pathPart, queryPart] = hash.split("?");
    const parts = pathPart.split("/").filter(Boolean);
    const params = Object.fromEntries(new URLSearchParams(queryPart || ""));
    let name = parts[0] || "overview";
    let arg = parts.slice(1).join("/");
    if (name === "operations" && arg) name = "operation";
    if (name === "accounts" && arg) name = "account";
    if (!VIEWS.includes(name)) name = "overview";
    return { name, arg, params };
  }

  function show(name) {
    for (const view of VIEWS) $(view + "-view").hidden = view !== name;
    const signedIn = name !== "signin";
    $("nav").hidden = !signedIn;
    for (const link of $("nav").querySelectorAll("a")) {
      const target = link.getAttribute("href").slice(2);
      const current = target === name || (name === "operation" && target === "operations") ||
                      (name === "account" && target === "accounts");
      if (current) link.setAttribute("aria-current", "page"); else link.removeAttribute("aria-current");
    }
  }

  async function navigate() {
    if (!sessionStorage.getItem(TOKEN_KEY)) {
      show("signin");
      $("token").focus();
      return;
    }
    const route = parseRoute();
    const changed = !state.route || state.route.name !== route.name || state.route.arg !== route.arg ||
                    JSON.stringify(state.route.params) !== JSON.stringify(route.params);
    state.route = route;
    if (changed) {
      state.shown = {};
      state.operationsPages = 1;
      show(route.name);
      if (route.name === "operations") fillFilters(route.params);
      $("main").focus({ preventScroll: true });
    }
    await refresh();
  }

  // Loads the current view's data. Containers are redrawn only when what they show changed, and
  // forms are never redrawn: the operator's place, focus and typing survive the live refresh.
  async function refresh() {
    if (state.loading || !state.route || $("confirm").open) return;
    state.loading = true;
    try {
      await LOADERS[state.route.name](state.route);
      setLive("Updated " + new Date().toLocaleTimeString());
    } catch (error) {
      if (!(error instanceof Unauthorized)) setLive("Could not reach the gateway: " + error.message);
    } finally {
      state.loading = false;
    }
  }

  function redraw(id, data, build) {
    const key = JSON.stringify(data);
    if (state.shown[id] === key) return;
    const container = $(id);
    const focusedId = document.activeElement && container.contains(document.activeElement)
      ? document.activeElement.id : null;
    container.replaceChildren(...[].concat(build(data)).filter((node) => node !== null && node !== undefined));
    state.shown[id] = key;
    if (focusedId && $(focusedId)) $(focusedId).focus();
  }

  // ------------------------------------------------------------------------------------ sign in

  function signOut(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    state.route = null;
    state.shown = {};
    for (const id
             of ['cards', 'attention', 'facilitator-sellers', 'audit-result', 'alerts',
                 'operations', 'operation', 'timeline', 'trace', 'accounts', 'account', 'keys',
                 'account-operations', 'created', 'new-key', 'deposit-result']) {
      $(id).replaceChildren();
    }
    $("signin-error").textContent = message || "";
    $("token").value = "";
    show("signin");
    $("token").focus();
  }

  async function signIn(event) {
    event.preventDefault();
    const token = $("token").value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    try {
      const answer = await api("/admin/v1/overview");
      if (answer.status !== 200) {
        sessionStorage.removeItem(TOKEN_KEY);
        $("signin-error").textContent = problemText(answer);
        return;
      }
    } catch (error) {
      if (!(error instanceof Unauthorized)) $("signin-error").textContent = error.message;
      return;
    }
    $("token").value = "";
    $("signin-error").textContent = "";
    if (!location.hash || location.hash === "#/signin") location.hash = "#/overview";
    else navigate();
  }

  // ------------------------------------------------------------------------------------ views

  function card(label, figure, note, attention) {
    return el("div", { class: "card", "data-state": attention ? "attention" : null },
      el("span", { class: "label", text: label }), el("span", { class: "figure", text: figure }),
      note ? el("span", { class: "note", text: note }) : null);
  }

  async function loadOverview() {
    const answer = await api("/admin/v1/overview");
    if (answer.status !== 200) throw new Error(problemText(answer));
    const o = answer.json;
    const live = { held: o.held, settlements: o.settlements, open_alerts: o.open_alerts,
                   captured_today: o.captured_today, accounts: o.accounts, relayer: o.relayer || null };
    redraw("cards", live, (d) => [
      card("Money held", d.held.amount, d.held.holds + " hold(s); oldest " + age(d.held.oldest_age_ms),
           d.held.holds > 0),
      card("Unknown settlements", String(d.settlements.unknown),
           d.settlements.submitted + " submitted; reconciler lag " + age(d.settlements.oldest_age_ms),
           d.settlements.unknown > 0),
      card("Open alerts", String(d.open_alerts), null, d.open_alerts > 0),
      card("Captured today (UTC)", d.captured_today),
      d.relayer ? relayerCard(d.relayer) : null,
      card("Accounts", String(d.accounts))]);
    redraw("attention", live, (d) => {
      const items = [];
      if (d.open_alerts > 0) {
        items.push(el("li", {}, el("a", { href: "#/alerts", text: d.open_alerts + " open alert(s)" }),
                      ": the upstream may have done work that was not paid, or a settlement failed."));
      }
      if (d.settlements.unknown > 0) {
        items.push(el("li", {}, el("a", { href: "#/operations?settlement=unknown",
                                          text: d.settlements.unknown + " unknown settlement(s)" }),
                      ": the reconciler is asking the chain."));
      }
      if (d.relayer && d.relayer.error) {
        items.push(el("li", { text: "The relayer could not be read from the chain: " + d.relayer.error }));
      }
      if (d.relayer && d.relayer.charges_gas && d.relayer.balance_wei === "0") {
        items.push(el("li", { text: "The relayer " + d.relayer.address + " has no gas left: no x402 payment can settle." }));
      }
      if (d.held.holds > 0) {
        items.push(el("li", {}, el("a", { href: "#/operations?settlement=held",
                                          text: d.held.holds + " hold(s)" }),
                      " of " + d.held.amount + "; the oldest is " + age(d.held.oldest_age_ms) + " old."));
      }
      if (!items.length) items.push(el("li", { text: "Nothing: no open alert, no unknown settlement, no hold." }));
      return el("div", {}, ...items);
    });
    drawSellers(o.facilitator || null);
    drawAudit(o.last_audit || null);
  }

  // The facilitator's sellers (serve --facilitator-sellers-file): who may settle, to which payees.
  function drawSellers(facilitator) {
    redraw('facilitator-sellers', facilitator, () => {
      if (!facilitator) return null;
      return el(
          'div', {}, el('h3', {text: 'Facilitator sellers'}),
          table(
              ['seller', 'payees'],
              facilitator.sellers.map(
                  (s) => [s.name, el('span', {class: 'mono', text: s.payees.join(', ')})])),
          el('p', {},
             el('a', {href: '#/operations?route=facilitator', text: 'Their settlements'})));
    });
  }

  // The relayer: its gas (wei; the devnet charges none), its transactions the chain has not mined
  // yet, and how old the reading is (the gateway reads the chain every 30 s).
  function relayerCard(r) {
    const gas = !r.charges_gas ? "no gas needed (devnet)" : r.balance_wei === null ? "not read yet"
      : r.balance_wei + " wei";
    const pending = r.pending === null ? "pending unknown" : r.pending + " transaction(s) not mined yet";
    return card("Relayer", gas, pending + "; read " + (r.read_age_ms === null ? "never" : age(r.read_age_ms) + " ago") +
      (r.error ? "; last read failed" : ""), Boolean(r.error) || (r.charges_gas && r.balance_wei === "0"));
  }

  // The last audit this gateway ran (from here or `agentpay admin audit`), kept by the gateway.
  function drawAudit(report) {
    redraw("audit-result", report, () => {
      if (!report) return el("p", { class: "note", text: "Not run on this gateway since it started." });
      return el("div", {},
        el("p", { class: report.ok ? "ok" : "error",
                  text: (report.ok ? "The books hold" : report.violations + " violation(s)") +
                        " (checked " + time(report.checked_ms) + ")" }),
        table(["check", "examined", "violations"], report.checks.map((c) => [
          c.name, c.ran ? String(c.examined) : "not run", c.ran ? String(c.violations) : "—"])),
        report.listed.length ? el("ul", {}, report.listed.map((v) =>
          el("li", {}, el("strong", { text: v.check }), " ", el("span", { class: "mono", text: v.subject }),
             ": " + v.detail))) : null);
    });
  }

  async function runAudit() {
    $("run-audit").disabled = true;
    try {
      const answer = await api("/admin/v1/audit");
      if (answer.status !== 200) throw new Error(problemText(answer));
      drawAudit(answer.json);
    } catch (error) {
      if (!(error instanceof Unauthorized)) $("audit-result").textContent = error.message;
    } finally {
      $("run-audit").disabled = false;
    }
  }

  async function loadAlerts() {
    const answer = await api("/admin/v1/alerts?limit=200");
    if (answer.status !== 200) throw new Error(problemText(answer));
    const alerts = answer.json.alerts.slice().sort((a, b) => Number(a.resolved) - Number(b.resolved));
    redraw("alerts", alerts, (list) => {
      if (!list.length) return el("p", { class: "note", text: "No alerts." });
      const seen = new Set();
      return el("div", {}, list.map((a) => {
        const first = !seen.has(a.operation_id);
        seen.add(a.operation_id);
        return el("div", { class: "alert-box", "data-open": !a.resolved },
          el("p", {}, el("strong", { text: a.kind }), " on ", operationLink(a.operation_id),
             " · raised " + time(a.created_ms)),
          el("p", { text: a.detail }),
          a.resolved
            ? el("p", { class: "note", text: "Resolved " + a.resolution + " at " + time(a.resolved_ms) +
                                             (a.note ? ": " + a.note : "") })
            : (first ? resolveForm(a) : null));
      }));
    });
  }

  function resolveForm(alert) {
    const op = alert.operation_id;
    const draft = state.drafts[op] || { outcome: "delivered", note: "" };
    const outcome = el("select", { id: "outcome-" + op, name: "outcome",
                                   onchange: (e) => { draft.outcome = e.target.value; } },
      ["delivered", "refunded", "written_off", "no_action"].map((o) =>
        el("option", { value: o, selected: o === draft.outcome, text: o })));
    const note = el("textarea", { id: "note-" + op, name: "note", rows: 2, cols: 40, maxlength: 1000,
                                  required: true, oninput: (e) => { draft.note = e.target.value; } });
    note.value = draft.note;
    state.drafts[op] = draft;
    const result = el("div", { id: "resolved-" + op, role: "status" });
    return el("form", { onsubmit: (e) => resolve(e, op, result) },
      el("label", { for: "outcome-" + op, text: "Outcome" }), outcome,
      el("label", { for: "note-" + op, text: "Note (kept in the audit trail)" }), note,
      el("p", {}, el("button", { type: "submit", text: "Resolve…" })), result);
  }

  async function resolve(event, op, result) {
    event.preventDefault();
    const draft = state.drafts[op];
    if (!draft.note.trim()) { result.textContent = "A note is required."; return; }
    const money = draft.outcome === "refunded" ? " A wallet operation's capture goes back to the wallet." : "";
    if (!(await confirmAction("Resolve the alerts of " + op + " as " + draft.outcome + "?" + money,
                              "Resolve as " + draft.outcome))) return;
    const answer = await api("/admin/v1/operations/" + encodeURIComponent(op) + "/resolve", "POST",
                             { outcome: draft.outcome, note: draft.note });
    if (answer.status !== 200) { result.textContent = problemText(answer); return; }
    delete state.drafts[op];
    state.shown.alerts = null;
    await loadAlerts();
    const r = answer.json;
    $("alerts").prepend(el("p", { class: "ok", role: "status" },
      "Resolved ", operationLink(op), " as " + r.outcome + " at " + time(r.resolved_ms) + " (refunded " +
      r.refunded + "): see its trace."));
  }

  // Operations -----------------------------------------------------------------------------

  const FILTERS = ["intent", "settlement", "fulfillment", "route", "account", "payer", "key", "tx_hash", "older_than_min"];

  function fillFilters(params) {
    for (const name of ["intent", "settlement", "fulfillment", "route", "account", "payer"]) {
      $("f-" + name).value = params[name] || "";
    }
    $("f-age").value = params.older_than_min || "";
    $("search").value = params.key || params.tx_hash || "";
  }

  function operationsQuery(params, limit) {
    const q = new URLSearchParams();
    for (const name of FILTERS) {
      if (!params[name]) continue;
      if (name === "older_than_min") q.set("older_than_ms", String(Number(params[name]) * 60000));
      else q.set(name, params[name]);
    }
    q.set("limit", String(limit));
    return q.toString();
  }

  function operationRows(ops) {
    return ops.map((o) => [operationLink(o.id), time(o.created_ms), el("span", { class: "mono", text: o.route }),
      principalLink(o.principal), o.amount, stateBadge("settlement", o.settlement),
      stateBadge("fulfillment", o.fulfillment)]);
  }

  const OPERATION_HEADERS = ["operation", "created", "route", "principal", "amount", "settlement", "fulfillment"];

  async function loadOperations(route) {
    const limit = Math.min(1000, PAGE * state.operationsPages);
    const answer = await api("/admin/v1/operations?" + operationsQuery(route.params, limit));
    if (answer.status !== 200) throw new Error(problemText(answer));
    const ops = answer.json.operations;
    $("older").hidden = answer.json.next_before === null || limit >= 1000;
    redraw("operations", ops, (list) => list.length
      ? table(OPERATION_HEADERS, operationRows(list), list.length + " operation(s), newest first")
      : el("p", { class: "note", text: "No operation matches." }));
  }

  function applyFilters(event) {
    event.preventDefault();
    const params = {};
    for (const name of ["intent", "settlement", "fulfillment", "route", "account", "payer"]) {
      const value = $("f-" + name).value.trim();
      if (value) params[name] = value;
    }
    if ($("f-age").value) params.older_than_min = $("f-age").value;
    location.hash = "#/operations" + (Object.keys(params).length ? "?" + new URLSearchParams(params) : "");
  }

  function search(event) {
    event.preventDefault();
    const text = $("search").value.trim();
    if (!text) { location.hash = "#/operations"; return; }
    if (/^op_[0-9a-f]+$/.test(text)) { location.hash = "#/operations/" + text; return; }
    let params;
    if (/^0x[0-9a-fA-F]{64}$/.test(text)) params = { tx_hash: text.toLowerCase() };
    else if (/^0x[0-9a-fA-F]{40}$/.test(text)) params = { payer: text.toLowerCase() };
    else params = { key: text };
    location.hash = "#/operations?" + new URLSearchParams(params);
  }

  // One operation -------------------------------------------------------------------------

  function facts(pairs) {
    return el("dl", { class: "facts" }, pairs.filter((p) => p).map(([k, v]) =>
      [el("dt", { text: k }), el("dd", {}, v)]));
  }

  // The trace is drawn by the inspector's timeline component (shared/timeline.js); choosing an
  // event marks it in the list below.
  function selectEvent(i) {
    const items = $("trace").children;
    for (let j = 0; j < items.length; j++) items[j].classList.toggle("current", j === i);
    if (items[i]) items[i].scrollIntoView({ block: "nearest" });
    AgentPayTimeline.setCursor($("timeline"), i + 1);
  }

  async function loadOperation(route) {
    const id = route.arg;
    $("open-inspector").href = "../inspector/#operation=" + encodeURIComponent(id);
    if (state.traceOf !== id) {  // another operation: nothing of the previous one's trace stays
      $("timeline").replaceChildren();
      $("trace").replaceChildren();
      delete state.shown.trace;
      state.traceOf = id;
    }
    const [detail, trace] = await Promise.all([
      api("/admin/v1/operations/" + encodeURIComponent(id)),
      api("/admin/v1/operations/" + encodeURIComponent(id) + "/trace")]);
    $("operation-title").textContent = "Operation " + id;
    if (detail.status !== 200) {
      redraw("operation", detail.status, () => el("p", { class: "error", text: problemText(detail) }));
      return;
    }
    const d = detail.json;
    const o = d.operation;
    redraw("operation", d, () => el("div", {},
      facts([
        ["Intent", stateBadge("intent", o.intent)],
        ["Settlement", stateBadge("settlement", o.settlement)],
        ["Fulfillment", stateBadge("fulfillment", o.fulfillment)],
        ["Amount", o.amount], ["Route", el("span", { class: "mono", text: o.route })],
        ["Principal", principalLink(o.principal)],
        ["Idempotency-Key", el("span", { class: "mono", text: o.idempotency_key })],
        ["Created", time(o.created_ms)], ["Updated", time(o.updated_ms)],
        o.hold_expires_ms ? ["Hold expires", time(o.hold_expires_ms)] : null,
        o.response_status ? ["Answer", String(o.response_status)] : null,
        o.tx_hash ? ["Transaction", el("span", { class: "mono", text: o.tx_hash })] : null,
        d.payment ? ["Payer", el("span", { class: "mono", text: d.payment.payer })] : null,
        d.payment && d.payment.settled_block >= 0 ? ["Block", String(d.payment.settled_block)] : null,
        d.payment ? ["Broadcasts", String(d.payment.broadcasts)] : null,
      ]),
      d.alerts.length ? el("h3", { text: "Alerts" }) : null,
      d.alerts.length ? table(["kind", "raised", "detail", "resolution"], d.alerts.map((a) => [
        a.kind, time(a.created_ms), a.detail,
        a.resolved ? a.resolution + (a.note ? ": " + a.note : "") : el("a", { href: "#/alerts", text: "open: resolve" })]))
        : null,
      d.postings.length ? el("h3", { text: "Ledger postings" }) : null,
      d.postings.length ? table(["kind", "debit", "credit", "amount", "at"], d.postings.map((p) => [
        p.kind, el("span", { class: "mono", text: p.debit }), el("span", { class: "mono", text: p.credit }),
        p.amount, time(p.at_ms)])) : null));
    if (trace.status === 200) {
      const events = trace.json.events;
      redraw("trace", events, (list) => {
        AgentPayTimeline.draw($("timeline"), list, { onSelect: selectEvent });
        const t0 = list.length ? Number(list[0].at_ms) : 0;
        return list.map((e) => {
          const facts = AgentPayTimeline.factsText(e);
          return el("li", {},
            el("span", { class: "mono", text: time(e.at_ms) + " (+" + (Number(e.at_ms) - t0) + " ms) " }),
            el("strong", { text: e.actor + " " + e.kind }), ": " + e.detail,
            facts ? el("span", { class: "facts-line", text: facts }) : null);
        });
      });
    } else {
      redraw("trace", trace.status, () => {
        $("timeline").replaceChildren();
        return el("li", { class: "error", text: problemText(trace) });
      });
    }
  }

  // Accounts ------------------------------------------------------------------------------

  async function loadAccounts() {
    const answer = await api("/admin/v1/accounts?limit=200");
    if (answer.status !== 200) throw new Error(problemText(answer));
    redraw("accounts", answer.json.accounts, (list) => list.length
      ? table(["account", "name", "balance", "held", "available", "captured"], list.map((a) => [
        el("a", { href: "#/accounts/" + encodeURIComponent(a.account_id), class: "mono", text: a.account_id }),
        a.name, a.balance, a.held, a.available, a.captured]))
      : el("p", { class: "note", text: "No accounts yet." }));
  }

  async function createAccount(event) {
    event.preventDefault();
    const name = $("new-name").value.trim();
    if (!name) return;
    const answer = await api("/admin/v1/accounts", "POST", { name });
    if (answer.status !== 201) { $("created").textContent = problemText(answer); return; }
    $("new-name").value = "";
    $("created").replaceChildren(el("p", { class: "ok" }, "Created ",
      el("a", { href: "#/accounts/" + encodeURIComponent(answer.json.account_id), text: answer.json.account_id }),
      ". Its API key, shown only now: ", el("code", { id: "created-key", text: answer.json.api_key })));
    await loadAccounts();
  }

  async function loadAccount(route) {
    const id = route.arg;
    $("account-title").textContent = "Account " + id;
    const [account, keys, ops] = await Promise.all([
      api("/admin/v1/accounts/" + encodeURIComponent(id)),
      api("/admin/v1/accounts/" + encodeURIComponent(id) + "/api-keys"),
      api("/admin/v1/operations?" + new URLSearchParams({ account: id, limit: String(PAGE) }))]);
    if (account.status !== 200) {
      redraw("account", account.status, () => el("p", { class: "error", text: problemText(account) }));
      return;
    }
    const a = account.json;
    redraw("account", a, () => facts([["Name", a.name], ["Balance", a.balance], ["Held", a.held],
      ["Available", a.available], ["Deposited", a.deposited], ["Captured", a.captured]]));
    if (keys.status === 200) {
      redraw("keys", keys.json.api_keys, (list) => table(["key", "created", "state", ""], list.map((k) => [
        el("span", { class: "mono", text: k.key_id }), time(k.created_ms),
        k.revoked ? "revoked " + time(k.revoked_ms) : "in force",
        k.revoked ? "" : el("button", { type: "button", text: "Revoke " + k.key_id + "…",
                                         onclick: () => revokeKey(id, k.key_id) })])));
    }
    if (ops.status === 200) {
      const list = ops.json.operations;
      const held = list.filter((o) => o.settlement === "held");
      redraw("account-operations", list, () => el("div", {},
        el("p", { class: "note", text: held.length + " hold(s) among its latest " + list.length + " operation(s)." }),
        list.length ? table(OPERATION_HEADERS, operationRows(list)) : null));
    }
  }

  async function deposit(event) {
    event.preventDefault();
    const id = state.route.arg;
    const amount = $("dep-amount").value.trim();
    const reference = $("dep-reference").value.trim();
    if (!/^[0-9]+$/.test(amount) || !reference) {
      $("deposit-result").textContent = "Give an amount in atomic units and a reference.";
      return;
    }
    if (!(await confirmAction("Deposit " + amount + " into " + id + " (reference " + reference + ")?", "Deposit"))) return;
    const answer = await api("/admin/v1/accounts/" + encodeURIComponent(id) + "/deposits", "POST", { amount, reference });
    if (answer.status !== 200 && answer.status !== 201) { $("deposit-result").textContent = problemText(answer); return; }
    $("deposit-result").replaceChildren(el("p", { class: "ok", text: answer.replayed === "true"
      ? "Already deposited with reference " + reference + ": nothing changed."
      : "Deposited " + amount + "; balance now " + answer.json.balance + "." }));
    state.shown.account = null;
    await loadAccount(state.route);
  }

  async function createKey() {
    const id = state.route.arg;
    if (!(await confirmAction("Create a new API key for " + id + "? Its other keys keep working.", "Create key"))) return;
    const answer = await api("/admin/v1/accounts/" + encodeURIComponent(id) + "/api-keys", "POST");
    if (answer.status !== 201) { $("new-key").textContent = problemText(answer); return; }
    $("new-key").replaceChildren(el("p", { class: "ok" }, "New key " + answer.json.key_id + ", shown only now: ",
      el("code", { text: answer.json.api_key })));
    await loadAccount(state.route);
  }

  async function revokeKey(id, keyId) {
    if (!(await confirmAction("Revoke " + keyId + "? Requests with it are refused within a second.", "Revoke"))) return;
    const answer = await api("/admin/v1/accounts/" + encodeURIComponent(id) + "/api-keys/" + encodeURIComponent(keyId), "DELETE");
    $("new-key").textContent = answer.status === 200 ? "Revoked " + keyId + "." : problemText(answer);
    await loadAccount(state.route);
  }

  const LOADERS = {
    signin: async () => {},
    overview: loadOverview,
    alerts: loadAlerts,
    operations: loadOperations,
    operation: loadOperation,
    accounts: loadAccounts,
    account: loadAccount,
  };

  function init() {
    $("signin-form").addEventListener("submit", signIn);
    $("signout").addEventListener("click", () => signOut("Signed out."));
    $("run-audit").addEventListener("click", runAudit);
    $("filter-form").addEventListener("submit", applyFilters);
    $("filter-reset").addEventListener("click", () => { location.hash = "#/operations"; });
    $("search-form").addEventListener("submit", search);
    $("older").addEventListener("click", () => { state.operationsPages += 1; refresh(); });
    $("create-form").addEventListener("submit", createAccount);
    $("deposit-form").addEventListener("submit", deposit);
    $("rotate-key").addEventListener("click", createKey);
    window.addEventListener("hashchange", navigate);
    setInterval(refresh, REFRESH_MS);
    navigate();
  }

  init();
})();
