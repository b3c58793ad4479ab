"""Index schema, connection roles and migrations.

The index is a disposable read model of the Pi session files, so a schema
change never migrates rows: when `PRAGMA user_version` differs from
`SCHEMA_VERSION`, or the redaction rules' fingerprint differs from the one
recorded in `index_meta` (`piwatchd.store.redaction`), the tables are dropped
and every source is re-read. An index added to the same rows is only
created or replaced in place (`_INDEX_CHANGES`).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ..model.redact import Rules
from ..text.engine import DEFAULT_ENGINE, OwesText, Tuned, all_engines, engine_named, engine_of, index_engine
from .ids import id_list
from .redaction import record_rules, stored_fingerprint

__all__ = [
    "SCHEMA_VERSION",
    "open_writer",
    "open_reader",
    "ensure_schema",
    "SchemaMismatch",
    "owed_param",
    "owed_sql",
    "searchable_bytes",
]

SCHEMA_VERSION = 12
READER_CACHE_KIB = 512  # each read-only connection's page cache (`open_reader`)

# Index changes made after an index file of this SCHEMA_VERSION may have been
# built: its rows stay valid, so they are made in place (no rebuild). None yet.
_INDEX_CHANGES: tuple[str, ...] = ()

_TABLES = (
    "fragments",
    "events",
    "sessions",
    "diagnostics",
    "sources",
    "relationships",
    "service_state",
    "file_evidence",
    "tree_facts",
    "index_meta",
    "text_debt",
)

_SCHEMA = """
CREATE TABLE sources (
    source_id      INTEGER PRIMARY KEY,
    path           TEXT NOT NULL UNIQUE,
    dev            INTEGER,
    ino            INTEGER,
    size           INTEGER,
    mtime_ns       INTEGER,
    consumed       INTEGER NOT NULL DEFAULT 0,  -- end of the last complete line ingested
    prefix_len     INTEGER NOT NULL DEFAULT 0,
    prefix_hash    TEXT,
    tail_len       INTEGER NOT NULL DEFAULT 0,  -- bytes just before `consumed`
    tail_hash      TEXT,
    parser_state   TEXT,                        -- JSON of ParserState
    session_id     TEXT,
    state          TEXT NOT NULL DEFAULT 'ok',  -- ok|stale|unsupported|unreadable|duplicate|pending
    error          TEXT,
    failed_size    INTEGER,                     -- observation that last failed, to retry only on change
    failed_mtime_ns INTEGER,
    diagnostics    INTEGER NOT NULL DEFAULT 0,
    bytes_ingested INTEGER NOT NULL DEFAULT 0,
    last_ingest_ms INTEGER
);

CREATE TABLE diagnostics (
    source_id   INTEGER NOT NULL,
    byte_offset INTEGER,
    code        TEXT NOT NULL,
    message     TEXT NOT NULL,
    repaired    INTEGER NOT NULL DEFAULT 0,
    observed_ms INTEGER NOT NULL
);
CREATE INDEX diagnostics_source ON diagnostics(source_id);

-- `session_key`: the session's integer key, the one every per-event table
-- repeats (a session id, 36 bytes, took a third of the rows and indexes that
-- repeat it); the public identity stays (session_id, entry_id). Keys of
-- deleted sessions may be reused: every row keyed by one goes with its session.
CREATE TABLE sessions (
    session_key       INTEGER PRIMARY KEY,
    session_id        TEXT NOT NULL UNIQUE,
    source_id         INTEGER NOT NULL,
    cwd               TEXT,
    cwd_norm          TEXT,
    cwd_real          TEXT,   -- symlinks resolved when the path existed at index time; authorization compares this
    created           TEXT,
    name              TEXT,
    parent_session    TEXT,   -- as recorded: a path (parentSession / branchedFrom) or an id
    parent_ref        TEXT,   -- the parent as Pi means it: the recorded path made canonical, or the id (store.catalog)
    file_ref          TEXT,   -- this session's file, canonical as a fork's parent_ref names it
    format            TEXT NOT NULL,
    version           INTEGER NOT NULL,
    leaf_id           TEXT,   -- the materialized leaf: last appended entry
    entry_count       INTEGER NOT NULL DEFAULT 0,
    first_ms          INTEGER,
    last_ms           INTEGER,
    redactions        TEXT,   -- JSON {kind: count} of secrets redacted from this session's text
    agent             TEXT NOT NULL DEFAULT 'pi'  -- which agent wrote it: pi | omp
);
CREATE INDEX sessions_cwd ON sessions(cwd_norm);
CREATE INDEX sessions_cwd_real ON sessions(cwd_real);
-- A session's forks (lineage, trace, visibility) without a scan of every
-- session. Partial, because most histories have no fork at all: a full index
-- then holds one value (NULL) whose statistics say "a lookup returns every
-- session", and the planner walks the primary key in id order instead.
CREATE INDEX sessions_fork ON sessions(parent_ref) WHERE parent_ref IS NOT NULL;
-- A fork's parent, by the file it names.
CREATE INDEX sessions_file ON sessions(file_ref);

