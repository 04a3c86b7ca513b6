#!/usr/bin/env node
// An MCP host's side for the tests of `agentpay mcp` (tests/integration/test_mcp.py), with the
// OFFICIAL client (@modelcontextprotocol/sdk): connects over stdio (spawning the server) or
// streamable HTTP, lists the tools, makes the calls given, and prints one JSON line:
//   {"server": {name, version}, "protocolVersion", "tools": [...], "results": [{tool, result} | {tool, error}]}
//
//   node mcp_client.mjs --stdio '["agentpay", "mcp", ...]' --calls '[{"tool": "budget", "arguments": {}}]'
//   node mcp_client.mjs --http http://127.0.0.1:PORT/mcp --token T --calls '[...]'
import { parseArgs } from "node:util";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const { values: opt } = parseArgs({
  options: {
    stdio: { type: "string" },
    http: { type: "string" },
    token: { type: "string" },
    calls: { type: "string", default: "[]" },
    "timeout-ms": { type: "string", default: "120000" },
  },
  strict: true,
});

let transport;
if (opt.stdio) {
  const [command, ...args] = JSON.parse(opt.stdio);
  transport = new StdioClientTransport({ command, args, stderr: "inherit" });
} else {
  const headers = opt.token ? { Authorization: `Bearer ${opt.token}` } : {};
  transport = new StreamableHTTPClientTransport(new URL(opt.http), { requestInit: { headers } });
}
const client = new Client({ name: "agentpay-tests", version: "1.0.0" });
await client.connect(transport);
const out = {
  server: client.getServerVersion(),
  protocolVersion: transport.protocolVersion ?? null,
  instructions: client.getInstructions() ?? null,
  tools: (await client.listTools()).tools,
  results: [],
};
const timeout = Number(opt["timeout-ms"]);
for (const call of JSON.parse(opt.calls)) {
  try {
    const result = await client.callTool({ name: call.tool, arguments: call.arguments ?? {} }, undefined,
                                         { timeout });
    out.results.push({ tool: call.tool, result });
  } catch (e) {
    out.results.push({ tool: call.tool, error: { code: e.code ?? null, message: String(e.message ?? e) } });
  }
}
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
