"""The learner: token-mean over the optimizer step, gradients, clipping, schedule, precision."""

from __future__ import annotations

import math

import pytest
import torch

from llm_trainers.batching import completion_logprobs, pack_sequences
from llm_trainers.config import TrainConfig
from llm_trainers.learner import Learner, UpdateSample, lr_lambda
from llm_trainers.policies import build_policies


def _samples(tok, lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for i, n in enumerate(lengths):
        prompt = torch.randint(7, len(tok), (3 + i % 3,), generator=g).tolist()
        completion = torch.randint(7, len(tok), (n,), generator=g).tolist()
        adv = torch.randn(n, generator=g)
        out.append(UpdateSample(prompt, completion, adv, torch.zeros(n)))
    return out


def _fill_old(learner, name, samples):
    for s, lp in zip(samples, learner.logprobs(name, [s.prompt_ids for s in samples], [s.completion_ids for s in samples])):
        s.old_logprobs = lp
    return samples


@pytest.fixture()
def policies(tiny_model_dir):
    return build_policies("L1", ["a", "b"], tiny_model_dir, device="cpu")


def test_gradient_is_token_mean_policy_gradient(policies):
    """On-policy (ρ = 1) the gradient is −Σ_t A_t ∇log π_t / N over all tokens of the step."""
    pol = policies["shared"]
    learner = Learner(policies, TrainConfig(lr=0.0, max_grad_norm=None, micro_batch_size=2))
    samples = _fill_old(learner, "shared", _samples(pol.tokenizer, [1, 4, 2, 3, 5]))
    learner.update("shared", samples)  # lr 0: parameters stay, gradients remain for inspection
    got = {n: p.grad.clone() for n, p in pol.model.named_parameters() if p.grad is not None}

    pol.model.zero_grad(set_to_none=True)
    n_tokens = sum(len(s.completion_ids) for s in samples)
    batch = pack_sequences([s.prompt_ids for s in samples], [s.completion_ids for s in samples], pol.tokenizer.pad_token_id)
    logp, _ = completion_logprobs(pol.model, batch)
    adv = torch.zeros_like(logp)
    for i, s in enumerate(samples):
        adv[i, : len(s.advantages)] = s.advantages
    (-(adv * logp * batch.completion_mask).sum() / n_tokens).backward()
    for n, p in pol.model.named_parameters():
        if p.grad is not None:
            assert torch.allclose(got[n], p.grad, atol=1e-6, rtol=1e-4), n


def test_micro_batch_size_does_not_change_the_step_gradient(policies):
    """Accumulated micro-batch gradients equal the whole step's token-mean gradient."""
    pol = policies["shared"]
    grads = []
    for mb in (1, 2, 5):
        learner = Learner(policies, TrainConfig(lr=0.0, max_grad_norm=None, micro_batch_size=mb))
        samples = _fill_old(learner, "shared", _samples(pol.tokenizer, [1, 4, 2, 3, 5]))
        learner.update("shared", samples)
        grads.append({n: p.grad.clone() for n, p in pol.model.named_parameters() if p.grad is not None})
    for other in grads[1:]:
        for k in grads[0]:
            assert torch.allclose(grads[0][k], other[k], atol=1e-7, rtol=1e-4), k


def test_micro_batches_are_cut_from_samples_of_similar_length_and_scores_keep_their_order(policies):
    """Micro-batches group samples by length (fewer pad positions: a short prompt is not padded to
    a long one's length); the step's gradient is the one-micro-batch gradient, and ``logprobs``
    returns each sample's scores in the order asked."""
    pol = policies["shared"]
    g = torch.Generator().manual_seed(3)
    samples = []
    for p_len, c_len in [(30, 2), (3, 5), (28, 4), (4, 1), (31, 3), (5, 2)]:
        prompt = torch.randint(7, len(pol.tokenizer), (p_len,), generator=g).tolist()
        completion = torch.randint(7, len(pol.tokenizer), (c_len,), generator=g).tolist()
        samples.append(UpdateSample(prompt, completion, torch.randn(c_len, generator=g), torch.zeros(c_len)))
    learner = Learner(policies, TrainConfig(lr=0.0, max_grad_norm=None, micro_batch_size=3))
    micros = [m for m, _ in learner._micro_batches("shared", samples)]
    assert [sorted(len(s.prompt_ids) for s in m) for m in micros] == [[3, 4, 5], [28, 30, 31]]
    scores = learner.logprobs("shared", [s.prompt_ids for s in samples], [s.completion_ids for s in samples])
    for s, lp in zip(samples, scores):  # each in its place, equal to the sample scored alone
        (alone,) = learner.logprobs("shared", [s.prompt_ids], [s.completion_ids])
        assert lp.shape == alone.shape and torch.allclose(lp, alone, atol=1e-5)
        s.old_logprobs = lp
    grads = []
    for mb in (3, 6):
        pol.model.zero_grad(set_to_none=True)
        Learner(policies, TrainConfig(lr=0.0, max_grad_norm=None, micro_batch_size=mb)).update("shared", samples)
        grads.append({n: p.grad.clone() for n, p in pol.model.named_parameters() if p.grad is not None})
    for k in grads[0]:
        assert torch.allclose(grads[0][k], grads[1][k], atol=1e-7, rtol=1e-4), k


def test_gradient_clipping_caps_the_norm(policies):
    pol = policies["shared"]
    learner = Learner(policies, TrainConfig(lr=0.0, max_grad_norm=1e-3, micro_batch_size=8))
    samples = _fill_old(learner, "shared", _samples(pol.tokenizer, [3, 3, 3]))
    metrics = learner.update("shared", samples)
    assert metrics["grad_norm"] > 1e-3  # reported norm is the pre-clip norm
    total = torch.norm(torch.stack([p.grad.norm() for p in pol.trainable_parameters() if p.grad is not None]))
    assert total.item() == pytest.approx(1e-3, rel=1e-3)


def test_lr_schedule_values():
    cfg = TrainConfig(schedule="cosine", warmup_steps=2, min_lr_ratio=0.1)
    assert lr_lambda(0, cfg, 12) == pytest.approx(0.5)
    assert lr_lambda(1, cfg, 12) == pytest.approx(1.0)
    assert lr_lambda(2, cfg, 12) == pytest.approx(1.0)
    assert lr_lambda(7, cfg, 12) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))  # 0.55
    assert lr_lambda(12, cfg, 12) == pytest.approx(0.1)
    assert lr_lambda(50, cfg, 12) == pytest.approx(0.1)
    lin = TrainConfig(schedule="linear", min_lr_ratio=0.0)
    assert lr_lambda(5, lin, 10) == pytest.approx(0.5)
    assert lr_lambda(3, TrainConfig(), 1000) == 1.0
    with pytest.raises(ValueError):
        lr_lambda(3, TrainConfig(schedule="step"), 1000)


