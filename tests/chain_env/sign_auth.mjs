#!/usr/bin/env node
// EIP-712 signer for EIP-3009 authorizations, using viem (the same signTypedData the official
// x402 clients use). Input: JSON on stdin (or argv[2]), one request or an array of them:
//   {privateKey, domain:{name, version, chainId, verifyingContract},
//    primaryType?: "TransferWithAuthorization" | "ReceiveWithAuthorization" | "CancelAuthorization",
//    message:{from?, to, value, validAfter, validBefore, nonce?}      (Transfer/Receive)
//    message:{authorizer?, nonce?}                                    (Cancel)}
// from/authorizer default to the key's address; nonce defaults to 32 random bytes.
// Output (one JSON line): {signature, v, r, s, yParity, digest, from, message} or an array.
import { readFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { hashTypedData, parseSignature, recoverTypedDataAddress, isAddressEqual } from "viem";
import { privateKeyToAccount } from "viem/accounts";

const AUTH_FIELDS = [
  { name: "from", type: "address" },
  { name: "to", type: "address" },
  { name: "value", type: "uint256" },
  { name: "validAfter", type: "uint256" },
  { name: "validBefore", type: "uint256" },
  { name: "nonce", type: "bytes32" },
];
const TYPES = {
  TransferWithAuthorization: AUTH_FIELDS,
  ReceiveWithAuthorization: AUTH_FIELDS,
  CancelAuthorization: [
    { name: "authorizer", type: "address" },
    { name: "nonce", type: "bytes32" },
  ],
};

async function signOne(req) {
  const account = privateKeyToAccount(req.privateKey);
  const primaryType = req.primaryType || "TransferWithAuthorization";
  const m = { ...req.message };
  m.nonce = m.nonce || "0x" + randomBytes(32).toString("hex");
  let message;
  if (primaryType === "CancelAuthorization") {
    message = { authorizer: m.authorizer || account.address, nonce: m.nonce };
  } else {
    message = {
      from: m.from || account.address,
      to: m.to,
      value: BigInt(m.value),
      validAfter: BigInt(m.validAfter ?? 0),
      validBefore: BigInt(m.validBefore),
      nonce: m.nonce,
    };
  }
  const domain = {
    name: req.domain.name,
    version: req.domain.version,
    chainId: Number(req.domain.chainId),
    verifyingContract: req.domain.verifyingContract,
  };
  const typed = { domain, types: { [primaryType]: TYPES[primaryType] }, primaryType, message };
  const signature = await account.signTypedData(typed);
  const recovered = await recoverTypedDataAddress({ ...typed, signature });
  if (!isAddressEqual(recovered, account.address)) throw new Error("recovered address mismatch");
  const p = parseSignature(signature);
  const outMsg = Object.fromEntries(
    Object.entries(message).map(([k, v]) => [k, typeof v === "bigint" ? v.toString() : v]),
  );
  return {
    signature,
    v: Number(p.v ?? 27n + BigInt(p.yParity)),
    r: p.r,
    s: p.s,
    yParity: p.yParity,
    digest: hashTypedData(typed),
    from: account.address,
    message: outMsg,
  };
}

const text = process.argv[2] ?? readFileSync(0, "utf8");
const input = JSON.parse(text);
const result = Array.isArray(input) ? await Promise.all(input.map(signOne)) : await signOne(input);
process.stdout.write(JSON.stringify(result) + "\n");
