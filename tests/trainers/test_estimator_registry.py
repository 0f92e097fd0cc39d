"""A new advantage estimator is one registered function: config validation and the trainer find
it by name, with its metadata and its own options, and nothing else changes."""

from __future__ import annotations

import math

import pytest
import torch

from llm_trainers import make_trainer
from llm_trainers.algorithms.advantages import (
    ESTIMATOR_REGISTRY,
    AdvantageBatch,
    broadcast_to_tokens,
    group_ids_from_keys,
    group_mean,
    register_estimator,
)
from llm_trainers.algorithms.losses import KL_ESTIMATOR_REGISTRY, kl_estimate, register_kl_estimator
from llm_trainers.config import load_config

QUIET = ["run.steps=1", "run.eval_every=-1", "run.progress=false", "run.tensorboard=false", "run.export_final=false",
         "run.save_every=-1", "env.num_envs=4", "env.kwargs={rounds: 2}", "rollout.k=2", "rollout.max_new_tokens=2",
         "train.lr=1e-2", "train.max_grad_norm=null"]


@pytest.fixture()
def registry_scope():
    """Registrations made in a test are removed after it."""
    estimators, kls = dict(ESTIMATOR_REGISTRY), dict(KL_ESTIMATOR_REGISTRY)
    yield
    for registry, before in ((ESTIMATOR_REGISTRY, estimators), (KL_ESTIMATOR_REGISTRY, kls)):
        registry.clear()
        registry.update(before)


def _register_rloo(calls: list) -> None:
    @register_estimator("test_rloo", whitens="none", uses=(), options={"scale": 1.0})
    def rloo(batch: AdvantageBatch, cfg, options):
        """Leave-one-out baseline: A_i = R_i − mean of the other rewards of i's group, × scale."""
        ids = group_ids_from_keys(batch.group_keys)
        sizes = torch.bincount(ids).to(torch.float32)[ids]
        mean = group_mean(batch.rewards.to(torch.float32), ids)
        loo = (batch.rewards - mean) * sizes / (sizes - 1).clamp(min=1)
        calls.append((len(batch.rewards), dict(options)))
        return broadcast_to_tokens(loo * options["scale"], batch.mask)


def _trained(cfg):
    trainer = make_trainer(cfg)
    try:
        before = {k: v.clone() for p in trainer.policies for k, v in p.trainable_state_dict().items()}
        metrics = trainer.train_step()
        after = {k: v for p in trainer.policies for k, v in p.trainable_state_dict().items()}
    finally:
        trainer.close()
    moved = any(not torch.equal(before[k], after[k]) for k in before)
    return metrics, moved


def test_a_new_estimator_trains_through_the_normal_config_path(registry_scope, tiny_model_dir, tmp_path):
    calls: list = []
    _register_rloo(calls)
    base = [*QUIET, f"model.path={tiny_model_dir}", "algorithm.estimator=test_rloo"]

    metrics, moved = _trained(load_config(None, [*base, f"run.output_dir={tmp_path / 'a'}"]))
    assert calls and calls[0][1] == {"scale": 1.0}  # called by the trainer, with its default option
    assert calls[0][0] == metrics["rollout/trained_records"] > 0
    assert math.isfinite(metrics["train/shared/loss"]) and moved

    # Its own option reaches it from the config: scale 0 -> every advantage 0 -> no update at all.
    calls.clear()
    metrics, moved = _trained(load_config(None, [*base, "algorithm.estimator_options={scale: 0.0}",
                                                 f"run.output_dir={tmp_path / 'b'}"]))
    assert calls[0][1] == {"scale": 0.0}
    assert metrics["train/shared/skipped_zero_advantage"] == 1.0 and not moved


def test_config_validation_reads_the_registry(registry_scope):
    _register_rloo([])
    with pytest.raises(ValueError, match=r"test_rloo has no option\(s\) \['scal'\]; its options: \['scale'\]"):
        load_config(None, ["algorithm.estimator=test_rloo", "algorithm.estimator_options={scal: 2}"])

    @register_estimator("test_flat_only", sampling="flat", sampling_reason="scores whole episodes")
    def flat_only(batch, cfg, options):
        return torch.zeros_like(batch.mask)

    with pytest.raises(ValueError, match="test_flat_only scores whole episodes: set rollout.tree: false"):
        load_config(None, ["algorithm.estimator=test_flat_only"])
    assert load_config(None, ["algorithm.estimator=test_flat_only", "rollout.tree=false"]).algorithm.estimator
    with pytest.raises(ValueError, match="test_rloo"):  # the error lists what is registered
        load_config(None, ["algorithm.estimator=nope"])
    with pytest.raises(ValueError, match="already registered"):
        register_estimator("at_grpo")(flat_only)
    with pytest.raises(ValueError, match="sampling"):
        register_estimator("test_bad", sampling="trees")


