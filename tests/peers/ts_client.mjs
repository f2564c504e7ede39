// A host as the TypeScript SDK v2 client (@modelcontextprotocol/client@2.4.0) builds it: start a
// server over stdio, list its tools, close. Installed by scripts/install_peers.py; run with
// NODE_PATH=<cache>/npm-ts-client/node_modules.
//
// Usage: node ts_client.mjs MODE COMMAND [ARGS...]   (MODE: legacy | auto)
// The server's environment is the JSON object in $TS_CLIENT_SERVER_ENV; its working folder
// is $TS_CLIENT_SERVER_CWD. Prints one JSON line per step on stdout: {"pid": N} once the
// session is up, {"tools": [...]} after the listing, {"closed": true} after close().
import path from "node:path";
import { pathToFileURL } from "node:url";

// ESM ignores NODE_PATH, so import the package's files through it explicitly.
const root = path.join(process.env.NODE_PATH, "@modelcontextprotocol", "client", "dist");
const { Client } = await import(pathToFileURL(path.join(root, "index.mjs")).href);
const { StdioClientTransport } = await import(pathToFileURL(path.join(root, "stdio.mjs")).href);

const [mode, command, ...args] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command,
  args,
  env: JSON.parse(process.env.TS_CLIENT_SERVER_ENV ?? "{}"),
  cwd: process.env.TS_CLIENT_SERVER_CWD,
  stderr: "inherit",
});
const client = new Client({ name: "ts-sdk-host", version: "2.4.0" }, { versionNegotiation: { mode } });
await client.connect(transport);
console.log(JSON.stringify({ pid: transport.pid, t: performance.now() }));
const { tools } = await client.listTools();
console.log(JSON.stringify({ tools: tools.map((t) => t.name), t: performance.now() }));
await client.close();
console.log(JSON.stringify({ closed: true, t: performance.now() }));
