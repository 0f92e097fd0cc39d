"""Defaults follow the papers, and the registered environments play with their default task."""

from __future__ import annotations

import pytest

import llm_envs
from llm_envs.agents import ReferenceAgent
from llm_envs.envs.debate.env import DebateConfig
from llm_envs.envs.forum.env import ForumConfig, ForumEnv
from llm_envs.envs.proposer_solver_judge.env import ProposerSolverJudgeConfig
from tests.envs.helpers import agent_policy, play


def test_config_defaults_are_the_papers():
    forum = ForumConfig()
    assert (forum.num_agents, forum.num_rounds, forum.num_evaluations, forum.history_rounds) == (
        4,
        None,
        1,
        2,
    )
    assert (forum.schedule, forum.num_references, forum.evaluation, forum.scoring) == (
        "paper",
        2,
        True,
        True,
    )
    psj = ProposerSolverJudgeConfig()
    assert (psj.reference_probability, psj.num_solver_samples) == (0.5, 5)
    # The threshold lives in the pool (0.7 for the pool an environment builds itself).
    assert psj.quality_threshold is None
    assert llm_envs.make("llm/ProposerSolverJudge-v0", pool_seed_size=1).quality_threshold == 0.7
    assert psj.solver_questions == "pool"  # the solver samples from the filtered pool
    assert (psj.quality_weight, psj.difficulty_weight, psj.format_weight) == (1 / 3, 1 / 3, 1 / 3)
    assert (psj.solver_judge_weight, psj.solver_format_weight) == (0.5, 0.5)
    assert psj.drop_difficulty_below_threshold is False
    debate = DebateConfig()
    assert (debate.num_agents, debate.num_turns, debate.gamma) == (2, 3, 0.3)
    assert (debate.alpha0, debate.alpha1, debate.beta0, debate.beta1) == (0.0, 0.0, 0.0, 0.0)
    assert debate.first_turn_incentive is True


def test_forum_rounds_default_to_twice_the_pool(one_problem_source):
    assert ForumEnv(task_source=one_problem_source).num_rounds == 8
    assert ForumEnv(task_source=one_problem_source, num_agents=3).num_rounds == 6


def test_registry_entries_match_the_classes():
    assert llm_envs.entry("llm/Forum-v0").agents == tuple(f"agent_{k}" for k in range(4))
    assert llm_envs.entry("llm/ProposerSolverJudge-v0").agents == ("proposer", "solver", "judge")
    assert llm_envs.entry("llm/Debate-v0").agents == ("agent_0", "agent_1")


@pytest.mark.parametrize("env_id", ["llm/Forum-v0", "llm/ProposerSolverJudge-v0", "llm/Debate-v0"])
def test_registered_defaults_play_to_success(env_id):
    env = llm_envs.make(env_id)
    assert env.possible_agents == list(llm_envs.entry(env_id).agents)
    for seed in range(2):
        totals = play(env, agent_policy(ReferenceAgent()), seed=seed)
        assert env.episode_metrics()["success"] == 1.0
        assert env.episode_metrics()["ground_truth_known"] == 1.0
        assert totals == pytest.approx(env.agent_rewards())


@pytest.mark.parametrize("env_id", ["llm/Forum-v0", "llm/ProposerSolverJudge-v0"])
def test_success_not_reward_separates_reference_from_random(env_id):
    """docs/evaluation.md ("What separates the reference and random agents"): in these two
    environments the rewards come from the agents' own judgements, so random agents earn about
    the reference's total reward; only the ground-truth success tells them apart."""
    from llm_envs.agents import RandomAgent

    env = llm_envs.make(env_id)
    totals = {}
    success = {}
    for label, agent in (("reference", ReferenceAgent()), ("random", RandomAgent(0))):
        rewards, wins = [], []
        for seed in range(12):
            rewards.append(sum(play(env, agent_policy(agent), seed=seed).values()))
            wins.append(env.episode_metrics()["success"])
        totals[label] = sum(rewards) / len(rewards)
        success[label] = sum(wins) / len(wins)
    assert success == {"reference": 1.0, "random": 0.0}
    assert abs(totals["random"] - totals["reference"]) < 0.3 * abs(totals["reference"])


@pytest.mark.parametrize("env_id", ["llm/Debate-v0", "llm/Forum-v0", "llm/ProposerSolverJudge-v0"])
def test_a_text_limit_below_one_character_is_refused(env_id):
    # (Debate and Forum accepted max_shown_chars=-5 and cut text from the end)
    for value in (0, -5):
        with pytest.raises(ValueError, match="max_shown_chars must be >= 1"):
            llm_envs.make(env_id, max_shown_chars=value)
