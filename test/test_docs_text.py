"""README.md and docs/*.md speak to users: no issue numbers, commit hashes, dates, machine
load or development history ("in an earlier run", "was wrong", "session 2", "before, ...").
The project's history lives in git."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
#: name -> pattern; each names one kind of text a user should not read
FORBIDDEN: dict[str, re.Pattern] = {
    "issue number": re.compile(r"\bissues? ?#?\d+|(?<![&\w/])#\d{1,5}\b|\bitem \d+[a-z]?\b", re.I),
    # 7-40 hex digits with at least one letter and one digit: a commit hash
    "commit hash": re.compile(r"(?<![\w.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![\w.-])"),
    "date": re.compile(rf"\b\d{{1,2}} (?:{MONTHS})[a-z]*\.?(?: \d{{4}})?\b|\b(?:{MONTHS})[a-z]* \d{{1,2}}(?:st|nd|rd|th)?\b"
                       r"|\b20\d\d-[01]\d-[0-3]\d\b"),
    "machine load": re.compile(r"\bload (?:average|avg)\b|\bload \d|\b(?:idle|loaded|overloaded|quiet|busy) machine\b"
                               r"|\bshared (?:cores|machine)\b|\bother jobs\b", re.I),
    "development history": re.compile(
        r"\b(?:earlier|previous|last) (?:session|claim|round)s?\b|\bsessions? \d+\b|\bin an earlier\b"
        r"|\bwas wrong\b|\brounds? \d+\b|\brounds of\b|(?:^|[.;(]\s*)before, |\(was:? |\bwere: |\bre-measured (?:after|on main|with the)\b"
        r"|\bmeasured again\b|\bon main\b", re.I),
}


def _hits(text: str) -> list[tuple[str, int, str]]:
    """(kind, line, matched text) for every forbidden phrase; a phrase may wrap onto the next line."""
    flat = re.sub(r"(?<!\n)\n(?!\n)", " ", text)  # one line per paragraph, same offsets
    out = []
    for kind, pat in FORBIDDEN.items():
        for m in pat.finditer(flat):
            out.append((kind, text.count("\n", 0, m.start()) + 1, m.group(0)))
    return sorted(out, key=lambda h: h[1])


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_user_pages_carry_no_history(page):
    hits = _hits(page.read_text(encoding="utf-8"))
    assert not hits, "\n".join(f"{page.relative_to(REPO)}:{n}: {kind}: {text!r}" for kind, n, text in hits)


@pytest.mark.parametrize("text, kind", [
    ("What the package does about them (issue 13):", "issue number"),
    ("checked against the mutation of issue 12 item 17a", "issue number"),
    ("fixed in #12", "issue number"),
    ("the latency-probe changes of 1fca55f (cmaes re-run too)", "commit hash"),
    ("the floor grid of bf9a91d", "commit hash"),
    ("`total 18 s` in a fresh clone on 1 Dec", "date"),
    ("measured on December 1", "date"),
    ("Measured while five other jobs shared the 2 cores (load average 5-14):", "machine load"),
    ("2 cores shared with other jobs (load 4-12)", "machine load"),
    ("The 2-seed run of session 2 came from the latency nuisance", "development history"),
    ("0.6 % (6.4 % in an earlier run without it)", "development history"),
    ("The earlier claim that one process is GIL-bound was wrong", "development history"),
    ("(Re-measured after the fixes below: 9.48 %)", "development history"),
    ("about 20 s on an idle\nmachine", "machine load"),                    # wrapped onto the next line
    ("Before, the interval was centred there.", "development history"),
])
def test_the_scan_catches_each_kind(text, kind):
    assert kind in {k for k, _, _ in _hits(text)}


@pytest.mark.parametrize("text", [
    "| `rig_options.*` | string &#124; number | — | — | One option. |",      # an HTML entity
    "each frame period is split into equal substeps no longer than this",
    "left alive after the last full run, each examined",                   # the mutation method
    "`vid2sid_ros.benchmark.misspecification` documents: `latency` (s, default 0.02)",
    "sha256 of the model file, e.g. `abcdefa`",                            # letters only: no hash
    "a rollout over 1000000 substeps; 25 frames; 0.0046372 N·m",
    "the test_resume_session group measures _resume_session against it",
    "equivalent: cost is 0.0 just before, so = and += give the same value",
    "Files written for earlier versions still load",
    "on sensitivities re-measured when they were carried far from where they were measured",
])
def test_the_scan_leaves_legitimate_text_alone(text):
    assert _hits(text) == []
