"""``llm_envs.interop.verifiers.load_environment`` run by verifiers' own evaluation entry point
(``vf-eval``, verifiers 0.2.1) against a local OpenAI-compatible server (tests/agents/chat_server.py)
on 127.0.0.1.

verifiers pins packages this project's other extras resolve differently (mcp<2; openenv-core's
fastmcp needs mcp 2), so it runs from its own virtual environment layered over the project's
(``make verifiers-venv``: ``.venv-verifiers``, or ``LLM_ENVS_VERIFIERS_PYTHON`` naming another
interpreter). The rewards ``vf-eval`` saves are checked against the same episodes replayed
in-process with our environment.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import llm_envs
from llm_envs.agents import ReferenceAgent
from llm_envs.interop.verifiers import EVAL_SEED_OFFSET, _advance
from tests.agents.chat_server import ChatServer
from tests.optional import skip_or_fail
from tests.runner import toy_envs

ROOT = Path(__file__).resolve().parents[2]


def verifiers_python() -> str | None:
    """An interpreter that imports verifiers with its classic API, or None."""
    candidates = [os.environ.get("LLM_ENVS_VERIFIERS_PYTHON"), sys.executable, str(ROOT / ".venv-verifiers" / "bin" / "python")]
    for python in filter(None, candidates):
        if not Path(python).exists():
            continue
        probe = subprocess.run([python, "-c", "import verifiers as vf; vf.MultiTurnEnv; vf.Rubric"], capture_output=True, timeout=120)
        if probe.returncode == 0:
            return python
    return None


PYTHON = verifiers_python()
if PYTHON is None:
    skip_or_fail("verifiers", "verifiers is not installed: `make verifiers-venv` builds .venv-verifiers "
                 "(its pins conflict with the serve extra)")


def vf_eval(server: ChatServer, out: Path, env_args: dict, examples: int, *, env_server: bool = True) -> list[dict]:
    """Run ``vf-eval`` (verifiers.scripts.eval) on our module; return the saved rows. By default
    in verifiers' default mode, the one docs/interop.md shows: the environment is built again in
    env-server worker processes from its ``env_id`` and ``env_args``. The command runs in its own
    process group, killed whole at the end (verifiers' env server outlives a killed parent)."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "CHAT_KEY": "unused"}
    command = [PYTHON, "-m", "verifiers.scripts.eval", "llm_envs.interop.verifiers", "-a", json.dumps(env_args),
               "-m", "test-model", "-b", f"http://127.0.0.1:{server.port}/v1", "-k", "CHAT_KEY",
               "-n", str(examples), "-r", "1", "-d", "-s", "-o", str(out)]
    if not env_server:
        command.append("--disable-env-server")
    process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    try:
        _, stderr = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        pytest.fail(f"vf-eval did not finish in 300 s: {stderr[-4000:]}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # any env-server worker left behind
    assert process.returncode == 0, stderr[-4000:]
    [path] = list(out.rglob("results.jsonl"))
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_verifiers_environment_imports_this_project_without_pythonpath():
    """The layering of `make verifiers-venv` (a .pth in .venv-verifiers) must load .venv's
    editable install, so that the documented `vf-eval` command works as written."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([PYTHON, "-c", "import llm_envs.interop.verifiers, verifiers"], env=env, cwd="/",
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_environment_records_how_verifiers_builds_it_again():
    """verifiers' env server calls load_environment(env.env_id, **env.env_args) in its workers:
    env_id is this module, and env_args rebuild the same environment (no second ``env_id``)."""
    probe = (
        "import json, verifiers as vf\n"
        "from llm_envs.interop.verifiers import load_environment\n"
        "e = load_environment('llm/Signalling-v0', num_train_examples=2, num_eval_examples=1)\n"
        "again = vf.load_environment(e.env_id, **e.env_args)\n"
        "print(json.dumps([e.env_id, e.env_args, again.env_args, len(again.eval_dataset)]))\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run([PYTHON, "-c", probe], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    env_id, args, again, eval_rows = json.loads(result.stdout.splitlines()[-1])
    assert env_id == "llm_envs.interop.verifiers" and "env_id" not in args
    assert args["env"] == "llm/Signalling-v0" and again == args and eval_rows == 1


def replay(env_id: str, seed: int, trained: str, answer, **options) -> tuple[float, dict]:
    """The episode of ``seed`` in-process: ``answer(prompt)`` for the trained agent, reference agents
    for the others; (the trained agent's reward, the episode's metrics)."""
    env = llm_envs.make(env_id, **options)
    env.reset(seed=seed)
    fixed = {a: ReferenceAgent() for a in env.possible_agents if a != trained}
    _advance(env, trained, fixed)
    while env.agents and not env.episode_over:
        env.step(answer(env.observe(trained)["prompt"]))
        _advance(env, trained, fixed)
    return env.agent_rewards()[trained], env.episode_metrics()


def test_vf_eval_scores_signalling_with_our_reward(tmp_path):
    with ChatServer() as server:  # it answers "?" to anything but a sum: the speaker names no symbol
        rows = vf_eval(server, tmp_path, {"env": "llm/Signalling-v0", "num_train_examples": 0, "num_eval_examples": 4}, 4)
    assert len(rows) == 4 and all(row["error"] is None for row in rows)
    for row in rows:
        seed = row["info"]["seed"]
        assert seed >= EVAL_SEED_OFFSET
        reward, metrics = replay("llm/Signalling-v0", seed, "speaker", lambda prompt: "?")
        assert row["reward"] == pytest.approx(reward) and row["success"] == metrics["success"]
        assert row["completion"][0]["content"] == "?"


def test_vf_eval_plays_a_multi_turn_episode_and_credits_the_team_bonus(tmp_path):
    args = {"env": toy_envs.SUMS_ENV_ID, "imports": ["tests.interop.verifiers_sums"], "agent": "alice",
            "num_train_examples": 0, "num_eval_examples": 3}
    with ChatServer() as server:  # a perfect model of the sums environment
        rows = vf_eval(server, tmp_path, args, 3, env_server=False)  # the in-process mode too
        asked = len(server.requests)
    assert len(rows) == 3 and asked == 6  # two questions per episode for alice
    gen = toy_envs.register_sums_env()
    next(gen)
    try:
        for row in rows:
            reward, metrics = replay(toy_envs.SUMS_ENV_ID, row["info"]["seed"], "alice", toy_envs.solve_prompt)
            assert reward == pytest.approx(3.0) == pytest.approx(row["reward"])  # 2 x (1 + team bonus 0.5)
            assert row["num_turns"] == 2 and row["success"] == metrics["success"] == 1.0
    finally:
        gen.close()
