"""The examples' core run against real MARL libraries (Tianshou, TorchRL, SuperSuit, RLlib).

Each library is optional (the ``interop`` extra); a missing one skips its tests with the reason.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import llm_envs
from llm_envs.interop import CharEncoder, NumericView
from tests.interop.toy_envs import CorridorEnv, GuessEnv, SumsTaskSource

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


def _need(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install 'llm-envs[interop]')")


# ------------------------------------------------------------------------------ Tianshou
@pytest.mark.parametrize(
    "env_id, kwargs",
    [("llm/Signalling-v0", {"rounds": 2}), ("llm/PlanPath-v0", {"agents": "single", "max_turns": 6})],
)
def test_tianshou_training_stores_legal_moves_over_the_state_tensor(env_id, kwargs):
    """A short run of the example's DQN: every stored move was legal under the stored mask, and
    the stored observations are the environment's state tensors."""
    _need("tianshou")
    import tianshou_train

    make = lambda: tianshou_train.make_env(env_id, **kwargs)  # noqa: E731
    config = tianshou_train.TrainConfig(steps=64, num_envs=2, batch_size=16)
    algorithm, _ = tianshou_train.train(make, config)
    n_agents = len(llm_envs.entry(env_id).agents) if kwargs.get("agents") != "single" else 1
    assert len(algorithm.policy.policies) == n_agents
    state_shape = make().env.unwrapped.state_space().shape
    evaluation = tianshou_train.play(make, tianshou_train.greedy(algorithm), episodes=3, seed=0)
    assert evaluation.success.shape == (3,) and np.isfinite(evaluation.returns).all()
    buffer = tianshou_train.VectorReplayBuffer(200, 1)
    collector = tianshou_train.Collector(algorithm.policy, tianshou_train.DummyVectorEnv([make]), buffer)
    collector.reset()
    tianshou_train.set_exploration(algorithm, 1.0)  # random legal moves, through the policy
    collector.collect(n_episode=4)
    stored = buffer[buffer.sample_indices(0)]
    assert all(mask[action] for mask, action in zip(stored.obs.mask, stored.act))
    assert stored.obs.obs.shape[1:] == state_shape and stored.obs.obs.max() == 1.0


def test_tianshou_rewards_match_the_text_environment():
    _need("tianshou")
    from tianshou.env import PettingZooEnv

    env = PettingZooEnv(NumericView(CorridorEnv()))
    rng = np.random.default_rng(1)
    for seed in range(3):
        observation, _ = env.reset(seed=seed)
        totals = np.zeros(2)
        done = False
        while not done:
            action = int(rng.choice(np.flatnonzero(observation["mask"])))
            observation, rewards, terminated, truncated, _ = env.step(action)
            totals += rewards
            done = terminated or truncated
        text_env = env.env.unwrapped
        assert totals.tolist() == pytest.approx([text_env.agent_rewards()[a] for a in env.agents])


# ------------------------------------------------------------------------------ TorchRL
def test_torchrl_aec_rollout_respects_masks_and_carries_the_text():
    _need("torchrl")
    import torchrl_train

    encoder = CharEncoder()
    view = NumericView(llm_envs.make("llm/Signalling-v0", rounds=2), obs_length=256, encoder=encoder)
    env = torchrl_train.wrap(view, seed=0)
    data = torchrl_train.random_rollout(env, 16)
    assert data.batch_size == (16,)
    for group in ("speaker", "listener"):
        acting = data[group, "mask"].squeeze(-1)
        actions = data[group, "action"].squeeze(-1)
        masks = data[group, "action_mask"].squeeze(1)
        assert acting.any()
        assert all(masks[i, actions[i]] for i in range(16) if acting[i])
        tokens = data[group, "observation", "observation"][0, 0].numpy()
        assert "Round 1 of 2" in encoder.decode(tokens)  # the real text, not TorchRL's placeholder
    assert data["next", "done"].any()  # at least one episode ended inside the rollout


def test_torchrl_parallel_rollout_with_text_actions():
    _need("torchrl")
    import torchrl_train

    view = NumericView(
        llm_envs.make("llm/Debate-v0", task_source=SumsTaskSource(), num_turns=2),
        actions="text",
        action_length=8,
        obs_length=256,
    )
    env = torchrl_train.wrap(view, parallel=True)
    assert env.group_map == {"agent": ["agent_0", "agent_1"]}
    data = torchrl_train.random_rollout(env, 4)
    assert data["agent", "action"].shape == (4, 2, 8)
    assert data["next", "agent", "reward"].shape == (4, 2, 1)
    records = view.unwrapped.records
    assert records and all(isinstance(r.action, str) and len(r.action) <= 8 for r in records)


