// `/history`: an overlay in Pi that searches this project's earlier sessions
// as the user types, through the same daemon request path and authorization
// as the event_search tool (the caller is the running session, cut at its
// current leaf). Enter inserts a short reference into the editor; nothing is
// sent to the model unless the user sends it. Escape closes the overlay.
//
// Every keystroke that changes the query sends a search and aborts the one
// before; an answer is drawn only if it is for the newest query, so an answer
// that arrives late never replaces newer results.

// pi-tui is Pi's own (1.6 maps both package scopes to it, 0.73 knows only
// this one); the extension brings no copy. It is loaded when /history first
// runs, so the tools never depend on it and the modules still import in
// plain Node.
import type * as PiTui from "@mariozechner/pi-tui";
import { callerFromContext } from "./cutoff.ts";
import { callDaemon, DaemonError, type DaemonResponse } from "./daemon-client.ts";
import { hitLabel, markedPieces, oneLine, reference, visibleWindow } from "./history-view.ts";
import { searchArgs } from "./tools.ts";
import type { Caller, Hit, SearchResult } from "./wire.ts";

const HITS = 30;
const RESULT_ROWS = 12;

type Search = (query: string, signal: AbortSignal) => Promise<DaemonResponse<SearchResult>>;

/** The parts of pi-tui the overlay uses. */
export type TuiLib = Pick<typeof PiTui, "Input" | "truncateToWidth" | "visibleWidth">;

const PI_TUI = "@mariozechner/pi-tui";

interface Status {
	tone: "dim" | "warning" | "error";
	text: string;
}

export class HistoryOverlay {
	private readonly input: PiTui.Input;
	private readonly lib: TuiLib;
	private hits: Hit[] = [];
	private selected = 0;
	private query = "";
	private status: Status = { tone: "dim", text: "Type to search earlier sessions of this project." };
	private ticket = 0;
	private pending: AbortController | undefined;
	private _focused = false;

	private readonly tui: { requestRender(): void; terminal?: { rows?: number } };
	private readonly theme: any;
	private readonly keys: { matches(data: string, id: string): boolean };
	private readonly done: (ref: string | undefined) => void;
	private readonly search: Search;
	private readonly scope: string;

	// Plain fields, no parameter properties: the modules also run under Node's own type stripping.
	constructor(
		tui: HistoryOverlay["tui"],
		theme: any,
		keys: HistoryOverlay["keys"],
		done: (ref: string | undefined) => void,
		search: Search,
		scope: string,
		lib: TuiLib,
		initial = "",
	) {
		[this.tui, this.theme, this.keys, this.done, this.search, this.scope] = [tui, theme, keys, done, search, scope];
		[this.lib, this.input] = [lib, new lib.Input()];
		if (initial) {
			this.input.setValue(initial);
			this.changed();
		}
	}

	/** Result rows that fit: the frame, input, status and help take 5 of the terminal's rows. */
	private rows(): number {
		const rows = this.tui.terminal?.rows ?? 30;
		return Math.max(3, Math.min(RESULT_ROWS, rows - 10));
	}

	// The Input inside draws the cursor where Pi's IME support expects it only when it knows it has focus.
	get focused(): boolean {
		return this._focused;
	}
	set focused(value: boolean) {
		this._focused = value;
		this.input.focused = value;
	}

	handleInput(data: string): void {
		const k = this.keys;
		if (k.matches(data, "tui.select.cancel")) return this.close(undefined);
		if (k.matches(data, "tui.select.confirm")) {
			const hit = this.hits[this.selected];
			if (hit) this.close(reference(hit));
			return;
		}
		const last = Math.max(0, this.hits.length - 1);
		if (k.matches(data, "tui.select.up")) this.selected = Math.max(0, this.selected - 1);
		else if (k.matches(data, "tui.select.down")) this.selected = Math.min(last, this.selected + 1);
		else if (k.matches(data, "tui.select.pageUp")) this.selected = Math.max(0, this.selected - this.rows());
		else if (k.matches(data, "tui.select.pageDown")) this.selected = Math.min(last, this.selected + this.rows());
		else {
			this.input.handleInput(data);
			if (this.input.getValue() !== this.query) this.changed();
		}
		this.tui.requestRender();
	}

	private close(ref: string | undefined): void {
		this.pending?.abort();
		this.done(ref);
	}

	/** The query changed: ask for it, and forget whatever older answer is still on its way. */
	private changed(): void {
		this.query = this.input.getValue();
		this.pending?.abort();
		const ticket = ++this.ticket;
		const q = this.query.trim();
		if (!q) {
			[this.hits, this.selected, this.pending] = [[], 0, undefined];
			this.status = { tone: "dim", text: "Type to search earlier sessions of this project." };
			return;
		}
		const ctl = new AbortController();
		this.pending = ctl;
		this.status = { tone: "dim", text: "searching…" };
		this.search(q, ctl.signal).then(
			(r) => this.answered(ticket, r),
			(err) => this.failed(ticket, err),
		);
	}

