"""Rollouts: tree-structured sampling (AT-GRPO) and flat sampling, token-in/token-out records."""

from __future__ import annotations

from collections import defaultdict

import pytest

import llm_envs
from llm_trainers.agents.hf import HFEngine, SamplingParams
from llm_trainers.policies import build_policies
from llm_trainers.rollout import collect


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    ps = build_policies("L1", ["speaker", "listener"], tiny_model_dir, device="cpu")
    return HFEngine(ps, SamplingParams(temperature=1.0, max_new_tokens=4), seed=0)


def _envs(n, **kw):
    return [llm_envs.make("llm/Signalling-v0", **kw) for _ in range(n)]


def test_tree_groups_share_identical_prompts_and_observations(engine):
    envs = _envs(6, rounds=2)
    res = collect(envs, seeds=range(6), engine=engine, policy_of={"speaker": "shared", "listener": "shared"}, k=4, tree=True)
    groups = defaultdict(list)
    for r in res.records:
        groups[r.group].append(r)
    # 6 episodes x 2 rounds x 2 agents decision points, each a group of exactly k = 4
    assert len(groups) == 6 * 2 * 2
    assert all(len(g) == 4 for g in groups.values())
    for members in groups.values():
        assert len({tuple(m.prompt_ids) for m in members}) == 1
        assert len({(m.slot, m.agent, m.turn, m.index) for m in members}) == 1
        assert sum(m.chosen for m in members) == 1
        best = max(m.reward for m in members)
        assert next(m for m in members if m.chosen).reward == best
        assert [m.candidate for m in members] == [0, 1, 2, 3]
    # the episode continued from the chosen candidate: the final env holds its action
    for r in res.records:
        if r.chosen:
            env_rec = res.envs[r.slot].records[r.index]
            assert env_rec.action == r.text
            assert r.final_reward == env_rec.reward
            # the prompt the env stored for the action is the observation we tokenised
            assert engine.encode("shared", env_rec.observation) == r.prompt_ids
        else:
            assert r.final_reward is None


def test_tree_later_agents_get_their_own_comparison(engine):
    """The listener's candidates are scored on clones of the state the chosen speaker produced."""
    envs = _envs(16)
    res = collect(envs, seeds=range(16), engine=engine, policy_of=lambda a: "shared", k=4, tree=True)
    listener = defaultdict(list)
    for r in res.records:
        if r.agent == "listener":
            listener[r.group].append(r)
    # with a random model at least one listener group must see different rewards
    assert any(len({m.reward for m in g}) > 1 for g in listener.values())
    for g in listener.values():
        chosen_speaker = next(r for r in res.records if r.chosen and r.agent == "speaker" and r.slot == g[0].slot)
        listener_obs = res.envs[g[0].slot].records[g[0].index].observation
        assert listener_obs["prompt"] == f"Message: {chosen_speaker.text}"
        assert engine.encode("shared", listener_obs) == g[0].prompt_ids


def test_records_are_token_in_token_out(engine):
    tok = engine.policies["shared"].tokenizer
    envs = _envs(4)
    res = collect(envs, seeds=range(4), engine=engine, policy_of=lambda a: "shared", k=3, tree=True)
    for r in res.records:
        assert r.completion_ids and len(r.logprobs) == len(r.completion_ids)
        assert tok.decode(r.completion_ids, skip_special_tokens=True) == r.text
        assert r.policy == "shared" and r.role == r.agent


def test_flat_rollout_reads_final_rewards_with_delayed_credit(engine):
    envs = _envs(8)
    res = collect(envs, seeds=[0, 0, 1, 1, 2, 2, 3, 3], engine=engine, policy_of=lambda a: "shared")
    assert len(res.records) == 16
    for r in res.records:
        env_rec = res.envs[r.slot].records[r.index]
        assert r.reward == env_rec.reward == r.final_reward
        if r.agent == "speaker":  # team credit arrived after the speaker acted
            assert r.reward == env_rec.reward_components["local"] + env_rec.reward_components["team"]
    # the same seed gives the same group key (REINFORCE++-baseline groups repeats of a problem)
    keys = [r.group for r in res.records if r.agent == "speaker"]
    assert keys[0] == keys[1] and keys[0] != keys[2]
    for ep, env in zip(res.episodes, res.envs):
        assert ep["success"] == env.episode_metrics()["success"]
        assert ep["reward/speaker"] == env.agent_rewards()["speaker"]


