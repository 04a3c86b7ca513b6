// Generates viem_vectors.json: reference outputs from viem (the TypeScript library most x402
// clients sign with) for the parts of src/chain that have no published test vectors.
// Run by hand after `npm ci` here: `node gen_vectors.mjs > viem_vectors.json`. ctest never runs node;
// the committed JSON is the fixture that tests/chain/viem_vectors_test.cc compares byte for byte.
import {
  domainSeparator,
  encodeFunctionData,
  getAddress,
  hashStruct,
  hashTypedData,
  keccak256,
  parseAbi,
  serializeTransaction,
  stringToHex,
  toHex,
} from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { readFileSync } from 'node:fs';

// Anvil's first dev account: a public, well-known key.
const kKey = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const account = privateKeyToAccount(kKey);

const kToken = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const domain = { name: 'USDC', version: '2', chainId: 84532, verifyingContract: kToken };
const types = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
};
const message = {
  from: account.address,
  to: '0x209693Bc6afc0C5328bA36FaF03C514EF312287C',
  value: 123456789012345678901234567890n,
  validAfter: 0n,
  validBefore: 1893456000n,
  nonce: '0x' + 'a5'.repeat(31) + '01',
};

const abi = parseAbi([
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, uint8 v, bytes32 r, bytes32 s)',
  'function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter, uint256 validBefore, bytes32 nonce, bytes signature)',
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'function balanceOf(address account) view returns (uint256)',
]);

async function typedDataVectors() {
  const signature = await account.signTypedData({
    domain, types, primaryType: 'TransferWithAuthorization', message,
  });
  return {
    domain: { ...domain },
    domain_separator: domainSeparator({ domain }),
    message: {
      from: message.from, to: message.to, value: message.value.toString(),
      validAfter: message.validAfter.toString(), validBefore: message.validBefore.toString(),
      nonce: message.nonce,
    },
    struct_hash: hashStruct({ data: message, primaryType: 'TransferWithAuthorization', types }),
    digest: hashTypedData({ domain, types, primaryType: 'TransferWithAuthorization', message }),
    signer: account.address,
    signature,
  };
}

function abiVectors(signature) {
  const r = signature.slice(0, 66);
  const s = '0x' + signature.slice(66, 130);
  const v = parseInt(signature.slice(130, 132), 16);
  const args = [message.from, message.to, message.value, message.validAfter, message.validBefore,
    message.nonce];
  return {
    transfer_with_authorization_vrs: encodeFunctionData({
      abi, functionName: 'transferWithAuthorization', args: [...args, v, r, s] }),
    transfer_with_authorization_bytes: encodeFunctionData({
      abi, functionName: 'transferWithAuthorization', args: [...args, signature] }),
    authorization_state: encodeFunctionData({
      abi, functionName: 'authorizationState', args: [message.from, message.nonce] }),
    balance_of: encodeFunctionData({ abi, functionName: 'balanceOf', args: [message.to] }),
  };
}

// Covers RLP edge cases: zero and single-byte integers (0, 0x7f, 0x80), a long string (calldata
// over 55 bytes), a long list, 32-byte fee values, and contract creation (empty `to`).
function transactionCases(calldata) {
  return [
    { chainId: 84532, nonce: 7, maxPriorityFeePerGas: 1500000000n, maxFeePerGas: 30000000000n,
      gas: 120000n, to: kToken, value: 0n, data: calldata },
    { chainId: 1, nonce: 0, maxPriorityFeePerGas: 0n, maxFeePerGas: 127n, gas: 21000n,
      to: message.to, value: 1000000000000000000n, data: '0x' },
    { chainId: 31337, nonce: 128, maxPriorityFeePerGas: 128n, maxFeePerGas: 2n ** 256n - 1n,
      gas: 0xffffffffffffffffn, to: undefined, value: 2n ** 255n, data: '0x00' },
    { chainId: 84532, nonce: 2 ** 40, maxPriorityFeePerGas: 1n, maxFeePerGas: 0x80n, gas: 1n,
      to: kToken, value: 0x7fn, data: '0x7f' },
  ];
}

async function transactionVectors(calldata) {
  const vectors = [];
  for (const fields of transactionCases(calldata)) {
    const transaction = { type: 'eip1559', ...fields };
    const raw = await account.signTransaction(transaction);
    vectors.push({
      chain_id: fields.chainId.toString(), nonce: fields.nonce.toString(),
      max_priority_fee_per_gas: fields.maxPriorityFeePerGas.toString(),
      max_fee_per_gas: fields.maxFeePerGas.toString(), gas_limit: fields.gas.toString(),
      to: fields.to ?? null, value: fields.value.toString(), data: fields.data,
      signing_hash: keccak256(serializeTransaction(transaction)),
      raw, hash: keccak256(raw),
    });
  }
  return vectors;
}

function keccakVectors() {
  // 135, 136 and 137 bytes straddle Keccak-256's 136-byte rate.
  const inputs = ['', 'abc', 'x'.repeat(135), 'y'.repeat(136), 'z'.repeat(137), 'é€😀'];
  return inputs.map((text) => ({ utf8: text, hash: keccak256(stringToHex(text)) }));
}

function u256Vectors() {
  const values = [0n, 1n, 15n, 16n, 255n, 256n, 2n ** 63n - 1n, 2n ** 63n, 2n ** 64n - 1n, 2n ** 64n,
    10n ** 38n + 7n, 2n ** 128n + 1n, 10n ** 77n, 2n ** 256n - 2n, 2n ** 256n - 1n];
  return values.map((value) => ({
    decimal: value.toString(), quantity: toHex(value), word: toHex(value, { size: 32 }) }));
}

function checksumVectors() {
  // Addresses derived from fixed hashes, so the set is stable and has many mixed-case letters.
  return Array.from({ length: 8 }, (_, i) => {
    const lower = '0x' + keccak256(toHex(i)).slice(26);
    return { lower, checksum: getAddress(lower) };
  });
}

const typed = await typedDataVectors();
const abiCalls = abiVectors(typed.signature);
const output = {
  generator: `viem ${JSON.parse(readFileSync(new URL('./node_modules/viem/package.json', import.meta.url))).version}`,
  private_key: kKey,
  address: account.address,
  typed_data: typed,
  abi: abiCalls,
  transactions: await transactionVectors(abiCalls.transfer_with_authorization_vrs),
  keccak: keccakVectors(),
  u256: u256Vectors(),
  checksum: checksumVectors(),
};
console.log(JSON.stringify(output, null, 2));
