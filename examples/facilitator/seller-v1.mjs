#!/usr/bin/env node
// The same seller on x402 v1: x402-express 1.x's paymentMiddleware with AgentPay as its
// facilitator (`{url, createAuthHeaders}`), paid by x402-fetch. v1 names its networks (a chain id
// 84532 is "base-sepolia").
//
//   FACILITATOR_URL=http://127.0.0.1:8410 SELLER_KEY=... PAY_TO=0x... ASSET=0x... \
//   NETWORK=base-sepolia PRICE=1000 PORT=3001 node seller-v1.mjs
//
// Serves GET /report for PRICE atomic units of ASSET, paid to PAY_TO; prints one JSON line
// {"url": ...} once listening.
import express from "express";
import { paymentMiddleware } from "x402-express";

const env = (name) => {
  const value = process.env[name];
  if (!value) {
    process.stderr.write(`${name} is required\n`);
    process.exit(64);
  }
  return value;
};
const auth = { Authorization: `Bearer ${env("SELLER_KEY")}` };
const facilitator = {
  url: env("FACILITATOR_URL"),
  createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: auth }),
};

const price = {
  amount: env("PRICE"),
  asset: {
    address: env("ASSET"),
    decimals: 6,
    eip712: { name: process.env.ASSET_NAME || "USDC", version: process.env.ASSET_VERSION || "2" },
  },
};
const app = express();
app.use(
  paymentMiddleware(
    env("PAY_TO"),
    { "GET /report": { price, network: env("NETWORK"), config: { description: "A paid report" } } },
    facilitator,
  ),
);
app.get("/report", (req, res) => res.json({ report: "paid content" }));
const listener = app.listen(Number(process.env.PORT || 3001), "127.0.0.1", () => {
  const { port } = listener.address();
  process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${port}` }) + "\n");
});
const stop = () => listener.close(() => process.exit(0));
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
