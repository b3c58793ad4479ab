#!/usr/bin/env node
// For tests/test_pi_history.py: the /history overlay component (history.ts)
// with Pi's real pi-tui (1.6.0's, as Pi maps it for extensions) and a search
// function the script controls, so answers can arrive out of order, which a
// real daemon cannot be made to do on cue.
//
//   node history_unit.mjs --ext DIR
//       Runs the cases below and prints {cases: {name: {ok, detail}}}.

import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PI_TUI = path.resolve(HERE, "..", "pi", "node_modules", "@earendil-works", "pi-tui", "dist", "index.js");

const ext = process.argv[process.argv.indexOf("--ext") + 1];
const { HistoryOverlay } = await import(pathToFileURL(path.join(path.resolve(ext), "history.ts")).href);
const { DaemonError } = await import(pathToFileURL(path.join(path.resolve(ext), "daemon-client.ts")).href);
// What Pi's extension loader gives `import("@mariozechner/pi-tui")`.
const tuiLib = await import(pathToFileURL(PI_TUI).href);
const { visibleWidth } = tuiLib;

const KEYS = { "\x1b": "tui.select.cancel", "\r": "tui.select.confirm", "\x1b[A": "tui.select.up", "\x1b[B": "tui.select.down" };
const keys = { matches: (data, id) => KEYS[data] === id };
// A theme that adds nothing: any escape sequence in the output came from session text.
const theme = { fg: (_c, t) => t, bold: (t) => t };

const hit = (sessionId, entryId, snippet, extra = {}) => ({
	sessionId,
	entryId,
	snippet,
	spans: [],
	timestamp: "2026-05-01T10:00:00Z",
	evidence: { kind: "user.text", toolName: null, fragmentId: "text.0" },
	isError: false,
	...extra,
});
const answer = (hits) => ({ result: { hits, hasMore: false }, warnings: [], freshness: null });
const tick = () => new Promise((r) => setTimeout(r, 10));

function overlay({ width = 80 } = {}) {
	const asked = [];
	const closed = [];
	const search = (query, signal) =>
		new Promise((resolve, reject) => {
			asked.push({ query, resolve, reject, signal });
		});
	const o = new HistoryOverlay({ requestRender() {}, terminal: { rows: 30 } }, theme, keys, (r) => closed.push(r), search, "/p", tuiLib);
	const type = (s) => {
		for (const ch of s) o.handleInput(ch);
	};
	const screen = () => o.render(width).join("\n");
	return { o, asked, closed, type, screen, width };
}

const cases = {};
async function check(name, fn) {
	try {
		const detail = await fn();
		cases[name] = { ok: true, detail: detail ?? null };
	} catch (err) {
		cases[name] = { ok: false, detail: String(err?.stack ?? err) };
	}
}
function expect(cond, what) {
	if (!cond) throw new Error(what);
}

await check("a late answer to an older query is never drawn", async () => {
	const t = overlay();
	t.type("ab");
	expect(t.asked.map((a) => a.query).join(",") === "a,ab", `asked ${t.asked.map((a) => a.query)}`);
	expect(t.asked[0].signal.aborted, "the older request was not aborted");
	t.asked[1].resolve(answer([hit("s1", "e1", "newest answer")]));
	await tick();
	t.asked[0].resolve(answer([hit("s0", "e0", "stale answer")]));
	await tick();
	const s = t.screen();
	expect(s.includes("newest answer") && !s.includes("stale answer"), s);
});

await check("Enter returns the selected hit's reference; Escape returns nothing", async () => {
	const t = overlay();
	t.type("x");
	t.asked[0].resolve(answer([hit("s1", "e1", "first\nsecond line"), hit("s2", "e2", "\n  other one\nmore")]));
	await tick();
	t.o.handleInput("\x1b[B");
	t.o.handleInput("\r");
	const u = overlay();
	u.o.handleInput("\x1b");
	expect(t.closed[0] === "[history: s2/e2] other one", JSON.stringify(t.closed));
	expect(u.closed.length === 1 && u.closed[0] === undefined, JSON.stringify(u.closed));
});

await check("Enter with no hits does nothing", async () => {
	const t = overlay();
	t.o.handleInput("\r");
	expect(t.closed.length === 0 && t.asked.length === 0, "closed or searched with an empty query");
});

await check("session text cannot put escapes on the screen or in the reference", async () => {
	const t = overlay({ width: 200 });
	t.type("q");
	// Terminal controls, and "Trojan Source": bidi overrides, isolates and marks, zero-width and tag characters.
	const evil = "pwn \x1b[2J\x1b]0;title\x07 \x9b31m done \u202enimda\u202c \u2066i\u2069\u200f\u061c z\u200bw\u200d\u2060\ufeff\u{e0041}";
	t.asked[0].resolve(answer([hit("s\x1b1", "e1", evil, { evidence: { kind: "tool.result", toolName: "ba\x1bsh", fragmentId: "r" } })]));
	await tick();
	const s = t.screen();
	t.o.handleInput("\r");
	// pi-tui's own sequences: its cursor markers (APC "pi:...") and the reset after a truncation.
	const ours = s.replace(/\x1b_pi:[^\x07\x1b]*\x07/g, "").replace(/\x1b\[0m/g, "");
	const raw = /[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\u{e0000}-\u{e007f}]/u;
	expect(!raw.test(ours), JSON.stringify(ours));
	expect(s.includes("\\x1b[2J") && s.includes("\\x07") && s.includes("\\u009b"), s);
	expect(s.includes("\\u202enimda\\u202c \\u2066i\\u2069\\u200f\\u061c") && s.includes("z\\u200bw\\u200d\\u2060\\ufeff\\U000e0041"), s);
	expect(!/[\x00-\x1f\x7f-\x9f]/.test(t.closed[0]) && !raw.test(t.closed[0]), JSON.stringify(t.closed[0]));
	expect(t.closed[0].includes("\\u202enimda\\u202c"), JSON.stringify(t.closed[0]));
});

await check("every line fits the width, wide characters included", async () => {
	for (const width of [40, 57, 120]) {
		const t = overlay({ width });
		t.type("w");
		const wide = "界".repeat(200) + " 🎉".repeat(50) + "x".repeat(300);
		t.asked[0].resolve(answer([hit("s1", "e1", wide), hit("s2", "e2", "short")]));
		await tick();
		for (const line of t.o.render(width)) expect(visibleWidth(line) <= width, `width ${width}: ${visibleWidth(line)} ${JSON.stringify(line)}`);
	}
});

await check("a daemon that is down is said so", async () => {
	const t = overlay();
	t.type("z");
	t.asked[0].reject(new DaemonError("daemon_down", "piwatchd is not running at /x.sock (no socket there). Start it with `piwatchd`."));
	await tick();
	expect(t.screen().includes("piwatchd is not running at /x.sock"), t.screen());
});

await check("clearing the query clears the results and asks nothing", async () => {
	const t = overlay();
	t.type("k");
	t.asked[0].resolve(answer([hit("s1", "e1", "kept")]));
	await tick();
	t.o.handleInput("\x7f");
	const s = t.screen();
	expect(!s.includes("kept") && t.asked.length === 1, s);
});

process.stdout.write(JSON.stringify({ cases }));