	private answered(ticket: number, r: DaemonResponse<SearchResult>): void {
		if (ticket !== this.ticket) return; // a newer query was typed meanwhile
		this.hits = r.result.hits;
		this.selected = 0;
		const n = r.result.hits.length;
		const more = r.result.hasMore ? "+" : "";
		const note = r.warnings[0]?.message;
		this.status = note
			? { tone: "warning", text: `${n}${more} hits · ${oneLine(note)}` }
			: { tone: "dim", text: n ? `${n}${more} hits` : `nothing found for ${JSON.stringify(oneLine(this.query.trim()))}` };
		this.tui.requestRender();
	}

	private failed(ticket: number, err: unknown): void {
		if (ticket !== this.ticket || (err instanceof DaemonError && err.code === "aborted")) return;
		this.hits = [];
		const message = err instanceof DaemonError ? err.message : `search failed: ${String((err as Error)?.message ?? err)}`;
		this.status = { tone: "error", text: oneLine(message) };
		this.tui.requestRender();
	}

	render(width: number): string[] {
		const th = this.theme;
		const { truncateToWidth, visibleWidth } = this.lib;
		const inner = Math.max(10, width - 4);
		const pad = (s: string) => s + " ".repeat(Math.max(0, inner - visibleWidth(s)));
		const row = (s: string) => `${th.fg("border", "│")} ${pad(truncateToWidth(s, inner))} ${th.fg("border", "│")}`;
		const title = ` /history · ${oneLine(this.scope)} `;
		const top = truncateToWidth(`╭─${title}${"─".repeat(Math.max(0, width - 3 - visibleWidth(title)))}`, width - 1);
		const lines = [th.fg("border", `${top}╮`)];
		lines.push(...this.input.render(inner).map(row));
		lines.push(row(th.fg(this.status.tone, this.status.text)));
		const rows = this.rows();
		const { start, end } = visibleWindow(this.hits.length, this.selected, rows);
		for (let i = start; i < end; i++) lines.push(row(this.hitLine(this.hits[i], i === this.selected)));
		for (let i = end - start; i < rows; i++) lines.push(row(""));
		lines.push(row(th.fg("dim", "type to search · ↑↓ PgUp PgDn select · Enter insert reference · Esc close")));
		lines.push(th.fg("border", `╰${"─".repeat(Math.max(0, width - 2))}╯`));
		return lines;
	}

	private hitLine(hit: Hit, selected: boolean): string {
		const th = this.theme;
		const snippet = markedPieces(hit.snippet, hit.spans)
			.map(([text, match]) => (match ? th.fg("accent", th.bold(text)) : text))
			.join("");
		const label = th.fg(hit.isError ? "error" : "muted", hitLabel(hit));
		return `${selected ? th.fg("accent", "▶ ") : "  "}${label}  ${snippet}`;
	}

	invalidate(): void {
		this.input.invalidate();
	}
}

/** The search the event_search tool would make for `query`, asked as the running session. */
export function searchAs(caller: Caller): Search {
	return (query, signal) => callDaemon<SearchResult>("search", searchArgs({ query, limit: HITS }), caller, { signal });
}

export function registerHistory(pi: any): void {
	if (typeof pi?.registerCommand !== "function") return; // a host without commands still gets the tools
	pi.registerCommand("history", {
		description: "Search this project's earlier Pi sessions as you type; Enter inserts a reference into the editor",
		handler: async (args: string, ctx: any) => {
			if (!ctx?.hasUI || (ctx.mode !== undefined && ctx.mode !== "tui")) {
				ctx?.ui?.notify?.("/history needs Pi's interactive terminal; the event_search tool works everywhere.", "warning");
				return;
			}
			let lib: TuiLib;
			try {
				lib = await import(PI_TUI);
			} catch (err) {
				ctx.ui.notify(`/history cannot load Pi's terminal UI (${PI_TUI}): ${String((err as Error)?.message ?? err)}`, "error");
				return;
			}
			const caller = callerFromContext(ctx);
			const scope = caller.workspaceRoot ?? caller.cwd ?? "this project";
			let screen: { requestRender(): void } | undefined;
			const ref = await ctx.ui.custom(
				(tui: any, theme: any, keybindings: any, done: (r: string | undefined) => void) => {
					screen = tui;
					return new HistoryOverlay(tui, theme, keybindings, done, searchAs(caller), scope, lib, typeof args === "string" ? args.trim() : "");
				},
				{ overlay: true, overlayOptions: { width: "90%", minWidth: 40, anchor: "center" } },
			);
			if (typeof ref !== "string" || !ref) return;
			// At the cursor, as a paste; Pi redraws the editor only when asked.
			ctx.ui.pasteToEditor(ref);
			screen?.requestRender();
		},
	});
}
