// drive.mjs drives an MCP server with the official TypeScript SDK client,
// as an agent host would: initialize, list the tools, create a room, post
// and read it back, subscribe to the room's transcript resource and wait for
// the update notification that a further post causes.
//
//   node drive.mjs [options] --stdio -- COMMAND [ARG...]
//   node drive.mjs [options] --http URL
//
// Options:
//   --token-file FILE   send "Authorization: Bearer <token>" (HTTP only)
//   --tools a,b,c       the tool names the server must list (default: all)
//   --create-args JSON  arguments merged into the create_room call
//   --timeout-ms N      bound on each wait (default 30000)
//   --env JSON          variables for the stdio server, as a host's entry
//                       gives them (added to the SDK's default environment)
//   --peer JSON         a second agent's server, as a JSON array of its command
//                       line, started over stdio by a second SDK client: it
//                       joins the room and answers, mentioning the first agent,
//                       whose wait tool must return the answer and whose
//                       transcript subscription must be notified of it
//   --wait-first        with --peer: call wait before awaiting that notification
//
// It prints one JSON summary on stdout and exits 0 when every step passed,
// 1 (with {"ok":false,"step":...,"error":...}) otherwise. Like an agent host,
// it starts a stdio server with the SDK's default environment (HOME, PATH,
// USER and a few more), not its own.

import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const ALL_TOOLS = [
  "search_rooms", "get_room", "create_room", "join_room", "review_requests",
  "read_room", "post", "react", "wait", "inbox", "subscribe_directory",
  "list_subscriptions", "unsubscribe", "close_room", "export_archive",
];
const TEMPLATE = "adp://room/{room_id}/transcript";
const PROMPT = "room_etiquette";

function parseArgs(argv) {
  const o = { tools: ALL_TOOLS, timeoutMs: 30000, createArgs: {} };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case "--stdio": o.mode = "stdio"; break;
      case "--http": o.mode = "http"; o.url = val(); break;
      case "--token-file": o.tokenFile = val(); break;
      case "--tools": o.tools = val().split(",").filter(Boolean); break;
      case "--create-args": o.createArgs = JSON.parse(val()); break;
      case "--timeout-ms": o.timeoutMs = Number(val()); break;
      case "--peer": o.peer = JSON.parse(val()); break;
      case "--env": o.env = JSON.parse(val()); break;
      case "--wait-first": o.waitFirst = true; break;
      case "--":
        o.command = argv[i + 1];
        o.args = argv.slice(i + 2);
        i = argv.length;
        break;
      default: throw new Error(`unknown argument ${a}`);
    }
  }
  if (o.mode === "stdio" && !o.command) throw new Error("--stdio needs -- COMMAND [ARG...]");
  if (!o.mode) throw new Error("give --stdio -- COMMAND... or --http URL");
  return o;
}

const summary = { ok: false };
let step = "arguments";

class StepError extends Error {}
function check(cond, msg) {
  if (!cond) throw new StepError(msg);
}

