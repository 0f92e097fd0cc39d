"""Every shipped config trains end to end: one step on CPU with a tiny model in place of Qwen.

The shipped configs name hub models, hub datasets and the vLLM engine, none of which exist
here. This test keeps everything else of each config (environment and its options, level,
estimator, tree sampling, loss settings, policy map) and swaps in only what a CPU machine
without internet needs: a tiny random-weight model built from the environment's own texts, the
HF engine, the offline task sources (HumanEval for APPS, the arithmetic generator for GSM8K), and
small sizes. One full step must run (rollout, rewards, advantages, update of every policy,
export), so a config that drifts from the code fails here rather than on a user's GPU.
"""

from __future__ import annotations

import json
import math

import pytest

from llm_trainers.config import load_config, shipped_configs
from llm_trainers.tiny import build_tiny_model, env_corpus
from llm_trainers.trainer import Trainer

#: Hub task source -> the offline source that stands in for it (same problem style).
OFFLINE_TASKS = {"apps": "humaneval", "gsm8k": "arithmetic"}

_TINY_MODELS: dict[str, str] = {}


def _offline(kwargs: dict) -> dict:
    task = kwargs.get("task")
    return {**kwargs, "task": OFFLINE_TASKS[task]} if task in OFFLINE_TASKS else dict(kwargs)


def _tiny_model(env_id: str, env_kwargs: dict, root) -> str:
    """One tiny model per environment for the whole session (building one is most of the cost)."""
    if env_id not in _TINY_MODELS:
        # Paths in a config are relative to the run ("{output_dir}/..."); keep these in tmp too.
        local = {k: v.replace("{output_dir}", str(root)) if isinstance(v, str) else v
                 for k, v in env_kwargs.items()}
        texts = env_corpus(env_id, episodes=12, **local)
        path = root / env_id.replace("/", "_")
        build_tiny_model(path, texts)
        _TINY_MODELS[env_id] = str(path)
    return _TINY_MODELS[env_id]


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny_models")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(shipped_configs()))
def test_shipped_config_runs_one_training_step(name, tmp_path, models_dir):
    shipped = load_config(name)
    env_kwargs = _offline(shipped.env.kwargs)
    overrides = [
        f"model.path={_tiny_model(shipped.env.id, env_kwargs, models_dir)}",
        "model.device=cpu",
        "model.dtype=float32",
        "model.paths={}",
        "rollout.engine=hf",
        "rollout.max_new_tokens=8",
        "env.num_envs=2",
        f"env.kwargs={json.dumps(env_kwargs)}",
        f"env.eval_kwargs={json.dumps(_offline(shipped.env.eval_kwargs))}",
        "run.steps=1",
        "run.eval_every=0",
        "run.eval_episodes=2",
        "run.eval_at_start=false",
        "run.save_every=-1",
        "run.progress=false",
        "run.tensorboard=false",
        f"run.output_dir={tmp_path}",
        "train.micro_batch_size=4",
        "train.num_mini_batches=1",
        "train.bf16=false",
        "resources={}",  # the single-process layout (tests/distributed runs the Ray layouts)
    ]
    if shipped.rollout.tree:
        overrides.append("rollout.k=2")
    cfg = load_config(name, overrides)
    # Only the sizes, the model and the data source changed: the algorithm is the shipped one.
    assert (cfg.model.level, cfg.algorithm.estimator, cfg.rollout.tree) == (
        shipped.model.level, shipped.algorithm.estimator, shipped.rollout.tree)
    assert cfg.model.lora == shipped.model.lora and cfg.model.policy_map == shipped.model.policy_map

    trainer = Trainer(cfg)
    try:
        trainer.train()
        policies = sorted(trainer.policies.names())
    finally:
        trainer.close()
    [row] = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
             if json.loads(line).get("step") == 1]
    for policy in policies:
        if row[f"train/{policy}/skipped_zero_advantage"] == 1.0:
            # Its records arrived, every advantage was 0 (a tiny random model often earns the
            # same reward on every candidate) and the loss has no other term: no update to run.
            continue
        assert row[f"train/{policy}/samples"] > 0, f"{name}: policy {policy} got no training data"
        assert math.isfinite(row[f"train/{policy}/loss"]), f"{name}: {policy} loss is not finite"
    skipped = all(row[f"train/{policy}/skipped_zero_advantage"] == 1.0 for policy in policies)
    assert row["rollout/trained_records"] > 0 or skipped
    exported = json.loads((tmp_path / "final" / "policies.json").read_text())
    assert exported["level"] == cfg.model.level and set(exported["policies"]) == set(policies)
