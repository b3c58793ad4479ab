"""piwatchd as a real process: real file operations and the real Pi writer.

Each test starts `piwatchd` on a temp sessions root and a temp database with
short settle/latency, changes files the way editors, crashes and Pi do, and
checks the index through the database and `piwatch search --json`. Every
wait is a poll with a deadline.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import jsonl, msg, v3_header
from helpers.live import (
    BASE,
    FOLDER,
    PIWATCH,
    PIWATCHD,
    entry_ids,
    line,
    no_diagnostics,
    observed,
    poll,
    q,
    search_cli,
    searchable,
)

from piwatchd.text.tantivy.feed import MAX_REPAY_ATTEMPTS


@pytest.mark.timeout(60)
def test_append_byte_by_byte_and_mid_line(live):
    live.path.write_bytes(BASE)
    d = live.daemon()
    poll(lambda: entry_ids(live.db) == ["a", "b"], message="initial index")
    rec = line("c", "b", "gamma ibis")
    with open(live.path, "ab", buffering=0) as fh:
        for i in range(len(rec) - 1):
            fh.write(rec[i : i + 1])
            time.sleep(0.002)  # paces the writer (a byte at a time, as a slow one writes); decides nothing
        # Half a record, checked by the daemon as it is now: nothing ingested, nothing reported.
        poll(lambda: observed(live.db, live.path), message="the half record observed")
        assert entry_ids(live.db) == ["a", "b"]
        assert no_diagnostics(live.db)
        fh.write(rec[-1:])
    poll(lambda: searchable(live.db, live.path), message="byte-by-byte record searchable")
    assert entry_ids(live.db) == ["a", "b", "c"]
    assert no_diagnostics(live.db)
    assert search_cli(live.db, "gamma") == [("s-1", "c")]
    assert d.stop() == 0


@pytest.mark.timeout(60)
def test_continuous_appends_are_ingested_within_max_latency(live):
    live.path.write_bytes(BASE)
    live.daemon()
    poll(lambda: entry_ids(live.db) == ["a", "b"])
    # Events every 20 ms never let the file settle (settle is 50 ms); max latency still flushes.
    seen_while_writing = False
    with open(live.path, "ab", buffering=0) as fh:
        parent = "b"
        for i in range(100):
            fh.write(line(f"n{i}", parent, f"steady {i}"))
            parent = f"n{i}"
            time.sleep(0.02)  # the appends' pace is the test's input: quicker than settle, for 2 s
            if i > 40 and len(entry_ids(live.db)) > 2:
                seen_while_writing = True
    assert seen_while_writing, "a continuously appended file was not ingested while being written"
    poll(lambda: len(entry_ids(live.db)) == 102)


@pytest.mark.timeout(60)
def test_truncate_rewrite_same_size_and_torn_line(live):
    live.path.write_bytes(BASE)
    live.daemon()
    poll(lambda: entry_ids(live.db) == ["a", "b"])
    # Same size, different bytes: old words gone, new words found, never both.
    live.path.write_bytes(BASE.replace(b"walrus", b"badger"))
    poll(lambda: search_cli(live.db, "badger") == [("s-1", "a")], message="same-size rewrite")
    assert search_cli(live.db, "walrus") == []
    # Truncated to the header only: the entries go.
    head = jsonl(v3_header())
    with open(live.path, "r+b") as fh:
        fh.truncate(len(head))
    poll(lambda: entry_ids(live.db) == [], message="truncation")
    # A writer dies mid-record, a later one appends: the torn bytes are skipped and reported.
    with open(live.path, "ab") as fh:
        fh.write(line("x", None, "lost record")[:25])
    poll(lambda: observed(live.db, live.path), message="the torn bytes observed")
    with open(live.path, "ab") as fh:
        fh.write(line("y", None, "survivor otter"))
    poll(lambda: entry_ids(live.db) == ["y"], message="record after a torn line")
    assert q(live.db, "SELECT code, byte_offset FROM diagnostics") == [("torn-line", len(head))]
    out = subprocess.run([PIWATCH, "status", "--db", str(live.db)], capture_output=True, text=True, timeout=60)
    assert "torn-line 1" in out.stdout and f"@ byte {len(head)}" in out.stdout, out.stdout


@pytest.mark.timeout(60)
def test_rename_over_delete_and_recreate(live):
    live.path.write_bytes(BASE)
    other = live.root / FOLDER / "other.jsonl"
    other.write_bytes(jsonl(v3_header("s-2"), msg("o", None, "user", "other session")))
    live.daemon()
    poll(lambda: entry_ids(live.db) == ["a", "b"])
    # Atomic save: temp file renamed over the session.
    tmp = live.root / FOLDER / ".s1.jsonl.tmp"
    tmp.write_bytes(jsonl(v3_header(), msg("r", None, "user", "renamed puffin")))
    os.replace(tmp, live.path)
    poll(lambda: entry_ids(live.db) == ["r"] and searchable(live.db, live.path), message="rename over")
    assert search_cli(live.db, "walrus") == [] and search_cli(live.db, "puffin") == [("s-1", "r")]
    # Delete: removed only once it is really gone.
    ino = live.path.stat().st_ino
    live.path.unlink()
    poll(lambda: q(live.db, "SELECT count(*) FROM sources WHERE path=?", str(live.path))[0][0] == 0, message="removal")
    assert entry_ids(live.db) == []
    assert entry_ids(live.db, "s-2") == ["o"]
    # Recreate at the same path (the file system may hand back the same inode).
    live.path.write_bytes(jsonl(v3_header(), msg("n", None, "user", "newborn gecko")))
    poll(lambda: entry_ids(live.db) == ["n"] and searchable(live.db, live.path), message="recreated file")
    reused = live.path.stat().st_ino == ino
    assert search_cli(live.db, "puffin") == [], f"inode reused: {reused}"


@pytest.mark.timeout(60)
def test_unreadable_file_keeps_its_index(live):
    if os.geteuid() == 0:
        # chmod 000 does not stop root: run this daemon as `nobody` instead, if it can.
        user = 65534
        try:
            probe = subprocess.run([PIWATCHD, "--help"], user=user, capture_output=True, timeout=60)
            usable = probe.returncode == 0
        except OSError:
            usable = False
        if not usable:
            pytest.skip("running as root (chmod 000 does not stop root reads) and the venv is not usable by nobody")
        os.chmod(live.base, 0o777)
        for p in (live.root, live.root / FOLDER):
            os.chmod(p, 0o755)
    else:
        user = None
    live.path.write_bytes(BASE)
    d = live.daemon(user=user)
    poll(lambda: entry_ids(live.db) == ["a", "b"])
    os.chmod(live.path, 0)
    with open(live.path, "ab") as fh:  # root (the test) may still write; the daemon may not read
        fh.write(line("c", "b", "hidden kiwi"))
    poll(
        lambda: q(live.db, "SELECT state FROM sources WHERE path=?", str(live.path)) == [("unreadable",)],
        message="unreadable state",
    )
    assert entry_ids(live.db) == ["a", "b"]  # nothing removed
    os.chmod(live.path, 0o644)
    poll(lambda: entry_ids(live.db) == ["a", "b", "c"], message="readable again")
    assert q(live.db, "SELECT state FROM sources WHERE path=?", str(live.path)) == [("ok",)]
    assert d.stop() == 0


@pytest.mark.timeout(60)
def test_io_error_keeps_its_index_even_for_root(live):
    """An error other than ENOENT (here ELOOP, which root cannot bypass as it
    does chmod 000) marks the source unreadable and removes nothing."""
    live.path.write_bytes(BASE)
    d = live.daemon()
    poll(lambda: entry_ids(live.db) == ["a", "b"])
    saved = live.path.read_bytes()
    live.path.unlink()
    os.symlink(live.path.name, live.path)  # a link to itself: open() fails with ELOOP
    poll(
        lambda: q(live.db, "SELECT state FROM sources WHERE path=?", str(live.path)) == [("unreadable",)],
        message="unreadable state",
    )
    assert entry_ids(live.db) == ["a", "b"]  # nothing removed
    live.path.unlink()
    live.path.write_bytes(saved + line("c", "b", "back again"))
    poll(lambda: entry_ids(live.db) == ["a", "b", "c"], message="readable again")
    assert q(live.db, "SELECT state FROM sources WHERE path=?", str(live.path)) == [("ok",)]
    assert d.stop() == 0


@pytest.mark.timeout(60)
def test_root_removed_and_restored_removes_nothing(live):
    live.path.write_bytes(BASE)
    d = live.daemon()
    poll(lambda: entry_ids(live.db) == ["a", "b"])
    away = live.base / "away"
    live.root.rename(away)
    d.sighup_and_wait_scan()
    # The scan that found the root gone has finished (its report is written after its
    # decisions): whatever it would have removed is removed by now.
    poll(lambda: d.state().last_scan.roots_unavailable == [str(live.root)], message="the scan's report")
    assert entry_ids(live.db) == ["a", "b"]
    away.rename(live.root)
    with open(live.path, "ab") as fh:
        fh.write(line("c", "b", "homecoming crane"))
    poll(lambda: entry_ids(live.db) == ["a", "b", "c"], message="append after restore")
    # A subfolder removed and restored (a real removal; the root stays).
    keep = live.root / "--keep--"
    keep.mkdir()
    (keep / "k.jsonl").write_bytes(jsonl(v3_header("s-k"), msg("k", None, "user", "keeper")))
    poll(lambda: entry_ids(live.db, "s-k") == ["k"], message="new folder picked up")
    shutil.move(str(live.root / FOLDER), str(live.base / "folder-away"))
    poll(lambda: entry_ids(live.db) == [], message="folder removal")
    shutil.move(str(live.base / "folder-away"), str(live.root / FOLDER))
    poll(lambda: entry_ids(live.db) == ["a", "b", "c"], message="folder restored")
    assert d.stop() == 0


@pytest.mark.timeout(60)
def test_restart_has_no_duplicates_and_no_reparse(live):
    live.path.write_bytes(BASE + line("c", "b", "partial follows") + b'{"type":"mess')
    d = live.daemon()
    poll(lambda: entry_ids(live.db) == ["a", "b", "c"])
    assert d.stop() == 0
    before = q(live.db, "SELECT path, bytes_ingested, last_ingest_ms, consumed FROM sources")
    events_before = q(
        live.db,
        "SELECT s.session_id, e.entry_id, e.ordinal, e.fingerprint FROM events e JOIN sessions s USING(session_key) ORDER BY 1, 3",
    )
    d2 = live.daemon()
    assert q(live.db, "SELECT path, bytes_ingested, last_ingest_ms, consumed FROM sources") == before
    assert (
        q(
            live.db,
            "SELECT s.session_id, e.entry_id, e.ordinal, e.fingerprint FROM events e JOIN sessions s USING(session_key) ORDER BY 1, 3",
        )
        == events_before
    )
    assert d2.state().bytes_ingested == 0
    # The partial line completes after the restart: ingested once.
    with open(live.path, "ab") as fh:
        fh.write(
            b'age","id":"d","parentId":"c","timestamp":"2026-05-01T10:00:09.000Z","message":{"role":"user","content":"late"}}\n'
        )
    poll(lambda: entry_ids(live.db) == ["a", "b", "c", "d"])
    assert d2.stop() == 0
    assert "Traceback" not in d2.log.read_text()


# -- the real Pi writer ------------------------------------------------------------

pi = pytest.importorskip  # keep flake-free if tests/pi is absent


@pytest.fixture(scope="module")
def pitools():
    sys.path.insert(0, str(Path(__file__).parent / "pi"))
    try:
        import pitools as pt
    except ImportError:
        pytest.skip("tests/pi/pitools.py not present")
    try:
        pt.ensure_installed()
    except Exception as exc:  # no node: the rest of the suite still runs
        pytest.skip(f"real Pi writer unavailable: {exc}")
    return pt


def _index_snapshot(db: Path):
    events = q(
        db,
        "SELECT s.session_id, e.entry_id, e.ordinal, e.type, e.parent_id, e.fingerprint, e.byte_offset"
        " FROM events e JOIN sessions s USING(session_key) ORDER BY 1, 3",
    )
    frags = q(
        db,
        "SELECT s.session_id, e.entry_id, f.fragment_id, f.kind, f.body, f.tail FROM fragments f"
        " JOIN events e ON e.event_rowid = f.event_rowid JOIN sessions s USING(session_key) ORDER BY 1, 2, 3",
    )
    return events, frags


@pytest.mark.pi
@pytest.mark.timeout(300)
def test_real_pi_writes_forks_appends_and_migrates_while_running(live, pitools):
    agent = live.base / "agent"
    sessions = agent / "sessions"
    d = live.daemon(sessions)  # the root does not exist yet: watched once it appears
    try:
        m = pitools.run_gen(["scenarios", "--out", str(agent), "--pi", "1.6.0"])
        paths = [f["path"] for f in m["files"]]
        assert len(paths) >= 3

        def all_indexed():
            rows = dict(q(live.db, "SELECT path, state FROM sources"))
            return all(rows.get(p) in ("ok", "unsupported", "duplicate") for p in paths)

        poll(all_indexed, 60, message="every scenario file indexed")
        forks = [f for f in m["files"] if f.get("parentSession") or "fork" in json.dumps(f.get("scenario", "")).lower()]
        # Append with the real Pi while the daemon runs.
        target = next(f for f in m["files"] if f.get("version", 3) == 3 and Path(f["path"]).exists())
        a = pitools.run_gen(
            ["append", "--file", target["path"], "--pi", "1.6.0", "--count", "3", "--marker", "zqxmarker"]
        )
        poll(lambda: len(search_cli(live.db, "zqxmarker")) == 6, 30, message="Pi appends searchable")
        got = {e for _, e in search_cli(live.db, "zqxmarker")}
        assert got == set(a["newEntryIds"])
        # Migration (real Pi v1 -> v3 rewrite in place): the v1 ids vanish, Pi's new ids appear.
        v1 = [f for f in m["files"] if f.get("version") == 1 or (f.get("sourceVersion") == 1)]
        if v1:
            mig = pitools.run_gen(["migrate", "--file", v1[0]["path"], "--pi", "1.6.0"])
            sid = mig.get("sessionId")
            poll(
                lambda: (
                    q(
                        live.db,
                        "SELECT count(*) FROM events WHERE session_key=(SELECT session_key FROM sessions WHERE session_id=?) AND entry_id LIKE 'v1-%'",
                        sid,
                    )[0][0]
                    == 0
                    and q(
                        live.db,
                        "SELECT count(*) FROM events WHERE session_key=(SELECT session_key FROM sessions WHERE session_id=?)",
                        sid,
                    )[0][0]
                    > 0
                ),
                30,
                message="migration",
            )
        # No duplicates: every (session, entry) once, and the index equals a clean build.
        live_snapshot = _index_snapshot(live.db)
        assert d.stop() == 0
        clean = live.base / "clean.sqlite3"
        out = subprocess.run(
            [PIWATCH, "index", "--once", "--sessions", str(sessions), "--db", str(clean), "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert _index_snapshot(clean) == live_snapshot
        assert forks is not None
    finally:
        if d.proc.poll() is None:
            d.proc.kill()


@pytest.mark.pi
@pytest.mark.timeout(600)
def test_kill9_at_random_points_converges_to_a_clean_build(live, pitools):
    agent = live.base / "agent"
    m = pitools.run_gen(["corpus", "--out", str(agent), "--pi", "1.6.0", "--bytes", "12M", "--seed", "7"])
    sessions = agent / "sessions"
    files = [f["path"] for f in m["files"]]
    rng = random.Random(1234)
    kills = 0
    for round_ in range(8):
        d = live.daemon(sessions, wait=False)
        time.sleep(rng.uniform(0.3, 1.5))  # the kill's moment is the test's input: any must converge
        if d.proc.poll() is None:
            d.kill9()
            kills += 1
        # Pi keeps writing between crashes.
        pitools.run_gen(
            ["append", "--file", rng.choice(files), "--pi", "1.6.0", "--count", "2", "--marker", f"crash{round_}"]
        )
    assert kills >= 4
    final = live.daemon(sessions)
    # A session whose text re-feed was killed MAX_REPAY_ATTEMPTS times is quarantined
    # by design (a session that kills the process must not crash-loop it); the
    # random kills can land in the same re-feed that often. Such a session is left
    # out of the text comparison below, and must be reported, never silent.
    quarantined = {r[0] for r in q(live.db, f"SELECT session_id FROM text_debt WHERE attempts >= {MAX_REPAY_ATTEMPTS}")}
    if quarantined:  # each named in status by its file, as every per-file problem is
        files = {
            r[0]
            for r in q(
                live.db,
                "SELECT src.path FROM sessions s JOIN sources src ON src.source_id = s.source_id"
                f" WHERE s.session_id IN (SELECT session_id FROM text_debt WHERE attempts >= {MAX_REPAY_ATTEMPTS})",
            )
        }
        assert files <= set(final.state().errors), final.state().errors
    assert final.stop() == 0
    clean = live.base / "clean.sqlite3"
    out = subprocess.run(
        [PIWATCH, "index", "--once", "--sessions", str(sessions), "--db", str(clean), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    got, want = _index_snapshot(live.db), _index_snapshot(clean)
    assert len(got[0]) == len(want[0]) and got == want
    # The text index converged too: no stale or missing documents, same hits.
    got_text = _text_snapshot(live.db, m, left_out=quarantined, owed=quarantined)
    want_text = _text_snapshot(clean, m, left_out=quarantined, owed=set())
    assert got_text[1] == want_text[1]
    if not quarantined:
        assert got_text[0] == want_text[0]


def _text_snapshot(db: Path, manifest: dict, *, left_out: set[str], owed: set[str]):
    from piwatchd.store.schema import open_reader
    from piwatchd.text.query import SearchRequest
    from piwatchd.text.search import search
    from piwatchd.text.tantivy.index import TantivyText, text_dir

    conn = open_reader(db)
    try:
        assert {r[0] for r in conn.execute("SELECT session_id FROM text_debt")} == owed
        words = [n["token"] for n in manifest["needles"][:5]] + [f"crash{i}" for i in range(8)] + ["error"]
        # Every matching event, as a set: ties, and the scores of a common
        # word (deleted documents count until merged), may order them apart.
        hits = {}
        for w in words:
            found, offset = set(), 0
            while True:
                page = search(conn, SearchRequest(w, limit=200, offset=offset))
                found.update((h.session_id, h.entry_id) for h in page.hits if h.session_id not in left_out)
                if not page.has_more:
                    break
                offset += 200
            hits[w] = found
    finally:
        conn.close()
    return TantivyText(text_dir(db), writable=False).count(), hits
