// Browser tests of the inspector page (/inspector/), with playwright-core driving Debian's
// Chromium headless against a real `agentpay sim --serve`.
//   node tests/browser/inspector.test.mjs <path/to/agentpay> <artifacts dir>
// playwright-core comes from tests/chain_env/node_modules (bash tests/chain_env/install.sh);
// Chromium from apt (`chromium`, /usr/bin/chromium; override with $AGENTPAY_CHROMIUM).
import {spawn, spawnSync} from "node:child_process";
import {readFileSync} from "node:fs";
import http from "node:http";
import path from "node:path";

import {freePort, launchBrowser, setUp, webDir} from "./lib.mjs";

const {agentpay, artifacts, executablePath, check, finish} = setUp("inspector.test.mjs");

function startServer(port) {
  const child = spawn(agentpay, ["sim", "--serve", "--listen", `127.0.0.1:${port}`],
    {stdio: ["ignore", "pipe", "pipe"],
      env: {AGENTPAY_WEB_DIR: webDir, ...process.env}});
  let stderr = "";
  child.stderr.on("data", (d) => { stderr += d; });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("server did not start: " + stderr)), 10000);
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("listening on")) { clearTimeout(timer); resolve(child); }
    });
    child.once("exit", (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}: ${stderr}`)); });
  });
}

// A raw GET (no URL normalisation, no redirects followed): [status, content-type, location].
function rawGet(port, target) {
  return new Promise((resolve, reject) => {
    const req = http.request({host: "127.0.0.1", port, path: target, method: "GET"}, (res) => {
      res.resume();
      res.on("end", () => resolve([res.statusCode, res.headers["content-type"] || "", res.headers.location || ""]));
    });
    req.on("error", reject);
    req.end();
  });
}

async function checkStaticServing(port) {
  const cases = [
    ["/inspector", 308, "", "/inspector/"],
    ["/inspector/", 200, "text/html"],
    ["/inspector/index.html", 200, "text/html"],
    ["/inspector/inspector.js", 200, "text/javascript"],
    ["/inspector/inspector.css", 200, "text/css"],
    ["/inspector/../CMakeLists.txt", 404, "application/problem+json"],
    ["/inspector/%2e%2e/CMakeLists.txt", 404, "application/problem+json"],
    ["/inspector/secret.txt", 404, "application/problem+json"],
  ];
  for (const [target, status, type, location] of cases) {
    const [got, gotType, gotLocation] = await rawGet(port, target);
    check(`GET ${target} -> ${status}`, got === status && gotType.startsWith(type) &&
      (location === undefined || gotLocation === location), `${got} ${gotType} ${gotLocation}`);
  }
}

const text = (page, id) => page.locator(`[data-testid="${id}"]`).innerText();

async function runExperiment(page, name) {
  await page.click(`[data-testid="exp-${name}"]`);
  await page.waitForFunction(() => document.getElementById("run-status").dataset.state === "ready");
}

async function stepUntilCommit(page, maxSteps) {
  for (let i = 0; i < maxSteps; i++) {
    if ((await text(page, "ledger-effects")).trim() === "1") return i;
    await page.click('[data-testid="next-event"]');
  }
  return -1;
}

async function seek(page, value) {
  await page.locator('[data-testid="timeline"]').evaluate((el, v) => {
    el.value = String(v);
    el.dispatchEvent(new Event("input", {bubbles: true}));
    el.dispatchEvent(new Event("change", {bubbles: true}));
  }, value);
}

async function main() {
  const port = await freePort();
  const server = await startServer(port);
  await checkStaticServing(port).catch((error) => check("static serving", false, String(error)));
  let browser;
  try {
    browser = await launchBrowser(executablePath, {width: 1366, height: 900});
    const page = browser.page;
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
    const base = `http://127.0.0.1:${port}`;
    await page.goto(`${base}/inspector/`);
    await page.waitForFunction(() => document.getElementById("run-status").dataset.state === "ready");
    check("page loads and fetches a run", true);

    // (a) service 8 s, timeout 1 s: step to the commit; the client is already exhausted.
    await runExperiment(page, "slow-service");
    const before = await text(page, "client-outcome");
    check("(a) outcome hidden before playback", before.trim() !== "exhausted", `shows ${before}`);
    const steps = await stepUntilCommit(page, 40);
    check("(a) Next event reaches the commit", steps > 0, "no commit within 40 steps");
    const outcome = (await text(page, "client-outcome")).trim();
    const effects = (await text(page, "ledger-effects")).trim();
    check("(a) client panel shows exhausted at the commit", outcome === "exhausted", `outcome ${outcome}`);
    check("(a) ledger shows one effect at the commit", effects === "1", `effects ${effects}`);
    const readoutA = await text(page, "time-readout");
    check("(a) readout at the commit is 8000 ms", readoutA.includes("8000 ms"), readoutA);
    await page.screenshot({path: path.join(artifacts, "a-slow-service-commit.png"), fullPage: true});

    // (b) retention 0 with a lost response: seek to the end, two effects.
    await runExperiment(page, "retention-zero");
    const zero = (await text(page, "ledger-effects")).trim();
    check("(b) ledger starts at zero", zero === "0", `effects ${zero}`);
    const max = Number(await page.locator('[data-testid="timeline"]').getAttribute("max"));
    await seek(page, max);
    const effectsB = (await text(page, "ledger-effects")).trim();
    check("(b) two effects at the end", effectsB === "2", `effects ${effectsB}`);
    const resultB = (await text(page, "result-effects")).trim();
    check("(b) final result says 2 / 1", resultB === "2 / 1", resultB);
    await page.screenshot({path: path.join(artifacts, "b-retention-zero-end.png"), fullPage: true});

    // (c) seeking moves the time readout.
    await seek(page, 0);
    const readout0 = await text(page, "time-readout");
    await seek(page, Math.floor(max / 2));
    const readout1 = await text(page, "time-readout");
    check("(c) seeking changes the time readout", readout0 !== readout1 &&
      readout1.includes(`${Math.floor(max / 2)} ms`), `${JSON.stringify(readout0)} -> ${JSON.stringify(readout1)}`);
    await page.screenshot({path: path.join(artifacts, "c-seek-middle.png"), fullPage: true});

    // Editing a control re-fetches the run (keyboard only: type, then Tab commits the change).
    await page.focus("#max_attempts");
    await page.keyboard.press("Control+A");
    await page.keyboard.type("1");
    await page.keyboard.press("Tab");
    await page.waitForFunction(() => document.getElementById("run-status").dataset.state === "ready" &&
      document.getElementById("r-attempts").textContent === "1", null, {timeout: 5000}).catch(() => {});
    const attemptsC = (await text(page, "result-attempts")).trim();
    check("editing max attempts rebuilds the run", attemptsC === "1", `attempts ${attemptsC}`);
    await page.focus('[data-testid="next-event"]');
    await page.keyboard.press("Enter");
    const count = (await text(page, "event-count")).trim();
    check("Next event is keyboard-operable", count.startsWith("1 /"), count);

    // Play runs to the end by itself (the short default run at 60x).
    await runExperiment(page, "one-attempt");
    await page.selectOption('[data-testid="speed"]', "60");
    await page.click('[data-testid="play"]');
    await page.waitForFunction(() => document.getElementById("stage").dataset.done === "true", null, {timeout: 10000});
    const outcomeD = (await text(page, "client-outcome")).trim();
    check("Play reaches the end (5 s service, 1 attempt: exhausted)", outcomeD === "exhausted", outcomeD);

    // A seed of the gateway simulator, written by `agentpay sim swarm --trace`, opens and plays:
    // several clients and operations on one timeline, crashes and restarts among them. Which seeds
    // crash the gateway depends on the simulated gateway's own timing, so the first seed from 10 on
    // whose trace has a crash and three clients is the one shown.
    const tracePath = path.join(artifacts, "swarm-seed.json");
    let written = null;
    let swarmEvents = [];
    let seed = 10;
    for (; seed < 80; ++seed) {
      written = spawnSync(agentpay, ["sim", "swarm", "--trace", String(seed), tracePath], {encoding: "utf8"});
      if (written.status !== 0 || !new RegExp(`wrote \\d+ events of seed ${seed}`).test(written.stdout)) break;
      swarmEvents = JSON.parse(readFileSync(tracePath, "utf8")).events;
      const clients = new Set(swarmEvents.filter((e) => e.actor.startsWith("client ")).map((e) => e.actor));
      if (clients.size >= 3 && swarmEvents.some((e) => e.kind === "crashed")) break;
    }
    check(`sim swarm --trace writes seed ${seed}`, written.status === 0 &&
      new RegExp(`wrote \\d+ events of seed ${seed}`).test(written.stdout), written.stdout + written.stderr);
    await page.setInputFiles("#trace-file", tracePath);
    await page.waitForFunction((n) => document.getElementById("event-count").textContent === "0 / " + n,
      swarmEvents.length, {timeout: 10000});
    const swarmLanes = await page.$$eval("#trace-timeline .ap-lane-name", (ns) => ns.map((n) => n.textContent));
    check("the seed's timeline has its clients, the gateway, the ledger and the seller",
      ["client", "gateway", "ledger", "upstream"].every((lane) => swarmLanes.includes(lane)), swarmLanes.join(","));
    await page.click('[data-testid="next-event"]');
    await page.click('[data-testid="next-event"]');
    check("Next steps through the seed", (await text(page, "event-count")).trim() === "2 / " + swarmEvents.length,
      await text(page, "event-count"));
    await page.selectOption('[data-testid="speed"]', "60");
    await page.click('[data-testid="play"]');
    await page.waitForFunction(() => document.getElementById("stage").dataset.done === "true", null, {timeout: 60000});
    const recent = await page.textContent("#recent");
    check("Play reaches the seed's end", (await text(page, "event-count")).trim() ===
      `${swarmEvents.length} / ${swarmEvents.length}`, await text(page, "event-count"));
    const clientsSeen = new Set(swarmEvents.filter((e) => e.actor.startsWith("client ")).map((e) => e.actor));
    const crashes = swarmEvents.filter((e) => e.kind === "crashed").length;
    check("several clients and operations, and the crashes, are on the one timeline",
      clientsSeen.size >= 3 && crashes >= 1 &&
      new Set(swarmEvents.map((e) => e.detail.split(":")[0]).filter((k) => k.startsWith("k-"))).size >= 3,
      `${clientsSeen.size} clients, ${crashes} crashes; last events: ${recent.slice(0, 200)}`);
    await page.$eval("#timeline", (el) => { el.value = Math.floor(el.max / 2); el.dispatchEvent(new Event("input")); });
    await page.screenshot({path: path.join(artifacts, "d-swarm-seed.png"), fullPage: true});

    check("no page errors", errors.length === 0, errors.join("; "));
  } catch (error) {
    check("browser run", false, error.stack || String(error));
  } finally {
    if (browser) await browser.close();
    server.kill("SIGTERM");
  }
  finish();
}

main().catch((error) => { console.error("FAIL:", error); process.exit(1); });