def test_torchrl_parallel_rollout_on_a_turn_based_env():
    _need("torchrl")
    import torchrl_train

    env = torchrl_train.wrap(NumericView(CorridorEnv(), obs_length=64), parallel=True)
    data = torchrl_train.random_rollout(env, 12)
    assert set(env.group_map) == {"scout", "walker"}
    assert data["next", "scout", "info", "acting"].shape == (12, 1)


# ------------------------------------------------------------------------------ SuperSuit
def test_supersuit_vector_env_over_the_numeric_view():
    _need("supersuit")
    import supersuit_vector

    vec = supersuit_vector.make_vec_env(lambda: llm_envs.make("llm/Signalling-v0"), copies=2, obs_length=64)
    assert vec.num_envs == 4  # 2 agents x 2 copies
    result = supersuit_vector.run(vec, steps=12)
    assert result["obs_shape"] == (4, 128)  # two stacked frames of 64 ids
    assert result["agent_episode_ends"] > 0
    observations, _ = vec.reset(seed=1)
    assert 0.0 <= observations.min() and observations.max() <= 1.0 and observations.max() > 0
    vec.close()


def test_supersuit_vector_env_over_a_simultaneous_env():
    _need("supersuit")
    import supersuit as ss

    from llm_envs.interop import parallel_env

    par = parallel_env(NumericView(GuessEnv(), actions="text", action_length=2, obs_length=32))
    vec = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(par), 2, num_cpus=0, base_class="gymnasium")
    vec.reset(seed=0)
    for _ in range(4):
        _, rewards, terminations, truncations, _ = vec.step(np.stack([vec.action_space.sample() for _ in range(4)]))
        assert rewards.shape == (4,)
    vec.close()


# ------------------------------------------------------------------------------ RLlib
RLLIB_PYTHON = os.environ.get("LLM_ENVS_RLLIB_PYTHON")


def _rllib_importable() -> bool:
    """Whether RLlib imports here: Ray core alone (the ``ray`` and ``test`` extras) lacks its
    dependencies, so the presence of ``ray`` says nothing about RLlib."""
    if importlib.util.find_spec("ray") is None:
        return False
    try:
        importlib.import_module("ray.rllib")
    except ImportError:
        return False
    return True


RLLIB_HERE = _rllib_importable()


@pytest.mark.skipif(
    not RLLIB_HERE and not RLLIB_PYTHON,
    reason=(
        "ray[rllib]==2.60.0 pins gymnasium==1.2.2, which conflicts with this environment's "
        "gymnasium; install it in its own environment and point LLM_ENVS_RLLIB_PYTHON at that "
        "interpreter to run this test"
    ),
)
def test_rllib_samples_episodes_and_trains_ppo():
    if RLLIB_HERE:
        import rllib_train

        runner = rllib_train.make_runner("llm/Signalling-v0", obs_length=64)
        episodes = rllib_train.sample(runner, 3)
        runner.stop()
        assert len(episodes) >= 3 and all(episode.is_done for episode in episodes)
        algo, curve = rllib_train.train("llm/Signalling-v0", 1, speaker_local_weight=0.0)
        algo.stop()
        assert len(curve) == 1 and 0.0 <= curve[0] <= 2.0  # two agents, team reward 0 or 1 each
        return
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [RLLIB_PYTHON, str(ROOT / "examples" / "rllib_train.py"), "--iterations", "2"],
        capture_output=True, text=True, timeout=600, env=env, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "mean episode return per iteration" in result.stdout, result.stdout


# ------------------------------------------------------------------------------ the scripts
@pytest.mark.parametrize(
    "module, args",
    [
        ("pettingzoo_parallel", ["--env", "llm/Signalling-v0"]),
        ("tianshou_train", ["--steps", "64", "--episodes", "4"]),
        ("torchrl_train", ["--iterations", "2", "--steps-per-iteration", "16", "--eval-steps", "16"]),
        ("torchrl_train", ["--env", "llm/PlanPath-v0", "--parallel", "--actions", "text", "--iterations", "2"]),
        ("supersuit_vector", ["--steps", "4"]),
    ],
)
def test_example_scripts_run(module, args, capsys):
    library = {"tianshou_train": "tianshou", "torchrl_train": "torchrl", "supersuit_vector": "supersuit"}
    _need(library.get(module, "pettingzoo"))
    importlib.import_module(module).main(args)
    assert capsys.readouterr().out.strip()
