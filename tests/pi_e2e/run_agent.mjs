#!/usr/bin/env node
// Drives the real Pi 1.6.0 for tests/test_pi_extension.py (Node >= 22.19).
//
//   node run_agent.mjs seed  --agent-dir D --cwd P --other-cwd O --word W
//       Writes earlier sessions with Pi's own SessionManager: two in project P
//       (one mentions W in a user message, a bash call and its result) and one in
//       project O that also mentions W. Prints {sessions: [{id, file, cwd, ids}]}.
//
//   node run_agent.mjs agent --agent-dir D --cwd P --word W [--expect-session S] [--steps search|full]
//                            [--pi 1.6.0|0.73.1]
//       --steps search: only the first search; --steps abort: that search, aborted 0.3 s in.
//       Runs a real agent session (createAgentSession, scripted faux model, no
//       network) in which the piwatch extension installed under D/extensions is
//       discovered the way Pi discovers installed extensions. The model calls
//       event_search W, then event_read and event_trace on a hit of session S
//       (or the first hit), then event_search W targeted at the running session
//       itself. Prints {sessionId, sessionFile, extensions, errors}.
//
// Tests assert on the session file Pi wrote, not on this script's output.

import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const NM = path.resolve(HERE, "..", "pi", "node_modules");
// --pi picks the Pi under test; seeding always uses 1.6.0's writer.
const PIS = {
	"1.6.0": { dist: path.join(NM, "pi160", "dist"), ai: path.join(NM, "@earendil-works", "pi-ai", "dist", "index.js") },
	"0.73.1": { dist: path.join(NM, "pi073", "dist"), ai: path.join(NM, "@mariozechner", "pi-ai", "dist", "index.js") },
};
let PI = PIS["1.6.0"].dist;
let PI_AI = PIS["1.6.0"].ai;

function parseArgs(argv) {
	const [mode, ...rest] = argv;
	const opts = { mode };
	for (let i = 0; i < rest.length; i += 2) opts[rest[i].replace(/^--/, "")] = rest[i + 1];
	return opts;
}

function need(opts, key) {
	if (!opts[key]) throw new Error(`--${key} is required`);
	return opts[key];
}

const importPi = (rel) => import(pathToFileURL(path.join(PI, rel)).href);

const usage = () => ({ input: 100, output: 20, cacheRead: 0, cacheWrite: 0, totalTokens: 120, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } });
const assistant = (content, ts) => ({
	role: "assistant",
	content,
	api: "anthropic-messages",
	provider: "anthropic",
	model: "claude-sonnet-4-5",
	usage: usage(),
	stopReason: content.some((b) => b.type === "toolCall") ? "toolUse" : "stop",
	timestamp: ts,
});

async function seed(opts) {
	const { SessionManager } = await importPi("core/session-manager.js");
	const word = need(opts, "word");
	let t = Date.parse("2026-05-01T10:00:00Z");
	const next = () => (t += 1000);
	const out = [];

	const write = (cwd, build) => {
		const sm = SessionManager.create(cwd);
		const ids = build(sm);
		out.push({ id: sm.getSessionId(), file: sm.getSessionFile(), cwd, ids });
	};

	write(need(opts, "cwd"), (sm) => {
		const ids = {};
		ids.user = sm.appendMessage({ role: "user", content: [{ type: "text", text: `The ${word} websocket reconnect keeps timing out in CI, please investigate` }], timestamp: next() });
		const call = { type: "toolCall", id: "call_seed_1", name: "bash", arguments: { command: `pytest -q -k ${word}_reconnect` } };
		ids.call = sm.appendMessage(assistant([{ type: "text", text: "Running the failing test." }, call], next()));
		ids.result = sm.appendMessage({
			role: "toolResult",
			toolCallId: call.id,
			toolName: "bash",
			content: [{ type: "text", text: `FAILED tests/test_net.py::test_${word}_reconnect - TimeoutError: backoff exceeded 30s` }],
			isError: true,
			timestamp: next(),
		});
		ids.answer = sm.appendMessage(assistant([{ type: "text", text: `The ${word} reconnect timeout comes from the backoff cap in src/net.py; lowering it to 5s fixes the test.` }], next()));
		sm.appendSessionInfo("reconnect investigation");
		return ids;
	});
	write(need(opts, "cwd"), (sm) => {
		const ids = {};
		ids.user = sm.appendMessage({ role: "user", content: [{ type: "text", text: "Unrelated: update the changelog" }], timestamp: next() });
		ids.answer = sm.appendMessage(assistant([{ type: "text", text: "Changelog updated." }], next()));
		return ids;
	});
	write(need(opts, "other-cwd"), (sm) => {
		const ids = {};
		ids.user = sm.appendMessage({ role: "user", content: [{ type: "text", text: `Other project: the ${word} credentials live in vault path secret/other` }], timestamp: next() });
		ids.answer = sm.appendMessage(assistant([{ type: "text", text: `Noted the ${word} vault path for the other project.` }], next()));
		return ids;
	});
	return { sessions: out };
}

