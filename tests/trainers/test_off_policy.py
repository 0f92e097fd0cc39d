"""Off-policy corrections (TIS, decoupled PPO) against hand-computed values, and in the learner."""

from __future__ import annotations

import math

import pytest
import torch

from llm_trainers.algorithms.off_policy import (
    behaviour_weight,
    corrected_surrogate_loss,
    decoupled_ppo_weights,
    off_policy_weights,
    tis_weights,
)

T = torch.tensor
L = math.log


def test_behaviour_weight_is_prox_over_mu():
    # π_prox = 0.6, μ = 0.2 -> 3; π_prox = 0.1, μ = 0.4 -> 0.25
    w = behaviour_weight(T([L(0.6), L(0.1)]), T([L(0.2), L(0.4)]))
    assert w.tolist() == pytest.approx([3.0, 0.25], abs=1e-6)
    assert behaviour_weight(T([100.0]), T([0.0])).item() == pytest.approx(math.exp(20.0), rel=1e-5)  # clamped


def test_tis_truncates_at_the_cap():
    prox, mu = T([L(0.6), L(0.1), L(0.5)]), T([L(0.2), L(0.4), L(0.3)])  # ratios 3, 0.25, 5/3
    w, st = tis_weights(prox, mu, cap=2.0)
    assert w.tolist() == pytest.approx([2.0, 0.25, 5 / 3], abs=1e-6)
    assert st.ratio.tolist() == pytest.approx([3.0, 0.25, 5 / 3], abs=1e-6)
    assert st.clipped.tolist() == [1.0, 0.0, 0.0]
    with pytest.raises(ValueError):
        tis_weights(prox, mu, cap=0.0)


def test_decoupled_ppo_keeps_the_exact_weight_and_drops_tokens_over_the_cap():
    prox, mu = T([L(0.6), L(0.1), L(0.5)]), T([L(0.2), L(0.4), L(0.3)])
    w, st = decoupled_ppo_weights(prox, mu)
    assert w.tolist() == pytest.approx([3.0, 0.25, 5 / 3], abs=1e-6)
    assert st.clipped.tolist() == [0.0, 0.0, 0.0]
    w, st = decoupled_ppo_weights(prox, mu, cap=2.0)
    assert w.tolist() == pytest.approx([0.0, 0.25, 5 / 3], abs=1e-6)
    assert st.clipped.tolist() == [1.0, 0.0, 0.0]


def test_none_is_weight_one_but_reports_the_ratio():
    w, st = off_policy_weights("none", T([L(0.6)]), T([L(0.2)]), None)
    assert w.tolist() == [1.0]
    assert st.ratio.item() == pytest.approx(3.0)
    with pytest.raises(ValueError):
        off_policy_weights("vtrace", T([0.0]), T([0.0]), 2.0)
    with pytest.raises(ValueError):
        off_policy_weights("tis", T([0.0]), T([0.0]), None)


@pytest.mark.parametrize(
    "r, w, adv, correction, cap, expected",
    [
        # r = π_θ/π_prox = 1.5, A = 1: the clipped surrogate is −1.2; w = π_prox/μ = 3
        (1.5, 3.0, 1.0, "tis", 2.0, -2.4),             # −min(3, 2)·1.2
        (1.5, 3.0, 1.0, "decoupled_ppo", None, -3.6),   # −3·1.2
        (1.5, 3.0, 1.0, "decoupled_ppo", 2.0, 0.0),     # w > cap: the token is left out
        (1.5, 3.0, 1.0, "none", 2.0, -1.2),             # stale samples trained as if fresh
        # r = 0.5, A = −2: the surrogate is −min(−1, −1.6) = 1.6; w = 0.5
        (0.5, 0.5, -2.0, "tis", 2.0, 0.8),
        (0.5, 0.5, -2.0, "decoupled_ppo", 2.0, 0.8),
        # r = 1.1 (inside the trust region), A = 0.5: −0.55 per unit weight; w = 1.5
        (1.1, 1.5, 0.5, "tis", 2.0, -0.825),
    ],
)
def test_corrected_surrogate_hand_values(r, w, adv, correction, cap, expected):
    # log μ = 0 (μ = 1 as a log-probability is fine here: only differences matter)
    prox = T([L(w)])
    logp = T([L(w * r)]).requires_grad_(True)
    loss, st, off = corrected_surrogate_loss(logp, prox, T([0.0]), T([adv]), correction, cap)
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert st.ratio.item() == pytest.approx(r, abs=1e-6)
    assert off.ratio.item() == pytest.approx(w, abs=1e-6)


