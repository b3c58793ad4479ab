"""Credentials out of text (pure): text -> (redacted text, counts by kind).

Each secret is replaced by a visible marker naming its kind,
`[redacted: aws-access-key]`, so the words around it stay searchable and a
reader knows something was there. Used by the projection (`piwatchd.model.project`),
so the text index, snippets, stored copies and reads all see the same result.

Speed: most text holds no candidate at all. Every rule has a *trigger*, an
RE2 pattern that matches wherever the rule could (its literal anchors such as
`AKIA`, `ghp_`, `-----BEGIN`, or for assignments `key|token|...` followed by
`=`/`:` and a value). All triggers are compiled into one RE2 set and scanned
in a single linear pass (~450 MB/s on Pi tool output, against ~25 MB/s for
Python's `re` over the same anchors); a text no trigger matches is returned
unchanged. Only the rules whose triggers matched run their finder. See
`bench/redact.py` for the measurements and the README for why detect-secrets
itself is not run on the ingest path. Configured patterns must be RE2 syntax,
so no pattern can make the ingest thread backtrack for ever.

Rules are vendored from detect-secrets' plugins (Apache-2.0, version 1.5.0:
aws, github_token, gitlab_token, slack, stripe, openai, jwt, private_key,
basic_auth, azure_storage_key, keyword), adapted to find spans in free text
rather than lines of source code, plus rules detect-secrets lacks (Anthropic
and project-scoped OpenAI keys, GCP API keys and OAuth secrets, Azure AD
client secrets, bearer tokens). `tests/test_redact.py` checks them against
detect-secrets itself when it is installed.

Precision matters as much as recall: git SHAs, UUIDs, hex digests, sha512
integrity strings, `data:` URIs and ordinary URLs must come through intact,
so no rule flags a string for its entropy alone; entropy only decides whether
a value assigned to a secret-looking name (`API_KEY=...`) is a secret.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
import orjson
import re2

__all__ = [
    "BUILTIN_RULES",
    "DEFAULT_RULES",
    "NO_RULES",
    "REDACTED_REASON",
    "RULES_VERSION",
    "Rule",
    "Rules",
    "RulesError",
    "find",
    "line_secrets",
    "marker",
    "redact",
    "redact_payload",
    "redaction_note",
    "rules_from_config",
    "shown",
]

# Bump when a built-in rule changes what it redacts: the fingerprint changes
# and every index built with the old rules is rebuilt.
RULES_VERSION = 2  # 2: the kind inside a marker is never a name; identifiers without digits are code

_MARKER = "[redacted: {kind}]"
_MARKER_HEAD = "[redacted: "


def marker(kind: str) -> str:
    return _MARKER.format(kind=kind)


Span = tuple[int, int, str]  # start, end, kind
Finder = Callable[[str], Iterator[Span]]


@dataclass(frozen=True, slots=True)
class Rule:
    """One kind of secret: an RE2 trigger (matches wherever the rule could), then a finder."""

    kind: str
    trigger: str
    find: Finder
    # Every match lies inside one line, its finder reads nothing past the
    # line's ends, and its trigger matches in every line it matches in: a
    # line's secrets of this kind are found from that line alone (`line_secrets`).
    within_line: bool = True


def _anchors(*literals: str) -> str:
    return "|".join(re.escape(a) for a in literals)


class RulesError(ValueError):
    """A configured pattern or allowlist entry is unusable."""


def _regex_finder(
    kind: str, pattern: str, *, group: int = 0, flags: int = 0, valid: Callable[[str], bool] | None = None
) -> Finder:
    compiled = re.compile(pattern, flags)

    def find(text: str) -> Iterator[Span]:
        for m in compiled.finditer(text):
            value = m.group(group)
            if value and (valid is None or valid(value)):
                yield m.start(group), m.end(group), kind

    return find


def _rule(kind: str, trigger: str, pattern: str, *, within_line: bool = True, **kw: Any) -> Rule:
    return Rule(kind, trigger, _regex_finder(kind, pattern, **kw), within_line)


# -- validators -------------------------------------------------------------


def _classes(value: str) -> int:
    return (
        any(c.islower() for c in value)
        + any(c.isupper() for c in value)
        + any(c.isdigit() for c in value)
        + any(not c.isalnum() for c in value)
    )


def _entropy(value: str) -> float:
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


def _mixed_key(value: str) -> bool:
    """Generated keys mix upper, lower and digits; words joined by dashes do not."""
    body = value.split("-", 2)[-1] if value.startswith(("sk-proj-", "sk-svcacct-", "sk-admin-")) else value[3:]
    return any(c.isdigit() for c in body) and any(c.isupper() for c in body) and any(c.islower() for c in body)


def _jwt_valid(token: str) -> bool:
    """Header and payload decode to JSON objects (detect-secrets' formal check)."""
    parts = token.split(".")
    try:
        for part in parts[:2]:
            decoded = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
            if not isinstance(orjson.loads(decoded), dict):
                return False
    except (binascii.Error, ValueError):
        return False
    return True


_PLACEHOLDER = re.compile(
    r"(?i)^(?:\$\{?\w+\}?|<[^>]*>|\{\{.*\}\}|%\(?\w+\)?s?|x+|\*+|\.+|-+|_+"
    r"|(?:your|example|sample|dummy|fake|placeholder)[\w-]*"
    r"|changeme|change_me|password|passwd|pass|pwd|user|username|secret|token|key|none|null|nil|true|false|undefined"
    r"|string|redacted)$"
)
# Code, not a value: a dotted name, a call, a number, or a bare identifier
# without digits (`key_password = key_password`, `token = defaultToken`).
_CODE_VALUE = re.compile(r"^[A-Za-z_$]\w*(?:\.#?[A-Za-z_$]\w*)+$|^[A-Za-z_]\w*\($|^\d+$|^[A-Za-z_$]+$")


def _assigned_secret(value: str, password_like: bool) -> bool:
    """Whether a value assigned to a secret-looking name is itself a secret.

    Code assigns variables, attributes and types to such names (`token =
    self.token`, `password: string`); those are single-class words or dotted
    names. A password may be short; a key or token is long and varied.
    """
    if _PLACEHOLDER.match(value) or _CODE_VALUE.match(value) or value.startswith("[redacted"):
        return False
    if password_like:
        return len(value) >= 6 and _classes(value) >= 2
    # Generated keys and tokens are digit-rich (hex, decimal ids) or mix upper, lower and digits
    # (base64); names and settings (`pi-share:v1:sidebar-width`, `x-aws-ec2-metadata-token`)
    # are words with the odd digit, and `OAuth2Token$schema` is a JavaScript identifier.
    digits = sum(c.isdigit() for c in value)
    if value.startswith(("/", "./", "~/")) or re.search(r"\.[a-z][a-z0-9]{0,4}$", value):
        return False  # a path or a file name (an S3 `Key: 'clip_35s.mp4'`), not a key
    if digits == 0 or (re.fullmatch(r"[A-Za-z_$][\w$]*", value) and "$" in value):
        return False
    mixed = any(c.isupper() for c in value) and any(c.islower() for c in value)
    return len(value) >= 12 and (mixed or digits >= 0.15 * len(value)) and _entropy(value) >= 3.0


# -- finders that are not one regex ----------------------------------------

_PEM_BEGIN = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ ){0,3}PRIVATE KEY(?: BLOCK)?)-----")
# The body of a key block whose END line is missing (a truncated `cat`): base64
# lines, headers such as `Proc-Type:`, and JSON-escaped newlines (`\n`).
_PEM_BODY = re.compile(r"(?:[A-Za-z0-9+/=:,\- \t\r\n]|\\n)*")


