"""Self-play training on games: SPIRAL's role-conditioned advantages, fixed opponents in the
rollout, and a tiny model that learns Kuhn Poker against a random opponent on CPU."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("pyspiel", reason="open_spiel is not installed (pip install 'llm-envs[games]')")

import llm_envs  # noqa: E402
from llm_envs.agents import RandomAgent  # noqa: E402
from llm_trainers.agents.hf import HFEngine, SamplingParams  # noqa: E402
from llm_trainers.algorithms.advantages import (  # noqa: E402
    compute_advantages,
    role_conditioned_advantages,
    trajectory_returns,
)
from llm_trainers.config import load_config  # noqa: E402
from llm_trainers.policies import build_policies  # noqa: E402
from llm_trainers.rollout import collect  # noqa: E402


def test_trajectory_returns_sum_each_agents_rewards_in_its_episode():
    rewards = torch.tensor([0.0, 0.0, 1.0, -1.0, 2.0])
    keys = [("e1", "p0"), ("e1", "p1"), ("e1", "p0"), ("e1", "p1"), ("e2", "p0")]
    assert trajectory_returns(rewards, keys).tolist() == [1.0, -1.0, 1.0, -1.0, 2.0]


def test_rae_follows_spirals_update_then_subtract():
    returns = torch.tensor([1.0, 1.0, -1.0, 1.0, -1.0])
    trajectories = ["t1", "t1", "t2", "t3", "t4"]
    roles = ["ttt|player_0", "ttt|player_0", "ttt|player_1", "ttt|player_0", "ttt|player_1"]
    adv, baselines = role_conditioned_advantages(returns, trajectories, roles, {"ttt|player_0": 0.5}, decay=0.9)
    b0_t1 = 0.9 * 0.5 + 0.1 * 1.0          # 0.55
    b1_t2 = 0.1 * -1.0                     # -0.1
    b0_t3 = 0.9 * b0_t1 + 0.1 * 1.0        # 0.595
    b1_t4 = 0.9 * b1_t2 + 0.1 * -1.0       # -0.19
    expected = [1 - b0_t1, 1 - b0_t1, -1 - b1_t2, 1 - b0_t3, -1 - b1_t4]
    assert adv.tolist() == pytest.approx(expected)
    assert baselines == pytest.approx({"ttt|player_0": b0_t3, "ttt|player_1": b1_t4})
    with pytest.raises(ValueError, match="decay"):
        role_conditioned_advantages(returns, trajectories, roles, {}, decay=1.0)


def test_rae_estimator_tiles_over_tokens_and_keeps_its_baselines():
    rewards = torch.tensor([0.0, 2.0, -2.0])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1]], dtype=torch.float32)
    baselines: dict = {}
    adv = compute_advantages(
        "rae", rewards, mask, ["g"] * 3, roles=["kuhn|p0", "kuhn|p0", "kuhn|p1"],
        trajectories=[("e", "p0"), ("e", "p0"), ("e", "p1")], role_baselines=baselines, rae_decay=0.5,
    )
    assert baselines == {"kuhn|p0": 1.0, "kuhn|p1": -1.0}  # updated in place: 0.5*0 + 0.5*(±2)
    assert adv.tolist() == [[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [-1.0, -1.0, -1.0]]
    with pytest.raises(ValueError, match="rae needs"):
        compute_advantages("rae", rewards, mask, ["g"] * 3)


def test_config_checks_rae_and_opponents():
    with pytest.raises(ValueError, match="rae uses whole-game returns"):
        load_config(None, ["algorithm.estimator=rae", "rollout.tree=true"])
    cfg = load_config("kuhn_poker_vs_random_cpu")
    assert cfg.env.opponents == {"player_1": "random"} and cfg.algorithm.estimator == "rae"
    for name in ("tictactoe_selfplay_rae", "kuhn_poker_selfplay_rae", "simple_negotiation_selfplay_rae"):
        shipped = load_config(name)
        assert shipped.algorithm.estimator == "rae" and shipped.model.level == "L1" and not shipped.env.opponents


@pytest.mark.parametrize("tree", [False, True])
def test_a_fixed_opponent_plays_its_seat_and_is_never_trained(tiny_model_dir, tree):
    policies = build_policies("L1", ["player_0"], tiny_model_dir, device="cpu")
    engine = HFEngine(policies, SamplingParams(temperature=1.0, max_new_tokens=2), seed=0)
    envs = [llm_envs.make("llm/KuhnPoker-v0", invalid_move="random") for _ in range(4)]
    opponent = RandomAgent(0, per_decision_seed=True)
    result = collect(envs, [0, 1, 2, 3], engine, {"player_0": "shared"}, k=2 if tree else 1, tree=tree,
                     opponents={"player_1": opponent})
    assert result.records and {r.agent for r in result.records} == {"player_0"}
    assert all(r.policy == "shared" for r in result.records)
    for env in result.envs:
        assert env.episode_over
        played = [r for r in env.records if r.agent == "player_1"]
        assert played and all(r.format_ok for r in played)  # the random agent's legal moves
    chosen = [r for r in result.records if r.chosen]
    assert len(chosen) == sum(1 for env in result.envs for r in env.records if r.agent == "player_0")


@pytest.mark.slow
def test_tiny_model_learns_kuhn_poker_against_a_random_opponent(tmp_path):
    """The shipped CPU testbed: returns go from forfeits (about -2) to at least uniform legal
    play against the random opponent (+0.125 in expectation), measured on 200 fixed hands."""
    from llm_trainers.trainer import Trainer

    cfg = load_config("kuhn_poker_vs_random_cpu", [
        f"run.output_dir={tmp_path}", "run.progress=false", "run.tensorboard=false", "run.eval_every=0",
        "run.eval_at_start=false", "run.save_every=-1", "run.export_final=false", "run.seed=0",
    ])
    trainer = Trainer(cfg)
    assert trainer.learning_agents == ["player_0"] and list(trainer.opponents) == ["player_1"]
    start = trainer.evaluate()
    final = trainer.train()
    r0, r1 = start["eval/reward/player_0"], final["eval/reward/player_0"]
    print(f"kuhn vs random: return {r0:.3f} -> {r1:.3f}; format {start['eval/format_ok']:.2f} -> "
          f"{final['eval/format_ok']:.2f}; baselines {trainer.role_baselines}")
    assert r0 < -1.5, "the untrained model should mostly forfeit"
    assert r1 >= 0.15 and r1 >= r0 + 1.5, f"return {r0:.3f} -> {r1:.3f}"
    assert set(trainer.role_baselines) == {"llm/KuhnPoker-v0|player_0"}
    trainer.save()
    resumed = Trainer(cfg, resume=True)
    assert resumed.role_baselines == trainer.role_baselines
    trainer.close()
    resumed.close()


def test_an_opponent_without_an_action_stops_the_rollout_and_ray_groups_refuse_opponents(tiny_model_dir):
    from llm_envs.agents.base import AgentError, AgentOutput
    from llm_trainers.rollout import EnvGroup

    class ServerDown(RandomAgent):
        def act_batch(self, requests):
            return [AgentOutput(text="", error="connection refused", meta={"error_kind": "connection"})
                    for _ in requests]

    policies = build_policies("L1", ["player_0"], tiny_model_dir, device="cpu")
    engine = HFEngine(policies, SamplingParams(temperature=1.0, max_new_tokens=2), seed=0)
    envs = [llm_envs.make("llm/KuhnPoker-v0", invalid_move="random") for _ in range(2)]
    with pytest.raises(AgentError, match="connection refused"):  # never played as an empty move
        collect(envs, [0, 1], engine, {"player_0": "shared"}, opponents={"player_1": ServerDown(0)})

    class Elsewhere(EnvGroup):  # a group whose instances live in other processes (as on Ray)
        def reset(self, seeds, options):
            return []

    with pytest.raises(ValueError, match="fixed opponents need the environments in this process"):
        collect(Elsewhere(), [], engine, {"player_0": "shared"}, opponents={"player_1": RandomAgent(0)})
