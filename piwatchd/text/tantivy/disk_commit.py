"""The on-disk text index's commit, off the ingest thread: the writer's
commit (an fsync, tens of ms and more beside a large index) and the reload
run in a thread of their own while the RAM overlay covers what arrives
meanwhile (`TantivyText.start_commit` / `finish_commit`)."""

from __future__ import annotations

import threading

import tantivy

__all__ = ["DiskCommit"]


class DiskCommit:
    """A disk commit running in its own thread: the writer's commit (the
    fsync), then the reload, so that the on-disk searcher shows it before the
    ingest thread empties the overlay of what it holds (`finish_commit`)."""

    def __init__(self, writer: tantivy.IndexWriter, index: tantivy.Index, added: int) -> None:
        self.before = index.searcher().num_docs
        self.added = added
        self.after = self.before
        self.error: BaseException | None = None
        self.done = threading.Event()
        threading.Thread(target=self._run, args=(writer, index), name="piwatchd-text-commit", daemon=True).start()

    def _run(self, writer: tantivy.IndexWriter, index: tantivy.Index) -> None:
        try:
            writer.commit()
            index.reload()
            self.after = index.searcher().num_docs
        except BaseException as exc:  # noqa: BLE001 - raised again in the ingest thread (`finish_commit`)
            self.error = exc
        finally:
            self.done.set()
