"""Redaction benchmark: `python -m bench.redact --bytes 150M --repeats 3` (from the repo root).

Two parts, both on a corpus written by the real Pi SessionManager (the same
generator and cache as bench/ingest.py):

1. detectors: throughput of candidate detectors over the projected fragment
   texts of the corpus (what ingest feeds the redactor), plus recall on the
   planted secrets and precision on the look-alikes of tests/redact_cases.py:
   - detect-secrets 1.5 itself (every default plugin, `scan_line` per line;
     on a slice of the texts, it is slow);
   - detect-secrets' pattern plugins only (entropy plugins off);
   - the same rules with a Python `re` prefilter (one alternation of every
     rule's literal anchors), the obvious pure-Python design;
   - piwatchd.model.redact (an RE2 set of per-rule triggers as the prefilter).
2. ingest: `index --once`-style full ingest of the same corpus with the
   built-in rules vs with none (same process, interleaved on/off runs, fresh
   index each run, `--engine` text index), medians reported; plus the time to
   redact every projected text alone, as a share of the ingest time.

Writes bench/out/redact-<bytes>.json and .md.

`python -m bench.redact --scan DIR [DIR ...]` instead reports what the built-in
rules would redact in the text files under DIR, by kind with examples: a
precision check on real code and docs (say a virtualenv's site-packages).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.ingest import OUT, REPO, corpus, parse_bytes
from piwatchd.ingest.scan import reconcile
from piwatchd.model.project import project_entry
from piwatchd.model.redact import BUILTIN_RULES, DEFAULT_RULES, NO_RULES, Rules, find, redact
from piwatchd.source.lines import split_complete_lines
from piwatchd.source.parser import ParserState, parse_lines
from piwatchd.store.schema import open_writer
from piwatchd.store.writer import IndexWriter
from piwatchd.text.engine import DEFAULT_ENGINE

sys.path.insert(0, str(REPO / "tests"))
from redact_cases import LOOKALIKES, PLANTED


def fragment_texts(files: list[Path], limit_bytes: int) -> list[str]:
    """The unbounded fragment texts the projection would redact, from the first files up to `limit_bytes`."""
    texts: list[str] = []
    total = 0
    for path in files:
        data = path.read_bytes()
        lines, _ = split_complete_lines(data, 0)
        result = parse_lines(ParserState(), lines)
        for entry in result.entries:
            texts.extend(f.text for f in project_entry("s", entry, NO_RULES, bounded=False).fragments)
        total += len(data)
        if total >= limit_bytes:
            break
    return texts


# -- detectors -----------------------------------------------------------------------


class DetectSecrets:
    """detect-secrets' own scanner, per line; a value it reports counts as found."""

    def __init__(self, patterns_only: bool) -> None:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings

        self._scan_line = scan_line
        self._settings = default_settings
        self.patterns_only = patterns_only
        self.name = "detect-secrets (pattern plugins)" if patterns_only else "detect-secrets (all default plugins)"

    def values(self, text: str) -> list[str]:
        out = []
        with self._settings():
            for line in text.splitlines():
                for found in self._scan_line(line):
                    if self.patterns_only and "High Entropy" in found.type:
                        continue
                    out.append(found.secret_value or "")
        return out

    def run(self, text: str) -> str:
        out = text
        for value in self.values(text):
            if value:
                out = out.replace(value, "[redacted]")
        return out


class SreAnchors:
    """The same rules, with Python's `re` as the prefilter: one alternation of literal anchors."""

    name = "same rules, Python re anchor prefilter"

    def __init__(self) -> None:
        anchors = [
            "PRIVATE KEY",
            "eyJ",
            "A3T",
            "ABIA",
            "ACCA",
            "AKIA",
            "ASIA",
            "aws",
            "AWS",
            "AIza",
            "GOCSPX-",
            "AccountKey=",
            "Q~",
            "sig=",
            "ghp_",
            "gho_",
            "ghu_",
            "ghs_",
            "ghr_",
            "github_pat_",
            "glpat-",
            "gldt-",
            "glrt-",
            "GR1348941",
            "xox",
            "xapp-",
            "hooks.slack.com",
            "sk_",
            "rk_",
            "whsec_",
            "sk-",
            "npm_",
            "pypi-",
            "earer",
            "://",
            "KEY",
            "key",
            "Key",
            "TOKEN",
            "token",
            "Token",
            "SECRET",
            "secret",
            "Secret",
            "PASS",
            "pass",
            "Pass",
            "PWD",
            "pwd",
            "CREDENTIAL",
            "credential",
        ]
        self.prefilter = re.compile("|".join(re.escape(a) for a in anchors))

    def run(self, text: str) -> str:
        if self.prefilter.search(text) is None:
            return text
        return redact(text, DEFAULT_RULES)[0]


