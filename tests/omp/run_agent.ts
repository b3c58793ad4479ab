// Runs the real oh-my-pi (omp) agent for tests/test_omp_extension.py (run by Bun):
// an agent session (createAgentSession, omp's scripted mock model, no network)
// in which the extensions installed under <agent dir>/extensions are discovered
// as omp discovers a user's extensions. The model calls event_search <word>,
// then event_read on the first hit it reads in the tool's text, then answers.
//
//   bun run_agent.ts <agent dir> <cwd> <sessions dir> <word>
// prints {sessionId, sessionFile, extensions, errors, calls}.
//
// Tests assert on the session file omp wrote, not on this output.
import { createMockModel, registerMockApi } from "@oh-my-pi/pi-ai/providers/mock";
import { createAgentSession, discoverAuthStorage } from "@oh-my-pi/pi-coding-agent/sdk";
import { SessionManager } from "@oh-my-pi/pi-coding-agent/session/session-manager";

const [agentDir, cwd, sessionsDir, word] = process.argv.slice(2);

const text = (m: any): string =>
	(Array.isArray(m?.content) ? m.content : []).filter((b: any) => b?.type === "text").map((b: any) => b.text).join("\n");

// As a model would: the ids come from the text it read ("3. 01a2382b-e458 9a04d661 · ..."), a
// short session id (a unique prefix) and the entry id, never from the structured details.
const call = (name: string, args: object, id: string) => ({ content: [{ type: "toolCall", id, name, arguments: args }] });

// Until piwatchd lists the running session (omp writes it as the turn goes), at most 15 s.
async function waitUntilIndexed(sessionId: string, timeoutMs = 15_000): Promise<void> {
	const client = `${agentDir}/extensions/piwatch/daemon-client.ts`;
	const { callDaemon } = await import(client);
	const deadline = Date.now() + timeoutMs;
	for (;;) {
		const { result } = await callDaemon("sessions", { limit: 500 }, { all: true });
		if (result.sessions.some((s: any) => s.sessionId === sessionId)) return;
		if (Date.now() > deadline) throw new Error(`piwatchd did not index session ${sessionId} within ${timeoutMs} ms`);
		await new Promise((r) => setTimeout(r, 100));
	}
}

// search -> read the first hit -> trace it -> search the running session itself -> answer.
async function script(context: any) {
	const results = context.messages.filter((m: any) => m.role === "toolResult");
	const last = results.at(-1);
	if (!last) return call("event_search", { query: word, limit: 20 }, "call_search_1");
	if (last.toolCallId === "call_search_1") {
		const hit = /^\d+\. (\S+) (\S+) · /m.exec(text(last));
		if (!hit) return { content: [`event_search found nothing: ${text(last)}`] };
		return call("event_read", { sessionId: hit[1], entryId: hit[2] }, "call_read_1");
	}
	if (last.toolCallId === "call_read_1") {
		const { args } = last.details.piwatch;
		return call("event_trace", { sessionId: args.sessionId, entryId: args.entryId }, "call_trace_1");
	}
	if (last.toolCallId === "call_trace_1") {
		const own = sessionManager.getSessionId();
		await waitUntilIndexed(own);
		return call("event_search", { query: word, sessionId: [own], limit: 50 }, "call_search_self");
	}
	return { content: ["Done: found it."] };
}

registerMockApi();
const mock = createMockModel({ handler: script });
const sessionManager = SessionManager.create(cwd, sessionsDir);
const authStorage = await discoverAuthStorage(agentDir);
authStorage.setRuntimeApiKey("mock", "offline"); // the mock provider needs no key; omp asks for one
const { session, extensionsResult } = (await createAgentSession({
	cwd,
	agentDir,
	model: mock.model,
	authStorage,
	sessionManager,
	hasUI: false,
} as any)) as any;
try {
	await session.prompt(`What did we find out about ${word} before?`);
} finally {
	await session.dispose?.();
}
console.log(
	JSON.stringify({
		sessionId: sessionManager.getSessionId(),
		sessionFile: sessionManager.getSessionFile(),
		extensions: (extensionsResult?.extensions ?? []).map((e: any) => e.path ?? e.resolvedPath ?? null),
		errors: (extensionsResult?.errors ?? []).map((e: any) => String(e.error ?? e.message ?? JSON.stringify(e))),
		calls: mock.calls.length,
	}),
);
