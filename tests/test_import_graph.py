"""No import cycle among the project's modules (llm_envs, llm_trainers, sandboxes).

The graph is built from the source with ``ast``, not by importing: every ``import`` and
``from ... import`` statement counts, at module level and inside functions and methods (a
function-local import that closes a cycle is still a cycle: it only hides it until the function
runs). Relative imports are resolved against the importing module's package.

An edge ``a -> b`` means module ``a`` names module ``b`` in an import statement. For
``from pkg import name`` the edge goes to ``pkg.name`` when that is a module of the tree, else to
``pkg``. The implicit import of a parent package (``import a.b.c`` first runs ``a/__init__`` and
``a/b/__init__``) is not an edge: a package that re-exports its submodules would otherwise be a
"cycle" with each of them, which is ordinary Python.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("llm_envs", "llm_trainers", "sandboxes")


def module_files(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, Path]:
    """Dotted module name → source file, for every ``.py`` file of ``packages`` under ``root``."""
    out: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name of ``from <'.' * level><target> import ...`` written in ``module``."""
    base = module.split(".")
    if not is_package:
        base = base[:-1]  # a plain module's package is its parent
    if level - 1 > len(base) - 1:
        raise ValueError(f"{module}: relative import beyond the top-level package")
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``module`` (at ``path``) imports anywhere in its body."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def add(name: str) -> None:
        # The longest prefix of ``name`` that is a project module (``import a.b.c`` where c is a
        # function's attribute access is impossible, but ``import a.b`` of a package is common).
        parts = name.split(".")
        for end in range(len(parts), 0, -1):
            candidate = ".".join(parts[:end])
            if candidate in known:
                found.add(candidate)
                return

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = _resolve_relative(module, is_package, node.level, node.module)
            for alias in node.names:
                sub = f"{base}.{alias.name}" if base else alias.name
                if sub in known:
                    found.add(sub)
                else:
                    add(base)
    found.discard(module)
    return found


def import_graph(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> dict[str, set[str]]:
    files = module_files(root, packages)
    known = set(files)
    return {name: imports_of(name, path, known) for name, path in files.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (as a closed path ``[a, b, ..., a]``) per tangle (:func:`tangles`)."""
    return [_cycle_in(graph, set(c)) for c in tangles(graph)]


def tangles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module: the sets of modules that all
    reach each other (Tarjan's algorithm, iterative so a deep graph cannot hit the recursion
    limit). Every cycle lies inside one of them."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest closed path through the first (sorted) member of a strongly connected component."""
    start = min(component)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & component):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child not in previous:
                    previous[child] = node
                    nxt.append(child)
        frontier = nxt
    raise AssertionError("a strongly connected component without a cycle")  # pragma: no cover


def test_the_project_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 100, "the scan found too few modules: is ROOT right?"
    report = [
        f"{' -> '.join(_cycle_in(graph, set(members)))}   (modules that all import each other: {', '.join(members)})"
        for members in tangles(graph)
    ]
    assert not report, "import cycles (a -> b: a imports b):\n" + "\n".join(report)


# ---------------------------------------------------------------------- the detector itself


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_function_local_import_that_closes_a_cycle_is_found(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import thing\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/b.py": "def f():\n    from ..a import x\n    return x\n",
        "pkg/b.py": "def thing():\n    import pkg.sub.b\n",
    })
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.sub.b"] == {"pkg.a"}  # the relative import, resolved
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.sub.b", "pkg.a"]]


def test_parent_packages_and_acyclic_imports_are_not_cycles(tmp_path: Path) -> None:
    _write(tmp_path, {
        "pkg/__init__.py": "from pkg.a import f\nfrom . import b\n",
        "pkg/a.py": "import pkg.b\nfrom pkg import b as _b\n",
        "pkg/b.py": "import os\nfrom pkg.c import g\n",
        "pkg/c.py": "g = 1\n",
    })
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg"] == {"pkg.a", "pkg.b"}
    assert graph["pkg.a"] == {"pkg.b"}
    assert find_cycles(graph) == []


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for child in graph[todo.pop()]:
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return seen


def test_the_single_process_trainer_does_not_reach_the_distributed_parts() -> None:
    """The local loop needs no Ray code: only config validation's layout check (which plans on
    paper, without Ray) lives under ``distributed/``."""
    graph = import_graph()
    distributed = {m for m in reachable(graph, "llm_trainers.trainer") if m.startswith("llm_trainers.distributed")}
    assert distributed <= {"llm_trainers.distributed", "llm_trainers.distributed.placement"}, distributed
    assert "llm_trainers.trainer" not in reachable(graph, "llm_trainers.distributed.learner")
