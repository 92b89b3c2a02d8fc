"""No development log in the product: no tracked text file refers to a numbered stage of
the repository's own development ("session 8", "this session", "stage 3") or to a tracker
number users cannot see ("issue 15", "(#23)"). A machine is named by its CPU model, cores
and load; history, where it matters, by date (CHANGELOG.md)."""

import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = (".md", ".rst", ".py", ".toml", ".ipynb", ".json", ".txt", ".cfg", ".ini", ".yaml",
        ".yml", ".sh", ".jsonl")
# Case-insensitive. "session" alone is a legitimate word (an HTTP or TensorBoard session);
# only a numbered one, or one that means this repository's work, is flagged.
PATTERNS = [
    r"\bsessions?[- ]?\d+",             # session 8, session-11, sessions 6-11
    r"\bthis session\b", r"\bsession's\b", r"\bprevious session\b", r"\bearlier session\b",
    r"\bstages? \d+",                   # stage 3
    r"\bissues? #?\d+",                 # issue 15, issue #18 (a tracker number)
    r"\bthe issue's\b",                # the four
    r"\(#\d+\)",                        # (#23)
]
PATTERN = re.compile("|".join(PATTERNS), re.IGNORECASE)


def _tracked_text_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             check=True, timeout=60).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    names = [n for n in out.split("\0") if n]
    if not names:
        pytest.skip("not a git checkout")
    me = os.path.relpath(__file__, ROOT)
    return [n for n in names if n.endswith(TEXT) or os.path.basename(n) in ("run",)
            if n != me]


def offending(text: str) -> list[str]:
    """The lines of ``text`` that refer to a development stage or a tracker number."""
    return [ln.strip()[:120] for ln in text.splitlines() if PATTERN.search(ln)]


def test_the_pattern_flags_stages_and_spares_plain_words():
    assert offending("measured in session 8 on the EPYC") and offending("Session-11 run")
    assert offending("this session's machine") and offending("see stage 3")
    assert offending("(issue 15)") and offending("fixed in (#23)")
    assert offending("Check (issue #18):") and offending("the issue's four")
    assert not offending("a TensorBoard session; tf.Session; requests.Session()")
    assert not offending("the session of the HTTP client; stages of the pipeline")


def test_no_tracked_text_file_refers_to_a_development_stage():
    bad = {}
    for name in _tracked_text_files():
        path = os.path.join(ROOT, name)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            hits = offending(f.read())
        if hits:
            bad[name] = hits
    summary = "\n".join(f"{n}: {len(h)} line(s), e.g. {h[0]!r}" for n, h in sorted(bad.items()))
    assert not bad, f"{len(bad)} tracked files refer to development stages:\n{summary}"