/** piwatch's structured result of the latest tool result named `tool`. */
function lastPiwatch(messages, tool) {
	for (let i = messages.length - 1; i >= 0; i--) {
		const m = messages[i];
		if (m.role === "toolResult" && m.toolName === tool) return { message: m, piwatch: m.details?.piwatch };
	}
	return {};
}

/**
 * Wait until piwatchd knows the running session at all. A search naming a
 * session waits for its file's tail (waitSeconds), but a session the daemon
 * has never seen is simply absent; the test wants the cutoff, not that race.
 */
async function waitUntilIndexed(agentDir, sessionId, timeoutMs = 15_000) {
	const client = path.join(agentDir, "extensions", "piwatch", "daemon-client.ts");
	const { callDaemon } = await import(pathToFileURL(client).href);
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const { result } = await callDaemon("sessions", { limit: 500 }, { all: true });
		if (result.sessions.some((s) => s.sessionId === sessionId)) return;
		if (Date.now() > deadline) throw new Error(`piwatchd did not index session ${sessionId} within ${timeoutMs} ms`);
		await new Promise((r) => setTimeout(r, 100));
	}
}

async function agent(opts) {
	const pi = await import(pathToFileURL(path.join(PI, "index.js")).href);
	const ai = await import(pathToFileURL(PI_AI).href);
	const agentDir = process.env.PI_CODING_AGENT_DIR;
	const cwd = need(opts, "cwd");
	const word = need(opts, "word");
	const steps = opts.steps ?? "full";
	const expect = opts["expect-session"];

	// 1.6.0 streams through a ModelRuntime; 0.73.1 through pi-ai's global
	// provider registry plus an API key for the provider in AuthStorage.
	let faux;
	const modelOptions = {};
	if (pi.ModelRuntime) {
		faux = ai.fauxProvider({ provider: "faux", models: [{ id: "faux-1" }] });
		modelOptions.modelRuntime = await pi.ModelRuntime.create({
			authPath: path.join(agentDir, "auth.json"),
			modelsPath: path.join(agentDir, "models.json"),
			refreshOnCreate: false,
		});
		modelOptions.modelRuntime.registerNativeProvider(faux.provider);
	} else {
		faux = ai.registerFauxProvider({ provider: "faux", models: [{ id: "faux-1" }] });
		const authStorage = pi.AuthStorage.inMemory();
		authStorage.setRuntimeApiKey("faux", "offline");
		modelOptions.authStorage = authStorage;
		modelOptions.modelRegistry = pi.ModelRegistry.inMemory(authStorage);
	}

	let session;
	const call = (name, args, id) => ai.fauxAssistantMessage(ai.fauxToolCall(name, args, { id }), { stopReason: "toolUse" });
	// As a model would: the ids come from the text it read ("3. 01a2382b-e458 9a04d661 · ..."), a
	// short session id (a unique prefix) and the entry id, never from the structured details.
	const target = () => {
		const { message, piwatch } = lastPiwatch(session.messages, "event_search");
		if (!piwatch) throw new Error(`event_search gave no piwatch result: ${JSON.stringify(message?.content)}`);
		const text = message.content?.[0]?.text ?? "";
		const shown = [...text.matchAll(/^\d+\. (\S+) (\S+) · /gm)].map((m) => ({ sessionId: m[1], entryId: m[2] }));
		const hit = shown.find((h) => !expect || expect.startsWith(h.sessionId)) ?? shown[0];
		if (!hit) throw new Error(`event_search found nothing: ${text}`);
		return hit;
	};
	const script = [call("event_search", { query: word, limit: 20 }, "call_search_1")];
	if (steps === "full") {
		script.push(
			() => call("event_read", { ...target(), before: 1, after: 1 }, "call_read_1"),
			() => {
				const { piwatch } = lastPiwatch(session.messages, "event_read");
				return call("event_trace", { sessionId: piwatch.args.sessionId, entryId: piwatch.args.entryId }, "call_trace_1");
			},
			async () => {
				const own = session.sessionManager.getSessionId();
				await waitUntilIndexed(agentDir, own);
				return call("event_search", { query: word, sessionId: [own], limit: 50 }, "call_search_self");
			},
		);
	}
	script.push(ai.fauxAssistantMessage("Done: found the earlier reconnect investigation."));
	faux.setResponses(script);

	const settingsManager = pi.SettingsManager.inMemory({ compaction: { enabled: false }, retry: { enabled: false } });
	const resourceLoader = new pi.DefaultResourceLoader({
		cwd,
		agentDir,
		settingsManager,
		noSkills: true,
		noPromptTemplates: true,
		noThemes: true,
		noContextFiles: true,
	});
	await resourceLoader.reload();
	const loaded = resourceLoader.getExtensions();
	const created = await pi.createAgentSession({
		cwd,
		agentDir,
		model: faux.getModel(),
		...modelOptions,
		settingsManager,
		resourceLoader,
		sessionManager: pi.SessionManager.create(cwd),
		noTools: "builtin",
	});
	session = created.session;
	if (steps === "abort") {
		// Like Esc in Pi: abort while event_search waits on the daemon.
		session.subscribe((event) => {
			if (event.type === "tool_execution_start") setTimeout(() => session.abort(), 300);
		});
	}
	try {
		await session.prompt(`What did we find out about ${word} before?`);
	} finally {
		session.dispose();
	}
	return {
		sessionId: session.sessionManager.getSessionId(),
		sessionFile: session.sessionManager.getSessionFile(),
		extensions: loaded.extensions.map((e) => e.path ?? e.resolvedPath ?? null),
		errors: loaded.errors.map((e) => String(e.error ?? e.message ?? JSON.stringify(e))),
		pendingResponses: faux.getPendingResponseCount(),
	};
}

async function main() {
	const opts = parseArgs(process.argv.slice(2));
	const chosen = PIS[opts.pi ?? "1.6.0"];
	if (!chosen) throw new Error(`--pi must be one of ${Object.keys(PIS).join(", ")}`);
	if (opts.mode === "agent") ({ dist: PI, ai: PI_AI } = chosen);
	// Pi reads its agent directory when imported: set it before any import.
	process.env.PI_CODING_AGENT_DIR = path.resolve(need(opts, "agent-dir"));
	fs.mkdirSync(process.env.PI_CODING_AGENT_DIR, { recursive: true });
	const result = opts.mode === "seed" ? await seed(opts) : opts.mode === "agent" ? await agent(opts) : null;
	if (!result) throw new Error(`unknown mode ${opts.mode}`);
	process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((err) => {
	process.stderr.write(`${err?.stack ?? err}\n`);
	process.exit(1);
});
