// A page of hits as compact text for the model: every hit keeps what an agent
// needs to judge it and to call event_read (a short session id and the entry
// id, kind, time to the minute, tier, the marked snippet around the match);
// what the page's hits share is said once above them, what a session's hits
// share once per session. A token budget shortens snippets first, then shows
// fewer hits, and says how to get the rest.

import type { Hit } from "./wire.ts";

export const OPEN = "«";
export const CLOSE = "»";
// Characters per token, the budget's rough measure (what the issue and peers use).
export const CHARS_PER_TOKEN = 4;
// Snippet lengths tried in turn while a page does not fit its budget (the daemon sends up to 320).
export const SNIPPET_STEPS = [160, 120, 80, 50];

const str = (v: unknown): string => (v === null || v === undefined ? "" : String(v));
const plural = (n: number, word: string): string => `${n} ${word}${n === 1 ? "" : "s"}`;
const arr = <T>(v: T[] | null | undefined): T[] => (Array.isArray(v) ? v : []);
const UUID_HEAD = /^[0-9a-f]{8}-[0-9a-f]{4}-/i;

/**
 * Each session id's shortest prefix that no other id of the answer shares: at
 * least 13 characters of a UUID (its first 48 bits, the creation millisecond
 * of a UUIDv7, so sessions started in the same minute still differ), 8 of
 * anything else. event_read and event_trace take a unique prefix.
 */
export function shortIds(ids: string[]): Map<string, string> {
	const distinct = [...new Set(ids.map(str))];
	const out = new Map<string, string>();
	for (const id of distinct) {
		let n = Math.min(id.length, UUID_HEAD.test(id) ? 13 : 8);
		while (n < id.length && distinct.some((o) => o !== id && o.startsWith(id.slice(0, n)))) n++;
		out.set(id, id.slice(0, n));
	}
	return out;
}

/** "2026-12-01T10:00:01.123Z" -> "2026-12-01 10:00" (UTC, as recorded). */
export function minute(ts: string | null | undefined): string {
	const m = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d)/.exec(str(ts));
	return m ? `${m[1]} ${m[2]}` : str(ts) || "time unknown";
}

type Span = [number, number];

function validSpans(spans: unknown, length: number): Span[] {
	const out: Span[] = [];
	for (const s of arr(spans as unknown[])) {
		if (!Array.isArray(s) || s.length < 2) continue;
		const [a, b] = s.map(Number);
		if (Number.isInteger(a) && Number.isInteger(b) && 0 <= a && a < b && b <= length) out.push([a, b]);
	}
	return out;
}

/** Insert match markers; spans are code-point offsets (Python str indices). */
export function markSnippet(snippet: string, spans: unknown): string {
	const chars = Array.from(snippet);
	const valid = validSpans(spans, chars.length);
	if (!valid.length) return snippet;
	const opens = new Map<number, number>();
	const closes = new Map<number, number>();
	for (const [a, b] of valid) {
		opens.set(a, (opens.get(a) ?? 0) + 1);
		closes.set(b, (closes.get(b) ?? 0) + 1);
	}
	let out = "";
	for (let i = 0; i <= chars.length; i++) {
		out += CLOSE.repeat(closes.get(i) ?? 0) + OPEN.repeat(opens.get(i) ?? 0);
		if (i < chars.length) out += chars[i];
	}
	return out;
}

/**
 * The marked snippet cut to about `max` characters around its first match
 * (a quarter of the window before it), "…" where it was cut. Whitespace runs
 * become one space: line breaks cost the model tokens and tell it nothing here.
 */
export function snippetWindow(snippet: string, spans: unknown, max: number): string {
	const chars = Array.from(str(snippet));
	const valid = validSpans(spans, chars.length);
	let start = 0;
	if (chars.length > max) {
		const first = valid.length ? valid[0][0] : 0;
		start = Math.max(0, Math.min(first - Math.floor(max / 4), chars.length - max));
	}
	let end = Math.min(chars.length, start + max);
	// Never cut a match in two: the window ends after a match it would split.
	const split = valid.find(([a, b]) => a < end && b > end);
	if (split) end = split[1];
	const inside = valid
		.filter(([a, b]) => a < end && b > start)
		.map(([a, b]): Span => [Math.max(a, start) - start, Math.min(b, end) - start]);
	const marked = markSnippet(chars.slice(start, end).join(""), inside).replace(/\s+/g, " ").trim();
	return `${start > 0 ? "…" : ""}${marked}${end < chars.length ? "…" : ""}`;
}

