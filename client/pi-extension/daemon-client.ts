// One request to piwatchd: connect, hello (version check), the operation,
// close. A fresh connection per tool call keeps no state across Pi session
// replacement and costs well under a millisecond on a Unix socket, and no
// connection is kept that the daemon could close while idle. A connection
// closed before any byte of a reply (the daemon restarting, or evicting it)
// is tried once more on a new connection, as the Python client does; a reply
// cut off part-way is an error, never retried.
//
// Every failure becomes a DaemonError whose message is written for the model
// and the user (what happened, how to fix it); nothing here may hang: the
// connect and the whole exchange have deadlines, and Pi's abort signal ends
// the exchange at once.

import { createConnection, type Socket } from "node:net";
import { encodeFrame, FrameDecoder, PROTOCOL_VERSION } from "./framing.ts";
import { socketPath } from "./socket-path.ts";
import type { Caller, ErrorBody, Freshness, Notice, Response } from "./wire.ts";

export const CLIENT_NAME = "piwatch-pi/0.1";
const CONNECT_TIMEOUT_MS = 3_000;
const REQUEST_TIMEOUT_MS = 20_000;

const START_HINT =
	"Start it with `piwatchd` (runs in the foreground) or install it as a background service with " +
	"`piwatch service install`; `piwatch status` shows what the index holds.";

// No TypeScript-only syntax (parameter properties, enums) anywhere here: the
// files must also run under Node's own type stripping, not just Pi's jiti.
export class DaemonError extends Error {
	readonly code: string;
	// The connection closed before any byte of a reply: the request may be sent again.
	readonly closedBeforeReply: boolean;
	constructor(code: string, message: string, closedBeforeReply = false) {
		super(message);
		this.name = "DaemonError";
		this.code = code;
		this.closedBeforeReply = closedBeforeReply;
	}
}

export interface CallOptions {
	socket?: string;
	signal?: AbortSignal;
	connectTimeoutMs?: number;
	timeoutMs?: number;
}

/** A successful answer: the op's result (typed by the caller: SearchResult, ReadResult, ...) and the envelope. */
export interface DaemonResponse<R = unknown> {
	result: R;
	warnings: Notice[];
	freshness: Freshness | null;
}

function envTimeout(): number | undefined {
	const raw = Number(process.env.PIWATCH_PI_TIMEOUT_MS);
	return Number.isFinite(raw) && raw > 0 ? raw : undefined;
}

function connectError(path: string, err: NodeJS.ErrnoException | unknown): DaemonError {
	const e = err as NodeJS.ErrnoException | undefined;
	const code = e?.code ?? "error";
	const why =
		code === "ENOENT"
			? "no socket there"
			: code === "ECONNREFUSED"
				? "nothing is listening (stale socket)"
				: code === "EACCES" || code === "EPERM"
					? "permission denied"
					: String(e?.message ?? code);
	return new DaemonError("daemon_down", `piwatchd is not running at ${path} (${why}). ${START_HINT}`);
}

function requestError(op: string, error: Partial<ErrorBody> | null | undefined): DaemonError {
	const code = typeof error?.code === "string" ? error.code : "internal";
	const message = typeof error?.message === "string" ? error.message : "unknown error";
	switch (code) {
		case "not_found":
			return new DaemonError(code, `${op}: not found: ${message}. Ids must come from an event_search hit of this project.`);
		case "query_error":
			return new DaemonError(code, `${op}: the query cannot be searched: ${message}`);
		case "unsupported_protocol":
			return new DaemonError(
				code,
				`piwatchd does not speak protocol ${PROTOCOL_VERSION} of this extension (${message}). ` +
					"Upgrade piwatch and reinstall the extension with `piwatch pi install`, then restart piwatchd.",
			);
		case "timeout":
			return new DaemonError(code, `${op}: piwatchd gave up on the query (${message}); try a narrower query or filters.`);
		case "busy":
			return new DaemonError(code, `${op}: piwatchd is busy (${message}); retry shortly.`);
		default:
			return new DaemonError(code, `${op}: piwatchd answered ${code}: ${message}`);
	}
}

/** Send one operation; resolves with the daemon's result or rejects with a DaemonError. */
export async function callDaemon<R = unknown>(op: string, args: object, caller: Caller, opts: CallOptions = {}): Promise<DaemonResponse<R>> {
	const timeoutMs = opts.timeoutMs ?? envTimeout() ?? REQUEST_TIMEOUT_MS;
	const started = Date.now();
	try {
		return await attempt<R>(op, args, caller, opts, timeoutMs);
	} catch (err) {
		const left = timeoutMs - (Date.now() - started);
		if (!(err instanceof DaemonError) || !err.closedBeforeReply || left <= 0) throw err;
		return await attempt<R>(op, args, caller, opts, left); // once: a second close is reported
	}
}