def _private_keys(text: str) -> Iterator[Span]:
    pos = 0
    while (m := _PEM_BEGIN.search(text, pos)) is not None:
        end_line = f"-----END {m.group(1)}-----"
        end = text.find(end_line, m.end())
        body = _PEM_BODY.match(text, m.end())  # always matches, possibly empty
        stop = end + len(end_line) if end >= 0 else (body.end() if body else m.end())
        yield m.start(), stop, "private-key"
        pos = stop


# Secret-looking names: the keyword ends the name (`API_KEY`, `apiKey`,
# `client_secret`, `GITHUB_TOKEN`) or is a password anywhere in it. RE2, so
# the leading name run costs one linear pass however long the text.
_ASSIGN = re2.compile(
    r"(?i)(?P<name>[A-Za-z0-9_.\-]*(?:key|token|secret|passw(?:or)?d\w*|pwd|pass|passphrase|credentials?))"
    r"[\"'\]]{0,2}[ \t]*(?::=|=|:)[ \t]*"
    r"(?P<q>[\"'`]?)(?P<value>[^\s\"'`,;<>()\[\]{}]+)"
)
_PASSWORD_NAME = re.compile(r"(?i)passw|pwd|pass$|passphrase|secret")
# The keyword that ends a name must be a word of it: `API_KEY`, `apiKey`, `db.pass`, `TOKEN`,
# not `monkey` or `Minipass` (minified code is full of those).
_NAME_END = re.compile(r"(?i)(?:key|token|secret|pwd|pass|passphrase|credentials?)$")