-- AUTOINCREMENT: rowids are never reused, so a text-index document of a
-- deleted event can never name a different event later.
CREATE TABLE events (
    event_rowid     INTEGER PRIMARY KEY AUTOINCREMENT,
    session_key     INTEGER NOT NULL,
    entry_id        TEXT NOT NULL,
    ordinal         INTEGER NOT NULL,
    parent_id       TEXT,
    type            TEXT NOT NULL,
    role            TEXT,
    tool_names      TEXT,
    ts_ms           INTEGER,
    byte_offset     INTEGER NOT NULL,
    byte_len        INTEGER NOT NULL,
    fingerprint     TEXT NOT NULL,
    is_error        INTEGER NOT NULL DEFAULT 0,
    id_recorded     INTEGER NOT NULL DEFAULT 1,
    context_role    TEXT NOT NULL,
    branch_state    TEXT NOT NULL DEFAULT 'unknown',
    selection_state TEXT NOT NULL DEFAULT 'unknown',
    meta            TEXT,
    UNIQUE (session_key, entry_id)
);
CREATE INDEX events_session_ordinal ON events(session_key, ordinal);
-- Children of an entry, for branch-order reads and traces.
CREATE INDEX events_session_parent ON events(session_key, parent_id);

-- body/tail/meta hold the text only when the engine keeps it in SQLite
-- (`keeps_text`); otherwise the text is in the engine's index alone (never
-- stored twice) and reads re-project it from the source file.
CREATE TABLE fragments (
    frag_rowid  INTEGER PRIMARY KEY AUTOINCREMENT,
    event_rowid INTEGER NOT NULL,
    fragment_id TEXT NOT NULL,
    kind        TEXT NOT NULL,
    tool_name   TEXT,
    call_id     TEXT,           -- a tool call's id (tool.call fragments only)
    body        TEXT,
    tail        TEXT,
    meta        TEXT,
    full_length INTEGER NOT NULL,
    UNIQUE (event_rowid, fragment_id)
);

-- A target entry is always in the edge's own session (entries name entries of
-- their own file); other targets are known only by what was recorded.
CREATE TABLE relationships (
    session_key INTEGER NOT NULL,
    entry_id    TEXT,           -- NULL: an edge of the session itself (session-parent)
    kind        TEXT NOT NULL,  -- tool-result-for | compacts | branch-summary-from | labels | context-edit | session-parent
    target_entry_id   TEXT,     -- NULL when the target is known only by what was recorded
    target_ref  TEXT,           -- as recorded when not an identity: a session path, "root"
    provenance  TEXT NOT NULL,  -- recorded | derived
    detail      TEXT
);
CREATE INDEX relationships_from ON relationships(session_key, entry_id);
CREATE INDEX relationships_to ON relationships(session_key, target_entry_id);

-- Which events read or changed which files (piwatchd.model.relations). A tool
-- result's share of its call's evidence is not copied here: it is read through
-- the result's tool-result-for edge (piwatchd.store.evidence).
CREATE TABLE file_evidence (
    session_key INTEGER NOT NULL,
    entry_id    TEXT NOT NULL,
    path        TEXT NOT NULL,  -- resolved against the session cwd, normalized
    mode        TEXT NOT NULL,  -- read | changed
    source      TEXT NOT NULL,  -- tool-call | tool-result | compaction | branch-summary
    provenance  TEXT NOT NULL,
    raw_path    TEXT NOT NULL,
    tool_name   TEXT,
    call_id     TEXT
);
CREATE INDEX file_evidence_path ON file_evidence(path, mode);
CREATE INDEX file_evidence_entry ON file_evidence(session_key, entry_id);

-- Tree facts an entry's type and role do not imply (piwatchd.model.tree.node_facts);
-- only entries that have some get a row.
CREATE TABLE tree_facts (
    session_key INTEGER NOT NULL,
    entry_id    TEXT NOT NULL,
    facts       TEXT NOT NULL,
    PRIMARY KEY (session_key, entry_id)
) WITHOUT ROWID;

-- A tool result ingested after its call looks the call up by id (only calls keep theirs).
CREATE INDEX fragments_call ON fragments(call_id) WHERE kind = 'tool.call';

-- The writer deletes a session's events and relationships; derived tree rows follow the session row.
CREATE TRIGGER sessions_tree_ad AFTER DELETE ON sessions BEGIN
    DELETE FROM file_evidence WHERE session_key = old.session_key;
    DELETE FROM tree_facts WHERE session_key = old.session_key;
END;

-- Sessions whose text-index documents may lag their rows: written in the
-- same transaction as the rows, cleared once the text index has committed.
-- At start-up every session listed is re-fed from its source file.
-- `attempts` counts re-feeds begun (committed before the work): a session whose re-feed
-- never finished (the process died in it) is not re-fed at the next start but later, and
-- after MAX_REPAY_ATTEMPTS it is quarantined, so no session can crash-loop the daemon.
CREATE TABLE text_debt (
    session_id TEXT PRIMARY KEY,
    attempts   INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- What the live service reports about itself (files known, backlog, last
-- scan, per-file errors), so `piwatch status` can read it with no daemon link.
-- Facts about the index itself: the redaction rules it was built with.
CREATE TABLE index_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL       -- JSON
);