def test_scheduler_steps_once_per_update(policies):
    learner = Learner(policies, TrainConfig(lr=1.0, schedule="linear", min_lr_ratio=0.0, micro_batch_size=8), total_steps=4)
    samples = _fill_old(learner, "shared", _samples(policies["shared"].tokenizer, [2, 2]))
    lrs = [learner.update("shared", samples)["lr"] for _ in range(3)]
    assert lrs == pytest.approx([1.0, 0.75, 0.5])


@pytest.mark.parametrize(("samples", "wanted", "sizes"),
                         [(9, 4, [3, 2, 2, 2]), (5, 4, [2, 1, 1, 1]), (10, 4, [3, 3, 2, 2]), (3, 4, [1, 1, 1])])
def test_num_mini_batches_makes_that_many_optimizer_steps_of_even_sizes(policies, samples, wanted, sizes):
    # (cutting chunks of ceil(n / k) gave 3 steps of [3, 3, 3] for 9 samples and k = 4)
    learner = Learner(policies, TrainConfig(lr=1e-3, num_mini_batches=wanted, micro_batch_size=16), total_steps=4)
    batch = _fill_old(learner, "shared", _samples(policies["shared"].tokenizer, [2] * samples))
    seen: list[int] = []
    cut = learner._micro_batches
    learner._micro_batches = lambda policy, mini: (seen.append(len(mini)), cut(policy, mini))[1]
    steps = []
    optimizer = learner.optimizers["shared"]
    step = optimizer.step
    optimizer.step = lambda *a, **k: (steps.append(1), step(*a, **k))[1]
    learner.update("shared", batch)
    assert sorted(seen, reverse=True) == sizes and len(steps) == len(sizes)


