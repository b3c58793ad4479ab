// Writes an oh-my-pi (omp) session and two children with omp's own
// SessionManager (run by Bun; no model), one for each way omp names a parent
// in `parentSession`: `fork()` records the parent's session id, and
// `createBranchedSession()` (a branch into a new file) the parent's file path.
//
//   bun lineage.ts <parent dir> <parent cwd> <child dir> <child cwd>
// prints `parent <file>`, `fork <file>`, `branch <file>`, one a line.
import { SessionManager } from "@oh-my-pi/pi-coding-agent/session/session-manager";

const [parentDir, parentCwd, childDir, childCwd] = process.argv.slice(2);
const zero = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 };
const usage = { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2, cost: zero };
const user = (text: string) => ({ role: "user", content: [{ type: "text", text }], timestamp: Date.now() }) as any;
const assistant = (text: string) =>
	({ role: "assistant", content: [{ type: "text", text }], api: "x", provider: "p", model: "m", usage, stopReason: "stop", timestamp: Date.now() }) as any;

const parent = SessionManager.create(parentCwd, parentDir);
const first = parent.appendMessage(user("parenttoken question"));
parent.appendMessage(assistant("parentanswer given"));
await parent.ensureOnDisk();
await parent.flush();
const parentFile = parent.getSessionFile()!;
console.log(`parent ${parentFile}`);

// The fork: the same entries in a new file, its header naming the parent by id.
const forked = await SessionManager.open(parentFile, parentDir);
await forked.fork();
await forked.moveTo(childCwd, childDir);
forked.appendMessage(user("forktoken later"));
await forked.flush();
console.log(`fork ${forked.getSessionFile()}`);

// The branch: the path to the first entry in a new file, its header naming the parent's file.
const branched = await SessionManager.open(parentFile, parentDir);
branched.createBranchedSession(first);
await branched.moveTo(childCwd, childDir);
branched.appendMessage(user("branchtoken later"));
await branched.flush();
console.log(`branch ${branched.getSessionFile()}`);
