"""The reward contract, over the whole registry (issue 30 item 7).

A bounded adversary (:mod:`llm_envs.audit.adversary`: stalling, near misses then solving,
repeating, hedging, injected score text read by a quoting judge, agents colluding, the Sokoban
shuttle) plays every registered environment on a few seeds, each agent in turn and all agents
together. The test asserts that

* every action's reward lies in the bounds the environment declares (``reward_bounds``);
* no strategy earns an agent, or the team, more than the reference agents do on the same seed
  (where the environment says the reference is the ceiling: ``reference_is_ceiling``);
* no injection earns more than the same text carrying the lowest scores instead;
* every episode ends.

A failure names the environment, the seed, the strategy, the agent and both returns. Kept cheap
(one or two seeds, a selection of strategies, shorter episodes where a step runs code in the
sandbox): ``llm-envs audit ENV`` plays the whole list.
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import pytest

import llm_envs
from llm_envs.audit.adversary import GAME_QUICK, QUICK, check_contract, strategies_for
from llm_envs.core.bounds import contains

ENV_IDS = llm_envs.env_ids()

#: Environments whose steps run code in the sandbox: one seed; CoderTester also shorter (two
#: turns: the stall attacks need one wrong turn before the right one, one mutant, four golden
#: tests) and the strategies that reproduce its attacks (no judge reads its text: the exploit
#: catalogue covers its code and tests).
SANDBOXED = {
    "llm/CoderTester-v0": (
        {"max_turns": 2, "max_mutants": 1, "max_golden_tests": 4},
        ("stall-near-miss-first", "collude-near-miss-3"),
    ),
    "llm/ReasonerTool-v0": ({}, QUICK),
    "llm/Sokoban-v0": ({}, QUICK),
    "llm/Sudoku-v0": ({}, QUICK),
    "llm/PlanPath-v0": ({}, QUICK),
}

#: Configurations beside the registered defaults where issue 30 reported a hole, with the
#: strategies that attack it: a two-box Sokoban level (the shuttle), Debate with its page's own
#: incentive example (a wrong start). A configuration the environment refuses (a hole that must
#: be asked for with allow_reward_holes=True) passes.
VARIANTS = {
    "llm/Sokoban-v0": ({"num_boxes": 2, "max_turns": 2}, ("sokoban-shuttle", "sokoban-shuttle-then-solve")),
    "llm/Debate-v0": ({"alpha1": 2.0, "beta0": 2.0}, ("stall-random-first", "stall-near-miss-first", "collude-random-first")),
}


def _plan(env_id: str, env) -> tuple[tuple[int, ...], list]:
    if env_id in SANDBOXED:
        return (0,), strategies_for(env, SANDBOXED[env_id][1])
    if not any(env.reference_is_ceiling(a) for a in [None, *env.possible_agents]):
        return (0,), strategies_for(env, GAME_QUICK)
    return (0, 1), strategies_for(env, QUICK)


def _breaches(env_id: str, env, seeds, strategies) -> list[str]:
    outcomes = check_contract(env, env_id=env_id, seeds=seeds, strategies=strategies)
    assert any(o.verdict != "n/a" for o in outcomes), f"{env_id}: nothing was graded: {outcomes[:2]}"
    return [o.detail for o in outcomes if o.verdict in ("paid", "out of bounds")]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_no_strategy_beats_the_reference_and_rewards_stay_in_bounds(env_id):
    env = llm_envs.make(env_id, **SANDBOXED.get(env_id, ({}, ()))[0])
    seeds, strategies = _plan(env_id, env)
    breaches = _breaches(env_id, env, seeds, strategies)
    assert not breaches, f"{len(breaches)} breach(es) of the reward contract:\n" + "\n".join(breaches)


@pytest.mark.parametrize("env_id", sorted(VARIANTS))
def test_the_configurations_issue_30_attacked(env_id):
    options, names = VARIANTS[env_id]
    try:
        env = llm_envs.make(env_id, **options)
    except (ValueError, TypeError) as error:
        assert "allow_reward_holes" in str(error), f"refused without naming the option: {error}"
        return
    env.reset(seed=0)
    seeds, strategies = (0,), strategies_for(env, names)
    breaches = _breaches(env_id, env, seeds, strategies)
    assert not breaches, f"{len(breaches)} breach(es) of the reward contract:\n" + "\n".join(breaches)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_environment_declares_finite_upper_bounds(env_id):
    env = llm_envs.make(env_id)
    env.reset(seed=0)
    assert env.reward_bounds_declared(), f"{env_id} does not declare reward_bounds()"
    for agent in env.possible_agents:
        low, high = env.reward_bounds(agent)
        assert low <= high and math.isfinite(high), f"{env_id} {agent}: bounds ({low}, {high})"


def test_the_bounds_of_the_docs_pages_we_own_match_the_declarations():
    """docs/envs/signalling.md, openspiel.md and textarena.md state the same bounds as the code
    (the other pages are checked by their environments' own tests)."""
    docs = Path(__file__).resolve().parents[2] / "docs" / "envs"
    signalling = llm_envs.make("llm/Signalling-v0")
    signalling.reset(seed=0)
    text = (docs / "signalling.md").read_text()
    for agent in signalling.possible_agents:
        low, high = signalling.reward_bounds(agent)
        assert re.search(rf"{agent}\W[^\n]*\[{low:g}, {high:g}\]", text), f"signalling.md: {agent} [{low:g}, {high:g}]"
    textarena = llm_envs.make("textarena/TicTacToe-v0")
    textarena.reset(seed=0)
    assert "[-1, 1]" in (docs / "textarena.md").read_text()
    kuhn = llm_envs.make("llm/KuhnPoker-v0")
    kuhn.reset(seed=0)
    low, high = kuhn.reward_bounds("player_0")
    openspiel = (docs / "openspiel.md").read_text()
    assert f"[{low:g}, {high:g}]" in openspiel and "lo − hi + format_penalty" in openspiel
    assert contains((low, high), 0.0)


def _pages_of_registered_envs() -> list[str]:
    docs = Path(__file__).resolve().parents[2] / "docs" / "envs"
    pages = set()
    for entry in llm_envs.list_envs():
        module = entry.entry_point.partition(":")[0]
        source = Path(__file__).resolve().parents[2] / (module.replace(".", "/") + ".py")
        pages.update(re.findall(r"docs/envs/([a-z_]+)\.md", source.read_text(encoding="utf-8")))
    return sorted(str(docs / f"{name}.md") for name in pages)


@pytest.mark.parametrize("page", _pages_of_registered_envs(), ids=lambda p: Path(p).name)
def test_every_environment_page_states_its_reward_bounds(page):
    """Each page states the bounds its environment declares, naming ``reward_bounds`` (the
    numbers themselves are the page's; the pages we own are checked number by number above)."""
    # (A page named by an environment's module but not written yet failed with a raw
    # FileNotFoundError that did not say what to do.)
    assert Path(page).is_file(), (
        f"docs/envs/{Path(page).name} does not exist: write it (a '## Spec' table, a '## Version "
        "history', the reward bounds with `reward_bounds`): docs/architecture.md, How to add an environment"
    )
    text = Path(page).read_text(encoding="utf-8")
    assert "reward_bounds" in text, f"{Path(page).name} does not state the reward bounds (reward_bounds)"