function withTimeout(p, ms, what) {
  let t;
  const timeout = new Promise((_, reject) => {
    t = setTimeout(() => reject(new StepError(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(t));
}

// The structured result of a tool call: structuredContent when the server
// sends it, else the JSON of its first text content. A tool error fails the step.
function resultOf(name, res) {
  if (res.isError) {
    const text = (res.content || []).map((c) => c.text || "").join(" ");
    throw new StepError(`${name} returned a tool error: ${text}`);
  }
  if (res.structuredContent) return res.structuredContent;
  const text = (res.content || []).find((c) => c.type === "text");
  check(text, `${name}: no structuredContent and no text content`);
  try {
    return JSON.parse(text.text);
  } catch (e) {
    throw new StepError(`${name}: text content is not JSON: ${text.text.slice(0, 200)}`);
  }
}

async function call(client, name, args) {
  return resultOf(name, await client.callTool({ name, arguments: args }));
}

// Arguments for create_room from its input schema: a value for each required
// property (the first of an enum, a label for a string), then the caller's.
function createArgs(tool, label, extra) {
  const schema = tool.inputSchema || {};
  const props = schema.properties || {};
  const args = {};
  for (const name of schema.required || []) {
    const p = props[name] || {};
    if (Array.isArray(p.enum) && p.enum.length) args[name] = p.enum[0];
    else if (p.type === "string") args[name] = label;
    else if (p.type === "boolean") args[name] = false;
    else if (p.type === "array") args[name] = [];
    else if (p.type === "object") args[name] = {};
  }
  for (const k of ["title", "topic", "name"]) {
    if (k in props && !(k in args)) args[k] = label;
  }
  return Object.assign(args, extra);
}

async function main() {
  const opt = parseArgs(process.argv.slice(2));
  summary.transport = opt.mode;
  const label = `SDK client over ${opt.mode}`;

  let transport;
  if (opt.mode === "stdio") {
    transport = new StdioClientTransport({ command: opt.command, args: opt.args, env: opt.env, stderr: "inherit" });
  } else {
    const headers = {};
    if (opt.tokenFile) headers.Authorization = `Bearer ${readFileSync(opt.tokenFile, "utf8").trim()}`;
    transport = new StreamableHTTPClientTransport(new URL(opt.url), { requestInit: { headers } });
  }

  const client = new Client({ name: "adp-tsclient-drive", version: "1.0.0" }, { capabilities: {} });
  // Updates that arrive, in order; waiters look for theirs.
  const updates = [];
  let wake = () => {};
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    updates.push(n.params.uri);
    wake();
  });
  const updateFor = (uri, from) =>
    new Promise((resolve) => {
      const look = () => {
        const i = updates.indexOf(uri, from);
        if (i >= 0) resolve(i);
        else wake = look;
      };
      look();
    });

  try {
    step = "initialize";
    await withTimeout(client.connect(transport), opt.timeoutMs, "initialize");
    const info = client.getServerVersion();
    const caps = client.getServerCapabilities() || {};
    summary.server = info;
    summary.capabilities = Object.keys(caps).sort();
    check(info && info.name, "initialize: the server gave no name");
    check(caps.tools, "initialize: the server does not offer tools");
    check(caps.resources && caps.resources.subscribe, "initialize: the server does not offer resources/subscribe");

    step = "tools/list";
    const tools = [];
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : {});
      tools.push(...page.tools);
      cursor = page.nextCursor;
    } while (cursor);
    summary.tools = tools.map((t) => t.name).sort();
    const missing = opt.tools.filter((n) => !summary.tools.includes(n));
    check(missing.length === 0, `tools/list: missing ${missing.join(", ")}`);
    for (const t of tools) {
      check(t.description, `tools/list: ${t.name} has no description`);
      check(t.inputSchema && t.inputSchema.type === "object", `tools/list: ${t.name} has no object input schema`);
    }

    step = "create_room";
    const createTool = tools.find((t) => t.name === "create_room");
    const created = await call(client, "create_room", createArgs(createTool, label, opt.createArgs));
    const room = created.room_id;
    check(typeof room === "string" && room.length > 0, `create_room: no room_id in ${JSON.stringify(created)}`);
    summary.room_id = room;

    step = "post";
    const text1 = `hello from the ${label}`;
    const posted = await call(client, "post", { room, text: text1 });
    check(posted.room_id === room, `post: room_id ${posted.room_id}, want ${room}`);
    check(Number.isInteger(posted.seq) && posted.seq > 0, `post: seq ${posted.seq}`);
    check(typeof posted.hash === "string" && posted.hash.length > 0, "post: no hash");
    check(posted.verified === true, `post: verified ${posted.verified}`);
    summary.post = { seq: posted.seq, hash: posted.hash, verified: posted.verified };

    step = "read_room";
    const read = await call(client, "read_room", { room });
    check(read.room_id === room, `read_room: room_id ${read.room_id}, want ${room}`);
    check(Array.isArray(read.items), "read_room: no items");
    const mine = read.items.find((it) => it.seq === posted.seq);
    check(mine, `read_room: no item with seq ${posted.seq}`);
    check(JSON.stringify(mine.content).includes(text1), `read_room: item ${posted.seq} does not carry the text`);
    check(mine.verified === true, `read_room: item ${posted.seq} verified ${mine.verified}`);
    check(read.items.every((it) => it.verified === true), "read_room: an item is not verified");
    summary.read = { items: read.items.length, next_after_seq: read.next_after_seq, truncated: read.truncated };
    // Paging: after the post, nothing of ours is left.
    const after = await call(client, "read_room", { room, after_seq: posted.seq });
    check(!after.items.some((it) => it.seq <= posted.seq), "read_room after_seq: returned an item at or before it");

    step = "resources/templates/list";
    const templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
    summary.resource_templates = templates;
    check(templates.includes(TEMPLATE), `resources/templates/list: no ${TEMPLATE} in ${templates.join(", ")}`);
    const uri = TEMPLATE.replace("{room_id}", room);
    summary.resource_uri = uri;

    step = "resources/read";
    const contents = (await client.readResource({ uri })).contents;
    check(contents.length > 0, "resources/read: no contents");
    check(contents.some((c) => (c.text || "").includes(text1)), "resources/read: the transcript lacks the post");

    step = "resources/subscribe";
    await client.subscribeResource({ uri });
    const from = updates.length;
    const text2 = `second post from the ${label}, after subscribing`;
    const posted2 = await call(client, "post", { room, text: text2 });
    check(posted2.seq > posted.seq, `post after subscribe: seq ${posted2.seq} not after ${posted.seq}`);
    await withTimeout(updateFor(uri, from), opt.timeoutMs, `notifications/resources/updated for ${uri}`);
    summary.notification = { uri, after_seq: posted2.seq };
    const again = (await client.readResource({ uri })).contents;
    check(again.some((c) => (c.text || "").includes(text2)), "resources/read after the update: the transcript lacks the second post");

    if (opt.peer) {
      step = "peer";
      const me = (await call(client, "get_room", { room })).me;
      check(typeof me === "string" && me.startsWith("did:"), `get_room: me ${me}`);
      summary.me = me;
      const peer = new Client({ name: "adp-tsclient-peer", version: "1.0.0" }, { capabilities: {} });
      try {
        await withTimeout(
          peer.connect(new StdioClientTransport({ command: opt.peer[0], args: opt.peer.slice(1), stderr: "inherit" })),
          opt.timeoutMs, "peer initialize");
        step = "join_room";
        const joined = await call(peer, "join_room", { room });
        check(joined.status === "joined", `join_room by the peer: status ${joined.status}`);
        const from = updates.length;
        const text3 = `an answer from the peer to the ${label}`;
        const answered = await call(peer, "post", { room, text: text3, mentions: [me] });
        // The subscription reports the other agent's post. An update names
        // the resource, not the record: read it on each until the
        // transcript has the answer.
        const notified = async () => {
          step = "resources/subscribe (peer's post)";
          for (let i = from; ; i++) {
            i = await updateFor(uri, i);
            const c = (await client.readResource({ uri })).contents;
            if (c.some((x) => (x.text || "").includes(text3))) return;
          }
        };
        // wait returns the answer. By default the notification is awaited
        // first; --wait-first calls wait first (an agent that waits while
        // its host is subscribed), then expects the notification too.
        const waited = async () => {
          step = "wait";
          const woke = await call(client, "wait", { rooms: [room], timeout_seconds: Math.ceil(opt.timeoutMs / 1000) });
          check(woke.timed_out === false, "wait: timed out before the peer's answer");
          const ev = (woke.events || []).find((e) => e.seq === answered.seq);
          check(ev, `wait: no event for the peer's answer (seq ${answered.seq}) in ${JSON.stringify(woke.events)}`);
          check(ev.room_id === room && JSON.stringify(ev.content).includes(text3), "wait: the event does not carry the answer");
          check(ev.verified === true, `wait: the answer is verified ${ev.verified}`);
          check(ev.author !== me && (ev.mentions || []).includes(me), "wait: the answer's author or mentions are wrong");
          check(!(woke.events || []).some((e) => e.author === me), "wait: returned one of the agent's own records");
          summary.wait = { kind: ev.kind, seq: ev.seq, events: woke.events.length };
        };
        const notifiedInTime = () =>
          withTimeout(notified(), opt.timeoutMs, "notifications/resources/updated for the peer's post");
        if (opt.waitFirst) {
          await waited();
          await notifiedInTime();
        } else {
          await notifiedInTime();
          await waited();
        }
        summary.peer_notification = { uri, after_seq: answered.seq };
      } finally {
        await peer.close().catch(() => {});
      }
    }

    step = "react";
    const reacted = await call(client, "react", { room, seq: posted.seq, reaction: "+1" });
    check(reacted.room_id === room && reacted.seq > posted.seq && reacted.verified === true, `react: ${JSON.stringify(reacted)}`);

    // Hostile input, as a model may send it: an unknown room is a tool
    // error the model can read (isError), and arguments that break the
    // input schema are refused; the session goes on.
    step = "tool errors";
    const bad = await client.callTool({ name: "post", arguments: { room: "no-such-room-0000", text: "x" } });
    check(bad.isError === true, `post to an unknown room: not a tool error: ${JSON.stringify(bad)}`);
    check((bad.content || []).some((c) => c.type === "text" && c.text.length > 0), "post to an unknown room: the error has no text");
    let refused = false;
    try {
      const r = await client.callTool({ name: "read_room", arguments: { limit: "many" } });
      refused = r.isError === true;
    } catch (e) {
      refused = true; // a JSON-RPC error (invalid params) is a refusal too
    }
    check(refused, "read_room without a room and with a string limit was accepted");

    step = "prompts/get";
    const prompts = (await client.listPrompts()).prompts.map((p) => p.name);
    check(prompts.includes(PROMPT), `prompts/list: no ${PROMPT} in ${prompts.join(", ")}`);
    const prompt = await client.getPrompt({ name: PROMPT, arguments: {} });
    check(prompt.messages && prompt.messages.length > 0, `prompts/get ${PROMPT}: no messages`);
    summary.prompts = prompts;

    step = "close_room";
    const closed = await call(client, "close_room", { room, reason: "done" });
    check(closed.room_id === room && closed.verified === true, `close_room: ${JSON.stringify(closed)}`);
    const after2 = await call(client, "get_room", { room });
    check(after2.status !== "active", `get_room after close_room: status ${after2.status}`);
    summary.closed = { seq: closed.seq, status: after2.status };

    step = "export_archive";
    const archive = await call(client, "export_archive", { room });
    check(archive.room_id === room && archive.verified === true, `export_archive: ${JSON.stringify(archive)}`);
    check(archive.last_seq === closed.seq, `export_archive: last_seq ${archive.last_seq}, want the close record ${closed.seq}`);
    check(typeof archive.path === "string" && archive.path.length > 0, "export_archive: no path");
    summary.archive = { path: archive.path, format: archive.format, last_seq: archive.last_seq, records: archive.records };

    step = "close";
    summary.ok = true;
  } finally {
    if (opt.mode === "http" && transport.sessionId) {
      summary.session = true;
      await transport.terminateSession().catch(() => {});
    }
    await client.close().catch(() => {});
  }
}

main().then(
  () => {
    process.stdout.write(JSON.stringify(summary) + "\n");
    process.exit(0);
  },
  (err) => {
    summary.ok = false;
    summary.step = step;
    summary.error = err instanceof StepError ? err.message : String(err && err.stack ? err.stack : err);
    process.stdout.write(JSON.stringify(summary) + "\n");
    process.exit(1);
  },
);