_OPERATORS = ("?.", "??", "===", "!==", "=>", "&&", "||")
_IDENTIFIER = re.compile(r"[A-Za-z_$][\w$]*")


def _code_expression(name: str, value: str) -> bool:
    """An unquoted value that is code (often minified), not a literal: an operator in it, a
    comparison, or an identifier that repeats the name's keyword (`{getTokenKey: getTokenKey2}`)."""
    if value.startswith("=") or any(op in value for op in _OPERATORS) or re.search(r"=[^=]", value):
        return True  # base64 has `=` only as trailing padding; `a=b=c` is an assignment chain
    keyword = _NAME_END.search(name)
    return bool(keyword and _IDENTIFIER.fullmatch(value) and keyword.group(0).lower() in value.lower())


def _keyword_is_a_word(name: str) -> bool:
    if re.search(r"(?i)passw(?:or)?d", name):
        return True  # specific enough anywhere in a name
    m = _NAME_END.search(name)
    if m is None or m.start() == 0:
        return True
    before, first = name[m.start() - 1], name[m.start()]
    return not before.isalnum() or (first.isupper() and before.islower()) or name.isupper()


def _assignments(text: str, offset: int = 0) -> Iterator[Span]:
    for m in _ASSIGN.finditer(text):
        if _assigned_at(text, m):
            yield offset + m.start(3), offset + m.end(3), "assigned-secret"
        elif len(m.group(3)) > 6:
            # A rejected value may hold the next assignment (`x=a.b;DB_PASSWORD=...` without a
            # separator the value stops at): look inside it, as a second pass would.
            yield from _assignments(m.group(3), offset + m.start(3))


def _assigned_at(text: str, m: re2._Match) -> bool:
    """Whether this `name = value` match assigns a secret."""
    name, quote, value = m.group(1), m.group(2), m.group(3)  # re2 spans take group numbers
    if text.endswith(_MARKER_HEAD, 0, m.start(1)):
        return False  # the kind inside a marker (`[redacted: client-secret] :x`) is not a name
    if text[m.start(1) - 1 : m.start(1)] == "$" or name.lower() in ("pwd", "oldpwd"):
        return False  # `$TOKEN` is a reference; PWD is the shell's working directory
    if quote and not text.startswith(quote, m.end(3)):
        return False  # an unterminated quote: not a literal value
    if not quote and text[m.end(3) : m.end(3) + 1] in ("(", "["):
        return False  # a call or an index: code, not a value
    if (not quote and _code_expression(name, value)) or not _keyword_is_a_word(name):
        return False
    return _assigned_secret(value, bool(_PASSWORD_NAME.search(name)))