CREATE TABLE service_state (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,   -- JSON
    updated_ms INTEGER NOT NULL
);
"""


def owed_sql(session: str, *, suspects: bool = True) -> str:
    """SQL: the session in column `session` waits for its text to be
    searchable (a `text_debt` row the engine cannot search around yet);
    `suspects`: whether a session whose re-feed failed before counts. One
    parameter: `owed_param(conn)`."""
    suspect = "" if suspects else " AND d.attempts = 0"
    return (
        f"EXISTS (SELECT 1 FROM text_debt d WHERE d.session_id = {session}{suspect}"
        " AND NOT (d.attempts = 0 AND d.session_id IN (SELECT value FROM json_each(?))))"
    )


def owed_param(conn: sqlite3.Connection) -> str:
    """`owed_sql`'s parameter: the owed sessions this process searches anyway
    (the Tantivy writer's overlay holds their changes)."""
    engine = engine_of(conn)
    return id_list(engine.searchable_owed(conn) if isinstance(engine, OwesText) else ())  # FTS5 owes nothing


def searchable_bytes(conn: sqlite3.Connection, path: str) -> int | None:
    """How much of a source file is searchable: its checkpoint, or 0 while its
    session still waits for its text to be searchable (`owed_sql`); None when
    the file is not indexed."""
    row = conn.execute(
        f"SELECT consumed, {owed_sql('sources.session_id')} FROM sources WHERE path=?",
        (owed_param(conn), path),
    ).fetchone()
    if row is None:
        return None
    return 0 if row[1] else row[0]


class SchemaMismatch(Exception):
    """A read-only connection found an index built by another schema version."""


def _configure(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA busy_timeout = 5000")
    conn.execute("PRAGMA temp_store = MEMORY")


def ensure_schema(conn: sqlite3.Connection, rules: Rules | None = None, engine: str = DEFAULT_ENGINE) -> bool:
    """Create or recreate the schema. Returns True when the index was (re)built empty.

    `rules`: the redaction rules in force (None: from the config file).
    `engine`: the text engine's name; a different one rebuilds (the index is disposable).
    """
    text = engine_named(engine)  # an unknown name fails here, before anything is dropped
    if rules is None:
        from ..config import load_settings  # the config module reads files; imported only when needed

        rules = load_settings().redact_rules
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version == SCHEMA_VERSION and stored_fingerprint(conn) == rules.fingerprint and index_engine(conn) == engine:
        for ddl in _INDEX_CHANGES:
            conn.execute(ddl)
        return False
    # Every engine's own tables too: the index may have been built by another.
    tables = [t for e in all_engines() for t in e.tables] + list(_TABLES)
    drops = "".join(f"DROP TABLE IF EXISTS {table};" for table in tables)
    # One script, one transaction: a crash leaves the old schema or the new.
    conn.executescript(f"BEGIN IMMEDIATE;{drops}{_SCHEMA}{text.schema_sql};PRAGMA user_version = {SCHEMA_VERSION};")
    try:
        conn.execute("INSERT INTO index_meta(key, value) VALUES ('engine', ?)", (engine,))
        record_rules(conn, rules)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return True


def open_writer(path: str | Path, rules: Rules | None = None, engine: str = DEFAULT_ENGINE) -> sqlite3.Connection:
    """The one write connection; owned by exactly one thread.

    `rules`: the redaction rules to build with (None: from the config file);
    an index built with other rules is rebuilt.
    """
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=5.0)
    _configure(conn)
    conn.execute("PRAGMA journal_mode = WAL")
    # WAL + NORMAL cannot corrupt; a power loss may roll back the last commits,
    # which is harmless because checkpoints roll back with their rows.
    conn.execute("PRAGMA synchronous = NORMAL")
    ensure_schema(conn, rules, engine)
    # Keep the WAL file from staying at its high-water mark after a checkpoint.
    conn.execute("PRAGMA journal_size_limit = 16777216")
    text = engine_named(engine)
    if isinstance(text, Tuned):
        text.tune(conn)
    return conn


def open_reader(path: str | Path) -> sqlite3.Connection:
    """A read-only connection; raises FileNotFoundError or SchemaMismatch."""
    if not Path(path).exists():
        raise FileNotFoundError(f"no index at {path}: run `piwatch index --once` or start piwatchd")
    conn = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True, isolation_level=None, timeout=5.0)
    _configure(conn)
    conn.execute("PRAGMA query_only = 1")
    # A reader per request thread, each filling its page cache as the index grows: a
    # soak's were still growing after 10 minutes (2 MB each by default). The OS keeps
    # the file's pages anyway: search, read, trace, sessions and status cost the same
    # CPU with 512 KB (on a 200 MB history's index, in-process).
    conn.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version != SCHEMA_VERSION:
        conn.close()
        raise SchemaMismatch(
            f"index {path} has schema {version}, this piwatch needs {SCHEMA_VERSION}: "
            "rebuild it with `piwatch index --once` (the index is disposable)"
        )
    return conn
