// The daemon's wire format (client/piwatch/protocol.py): a 4-byte big-endian
// length, then one msgpack map. The announced length is checked before any
// body byte is buffered, so a confused or hostile peer cannot make the
// extension allocate without bound.

import { decode, encode } from "@msgpack/msgpack";

export const PROTOCOL_VERSION = 1;
export const MAX_REQUEST_BYTES = 1 << 20;
export const MAX_RESPONSE_BYTES = 32 << 20;

export class FrameError extends Error {}

export function encodeFrame(message: unknown): Buffer {
	const body = encode(message);
	if (body.byteLength > MAX_REQUEST_BYTES) {
		throw new FrameError(`request of ${body.byteLength} bytes exceeds the daemon's limit of ${MAX_REQUEST_BYTES}`);
	}
	const frame = Buffer.allocUnsafe(4 + body.byteLength);
	frame.writeUInt32BE(body.byteLength, 0);
	frame.set(body, 4);
	return frame;
}

/** Accumulates socket chunks and yields whole decoded frames. */
export class FrameDecoder {
	private chunks: Buffer[] = [];
	private buffered = 0;

	private readonly limit: number;

	constructor(limit: number = MAX_RESPONSE_BYTES) {
		this.limit = limit;
	}

	push(chunk: Buffer): unknown[] {
		this.chunks.push(chunk);
		this.buffered += chunk.byteLength;
		const out: unknown[] = [];
		for (;;) {
			if (this.buffered < 4) return out;
			const head = this.take(4, false);
			const size = head.readUInt32BE(0);
			if (size > this.limit) throw new FrameError(`response frame of ${size} bytes exceeds the limit of ${this.limit}`);
			if (this.buffered < 4 + size) return out;
			this.take(4, true);
			const body = this.take(size, true);
			try {
				out.push(decode(body));
			} catch (err) {
				throw new FrameError(`response is not valid msgpack: ${(err as Error)?.message ?? err}`);
			}
		}
	}

	/** `n` bytes from the front; `consume` drops them from the buffer. */
	private take(n: number, consume: boolean): Buffer {
		const all = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
		this.chunks = [all];
		const part = all.subarray(0, n);
		if (consume) {
			this.chunks = [all.subarray(n)];
			this.buffered -= n;
		}
		return part;
	}
}