def test_schedule_counts_iterations_for_a_policy_without_samples(tiny_model_dir):
    """The schedule runs on training iterations: a policy that gets no samples in an iteration
    (e.g. ``drop_uniform_groups`` removed all its records) still moves along it, so at
    iteration 3 of a 4-step linear schedule both policies use 1e-3 · 1/4, and a checkpoint
    taken in between resumes on the same values."""
    ps = build_policies("L3", ["speaker", "listener"], tiny_model_dir, device="cpu")
    optim = TrainConfig(lr=1e-3, schedule="linear", min_lr_ratio=0.0, micro_batch_size=8)
    learner = Learner(ps, optim, total_steps=4)
    speaker = _fill_old(learner, "speaker", _samples(ps["speaker"].tokenizer, [2, 3]))
    listener = _fill_old(learner, "listener", _samples(ps["listener"].tokenizer, [2, 3], seed=1))
    for _ in range(2):
        learner.update("speaker", speaker)
        learner.update("listener", [])  # nothing to learn from this iteration
    saved = learner.state_dict()
    learner.update("speaker", speaker)
    learner.update("listener", [])
    lrs = {"speaker": learner.update("speaker", speaker)["lr"], "listener": learner.update("listener", listener)["lr"]}
    assert lrs == pytest.approx({"speaker": 2.5e-4, "listener": 2.5e-4})

    resumed = Learner(build_policies("L3", ["speaker", "listener"], tiny_model_dir, device="cpu"), optim, total_steps=4)
    resumed.load_state_dict(saved)
    resumed.update("listener", [])
    assert resumed.update("listener", listener)["lr"] == pytest.approx(2.5e-4)


def test_kl_loss_term_and_entropy_are_added(policies):
    pol = policies["shared"]
    loss_cfg = TrainConfig(kl_loss_coef=0.5, kl_estimator="k1", entropy_coef=0.0)
    learner = Learner(policies, TrainConfig(lr=0.0, kl_loss_coef=0.5, kl_estimator="k1", entropy_coef=0.0,
                                            micro_batch_size=8))
    samples = _fill_old(learner, "shared", _samples(pol.tokenizer, [2, 3]))
    for s in samples:
        s.advantages = torch.zeros(len(s.completion_ids))
        s.ref_logprobs = s.old_logprobs - 0.2  # k1 = log π − log π_ref = 0.2 on every token
    m = learner.update("shared", samples)
    assert m["pg_loss"] == pytest.approx(0.0, abs=1e-7)
    assert m["kl"] == pytest.approx(0.2, abs=1e-5)
    assert m["loss"] == pytest.approx(0.5 * 0.2, abs=1e-5)
    with pytest.raises(ValueError):
        Learner(policies, loss_cfg).update("shared", _samples(pol.tokenizer, [2]))


def test_entropy_bonus_lowers_the_loss(policies):
    pol = policies["shared"]
    learner = Learner(policies, TrainConfig(lr=0.0, entropy_coef=0.1, micro_batch_size=8))
    samples = _fill_old(learner, "shared", _samples(pol.tokenizer, [2, 3]))
    for s in samples:
        s.advantages = torch.zeros(len(s.completion_ids))
    m = learner.update("shared", samples)
    assert m["entropy"] > 0.5  # a random model over ~34 tokens is far from deterministic
    assert m["loss"] == pytest.approx(-0.1 * m["entropy"], rel=1e-5)


