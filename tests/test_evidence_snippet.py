"""A search hit's snippet from its evidence redacted only where it is cut
(`evidence_snippet`) is the snippet of the fragment redacted whole
(`snippet` of `Evidence.indexed()`), secrets before, inside and after the
match, markers' words and words a secret ran into included."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from redact_cases import PEM_BLOCK, PLANTED

from piwatchd.model.events import Entry
from piwatchd.model.project import HEAD_CHARS, MAX_FRAGMENT_CHARS, Evidence, project_evidence
from piwatchd.model.redact import redact
from piwatchd.text.query import Term
from piwatchd.text.tantivy.index import TantivyText
from piwatchd.text.tantivy.snippets import Marks, evidence_snippet, snippet

WORDS = ["alpha", "retries", "retrying", "key", "token", "redacted", "aws", "loadSessionCache", "café", "x"]
_PIECES = st.one_of(
    st.sampled_from([line for _, line, _ in PLANTED]),
    st.sampled_from([secret for _, _, secret in PLANTED]),
    st.sampled_from(
        [*WORDS, "cafe", "pypi-AgEIcHlwaS5vcmc" + "x" * 40, "password: x.alpha.9Q", "\n", " ", "\x02", ": "]
    ),
    st.text(alphabet="ab \n.", max_size=30),
)


@pytest.fixture(scope="module")
def text():
    t = TantivyText(Path(tempfile.mkdtemp(dir="/tmp", prefix="pw-ev-")) / "ix", writable=True)
    yield t
    t.close()


def _evidence(body: str) -> Evidence:
    """A tool result of this text, as the projection gives it for a snippet."""
    content = [{"type": "text", "text": body}]
    data = {"type": "message", "message": {"role": "toolResult", "toolName": "bash", "content": content}}
    return project_evidence(Entry("e1", None, "message", 0, 0, 10, "fp", data), "result")


@settings(max_examples=400)
@given(
    st.lists(_PIECES, max_size=14).map("".join), st.lists(st.sampled_from(WORDS), min_size=1, max_size=2), st.booleans()
)
def test_the_windowed_snippet_is_the_whole_texts(text, body, words, forms):
    marks = Marks(text, [Term(w, False) for w in words], forms)
    ev = _evidence(body)
    assert evidence_snippet(marks, ev) == snippet(marks, ev.indexed())


_FILLER = "".join(f"filler line {i}\n" for i in range(300))
_PYPI = "pypi-AgEIcHlwaS5vcmc" + "x" * 40


@pytest.mark.parametrize(
    ("body", "word"),
    [
        # A marker's word before the first match of the source's text.
        (f"export GITHUB_TOKEN=ghp_pLaNtEd4x9Q2vL7mN3bK8tR5wY1cZ6dF0gH2J\n{_FILLER}the redacted note", "redacted"),
        # A word a secret ran into (`alphapypi-…`) stands alone once the secret goes.
        (f"alpha{_PYPI}\n{_FILLER}then alpha", "alpha"),
        # The first match of the source's text lies inside a secret, another further on.
        ("password: x.alpha.9Q\nand alpha", "alpha"),
        (f"password: x.alpha.9Q\n{_FILLER}and alpha", "alpha"),
        # A key block whose end lies past the lines around the match: only the whole text finds
        # it, and the lines alone would show the body after a line that is not base64.
        (
            f"{_FILLER}the alpha\n"
            + PEM_BLOCK.replace("\nVTLw", "\n# note\n" + "VTLw7onLRnrq0/IzW7yW\n" * 60 + "VTLw"),
            "alpha",
        ),
    ],
)
def test_redaction_moves_the_first_match(text, body, word):
    marks = Marks(text, [Term(word, False)], False)
    ev = _evidence(body)
    out = evidence_snippet(marks, ev)
    assert out == snippet(marks, ev.indexed()) and "VTLw7onLRnrq0" not in out


@pytest.mark.parametrize("line", [0, 150, HEAD_CHARS // 20 - 3, -300])
def test_a_long_output_shows_the_same_window(text, line):
    """Head and tail of an oversized output (70,000 characters), a secret
    on the match's line and the next."""
    _, secret_line, secret = next(row for row in PLANTED if row[0] == "github-token")
    lines = [f"line {i:04} of output" for i in range(3500)]
    lines[line] = f"the alpha {secret_line}"
    lines[line + 1] = secret_line
    body = "\n".join(lines)
    assert len(body) > MAX_FRAGMENT_CHARS
    marks = Marks(text, [Term("alpha", False)], False)
    ev = _evidence(body)
    out = evidence_snippet(marks, ev)
    assert out == snippet(marks, ev.indexed()) and "\x02alpha\x03" in out and secret not in out
    assert "[redacted: github-token]" in out or line == HEAD_CHARS // 20 - 3  # the head's end cuts its marker


def test_evidence_is_the_indexed_fragment_before_redaction():
    """`project_evidence` reads the same table as the index: the fragment,
    its meta and the event's fragment count, its text as the source's."""
    secret_line = next(line for kind, line, _ in PLANTED if kind == "github-token")
    data = {
        "type": "message",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "looking"},
                {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": secret_line}},
            ],
        },
    }
    ev = project_evidence(Entry("e1", None, "message", 0, 0, 10, "fp", data), "call.1")
    assert ev.fragments == 2 and ev.unredacted is not None and ev.unredacted.meta == "bash"
    assert secret_line in ev.unredacted.text
    indexed = ev.indexed()
    assert indexed is not None and indexed.text == redact(f"command: {secret_line}")[0]
    assert project_evidence(Entry("e1", None, "message", 0, 0, 10, "fp", data), "call.7").unredacted is None
