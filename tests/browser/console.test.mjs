// Browser tests of the operator console (/console/ on the admin listener), with playwright-core
// driving Debian's Chromium headless against a real `agentpay serve --demo` (SQLite, the built-in
// devnet and demo seller), paid over real HTTP by this script and by `agentpay pay`.
//   node tests/browser/console.test.mjs <path/to/agentpay> <artifacts dir>
// playwright-core comes from tests/chain_env/node_modules (bash tests/chain_env/install.sh);
// Chromium from apt (`chromium`, /usr/bin/chromium; override with $AGENTPAY_CHROMIUM).
import {spawn, spawnSync} from "node:child_process";
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";

import {freePort, launchBrowser, setUp, webDir} from "./lib.mjs";

const {agentpay, artifacts, executablePath, check, finish} = setUp("console.test.mjs");

const PRICE = 10000;  // the demo route's price
const HOLD_TTL_MS = 3000;

// The facilitator's sellers the demo starts with (their keys never reach the console).
const SELLER_KEY = "k".repeat(40);
const SELLER_PAYEE = "0x5e11e50000000000000000000000000000000001";  // as EIP-55 spells it

// `agentpay serve --demo` in `dir`, with a short hold TTL and receipt timeout for the test, and
// the facilitator listener with one seller.
function startDemo(dir, port, adminPort, facilitatorPort) {
  writeFileSync(path.join(dir, "sellers"), `shop ${SELLER_KEY} ${SELLER_PAYEE}\n`, {mode: 0o600});
  const child = spawn(agentpay, ["serve", "--demo", "--listen", `127.0.0.1:${port}`,
    "--admin-listen", `127.0.0.1:${adminPort}`, "--hold-ttl-ms", String(HOLD_TTL_MS),
    "--sweep-interval-ms", "200", "--receipt-timeout-ms", "1000",
    "--facilitator-listen", `127.0.0.1:${facilitatorPort}`, "--facilitator-sellers-file", "sellers"],
  {cwd: dir, stdio: ["ignore", "pipe", "pipe"],
    env: {...process.env, AGENTPAY_WEB_DIR: webDir}});
  let out = "", err = "";
  child.stderr.on("data", (d) => { err += d; });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("serve --demo did not start: " + err)), 20000);
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("Any x402 client can pay with it")) { clearTimeout(timer); resolve({child, banner: out}); }
    });
    child.once("exit", (code) => { clearTimeout(timer); reject(new Error(`serve exited ${code}: ${err}`)); });
  });
}

