#!/usr/bin/env node
// Compiles the contracts in contracts/ with solc-js (the pinned npm `solc`; no native solc
// download works offline) into build/<Name>.json = {contractName, compiler, settings,
// sourceSha256, abi, bytecode, deployedBytecode}.
//
//   node compile.mjs           compile, write build/, refresh the committed artifacts/<Name>.json
//                              when they differ (prints what it did)
//   node compile.mjs --check   compile, write build/, exit 1 if a committed artifact is stale
//
// Tests load artifacts/*.json (committed) so they never need to compile. anvil.py also compares
// sourceSha256 with the .sol file and refuses a stale artifact.
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import solc from "solc";

const here = dirname(fileURLToPath(import.meta.url));
const check = process.argv.includes("--check");
const CONTRACTS = {
  TestUSDC: "constructor(string name_, string symbol_, string version_)",
  Multicall3Lite: "constructor()",
};

const settings = {
  optimizer: { enabled: true, runs: 200 },
  // cancun: runs on Anvil's default hardfork and on any --hardfork cancun or later.
  evmVersion: "cancun",
  outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] } },
};
const sources = {};
for (const name of Object.keys(CONTRACTS)) {
  sources[`${name}.sol`] = { content: readFileSync(join(here, "contracts", `${name}.sol`), "utf8") };
}
const output = JSON.parse(solc.compile(JSON.stringify({ language: "Solidity", sources, settings })));
for (const e of output.errors || []) process.stderr.write(e.formattedMessage + "\n");
if ((output.errors || []).some((e) => e.severity === "error")) process.exit(1);

let stale = 0;
mkdirSync(join(here, "build"), { recursive: true });
mkdirSync(join(here, "artifacts"), { recursive: true });
for (const [name, ctor] of Object.entries(CONTRACTS)) {
  const file = `${name}.sol`;
  const c = output.contracts[file][name];
  const artifact = {
    contractName: name,
    compiler: `solc-js ${solc.version()}`,
    settings: { optimizer: settings.optimizer, evmVersion: settings.evmVersion },
    sourceSha256: createHash("sha256").update(sources[file].content).digest("hex"),
    constructor: ctor,
    abi: c.abi,
    bytecode: "0x" + c.evm.bytecode.object,
    deployedBytecode: "0x" + c.evm.deployedBytecode.object,
  };
  const text = JSON.stringify(artifact, null, 2) + "\n";
  writeFileSync(join(here, "build", `${name}.json`), text);
  const committed = join(here, "artifacts", `${name}.json`);
  const current = existsSync(committed) ? readFileSync(committed, "utf8") : null;
  if (current === text) {
    console.log(`artifacts/${name}.json is up to date`);
  } else if (check) {
    console.error(`artifacts/${name}.json is stale: run \`node compile.mjs\` and commit it`);
    stale++;
  } else {
    writeFileSync(committed, text);
    console.log(`wrote artifacts/${name}.json`);
  }
}
process.exit(stale ? 1 : 0);
