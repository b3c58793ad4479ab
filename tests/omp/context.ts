// omp's own context reconstruction as an oracle (run by Bun): for each session
// file, the ids of the entries whose messages omp's `buildSessionContext` puts
// in the model's context now (a message found by identity with its entry's; a
// compaction's summary message by its summary).
//
//   bun context.ts <file>...   prints {"<file>": {"ids": [...], "unmatched": n}} as one JSON object
import { SessionManager } from "@oh-my-pi/pi-coding-agent/session/session-manager";

const out: Record<string, { ids: string[]; unmatched: number }> = {};
for (const file of process.argv.slice(2)) {
	const sm = await SessionManager.open(file);
	const entries = sm.getEntries() as any[];
	const owner = new Map<unknown, string>();
	const summaries = new Map<string, string>(); // a compaction's summary message is made from its entry
	for (const e of entries) {
		if (e.type === "message") owner.set(e.message, e.id);
		else if (e.type === "compaction") summaries.set(e.summary, e.id);
	}
	const ids: string[] = [];
	let unmatched = 0;
	for (const m of sm.buildSessionContext().messages as any[]) {
		const id = owner.get(m) ?? (m.role === "compactionSummary" ? summaries.get(m.summary) : undefined);
		if (id === undefined) unmatched++;
		else ids.push(id);
	}
	out[file] = { ids, unmatched };
}
console.log(JSON.stringify(out));
