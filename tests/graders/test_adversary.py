"""The bounded adversary (llm_envs.audit.adversary) and the reward contract of `llm-envs audit`.

Each test plays a strategy against an environment with a known hole (a third party's test
environment, or ours in a configuration issue 30 attacked) and checks that the contract says
``paid`` or ``out of bounds`` with the numbers; and the same strategies against an environment
without the hole say ``held``.
"""

from __future__ import annotations

import json

import pytest

from llm_envs.audit.adversary import (
    QUICK,
    STRATEGIES,
    check_contract,
    perturb,
    sokoban_shuttle_plan,
    strategies_for,
    strategy_by_name,
    summarize_contract,
)
from llm_envs.cli import main
from tests.envs.helpers import registered_for_a_test
from tests.graders.lenient_env import LenientEnv


@pytest.fixture
def lenient_id():
    yield from registered_for_a_test(
        "llm/TestLenientContract-v0", "tests.graders.lenient_env:LenientEnv", ["solver"], "sums", "a lenient grader"
    )


def test_perturb_changes_exactly_the_last_digit():
    assert perturb("\\boxed{90}") == "\\boxed{91}"
    assert perturb("[[4,3],[2,9]]") == "[[4,3],[2,0]]"
    assert perturb("#### U R D") is None


def test_a_stall_that_pays_is_caught_with_its_numbers():
    env = LenientEnv(stall_pays=True)
    outcomes = check_contract(env, env_id="lenient", seeds=(0,), strategies=[strategy_by_name("stall-random-3")])
    [outcome] = outcomes
    # three wrong turns at 0.6 each = 1.8 against 1.0 for the right answer at once
    assert outcome.verdict == "paid"
    assert outcome.returns["solver"] == pytest.approx(1.8)
    assert outcome.reference_returns["solver"] == pytest.approx(1.0)
    assert "lenient seed 0 strategy stall-random-3 (as solver): solver return 1.8 > reference return 1" in outcome.detail


def test_the_same_strategies_are_held_where_nothing_pays_but_solving():
    env = LenientEnv(strict=True)
    outcomes = check_contract(env, env_id="lenient", seeds=(0, 1), strategies=strategies_for(env))
    assert outcomes and {o.verdict for o in outcomes} <= {"held", "n/a"}
    assert any(o.verdict == "held" for o in outcomes)


def test_rewards_outside_the_declared_bounds_are_reported():
    class Tight(LenientEnv):
        def reward_bounds(self, agent):
            return (0.0, 0.5)  # the right answer earns 1.0

    outcomes = check_contract(Tight(strict=True), env_id="tight", seeds=(0,), strategies=[strategy_by_name("stall-empty")])
    reference = [o for o in outcomes if o.strategy == "reference"]
    assert reference and reference[0].verdict == "out of bounds"
    assert "earned 1, outside the declared bounds [0, 0.5]" in reference[0].detail


def test_an_injection_read_as_a_score_is_paid_beyond_its_plain_twin():
    class Gullible(LenientEnv):
        """Pays the first <score> it sees in the answer (a judge reading injected text)."""

        def _apply_action(self, agent, action):
            import re

            record = self._add_record(agent, action)
            match = re.search(r"<score>(\d+)</score>", action)
            self._credit(record, "judge", min(int(match.group(1)), 10) / 10 if match else 0.0)
            self._end_episode()
            return None

        def reference_action(self, agent):
            return "<score>1</score>"

    outcomes = check_contract(Gullible(), env_id="gullible", seeds=(0,), strategies=strategies_for(Gullible(), ["inject-random"]))
    injected = [o for o in outcomes if o.strategy == "inject-random"]
    assert injected[0].verdict == "paid"
    assert "without the injected text (inject-random-low)" in injected[0].detail


def test_an_episode_that_never_ends_is_paid():
    class Endless(LenientEnv):
        def _apply_action(self, agent, action):
            record = self._add_record(agent, action)
            self._credit(record, "step", 0.0)
            if action == self.reference_action(agent):
                self._end_episode()
                return None
            return "solver"

    outcomes = check_contract(Endless(), env_id="endless", seeds=(0,), strategies=[strategy_by_name("stall-empty")])
    stalled = [o for o in outcomes if o.strategy == "stall-empty"]
    assert stalled[0].verdict == "paid" and "did not end within" in stalled[0].detail


def test_sokoban_shuttle_farms_a_two_box_level():
    """The shuttle of issue 30: on a two-box level the plan pushes a box on and off a target;
    the strategy finds it from the level alone."""
    import llm_envs
    from llm_envs.envs.sokoban import rules

    env = llm_envs.make("llm/Sokoban-v0", num_boxes=2)
    env.reset(seed=0)
    plan = sokoban_shuttle_plan(env.puzzle_state, cycles=3)
    assert plan is not None
    state, ons, offs = env.puzzle_state, 0, 0
    for direction in plan:
        state, _, pushed = rules.move(state, direction)
        if pushed:
            ons += pushed[1] in state.room.targets and pushed[0] not in state.room.targets
            offs += pushed[0] in state.room.targets and pushed[1] not in state.room.targets
        assert not rules.is_solved(state)
    assert ons >= 3 and offs >= 3
    one_box = llm_envs.make("llm/Sokoban-v0")
    one_box.reset(seed=0)
    assert sokoban_shuttle_plan(one_box.puzzle_state) is None  # a box on the target solves the level


