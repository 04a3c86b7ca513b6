// What the browser tests share: their arguments, the check counter and its summary, a free port,
// and Debian's headless Chromium driven by playwright-core (from tests/chain_env/node_modules:
// bash tests/chain_env/install.sh; Chromium from apt, /usr/bin/chromium, or $AGENTPAY_CHROMIUM).
//   const t = setUp("console.test.mjs");   // reads <agentpay binary> <artifacts dir> from argv
import {spawn} from "node:child_process";
import {existsSync, mkdirSync, mkdtempSync, rmSync} from "node:fs";
import {createRequire} from "node:module";
import os from "node:os";
import path from "node:path";
import {fileURLToPath} from "node:url";

export const here = path.dirname(fileURLToPath(import.meta.url));
export const webDir = path.join(here, "..", "..", "web");
const require = createRequire(path.join(here, "..", "chain_env", "package.json"));
const {chromium} = require("playwright-core");

export function setUp(script) {
  const [agentpay, artifacts] = process.argv.slice(2);
  if (!agentpay || !artifacts) {
    console.error(`usage: node ${script} <agentpay binary> <artifacts dir>`);
    process.exit(2);
  }
  const executablePath = process.env.AGENTPAY_CHROMIUM || "/usr/bin/chromium";
  if (!existsSync(executablePath)) {
    console.error(`FAIL: no Chromium at ${executablePath} (apt-get install -y chromium)`);
    process.exit(1);
  }
  mkdirSync(artifacts, {recursive: true});
  let passed = 0, failed = 0;
  return {
    agentpay, artifacts, executablePath,
    check(name, ok, detail) {
      if (ok) { passed++; console.log(`ok   ${name}`); } else { failed++; console.log(`FAIL ${name}: ${detail}`); }
    },
    // Prints the summary and exits: 0 only when something passed and nothing failed.
    finish() {
      console.log(`${passed} passed, ${failed} failed (screenshots in ${artifacts})`);
      process.exit(failed === 0 && passed > 0 ? 0 : 1);
    },
  };
}

// A port for a server the test starts, reserved as every test's are (tests/testports.py; its
// docstring says why "listen on port 0, read it, close" races once ctest runs tests side by side):
// a python3 child takes one per line it reads and holds them until this process ends.
let portHolder = null;
const portWaiters = [];
export function freePort() {
  if (portHolder === null) {
    portHolder = spawn("python3", [path.join(here, "..", "testports.py"), "--hold"],
      {stdio: ["pipe", "pipe", "inherit"]});
    let buffered = "";
    portHolder.stdout.setEncoding("utf8");
    portHolder.stdout.on("data", (chunk) => {
      buffered += chunk;
      for (let end = buffered.indexOf("\n"); end >= 0; end = buffered.indexOf("\n")) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 1);
        const waiter = portWaiters.shift();
        if (waiter) waiter.resolve(Number(line));
      }
      if (portWaiters.length === 0) portHolder.stdout.unref();  // it keeps nothing alive
    });
    portHolder.on("exit", (code) => {
      for (const waiter of portWaiters.splice(0)) waiter.reject(new Error(`testports.py exited (${code})`));
    });
    portHolder.unref();
    portHolder.stdin.unref();
  }
  return new Promise((resolve, reject) => {
    portWaiters.push({resolve, reject});
    portHolder.stdout.ref();
    portHolder.stdin.write("\n");
  });
}

// Headless Chromium with a fresh profile; close() also removes the profile. `extraArgs` are more
// Chromium switches (e.g. --host-resolver-rules, to point a test's DNS name at a local listener).
export async function launchBrowser(executablePath, viewport, extraArgs = []) {
  const profile = mkdtempSync(path.join(os.tmpdir(), "agentpay-chromium-"));
  try {
    const context = await chromium.launchPersistentContext(profile, {executablePath, headless: true, viewport,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync", ...extraArgs]});
    const page = context.pages()[0] || await context.newPage();
    return {context, page, async close() {
      await context.close().catch(() => {});
      rmSync(profile, {recursive: true, force: true});
    }};
  } catch (error) {
    rmSync(profile, {recursive: true, force: true});
    throw error;
  }
}
