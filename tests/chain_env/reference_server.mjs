#!/usr/bin/env node
// A plain x402 v2 server built only from the reference packages (@x402/express paymentMiddleware,
// x402ResourceServer, and an in-process x402Facilitator with the @x402/evm exact scheme) that
// settles on a local Anvil. It is the "what does the reference do" baseline for AgentPay tests.
//
//   node reference_server.mjs --rpc http://127.0.0.1:PORT --asset 0xTOKEN --pay-to 0xSELLER
//        [--chain-id 84532] [--amount 1000] [--name USDC] [--version 2] [--port 0]
//        [--facilitator-key 0x...(Anvil #3)] [--max-timeout 60] [--polling-ms 50] [--no-multicall]
//
// Prints one JSON line when listening: {"port", "url", "network", "facilitator"}; then serves
//   GET|POST /paid  -> 402 + PAYMENT-REQUIRED, or (paid) 200 {"ok":true,"paid":true,...}
//   GET /free       -> 200 {"ok":true}
// and logs one JSON line per verify/settle outcome on stderr. Stop it with SIGTERM.
//
// Facilitator signer: built the way the official facilitator example does (toFacilitatorEvmSigner
// over a viem wallet client extended with publicActions); a bare wallet client leaves the signer
// address empty and the client then rejects the facilitator. The account uses viem's
// nonceManager (concurrent settlements otherwise fail with "nonce too low") and the client a short
// pollingInterval (the default stalls receipts for seconds on a local chain). Use a facilitator
// account nothing else sends from (default Anvil #3): nonceManager counts nonces locally.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import express from "express";
import { createWalletClient, defineChain, http, nonceManager, publicActions } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { paymentMiddleware, x402ResourceServer } from "@x402/express";
import { x402Facilitator } from "@x402/core/facilitator";
import { toFacilitatorEvmSigner } from "@x402/evm";
import { ExactEvmScheme as ExactEvmFacilitatorScheme } from "@x402/evm/exact/facilitator";
import { ExactEvmScheme as ExactEvmServerScheme } from "@x402/evm/exact/server";

const { values: opt } = parseArgs({
  options: {
    rpc: { type: "string" },
    "chain-id": { type: "string", default: "84532" },
    asset: { type: "string" },
    "pay-to": { type: "string" },
    amount: { type: "string", default: "1000" },
    name: { type: "string", default: "USDC" },
    version: { type: "string", default: "2" },
    port: { type: "string", default: "0" },
    host: { type: "string", default: "127.0.0.1" },
    "max-timeout": { type: "string", default: "60" },
    "polling-ms": { type: "string", default: "50" },
    "no-multicall": { type: "boolean", default: false },
    // Anvil default account #3
    "facilitator-key": {
      type: "string",
      default: "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6",
    },
  },
});
for (const k of ["rpc", "asset", "pay-to"]) {
  if (!opt[k]) {
    process.stderr.write(`--${k} is required\n`);
    process.exit(64);
  }
}

const chainId = Number(opt["chain-id"]);
const network = `eip155:${chainId}`;
const chain = defineChain({
  id: chainId,
  name: `anvil-${chainId}`,
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [opt.rpc] } },
});
const account = privateKeyToAccount(opt["facilitator-key"], { nonceManager });
const viemClient = createWalletClient({
  account,
  chain,
  transport: http(opt.rpc),
  pollingInterval: Number(opt["polling-ms"]),
}).extend(publicActions);

const evmSigner = toFacilitatorEvmSigner({
  address: account.address,
  getCode: (args) => viemClient.getCode(args),
  readContract: (args) => viemClient.readContract({ ...args, args: args.args || [] }),
  verifyTypedData: (args) => viemClient.verifyTypedData(args),
  writeContract: (args) => viemClient.writeContract({ ...args, args: args.args || [] }),
  sendTransaction: (args) => viemClient.sendTransaction(args),
  waitForTransactionReceipt: (args) => viemClient.waitForTransactionReceipt(args),
});

// Hooks must return undefined: a truthy return value is read as a hook directive.
// The facilitator diagnoses failed simulations through Multicall3 (tryAggregate); Anvil has none,
// which turns every precise reason (nonce used, balance, name) into "..._simulation_failed".
// Install Multicall3Lite there unless --no-multicall (to see the bare-Anvil behaviour).
const MULTICALL3 = "0xcA11bde05977b3631167028862bE2a173976CA11";
if (!opt["no-multicall"]) {
  const code = await viemClient.getCode({ address: MULTICALL3 });
  if (!code || code === "0x") {
    const art = JSON.parse(readFileSync(new URL("./artifacts/Multicall3Lite.json", import.meta.url), "utf8"));
    await viemClient.request({ method: "anvil_setCode", params: [MULTICALL3, art.deployedBytecode] });
  }
}

const log = (obj) => {
  process.stderr.write(JSON.stringify({ t: Date.now(), ...obj }) + "\n");
};

const facilitator = new x402Facilitator()
  .register(network, new ExactEvmFacilitatorScheme(evmSigner))
  .onAfterVerify(async (ctx) => log({ event: "verify", result: ctx.result }))
  .onVerifyFailure(async (ctx) => log({ event: "verify_failure", error: String(ctx.error) }))
  .onAfterSettle(async (ctx) => log({ event: "settle", result: ctx.result }))
  .onSettleFailure(async (ctx) => log({ event: "settle_failure", error: String(ctx.error) }));

// x402Facilitator has verify/settle/getSupported, i.e. it is a FacilitatorClient in-process.
const resourceServer = new x402ResourceServer(facilitator).register(network, new ExactEvmServerScheme());

const accepts = {
  scheme: "exact",
  network,
  payTo: opt["pay-to"],
  price: { amount: opt.amount, asset: opt.asset, extra: { name: opt.name, version: opt.version } },
  maxTimeoutSeconds: Number(opt["max-timeout"]),
};
const routes = {
  "GET /paid": { accepts, description: "AgentPay reference paid resource", mimeType: "application/json" },
  "POST /paid": { accepts, description: "AgentPay reference paid resource", mimeType: "application/json" },
};

const app = express();
app.use(express.json());
app.use(paymentMiddleware(routes, resourceServer));
const handler = (req, res) => res.json({ ok: true, paid: true, method: req.method, body: req.body ?? null });
app.get("/paid", handler);
app.post("/paid", handler);
app.get("/free", (req, res) => res.json({ ok: true }));

const server = app.listen(Number(opt.port), opt.host, () => {
  const { port } = server.address();
  process.stdout.write(
    JSON.stringify({ port, url: `http://${opt.host}:${port}`, network, facilitator: account.address }) + "\n",
  );
});
const shutdown = () => server.close(() => process.exit(0));
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
