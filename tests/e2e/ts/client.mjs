// memserver through the TypeScript SDK's client: a second, independent MCP client for the end-to-end tests.
//
//   node client.mjs '{"scenario": "surface" | "gated" | "subscriptions" | "forgetting", "transport": "stdio" | "http" | "sse", ...}'
//
// stdio: {"command", "args", "env", "cwd"} spawn the server; http: {"url", "token"} (streamable HTTP); sse:
// {"url" of /sse, "token"} (the legacy HTTP+SSE transport, SSEClientTransport). "gated" (against
// tests/e2e/gated_server.py) also takes {"gate": FIFO path}; "subscriptions" takes {"writer": {"command", "args",
// "env", "cwd"}}, a second server on the same data directory that writes while the first one's client listens;
// "forgetting" declares the elicitation capability and answers forget_matching's questions. Prints one JSON object
// of what it saw on stdout; the pytest side (tests/e2e/test_e2e_*.py) makes the assertions.
import { writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

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

async function subscriptions(client, writerConfig) {
  // notifications/resources/updated, in arrival order; `until` waits (bounded) for one URI to be among them.
  const updates = [];
  let arrived = () => {};
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
    updates.push(notification.params.uri);
    arrived();
  });
  const until = async (uri) => {
    const deadline = Date.now() + TIMEOUT.timeout;
    while (!updates.includes(uri)) {
      if (Date.now() > deadline) throw new Error(`no notifications/resources/updated for ${uri}; got ${updates}`);
      await new Promise((resolve) => {
        arrived = resolve;
        setTimeout(resolve, 1000);
      });
    }
  };
  // The other window: a second memserver process on the same data directory.
  const writer = new Client({ name: "memserver-ts-e2e-writer", version: "1.0.0" });
  await writer.connect(transportFor({ transport: "stdio", ...writerConfig }));
  const seen = { capabilities: client.getServerCapabilities() };
  try {
    const tagUri = "memory://tags/ts-subscriptions";
    await client.subscribeResource({ uri: tagUri }, TIMEOUT);
    const remember = (content) => ({ name: "remember", arguments: { content, tags: ["ts-subscriptions"] } });
    await writer.callTool(remember("The other window stored this for the TypeScript client."), undefined, TIMEOUT);
    await until(tagUri);
    seen.updatedByOther = updates.find((uri) => uri === tagUri);

    const stored = (await client.callTool({ name: "remember", arguments: { content: "A fact the TS client forgets." } }, undefined, TIMEOUT)).structuredContent;
    seen.memoryUri = `memory://memories/${stored.id}`;
    await client.subscribeResource({ uri: seen.memoryUri }, TIMEOUT);
    await client.callTool({ name: "forget", arguments: { memory_id: stored.id } }, undefined, TIMEOUT);
    await until(seen.memoryUri);
    seen.updatedByItself = seen.memoryUri;

    await client.unsubscribeResource({ uri: tagUri }, TIMEOUT);
    await client.subscribeResource({ uri: "memory://stats" }, TIMEOUT);
    updates.length = 0;
    await writer.callTool(remember("Stored after the TypeScript client unsubscribed."), undefined, TIMEOUT);
    await until("memory://stats");
    seen.afterUnsubscribe = [...updates];
  } finally {
    await writer.close();
  }
  return seen;
}

async function forgetting(client, config) {
  // The person answers yes to the first question, no to the second; what they were asked is kept.
  const answers = ["accept", "decline"];
  const seen = {};
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    seen.question ??= request.params.message;
    const action = answers.shift();
    return action === "accept" ? { action, content: { confirm: true } } : { action };
  });
  const call = (name, args) => client.callTool({ name, arguments: args }, undefined, TIMEOUT);
  const storeTagged = async (tag) => {
    for (const n of [1, 2]) await call("remember", { content: `TypeScript fact ${n} about ${tag}.`, tags: [tag] });
  };
  const left = async (tag) => (await call("list_recent", { tags: [tag] })).structuredContent.memories.length;
  await storeTagged("ts-forget-yes");
  seen.accepted = await call("forget_matching", { tags: ["ts-forget-yes"] });
  seen.leftAfterYes = await left("ts-forget-yes");
  await storeTagged("ts-forget-no");
  seen.declined = await call("forget_matching", { tags: ["ts-forget-no"] });
  seen.leftAfterNo = await left("ts-forget-no");
  // A second client that declares no elicitation capability: refused, nothing forgotten.
  const plain = new Client({ name: "memserver-ts-e2e-plain", version: "1.0.0" });
  await plain.connect(transportFor(config));
  try {
    seen.withoutElicitation = await plain.callTool({ name: "forget_matching", arguments: { tags: ["ts-forget-no"] } }, undefined, TIMEOUT);
  } finally {
    await plain.close();
  }
  return seen;
}

const capabilities = config.scenario === "forgetting" ? { capabilities: { elicitation: {} } } : {};
const client = new Client({ name: "memserver-ts-e2e", version: "1.0.0" }, capabilities);
await client.connect(transportFor(config));
try {
  const scenarios = {
    gated: () => gated(client, config.gate),
    subscriptions: () => subscriptions(client, config.writer),
    forgetting: () => forgetting(client, config),
  };
  const seen = await (scenarios[config.scenario] ?? (() => surface(client)))();
  process.stdout.write(JSON.stringify(seen) + "\n");
} finally {
  await client.close();
}