def test_config_refuses_groups_of_one_and_a_kl_coef_nobody_reads():
    # reinforce_pp_baseline subtracts each group's mean: with one record per group every
    # advantage was 0 and nothing trained, without a word.
    with pytest.raises(ValueError, match="env.samples_per_problem >= 2"):
        load_config(None, ["algorithm.estimator=reinforce_pp_baseline", "rollout.tree=false"])
    with pytest.raises(ValueError, match="rollout.k >= 2"):
        load_config(None, ["algorithm.estimator=reinforce_pp_baseline", "rollout.tree=true", "rollout.k=1"])
    assert load_config(None, ["algorithm.estimator=reinforce_pp_baseline", "rollout.tree=false",
                              "env.samples_per_problem=4"]).algorithm.estimator == "reinforce_pp_baseline"
    # kl_coef is the KL in the reward, which at_grpo does not read: a reference model was built
    # and every record scored by it, and the weights were those of kl_coef = 0.
    with pytest.raises(ValueError, match="train.kl_loss_coef"):
        load_config(None, ["algorithm.estimator=at_grpo", "algorithm.kl_coef=0.1"])
    assert load_config(None, ["algorithm.estimator=reinforce_pp", "algorithm.kl_coef=0.1"]).algorithm.kl_coef == 0.1


@pytest.mark.parametrize(("base", "knob"), [
    (["algorithm.estimator=at_grpo"], "algorithm.reward_clip=0.5"),
    (["algorithm.estimator=at_grpo"], "algorithm.gamma=0.5"),
    (["algorithm.estimator=at_grpo"], "algorithm.rae_decay=0.5"),
    (["algorithm.estimator=reinforce_pp", "rollout.tree=false"], "algorithm.unbiased_std=true"),
    (["algorithm.estimator=reinforce_pp", "rollout.tree=false"], "algorithm.eps=0.1"),
    (["algorithm.estimator=rae", "rollout.tree=false"], "algorithm.reward_clip=0.5"),
])
def test_config_refuses_an_algorithm_field_its_estimator_does_not_read(base, knob):
    # Each was accepted and gave the same advantages as the default: a setting that did nothing.
    field = knob.split("=")[0]
    with pytest.raises(ValueError, match=rf"{field} = .* would be ignored"):
        load_config(None, [*base, knob])


def test_what_an_estimator_declares_it_reads_is_what_changes_its_advantages():
    # The refusal above trusts each estimator's `uses`: a field it declares must change its
    # advantages somewhere, and one it does not declare must change nothing.
    import dataclasses

    from llm_trainers.algorithms.advantages import ESTIMATOR_FIELDS, estimate_advantages
    from llm_trainers.config import AlgorithmConfig

    changed = {"eps": 0.5, "unbiased_std": True, "gamma": 0.5, "reward_clip": 0.5, "rae_decay": 0.5}
    rewards = torch.tensor([0.0, 1.0, 10.0, 10.0, 0.0, 3.0])
    mask = torch.ones(6, 3)

    def batch():
        return AdvantageBatch(rewards.clone(), mask, ["g1", "g1", "g1", "g2", "g2", "g2"],
                              [("game", "r1"), ("game", "r1"), ("game", "r2")] * 2, ["a", "b"] * 3,
                              [0, 0, 1, 1, 2, 2], None, {("game", "r1"): 2.0})

    for name, info in ESTIMATOR_REGISTRY.items():
        plain = AlgorithmConfig(estimator=name)
        base = estimate_advantages(plain, batch())
        for key in ESTIMATOR_FIELDS:
            moved = not torch.equal(base, estimate_advantages(dataclasses.replace(plain, **{key: changed[key]}), batch()))
            assert moved == (key in info.uses), f"{name}: {key} {'changes' if moved else 'does not change'} it"


def test_estimator_option_values_must_have_their_defaults_type():
    # A quoted "false" was read as bool("false"), true; a word where a number goes failed mid-run.
    with pytest.raises(ValueError, match="unbiased_variance of task_relative_reinforce_pp must be true or false"):
        load_config("proposer_solver_judge_task_relative", ['algorithm.estimator_options={unbiased_variance: "false"}'])
    info = ESTIMATOR_REGISTRY["task_relative_reinforce_pp"]
    assert info.resolve_options({"unbiased_variance": False}) == {"unbiased_variance": False}


def test_the_builtin_estimators_declare_what_the_trainer_and_the_config_read():
    info = ESTIMATOR_REGISTRY
    assert set(info) >= {"at_grpo", "reinforce_pp", "reinforce_pp_baseline", "task_relative_reinforce_pp",
                         "per_agent_reinforce_pp", "rae"}
    assert (info["at_grpo"].sampling, info["at_grpo"].whitens, info["at_grpo"].kl_in_reward) == ("tree", "group", False)
    assert (info["rae"].sampling, info["rae"].stateful, info["rae"].role_key) == ("flat", True, "game_role")
    assert [n for n, i in info.items() if i.stateful] == ["rae"]
    assert {info[n].whitens for n in ("task_relative_reinforce_pp", "per_agent_reinforce_pp")} == {"role", "agent"}
    assert all(info[n].kl_in_reward for n in info if "reinforce_pp" in n)
    fields = set(load_config(None).algorithm.__dataclass_fields__)
    for name, i in info.items():
        assert set(i.uses) <= fields, f"{name} reads algorithm fields that do not exist: {set(i.uses) - fields}"


def test_a_new_kl_estimator_is_one_registered_function(registry_scope):
    @register_kl_estimator("test_abs")
    def kl_abs(d):
        return d.abs()

    logp, ref = torch.tensor([[-1.0, -2.0]]), torch.tensor([[-1.5, -1.0]])
    assert kl_estimate(logp, ref, "test_abs").tolist() == [[0.5, 1.0]]
    assert load_config(None, ["train.kl_estimator=test_abs"]).train.kl_estimator == "test_abs"
    with pytest.raises(ValueError, match="KL estimator 'k9'"):
        load_config(None, ["train.kl_estimator=k9"])
