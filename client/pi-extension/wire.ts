// The daemon's wire contract, as TypeScript types: the shapes of requests and
// responses the extension sends and reads. The contract is defined once, in
// Python (client/piwatch/wire/, msgspec), and exported as JSON Schema
// (client/piwatch/wire_schema.json); tests/test_pi_tool_text.py checks that
// every interface here has exactly the fields of the schema type of the same
// name, with the same required-ness and nullability.
//
// Layout the test relies on: `export interface Name {`, one `field: type;` or
// `field?: type;` per line, `}` alone on a line. A `?` field may be absent
// (the daemon leaves out fields that hold their default).

/** A fork passed on the materialized path (branch order). */
export interface Alternative {
	alternatives: string[];
	at: string;
	followed: string;
}

/** Who asks. `all` is the trusted local CLI's explicit opt-in to every session; otherwise `cwd` or `workspaceRoot` names the authorization root. */
export interface Caller {
	all?: boolean;
	cutoffEntryId?: string | null;
	cwd?: string | null;
	extraRoots?: string[];
	sessionFile?: string | null;
	sessionId?: string | null;
	toolCallId?: string | null;
	workspaceRoot?: string | null;
}

export interface ContentItem {
	callId: string | null;
	fragmentId: string;
	kind: string;
	length: number;
	text: string;
	toolName: string | null;
	truncated: boolean;
	locator?: Locator | null;
	next?: FragmentRef | null;
}

export interface ErrorBody {
	code: string;
	message: string;
}

export interface EventInfo {
	branchState: string;
	contextRole: string;
	idRecorded: boolean;
	isError: boolean;
	meta: Record<string, unknown>;
	parentId: string | null;
	role: string | null;
	selectionState: string;
	timestamp: string | null;
	toolNames: string[];
	type: string;
}

export interface Evidence {
	fragmentId: string;
	kind: string;
	toolName: string | null;
}

export interface ForkStop {
	at: string;
	candidates: string[];
}

export interface FragmentRef {
	fragmentId: string;
	offset: number;
}

export interface FragmentWindow {
	fragmentId: string;
	hasMore: boolean;
	kind: string;
	length: number;
	locator: Locator;
	nextOffset: number | null;
	offset: number;
	text: string;
	totalLength: number;
}

/** A standing query: new hits as their events are committed, pushed on the connection until `unfollow`. */
export interface FollowArgs {
	exact?: boolean;
	filters?: SearchFilters;
	includeOwnResults?: boolean;
	query: string;
}

/** The answer to `follow`; FollowUpdate results follow, with the follow request's id. */
export interface FollowResult {
	maxQueuedHits: number;
	subscription: number;
}

/** Pushed (unasked) after a follow: its new hits. */
export interface FollowUpdate {
	hits: Hit[];
	subscription: number;
}

export interface Freshness {
	backlog?: number | null;
	lastScanMs?: number | null;
	sessions?: SessionFreshness[];
}

export interface HelloArgs {
	proto: number;
	client?: string | null;
}

export interface HelloResult {
	capabilities: string[];
	pid: number;
	proto: number;
	startedAt: number;
	version: string;
}

export interface Hit {
	agent?: "omp" | "pi";
	branchState: string;
	contextRole: string;
	cwd: string | null;
	entryId: string;
	eventType: string;
	evidence: Evidence;
	isError: boolean;
	matched?: string[] | null;
	matchedFragments: number;
	missing?: string[] | null;
	role: string | null;
	score?: number | null;
	selectionState: string;
	sessionId: string;
	sessionName: string | null;
	snippet: string;
	spans: [number, number][];
	tier?: "exact" | "forms" | "partial" | "repaired";
	timestamp: string | null;
}

export interface Leaf {
	entryId: string | null;
	isTarget: boolean;
	known: boolean;
}

export interface Locator {
	byteLength: number;
	byteOffset: number;
	path: string;
}

/** Branch order fills `alternatives`, `stoppedAtFork` and `reachedRoot`; append order leaves them null. */
export interface Neighbours {
	after: NodeSummary[];
	before: NodeSummary[];
	order: "append" | "branch";
	alternatives?: Alternative[] | null;
	reachedRoot?: boolean | null;
	stoppedAtFork?: ForkStop | null;
}

