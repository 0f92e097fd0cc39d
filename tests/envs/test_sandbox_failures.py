"""A sandbox failure is never a model result: every environment that runs code raises
``SandboxFailure`` (after a retry on a fresh worker) instead of scoring, and leaves its state as
it was, so the same step can be played again once the sandbox works."""

from __future__ import annotations

import pytest

import llm_envs
import sandboxes
from llm_envs.core import InfrastructureError, SandboxFailure
from llm_envs.envs.coder_tester.env import CoderTesterEnv
from llm_envs.verifiers import code as code_verifier
from llm_envs.verifiers.code import SANDBOX_ATTEMPTS, judge_function, judge_io, run_program
from sandboxes import Limits
from tests.envs.helpers import ListSource
from tests.envs.sandbox_faults import WORKER_DIED, FailingSandbox, crashing_sandbox

ADD = llm_envs.tasks.Problem(
    id="toy/add",
    prompt='def add(a, b):\n    """Return a + b."""\n',
    split="train",
    solution="def add(a, b):\n    return a + b\n",
    tests=("assert add(1, 2) == 3", "assert add(0, 0) == 0", "assert add(-1, 1) == 0"),
    style="function",
    entry_point="add",
)
SUM_IO = llm_envs.tasks.Problem(
    id="toy/sum",
    prompt="Read two integers a and b on one line and print a + b.",
    split="train",
    solution="a, b = map(int, input().split())\nprint(a + b)\n",
    tests=(("1 2\n", "3\n"), ("5 5\n", "10\n")),
    style="io",
)


@pytest.fixture(scope="module")
def real_sandbox():
    return sandboxes.shared_sandbox("auto")


# Every environment (and variant) whose steps run code, with the agents whose actions do.
CODE_ENVS = {
    "coder_tester_function": (lambda sb: CoderTesterEnv(task_source=ListSource([ADD]), sandbox=sb), {"coder", "tester"}),
    "coder_tester_io": (lambda sb: CoderTesterEnv(task_source=ListSource([SUM_IO]), sandbox=sb), {"coder", "tester"}),
    "coder_tester_single": (
        lambda sb: CoderTesterEnv(task_source=ListSource([ADD]), sandbox=sb, agents="single"),
        {"coder"},
    ),
    "reasoner_tool": (lambda sb: llm_envs.make("llm/ReasonerTool-v0", sandbox=sb), {"tool"}),
    "plan_path": (lambda sb: llm_envs.make("llm/PlanPath-v0", sandbox=sb), {"tool"}),
    "plan_path_single": (lambda sb: llm_envs.make("llm/PlanPath-v0", sandbox=sb, agents="single"), {"solver"}),
    "sokoban": (lambda sb: llm_envs.make("llm/Sokoban-v0", sandbox=sb), {"tool"}),
    "sudoku": (lambda sb: llm_envs.make("llm/Sudoku-v0", sandbox=sb), {"tool"}),
}


def _snapshot(env) -> dict:
    agent = env.agent_selection
    return {
        "agent": agent,
        "turn": env.turn,
        "records": [(r.agent, r.action, r.reward, dict(r.reward_components)) for r in env.records],
        "rewards": dict(env.rewards),
        "cumulative": dict(env._cumulative_rewards),
        "observation": env.observe(agent),
        "metrics": env.episode_metrics(),
    }


@pytest.mark.parametrize("case", sorted(CODE_ENVS))
def test_a_sandbox_failure_raises_leaves_the_state_and_a_replay_scores_as_if_it_never_happened(case, real_sandbox):
    make, code_agents = CODE_ENVS[case]
    faulty = FailingSandbox(real_sandbox)
    env, twin = make(faulty), make(real_sandbox)  # the twin plays the same actions on a working sandbox
    env.reset(seed=3)
    twin.reset(seed=3)
    raised_for: set[str] = set()
    for _ in range(64):
        if not env.agents:
            break
        agent = env.agent_selection
        if env.terminations[agent] or env.truncations[agent]:
            env.step(None)
            twin.step(None)
            continue
        action = twin.reference_action(agent)
        before = _snapshot(env)
        faulty.down, failed_before = True, faulty.failed_runs
        try:
            env.step(action)
        except SandboxFailure as failure:
            raised_for.add(agent)
            assert isinstance(failure, InfrastructureError) and failure.kind == "sandbox"
            assert failure.attempts == SANDBOX_ATTEMPTS and WORKER_DIED in str(failure)
            assert faulty.failed_runs - failed_before >= SANDBOX_ATTEMPTS  # retried, then raised
            assert _snapshot(env) == before  # nothing was scored, nothing changed
            faulty.down = False
            env.step(action)  # the sandbox works again: the same step, played for real
        else:
            assert faulty.failed_runs == failed_before, f"{agent}'s step ran code and scored a sandbox failure"
            faulty.down = False
        twin.step(action)
        assert [(r.reward, r.reward_components) for r in env.records] == [
            (r.reward, r.reward_components) for r in twin.records
        ]
        assert env.rewards == twin.rewards and env._cumulative_rewards == twin._cumulative_rewards
    assert not env.agents and not twin.agents
    assert env.episode_metrics() == twin.episode_metrics()
    assert raised_for == code_agents


