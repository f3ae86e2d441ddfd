// memserver through the TypeScript SDK's client: a second, independent MCP client for the end-to-end tests.
//
//   node client.mjs '{"scenario": "surface" | "gated", "transport": "stdio" | "http" | "sse", ...}'
//
// stdio: {"command", "args", "env", "cwd"} spawn the server; http: {"url", "token"} (streamable HTTP); sse:
// {"url" of /sse, "token"} (the legacy HTTP+SSE transport, SSEClientTransport). "gated" (against
// tests/e2e/gated_server.py) also takes {"gate": FIFO path}. Prints one JSON object of what it saw on stdout;
// the pytest side (tests/e2e/test_e2e_ts.py) makes the assertions.
import { writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const config = JSON.parse(process.argv[2]);
const TIMEOUT = { timeout: 60_000 };

function transportFor(config) {
  if (config.transport === "stdio") {
    return new StdioClientTransport({ command: config.command, args: config.args, env: config.env, cwd: config.cwd, stderr: "inherit" });
  }
  const headers = config.token ? { Authorization: `Bearer ${config.token}` } : {};
  if (config.transport === "sse") {
    return new SSEClientTransport(new URL(config.url), { requestInit: { headers } }); // headers go on GET and POST
  }
  return new StreamableHTTPClientTransport(new URL(config.url), { requestInit: { headers } });
}

async function errorCode(promise) {
  try {
    await promise;
    return null;
  } catch (error) {
    return { code: error.code ?? null, message: String(error.message) };
  }
}

async function surface(client) {
  const seen = { capabilities: client.getServerCapabilities(), server: client.getServerVersion() };
  seen.tools = (await client.listTools(undefined, TIMEOUT)).tools.map((tool) => tool.name);
  seen.prompts = (await client.listPrompts(undefined, TIMEOUT)).prompts;
  seen.remembered = (
    await client.callTool(
      { name: "remember", arguments: { content: "The TypeScript client says the user drinks oolong tea.", tags: ["ts-e2e"] } },
      undefined,
      TIMEOUT,
    )
  ).structuredContent;
  seen.recallContext = await client.getPrompt({ name: "recall-context", arguments: { topic: "oolong tea" } }, TIMEOUT);
  seen.rememberSession = await client.getPrompt({ name: "remember-session", arguments: {} }, TIMEOUT);
  seen.unknownPrompt = await errorCode(client.getPrompt({ name: "no-such-prompt", arguments: {} }, TIMEOUT));
  seen.missingArgument = await errorCode(client.getPrompt({ name: "recall-context", arguments: {} }, TIMEOUT));
  const tag = { type: "ref/resource", uri: "memory://tags/{tag}" };
  seen.tagCompletion = (await client.complete({ ref: tag, argument: { name: "tag", value: "ts-" } }, TIMEOUT)).completion;
  const topic = { type: "ref/prompt", name: "recall-context" };
  seen.topicCompletion = (await client.complete({ ref: topic, argument: { name: "topic", value: "oolo" } }, TIMEOUT)).completion;
  seen.unknownTemplate = await errorCode(
    client.complete({ ref: { type: "ref/resource", uri: "memory://nothing/{x}" }, argument: { name: "x", value: "" } }, TIMEOUT),
  );
  seen.unknownTool = await errorCode(client.callTool({ name: "no-such-tool", arguments: {} }, undefined, TIMEOUT));
  seen.badArguments = await client.callTool({ name: "recall", arguments: { query: 5 } }, undefined, TIMEOUT);
  seen.unknownResource = await errorCode(client.readResource({ uri: "memory://memories/" + "0".repeat(32) }, TIMEOUT));
  seen.stats = JSON.parse((await client.readResource({ uri: "memory://stats" }, TIMEOUT)).contents[0].text);
  try {
    seen.setLevel = await client.setLoggingLevel("info", TIMEOUT);
  } catch (error) {
    seen.setLevel = { error: { code: error.code ?? null, message: String(error.message) } };
  }
  return seen;
}

async function gated(client, gate) {
  const events = []; // in arrival order: log records and results, to check that a call's records come first
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
    events.push({ log: notification.params });
  });
  await client.setLoggingLevel("info", TIMEOUT);

  // 1. A call that waits for the store: its progress says why; cancelling it must not store anything.
  const abort = new AbortController();
  const cancelledProgress = [];
  const cancelled = await errorCode(
    client.callTool({ name: "remember", arguments: { content: "A fact whose call was cancelled." } }, undefined, {
      ...TIMEOUT,
      signal: abort.signal,
      onprogress: (progress) => {
        cancelledProgress.push(progress);
        abort.abort("the test cancels");
      },
    }),
  );

  // 2. The load goes on; the test makes it fail: the waiting call gets an error result and its log record.
  const failedProgress = [];
  const failed = await client.callTool({ name: "remember", arguments: { content: "A fact stored on a failing load." } }, undefined, {
    ...TIMEOUT,
    onprogress: (progress) => {
      failedProgress.push(progress);
      if (failedProgress.length === 1) writeFileSync(gate, "f");
    },
  });
  events.push({ result: "failed" });

  // 3. The next call retries the load; this time it opens.
  const keptProgress = [];
  const kept = await client.callTool({ name: "remember", arguments: { content: "A fact stored once the gate opened." } }, undefined, {
    ...TIMEOUT,
    onprogress: (progress) => {
      keptProgress.push(progress);
      if (keptProgress.length === 1) writeFileSync(gate, "x");
    },
  });
  events.push({ result: "kept" });
  const recent = (await client.callTool({ name: "list_recent", arguments: {} }, undefined, TIMEOUT)).structuredContent;
  return { cancelled, cancelledProgress, failed, failedProgress, kept, keptProgress, recent, events };
}

const client = new Client({ name: "memserver-ts-e2e", version: "1.0.0" });
await client.connect(transportFor(config));
try {
  const seen = config.scenario === "gated" ? await gated(client, config.gate) : await surface(client);
  process.stdout.write(JSON.stringify(seen) + "\n");
} finally {
  await client.close();
}