function attempt<R>(op: string, args: object, caller: Caller, opts: CallOptions, timeoutMs: number): Promise<DaemonResponse<R>> {
	const path = opts.socket ?? socketPath();
	const connectTimeoutMs = Math.min(opts.connectTimeoutMs ?? CONNECT_TIMEOUT_MS, timeoutMs);
	const signal = opts.signal;

	return new Promise<DaemonResponse<R>>((resolve, reject) => {
		if (signal?.aborted) {
			reject(new DaemonError("aborted", `piwatch ${op} was cancelled before it reached piwatchd.`));
			return;
		}
		let settled = false;
		let connected = false;
		let sock: Socket | undefined;
		const decoder = new FrameDecoder();

		const finish = (err?: DaemonError, value?: DaemonResponse<R>) => {
			if (settled) return;
			settled = true;
			clearTimeout(connectTimer);
			clearTimeout(overallTimer);
			signal?.removeEventListener("abort", onAbort);
			sock?.destroy();
			if (err) reject(err);
			else resolve(value!);
		};
		const onAbort = () => finish(new DaemonError("aborted", `piwatch ${op} was cancelled.`));
		const connectTimer = setTimeout(
			() => finish(new DaemonError("daemon_down", `piwatchd did not accept a connection at ${path} within ${connectTimeoutMs} ms. ${START_HINT}`)),
			connectTimeoutMs,
		);
		const overallTimer = setTimeout(
			() => finish(new DaemonError("timeout", `piwatchd did not answer ${op} within ${Math.round(timeoutMs / 1000)} s; see \`piwatch status\`.`)),
			timeoutMs,
		);
		signal?.addEventListener("abort", onAbort, { once: true });

		const send = (message: unknown) => {
			try {
				sock!.write(encodeFrame(message));
			} catch (err) {
				finish(new DaemonError("bad_request", `${op}: ${(err as Error)?.message ?? err}`));
			}
		};

		let stage: "hello" | "op" = "hello";
		let replyBytes = 0; // bytes of the reply awaited now (hello's, then the op's)
		const onFrame = (frame: Response | null | undefined) => {
			if (!frame || typeof frame !== "object") {
				finish(new DaemonError("protocol", `piwatchd sent a malformed response to ${stage}.`));
				return;
			}
			if (stage === "hello") {
				if (frame.ok !== true) {
					finish(requestError("hello", frame.error));
					return;
				}
				const proto = (frame.result as { proto?: unknown } | null | undefined)?.proto;
				if (proto !== undefined && proto !== PROTOCOL_VERSION) {
					finish(requestError("hello", { code: "unsupported_protocol", message: `daemon speaks protocol ${proto}` }));
					return;
				}
				stage = "op";
				replyBytes = 0;
				send({ v: PROTOCOL_VERSION, id: 2, op, args, caller });
				return;
			}
			if (frame.id !== 2) return; // not ours; the daemon answers in order
			if (frame.ok !== true) {
				finish(requestError(op, frame.error));
				return;
			}
			// The daemon's answer to `op` has the contract's result type for it (checked on the Python side).
			finish(undefined, { result: frame.result as R, warnings: frame.warnings ?? [], freshness: frame.freshness ?? null });
		};

		try {
			sock = createConnection({ path });
		} catch (err) {
			finish(connectError(path, err));
			return;
		}
		sock.on("connect", () => {
			connected = true;
			clearTimeout(connectTimer);
			send({ v: PROTOCOL_VERSION, id: 1, op: "hello", args: { proto: PROTOCOL_VERSION, client: CLIENT_NAME } });
		});
		sock.on("data", (chunk: Buffer) => {
			replyBytes += chunk.length;
			let frames: unknown[];
			try {
				frames = decoder.push(chunk);
			} catch (err) {
				finish(new DaemonError("protocol", `bad response from piwatchd: ${(err as Error)?.message ?? err}`));
				return;
			}
			for (const f of frames) onFrame(f as Response);
		});
		sock.on("error", (err: NodeJS.ErrnoException) => {
			finish(
				connected
					? new DaemonError("daemon_down", `piwatchd connection failed during ${op}: ${err?.code ?? err?.message}. ${START_HINT}`, replyBytes === 0)
					: connectError(path, err),
			);
		});
		sock.on("close", () => {
			const partial = replyBytes > 0 ? " part-way through its reply" : "";
			finish(
				new DaemonError("daemon_down", `piwatchd closed the connection${partial} before answering ${op} (is it restarting?). ${START_HINT}`, connected && replyBytes === 0),
			);
		});
	});
}
