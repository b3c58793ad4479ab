// Tool parameters (plain JSON Schema: Pi validates it with AJV in every
// version, no TypeBox import needed) and their translation into the daemon's
// request args (the wire contract's SearchArgs, ReadArgs, TraceArgs).

import type { ReadArgs, SearchArgs, SearchFilters, TraceArgs } from "./wire.ts";

export const MAX_HITS = 50;
export const MIN_BUDGET = 200;
export const MAX_BUDGET = 20_000;
export const DEFAULT_HITS = 10;
const SESSION_WAIT_SECONDS = 3;

const KINDS = [
	"user.text",
	"assistant.text",
	"tool.call",
	"tool.result",
	"bash.command",
	"bash.output",
	"summary.compaction",
	"summary.branch",
	"custom.message",
	"session.name",
];
const ROLES = ["user", "assistant", "toolResult", "bashExecution", "custom", "hookMessage", "branchSummary", "compactionSummary", "system", "developer"];
const BRANCH_STATES = ["selected", "alternate", "unknown"];
const SELECTION_STATES = ["direct", "summarized", "omitted", "not-selected", "not-applicable", "unknown"];

const stringList = (description: string, values?: string[]) => ({
	type: "array",
	items: values ? { type: "string", enum: values } : { type: "string" },
	description,
});

const ids = {
	sessionId: { type: "string", description: "Session id, exactly as given by an event_search hit." },
	entryId: { type: "string", description: "Entry id within that session, exactly as given by an event_search hit." },
};

/**
 * The query language, stated once. The description the model reads names
 * exactly these forms, and tests/test_pi_tool_text.py runs every one of them
 * against the daemon: the two that work must work as described, and the
 * search-engine syntax models like to try must behave as plain words.
 */
export const QUERY_FORMS = {
	works: ["words", '"quoted phrase"'],
	plainWords: ["OR", "AND", "NOT", "-word", "prefix*", "field:value", "(parentheses)"],
	// Below the hits holding every word as written, labelled (the default engine; exact: true turns them off).
	relaxed: ["word forms", "identifier parts", "misspelled word", "some of the words"],
};

export const QUERY_DESCRIPTION =
	"What to find in earlier events: user and assistant messages, tool calls and results, bash commands and output, summaries. " +
	'Works best: a few distinctive words (an error message, a function, file or command name) or a "quoted phrase". ' +
	"words: events holding every word as written (in any order, in any case) come first. " +
	'"quoted phrase": those words next to each other, in that order. ' +
	"Below them, each hit labelled with how it matched and weaker than the ones above: every word by other word forms (retrying for retry), " +
	"or by identifier parts (session cache for loadSessionCache); then with a misspelled word repaired from the indexed words (did you mean); " +
	"then, when few events match, events holding only some of the words (at least 2; each hit names the words it matched and the ones it misses). " +
	"exact: true returns only the events holding every word as written. " +
	`There are no operators: ${QUERY_FORMS.plainWords.join(", ")} are searched as plain words ` +
	"(NOT x finds events that contain the word not and x; write whole words, there are no wildcards). " +
	"To narrow, add a word or use the filters (kind, tool, since, isError, ...); to broaden, search again with other words " +
	"(a search that finds nothing may say how many events hold each of its words by itself).";

export const SEARCH_SCHEMA = {
	type: "object",
	properties: {
		query: { type: "string", description: QUERY_DESCRIPTION },
		limit: { type: "integer", minimum: 1, maximum: MAX_HITS, description: `Hits to return (default ${DEFAULT_HITS}, at most ${MAX_HITS}).` },
		offset: { type: "integer", minimum: 0, description: "Skip this many hits (paging)." },
		kind: stringList("Only these kinds of evidence.", KINDS),
		role: stringList("Only these message roles.", ROLES),
		tool: stringList("Only calls/results of these tools (e.g. bash, edit, read)."),
		sessionId: stringList("Only these sessions."),
		since: { type: "string", description: "Only events at or after this time: ISO 8601 (2026-05-01, 2026-05-01T10:00Z) or relative (30m, 12h, 7d, 2w ago)." },
		until: { type: "string", description: "Only events before this time (same forms as since)." },
		isError: { type: "boolean", description: "Only failed (true) or only successful (false) tool results." },
		branchState: stringList("selected: on the branch the session ended on; alternate: an abandoned branch.", BRANCH_STATES),
		selectionState: stringList("Whether the event reached the model's context: direct, summarized (compacted away), omitted, not-selected.", SELECTION_STATES),
		cwdUnder: { type: "string", description: "Only sessions whose working directory is this absolute path or below it (still limited to this project)." },
		includeOwnResults: { type: "boolean", description: "Also return earlier event_search/read/trace results (hidden by default to avoid echoes)." },
		group: {
			type: "string",
			enum: ["event", "session"],
			description:
				"event (default): matching events. session: the earlier sessions that hold matches, ranked by their strongest event (shown as evidence, with how many events matched and when the session ran); " +
				"answers which earlier sessions worked on something. limit and offset then count sessions.",
		},
		exact: { type: "boolean", description: "Only events holding every word as written: no word forms, repaired words or partial matches." },
		budget: {
			type: "integer",
			minimum: MIN_BUDGET,
			maximum: MAX_BUDGET,
			description: "Most tokens (about 4 characters each) this answer may take: snippets get shorter first, then fewer hits are shown, and the answer says the offset for the rest. Default: no limit beyond the page size.",
		},
	},
	required: ["query"],
	additionalProperties: false,
};

