#!/usr/bin/env node
// CLI around the OFFICIAL x402 client packages, so Python tests can drive a real client.
//
// Pay (one JSON line on stdout, exit 0 whenever an HTTP answer was obtained):
//   node x402_client.mjs --version 2 --url URL --private-key 0x... [--network eip155:84532]
//        [--asset 0xTOKEN ...] [--max-amount ATOMIC] [--spend-controls off]
//        [--method POST] [--body '...'] [--header 'K: V' ...] [--timeout-ms 30000]
//   node x402_client.mjs --version 1 --url URL --private-key 0x... [--max-value ATOMIC] ...
//
//   -> {"status", "headers" (lowercased names), "body", "payment_response" (decoded
//       PAYMENT-RESPONSE / X-PAYMENT-RESPONSE or null), "payment_header" (what the client sent,
//       or null), "payment_payload" (its decoded JSON), "attempts" (HTTP requests made),
//       "client_error" (message if the client library threw after an answer, else null)}
//   No HTTP answer at all (connection refused, timeout): {"error": ...} on stdout, exit 2.
//   Bad usage: exit 64.
//
// Sign only (no HTTP): the payment header the official client would send for a challenge.
//   v2: stdin = the PAYMENT-REQUIRED header value (base64) -> prints the PAYMENT-SIGNATURE value
//   v1: stdin = the 402 JSON body (or base64 of it)         -> prints the X-PAYMENT value
//   node x402_client.mjs --sign-only --version 2 --private-key 0x... [--asset 0x...] [--json]
//   --json prints {"header": name, "value": ..., "payload": decoded} instead of the bare value.
//
// v2 uses @x402/fetch wrapFetchWithPayment(fetch, client) with
//   client = new x402Client().register(network, new ExactEvmScheme(privateKeyToAccount(key)))
//            .setSpendControls({ allowedAssets: [{ network, asset }] })
// (ExactEvmScheme from "@x402/evm/exact/client"). Without --asset the default spend controls
// stay (the client then refuses unknown tokens such as a local TestUSDC: useful to test that).
// v1 uses x402-fetch wrapFetchWithPayment(fetch, await createSigner("base-sepolia", key),
// maxValue): v1 networks are names from a fixed list, so the server must advertise
// "base-sepolia" and the Anvil behind it must run with --chain-id 84532.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";

const { values: opt } = parseArgs({
  options: {
    version: { type: "string", default: "2" },
    url: { type: "string" },
    "private-key": { type: "string" },
    network: { type: "string" },
    asset: { type: "string", multiple: true },
    "max-amount": { type: "string" },
    "spend-controls": { type: "string" },
    "max-value": { type: "string" },
    method: { type: "string", default: "GET" },
    body: { type: "string" },
    header: { type: "string", multiple: true },
    "timeout-ms": { type: "string", default: "30000" },
    "sign-only": { type: "boolean", default: false },
    json: { type: "boolean", default: false },
    help: { type: "boolean", short: "h", default: false },
  },
  strict: true,
});

function usage(msg) {
  if (msg) process.stderr.write(msg + "\n");
  process.stderr.write(readFileSync(new URL(import.meta.url), "utf8").split("\nimport ")[0] + "\n");
  process.exit(64);
}
if (opt.help) usage();
const version = Number(opt.version);
if (version !== 1 && version !== 2) usage("--version must be 1 or 2");
const privateKey = opt["private-key"] || process.env.X402_PRIVATE_KEY;
if (!privateKey) usage("--private-key (or $X402_PRIVATE_KEY) is required");
if (!opt["sign-only"] && !opt.url) usage("--url is required");

// ------------------------------------------------------------------ helpers
function decodeB64Json(value) {
  if (!value) return null;
  try {
    return JSON.parse(Buffer.from(value, "base64").toString("utf8"));
  } catch {
    return { undecodable: value };
  }
}

function requestHeadersOf(input, init) {
  if (input instanceof Request) return new Headers(input.headers);
  return new Headers(init?.headers || {});
}

// ------------------------------------------------------------------ v2 client
async function makeV2Client() {
  const { x402Client } = await import("@x402/fetch");
  const { ExactEvmScheme } = await import("@x402/evm/exact/client");
  const { privateKeyToAccount } = await import("viem/accounts");
  const network = opt.network || "eip155:*";
  const account = privateKeyToAccount(privateKey);
  const client = new x402Client().register(network, new ExactEvmScheme(account));
  if (opt["spend-controls"] === "off") {
    client.setSpendControls(false);
  } else if (opt.asset?.length) {
    client.setSpendControls({
      allowedAssets: opt.asset.map((asset) => ({
        network,
        asset,
        ...(opt["max-amount"] ? { maxAmountPerPayment: opt["max-amount"] } : {}),
      })),
    });
  }
  return client;
}