def test_catalogue_of_strategies_is_well_formed():
    names = [s.name for s in STRATEGIES]
    assert len(names) == len(set(names))
    for s in STRATEGIES:
        assert s.family in ("random", "stall", "farm", "hedge", "inject", "collude")
        assert s.plain is None or s.plain in names
    assert set(QUICK) <= set(names)


def _run(capsys, *argv):
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_audit_runs_the_contract_on_a_third_party_environment(capsys, lenient_id):
    status, out, err = _run(capsys, "audit", lenient_id, "--only", "contract", "--env-arg", "stall_pays=true",
                            "--strategy", "stall-random-3", "-v")
    assert status == 1
    assert "PAID stall-random-3 (solver)" in out and "solver return 1.8 > reference return 1" in out
    assert "stall-random-3 (solver, seed 0)" in err  # progress, one line per outcome
    assert "declares no reward bounds" in out


def test_audit_exits_non_zero_when_nothing_was_graded(capsys, lenient_id):
    """issue 34: a grader that always fails leaves every row n/a; a CI gate must not pass."""
    status, out, _ = _run(capsys, "audit", lenient_id, "--env-arg", "broken=true", "--quick")
    assert status == 3, out
    assert "the exploit catalogue graded nothing" in out and "the reward contract graded nothing" in out
    status, out, _ = _run(capsys, "audit", lenient_id, "--env-arg", "broken=true", "--json", "--quick")
    report = json.loads(out)
    assert status == 3 and report["graded"] is False


def test_audit_contract_json_lists_rows(capsys, lenient_id):
    status, out, _ = _run(capsys, "audit", lenient_id, "--env-arg", "strict=true", "--json", "--quick")
    report = json.loads(out)
    assert status == 0 and report["graded"] and report["contract"]["breached"] == 0
    rows = summarize_contract([])
    assert rows == []
    assert {r["strategy"] for r in report["contract"]["rows"]} >= {"stall-empty", "inject-random"}


# ---------------------------------------------------------------------------------------------
# the `handle` family of the exploit catalogue (issue 30: opaque values are truthy, a
# StopIteration ends a test's iteration early)


def _coder_tester_on(problem):
    from llm_envs.envs.coder_tester.env import CoderTesterEnv
    from tests.envs.helpers import ListSource

    return CoderTesterEnv(task_source=ListSource([problem]), max_turns=1)


def test_a_falsy_handle_is_not_paid_by_bare_truth_tests():
    """HumanEval/52 tests ``assert candidate(...)`` and ``assert not candidate(...)``: a
    falsy object that crosses as a handle must fail the first kind as False does."""
    from llm_envs.audit import by_name, play_exploit
    from llm_envs.tasks.humaneval import load_humaneval_problems

    problem = load_humaneval_problems()[52]
    outcome = play_exploit(_coder_tester_on(problem), "coder", by_name("falsy-handle"), 0)
    assert outcome.verdict == "held", (
        f"falsy-handle is paid on CoderTester HumanEval/52: {outcome.exploit_reward} vs plain wrong "
        f"{outcome.plain_wrong_reward} ({outcome.detail})"
    )


def test_a_stop_iteration_does_not_end_a_tests_iteration_as_a_pass():
    from llm_envs.audit import by_name, play_exploit
    from llm_envs.tasks import Problem

    problem = Problem(
        id="toy/square", prompt="def square(x):\n    '''x squared'''\n", split="train",
        solution="def square(x):\n    return x * x\n",
        tests=(
            "candidate = square\nassert all(map(lambda x: candidate(x) == x * x, [1, 2, 3]))",
            "candidate = square\nassert candidate(2) == 4",
        ),
        style="function", entry_point="square",
    )
    outcome = play_exploit(_coder_tester_on(problem), "coder", by_name("stop-iteration"), 0)
    assert outcome.verdict == "held", (
        f"stop-iteration is paid on a map() test: {outcome.exploit_reward} vs plain wrong "
        f"{outcome.plain_wrong_reward} ({outcome.detail})"
    )


def test_an_environment_without_reference_agents_is_not_graded():
    class NoReference(LenientEnv):
        def reference_action(self, agent):
            raise NotImplementedError("no reference agent")

    outcomes = check_contract(NoReference(), env_id="noref", seeds=(0,), strategies=[strategy_by_name("random")])
    assert [o.verdict for o in outcomes] == ["n/a"] and "no reference agent" in outcomes[0].detail
