#!/usr/bin/env node
// A seller's API paid with x402, whose payments AgentPay settles as its facilitator: the official
// x402 middleware (@x402/express) with @x402/core's HTTPFacilitatorClient pointed at
// `agentpay serve --facilitator-listen`, and the seller's key from the facilitator's sellers file.
//
//   FACILITATOR_URL=http://127.0.0.1:8410 SELLER_KEY=... PAY_TO=0x... ASSET=0x... \
//   NETWORK=eip155:84532 PRICE=1000 PORT=3000 node seller.mjs
//
// Serves GET /report for PRICE atomic units of ASSET, paid to PAY_TO; prints one JSON line
// {"url": ...} once listening.
//
// Retrying a settle is safe with AgentPay: it settles an authorization once, however often it is
// asked, and answers every repeat with the first settlement's result. So this seller retries a
// settle whose answer was lost on the network (a timeout, a dropped connection) instead of
// failing a request its buyer already paid for. (Against a facilitator that is not idempotent, the
// same retry could settle twice or report a failure for a payment that went through.)
//
// A settle still pending when AgentPay's receipt wait ends ("settlement_pending") is not a failure
// either: the middleware would answer the buyer 402, and the official client would then sign a
// second authorization for the same purchase. This seller asks AgentPay's status query instead,
// until the chain has said (at most PENDING_WAIT_MS, default 60000), and serves the request once
// the payment settled.
import express from "express";
import { paymentMiddleware, x402ResourceServer } from "@x402/express";
import { HTTPFacilitatorClient } from "@x402/core/server";
import { ExactEvmScheme } from "@x402/evm/exact/server";

const FACILITATOR_URL = process.env.FACILITATOR_URL;
const PENDING_WAIT_MS = Number(process.env.PENDING_WAIT_MS || 60000);

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    process.stderr.write(`${name} is required\n`);
    process.exit(64);
  }
  return value;
};
const network = env("NETWORK");
const key = env("SELLER_KEY");
const auth = { Authorization: `Bearer ${key}` };

const facilitator = new HTTPFacilitatorClient({
  url: env("FACILITATOR_URL"),
  timeoutMs: Number(process.env.FACILITATOR_TIMEOUT_MS || 30000),
  createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: auth }),
});

// The settle that retries: what an answer lost on the way back looks like to fetch.
const SETTLE_ATTEMPTS = 3;
const settleWithRetry = facilitator.settle.bind(facilitator);
facilitator.settle = async (payload, requirements) => {
  for (let attempt = 1; ; attempt++) {
    try {
      return await settleWithRetry(payload, requirements);
    } catch (error) {
      const lost = error?.name === "FacilitatorTimeoutError" || error instanceof TypeError;
      if (!lost || attempt === SETTLE_ATTEMPTS) throw error;
      process.stderr.write(`settle answer lost (${error.message}); asking again\n`);
    }
  }
};

const server = new x402ResourceServer(facilitator).register(network, new ExactEvmScheme());
server.onSettleFailure(async (ctx) => {
  if (ctx.error?.errorReason !== "settlement_pending") return undefined;
  const { from, nonce } = ctx.paymentPayload.payload.authorization;
  const deadline = Date.now() + PENDING_WAIT_MS;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 250));
    const answer = await fetch(`${FACILITATOR_URL}/settlements/${from}/${nonce}`, { headers: auth })
      .catch(() => null);
    if (!answer?.ok) continue;
    const state = await answer.json();
    if (state.success) return { recovered: true, result: state };
    if (state.errorReason !== "settlement_pending") return undefined;  // void or failed: refuse
  }
  return undefined;  // still pending: the middleware refuses; the payment may settle later
});
const routes = {
  "GET /report": {
    accepts: {
      scheme: "exact",
      network,
      payTo: env("PAY_TO"),
      price: {
        amount: env("PRICE"),
        asset: env("ASSET"),
        extra: { name: process.env.ASSET_NAME || "USDC", version: process.env.ASSET_VERSION || "2" },
      },
      maxTimeoutSeconds: 60,
    },
    description: "A paid report",
    mimeType: "application/json",
  },
};

const app = express();
app.use(paymentMiddleware(routes, server));
app.get("/report", (req, res) => res.json({ report: "paid content" }));
const listener = app.listen(Number(process.env.PORT || 3000), "127.0.0.1", () => {
  const { port } = listener.address();
  process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${port}` }) + "\n");
});
const stop = () => listener.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