class Piwatch:
    name = "piwatchd.model.redact (RE2 trigger set)"

    def __init__(self, rules: Rules = DEFAULT_RULES) -> None:
        self.rules = rules

    def run(self, text: str) -> str:
        return redact(text, self.rules)[0]


def throughput(detector, texts: list[str]) -> dict:
    chars = sum(len(t) for t in texts)
    t = time.perf_counter()
    for text in texts:
        detector.run(text)
    seconds = time.perf_counter() - t
    rate = chars / 1e6 / seconds
    return {
        "mbPerSecond": round(rate, 1) if rate >= 10 else round(rate, 3),
        "mchars": round(chars / 1e6, 2),
        "seconds": round(seconds, 2),
    }


def quality(detector) -> dict:
    found = sum(secret not in detector.run(line) for _, line, secret in PLANTED)
    changed = [text for text in LOOKALIKES if detector.run(text) != text]
    return {
        "planted": len(PLANTED),
        "removed": found,
        "lookalikes": len(LOOKALIKES),
        "lookalikesChanged": len(changed),
        "changedExamples": changed[:4],
    }


def detectors(texts: list[str], slow_share: float) -> list[dict]:
    rows = []
    slow_texts = texts[: max(1, int(len(texts) * slow_share))]
    candidates = [(Piwatch(), texts), (SreAnchors(), texts)]
    try:
        candidates += [(DetectSecrets(True), slow_texts), (DetectSecrets(False), slow_texts)]
    except ImportError:
        print("detect-secrets is not installed: skipped", file=sys.stderr)
    for detector, sample in candidates:
        row = {"detector": detector.name, **throughput(detector, sample), **quality(detector)}
        print(json.dumps(row), file=sys.stderr)
        rows.append(row)
    return rows


# -- ingest on/off -------------------------------------------------------------------


def ingest_once(root: Path, rules: Rules, engine: str) -> tuple[float, float]:
    """(wall, CPU) seconds for a full ingest of `root` into a fresh index with `rules`, as
    `piwatch index --once` does it. CPU time (all threads of this process) is the steadier
    figure on a machine shared with other work."""
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="pwr-") as tmp:
        db = Path(tmp) / "index.sqlite3"
        t = time.perf_counter()
        cpu = time.process_time()
        writer = IndexWriter(open_writer(db, rules, engine))
        try:
            writer.repay_text_debt()
            reconcile(writer, [str(root)])
        finally:
            writer.close()  # commits the text index
        return time.perf_counter() - t, time.process_time() - cpu


def ingest(root: Path, nbytes: int, repeats: int, engine: str) -> dict:
    runs: dict[str, list[tuple[float, float]]] = {"on": [], "off": []}
    for i in range(repeats):
        # Alternate which goes first, so a drift in machine load hits both alike.
        order = [("on", DEFAULT_RULES), ("off", NO_RULES)] if i % 2 == 0 else [("off", NO_RULES), ("on", DEFAULT_RULES)]
        for name, rules in order:
            wall, cpu = ingest_once(root, rules, engine)
            runs[name].append((wall, cpu))
            print(
                f"ingest redaction {name}: {wall:.1f} s wall, {cpu:.1f} s CPU ({nbytes / 1e6 / wall:.1f} MB/s)",
                file=sys.stderr,
            )
    on = statistics.median(w for w, _ in runs["on"])
    off = statistics.median(w for w, _ in runs["off"])
    cpu_on = statistics.median(c for _, c in runs["on"])
    cpu_off = statistics.median(c for _, c in runs["off"])
    return {
        "engine": engine,
        "repeats": repeats,
        "secondsOn": [round(w, 2) for w, _ in runs["on"]],
        "secondsOff": [round(w, 2) for w, _ in runs["off"]],
        "cpuSecondsOn": [round(c, 2) for _, c in runs["on"]],
        "cpuSecondsOff": [round(c, 2) for _, c in runs["off"]],
        "medianMBpsOn": round(nbytes / 1e6 / on, 2),
        "medianMBpsOff": round(nbytes / 1e6 / off, 2),
        "throughputDropPercent": round((on - off) / on * 100, 1),
        "medianCpuMBpsOn": round(nbytes / 1e6 / cpu_on, 2),
        "medianCpuMBpsOff": round(nbytes / 1e6 / cpu_off, 2),
        "cpuThroughputDropPercent": round((cpu_on - cpu_off) / cpu_on * 100, 1),
    }


