#!/usr/bin/env node
// For tests/test_pi_tool_text.py: real Pi sessions, and the Pi tool's own code
// between the model's parameters and the text the model reads.
//
//   node tool_text.mjs seed --agent-dir D --cwd P
//       Writes sessions with Pi 1.6.0's own SessionManager into D/sessions:
//       "forms" (sentences for the query-language checks) and "branches" (a
//       tool call and result, a fork on the path to the leaf, a fork off it,
//       a planted secret, a label, a session name). Prints {sessions: {forms: {id, ids}, branches: {id, ids}}}.
//
//   node tool_text.mjs call --ext DIR < calls.json
//       calls.json: {caller, calls: [{op, params}]}. Each call goes through the
//       extension in DIR exactly as a tool call does: tools.ts turns params
//       into args, daemon-client.ts asks piwatchd, format.ts writes the text.
//       Prints [{args, result, warnings, freshness, text} | {error}].
//
//   node tool_text.mjs format --ext DIR < results.json
//       results.json: [{op, query?, result, warnings, freshness}]: format.ts only.
//       Prints [text].

import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PI = path.resolve(HERE, "..", "pi", "node_modules", "pi160", "dist");

function parseArgs(argv) {
	const [mode, ...rest] = argv;
	const opts = { mode };
	for (let i = 0; i < rest.length; i += 2) opts[rest[i].replace(/^--/, "")] = rest[i + 1];
	return opts;
}

const stdinJson = () => JSON.parse(fs.readFileSync(0, "utf8"));

const usage = () => ({ input: 10, output: 5, cacheRead: 0, cacheWrite: 0, totalTokens: 15, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } });

async function seed(opts) {
	process.env.PI_CODING_AGENT_DIR = path.resolve(opts["agent-dir"]);
	const { SessionManager } = await import(pathToFileURL(path.join(PI, "core", "session-manager.js")).href);
	let t = Date.parse("2026-06-01T09:00:00Z");
	const next = () => (t += 1000);
	const user = (sm, text) => sm.appendMessage({ role: "user", content: [{ type: "text", text }], timestamp: next() });
	const assistant = (sm, content) =>
		sm.appendMessage({
			role: "assistant",
			content: typeof content === "string" ? [{ type: "text", text: content }] : content,
			api: "anthropic-messages",
			provider: "anthropic",
			model: "claude-sonnet-4-5",
			usage: usage(),
			stopReason: typeof content !== "string" && content.some((b) => b.type === "toolCall") ? "toolUse" : "stop",
			timestamp: next(),
		});
	const sessions = {};

	const forms = SessionManager.create(opts.cwd);
	sessions.forms = {
		id: forms.getSessionId(),
		ids: {
			websocket: user(forms, "The flaky websocket test is not fixed yet"),
			parser: assistant(forms, "The flaky parser test passes now"),
			identifier: assistant(forms, "loadSessionCache() threw on a cold start"),
		},
	};

	const sm = SessionManager.create(opts.cwd);
	const ids = {};
	ids.ask = user(sm, "Plan the quarzite migration");
	const call = { type: "toolCall", id: "call_plan_1", name: "read", arguments: { path: "docs/plan.md" } };
	ids.call = assistant(sm, [{ type: "text", text: "Reading the quarzite plan." }, call]);
	ids.result = sm.appendMessage({
		role: "toolResult",
		toolCallId: call.id,
		toolName: "read",
		content: [{ type: "text", text: "quarzite plan: move the tables, then the views" }],
		isError: false,
		timestamp: next(),
	});
	ids.first = assistant(sm, "First quarzite approach: rewrite the schema");
	ids.variantOne = user(sm, "quarzite variant one");
	sm.branch(ids.first);
	ids.variantTwo = user(sm, "quarzite variant two");
	sm.branch(ids.result);
	ids.second = assistant(sm, "Second quarzite approach: keep the schema, add a view");
	ids.go = user(sm, "Go with the quarzite view");
	ids.done = assistant(sm, "Done: the quarzite view is in place");
	ids.secret = user(sm, "quarzite deploy: export AWS_ACCESS_KEY_ID=AKIAQ3QUARZITEX7WY4M");
	ids.label = sm.appendLabelChange(ids.second, "chosen");
	sm.appendSessionInfo("quarzite migration");
	sessions.branches = { id: sm.getSessionId(), ids };
	return { sessions };
}

async function load(ext) {
	const mod = (name) => import(pathToFileURL(path.join(path.resolve(ext), name)).href);
	return { tools: await mod("tools.ts"), client: await mod("daemon-client.ts"), format: await mod("format.ts") };
}

function format(m, op, query, result, warnings, freshness, params = {}) {
	if (op === "search") return m.format.formatSearch(query, result, warnings, freshness, m.tools.searchOptions?.(params) ?? {});
	if (op === "read") return m.format.formatRead(result, warnings, freshness);
	return m.format.formatTrace(result, warnings, freshness);
}

async function call(opts) {
	const m = await load(opts.ext);
	const { caller, calls } = stdinJson();
	const out = [];
	for (const { op, params } of calls) {
		try {
			const args = op === "search" ? m.tools.searchArgs(params) : op === "read" ? m.tools.readArgs(params) : m.tools.traceArgs(params);
			const { result, warnings, freshness } = await m.client.callDaemon(op, args, caller);
			out.push({ args, result, warnings, freshness, text: format(m, op, args.query, result, warnings, freshness, params) });
		} catch (err) {
			out.push({ error: String(err?.message ?? err) });
		}
	}
	return out;
}

async function formatOnly(opts) {
	const m = await load(opts.ext);
	return stdinJson().map((r) => format(m, r.op, r.query, r.result, r.warnings, r.freshness, r.params));
}

async function main() {
	const opts = parseArgs(process.argv.slice(2));
	const modes = { seed, call, format: formatOnly };
	if (!modes[opts.mode]) throw new Error(`unknown mode ${opts.mode}`);
	process.stdout.write(`${JSON.stringify(await modes[opts.mode](opts))}\n`);
}

main().catch((err) => {
	process.stderr.write(`${err?.stack ?? err}\n`);
	process.exit(1);
});
