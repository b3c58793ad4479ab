// The /history overlay's pure parts: what a hit looks like on one terminal
// line, the reference Enter inserts, and control and format characters made visible.
// No I/O and no Pi objects here (history.ts wires them); the width functions
// are passed in, so tests/pi_e2e can run these with any implementation.

import type { Hit } from "./wire.ts";

// What session text may never send to a terminal raw: client/piwatch/colour.py's UNSAFE, the one
// definition, mirrored (tests/test_pi_extension.py compares the two over every code point). C0
// controls except tab and newline, DEL, C1; every format character (bidi overrides and isolates,
// zero-width spaces and joiners, BOM, tags), the line and paragraph separators: text that would
// display other than it reads ("Trojan Source").
const UNSAFE =
	/[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\u{110bd}\u{110cd}\u{13430}-\u{1343f}\u{1bca0}-\u{1bca3}\u{1d173}-\u{1d17a}\u{e0000}-\u{e007f}]/gu;

/** `text` with every UNSAFE character written as `\xNN` (C0, DEL), `\uNNNN` or `\UNNNNNNNN`, as the CLI shows them. */
export function visibleControls(text: string): string {
	return text.replace(UNSAFE, (c) => {
		const code = c.codePointAt(0) ?? 0;
		const hex = code.toString(16);
		return code < 0x80 ? `\\x${hex.padStart(2, "0")}` : code <= 0xffff ? `\\u${hex.padStart(4, "0")}` : `\\U${hex.padStart(8, "0")}`;
	});
}

/** One line of session text: line breaks and tabs as spaces, controls escaped. */
export function oneLine(text: string): string {
	return visibleControls(text.replace(/[\r\n\t]/g, " "));
}

/** The snippet as (piece, isMatch) on one line, controls escaped per piece so the match spans stay aligned. */
export function markedPieces(snippet: string, spans: readonly (readonly [number, number])[] | undefined): [string, boolean][] {
	// Spans count code points (the daemon is Python), so index by code point.
	const chars = Array.from(snippet.replace(/[\r\n\t]/g, " "));
	const out: [string, boolean][] = [];
	let pos = 0;
	const sorted = [...(spans ?? [])].filter((s) => Array.isArray(s) && s.length === 2).sort((a, b) => a[0] - b[0]);
	for (const [start, end] of sorted) {
		if (!(pos <= start && start < end && end <= chars.length)) continue;
		if (start > pos) out.push([visibleControls(chars.slice(pos, start).join("")), false]);
		out.push([visibleControls(chars.slice(start, end).join("")), true]);
		pos = end;
	}
	if (pos < chars.length) out.push([visibleControls(chars.slice(pos).join("")), false]);
	return out;
}

const REFERENCE_TEXT_CHARS = 80;

/**
 * What Enter puts into Pi's editor: `[history: <sessionId>/<entryId>] <first line of the snippet>`.
 * The user decides whether the model sees it; nothing is sent on its own.
 */
export function reference(hit: Pick<Hit, "sessionId" | "entryId" | "snippet">): string {
	const first = (hit.snippet.split(/\r?\n/).find((l) => l.trim()) ?? "").trim();
	const chars = Array.from(visibleControls(first.replace(/\t/g, " ")));
	const text = chars.length > REFERENCE_TEXT_CHARS ? `${chars.slice(0, REFERENCE_TEXT_CHARS - 1).join("")}…` : chars.join("");
	return `[history: ${visibleControls(hit.sessionId)}/${visibleControls(hit.entryId)}] ${text}`.trimEnd();
}

/** The short label in front of a hit: `2026-05-01 10:00 tool.result bash ERROR`. */
export function hitLabel(hit: Pick<Hit, "timestamp" | "evidence" | "isError">): string {
	const when = (hit.timestamp ?? "?").slice(0, 16).replace("T", " ");
	const tool = hit.evidence.toolName ? ` ${hit.evidence.toolName}` : "";
	return oneLine(`${when} ${hit.evidence.kind}${tool}${hit.isError ? " ERROR" : ""}`);
}

/** The page of results holding `selected`, `rows` results a page. */
export function visibleWindow(count: number, selected: number, rows: number): { start: number; end: number } {
	const n = Math.max(1, Math.floor(rows));
	const start = Math.floor(Math.min(Math.max(0, selected), Math.max(0, count - 1)) / n) * n;
	return { start, end: Math.min(count, start + n) };
}