# -- the built-in rules -----------------------------------------------------

_B64 = "A-Za-z0-9+/"
# Where a secret-looking name is given a value: the trigger of `assigned-secret`.
_ASSIGN_TRIGGER = (
    r"(?i)(?:key|token|secret|pass|pwd|credential)\w*[\"'\]]{0,2}[ \t]*(?::=|=|:)[ \t]*[\"'`]?[^\s\"'`,;<>()\[\]{}]{6}"
)

BUILTIN_RULES: tuple[Rule, ...] = (
    Rule("private-key", _anchors("PRIVATE KEY"), _private_keys, within_line=False),
    _rule(
        "jwt",
        r"eyJ[A-Za-z0-9_\-]{8,}={0,2}\.eyJ",
        r"(?<![A-Za-z0-9_\-])eyJ[A-Za-z0-9_\-]{8,}={0,2}\.eyJ[A-Za-z0-9_\-]{8,}={0,2}(?:\.[A-Za-z0-9_\-]*={0,2})?",
        valid=_jwt_valid,
    ),
    _rule(
        "aws-access-key",
        r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}",
        r"(?<![A-Z0-9])(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}(?![A-Z0-9])",
    ),
    _rule(
        "aws-secret-key",
        rf"(?i)aws.{{0,20}}(?:secret|key|token).{{0,20}}[{_B64}]{{40}}",
        rf"(?i)aws.{{0,20}}?(?:secret|key|token).{{0,20}}?[=:\"'\s]\s*[\"']?([{_B64}]{{40}})(?![{_B64}])",
        group=1,
        valid=lambda v: _classes(v) >= 3,
        within_line=False,  # `\s*` before the key crosses line breaks
    ),
    _rule("gcp-api-key", r"AIza[0-9A-Za-z_\-]{35}", r"(?<![A-Za-z0-9_\-])AIza[0-9A-Za-z_\-]{35}(?![A-Za-z0-9_\-])"),
    _rule("gcp-oauth-secret", r"GOCSPX-[A-Za-z0-9_\-]{28}", r"GOCSPX-[A-Za-z0-9_\-]{28}"),
    _rule("azure-storage-key", rf"AccountKey=[{_B64}=]{{86}}", rf"AccountKey=([{_B64}=]{{86,88}})", group=1),
    _rule(
        "azure-client-secret",
        r"[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31}",
        r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])",
    ),
    _rule("azure-sas-signature", r"[?&]sig=[A-Za-z0-9%+/=]{30}", r"[?&]sig=([A-Za-z0-9%+/=]{30,})", group=1),
    _rule(
        "github-token",
        r"(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36}|github_pat_[A-Za-z0-9_]{22}",
        r"(?<![A-Za-z0-9_])(?:(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9_]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    _rule(
        "gitlab-token",
        r"(?:(?:glpat|gldt|glft|glsoat|glrt|glcbt|glptt|gloas)-|GR1348941)[A-Za-z0-9_\-]{20}",
        r"(?:(?:glpat|gldt|glft|glsoat|glrt|glcbt|glptt|gloas)-|GR1348941)[A-Za-z0-9_\-]{20,50}(?!\w)",
    ),
    _rule(
        "slack-token",
        r"(?i)xox[abposre]-\d+-|xapp-\d-",
        r"(?i)(?<![A-Za-z0-9])(?:xox[abposre]-(?:\d+-)+[a-z0-9]+|xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+)",
    ),
    _rule(
        "slack-webhook",
        _anchors("hooks.slack.com/services/T"),
        r"https://hooks\.slack\.com/services/T[a-zA-Z0-9_]+/B[a-zA-Z0-9_]+/[a-zA-Z0-9_]+",
    ),
    _rule(
        "stripe-key",
        r"[rs]k_(?:live|test)_[0-9a-zA-Z]{24}|whsec_[A-Za-z0-9]{32}",
        r"(?<![A-Za-z0-9])(?:[rs]k_(?:live|test)_[0-9a-zA-Z]{24,}|whsec_[A-Za-z0-9]{32,})",
    ),
    _rule("anthropic-key", r"sk-ant-[A-Za-z0-9_\-]{20}", r"(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_\-]{20,}"),
    _rule("openai-key", r"sk-[A-Za-z0-9_\-]{20}", r"(?<![A-Za-z0-9_\-])sk-[A-Za-z0-9_\-]{20,}", valid=_mixed_key),
    _rule("npm-token", r"npm_[A-Za-z0-9]{36}", r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
    _rule("pypi-token", r"pypi-AgE[A-Za-z0-9_\-]{50}", r"pypi-AgE[A-Za-z0-9_\-]{50,}"),
    _rule(
        "bearer-token",
        r"(?i)bearer[ \t]+[A-Za-z0-9._~+/\-]{20}",
        r"(?i)\bbearer[ \t]+([A-Za-z0-9._~+/\-]{20,}=*)",
        group=1,
        valid=lambda v: _classes(v) >= 3,
    ),
    _rule(
        "basic-auth",
        r"://[^\s:/?#@\"'<>]+:[^\s/?#@\"'<>]+@",
        r"://[^\s:/?#@\"'<>]+:([^\s/?#@\"'<>]+)@(?=[A-Za-z0-9\[])",
        group=1,
        valid=lambda v: not _PLACEHOLDER.match(v) and not v.startswith("[redacted"),
    ),
    Rule("assigned-secret", _ASSIGN_TRIGGER, _assignments),
)


