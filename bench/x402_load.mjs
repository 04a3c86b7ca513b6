#!/usr/bin/env node
// Load for bench/x402_vs_relayer.py: N concurrent workers for S seconds, each with its own buyer
// key, counting payments settled. Run with tests/chain_env as the working directory (its
// node_modules: viem and the official x402 packages). One JSON line on stdout:
//   {"mode", "settled", "errors", "seconds", "per_second", "first_error", "p50_ms", "p99_ms"}
// (p50_ms, p99_ms: of the settled payments' times: request to answer in gateway mode, the
// authorization's signature to its receipt in the relayer modes)
//
//   --mode gateway: each worker pays --url again and again with the OFFICIAL client
//     (@x402/fetch wrapFetchWithPayment, ExactEvmScheme): a 200 with a successful PAYMENT-RESPONSE
//     is one settled payment (the gateway answers once the settlement is mined).
//   --mode viem: each worker signs an EIP-3009 authorization (viem signTypedData, as the client
//     does) and the relayer sends transferWithAuthorization with viem's writeContract and its
//     nonce manager (gas estimated, fees read, by viem), then waits for the receipt.
//   --mode addresses: print the buyers' addresses (a JSON list) and exit.
//   --mode raw: the same authorizations; the relayer's transactions are signed locally with a
//     fixed gas limit, fees read once at the start and a nonce counted locally, sent with
//     eth_sendRawTransaction one after another (so that they reach the node in nonce order), then
//     the receipt is awaited.
//   --mode raw-presigned: the single relayer's ceiling (bench/batch_vs_raw.py): --presign N
//     authorizations and their relayer transactions (nonces counted by hand from the relayer's
//     pending count, fixed gas, fees read once) are all signed before the clock starts; then 4
//     workers a buyer send them in nonce order as fast as the node takes them, each waiting for
//     its receipt.
//   --mode gateway-presigned: --presign N payments for --url are made before the clock starts with
//     the OFFICIAL client's own pieces (x402HTTPClient: the 402 read once, createPaymentPayload,
//     encodePaymentSignatureHeader); then each worker sends its payments, one paid request each, a
//     200 with a successful PAYMENT-RESPONSE counting as one settled payment.
// The baselines do the least a single relayer can do per payment; the gateway does all its checks.
import { createRequire } from "node:module";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { randomBytes } from "node:crypto";

// The packages come from tests/chain_env/node_modules (the working directory), not from bench/.
const require = createRequire(join(process.cwd(), "package.json"));

const { values: opt } = parseArgs({
  options: {
    mode: { type: "string" },
    url: { type: "string" },
    rpc: { type: "string" },
    token: { type: "string" },
    "pay-to": { type: "string" },
    "relayer-key": { type: "string" },
    "buyer-keys": { type: "string" },
    network: { type: "string", default: "eip155:84532" },
    "chain-id": { type: "string", default: "84532" },
    presign: { type: "string", default: "0" },
    price: { type: "string", default: "1000" },
    seconds: { type: "string", default: "10" },
  },
  strict: true,
});

const seconds = Number(opt.seconds);
const buyers = opt["buyer-keys"].split(",");
let deadline = Date.now() + seconds * 1000;
let settled = 0;
let errors = 0;
const latencies = [];  // ms of each settled payment
let firstError = null;
const noteError = (e) => {
  errors += 1;
  if (!firstError) firstError = String(e?.shortMessage || e?.message || e).slice(0, 300);
};

const { privateKeyToAccount } = require("viem/accounts");
const viem = require("viem");

// A paid answer: 200 with a successful PAYMENT-RESPONSE (settled on chain and served).
async function countAnswer(response, began) {
  await response.arrayBuffer();
  const settle = response.headers.get("payment-response");
  const ok = response.status === 200 && settle &&
    JSON.parse(Buffer.from(settle, "base64").toString("utf8")).success === true;
  if (ok) {
    settled += 1;
    latencies.push(performance.now() - began);
  } else {
    noteError("HTTP " + response.status);
  }
}

async function gatewayWorker(key) {
  const { x402Client, wrapFetchWithPayment } = require("@x402/fetch");
  const { ExactEvmScheme } = require("@x402/evm/exact/client");
  const client = new x402Client().register(opt.network, new ExactEvmScheme(privateKeyToAccount(key)));
  client.setSpendControls({ allowedAssets: [{ network: opt.network, asset: opt.token }] });
  const pay = wrapFetchWithPayment(fetch, client);
  while (Date.now() < deadline) {
    const began = performance.now();
    try {
      await countAnswer(await pay(opt.url, { headers: { "Idempotency-Key": randomBytes(16).toString("hex") } }),
                        began);
    } catch (e) {
      noteError(e);
    }
  }
}