export const READ_SCHEMA = {
	type: "object",
	properties: {
		...ids,
		fragmentId: { type: "string", description: 'Read a window of one fragment (e.g. "result", "text.0", "call.1") when its preview was truncated.' },
		offset: { type: "integer", minimum: 0, description: "Window start in characters (with fragmentId)." },
		length: { type: "integer", minimum: 1, maximum: 64000, description: "Window length in characters (with fragmentId; default 8000)." },
		before: { type: "integer", minimum: 0, maximum: 50, description: "Also list this many preceding entries (metadata and a short preview)." },
		after: { type: "integer", minimum: 0, maximum: 50, description: "Also list this many following entries." },
		order: {
			type: "string",
			enum: ["append", "branch"],
			description: "Neighbour order: append (file order, default) or branch (parent chain before, the branch continuation after).",
		},
	},
	required: ["sessionId", "entryId"],
	additionalProperties: false,
};

export const TRACE_SCHEMA = {
	type: "object",
	properties: { ...ids },
	required: ["sessionId", "entryId"],
	additionalProperties: false,
};

const RELATIVE = /^(\d+)\s*([smhdw])$/;
const UNIT_MS: Record<string, number> = { s: 1e3, m: 6e4, h: 36e5, d: 864e5, w: 6048e5 };

/** Mirrors client/piwatch/timeparse.py: relative (7d) or ISO (UTC when no zone). */
export function parseTime(value: string, now = Date.now()): number {
	const v = value.trim();
	const m = RELATIVE.exec(v);
	if (m) return now - Number(m[1]) * UNIT_MS[m[2]];
	const iso = /[zZ]|[+-]\d\d:?\d\d$/.test(v) || !/T|\d\d:\d\d/.test(v) ? v : `${v}Z`;
	const ms = Date.parse(/^\d{4}-\d\d-\d\d$/.test(iso) ? `${iso}T00:00:00Z` : iso);
	if (Number.isNaN(ms)) throw new Error(`not a time: ${JSON.stringify(value)} (use 30m, 12h, 7d or an ISO date such as 2026-05-01T10:00Z)`);
	return ms;
}

const list = (v: unknown): string[] | undefined => {
	if (v === undefined || v === null) return undefined;
	const arr = (Array.isArray(v) ? v : [v]).map(String).filter(Boolean);
	return arr.length ? arr : undefined;
};

function clampInt(v: unknown, lo: number, hi: number, fallback: number): number {
	const n = typeof v === "number" ? v : typeof v === "string" ? Number(v) : Number.NaN;
	return Number.isFinite(n) ? Math.min(hi, Math.max(lo, Math.trunc(n))) : fallback;
}

/** Tool parameters as the model sent them: validated by Pi against the schema, still checked here. */
type Params = Record<string, unknown>;

export function searchArgs(p: Params): SearchArgs {
	const query = typeof p?.query === "string" ? p.query.trim() : "";
	if (!query) throw new Error("event_search needs a non-empty query.");
	const filters: SearchFilters = {};
	const put = <K extends keyof SearchFilters>(key: K, value: SearchFilters[K] | undefined) => {
		if (value !== undefined) filters[key] = value;
	};
	put("kind", list(p.kind));
	put("role", list(p.role));
	put("tool", list(p.tool));
	put("sessionId", list(p.sessionId));
	put("branchState", list(p.branchState));
	put("selectionState", list(p.selectionState));
	if (typeof p.isError === "boolean") filters.isError = p.isError;
	if (typeof p.cwdUnder === "string" && p.cwdUnder.startsWith("/")) filters.cwdUnder = p.cwdUnder;
	if (typeof p.since === "string" && p.since.trim()) filters.sinceMs = parseTime(p.since);
	if (typeof p.until === "string" && p.until.trim()) filters.untilMs = parseTime(p.until);
	const args: SearchArgs = {
		query,
		limit: clampInt(p.limit, 1, MAX_HITS, DEFAULT_HITS),
		offset: clampInt(p.offset, 0, 1_000_000, 0),
		filters,
	};
	if (p.includeOwnResults === true) args.includeOwnResults = true;
	if (p.group === "session") args.group = "session";
	if (p.exact === true) args.exact = true;
	// Named sessions may still be mid-ingest (the running one always is): let
	// the daemon wait briefly until their files are indexed to the end.
	if (filters.sessionId) args.waitSeconds = SESSION_WAIT_SECONDS;
	return args;
}

/** How the answer's text is shaped (not sent to the daemon): the token budget, if any. */
export function searchOptions(p: Params): { budget?: number } {
	return p?.budget === undefined || p.budget === null ? {} : { budget: clampInt(p.budget, MIN_BUDGET, MAX_BUDGET, MAX_BUDGET) };
}

function idArgs(p: Params, op: string): TraceArgs {
	const sessionId = typeof p?.sessionId === "string" ? p.sessionId.trim() : "";
	const entryId = typeof p?.entryId === "string" ? p.entryId.trim() : "";
	if (!sessionId || !entryId) throw new Error(`${op} needs sessionId and entryId from an event_search hit.`);
	return { sessionId, entryId };
}

export function readArgs(p: Params): ReadArgs {
	const args: ReadArgs = idArgs(p, "event_read");
	if (typeof p.fragmentId === "string" && p.fragmentId) args.fragmentId = p.fragmentId;
	if (p.offset !== undefined) args.offset = clampInt(p.offset, 0, Number.MAX_SAFE_INTEGER, 0);
	if (p.length !== undefined) args.length = clampInt(p.length, 1, 64_000, 8_000);
	if (p.before !== undefined) args.before = clampInt(p.before, 0, 50, 0);
	if (p.after !== undefined) args.after = clampInt(p.after, 0, 50, 0);
	if (p.order === "append" || p.order === "branch") args.order = p.order;
	return args;
}

export function traceArgs(p: Params): TraceArgs {
	return idArgs(p, "event_trace");
}