// One HTTP exchange: {status, headers, body (text)}.
function request(port, method, target, headers = {}, body = undefined) {
  return new Promise((resolve, reject) => {
    const req = http.request({host: "127.0.0.1", port, path: target, method, headers}, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => { text += d; });
      res.on("end", () => resolve({status: res.statusCode, headers: res.headers, body: text}));
    });
    req.on("error", reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

async function waitFor(what, fn, timeoutMs = 15000) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await fn();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("timed out waiting for " + what + " (last: " + JSON.stringify(last) + ")");
}

async function main() {
  const dir = mkdtempSync(path.join(os.tmpdir(), "agentpay-console-"));
  const [port, adminPort, facilitatorPort] = [await freePort(), await freePort(), await freePort()];
  const {child: server, banner} = await startDemo(dir, port, adminPort, facilitatorPort);
  const admin = `http://127.0.0.1:${adminPort}`;
  const token = readFileSync(path.join(dir, "agentpay-data", "admin-token"), "utf8").trim();
  const adminHeaders = {Authorization: "Bearer " + token};
  const adminJson = async (target) => JSON.parse((await request(adminPort, "GET", target, adminHeaders)).body);
  check("the start banner names the console", banner.includes(`${admin}/console/`), banner.slice(0, 400));
  const overview = await adminJson("/admin/v1/overview");
  check("the admin overview names each seller and its payees, nothing of its key",
    JSON.stringify(overview.facilitator) === JSON.stringify({sellers: [{name: "shop", payees: [SELLER_PAYEE]}]}),
    JSON.stringify(overview.facilitator));

  // Static serving: the pages, their headers, and nothing else.
  const index = await request(adminPort, "GET", "/console/");
  check("GET /console/ serves the page", index.status === 200 && index.body.includes("AgentPay console"), index.status);
  check("the console forbids framing and foreign scripts",
    /frame-ancestors 'none'/.test(index.headers["content-security-policy"] || "") &&
    index.headers["x-frame-options"] === "DENY", JSON.stringify(index.headers));
  check("the console is not on the public listener", (await request(port, "GET", "/console/")).status === 404, "");
  check("no path outside the whitelist", (await request(adminPort, "GET", "/console/../web/x")).status === 404, "");

  // Cross-site requests change nothing: a state-changing call with the right token but another
  // Origin, or Fetch Metadata saying cross-site, is refused.
  const accountsBefore = (await adminJson("/admin/v1/accounts")).accounts.length;
  const body = JSON.stringify({name: "csrf"});
  const csrf = [
    {...adminHeaders, "Content-Type": "application/json", Origin: `http://127.0.0.1:${port}`},
    {...adminHeaders, "Content-Type": "application/json", Origin: "https://evil.example"},
    {...adminHeaders, "Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"},
    {...adminHeaders, "Content-Type": "application/json", "Sec-Fetch-Site": "same-site"},
  ];
  for (const headers of csrf) {
    const r = await request(adminPort, "POST", "/admin/v1/accounts", headers, body);
    check(`cross-origin POST refused (${headers.Origin || headers["Sec-Fetch-Site"]})`,
      r.status === 403 && JSON.parse(r.body).code === "cross_origin_refused", `${r.status} ${r.body}`);
  }
  // DNS rebinding, as a page of evil.example whose name now points at the admin listener sends it:
  // its Host and Origin agree with each other, and with nothing the listener was configured with.
  const rebound = `evil.example:${adminPort}`;
  const reboundPost = await request(adminPort, "POST", "/admin/v1/accounts",
    {...adminHeaders, "Content-Type": "application/json", Host: rebound, Origin: `http://${rebound}`}, body);
  check("a rebound DNS name's POST is refused (421 host_not_allowed)",
    reboundPost.status === 421 && JSON.parse(reboundPost.body).code === "host_not_allowed",
    `${reboundPost.status} ${reboundPost.body}`);
  const reboundMetrics = await request(adminPort, "GET", "/metrics", {Host: rebound});
  check("a rebound DNS name reads no /metrics", reboundMetrics.status === 421, reboundMetrics.status);
  check("the refused calls created nothing",
    (await adminJson("/admin/v1/accounts")).accounts.length === accountsBefore, "");

  let browser;
  try {
    // evil.example resolves to this machine, as its owner may make it do at any moment (DNS
    // rebinding): Chromium then treats the admin listener as evil.example's own server. Chromium's
    // own guard for local addresses (Private Network Access) is turned off, as other browsers
    // have none: what is tested is that the gateway refuses such a page by itself.
    browser = await launchBrowser(executablePath, {width: 1280, height: 800},
      ["--host-resolver-rules=MAP evil.example 127.0.0.1",
        "--disable-features=LocalNetworkAccessChecks,PrivateNetworkAccessForFetch," +
        "PrivateNetworkAccessForNavigations,BlockInsecurePrivateNetworkRequests," +
        "PrivateNetworkAccessSendPreflights,PrivateNetworkAccessRespectPreflightResults"]);
    const page = browser.page;
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    const shot = (name) => page.screenshot({path: path.join(artifacts, `console-${name}.png`), fullPage: true});

    // ---- a wrong token sees nothing; a page of another origin cannot act with it either
    await page.goto(`${admin}/console/`);
    await page.waitForSelector("#signin-view:not([hidden])");
    await page.keyboard.type("not-the-token");  // the token field has the focus
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.getElementById("signin-error").textContent.length > 0);
    check("a wrong token is refused, with no data shown",
      await page.evaluate(() => document.getElementById("cards").children.length === 0 &&
        !document.getElementById("signin-view").hidden && !sessionStorage.getItem("agentpay-admin-token")),
      await page.textContent("#signin-error"));
    await shot("a-signin-refused");
    // A page of another origin (the public listener's inspector) posting to the admin API.
    const other = await browser.context.newPage();
    await other.goto(`http://127.0.0.1:${port}/inspector/`);
    const crossOutcome = await other.evaluate(async ([url, t]) => {
      try {
        const r = await fetch(url, {method: "POST", headers: {Authorization: "Bearer " + t,
          "Content-Type": "application/json"}, body: JSON.stringify({name: "from-another-origin"})});
        return "answered " + r.status;
      } catch (e) { return "blocked"; }
    }, [`${admin}/admin/v1/accounts`, token]);
    await other.close();
    check("another origin cannot create an account, even holding the token",
      (await adminJson("/admin/v1/accounts")).accounts.length === accountsBefore, crossOutcome);
    // A page of evil.example, its name resolved to the admin listener: its own server, to Chromium.
    const evil = await browser.context.newPage();
    const evilConsole = await evil.goto(`http://${rebound}/console/`);
    check("a rebound DNS name gets no console page", evilConsole.status() === 421, evilConsole.status());
    await evil.route(`http://${rebound}/attack`, (route) => route.fulfill({contentType: "text/html",
      body: "<!doctype html><title>attack</title>"}));
    await evil.goto(`http://${rebound}/attack`);
    const evilOutcome = await evil.evaluate(async (t) => {
      try {
        const post = await fetch("/admin/v1/accounts", {method: "POST", headers: {Authorization: "Bearer " + t,
          "Content-Type": "application/json"}, body: JSON.stringify({name: "rebound"})});
        const metrics = await fetch("/metrics");
        return {post: post.status, metrics: metrics.status, text: await metrics.text()};
      } catch (e) { return {error: String(e)}; }
    }, token);
    await evil.close();
    check("a rebound page, same-origin to Chromium, neither writes nor reads",
      evilOutcome.post === 421 && evilOutcome.metrics === 421 && !evilOutcome.text.includes("agentpay_") &&
      (await adminJson("/admin/v1/accounts")).accounts.length === accountsBefore, JSON.stringify(evilOutcome));
    // The listener's own origin under its other loopback name: Chromium's write from there is taken.
    const local = await browser.context.newPage();
    await local.goto(`http://localhost:${adminPort}/console/`);
    const localOutcome = await local.evaluate(async (t) => (await fetch("/admin/v1/accounts", {method: "POST",
      headers: {Authorization: "Bearer " + t, "Content-Type": "application/json"},
      body: JSON.stringify({name: "from-localhost"})})).status, token);
    await local.close();
    check("the console at http://localhost:PORT may write (one of the listener's own origins)",
      localOutcome === 201 && (await adminJson("/admin/v1/accounts")).accounts.length === accountsBefore + 1,
      localOutcome);

    // ---- sign in (keyboard only)
    await page.focus("#token");
    await page.keyboard.type(token);
    await page.keyboard.press("Enter");
    await page.waitForSelector("#overview-view:not([hidden])");
    await page.waitForFunction(() => document.querySelectorAll("#cards .card").length >= 5);
    check("signed in, the overview shows its figures", true, "");
    await page.waitForFunction(() => /Relayer/.test(document.getElementById("cards").textContent));
    check("the overview shows the relayer: no gas on the devnet, nothing pending",
      /no gas needed \(devnet\)/.test(await page.textContent("#cards")) &&
      /0 transaction\(s\) not mined yet/.test(await page.textContent("#cards")), await page.textContent("#cards"));
    check("the token is not in the URL", !page.url().includes(token), page.url());
    await page.waitForFunction(() => /Facilitator sellers/.test(document.getElementById("facilitator-sellers").textContent));
    const sellers = await page.textContent("#facilitator-sellers");
    check("the overview lists the facilitator's sellers and their payees, never their keys",
      sellers.includes("shop") && sellers.includes(SELLER_PAYEE) && !sellers.includes(SELLER_KEY) &&
      !(await page.content()).includes(SELLER_KEY), sellers);
    await shot("b-overview");

    // ---- accounts: create and deposit, keyboard only
    await page.goto(`${admin}/console/#/accounts`);
    await page.waitForSelector("#accounts-view:not([hidden])");
    await page.focus("#new-name");
    await page.keyboard.type("console-agent");
    await page.keyboard.press("Enter");
    await page.waitForSelector("#created-key");
    const apiKey = (await page.textContent("#created-key")).trim();
    check("a new account's API key is shown once", /^ak_[0-9a-f]{64}$/.test(apiKey), apiKey);
    const accountId = (await page.textContent("#created a")).trim();
    await page.focus("#created a");
    await page.keyboard.press("Enter");
    await page.waitForSelector("#account-view:not([hidden])");
    await page.focus("#dep-amount");
    await page.keyboard.type("100000");
    await page.keyboard.press("Tab");
    await page.keyboard.type("console-deposit-1");
    await page.keyboard.press("Enter");
    await page.waitForSelector("#confirm[open]");
    await page.keyboard.press("Enter");  // the dialog's Confirm has the focus
    await page.waitForFunction(() => /balance now 100000/.test(document.getElementById("deposit-result").textContent));
    check("a deposit through the console reaches the account",
      (await adminJson(`/admin/v1/accounts/${accountId}`)).balance === "100000", "");
    await shot("c-account");

    // ---- a paid request that ends in 5xx: a kept hold on the overview and on the account
    const pay = (key, fault) => request(port, "POST", "/hello", Object.assign({
      Authorization: "Bearer " + apiKey, "Idempotency-Key": key, "Content-Type": "application/json"},
    fault ? {"X-Seller-Fault": fault} : {}), '{"q":1}');
    const kept = await pay("console-5xx", "5xx");
    const opId = kept.headers["agentpay-operation-id"];
    check("the seller's 5xx keeps the hold (502)", kept.status === 502, kept.status);
    await page.waitForFunction((price) => [...document.querySelectorAll("#account dt")].some((dt) =>
      dt.textContent === "Held" && dt.nextElementSibling.textContent === String(price)), PRICE);
    check("the account page shows the hold without a reload", true, "");
    await page.goto(`${admin}/console/#/overview`);
    await page.waitForFunction(() => /1 hold/.test(document.getElementById("cards").textContent));
    check("the overview shows the kept hold", true, "");
    await shot("d-overview-hold");

    // ---- after the TTL the sweeper's alert appears without a reload
    await page.waitForFunction(() => /Openalerts1/.test(document.getElementById("cards").textContent.replace(/\s+/g, "")),
      null, {timeout: 20000});
    check("the sweeper's alert appears on the overview by itself", true, "");
    // The retry after the sweep charges once (the work may have been done: it is delivered).
    const retried = await pay("console-5xx");
    check("the retry with the same key is served and charged once", retried.status === 200, retried.status);

    // ---- resolve it as refunded, keyboard only, with a confirmation and a note
    await page.goto(`${admin}/console/#/alerts`);
    await page.waitForSelector(`#outcome-${opId}`);
    await shot("e-alerts");
    await page.focus(`#outcome-${opId}`);
    await page.selectOption(`#outcome-${opId}`, "refunded");
    await page.focus(`#note-${opId}`);
    await page.keyboard.type("seller failed, buyer refunded");
    await page.keyboard.press("Tab");
    await page.keyboard.press("Enter");
    await page.waitForSelector("#confirm[open]");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => /Resolved/.test(document.getElementById("alerts").textContent) &&
      /as refunded/.test(document.getElementById("alerts").textContent));
    const account = await adminJson(`/admin/v1/accounts/${accountId}`);
    check("refunded: the balance is whole again", account.balance === "100000" && account.held === "0",
      JSON.stringify(account));
    await shot("f-alert-resolved");

    // ---- the operation's page: states, and the trace on a timeline with its resolution
    await page.goto(`${admin}/console/#/operations/${opId}`);
    await page.waitForSelector("#timeline .ap-lane");
    const lanes = await page.$$eval("#timeline .ap-lane-name", (ns) => ns.map((n) => n.textContent));
    check("the timeline has a row per actor", ["gateway", "ledger", "upstream", "admin"].every((a) => lanes.includes(a)),
      lanes.join(","));
    const trace = await page.textContent("#trace");
    check("the trace shows the hold, the sweep, the retry, the capture and the refund in order",
      ["hold", "hold_expired", "capture", "refund", "resolved"].every((k) => trace.includes(k)) &&
      trace.indexOf("hold_expired") < trace.indexOf("capture") && trace.indexOf("capture") < trace.indexOf("resolved"),
      trace.slice(0, 600));
    await page.focus("#timeline .ap-mark");
    await page.keyboard.press("Enter");
    check("a timeline mark is keyboard-operable", (await page.$$("#trace li.current")).length === 1, "");
    await shot("g-operation");

    // ---- an x402 payment held back on the devnet: unknown, then settled after mining
    spawnSync(agentpay, ["admin", "--url", admin, "--token-file", path.join(dir, "agentpay-data", "admin-token"),
      "devnet", "automine", "off"], {encoding: "utf8"});
    const buyerKey = banner.match(/private key \(devnet only, worth nothing\): (0x[0-9a-f]+)/)[1];
    writeFileSync(path.join(dir, "buyer.key"), buyerKey + "\n", {mode: 0o600});
    const payer = spawn(agentpay, ["pay", `http://127.0.0.1:${port}/hello`, "--buyer-key-file",
      path.join(dir, "buyer.key"), "--budget", "1000000", "--budget-db", path.join(dir, "budget.db"),
      "--task", "console", "--step", "1", "--timeout-ms", "4000"], {cwd: dir, stdio: "ignore"});
    const payerDone = new Promise((r) => payer.once("exit", r));
    await page.goto(`${admin}/console/#/overview`);
    await page.waitForFunction(() => /Unknownsettlements1/.test(document.getElementById("cards").textContent.replace(/\s+/g, "")),
      null, {timeout: 20000});
    check("the held-back x402 payment shows as an unknown settlement", true, "");
    await shot("h-overview-unknown");
    const unknown = (await adminJson("/admin/v1/operations?settlement=unknown")).operations[0];
    await page.goto(`${admin}/console/#/operations/${unknown.id}`);
    await page.waitForFunction(() => /unknown/.test(document.getElementById("operation").textContent));
    spawnSync(agentpay, ["admin", "--url", admin, "--token-file", path.join(dir, "agentpay-data", "admin-token"),
      "devnet", "mine"], {encoding: "utf8"});
    await page.waitForFunction(() => /settled/.test(document.getElementById("operation").textContent), null, {timeout: 20000});
    check("after mining the operation's page shows it settled, by itself", true, "");
    const x402Trace = await page.textContent("#trace");
    check("its trace shows the broadcast, the unknown answer, then the reconciler's settlement",
      x402Trace.indexOf("settlement_submitted") >= 0 &&
      x402Trace.indexOf("settlement_submitted") < x402Trace.indexOf("settlement_unknown") &&
      x402Trace.indexOf("settlement_unknown") < x402Trace.indexOf("mark_settled"), x402Trace.slice(0, 800));
    check("its trace carries the transaction as data", x402Trace.includes("tx " + (await adminJson(
      `/admin/v1/operations/${unknown.id}`)).operation.tx_hash), x402Trace.slice(0, 800));
    const x402Lanes = await page.$$eval("#timeline .ap-lane-name", (ns) => ns.map((n) => n.textContent));
    check("its timeline has the client, gateway, chain and reconciler rows",
      ["client", "gateway", "chain", "reconciler"].every((a) => x402Lanes.includes(a)), x402Lanes.join(","));
    await shot("i-x402-operation");
    spawnSync(agentpay, ["admin", "--url", admin, "--token-file", path.join(dir, "agentpay-data", "admin-token"),
      "devnet", "automine", "on"], {encoding: "utf8"});
    await payerDone;
    const txHash = (await adminJson(`/admin/v1/operations/${unknown.id}`)).operation.tx_hash;

    // ---- search by transaction hash and by key; filters narrow the list
    await page.goto(`${admin}/console/#/operations`);
    await page.focus("#search");
    await page.keyboard.type(txHash);
    await page.keyboard.press("Enter");
    await page.waitForFunction((id) => document.querySelectorAll("#operations tbody tr").length === 1 &&
      document.getElementById("operations").textContent.includes(id), unknown.id);
    check("search by transaction hash finds the operation", true, "");
    await page.fill("#search", "console-5xx");
    await page.press("#search", "Enter");
    await page.waitForFunction((id) => document.querySelectorAll("#operations tbody tr").length === 1 &&
      document.getElementById("operations").textContent.includes(id), opId);
    check("search by key finds the operation", true, "");
    await page.goto(`${admin}/console/#/operations`);
    await page.waitForSelector("#operations tbody tr");
    const all = (await page.$$("#operations tbody tr")).length;
    await page.selectOption("#f-settlement", "settled");
    await page.fill("#f-account", accountId);
    await page.press("#f-account", "Enter");
    await page.waitForFunction(() => /account=/.test(location.hash));
    await page.waitForFunction(() => document.querySelectorAll("#operations tbody tr").length === 1);
    check("filters narrow the list", all > 1, `${all} before`);
    await shot("j-operations-filtered");

    // ---- the inspector plays a real trace: from the console's link, and from a saved file
    await page.goto(`${admin}/console/#/operations/${opId}`);
    await page.waitForSelector("#timeline .ap-lane");
    const events = (await adminJson(`/admin/v1/operations/${opId}/trace`)).events;
    await page.focus("#open-inspector");
    await page.keyboard.press("Enter");
    await page.waitForSelector("#trace-timeline:not([hidden]) .ap-mark");
    await page.waitForFunction((n) => document.getElementById("event-count").textContent === "0 / " + n, events.length);
    check("the console's link opens the operation's trace in the inspector, with every event",
      (await page.$$("#trace-timeline .ap-mark")).length === events.length &&
      (await page.$$("#trace-timeline .ap-mark.future")).length === events.length, `${events.length} events`);
    check("the inspector's model controls are put away for a trace", await page.isHidden("#controls"), "");
    const firstHold = events.findIndex((e) => e.actor === "ledger" && e.kind === "hold");
    for (let i = 0; i <= firstHold; i++) {
      await page.focus("#next-event");
      await page.keyboard.press("Enter");
    }
    await page.waitForFunction((n) => document.getElementById("event-count").textContent.startsWith(n + " / "), firstHold + 1);
    check("Next steps through the trace; the money panel follows it",
      (await page.textContent("#t-held")) === String(PRICE) &&
      (await page.textContent("#t-current")).includes("ledger hold"), await page.textContent("#t-current"));
    await shot("l-inspector-trace-step");
    await page.selectOption("#speed", "60");
    await page.click("#play");
    await page.waitForFunction(() => document.getElementById("stage").dataset.done === "true", null, {timeout: 30000});
    check("Play runs the trace to its end: nothing held, the capture refunded",
      (await page.textContent("#t-held")) === "0" && (await page.textContent("#t-captured")) === "0" &&
      (await page.textContent("#t-refunded")) === String(PRICE) &&
      (await page.textContent("#t-attempts")) === "2", await page.textContent("#trace-panels"));
    await page.$eval("#timeline", (el) => { el.value = "0"; el.dispatchEvent(new Event("input")); });
    check("seeking back to the start plays nothing",
      (await page.textContent("#event-count")).startsWith("1 / ") || (await page.textContent("#event-count")).startsWith("2 / "),
      await page.textContent("#event-count"));
    await page.click("#trace-timeline .ap-mark[data-i='" + (events.length - 1) + "']");
    check("choosing a mark seeks to it", (await page.textContent("#event-count")) === `${events.length} / ${events.length}`,
      await page.textContent("#event-count"));
    await shot("m-inspector-trace-end");
    // A saved trace file: the x402 payment's, with its transaction and block as data.
    const saved = path.join(dir, "x402-trace.json");
    const x402Events = (await adminJson(`/admin/v1/operations/${unknown.id}/trace`)).events;
    writeFileSync(saved, JSON.stringify({events: x402Events}));
    await page.setInputFiles("#trace-file", saved);
    await page.waitForFunction((n) => document.getElementById("event-count").textContent === "0 / " + n, x402Events.length);
    await page.$eval("#timeline", (el) => { el.value = el.max; el.dispatchEvent(new Event("input")); });
    check("a saved trace file plays, its transaction and block shown",
      (await page.textContent("#t-tx")) === txHash && /^\d+$/.test(await page.textContent("#t-block")) &&
      (await page.textContent("#t-onchain")) === String(PRICE) && await page.isHidden("#chart"),
      `${await page.textContent("#t-tx")} ${await page.textContent("#t-block")}`);
    const lanesInFile = await page.$$eval("#trace-timeline .ap-lane-name", (ns) => ns.map((n) => n.textContent));
    check("the file's timeline has the chain and the reconciler", lanesInFile.includes("chain") &&
      lanesInFile.includes("reconciler"), lanesInFile.join(","));
    await shot("n-inspector-trace-file");
    // A hostile file: fields of the wrong type are dropped, not drawn; an endless span is refused.
    const odd = path.join(dir, "odd-trace.json");
    writeFileSync(odd, JSON.stringify({events: [
      {at_ms: 1, actor: "client", kind: "request", detail: "<img src=x onerror=alert(1)>",
        attempt: {toString: 1}, amount: {valueOf: 2}, block: "7"},
      {at_ms: 2, actor: "x".repeat(5000), kind: "k", detail: "d", http_status: [200]}]}));
    await page.setInputFiles("#trace-file", odd);
    await page.waitForFunction(() => document.getElementById("event-count").textContent === "0 / 2");
    await page.$eval("#timeline", (el) => { el.value = el.max; el.dispatchEvent(new Event("input")); });
    check("a file's odd fields are dropped and its text stays text",
      (await page.$$("#trace-timeline img")).length === 0 && (await page.textContent("#t-attempts")) === "0" &&
      (await page.textContent("#t-block")) === "–", await page.textContent("#trace-panels"));
    const endless = path.join(dir, "endless-trace.json");
    writeFileSync(endless, JSON.stringify({events: [{at_ms: -1e308, actor: "a", kind: "k", detail: ""},
      {at_ms: 1e308, actor: "a", kind: "k", detail: ""}]}));
    await page.setInputFiles("#trace-file", endless);
    await page.waitForFunction(() => /span more than a year/.test(document.getElementById("run-status").textContent));
    check("a file whose events span forever is refused", true, "");
    const notATrace = path.join(dir, "not-a-trace.json");
    writeFileSync(notATrace, JSON.stringify({events: [{at_ms: "soon"}]}));
    await page.setInputFiles("#trace-file", notATrace);
    await page.waitForFunction(() => document.getElementById("run-status").dataset.state === "error");
    check("a file that is not a trace is refused with a reason", /not a payment trace/.test(
      await page.textContent("#run-status")), await page.textContent("#run-status"));
    const unlabelledInInspector = await page.evaluate(() => [...document.querySelectorAll("input, select, button")]
      .filter((c) => c.offsetParent !== null && !(c.labels && c.labels.length) && !c.getAttribute("aria-label") &&
        !(c.tagName === "BUTTON" && c.textContent.trim()))
      .map((c) => c.id || c.outerHTML.slice(0, 60)));
    check("every control the inspector shows for a trace has a label", unlabelledInInspector.length === 0,
      unlabelledInInspector.join(", "));
    await page.setInputFiles("#trace-file", saved);
    await page.setViewportSize({width: 390, height: 800});
    await page.waitForTimeout(300);
    const inspectorOverflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check("the inspector's trace fits a narrow window", inspectorOverflow <= 1, `${inspectorOverflow}px too wide`);
    await shot("o-inspector-trace-narrow");
    await page.setViewportSize({width: 1280, height: 800});

    // ---- labelled controls, keyboard reachability, both widths
    const unlabelled = await page.evaluate(() => [...document.querySelectorAll("input, select, textarea, button")]
      .filter((c) => c.type !== "hidden" && !(c.labels && c.labels.length) && !c.getAttribute("aria-label") &&
        !(c.tagName === "BUTTON" && c.textContent.trim()))
      .map((c) => c.id || c.outerHTML.slice(0, 60)));
    check("every control has a label", unlabelled.length === 0, unlabelled.join(", "));
    // A new view puts the focus on its content; the navigation is just before it.
    const tabbable = [];
    await page.goto(`${admin}/console/#/overview`);
    await page.waitForSelector("#overview-view:not([hidden])");
    for (let i = 0; i < 8; i++) {
      await page.keyboard.press("Shift+Tab");
      tabbable.push(await page.evaluate(() => document.activeElement.textContent.trim() || document.activeElement.id));
    }
    check("the navigation is reachable from the keyboard",
      ["Overview", "Alerts", "Operations", "Accounts"].every((n) => tabbable.includes(n)), tabbable.join("|"));
    for (const [name, width, height] of [["wide", 1280, 800], ["narrow", 390, 800]]) {
      await page.setViewportSize({width, height});
      for (const view of ["overview", "alerts", "operations", `operations/${opId}`, "accounts", `accounts/${accountId}`]) {
        await page.goto(`${admin}/console/#/${view}`);
        await page.waitForTimeout(400);
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        check(`${view} fits ${width}px`, overflow <= 1, `${overflow}px too wide`);
        await page.screenshot({path: path.join(artifacts, `console-${name}-${view.replace(/\//g, "-")}.png`), fullPage: true});
      }
    }
    // ---- the audit: the gateway keeps its last result, whoever ran it (here the CLI)
    await page.setViewportSize({width: 1280, height: 800});
    await page.goto(`${admin}/console/#/overview`);
    await page.waitForFunction(() => /Not run on this gateway/.test(document.getElementById("audit-result").textContent));
    const cli = spawnSync(agentpay, ["admin", "--url", admin, "--token-file", path.join(dir, "agentpay-data", "admin-token"),
      "audit"], {encoding: "utf8"});
    check("`agentpay admin audit` passes on these books", cli.status === 0, cli.stdout + cli.stderr);
    await page.waitForFunction(() => /The books hold/.test(document.getElementById("audit-result").textContent));
    check("the console shows the CLI's audit without a click (the gateway keeps the last result)", true, "");
    const cliChecked = (await adminJson("/admin/v1/overview")).last_audit.checked_ms;
    await page.focus("#run-audit");
    await page.keyboard.press("Enter");
    await waitFor("the console's audit", async () => (await adminJson("/admin/v1/overview")).last_audit.checked_ms > cliChecked);
    await page.waitForFunction(() => /The books hold/.test(document.getElementById("audit-result").textContent));
    check("the audit run from the console passes", true, "");
    await shot("k-audit");
    // Signing out forgets the token.
    await page.click("#signout");
    check("signing out forgets the token",
      await page.evaluate(() => sessionStorage.getItem("agentpay-admin-token") === null), "");
    check("no script errors", errors.length === 0, errors.join(" | "));
  } finally {
    if (browser) await browser.close();
    server.kill("SIGTERM");
    rmSync(dir, {recursive: true, force: true});
  }
}

try {
  await main();
} catch (error) {
  check("the console test ran to its end", false, error && error.stack || String(error));
}
finish();