def _re2_finder(kind: str, compiled: re2._Regexp) -> Finder:
    group = 1 if compiled.groups else 0

    def find(text: str) -> Iterator[Span]:
        for m in compiled.finditer(text):
            if m.end(group) > m.start(group):
                yield m.start(group), m.end(group), kind

    return find


class Rules:
    """The rules in force: built-ins, extra configured patterns, allowed values.

    Immutable after construction; the RE2 set of triggers is built once.
    """

    def __init__(
        self,
        rules: tuple[Rule, ...] = BUILTIN_RULES,
        *,
        extra: tuple[tuple[str, str], ...] = (),
        allow: frozenset[str] = frozenset(),
    ) -> None:
        self.extra = extra  # (kind, regex) from config, for the fingerprint
        self.allow = allow
        self.builtin = rules == BUILTIN_RULES
        # A configured pattern may match a line break (`\s`, `[^x]`): never within a line.
        configured = tuple(
            Rule(kind, regex, _re2_finder(kind, re2.compile(regex)), within_line=False) for kind, regex in extra
        )
        self.rules = rules + configured
        self._crossing = [re2.compile(rule.trigger) for rule in self.rules if not rule.within_line]
        self._set = None
        if self.rules:
            triggers = re2.Set.SearchSet(re2.Options())
            for rule in self.rules:
                triggers.Add(rule.trigger)
            triggers.Compile()
            self._set = triggers

    @functools.cached_property
    def fingerprint(self) -> str:
        """Changes whenever what would be redacted may change; stored in the
        index. Computed once (the rules are immutable): every search's
        re-projection keys its cache by it."""
        doc = orjson.dumps(
            {"version": RULES_VERSION, "builtin": self.builtin, "extra": self.extra, "allow": sorted(self.allow)}
        )
        return hashlib.blake2b(doc, digest_size=12).hexdigest()

    def candidates(self, text: str) -> list[Rule]:
        """The rules whose trigger matches somewhere in `text` (one RE2 pass)."""
        if self._set is None:
            return []
        try:
            hits = self._set.Match(text)
        except UnicodeEncodeError:  # a lone surrogate: run every rule rather than miss one
            return list(self.rules)
        return [self.rules[i] for i in sorted(hits)] if hits else []

    def lines_suffice(self, text: str) -> bool:
        """Whether each line of `text` holds exactly the secrets that the
        whole text's redaction finds there, found from the line alone
        (`line_secrets`): no rule that may match across lines could match
        anywhere in `text` (its trigger does not). A search of each such
        trigger (a literal or two: ~1.7 GB/s, against ~0.3 for all of them)."""
        try:
            return not any(p.search(text) for p in self._crossing)
        except UnicodeEncodeError:  # a lone surrogate: the whole text decides
            return False


