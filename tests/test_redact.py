"""piwatchd.model.redact (pure): planted secrets go, look-alikes stay, config rules, and the projection's use of it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st
from redact_cases import LOOKALIKES, PLANTED

from piwatchd.model.events import Entry
from piwatchd.model.project import HEAD_CHARS, MAX_FRAGMENT_CHARS, project_entry
from piwatchd.model.redact import (
    BUILTIN_RULES,
    DEFAULT_RULES,
    NO_RULES,
    RulesError,
    marker,
    redact,
    redact_payload,
    rules_from_config,
)


@pytest.mark.parametrize(("kind", "line", "secret"), PLANTED, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(PLANTED)])
def test_planted_secret_is_replaced_by_its_marker(kind, line, secret):
    out, counts = redact(line)
    assert secret not in out
    assert marker(kind) in out
    assert counts.get(kind, 0) >= 1


@pytest.mark.parametrize("text", LOOKALIKES)
def test_lookalike_is_unchanged(text):
    out, counts = redact(text)
    assert (out, counts) == (text, {})


def test_every_builtin_kind_is_planted():
    assert {r.kind for r in BUILTIN_RULES} <= {k for k, _, _ in PLANTED} | {
        "pypi-token",
        "npm-token",
        "gcp-oauth-secret",
        "azure-sas-signature",
    }


def test_surrounding_words_stay():
    out, _ = redact("before export GITHUB_TOKEN=ghp_pLaNtEd4x9Q2vL7mN3bK8tR5wY1cZ6dF0gH2J after")
    assert out == "before export GITHUB_TOKEN=[redacted: github-token] after"


def test_basic_auth_keeps_user_and_host():
    out, _ = redact("postgres://app:Pl4ntedPassw0rd@db.internal:5432/app")
    assert out == "postgres://app:[redacted: basic-auth]@db.internal:5432/app"


def test_truncated_private_key_block_is_removed_to_its_end():
    text = "$ head -3 key.pem\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n\n$ next"
    out, counts = redact(text)
    assert "MIIEvQ" not in out and "BKcwgg" not in out and out.endswith("$ next") and counts == {"private-key": 1}


def test_json_escaped_service_account_key():
    text = '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBg\\nkqhkiG9w0\\n-----END PRIVATE KEY-----\\n"}'
    out, counts = redact(text)
    assert "MIIEvQ" not in out and counts == {"private-key": 1} and out.endswith('\\n"}')


def test_code_assignments_are_not_secrets():
    for text in (
        "token = self.token",
        "password: string;",
        "key = keys[0]",
        "secret = get_secret()",
        "const apiKey = process.env.API_KEY",
        "resolved[key] = resolveVarRefs(value, vars);",
        "PASSWORD=${DB_PASSWORD}",
        "API_KEY=<your-key-here>",
        "api_key: your_api_key_here",
        "self.key_password = key_password",
        "util._assertion_pass = call_assertion_pass_hook",
        "password = defaultPassword",
        "P.Minipass=P.isWritable=P.isReadable=P.isStream=void 0;",
        'monkey = "b4n4n4sAreGreat2024"',
        "const SIDEBAR_WIDTH_STORAGE_KEY = 'pi-share:v1:sidebar-width';",
        'const X_AWS_EC2_METADATA_TOKEN = "x-aws-ec2-metadata-token";',
        "client_secret: ClientSecret$inboundSchema,",
        '["oauth2-token"]: OAuth2TokenAuth$inboundSchema,',
        "socks5://user:pass@localhost:1080",
        "const password = security?.basic.password;",
        'username=request.username??"",password=request.password??"";',
        "{getBearerTokenEnvKey:getBearerTokenEnvKey2}=x",
        "key=allowH2===!1?a:b",
        "exports.SignatureV4SignWithCredentials=SignatureV4SignWithCredentials;",
        'arg==="--credentials"?credentials=!0:noRefresh=!0;',
        "this.secret=this.privateKey=this.key=secretStream,",
        "const clientSecret = this.#clientAuthentication.clientSecret || ''",
        '-v "$PWD:/workspace"',
        '"PWD": "/Users/maciej"',
        "Key: '1min_35sec.mp4'",
    ):
        assert redact(text) == (text, {}), text


def test_no_rules_redacts_nothing():
    line = PLANTED[3][1]
    assert redact(line, NO_RULES) == (line, {})


# -- properties --------------------------------------------------------------

_words = st.text(alphabet="abcdefghij klmnopqrstuvwxyz0123456789.,;:!?()\n\t-_/", max_size=200)


@settings(max_examples=300, deadline=None)
@given(before=_words, after=_words, case=st.sampled_from(PLANTED))
def test_planted_secret_in_random_text_is_always_removed(before, after, case):
    kind, line, secret = case
    text = f"{before}\n{line}\n{after}"
    out, counts = redact(text)
    assert secret not in out
    assert marker(kind) in out and counts[kind] >= 1


@settings(max_examples=300, deadline=None)
@given(before=_words, after=_words, lookalike=st.sampled_from(LOOKALIKES))
def test_lookalike_in_random_text_is_never_changed(before, after, lookalike):
    text = f"{before}\n{lookalike}\n{after}"
    out, _ = redact(text)
    assert lookalike in out


@settings(max_examples=300, deadline=None)
@given(
    parts=st.lists(
        st.one_of(_words, st.sampled_from([line for _, line, _ in PLANTED]), st.sampled_from(LOOKALIKES)), max_size=6
    )
)
def test_redaction_is_idempotent(parts):
    once, _ = redact(" ".join(parts))
    assert redact(once) == (once, {})


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_without_a_trigger_comes_back_as_the_same_object(text):
    out, counts = redact(text)
    assert (out is text) == (not counts)


# -- configuration -------------------------------------------------------------


def test_config_extra_pattern_and_allowlist():
    rules = rules_from_config(
        {"allow": ["AKIAQ3PLANTEDZX7WY4M"], "patterns": [{"name": "acme-key", "regex": r"acme_([0-9a-f]{32})"}]}
    )
    out, counts = redact("id AKIAQ3PLANTEDZX7WY4M and acme_0123456789abcdef0123456789abcdef end", rules)
    assert out == "id AKIAQ3PLANTEDZX7WY4M and acme_[redacted: acme-key] end"
    assert counts == {"acme-key": 1}


def test_fingerprint_follows_the_rules():
    a = rules_from_config({"allow": ["x1"]})
    assert a.fingerprint != DEFAULT_RULES.fingerprint != NO_RULES.fingerprint
    assert rules_from_config({"allow": ["x1"]}).fingerprint == a.fingerprint
    assert rules_from_config({}).fingerprint == rules_from_config(None).fingerprint == DEFAULT_RULES.fingerprint


@pytest.mark.parametrize(
    "section",
    [
        {"patterns": [{"name": "Bad Name", "regex": "x"}]},
        {"patterns": [{"name": "ok", "regex": "("}]},
        {"patterns": [{"name": "ok", "regex": "(a)\\1"}]},  # a backreference: not RE2, could backtrack
        {"patterns": [{"name": "ok", "regex": "a*"}]},
        {"patterns": {"name": "ok"}},
        {"allow": "AKIA"},
        {"enabled": False},
        "yes",
    ],
)
def test_bad_config_is_a_clear_error(section):
    with pytest.raises(RulesError):
        rules_from_config(section)


# -- payloads and the projection -------------------------------------------------


def test_redact_payload_reports_each_field():
    value = {"a": ["ok", "GITHUB_TOKEN=ghp_pLaNtEd4x9Q2vL7mN3bK8tR5wY1cZ6dF0gH2J"], "b": {"c": 3}}
    out, notes = redact_payload(value)
    assert out == {"a": ["ok", "GITHUB_TOKEN=[redacted: github-token]"], "b": {"c": 3}}
    assert notes == [
        {
            "field": "a[1]",
            "kind": "redacted",
            "counts": {"github-token": 1},
            "reason": "secrets replaced by [redacted: <kind>] markers",
        }
    ]


def _entry(data: dict) -> Entry:
    return Entry("e1", None, data["type"], 0, 0, 10, "fp", data)


def test_projection_redacts_before_bounding_and_read_sees_the_same_text():
    secret = "ghp_pLaNtEd4x9Q2vL7mN3bK8tR5wY1cZ6dF0gH2J"
    # The secret straddles the head cut: bounding first would keep half of it.
    text = "x" * (HEAD_CHARS - 10) + " " + secret + " " + "y" * MAX_FRAGMENT_CHARS
    data = {
        "type": "message",
        "message": {
            "role": "toolResult",
            "toolName": "bash",
            "toolCallId": "c1",
            "content": [{"type": "text", "text": text}],
        },
    }
    indexed = project_entry("s", _entry(data)).fragments[0]
    full = project_entry("s", _entry(data), bounded=False).fragments[0]
    assert secret[:12] not in indexed.text and secret[:12] not in full.text
    assert full.text.startswith(indexed.text) and full.text.endswith(indexed.tail)
    assert indexed.redactions == full.redactions == (("github-token", 1),)
    assert project_entry("s", _entry(data)).redactions == (("github-token", 1),)


def test_projection_redacts_meta_copied_from_the_source():
    data = {
        "type": "message",
        "message": {
            "role": "assistant",
            "stopReason": "error",
            "content": [],
            "errorMessage": "401: invalid x-api-key sk-ant-api03-pLaNtEd9x2Qv7Lm3Nb8Kt5Rw1Yc6Zd0",
        },
    }
    ev = project_entry("s", _entry(data))
    assert "pLaNtEd" not in ev.meta["errorMessage"] and ev.redactions == (("anthropic-key", 1),)


def test_detect_secrets_finds_nothing_we_keep():
    """Oracle: what detect-secrets' pattern plugins flag in the planted lines is gone after our redaction.

    Its entropy-only plugins are left out: they flag paths such as `ssh/id_ed25519`
    (see bench/redact.py for their precision on look-alikes)."""
    pytest.importorskip("detect_secrets")
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    with default_settings():
        for _, line, _ in PLANTED:
            out, _ = redact(line)
            for found in scan_line(line):
                if found.secret_value and "High Entropy" not in found.type:
                    assert found.secret_value not in out, (found.type, line)


def test_the_index_gives_back_the_rules_it_was_built_with(tmp_path):
    from piwatchd.store.redaction import index_rules
    from piwatchd.store.schema import open_writer

    configured = rules_from_config({"allow": ["x1"], "patterns": [{"name": "acme", "regex": "acme_[0-9]{8}"}]})
    for rules in (configured, NO_RULES, DEFAULT_RULES):
        conn = open_writer(tmp_path / "i.sqlite3", rules)
        got = index_rules(conn)
        conn.close()
        assert got.fingerprint == rules.fingerprint
        line = "acme_12345678 AKIAQ3PLANTEDZX7WY4M x1"
        assert redact(line, got) == redact(line, rules)


def test_a_bad_redact_config_is_one_clear_line(short_tmp):
    import os
    import subprocess
    import sys
    from pathlib import Path

    config = short_tmp / "config.toml"
    config.write_text('[[redact.patterns]]\nname = "acme"\nregex = "(a)\\\\1"\n')
    (short_tmp / "sessions").mkdir()
    env = {**os.environ, "PIWATCH_CONFIG": str(config)}
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "piwatch"),
            "index",
            "--once",
            "--db",
            str(short_tmp / "i.sqlite3"),
            "--sessions",
            str(short_tmp / "sessions"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "redact pattern 'acme'" in proc.stderr and "Traceback" not in proc.stderr