async function makeV1Signer() {
  const { createSigner } = await import("x402-fetch");
  return await createSigner(opt.network || "base-sepolia", privateKey);
}

// ------------------------------------------------------------------ sign-only
async function signOnly() {
  const input = readFileSync(0, "utf8").trim();
  let header, value;
  if (version === 2) {
    const { x402HTTPClient } = await import("@x402/fetch");
    const http = new x402HTTPClient(await makeV2Client());
    const paymentRequired = http.getPaymentRequiredResponse((name) =>
      name.toLowerCase() === "payment-required" ? input : null,
    );
    const payload = await http.createPaymentPayload(paymentRequired);
    const headers = http.encodePaymentSignatureHeader(payload);
    [header, value] = Object.entries(headers)[0];
  } else {
    const { createPaymentHeader, selectPaymentRequirements } = await import("x402/client");
    const { PaymentRequirementsSchema } = await import("x402/types");
    const body = input.startsWith("{") ? JSON.parse(input) : decodeB64Json(input);
    const reqs = body.accepts.map((x) => PaymentRequirementsSchema.parse(x));
    const signer = await makeV1Signer();
    const selected = selectPaymentRequirements(reqs, opt.network || "base-sepolia", "exact");
    header = "X-PAYMENT";
    value = await createPaymentHeader(signer, body.x402Version ?? 1, selected);
  }
  if (opt.json) {
    process.stdout.write(JSON.stringify({ header, value, payload: decodeB64Json(value) }) + "\n");
  } else {
    process.stdout.write(value + "\n");
  }
}

// ------------------------------------------------------------------ pay
async function pay() {
  const sent = []; // request headers of every HTTP attempt
  const answers = []; // a clone of every response
  const timeoutMs = Number(opt["timeout-ms"]);
  const recordingFetch = async (input, init) => {
    sent.push(requestHeadersOf(input, init));
    const res = await fetch(input, { ...(init || {}), signal: AbortSignal.timeout(timeoutMs) });
    answers.push(res.clone());
    return res;
  };

  let payFetch;
  if (version === 2) {
    const { wrapFetchWithPayment } = await import("@x402/fetch");
    payFetch = wrapFetchWithPayment(recordingFetch, await makeV2Client());
  } else {
    const { wrapFetchWithPayment } = await import("x402-fetch");
    const maxValue = BigInt(opt["max-value"] ?? "1000000000000");
    payFetch = wrapFetchWithPayment(recordingFetch, await makeV1Signer(), maxValue);
  }

  const headers = {};
  for (const h of opt.header || []) {
    const i = h.indexOf(":");
    if (i < 1) usage(`bad --header ${h}`);
    headers[h.slice(0, i).trim()] = h.slice(i + 1).trim();
  }
  const init = { method: opt.method.toUpperCase(), headers };
  if (opt.body !== undefined) init.body = opt.body;

  let res = null;
  let clientError = null;
  try {
    res = await payFetch(opt.url, init);
  } catch (e) {
    clientError = e?.cause ? `${e.message}: ${e.cause.message || e.cause}` : String(e?.message || e);
  }
  if (!res) res = answers.at(-1) || null;
  if (!res) {
    process.stdout.write(JSON.stringify({ error: clientError || "no response" }) + "\n");
    process.exit(2);
  }

  const respHeaders = {};
  res.headers.forEach((v, k) => {
    respHeaders[k.toLowerCase()] = v;
  });
  let body = "";
  try {
    body = await res.text();
  } catch (e) {
    clientError = clientError || `reading body: ${e.message}`;
  }
  const prHeader = respHeaders["payment-response"] ?? respHeaders["x-payment-response"] ?? null;
  let paymentHeader = null;
  for (const h of sent) {
    paymentHeader = h.get("payment-signature") ?? h.get("x-payment") ?? paymentHeader;
  }
  const out = {
    status: res.status,
    headers: respHeaders,
    body,
    payment_response: decodeB64Json(prHeader),
    payment_header: paymentHeader,
    payment_payload: decodeB64Json(paymentHeader),
    attempts: sent.length,
    client_error: clientError,
  };
  process.stdout.write(JSON.stringify(out) + "\n");
}

try {
  if (opt["sign-only"]) await signOnly();
  else await pay();
} catch (e) {
  process.stdout.write(JSON.stringify({ error: String(e?.stack || e) }) + "\n");
  process.exit(2);
}