DEFAULT_RULES = Rules()
# Nothing redacted: `piwatch read --unredacted` (trusted local CLI) and the bench's baseline.
NO_RULES = Rules(())

_KIND = re.compile(r"^[a-z0-9][a-z0-9\-]{0,39}$")


def rules_from_config(section: Any) -> Rules:
    """Rules from the `[redact]` table of config.toml (None: the built-ins).

    [redact]
    allow = ["AKIAIOSFODNN7EXAMPLE"]           # values never redacted
    [[redact.patterns]]
    name = "acme-key"                          # the marker's kind
    regex = "acme_[0-9a-f]{32}"                # RE2 syntax; group 1 if present, else the whole match
    """
    if section is None:
        return DEFAULT_RULES
    if not isinstance(section, Mapping):
        raise RulesError("[redact] must be a table")
    unknown = set(section) - {"allow", "patterns"}
    if unknown:
        raise RulesError(f"[redact] has unknown keys: {', '.join(sorted(unknown))} (known: allow, patterns)")
    allow = section.get("allow", [])
    if not isinstance(allow, list) or not all(isinstance(v, str) and v for v in allow):
        raise RulesError("redact.allow must be a list of non-empty strings")
    patterns = section.get("patterns", [])
    if not isinstance(patterns, list):
        raise RulesError("redact.patterns must be an array of tables ([[redact.patterns]])")
    extra: list[tuple[str, str]] = []
    for item in patterns:
        if (
            not isinstance(item, Mapping)
            or not isinstance(item.get("name"), str)
            or not isinstance(item.get("regex"), str)
        ):
            raise RulesError("each [[redact.patterns]] needs a string name and a string regex")
        name, regex = item["name"], item["regex"]
        if not _KIND.match(name):
            raise RulesError(f"redact pattern name {name!r}: use lowercase letters, digits and dashes")
        try:
            compiled = re2.compile(regex)
        except re2.error as exc:
            raise RulesError(f"redact pattern {name!r}: not a valid RE2 regex: {exc}") from exc
        if compiled.search("") is not None:
            raise RulesError(f"redact pattern {name!r} matches the empty string")
        extra.append((name, regex))
    return Rules(BUILTIN_RULES, extra=tuple(extra), allow=frozenset(allow))


def _spans(text: str, rules: Rules) -> list[Span]:
    candidates = rules.candidates(text)
    if not candidates:
        return []
    found: list[tuple[int, int, int, str]] = []
    for priority, rule in enumerate(candidates):
        found.extend((s, -(e - s), priority, k) for s, e, k in rule.find(text))
    # Earliest first, then longest, then the rule listed first; overlaps drop.
    found.sort()
    out: list[Span] = []
    end = -1
    for start, neg_len, _, kind in found:
        if start >= end and text[start : start - neg_len] not in rules.allow:
            out.append((start, start - neg_len, kind))
            end = start - neg_len
    return out