export interface PageStates {
	branchState: string;
	selectionState: string;
	contextRole: string;
}

function commonest(values: string[]): string {
	const counts = new Map<string, number>();
	for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
	return [...counts.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] ?? "";
}

/** The states most hits of the page share: said once, and each hit says only where it differs. */
export function pageStates(hits: Hit[]): PageStates {
	return {
		branchState: commonest(hits.map((h) => str(h.branchState))),
		selectionState: commonest(hits.map((h) => str(h.selectionState))),
		contextRole: commonest(hits.map((h) => str(h.contextRole))),
	};
}

export function statesText(s: Partial<PageStates>): string {
	const parts = [];
	if (s.branchState) parts.push(`branch ${s.branchState}`);
	if (s.selectionState) parts.push(`context ${s.selectionState}`);
	if (s.contextRole && s.contextRole !== "conversation") parts.push(`role in context: ${s.contextRole}`);
	return parts.join(", ");
}

function ownStates(h: Hit, page: PageStates): string {
	const differs = (k: keyof PageStates) => (str(h[k]) !== page[k] ? str(h[k]) : "");
	const own = statesText({ branchState: differs("branchState"), selectionState: differs("selectionState") });
	const role = str(h.contextRole) !== page.contextRole ? `role in context: ${str(h.contextRole)}` : "";
	return [own, role, h.isError ? "error" : ""].filter(Boolean).join(", ");
}

/** Below exact, on the hit's own line: "partial, missing: wrong, number" (the others of the query's words matched). */
export function tierText(h: Hit): string | null {
	const tier = h.tier ?? "exact";
	if (tier === "exact") return null;
	const missing = arr(h.missing);
	return missing.length ? `${tier}, missing: ${missing.join(", ")}` : tier;
}

export interface HitContext {
	ids: Map<string, string>;
	page: PageStates;
	snippetMax: number;
	// The session is named on the line above (a grouped search's session): the hit gives its entry only.
	sessionAbove?: boolean;
}

/** A hit in two lines: identity, kind, time, what differs from the page and its tier below exact; its snippet. */
export function hitLines(h: Hit, lead: string, ctx: HitContext): string[] {
	const pad = " ".repeat(lead.length);
	const ev = h.evidence;
	const kind = ev?.kind ? `${ev.kind}${ev.toolName ? ` [${ev.toolName}]` : ""}` : str(h.eventType);
	const id = ctx.sessionAbove ? `entry ${str(h.entryId)}` : `${ctx.ids.get(h.sessionId) ?? h.sessionId} ${str(h.entryId)}`;
	const parts = [id, kind, minute(h.timestamp)];
	const own = ownStates(h, ctx.page);
	if (own) parts.push(own);
	if (h.matchedFragments > 1) parts.push(`${h.matchedFragments} parts matched`);
	const tier = tierText(h);
	if (tier) parts.push(tier);
	return [`${lead}${parts.join(" · ")}`, `${pad}${snippetWindow(str(h.snippet), h.spans, ctx.snippetMax)}`];
}

/**
 * What a page's sessions are, once each: the short id, its name, and its cwd
 * where that is not the searched root (a workspace caller's hits all come
 * from its own project, so the root is said once above).
 */
export function sessionFacts(hits: Hit[], ids: Map<string, string>, roots: string[]): string[] {
	const seen = new Set<string>();
	const out: string[] = [];
	for (const h of hits) {
		if (seen.has(h.sessionId)) continue;
		seen.add(h.sessionId);
		const name = h.sessionName ? ` "${str(h.sessionName).slice(0, 80)}"` : "";
		const cwd = h.cwd && !roots.includes(h.cwd) ? ` cwd ${h.cwd}` : "";
		if (name || cwd) out.push(`  ${ids.get(h.sessionId) ?? h.sessionId}${name}${cwd}`);
	}
	return out;
}

/**
 * The largest rendering that fits `maxChars`: snippets shortened step by
 * step, then fewer hits. `render(snippetMax, count)` gives the whole text.
 * Returns the text and how many hits it shows.
 */
export function fitBudget(count: number, maxChars: number, render: (snippetMax: number, shown: number) => string): [string, number] {
	for (const step of SNIPPET_STEPS) {
		const text = render(step, count);
		if (text.length <= maxChars) return [text, count];
	}
	const last = SNIPPET_STEPS[SNIPPET_STEPS.length - 1];
	let shown = count;
	let text = render(last, shown);
	while (shown > 1 && text.length > maxChars) {
		shown--;
		text = render(last, shown);
	}
	return [text, shown];
}
