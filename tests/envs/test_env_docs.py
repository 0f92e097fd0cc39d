"""An environment's spec lives in one place, its docs page, and the page agrees with the code.

Every ``llm_envs/envs/<name>/env.py`` keeps a short module docstring that names its page under
``docs/envs/``; the page holds the spec table and the version history (no copy in the docstring
to drift from it). The page must name every registered id served by that module and every agent
of those ids (as the registry lists them), and every module docstring under ``llm_envs/envs/``
stays short (longer explanations belong in docs/).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import llm_envs

ROOT = Path(__file__).resolve().parents[2]
ENV_MODULES = sorted(ROOT.glob("llm_envs/envs/*/env.py"))
MAX_DOCSTRING_LINES = 25
#: Environments whose docstring still carries its spec table (none left).
PENDING: set[str] = set()


def docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False) or ""


def section(page: str, title: str) -> str:
    """The text of the ``## title`` section of a markdown page ("" if there is none)."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", page, re.M | re.S)
    return match.group(1) if match else ""


def page_of(path: Path) -> tuple[Path, str]:
    named = re.findall(r"docs/envs/([a-z_]+)\.md", docstring(path))
    assert named, f"{path.relative_to(ROOT)}: the docstring must name its page docs/envs/<name>.md"
    page = ROOT / "docs" / "envs" / f"{named[0]}.md"
    assert page.exists(), f"{path.relative_to(ROOT)} names {page.relative_to(ROOT)}, which does not exist"
    return page, page.read_text(encoding="utf-8")


def ids_served_by(path: Path) -> dict[str, tuple[str, ...]]:
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return {e.id: e.agents for e in llm_envs.list_envs() if e.entry_point.partition(":")[0] == module}


CHECKED = [path for path in ENV_MODULES if path.parent.name not in PENDING]


def test_every_registered_environment_module_is_checked():
    served = {e.entry_point.partition(":")[0] for e in llm_envs.list_envs()}
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts) for p in ENV_MODULES}
    assert served <= modules
    assert len(CHECKED) >= len(ENV_MODULES) - len(PENDING) >= 10


@pytest.mark.parametrize("path", CHECKED, ids=lambda path: path.parent.name)
def test_the_docstring_points_to_the_page_and_holds_no_spec_table(path):
    text = docstring(path)
    assert len(text.splitlines()) <= MAX_DOCSTRING_LINES
    table_rule = re.compile(r"^\s*(={3,}\s+={3,}|\|?\s*-{3,}\s*\|)", re.M)
    assert not table_rule.search(text), "the spec table belongs in the docs page only"
    assert "Version history" not in text, "the version history belongs in the docs page only"
    page_of(path)


@pytest.mark.parametrize("path", CHECKED, ids=lambda path: path.parent.name)
def test_the_page_holds_the_spec_and_version_history_of_every_id_it_serves(path):
    page, text = page_of(path)
    spec = section(text, "Spec")
    assert re.search(r"^\|.*\|\s*$", spec, re.M), f"{page.name}: no spec table under '## Spec'"
    assert re.search(r"^\* v\d+", section(text, "Version history"), re.M), f"{page.name}: no version history"
    title = text.splitlines()[0]
    for env_id, agents in ids_served_by(path).items():
        if env_id.startswith("llm/"):
            assert f"`{env_id}`" in title, f"{page.name}: the title does not name {env_id}"
        else:
            assert f"`{env_id.split('/')[0]}/" in title
        for agent in agents:
            # "agent_1" is covered by a spec that writes `agent_0` … `agent_{A-1}`.
            first_of_kind = re.sub(r"\d+$", "0", agent)
            assert f"`{agent}`" in spec or f"`{first_of_kind}`" in spec, f"{page.name}: agent {agent} missing from the spec"


def test_every_module_under_envs_keeps_a_short_docstring():
    long = {
        str(path.relative_to(ROOT)): len(docstring(path).splitlines())
        for path in sorted(ROOT.glob("llm_envs/envs/**/*.py"))
        if path.parent.name not in PENDING and len(docstring(path).splitlines()) > MAX_DOCSTRING_LINES
    }
    assert long == {}


def test_a_spec_table_in_a_docstring_is_caught():
    # The check above must be able to fail: the docstring this module had before the move.
    old = '"""Plan-Path.\n\n=====  =====\nAgents  tool\n=====  =====\n\nVersion history:\n"""\n'
    table_rule = re.compile(r"^\s*(={3,}\s+={3,}|\|?\s*-{3,}\s*\|)", re.M)
    assert table_rule.search(ast.get_docstring(ast.parse(old), clean=False))