def line_secrets(text: str, lo: int, hi: int, rules: Rules = DEFAULT_RULES) -> tuple[int, int, list[Span]]:
    """The whole lines of `text` around [lo, hi) as (start, end), newlines
    included, and the secrets in them, redacting those lines only: exactly
    the spans of `find(text)` there when `rules.lines_suffice(text)`, and
    none of the whole text's secrets crosses `start` or `end`.

    Why exactly: every rule left is `within_line`, so a match holds no line
    break and reads nothing past one (a look-behind or look-ahead at a line's
    end sees the break, which no rule's character class holds, as the string
    end); its trigger matches in the lines wherever its finder does, so it
    is a candidate here whenever it finds something here; each finder scans
    left to right, so its matches in a line do not depend on the lines
    before; and spans in different lines never overlap, so the overlaps
    `_spans` drops are the same. `tests/test_redact_window.py` checks it."""
    start = text.rfind("\n", 0, lo) + 1
    newline = text.find("\n", max(lo, hi - 1))
    end = len(text) if newline < 0 else newline + 1
    return start, end, [(start + s, start + e, kind) for s, e, kind in _spans(text[start:end], rules)]


def shown(text: str, lo: int, hi: int, secrets: list[Span]) -> str:
    """text[lo:hi] with every secret of `secrets` (sorted, as `find` or
    `line_secrets` gives them) that touches it replaced by its marker, the
    whole marker where `lo` or `hi` cuts a secret: no character of a secret
    is ever shown, whatever the window."""
    if hi <= lo:
        return ""
    parts: list[str] = []
    pos = lo
    for start, end, kind in secrets:
        if end <= lo or start >= hi:
            continue
        parts += [text[pos:start] if start > pos else "", marker(kind)]
        pos = end
    parts.append(text[pos:hi] if hi > pos else "")
    return "".join(parts)


def find(text: str, rules: Rules = DEFAULT_RULES) -> list[Span]:
    """Where the secrets in `text` are, as (start, end, kind), without changing it."""
    return _spans(text, rules)


def redact(text: str, rules: Rules = DEFAULT_RULES) -> tuple[str, dict[str, int]]:
    """(text with each secret replaced by its marker, number of secrets by kind).

    Returns the same string object when nothing is found.
    """
    spans = _spans(text, rules)
    if not spans:
        return text, {}
    parts: list[str] = []
    counts: dict[str, int] = {}
    pos = 0
    for start, end, kind in spans:
        parts.append(text[pos:start])
        parts.append(marker(kind))
        counts[kind] = counts.get(kind, 0) + 1
        pos = end
    parts.append(text[pos:])
    return "".join(parts), counts


REDACTED_REASON = "secrets replaced by [redacted: <kind>] markers"


def redaction_note(field_name: str, counts: Mapping[str, int]) -> dict[str, Any]:
    """The entry a read or trace lists under `omitted` for a redacted field: kinds and counts, never values."""
    return {"field": field_name, "kind": "redacted", "counts": dict(sorted(counts.items())), "reason": REDACTED_REASON}


def redact_payload(value: Any, rules: Rules = DEFAULT_RULES, path: str = "") -> tuple[Any, list[dict[str, Any]]]:
    """Redact every string inside a response (dicts, lists, and msgspec Structs
    in place, fields by their wire names), reporting each changed field.

    The last line of defence for read and trace output: whatever a field
    carries (meta copied from the source, labels, previews), no secret leaves
    in it. Already-redacted text passes unchanged (markers never match).
    """
    notes: list[dict[str, Any]] = []

    def walk(v: Any, where: str) -> Any:
        if isinstance(v, str):
            out, counts = redact(v, rules)
            if counts:
                notes.append(redaction_note(where, counts))
            return out
        if isinstance(v, msgspec.Struct):
            cls = type(v)
            for attr, name in zip(cls.__struct_fields__, cls.__struct_encode_fields__, strict=True):
                setattr(v, attr, walk(getattr(v, attr), f"{where}.{name}" if where else name))
            return v
        if isinstance(v, dict):
            return {k: walk(item, f"{where}.{k}" if where else str(k)) for k, item in v.items()}
        if isinstance(v, list):
            return [walk(item, f"{where}[{i}]") for i, item in enumerate(v)]
        return v

    return walk(value, path), notes