@pytest.mark.parametrize("case", ["coder_tester_function", "reasoner_tool", "plan_path"])
def test_one_failed_run_is_retried_and_scored_normally(case, real_sandbox):
    make, code_agents = CODE_ENVS[case]
    faulty = FailingSandbox(real_sandbox)
    env, twin = make(faulty), make(real_sandbox)
    env.reset(seed=5)
    twin.reset(seed=5)
    while env.agent_selection not in code_agents:
        action = twin.reference_action(env.agent_selection)
        env.step(action)
        twin.step(action)
    action = twin.reference_action(env.agent_selection)
    faulty.fail_next = SANDBOX_ATTEMPTS - 1
    env.step(action)
    twin.step(action)
    assert faulty.failed_runs == SANDBOX_ATTEMPTS - 1 and faulty.fail_next == 0
    assert [r.reward for r in env.records] == [r.reward for r in twin.records]


def test_a_real_worker_crash_is_retried_on_a_fresh_worker_then_raised():
    sandbox = crashing_sandbox()
    try:
        assert run_program(sandbox, "print(6 * 7)").stdout == "42\n"
        started = sandbox.workers_started
        sandbox.crashes_left = 1  # the pool reports the crash; one retry on a fresh worker absorbs it
        result = run_program(sandbox, "print(6 * 7)")
        assert result.ok and result.stdout == "42\n" and sandbox.workers_killed == 1
        assert sandbox.workers_started == started + 1
        # A crash on every attempt: raised, never returned as the program's failure.
        for call in (
            lambda: run_program(sandbox, "print(1)"),
            lambda: judge_function(sandbox, ADD.solution, list(ADD.tests), entry_point="add"),
            lambda: judge_io(sandbox, SUM_IO.solution, list(SUM_IO.tests)),
        ):
            sandbox.crashes_left, killed = 1000, sandbox.workers_killed  # every run crashes
            with pytest.raises(SandboxFailure, match="worker") as caught:
                call()
            assert caught.value.attempts == SANDBOX_ATTEMPTS
            assert sandbox.workers_killed - killed >= SANDBOX_ATTEMPTS
            sandbox.crashes_left = 0
        report = judge_function(sandbox, ADD.solution, list(ADD.tests), entry_point="add")
        assert report.all_passed and report.sandbox_error is None  # and it works again
    finally:
        sandbox.close()


def test_a_real_worker_crash_under_a_tool_program_is_not_scored(real_sandbox):
    sandbox = crashing_sandbox()
    try:
        env = llm_envs.make("llm/ReasonerTool-v0", sandbox=sandbox)
        twin = llm_envs.make("llm/ReasonerTool-v0", sandbox=real_sandbox)
        env.reset(seed=1)
        twin.reset(seed=1)
        for e in (env, twin):
            e.step(twin.reference_action("reasoner"))
        action = twin.reference_action("tool")
        sandbox.crashes_left = SANDBOX_ATTEMPTS
        before = _snapshot(env)
        with pytest.raises(SandboxFailure):
            env.step(action)
        assert _snapshot(env) == before
        env.step(action)
        twin.step(action)
        assert env.records[-1].reward == twin.records[-1].reward
        assert env.records[-1].info["runs"] is True
    finally:
        sandbox.close()


def test_a_sandbox_that_raises_is_a_sandbox_failure_too(real_sandbox):
    closed = crashing_sandbox()
    closed.close()  # a real SandboxError on every run
    with pytest.raises(SandboxFailure, match="closed") as caught:
        run_program(closed, "print(1)")
    assert caught.value.kind == "sandbox" and caught.value.attempts == SANDBOX_ATTEMPTS

    class Unavailable(FailingSandbox):
        def run(self, source, **kwargs):
            raise sandboxes.SandboxUnavailable("bubblewrap not found")

    with pytest.raises(SandboxFailure, match="bubblewrap not found") as caught:
        run_program(Unavailable(real_sandbox), "print(1)")
    assert caught.value.kind == "sandbox_unavailable" and caught.value.attempts == 1


def test_attempts_are_bounded_and_checked(real_sandbox):
    faulty = FailingSandbox(real_sandbox)
    faulty.down = True
    with pytest.raises(SandboxFailure):
        run_program(faulty, "print(1)", attempts=3)
    assert faulty.runs == 3
    with pytest.raises(ValueError, match="attempts"):
        run_program(faulty, "print(1)", attempts=0)
    # The program's own failures are results, never retried.
    faulty.down = False
    result = run_program(faulty, "raise SystemExit(3)", limits=Limits(time_s=2))
    assert result.exit_code == 3 and faulty.runs == 4
    assert code_verifier.compile_error("def f(:") is not None  # a syntax error needs no sandbox
    report = judge_function(faulty, "def f(:", ["assert f()"])
    assert not report.compiled and faulty.runs == 4
