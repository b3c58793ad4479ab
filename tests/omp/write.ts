// Writes oh-my-pi (omp) session files with omp's own SessionManager (the real
// writer, run by Bun; no model): per session a session_init, a user turn and
// an assistant answer, a mode change, a rule injection, two extension state
// entries (custom: one of a type a test registers), a rename, a /clear
// boundary, a later turn (in odd sessions a compaction keeping it and one more
// turn) and a second rename. Every text carries a token the
// test looks for (or must never find).
//
//   bun write.ts <sessions dir> <cwd> <count>   prints each file's path
import { SessionManager } from "@oh-my-pi/pi-coding-agent/session/session-manager";

const [dir, cwd, count] = [process.argv[2], process.argv[3], Number(process.argv[4] ?? "1")];
const zero = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 };
const usage = { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2, cost: zero };

function user(text: string) {
	return { role: "user", content: [{ type: "text", text }], timestamp: Date.now() } as any;
}

for (let i = 0; i < count; i++) {
	const sm = SessionManager.create(cwd, dir);
	sm.appendSessionInit({ systemPrompt: `sysprompttoken${i} rules`, task: `tasktoken${i}`, tools: ["read", "bash"] });
	sm.appendMessage(user(`usertoken${i} please`));
	const answer = [{ type: "text", text: `assistanttoken${i} done` }];
	sm.appendMessage({ role: "assistant", content: answer, api: "x", provider: "p", model: "m", usage, stopReason: "stop", timestamp: Date.now() } as any);
	await sm.ensureOnDisk();
	sm.appendModeChange("plan", { planFile: `/tmp/plantoken${i}` });
	sm.appendTtsrInjection(["rulea"]);
	// Extension state: an unregistered type is never searchable; a registered one by its named field only.
	sm.appendCustomEntry("omp-family.unknown", { note: `customtoken${i} state` });
	sm.appendCustomEntry("acme.notes", { summary: `registeredtoken${i} summary`, other: `hiddentoken${i} field` });
	await sm.setSessionName(`First ${i} firsttoken${i}`, "user");
	sm.appendResetBoundary();
	const later = sm.appendMessage(user(`latertoken${i} again`));
	if (i % 2 === 1) {
		// A compaction after the /clear, keeping the later turn: the compaction wins.
		sm.appendCompaction(`compacttoken${i} summary`, undefined, later, 100);
		sm.appendMessage(user(`aftercompacttoken${i} more`));
	}
	await sm.setSessionName(`Renamed ${i} secondtoken${i}`, "user");
	await sm.flush();
	console.log(sm.getSessionFile());
}