def test_the_weight_is_detached_from_the_gradient():
    # r = 1.1 (unclipped), A = 1: d(−w·r·A)/d log π_θ = −w·r·A with w = min(0.5, 2) = 0.5 -> −0.55
    logp = T([L(0.55)]).requires_grad_(True)
    prox, mu = T([L(0.5)]), T([L(1.0)])
    loss, _, _ = corrected_surrogate_loss(logp, prox, mu, T([1.0]), "tis", 2.0)
    loss.sum().backward()
    assert logp.grad.item() == pytest.approx(-0.55, abs=1e-6)
    # the proximal log-probs carry no gradient into the weight either
    prox = T([L(0.5)]).requires_grad_(True)
    loss, _, _ = corrected_surrogate_loss(T([L(0.55)]), prox, mu, T([1.0]), "decoupled_ppo", None)
    loss.sum().backward()
    # only through r = π_θ/π_prox: d(−w·r·A)/d log π_prox = +w·r·A = 0.55
    assert prox.grad.item() == pytest.approx(0.55, abs=1e-6)


# ---------------------------------------------------------------------------- in the learner
def _learner(tiny_model_dir, correction, cap=2.0):
    from llm_trainers.config import AsyncConfig, TrainConfig
    from llm_trainers.learner import Learner
    from llm_trainers.policies import build_policies

    policies = build_policies("L1", ["a"], tiny_model_dir, device="cpu", seed=0)
    return Learner(policies, TrainConfig(lr=1e-3, max_grad_norm=None, micro_batch_size=2), seed=0,
                   off_policy=AsyncConfig(correction=correction, is_cap=cap))


def _samples(learner, shift):
    """Two on-policy samples (old = the learner's own log-probs); log μ = log π_old − shift."""
    from llm_trainers.learner import UpdateSample

    prompts, comps = [[3, 4, 5], [6, 7]], [[8, 9], [10, 11, 12]]
    old = learner.logprobs("shared", prompts, comps)
    return [UpdateSample(p, c, torch.tensor([1.0, -0.5, 0.25][: len(c)]), o, None, o - shift)
            for p, c, o in zip(prompts, comps, old)]


def test_learner_gradient_scales_with_the_truncated_weight(tiny_model_dir):
    # μ = π_old / 2 on every token: w = 2 under a cap of 4, truncated to 1.5 under a cap of 1.5
    runs = {}
    for name, correction, cap, shift in [("plain", "none", None, 0.0), ("w2", "tis", 4.0, L(2.0)),
                                         ("w1.5", "tis", 1.5, L(2.0)), ("same", "tis", 2.0, 0.0)]:
        learner = _learner(tiny_model_dir, correction, cap)
        runs[name] = learner.update("shared", _samples(learner, shift))
    # the gradient is linear in a constant per-token weight
    assert runs["w2"]["grad_norm"] == pytest.approx(2.0 * runs["plain"]["grad_norm"], rel=1e-5)
    assert runs["w1.5"]["grad_norm"] == pytest.approx(1.5 * runs["plain"]["grad_norm"], rel=1e-5)
    assert runs["same"]["grad_norm"] == pytest.approx(runs["plain"]["grad_norm"], rel=1e-6)
    assert runs["w2"]["is_ratio_mean"] == pytest.approx(2.0, rel=1e-5)
    assert runs["w2"]["is_ratio_max"] == pytest.approx(2.0, rel=1e-5)
    assert runs["w2"]["is_clip_frac"] == 0.0
    assert runs["w1.5"]["is_clip_frac"] == pytest.approx(1.0)
    assert "is_ratio_mean" not in runs["plain"]


def test_learner_refuses_a_correction_without_behaviour_logprobs(tiny_model_dir):
    from llm_trainers.learner import UpdateSample

    learner = _learner(tiny_model_dir, "tis")
    sample = UpdateSample([3, 4], [5], torch.tensor([1.0]), torch.tensor([-1.0]))
    with pytest.raises(ValueError, match="behaviour_logprobs"):
        learner.update("shared", [sample])