const chain = viem.defineChain({
  id: Number(opt["chain-id"]), name: "bench", nativeCurrency: { name: "ETH", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [opt.rpc || "http://127.0.0.1:0"] } },
});
const transport = viem.http(opt.rpc);
const publicClient = viem.createPublicClient({ chain, transport, pollingInterval: 20 });
const ABI = viem.parseAbi([
  "function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)",
]);
const DOMAIN = { name: "USDC", version: "2", chainId: Number(opt["chain-id"]), verifyingContract: opt.token };
const TYPES = {
  TransferWithAuthorization: [
    { name: "from", type: "address" }, { name: "to", type: "address" }, { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" }, { name: "validBefore", type: "uint256" }, { name: "nonce", type: "bytes32" },
  ],
};

async function authorizationArgs(buyer) {
  const message = {
    from: buyer.address, to: opt["pay-to"], value: BigInt(opt.price), validAfter: 0n,
    validBefore: BigInt(Math.floor(Date.now() / 1000) + 120), nonce: "0x" + randomBytes(32).toString("hex"),
  };
  const signature = await buyer.signTypedData({ domain: DOMAIN, types: TYPES,
                                                 primaryType: "TransferWithAuthorization", message });
  const { v, r, s } = viem.parseSignature(signature);
  return [message.from, message.to, message.value, message.validAfter, message.validBefore, message.nonce,
          Number(v), r, s];
}

async function waitSettled(hash, began) {
  const receipt = await publicClient.waitForTransactionReceipt({ hash, pollingInterval: 20, timeout: 15000 });
  if (receipt.status === "success") {
    settled += 1;
    latencies.push(performance.now() - began);
  } else {
    noteError("reverted " + hash);
  }
}

const relayer = opt["relayer-key"]
  ? privateKeyToAccount(opt["relayer-key"], { nonceManager: viem.nonceManager }) : null;

async function viemWorker(key) {
  const buyer = privateKeyToAccount(key);
  const wallet = viem.createWalletClient({ account: relayer, chain, transport });
  while (Date.now() < deadline) {
    try {
      const began = performance.now();
      const args = await authorizationArgs(buyer);
      const hash = await wallet.writeContract({ address: opt.token, abi: ABI,
                                                functionName: "transferWithAuthorization", args });
      await waitSettled(hash, began);
    } catch (e) {
      noteError(e);
    }
  }
}

let rawNonce = 0;
let rawFees = null;
let rawSends = Promise.resolve();  // nonce taken and send made in order: no gap from a reordering
async function rawWorker(key) {
  const buyer = privateKeyToAccount(key);
  const signer = privateKeyToAccount(opt["relayer-key"]);
  while (Date.now() < deadline) {
    try {
      const began = performance.now();
      const args = await authorizationArgs(buyer);
      const data = viem.encodeFunctionData({ abi: ABI, functionName: "transferWithAuthorization", args });
      const send = rawSends.then(async () => {
        const raw = await signer.signTransaction({
          type: "eip1559", chainId: chain.id, nonce: rawNonce, to: opt.token, data, gas: 150000n,
          maxFeePerGas: rawFees.maxFeePerGas, maxPriorityFeePerGas: rawFees.maxPriorityFeePerGas,
        });
        const sent = await publicClient.request({ method: "eth_sendRawTransaction", params: [raw] });
        rawNonce += 1;
        return sent;
      });
      rawSends = send.catch(() => {});
      const hash = await send;
      await waitSettled(hash, began);
    } catch (e) {
      noteError(e);
    }
  }
}

// Pre-signed work, taken in order by the workers (presign modes).
const presigned = [];
let nextPresigned = 0;
let presignedNonce = 0;

async function presignRaw(count) {
  const signer = privateKeyToAccount(opt["relayer-key"]);
  const nonce = await publicClient.getTransactionCount({ address: signer.address, blockTag: "pending" });
  const fees = await publicClient.estimateFeesPerGas();
  const accounts = buyers.map((key) => privateKeyToAccount(key));
  for (let i = 0; i < count; ++i) {
    const args = await authorizationArgs(accounts[i % accounts.length]);
    const data = viem.encodeFunctionData({ abi: ABI, functionName: "transferWithAuthorization", args });
    presigned.push(await signer.signTransaction({
      type: "eip1559", chainId: chain.id, nonce: nonce + i, to: opt.token, data, gas: 150000n,
      maxFeePerGas: fees.maxFeePerGas, maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    }));
  }
}

async function rawPresignedWorker() {
  while (Date.now() < deadline && nextPresigned < presigned.length) {
    const raw = presigned[nextPresigned++];
    const began = performance.now();
    try {
      // Sent in nonce order (each send starts only after the one before it was handed over).
      const send = rawSendsInOrder.then(() => publicClient.request({ method: "eth_sendRawTransaction", params: [raw] }));
      rawSendsInOrder = send.catch(() => {});
      await waitSettled(await send, began);
    } catch (e) {
      noteError(e);
    }
  }
}
let rawSendsInOrder = Promise.resolve();

async function presignGateway(count) {
  const { x402Client, x402HTTPClient } = require("@x402/fetch");
  const { ExactEvmScheme } = require("@x402/evm/exact/client");
  const challenge = await fetch(opt.url);
  const body = await challenge.json().catch(() => undefined);
  for (let w = 0; w < buyers.length; ++w) presigned.push([]);
  const clients = buyers.map((key) => {
    const client = new x402Client().register(opt.network, new ExactEvmScheme(privateKeyToAccount(key)));
    client.setSpendControls({ allowedAssets: [{ network: opt.network, asset: opt.token }] });
    return new x402HTTPClient(client);
  });
  const required = clients[0].getPaymentRequiredResponse((name) => challenge.headers.get(name), body);
  for (let i = 0; i < count; ++i) {
    const w = i % buyers.length;
    presigned[w].push(clients[w].encodePaymentSignatureHeader(await clients[w].createPaymentPayload(required)));
  }
}

async function gatewayPresignedWorker(_key, w) {
  const mine = presigned[w];
  while (Date.now() < deadline && mine.length > 0) {
    const headers = mine.shift();
    const began = performance.now();
    try {
      await countAnswer(await fetch(opt.url, {
        headers: { ...headers, "Idempotency-Key": randomBytes(16).toString("hex") } }), began);
    } catch (e) {
      noteError(e);
    }
  }
}

if (opt.mode === "addresses") {  // the buyers' addresses, to fund them
  process.stdout.write(JSON.stringify(buyers.map((key) => privateKeyToAccount(key).address)) + "\n");
  process.exit(0);
}
const workers = { gateway: gatewayWorker, viem: viemWorker, raw: rawWorker,
                  "raw-presigned": rawPresignedWorker, "gateway-presigned": gatewayPresignedWorker }[opt.mode];
if (!workers) {
  process.stderr.write("--mode gateway|viem|raw|raw-presigned|gateway-presigned\n");
  process.exit(64);
}
if (opt.mode === "raw-presigned") await presignRaw(Number(opt.presign));
if (opt.mode === "gateway-presigned") await presignGateway(Number(opt.presign));
if (opt.mode === "raw") {
  rawNonce = await publicClient.getTransactionCount({ address: privateKeyToAccount(opt["relayer-key"]).address,
                                                      blockTag: "pending" });
  rawFees = await publicClient.estimateFeesPerGas();
}
const started = Date.now();
// (deadline counts from here for the pre-signed modes: their signing is not timed)
if (opt.mode.endsWith("-presigned")) deadline = started + seconds * 1000;
// The raw ceiling keeps four times as many payments in flight (the node, not the workers' receipt
// waits, is what bounds it).
const concurrency = opt.mode === "raw-presigned" ? 4 * buyers.length : buyers.length;
await Promise.all(Array.from({ length: concurrency }, (_, w) => workers(buyers[w % buyers.length], w)));
const elapsed = (Date.now() - started) / 1000;
latencies.sort((a, b) => a - b);
const percentile = (p) => latencies.length ? latencies[Math.min(latencies.length - 1, Math.floor(p * latencies.length))] : null;
process.stdout.write(JSON.stringify({ mode: opt.mode, settled, errors, seconds: elapsed,
                                      per_second: settled / elapsed, first_error: firstError,
                                      p50_ms: percentile(0.5), p99_ms: percentile(0.99) }) + "\n");
