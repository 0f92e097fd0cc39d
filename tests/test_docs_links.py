"""Every relative link in README.md and docs/ points to a file that exists and, with an anchor,
to a heading of that file (GitHub's anchors): a heading renamed left links that went nowhere."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(`{3,}|~{3,})[\w+-]*$")  # a fence line: the fence and an info string only


def _text_outside_code(path: Path) -> str:
    lines, inside = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.strip()):
            inside = not inside
            continue
        if not inside:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(lines)


def github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, inline code marks and punctuation dropped
    (letters, digits, ``_`` and ``-`` kept), each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link: its text
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: Counter[str] = Counter()
    found = set()
    inside = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.strip()):
            inside = not inside
            continue
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if inside or not match:
            continue
        anchor = github_anchor(match.group(1))
        found.add(anchor if not seen[anchor] else f"{anchor}-{seen[anchor]}")
        seen[anchor] += 1
    return found


def test_the_anchor_rule_matches_githubs_on_known_headings():
    assert github_anchor("Coder–Tester's catch reward — `python benchmarks/tester_reward.py`") == (
        "codertesters-catch-reward--python-benchmarkstester_rewardpy")
    assert github_anchor("Issue 35: at most 1.2× the old harness") == "issue-35-at-most-12-the-old-harness"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_reach_a_file_and_a_heading(page):
    broken = []
    for target in LINK.findall(_text_outside_code(page)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        file = (page.parent / path_part).resolve() if path_part else page
        if not file.exists():
            broken.append(f"{target}: no file {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading with that anchor in {file.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)