def test_bf16_autocast_and_gradient_checkpointing_on_cpu(tiny_model_dir):
    base = build_policies("L1", ["a"], tiny_model_dir, device="cpu")
    ckpt = build_policies("L1", ["a"], tiny_model_dir, device="cpu", gradient_checkpointing=True)
    lr0 = TrainConfig(lr=0.0, max_grad_norm=None, micro_batch_size=8)
    grads = []
    for ps in (base, ckpt):
        learner = Learner(ps, lr0)
        samples = _fill_old(learner, "shared", _samples(ps["shared"].tokenizer, [3, 2, 4]))
        learner.update("shared", samples)
        grads.append({n: p.grad.clone() for n, p in ps["shared"].model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for n in grads[0]:
        assert torch.allclose(grads[0][n], grads[1][n], atol=1e-6), n
    bf = Learner(base, lr0, bf16=True)
    samples = _samples(base["shared"].tokenizer, [3, 2, 4])
    fp32 = Learner(base, lr0).logprobs("shared", [s.prompt_ids for s in samples], [s.completion_ids for s in samples])
    bf16 = bf.logprobs("shared", [s.prompt_ids for s in samples], [s.completion_ids for s in samples])
    for a, b in zip(fp32, bf16):
        assert torch.allclose(a, b, atol=0.1)
    _fill_old(bf, "shared", samples)
    m = bf.update("shared", samples)
    assert math.isfinite(m["loss"])


def test_old_logprobs_from_the_update_give_the_recomputed_step(policies):
    """Without old_logprobs, one optimizer step reads log π_old from its own forward pass: the same
    gradient and loss as with a separate scoring pass (the weights have not moved), clip 0, ratio 1."""
    pol = policies["shared"]
    learner = Learner(policies, TrainConfig(lr=0.0, max_grad_norm=None, micro_batch_size=2, clip_low=0.2))
    scored = _fill_old(learner, "shared", _samples(pol.tokenizer, [1, 4, 2, 3, 5]))
    stats_scored = learner.update("shared", scored)
    expected = {n: p.grad.clone() for n, p in pol.model.named_parameters() if p.grad is not None}
    pol.model.zero_grad(set_to_none=True)

    unscored = _samples(pol.tokenizer, [1, 4, 2, 3, 5])
    for s in unscored:
        s.old_logprobs = None
    stats = learner.update("shared", unscored)
    assert stats["loss"] == pytest.approx(stats_scored["loss"], abs=1e-6)
    assert stats["clip_frac"] == 0.0 and stats["ratio_max"] == 1.0
    for n, p in pol.model.named_parameters():
        if p.grad is not None:
            assert torch.allclose(expected[n], p.grad, atol=1e-6, rtol=1e-4), n


@pytest.mark.parametrize("cfg", [{"epochs": 2}, {"mini_batch_size": 2}, {"num_mini_batches": 2}])
def test_old_logprobs_from_the_update_are_refused_where_the_weights_move_between_steps(policies, cfg):
    pol = policies["shared"]
    learner = Learner(policies, TrainConfig(lr=1e-3, micro_batch_size=2, **cfg))
    samples = _samples(pol.tokenizer, [1, 4, 2, 3])
    for s in samples:
        s.old_logprobs = None
    with pytest.raises(ValueError, match="one optimizer step"):
        learner.update("shared", samples)


def test_a_trainer_step_without_the_scoring_pass_trains_the_same_weights(tmp_path):
    """``algorithm.old_logprobs_from_update`` (default true) skips the separate log π_old pass where
    the update is one optimizer step per policy; the step's new weights are the scored step's."""
    from llm_trainers.config import load_config
    from llm_trainers.trainer import Trainer

    base = ["model.path=tiny:llm/Signalling-v0", "model.device=cpu", "model.level=L2",
            "model.lora={r: 4, alpha: 8, target_modules: [q_proj, v_proj, lm_head]}", "rollout.max_new_tokens=2",
            "rollout.k=4", "env.num_envs=6", "run.steps=1", "run.eval_every=-1", "run.eval_at_start=false",
            "run.save_every=-1", "run.progress=false", "run.tensorboard=false", "run.export_final=false",
            "train.lr=5e-2", "train.micro_batch_size=5"]
    weights, scoring_calls = {}, {}
    for from_update in (True, False):
        trainer = Trainer(load_config(None, [*base, f"algorithm.old_logprobs_from_update={str(from_update).lower()}",
                                             f"run.output_dir={tmp_path / str(from_update)}"]))
        calls = []
        real_logprobs = trainer.learner.logprobs
        trainer.learner.logprobs = (lambda *a, _calls=calls, _real=real_logprobs, **k:
                                    _calls.append(a[0]) or _real(*a, **k))
        before = {f"{p.name}/{k}": v.clone() for p in trainer.policies for k, v in p.trainable_state_dict().items()}
        trainer.train()
        weights[from_update] = {f"{p.name}/{k}": v.clone() for p in trainer.policies
                                for k, v in p.trainable_state_dict().items()}
        scoring_calls[from_update] = calls
        trainer.close()
    assert scoring_calls[True] == [] and scoring_calls[False], scoring_calls
    assert any(not torch.equal(before[k], weights[True][k]) for k in before)
    for k, v in weights[False].items():
        assert torch.allclose(weights[True][k], v, atol=1e-6, rtol=1e-4), k


def _groups(tok, shapes, seed=0):
    """Tree-group samples: for each ``(prompt length, completion lengths)`` one prompt, and one
    sample per completion length on it (the K candidates of a state)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for p_len, c_lens in shapes:
        prompt = torch.randint(7, len(tok), (p_len,), generator=g).tolist()
        for n in c_lens:
            completion = torch.randint(7, len(tok), (n,), generator=g).tolist()
            out.append(UpdateSample(prompt, completion, torch.randn(n, generator=g), torch.zeros(n)))
    return out


#: Prompts of different lengths, groups of 1-4 candidates, completions of 1 token and longer ones.
GROUP_SHAPES = [(9, [3, 1, 5, 2]), (4, [2, 2]), (12, [1]), (7, [4, 6, 1])]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_shared_prompt_batch_gives_the_packed_batch_log_probs_entropy_and_gradient(policies, temperature):
    """Each distinct prompt once, the completions on its cache: the same log-probabilities,
    entropies and gradient as every row run whole (up to floating-point order)."""
    from llm_trainers.batching import SharedPromptBatch, pack_for_scoring, pack_shared_prompts

    pol = policies["shared"]
    samples = _groups(pol.tokenizer, GROUP_SHAPES)
    prompts, comps = [s.prompt_ids for s in samples], [s.completion_ids for s in samples]
    pad = pol.tokenizer.pad_token_id
    results = []
    for batch in (pack_sequences(prompts, comps, pad), pack_shared_prompts(prompts, comps, pad)):
        pol.model.zero_grad(set_to_none=True)
        logp, ent = completion_logprobs(pol.model, batch, temperature, with_entropy=True)
        mask = batch.completion_mask
        ((logp * mask).sum() + 0.3 * (ent * mask).sum()).backward()
        grads = {n: p.grad.clone() for n, p in pol.model.named_parameters() if p.grad is not None}
        results.append((logp.detach(), ent.detach(), mask, grads))
    (lp0, e0, m0, g0), (lp1, e1, m1, g1) = results
    assert torch.equal(m0, m1)
    keep = m0.bool()
    assert torch.allclose(lp0[keep], lp1[keep], atol=1e-5)
    assert torch.allclose(e0[keep], e1[keep], atol=1e-5)
    assert g0.keys() == g1.keys() and g0
    for n in g0:
        assert torch.allclose(g0[n], g1[n], atol=1e-5, rtol=1e-4), n
    shared = pack_for_scoring(pol.model, prompts, comps, pad)
    assert isinstance(shared, SharedPromptBatch) and shared.prompt_ids.shape[0] == len(GROUP_SHAPES)
    # Nothing to share, or sharing turned off: every row runs whole.
    assert not isinstance(pack_for_scoring(pol.model, prompts[:1] + prompts[4:5], comps[:1] + comps[4:5], pad),
                          SharedPromptBatch)
    assert not isinstance(pack_for_scoring(pol.model, prompts, comps, pad, share_prompts=False), SharedPromptBatch)


def test_a_model_that_returns_no_cache_has_every_row_run_whole(policies):
    """A forward that ignores ``use_cache`` (returns no cache) is scored row by row, with the same
    numbers; ``unshared()`` is exactly the batch :func:`pack_sequences` makes."""
    from llm_trainers.batching import pack_shared_prompts

    pol = policies["shared"]
    samples = _groups(pol.tokenizer, GROUP_SHAPES)
    prompts, comps = [s.prompt_ids for s in samples], [s.completion_ids for s in samples]
    pad = pol.tokenizer.pad_token_id
    shared, packed = pack_shared_prompts(prompts, comps, pad), pack_sequences(prompts, comps, pad)
    unshared = shared.unshared()
    for field in ("input_ids", "attention_mask", "position_ids", "completion_ids", "completion_mask", "prompt_width"):
        assert torch.equal(torch.as_tensor(getattr(unshared, field)), torch.as_tensor(getattr(packed, field))), field
    real_forward = pol.model.forward

    def forward_without_cache(*args, **kwargs):
        out = real_forward(*args, **kwargs)
        for name in ("cache", "past_key_values"):
            if name in out:
                out[name] = None
        return out

    with torch.no_grad():
        want, _ = completion_logprobs(pol.model, packed)
        pol.model.forward = forward_without_cache
        try:
            got, _ = completion_logprobs(pol.model, shared)
        finally:
            del pol.model.forward
    assert torch.equal(got * packed.completion_mask, want * packed.completion_mask)


def _count_positions(model):
    """A counter of the token positions the model's forward passes run (its input ids)."""
    seen = [0]

    def hook(module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        seen[0] += int(ids.numel())

    return seen, model.register_forward_pre_hook(hook, with_kwargs=True)


@pytest.mark.parametrize("old_from_update", [False, True])
def test_a_step_on_shared_prompts_trains_the_weights_of_the_packed_step_on_fewer_positions(tiny_model_dir,
                                                                                           old_from_update):
    """``train.share_prompts`` on and off: the same scores, the same loss and the same step gradient
    (micro-batches of 4 cut across groups), for fewer token positions. (Learning rate 0: Adam's
    first step is ±lr wherever a gradient is not ~0, so the weights would not show a gradient's
    floating-point noise, except where it flips a near-zero component's sign.)"""
    from llm_trainers.batching import shares_prompts

    runs = []
    for share in (False, True):
        pols = build_policies("L1", ["a"], tiny_model_dir, device="cpu")
        pol = pols["shared"]
        assert shares_prompts(pol.model)
        learner = Learner(pols, TrainConfig(lr=0.0, max_grad_norm=None, micro_batch_size=4, share_prompts=share,
                                            entropy_coef=0.01))
        samples = _groups(pol.tokenizer, GROUP_SHAPES, seed=1)
        seen, handle = _count_positions(pol.model)
        if old_from_update:
            for s in samples:
                s.old_logprobs = None
        else:
            _fill_old(learner, "shared", samples)
        stats = learner.update("shared", samples)
        handle.remove()
        runs.append((seen[0], [s.old_logprobs for s in samples], stats,
                     {n: p.grad.clone() for n, p in pol.model.named_parameters() if p.grad is not None}))
    (pos0, old0, st0, w0), (pos1, old1, st1, w1) = runs
    assert pos1 < pos0
    if not old_from_update:
        for a, b in zip(old0, old1):
            assert torch.allclose(a, b, atol=1e-5)
    assert math.isclose(st0["loss"], st1["loss"], rel_tol=1e-4, abs_tol=1e-6)
    assert math.isclose(st0["entropy"], st1["entropy"], rel_tol=1e-4)
    assert w0.keys() == w1.keys() and w0
    for n in w0:
        assert torch.allclose(w0[n], w1[n], atol=1e-6, rtol=1e-4), n


def test_activation_checkpointing_runs_every_row_whole(tiny_model_dir):
    """Activation checkpointing turns the cache off in training mode, so with it the learner packs
    every row whole (and still trains)."""
    from llm_trainers.batching import SharedPromptBatch, pack_for_scoring, shares_prompts

    pols = build_policies("L1", ["a"], tiny_model_dir, device="cpu", gradient_checkpointing=True)
    pol = pols["shared"]
    assert not shares_prompts(pol.model)
    samples = _groups(pol.tokenizer, GROUP_SHAPES)
    batch = pack_for_scoring(pol.model, [s.prompt_ids for s in samples], [s.completion_ids for s in samples],
                             pol.tokenizer.pad_token_id)
    assert not isinstance(batch, SharedPromptBatch)
    learner = Learner(pols, TrainConfig(lr=1e-2, micro_batch_size=4))
    assert learner.update("shared", _fill_old(learner, "shared", samples))["grad_norm"] > 0


def test_lora_reference_scores_on_shared_prompts(tiny_model_dir):
    """Under LoRA the reference is the base model with the adapter off: scored on shared prompts
    it gives what every row run whole gives, and so does the adapter's own scoring."""
    from llm_trainers.config import LoraConfig

    pols = build_policies("L2", ["speaker", "listener"], tiny_model_dir, device="cpu", lora=LoraConfig(r=4))
    samples = _groups(pols["speaker"].tokenizer, GROUP_SHAPES, seed=2)
    prompts, comps = [s.prompt_ids for s in samples], [s.completion_ids for s in samples]
    for reference in (False, True):
        got = [Learner(pols, TrainConfig(share_prompts=share, micro_batch_size=3)).logprobs("speaker", prompts, comps, reference)
               for share in (False, True)]
        for x, y in zip(*got):
            assert torch.allclose(x, y, atol=1e-5)


class _AlwaysForwardLearner(Learner):
    """A learner that takes the full forward and backward passes even where the gradient is
    zero: what the zero-gradient update must reproduce."""

    def has_zero_gradient(self, samples):
        return False


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_a_zero_advantage_update_steps_the_optimizer_as_a_full_update_does(tiny_model_dir, weight_decay):
    """After a real step (AdamW has momentum), an update whose advantages are all 0 moves the
    weights by the momentum (and the decay), as the released code's optimizer step does. The
    zero-gradient update does it without forward or backward passes, and leaves the weights,
    the optimizer state, the shuffle generator and the schedule where the full update does.
    (Before, such a policy took no optimizer step: its weights stayed.)"""
    results = []
    for cls in (Learner, _AlwaysForwardLearner):
        policies = build_policies("L1", ["a"], tiny_model_dir, device="cpu")
        pol = policies["shared"]
        cfg = TrainConfig(lr=1e-2, weight_decay=weight_decay, micro_batch_size=2, mini_batch_size=2, epochs=2)
        learner = cls(policies, cfg)
        first = _fill_old(learner, "shared", _samples(pol.tokenizer, [2, 3, 1, 4]))
        learner.update("shared", first)
        before = {k: v.clone() for k, v in pol.trainable_state_dict().items()}
        zero = _fill_old(learner, "shared", _samples(pol.tokenizer, [2, 3, 1, 4], seed=1))
        for s in zero:
            s.advantages = torch.zeros_like(s.advantages)
        stats = learner.update("shared", zero)
        after = pol.trainable_state_dict()
        moved = max(float((after[k] - before[k]).abs().max()) for k in before)
        opt_state = learner.optimizers["shared"].state_dict()["state"]
        results.append((after, opt_state, learner.generators["shared"].get_state(),
                        learner.schedulers["shared"].last_epoch, stats, moved))
    (fast, fast_opt, fast_gen, fast_epoch, fast_stats, fast_moved), (full, full_opt, full_gen, full_epoch, _, full_moved) = results
    assert fast_stats["zero_gradient_steps"] == 4.0  # 2 epochs x 2 mini-batches
    assert fast_moved > 1e-4 and fast_moved == pytest.approx(full_moved)
    for k in fast:
        assert torch.allclose(fast[k], full[k], atol=1e-7, rtol=0), k
    for index, state in full_opt.items():
        assert float(fast_opt[index]["step"]) == float(state["step"]) == 8.0  # 4 steps each update
        assert torch.allclose(fast_opt[index]["exp_avg"], state["exp_avg"], atol=1e-9)
        assert torch.allclose(fast_opt[index]["exp_avg_sq"], state["exp_avg_sq"], atol=1e-12)
    assert torch.equal(fast_gen, full_gen) and fast_epoch == full_epoch == 2


def test_a_zero_advantage_update_says_whether_the_weights_could_move(tiny_model_dir):
    """Before any real step (no momentum) and without weight decay, zero-gradient steps leave the
    weights as they were: ``weights_moved`` 0, and the trainer pushes nothing to the engine (a
    pushed adapter equal to the base model cannot be checked against vLLM). After a real step
    AdamW's momentum moves them: 1."""
    policies = build_policies("L1", ["a"], tiny_model_dir, device="cpu")
    pol = policies["shared"]
    learner = Learner(policies, TrainConfig(lr=1e-2, weight_decay=0.0, micro_batch_size=2))

    def zero_samples(seed):
        samples = _fill_old(learner, "shared", _samples(pol.tokenizer, [2, 3], seed=seed))
        for s in samples:
            s.advantages = torch.zeros_like(s.advantages)
        return samples

    before = {k: v.clone() for k, v in pol.trainable_state_dict().items()}
    assert learner.update("shared", zero_samples(0))["weights_moved"] == 0.0
    assert all(torch.equal(before[k], v) for k, v in pol.trainable_state_dict().items())
    learner.update("shared", _fill_old(learner, "shared", _samples(pol.tokenizer, [2, 3], seed=1)))
    assert learner.update("shared", zero_samples(2))["weights_moved"] == 1.0
    decaying = Learner(build_policies("L1", ["a"], tiny_model_dir, device="cpu"), TrainConfig(lr=1e-2, weight_decay=0.1))
    assert decaying.update("shared", [UpdateSample([5, 6], [7], torch.zeros(1), None)])["weights_moved"] == 1.0