def test_flat_rejects_k_and_max_decisions_cuts(engine):
    with pytest.raises(ValueError):
        collect(_envs(1), [0], engine, lambda a: "shared", k=4, tree=False)
    res = collect(_envs(2, rounds=3), [0, 1], engine, lambda a: "shared", max_decisions=2)
    assert all(ep["truncated"] == 1.0 for ep in res.episodes)
    assert len(res.records) == 4


def test_spawned_instances_share_resources_and_keep_committing():
    """Instances are clones of the first (shared pool); a clone made to be an instance, and a
    chosen tree branch, commit to the Proposer-Solver-Judge pool like the original."""
    from llm_trainers.rollout import _promote, spawn_envs

    first = llm_envs.make("llm/ProposerSolverJudge-v0")
    envs = spawn_envs(first, 3)
    assert all(e.pool is first.pool for e in envs)
    assert all(e.commits_to_pool for e in envs)
    branch = first.clone()
    assert branch.commits_to_pool is False  # the env's own rule for branches
    assert _promote(branch, first).commits_to_pool is True
    # environments without the notion are left alone
    sig = llm_envs.make("llm/Signalling-v0")
    assert _promote(sig.clone(), sig) is not None


_NUMBERS = iter(range(100, 10**6))


def _psj_questions(policy, obs, count, numbers=_NUMBERS):
    number = next(numbers)  # a new question at every request
    return {"proposer": f"<question>What is {number} + 3?</question>", "judge": "<score>10</score>",
            "solver": f"<answer>{number + 3}</answer>"}[policy]


@pytest.mark.parametrize(("tree", "k"), [(False, 1), (True, 2)])
def test_every_episodes_admitted_question_joins_the_pool_under_either_sampling(tree, k):
    # The step that ends an episode ran on a tree branch, which does not commit, and the
    # chosen branch was promoted after it: tree sampling (the default) grew no pool.
    from llm_trainers.rollout import spawn_envs
    from llm_trainers.scripted import ScriptedEngine

    first = llm_envs.make("llm/ProposerSolverJudge-v0", reference_probability=0.0)
    envs = spawn_envs(first, 4)
    before = len(first.pool)
    res = collect(envs, [1, 2, 3, 4], ScriptedEngine(_psj_questions), lambda a: a, k=k, tree=tree)
    assert all(e.episode_over and e.quality == 1.0 for e in res.envs)
    assert len(first.pool) == before + 4 and not any(e.staged for e in res.envs)


def test_the_pool_grows_in_slot_order_whatever_the_env_threads(monkeypatch):
    # From worker threads the questions joined in the order the steps finished: the pool's order,
    # and so the next step's draws, depended on thread timing.
    import time
    import zlib

    from llm_envs.envs.proposer_solver_judge.env import ProposerSolverJudgeEnv
    from llm_trainers.rollout import spawn_envs
    from llm_trainers.scripted import ScriptedEngine

    commit = ProposerSolverJudgeEnv.commit_pool_additions

    def uneven(self):  # steps that take uneven times, as checking answers does
        time.sleep((zlib.crc32((self.question or "").encode()) % 7) * 0.003)
        return commit(self)

    monkeypatch.setattr(ProposerSolverJudgeEnv, "commit_pool_additions", uneven)

    def pool_after(workers):
        numbers = iter(range(100, 10**6))
        first = llm_envs.make("llm/ProposerSolverJudge-v0", reference_probability=1.0, num_solver_samples=1,
                              pool_seed_size=4)
        envs = spawn_envs(first, 16)
        collect(envs, list(range(16)), ScriptedEngine(lambda p, o, c: _psj_questions(p, o, c, numbers)),
                lambda a: a, env_workers=workers)
        return [e.question for e in first.pool.entries()]

    assert pool_after(8) == pool_after(1)


@pytest.mark.parametrize("tree", [True, False])
def test_threaded_env_stepping_gives_the_same_records(engine, tree):
    def run(workers):
        eng = engine.view(seed=5)
        res = collect(_envs(6, rounds=2), range(6), eng, lambda a: "shared", k=4 if tree else 1, tree=tree,
                      env_workers=workers)
        return [(r.group, r.text, r.reward, r.final_reward, r.chosen) for r in res.records]

    assert run(1) == run(4)
