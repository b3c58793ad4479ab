// Where piwatchd listens. This must agree byte for byte with the Python side
// (client/piwatch/paths.py, which asks platformdirs.user_runtime_dir), or the
// extension and the daemon silently miss each other. platformdirs only trusts
// a runtime directory that is private (owned by us, mode 0700, below parents
// nobody else can replace), so the same checks are repeated here.

import { accessSync, constants, lstatSync, readlinkSync, statSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { isAbsolute, join, normalize, posix } from "node:path";

export const SOCKET_NAME = "piwatchd.sock";
const APP = "piwatch";
// sun_path is 104 bytes on macOS and 108 on Linux; paths.py keeps a margin.
const MAX_SOCKET_PATH = 100;

type Env = Record<string, string | undefined>;

const euid = (): number => (typeof process.geteuid === "function" ? process.geteuid() : 0);
const uid = (): number => (typeof process.getuid === "function" ? process.getuid() : 0);

function lstatOrNull(p: string) {
	try {
		return lstatSync(p);
	} catch (err: any) {
		if (err?.code === "ENOENT" || err?.code === "ENOTDIR") return null;
		throw err;
	}
}

// platformdirs' _verify_path with the "runtime" policy: every component from
// the root down is owned by root or by us and is a directory that others
// cannot write (unless sticky). Symlinks are followed as it does.
function parentProblem(path: string, missingOk: boolean): string | undefined {
	const parent = posix.dirname(path);
	const owners = new Set([0, euid()]);
	const pending = parent.split("/").filter(Boolean);
	let dir = "/";
	let links = 0;
	try {
		while (pending.length) {
			const entry = posix.join(dir, pending.shift()!);
			const info = lstatOrNull(entry);
			if (!info) return missingOk ? undefined : `${entry} is missing`;
			if (!owners.has(info.uid)) return `${entry}, owned by uid ${info.uid}`;
			if (info.isSymbolicLink()) {
				if (++links > 40) return `${entry}, which has too many symbolic links`;
				const target = readlinkSync(entry);
				if (posix.isAbsolute(target)) dir = "/";
				pending.unshift(...target.split("/").filter(Boolean));
				continue;
			}
			if (!info.isDirectory()) return `${entry}, which is not a directory`;
			if (info.mode & 0o022 && !(info.mode & 0o1000)) return `${entry}, writable by another user`;
			dir = entry;
		}
	} catch (err: any) {
		return `${path} cannot be checked: ${err?.code ?? err}`;
	}
	return undefined;
}

// platformdirs' runtime_dir_problem with mode_check="private".
function dirProblem(path: string, missingOk: boolean): string | undefined {
	let info;
	try {
		info = lstatOrNull(path);
	} catch (err: any) {
		return `${path} cannot be checked: ${err?.code ?? err}`;
	}
	if (!info) return missingOk ? undefined : `${path} is missing`;
	if (info.isSymbolicLink()) return `${path} is a symlink`;
	if (!info.isDirectory()) return `${path} is not a directory`;
	if (info.uid !== euid()) return `${path} is owned by uid ${info.uid}`;
	if ((info.mode & 0o777) !== 0o700) return `${path} has mode ${(info.mode & 0o777).toString(8)}`;
	return undefined;
}

function baseProblem(path: string, missingOk: boolean): string | undefined {
	return dirProblem(path, missingOk) ?? parentProblem(path, missingOk);
}

// Python's tempfile.gettempdir(): the first writable candidate.
function pythonTempDir(env: Env): string {
	const candidates = [env.TMPDIR, env.TEMP, env.TMP].filter((v): v is string => !!v);
	candidates.push("/tmp", "/var/tmp", "/usr/tmp");
	for (const c of candidates) {
		try {
			if (statSync(c).isDirectory()) {
				accessSync(c, constants.W_OK);
				return normalize(c);
			}
		} catch {
			// not usable, try the next one
		}
	}
	return tmpdir();
}

function homeDir(env: Env): string {
	return env.HOME && isAbsolute(env.HOME) ? env.HOME : homedir();
}

/** platformdirs.user_runtime_dir("piwatch") for Linux/BSD and macOS. */
export function userRuntimeDir(env: Env = process.env, platform: string = process.platform): string {
	if (platform === "darwin") return join(homeDir(env), "Library/Caches/TemporaryItems", APP);
	const xdg = env.XDG_RUNTIME_DIR;
	if (xdg && isAbsolute(xdg)) {
		const parent = parentProblem(xdg, true);
		const problem = parent ? (dirProblem(xdg, true) ?? parent) : baseProblem(xdg, true);
		if (!problem) return join(xdg, APP);
	}
	const base = platform.startsWith("openbsd")
		? `/tmp/run/user/${euid()}`
		: platform.startsWith("freebsd") || platform.startsWith("netbsd")
			? `/var/run/user/${euid()}`
			: `/run/user/${euid()}`;
	const chosen = baseProblem(base, false) ? posix.join(pythonTempDir(env), `runtime-${euid()}`) : base;
	return join(chosen, APP);
}

const fits = (p: string): boolean => Buffer.byteLength(p) < MAX_SOCKET_PATH;

export function runtimeDir(env: Env = process.env, platform: string = process.platform): string {
	if (env.PIWATCH_RUNTIME_DIR) return env.PIWATCH_RUNTIME_DIR;
	const preferred = userRuntimeDir(env, platform);
	if (fits(join(preferred, SOCKET_NAME))) return preferred;
	return `/tmp/piwatch-${uid()}`;
}

/** The daemon's socket: $PIWATCH_SOCKET, else <runtime dir>/piwatchd.sock. */
export function socketPath(env: Env = process.env, platform: string = process.platform): string {
	if (env.PIWATCH_SOCKET) return env.PIWATCH_SOCKET;
	return join(runtimeDir(env, platform), SOCKET_NAME);
}
