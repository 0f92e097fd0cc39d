"""Every environment's ``rules.py`` is pure game logic: importing it imports no PettingZoo.

Each module is imported in a fresh interpreter. Importing any submodule first runs its parent
packages; two of them register the environments in PettingZoo's registry on import, by design
(``import llm_envs`` makes ``pettingzoo.make("aec", "llm/...")`` work: docs/architecture.md,
"Importing registers"). Those two, ``llm_envs`` and ``llm_envs.envs``, are entered as bare
packages (their ``__init__`` is not run); everything else, the rules module and whatever it
imports (``llm_envs.core``, ``llm_envs.tasks``, the puzzles' shared helpers, ...), is imported
for real.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RULES = sorted(ROOT.glob("llm_envs/envs/*/rules.py"))

PROBE = """
import importlib, sys, types
from pathlib import Path
root = Path(sys.argv[1]) / "llm_envs"
for name, path in (("llm_envs", root), ("llm_envs.envs", root / "envs")):
    package = types.ModuleType(name)
    package.__path__ = [str(path)]
    sys.modules[name] = package
importlib.import_module(sys.argv[2])
loaded = sorted(m for m in sys.modules if m == "pettingzoo" or m.startswith("pettingzoo."))
print("PETTINGZOO:" + ",".join(loaded))
"""


def modules_loaded_with(module: str) -> list[str]:
    """The PettingZoo modules in ``sys.modules`` after importing ``module`` in a fresh interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT), module],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    line = next(line for line in done.stdout.splitlines() if line.startswith("PETTINGZOO:"))
    return [name for name in line.removeprefix("PETTINGZOO:").split(",") if name]


def test_every_environment_package_has_a_rules_module():
    names = {path.parent.name for path in RULES}
    assert {"sudoku", "sokoban", "plan_path", "signalling", "debate"} <= names


@pytest.mark.parametrize("path", RULES, ids=lambda path: path.parent.name)
def test_importing_a_rules_module_imports_no_pettingzoo(path):
    module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    assert modules_loaded_with(module) == [], f"{module} imports PettingZoo"


def test_the_probe_sees_pettingzoo_when_a_module_imports_it():
    # The same probe on an AEC layer: it must find PettingZoo, or the test above proves nothing.
    assert "pettingzoo" in modules_loaded_with("llm_envs.envs.sudoku.env")