def redaction_share(files: list[Path], ingest_seconds: float) -> dict:
    """Time to redact every projected text of the corpus, alone, against the ingest time: the same
    cost with the machine's noise (other agents' load) mostly out of it."""
    texts = fragment_texts(files, 1 << 62)
    t = time.perf_counter()
    for text in texts:
        redact(text, DEFAULT_RULES)
    seconds = time.perf_counter() - t
    return {
        "textMchars": round(sum(map(len, texts)) / 1e6, 1),
        "redactSeconds": round(seconds, 2),
        "shareOfIngestPercent": round(seconds / ingest_seconds * 100, 1),
    }


def scan(dirs: list[str], examples: int = 5) -> dict:
    """Redactions the built-in rules make in the text files under `dirs` (precision on real text)."""
    counts: dict[str, int] = {}
    shown: dict[str, list[str]] = {}
    chars = files = 0
    for top in dirs:
        for path in Path(top).rglob("*"):
            if not path.is_file() or path.suffix not in (".py", ".js", ".ts", ".md", ".json", ".txt", ".toml", ".yaml"):
                continue
            try:
                text = path.read_text()
            except (OSError, UnicodeDecodeError):
                continue
            files += 1
            chars += len(text)
            for start, end, kind in find(text):
                counts[kind] = counts.get(kind, 0) + 1
                if len(shown.setdefault(kind, [])) < examples:
                    shown[kind].append(f"{path}: {text[max(0, start - 40) : end + 5]!r}")
    return {"files": files, "mchars": round(chars / 1e6, 1), "byKind": counts, "examples": shown}


def report_md(result: dict) -> str:
    lines = [
        f"# Redaction benchmark ({result['corpusBytes'] / 1e6:.0f} MB real-Pi corpus)",
        "",
        f"`{result['command']}`",
        "",
        "## Detectors (projected fragment texts)",
        "",
        "| detector | MB/s | planted removed | look-alikes changed |",
        "| --- | ---: | ---: | ---: |",
    ]
    for row in result["detectors"]:
        lines.append(
            f"| {row['detector']} | {row['mbPerSecond']} | {row['removed']}/{row['planted']} |"
            f" {row['lookalikesChanged']}/{row['lookalikes']} |"
        )
    ing = result["ingest"]
    lines += [
        "",
        f"## Ingest with redaction on vs off ({ing['engine']} text index, interleaved, medians)",
        "",
        f"- on: {ing['medianMBpsOn']} MB/s (runs {ing['secondsOn']} s)",
        f"- off: {ing['medianMBpsOff']} MB/s (runs {ing['secondsOff']} s)",
        f"- wall-clock throughput drop: {ing['throughputDropPercent']}%",
        f"- per CPU second (steadier on a shared machine): on {ing['medianCpuMBpsOn']} MB/s, off"
        f" {ing['medianCpuMBpsOff']} MB/s (runs {ing['cpuSecondsOn']} / {ing['cpuSecondsOff']} s):"
        f" drop **{ing['cpuThroughputDropPercent']}%**",
    ]
    share = result.get("redactionShare")
    if share:
        lines += [
            f"- redacting all {share['textMchars']} M characters of projected text alone: {share['redactSeconds']} s,"
            f" {share['shareOfIngestPercent']}% of the median ingest time with redaction off"
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bytes", default="150M")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--detector-bytes", default="30M", help="corpus bytes whose texts the detectors run over")
    ap.add_argument("--slow-share", type=float, default=0.02, help="share of those texts detect-secrets runs over")
    ap.add_argument("--skip-ingest", action="store_true")
    ap.add_argument("--engine", default=DEFAULT_ENGINE, help="text index engine for the ingest runs")
    ap.add_argument("--scan", nargs="+", metavar="DIR", help="only report redactions in the text files under DIR")
    ns = ap.parse_args()
    if ns.scan:
        print(json.dumps(scan(ns.scan), indent=2))
        return
    nbytes = parse_bytes(ns.bytes)
    _, manifest = corpus(nbytes, ns.seed)
    root = Path(manifest["sessionsDir"])
    files = sorted(root.rglob("*.jsonl"))
    texts = fragment_texts(files, parse_bytes(ns.detector_bytes))
    result = {
        "command": "python -m bench.redact " + " ".join(sys.argv[1:]),
        "corpusBytes": manifest["totalBytes"],
        "files": len(files),
        "builtinRules": [r.kind for r in BUILTIN_RULES],
        "detectors": detectors(texts, ns.slow_share),
    }
    if not ns.skip_ingest:
        result["ingest"] = ingest(root, manifest["totalBytes"], ns.repeats, ns.engine)
        off_seconds = manifest["totalBytes"] / 1e6 / result["ingest"]["medianMBpsOff"]
        result["redactionShare"] = redaction_share(files, off_seconds)
    OUT.mkdir(parents=True, exist_ok=True)
    stem = OUT / f"redact-{ns.bytes}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=2))
    if "ingest" in result:
        stem.with_suffix(".md").write_text(report_md(result))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
