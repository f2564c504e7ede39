// A vault server of the seed's shape on Streamable HTTP, written with the official TypeScript SDK 1.x
// (@modelcontextprotocol/sdk@1.32.2, installed by scripts/install_peers.py) the way its stateless
// example does it: a fresh McpServer and StreamableHTTPServerTransport (sessionIdGenerator: undefined)
// for every POST, 405 for GET and DELETE. It is an ordinary, unguarded server: create_note really writes.
//
// Usage: NODE_PATH=<cache>/npm-ts-server/node_modules node vault_http_server.mjs [VAULT [PORT]]
//   VAULT (or $VAULT_DIR): the vault folder; PORT (or $PORT): 0 or absent = any free port.
//   $VAULT_JSON=1: plain JSON answers (enableJsonResponse) instead of the SDK's default SSE stream.
//   $VAULT_TOKEN: when set, every request needs `Authorization: Bearer <token>` (else 401).
// Once listening it prints one line on stdout: `listening http://127.0.0.1:PORT/mcp`.
// Every tool call it runs is one JSON line on stderr: {"tool": NAME, "args": {...}} (a test reads them
// to prove a call never reached it).
import fs from "node:fs/promises";
import http from "node:http";
import { createRequire } from "node:module";
import path from "node:path";

// ESM ignores NODE_PATH: resolve the SDK and zod through it with require (one zod instance for both).
const require = createRequire(path.join(process.env.NODE_PATH ?? ".", "noop.js"));
const { McpServer } = require("@modelcontextprotocol/sdk/server/mcp.js");
const { StreamableHTTPServerTransport } = require("@modelcontextprotocol/sdk/server/streamableHttp.js");
const z = require("zod/v4");

const vaultArg = process.argv[2] ?? process.env.VAULT_DIR;
if (!vaultArg) {
  console.error("usage: vault_http_server.mjs VAULT [PORT]   (or VAULT_DIR and PORT in the environment)");
  process.exit(2);
}
const vault = await fs.realpath(path.resolve(vaultArg));
const port = Number(process.argv[3] ?? process.env.PORT ?? 0);
const token = process.env.VAULT_TOKEN;
const jsonResponses = process.env.VAULT_JSON === "1";

const text = (t) => ({ content: [{ type: "text", text: t }] });
const failure = (t) => ({ content: [{ type: "text", text: t }], isError: true });

/** The real path of `rel` inside the vault, or an Error saying it is outside (symbolic links followed). */
async function inside(rel) {
  const target = path.resolve(vault, rel);
  const real = await fs.realpath(target).catch(() => target);
  if (real !== vault && !real.startsWith(vault + path.sep)) throw new Error(`${rel} is outside the vault`);
  return real;
}

async function* notes(folder) {
  for (const entry of await fs.readdir(folder, { withFileTypes: true })) {
    const full = path.join(folder, entry.name);
    if (entry.isDirectory()) yield* notes(full);
    else if (entry.isFile() && entry.name.endsWith(".md")) yield full;
  }
}

function logged(name, handler) {
  return async (args, extra) => {
    console.error(JSON.stringify({ tool: name, args }));
    try {
      return await handler(args, extra);
    } catch (err) {
      return failure(`${name} failed: ${err.message}`);
    }
  };
}

function buildServer() {
  const server = new McpServer({ name: "vault-http", version: "1.0.0" });
  server.registerTool(
    "create_note",
    {
      description: "Create inbox/<title>.md with the given body; fails if that note exists.",
      inputSchema: { title: z.string(), body: z.string() },
    },
    logged("create_note", async ({ title, body }) => {
      if (!/^[^/\\\0]+$/.test(title) || title.startsWith(".")) return failure(`not a note title: ${title}`);
      await fs.mkdir(path.join(vault, "inbox"), { recursive: true });
      const rel = path.join("inbox", `${title}.md`);
      try {
        await fs.writeFile(path.join(vault, rel), body, { flag: "wx" });
      } catch (err) {
        if (err.code === "EEXIST") return failure(`${rel} already exists`);
        throw err;
      }
      return text(rel);
    }),
  );
  server.registerTool(
    "search_notes",
    {
      description: "Paths of the notes whose name or text contains the query (case-insensitive).",
      inputSchema: { query: z.string() },
    },
    logged("search_notes", async ({ query }) => {
      const q = query.toLowerCase();
      const found = [];
      for await (const file of notes(vault)) {
        const rel = path.relative(vault, file);
        const body = await fs.readFile(file, "utf8");
        if (rel.toLowerCase().includes(q) || body.toLowerCase().includes(q)) found.push(rel);
      }
      found.sort();
      return { ...text(JSON.stringify(found)), structuredContent: { paths: found } };
    }),
  );
  server.registerTool(
    "read_note",
    {
      description: "The text of one note, by its path in the vault (e.g. inbox/hello.md).",
      inputSchema: { path: z.string() },
    },
    logged("read_note", async ({ path: rel }) => text(await fs.readFile(await inside(rel), "utf8"))),
  );
  return server;
}

function refuse(res, status, message, headers = {}) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}

const httpServer = http.createServer(async (req, res) => {
  if (new URL(req.url, "http://x").pathname !== "/mcp") return refuse(res, 404, "Not found: the endpoint is /mcp");
  if (token !== undefined && req.headers.authorization !== `Bearer ${token}`) {
    console.error(JSON.stringify({ refused: 401, authorization: req.headers.authorization ? "wrong" : "missing" }));
    return refuse(res, 401, "Unauthorized: a valid bearer token is needed", { "www-authenticate": "Bearer" });
  }
  if (req.method !== "POST") return refuse(res, 405, "Method not allowed.", { allow: "POST" });
  const server = buildServer();
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: undefined,
    enableJsonResponse: jsonResponses,
  });
  res.on("close", () => {
    transport.close();
    server.close();
  });
  try {
    await server.connect(transport);
    await transport.handleRequest(req, res);
  } catch (err) {
    console.error(`error handling a request: ${err.stack ?? err}`);
    if (!res.headersSent) refuse(res, 500, "Internal server error");
  }
});

httpServer.listen(port, "127.0.0.1", () => {
  console.log(`listening http://127.0.0.1:${httpServer.address().port}/mcp`);
});
httpServer.on("error", (err) => {
  console.error(`cannot listen on 127.0.0.1:${port}: ${err.message}`);
  process.exit(1);
});
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(0));