/** A tree node with bounded metadata and a small index preview (never content). */
export interface NodeSummary {
	branchState: string;
	contextRole: string;
	entryId: string;
	isError: boolean;
	preview: string | null;
	previewSource: string;
	role: string | null;
	selectionState: string;
	sessionId: string;
	timestamp: string | null;
	toolNames: string[];
	type: string;
	provenance?: string | null;
}

/** Something the caller should know about the answer (catch-up, a file of the answer's sessions that could not be read). `code` is stable. */
export interface Notice {
	code: string;
	message: string;
	path?: string | null;
}

export interface Omitted {
	field: string;
	kind: string;
	reason: string;
	base64Chars?: number | null;
	counts?: Record<string, unknown> | null;
	mimeType?: string | null;
}

export interface ReadArgs {
	entryId: string;
	sessionId: string;
	after?: number;
	before?: number;
	fragmentId?: string | null;
	length?: number | null;
	offset?: number | null;
	order?: "append" | "branch";
	unredacted?: boolean;
}

export interface ReadResult {
	entryId: string;
	event: EventInfo;
	session: SessionInfo;
	sessionId: string;
	source: SourceInfo;
	content?: ContentItem[] | null;
	fragment?: FragmentWindow | null;
	neighbours?: Neighbours | null;
	omitted?: Omitted[] | null;
	unredacted?: boolean;
}

export interface Relationship {
	direction: "in" | "out";
	kind: string;
	provenance: string;
	target: Target;
	detail?: Record<string, unknown> | null;
}

export interface Response {
	id: number | string | null;
	ok: boolean;
	error?: ErrorBody | null;
	freshness?: Freshness | null;
	result?: unknown;
	warnings?: Notice[];
}

export interface Repair {
	replacement: string;
	word: string;
}

export interface SearchArgs {
	query: string;
	exact?: boolean;
	filters?: SearchFilters;
	group?: "event" | "session";
	includeOwnResults?: boolean;
	limit?: number;
	offset?: number;
	waitSeconds?: number | null;
}

export interface SearchFilters {
	branchState?: string[];
	cwd?: string | null;
	cwdUnder?: string | null;
	eventType?: string[];
	fileMode?: "any" | "changed" | "read";
	files?: string[];
	isError?: boolean | null;
	kind?: string[];
	role?: string[];
	selectionState?: string[];
	sessionId?: string[];
	sinceMs?: number | null;
	tool?: string[];
	untilMs?: number | null;
}

export interface SearchResult {
	groupedEvents?: number | null;
	groupingCapped?: boolean;
	hasMore: boolean;
	hits: Hit[];
	limit: number;
	offset: number;
	query: string;
	relaxed?: boolean;
	repairs?: Repair[];
	scope?: SearchScope | null;
	sessions?: SessionHit[] | null;
	words?: WordCount[] | null;
}

export interface SearchScope {
	roots: string[] | null;
}

export interface SessionFreshness {
	complete: boolean;
	fileBytes: number | null;
	indexedBytes: number;
	msSinceIngest: number | null;
	sessionId: string;
}

export interface SessionHit {
	cwd: string | null;
	evidence: Hit;
	firstTimestamp: string | null;
	lastTimestamp: string | null;
	matchingEvents: number;
	sessionId: string;
	sessionName: string | null;
}

export interface SessionInfo {
	cwd: string | null;
	sourcePath: string;
}

export interface SourceInfo {
	byteLength: number;
	byteOffset: number;
	fingerprint: string;
	path: string;
	status: "changed" | "missing" | "unreadable" | "verified";
	detail?: string | null;
}

export interface Target {
	entryId?: string | null;
	indexed?: boolean | null;
	path?: string | null;
	ref?: string | null;
	sessionId?: string | null;
}

export interface TowardLeaf {
	entryId: string;
	via: "child" | "parent" | null;
}

export interface TraceArgs {
	entryId: string;
	sessionId: string;
}

export interface TraceResult {
	children: NodeSummary[];
	entryId: string;
	materializedLeaf: Leaf;
	node: NodeSummary | null;
	parent: NodeSummary | null;
	parentMissing: string | null;
	relationships: Relationship[];
	sessionId: string;
	siblings: NodeSummary[];
	towardLeaf: TowardLeaf | null;
	towardLeafKnown: boolean;
	omitted?: Omitted[] | null;
}

export interface UnfollowArgs {
	subscription: number;
}

export interface UnfollowResult {
	stopped: boolean;
	subscription: number;
}

export interface WordCount {
	events: number;
	more?: boolean;
	word: string;
}
