"""Redacting a window of a text (`line_secrets`, `shown`) is exactly as safe
as redacting the whole text: the lines around a window hold the whole
text's secrets there, none cut at their edges, and a shown span never holds
a character of a secret, wherever the window's edges fall."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
from redact_cases import LOOKALIKES, PEM_BLOCK, PLANTED

from piwatchd.model.redact import (
    DEFAULT_RULES,
    Rules,
    find,
    line_secrets,
    marker,
    redact,
    rules_from_config,
    shown,
)

# Pieces of the texts: planted secrets in their lines, those secrets alone
# and cut anywhere, look-alikes, and what runs into or breaks up a secret.
_SECRETS = [secret for _, _, secret in PLANTED]
_PIECES = st.one_of(
    st.sampled_from([line for _, line, _ in PLANTED]),
    st.sampled_from(_SECRETS),
    st.builds(lambda s, i: s[:i], st.sampled_from(_SECRETS), st.integers(0, 80)),
    st.builds(lambda s, i: s[i:], st.sampled_from(_SECRETS), st.integers(0, 80)),
    st.sampled_from(LOOKALIKES),
    st.sampled_from(
        [
            "AWS secret, staging:\n",
            "-----END RSA PRIVATE KEY-----",
            "\n",
            " ",
            "\t",
            "=",
            ": ",
            '"',
            "'",
            "(",
            "[redacted: ",
            "key",
            "TOKEN=",
            "Bearer ",
            "://u:",
        ]
    ),
    st.text(alphabet="aZ09_-./+=:@ \n", max_size=12),
)
_TEXTS = st.lists(st.one_of(_PIECES, st.just("\n")), max_size=16).map("".join)


def _check(text: str, rules: Rules, lo: int, hi: int, a: int, b: int) -> None:
    whole = find(text, rules)
    start, end, secrets = line_secrets(text, lo, hi, rules)
    assert start <= lo and hi <= end
    assert (start == 0 or text[start - 1] == "\n") and (end == len(text) or text[end - 1] == "\n")
    # The lines hold the whole text's secrets there, and none crosses their edges.
    assert secrets == [s for s in whole if s[1] > start and s[0] < end]
    assert all(start <= s[0] and s[1] <= end for s in secrets)
    # Any span inside the lines is shown as from the whole text's redaction.
    a, b = sorted((start + a % (end - start + 1), start + b % (end - start + 1)))
    assert shown(text, a, b, secrets) == shown(text, a, b, whole)
    assert shown(text, 0, len(text), whole) == redact(text, rules)[0]


@settings(max_examples=800)
@given(_TEXTS, st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6))
def test_a_window_of_lines_redacts_as_the_whole_text(text, i, j, a, b):
    if not DEFAULT_RULES.lines_suffice(text):
        return  # the whole text decides (`test_a_secret_across_lines_sends_the_window_to_the_whole_text`)
    lo, hi = sorted((i % (len(text) + 1), j % (len(text) + 1)))
    _check(text, DEFAULT_RULES, lo, hi, a, b)


@given(_TEXTS, st.integers(0, 10**6), st.integers(0, 10**6))
def test_a_shown_span_holds_no_character_of_a_secret(text, a, b):
    """`shown` against a character-by-character reading: a character
    outside every secret as it is, each secret touched as its marker."""
    a, b = sorted((a % (len(text) + 1), b % (len(text) + 1)))
    secrets = find(text)
    out, done = [], set()
    for p in range(a, b):
        inside = [s for s in secrets if s[0] <= p < s[1]]
        if not inside:
            out.append(text[p])
        elif inside[0] not in done:
            done.add(inside[0])
            out.append(marker(inside[0][2]))
    assert shown(text, a, b, secrets) == "".join(out)


def test_a_secret_across_lines_sends_the_window_to_the_whole_text():
    """A key block's body lines alone look like nothing: their lines would
    show them. `lines_suffice` says so for any text that may hold one (a
    key block, an AWS secret after a line break, a configured pattern)."""
    text = f"$ cat id_rsa\n{PEM_BLOCK}\nok"
    body = text.index("MIIE")
    assert line_secrets(text, body, body + 10)[2] == []  # the line by itself holds no secret
    assert not DEFAULT_RULES.lines_suffice(text)
    # Once its trigger matches on one line, the AWS rule also finds a key a line below its name.
    key = "Zq8vN3pL2xR7tY5wK9mB4cF6hJ1gD0sA/PlantE+"
    aws = f"aws_secret_access_key = {key[::-1]}\nAWS secret, staging:\n  {key}"
    below = aws.index(key)
    assert key not in redact(aws)[0] and line_secrets(aws, below, below + 1)[2] == []
    assert not DEFAULT_RULES.lines_suffice(aws)
    rules = rules_from_config({"patterns": [{"name": "acme-key", "regex": r"acme\s+[0-9a-f]{8}"}]})
    split = "acme\n0123abcd"
    assert redact(split, rules)[1] == {"acme-key": 1} and not rules.lines_suffice(split)
    assert rules.lines_suffice("no such key here") and DEFAULT_RULES.lines_suffice("plain\nlines")


def test_a_configured_rule_that_matches_nowhere_leaves_windows_to_the_lines():
    rules = rules_from_config({"patterns": [{"name": "acme-key", "regex": r"acme_[0-9a-f]{8}"}]})
    text = "first line\nexport GITHUB_TOKEN=ghp_pLaNtEd4x9Q2vL7mN3bK8tR5wY1cZ6dF0gH2J\nlast"
    assert rules.lines_suffice(text)
    _check(text, rules, 15, 20, 0, 10**6)