def test_the_engines_logprobs_reach_the_trainers_loss_as_the_behaviour_policy(tmp_path):
    """End to end through Trainer.train_step: the importance weight in the loss is
    π_prox / μ with μ the *engine's* log-probs of the stale rollout (TrainRecord.logprobs) and
    π_prox the learner before the update. Computed here by hand from the rollout's records, it
    differs from 1 (the policy moved between sampling and update), and the trainer's reported
    weights must match it; a trainer that passed π_prox (or anything else) as the behaviour
    log-probs would report a weight of exactly 1."""
    from llm_trainers.config import load_config
    from llm_trainers.trainer import Trainer

    trainer = Trainer(load_config(None, [
        "model.path=tiny:llm/Signalling-v0", "model.device=cpu", "rollout.max_new_tokens=1", "rollout.k=4",
        "env.num_envs=6", "run.steps=2", "run.eval_every=-1", "run.eval_at_start=false", "run.save_every=-1",
        "run.progress=false", "run.tensorboard=false", "run.export_final=false", "train.lr=5e-2",
        "train.micro_batch_size=8", "rollout.async={max_staleness: 1, correction: decoupled_ppo}",
        f"run.output_dir={tmp_path}",
    ]))
    try:
        trainer.train_step()  # update 0: the policy moves; rollout 1 was sampled before it
        item, _ = trainer.async_rollout.take(1)
        trainer.async_rollout.state.queue.insert(0, item)  # put it back for train_step to take
        records = [r for r in item.result.records if r.completion_ids]
        assert {r.policy_version for r in records} == {0}
        advantages, keep = trainer._advantages(records, [], None)
        keep, _ = trainer._without_zero_gradient_policies(records, advantages, keep)
        kept = [records[i] for i in keep]
        assert kept
        prox = trainer.learner.logprobs("shared", [r.prompt_ids for r in kept], [r.completion_ids for r in kept])
        weights = torch.cat([torch.exp(p - torch.tensor(r.logprobs)) for p, r in zip(prox, kept)])
        assert abs(float(weights.mean()) - 1.0) > 1e-3  # the policy did move: the weight is not 1
        row = trainer.train_step()
    finally:
        trainer.close()
    assert row["train/shared/is_ratio_mean"] == pytest.approx(float(weights.mean()), rel=1e-4)
    assert row["train/shared/is_ratio_max"] == pytest.approx(float(weights.max()), rel=1e-4)


def test_a_reward_that_is_not_a_finite_number_is_refused_before_any_update(tmp_path):
    """One NaN reward made every advantage of a whitened batch NaN and the update wrote NaN into
    every weight (the loss logged as null, the run dying later in sampling); and
    ``drop_uniform_groups`` kept groups whose rewards differed by a float rounding only, which
    the estimator (float32) gives zero advantages."""
    import dataclasses
    import math

    from llm_trainers.config import load_config
    from llm_trainers.trainer import Trainer

    trainer = Trainer(load_config(None, [
        "model.path=tiny:llm/Signalling-v0", "model.device=cpu", "rollout.max_new_tokens=1", "rollout.k=2",
        "env.num_envs=2", "run.steps=1", "run.eval_every=-1", "run.eval_at_start=false", "run.save_every=-1",
        "run.progress=false", "run.tensorboard=false", "run.export_final=false",
        "algorithm.estimator=reinforce_pp_baseline", "algorithm.drop_uniform_groups=true", f"run.output_dir={tmp_path}",
    ]))
    try:
        records = [r for r in trainer._collect(trainer.train_seeds(0)).records if r.completion_ids][:2]
        assert len(records) == 2
        pair = [dataclasses.replace(records[0], group="g", reward=0.1 + 0.2), dataclasses.replace(records[1], group="g", reward=0.3)]
        advantages, keep = trainer._advantages(pair, [], None)
        assert keep == [] and all(float(a.abs().sum()) == 0.0 for a in advantages)
        for bad in (math.nan, math.inf):
            poisoned = [dataclasses.replace(records[0], reward=bad), records[1]]
            with pytest.raises(ValueError, match="rewards must be finite numbers"):
                trainer._advantages(poisoned, [], None)
        # The uniform groups are filtered before the estimator: the batch whitening is over the
        # records trained on (it counted the dropped groups' zeros: the kept advantages were
        # +-1.73, not +-1).
        one = dataclasses.replace(records[0], completion_ids=records[0].completion_ids[:1])
        groups = [("a", 1.0), ("a", 0.0), ("b", 1.0), ("b", 1.0), ("c", 0.0), ("c", 0.0)]
        batch = [dataclasses.replace(one, group=g, reward=r) for g, r in groups]
        advantages, keep = trainer._advantages(batch, [], None)
        assert keep == [0, 1]
        assert [float(a[0]) for a in advantages] == pytest.approx([1.0, -1.0, 0.0, 0.0, 0.0, 0.0], abs=1e-5)
    finally:
        trainer.close()


@pytest.mark.parametrize("estimator", ["reinforce_pp", "task_relative_reinforce_pp", "per_agent_reinforce_pp", "rae"])
def test_dropping_uniform_groups_is_refused_for_an_estimator_that_does_not_compare_within_groups(estimator):
    # (reinforce_pp whitens over the batch: a uniform group's advantage is not 0, and under flat
    # sampling every group is one record: every record was dropped, the run trained on nothing)
    from llm_trainers.config import load_config

    with pytest.raises(ValueError, match="drop_uniform_groups"):
        load_config(None, ["model.path=tiny:llm/Signalling-v0", f"algorithm.estimator={estimator}",
                           "rollout.tree=false", "algorithm.drop_uniform_groups=true"])
