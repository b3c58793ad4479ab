// Who is asking, for the daemon's authorization: the project (cwd or a
// configured workspace root), the running session, and the cutoff: the entry
// holding the invoking tool call. The daemon hides that entry and everything
// after it, so the agent never "finds" its own current turn as history.

import type { Caller } from "./wire.ts";

export type { Caller };

/**
 * The assistant entry on the current branch whose content holds `toolCallId`.
 * Not simply getLeafId(): in parallel tool mode, sibling calls' immediate
 * results (validation errors, blocks) may already sit after it.
 */
export function findToolCallEntryId(sm: any, toolCallId: string): string | undefined {
	let branch: any[];
	try {
		branch = sm?.getBranch?.() ?? [];
	} catch {
		return undefined;
	}
	for (let i = branch.length - 1; i >= 0; i--) {
		const e = branch[i];
		const content = e?.type === "message" && e.message?.role === "assistant" ? e.message.content : undefined;
		if (Array.isArray(content) && content.some((b: any) => b?.type === "toolCall" && b.id === toolCallId)) return e.id;
	}
	return undefined;
}

/**
 * `findToolCallEntryId`, waiting up to `timeoutMs` for the entry to be
 * recorded: omp persists an assistant message from its own event handler,
 * which may run after the tool has started (Pi records it before). Without
 * it the call is cut at the session's leaf, which hides more than needed.
 */
export async function awaitToolCallEntryId(sm: any, toolCallId: string, timeoutMs = 250): Promise<string | undefined> {
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const id = findToolCallEntryId(sm, toolCallId);
		if (id || Date.now() >= deadline) return id;
		await new Promise((r) => setTimeout(r, 5));
	}
}

function safe<T>(fn: () => T): T | undefined {
	try {
		return fn();
	} catch {
		return undefined;
	}
}

/**
 * The caller map for one tool call (`cutoff` may come from the tool_call
 * handler), or without a tool call for /history: cut at the session's leaf.
 */
export function callerFromContext(ctx: any, toolCallId?: string, cutoff?: string, env = process.env): Caller {
	const sm = ctx?.sessionManager;
	const caller: Caller = {
		cwd: ctx?.cwd ?? safe(() => sm?.getCwd?.()) ?? process.cwd(),
		sessionId: safe(() => sm?.getSessionId?.()),
		sessionFile: safe(() => sm?.getSessionFile?.()),
		// Without any cutoff the daemon hides the whole current session: the safe default.
		cutoffEntryId: cutoff ?? (toolCallId ? findToolCallEntryId(sm, toolCallId) : undefined) ?? safe(() => sm?.getLeafId?.()) ?? undefined,
		toolCallId,
	};
	const root = env.PIWATCH_WORKSPACE_ROOT;
	if (root && root.startsWith("/")) caller.workspaceRoot = root;
	for (const k of Object.keys(caller) as (keyof Caller)[]) if (caller[k] == null) delete caller[k];
	return caller;
}
