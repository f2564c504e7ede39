// A note server on plain node:http, with no MCP SDK: the least a Streamable HTTP server can cost per call,
// the baseline bench/urlcall_bench.py measures Gatekeeper's `url` path against.
//
// POST /mcp only (else 404/405). A JSON-RPC request gets one JSON answer (application/json, never SSE);
// a notification or a response gets 202 and no body; `server/discover` (the 2026 probe) and any method
// it does not know get -32601, so a client falls back to `initialize` (protocol 2025-11-25, stateless:
// no session). Tools: read_note {path} (the note's text, from the vault folder) and search_notes {query}.
//
// Usage: node plain_http_server.mjs VAULT [PORT]   (PORT 0 or absent: any free port)
// Once listening it prints one line on stdout: `listening http://127.0.0.1:PORT/mcp`.
import fs from "node:fs/promises";
import http from "node:http";
import path from "node:path";

const vaultArg = process.argv[2];
if (!vaultArg) {
  console.error("usage: plain_http_server.mjs VAULT [PORT]");
  process.exit(2);
}
const vault = await fs.realpath(path.resolve(vaultArg));
const port = Number(process.argv[3] ?? 0);
const PROTOCOL = "2025-11-25";

const TOOLS = [
  {
    name: "read_note",
    description: "The text of one note, by its path in the vault (e.g. notes/small.md).",
    inputSchema: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
  },
  {
    name: "search_notes",
    description: "Paths of the notes whose path contains the query.",
    inputSchema: { type: "object", properties: { query: { type: "string" } }, required: ["query"] },
  },
];

const text = (t, isError = false) => ({ content: [{ type: "text", text: t }], ...(isError ? { isError } : {}) });

async function callTool(name, args) {
  if (name === "read_note") {
    const target = path.resolve(vault, String(args?.path ?? ""));
    if (!target.startsWith(vault + path.sep)) return text(`${args?.path} is outside the vault`, true);
    try {
      return text(await fs.readFile(target, "utf8"));
    } catch (err) {
      return text(`read_note failed: ${err.message}`, true);
    }
  }
  if (name === "search_notes") return text("[]");
  return null;
}

async function answer(msg) {
  switch (msg.method) {
    case "initialize":
      return {
        result: {
          protocolVersion: PROTOCOL,
          capabilities: { tools: {} },
          serverInfo: { name: "plain-http", version: "1.0.0" },
        },
      };
    case "ping":
      return { result: {} };
    case "tools/list":
      return { result: { tools: TOOLS } };
    case "tools/call": {
      const result = await callTool(msg.params?.name, msg.params?.arguments);
      if (result !== null) return { result };
      return { error: { code: -32602, message: `unknown tool: ${msg.params?.name}` } };
    }
    default:
      return { error: { code: -32601, message: `Method not found: ${msg.method}` } };
  }
}

function send(res, status, body) {
  const data = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(data) });
  res.end(data);
}

const server = http.createServer((req, res) => {
  if (new URL(req.url, "http://x").pathname !== "/mcp") return send(res, 404, { error: "the endpoint is /mcp" });
  if (req.method !== "POST") {
    res.writeHead(405, { allow: "POST" });
    return res.end();
  }
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", async () => {
    let msg;
    try {
      msg = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {
      return send(res, 400, { jsonrpc: "2.0", id: null, error: { code: -32700, message: "Parse error" } });
    }
    if (msg === null || typeof msg !== "object" || Array.isArray(msg)) {
      return send(res, 400, { jsonrpc: "2.0", id: null, error: { code: -32600, message: "Invalid Request" } });
    }
    if (!("method" in msg) || !("id" in msg)) {
      res.writeHead(202);
      return res.end();
    }
    send(res, 200, { jsonrpc: "2.0", id: msg.id, ...(await answer(msg)) });
  });
});

server.keepAliveTimeout = 60_000;
server.listen(port, "127.0.0.1", () => {
  console.log(`listening http://127.0.0.1:${server.address().port}/mcp`);
});
server.on("error", (err) => {
  console.error(`cannot listen on 127.0.0.1:${port}: ${err.message}`);
  process.exit(1);
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(0));
