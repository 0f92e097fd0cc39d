"""The learner: per-policy AdamW, micro-batches with gradient accumulation, clipping, LR schedule.

One call of :meth:`Learner.update` trains one policy on its own samples:

.. code-block:: text

    for epoch in 1..E:                               (train.epochs, default 1)
        shuffle the samples                          (learner's own generator)
        for each mini-batch (one optimizer step):    (train.mini_batch_size; default: all)
            N = number of action tokens in the mini-batch
            for each micro-batch:                    (train.micro_batch_size samples)
                log π, H  = forward(prompt ⊕ completion)      (bf16 autocast on GPU; each distinct
                                                                prompt once: train.share_prompts)
                L_t = clipped_surrogate(log π, log π_old, A)
                      + β_loss · k(log π, log π_ref)          (KL as a loss term, optional)
                      − c_H · H_t                              (entropy bonus, optional)
                (Σ_t L_t m_t / N).backward()                   (token-mean over the whole step)
            clip ‖∇‖ to max_grad_norm; AdamW step
    LR scheduler step (once per update call = once per training iteration, also when the
    policy has no samples in it)

Because every micro-batch divides by the step's global token count ``N``, the accumulated
gradient equals that of one pass over the whole mini-batch, however it is cut.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from llm_trainers.algorithms.losses import (
    clipped_surrogate_loss,
    kl_estimate,
    token_mean,
)
from llm_trainers.algorithms.off_policy import corrected_surrogate_loss
from llm_trainers.batching import bf16_autocast, completion_logprobs, pack_for_scoring, pad_right
from llm_trainers.config import AsyncConfig, TrainConfig
from llm_trainers.policies import Policy, PolicySet

__all__ = ["MAX_STATS", "Learner", "UpdateSample", "lr_lambda", "shuffle_generator"]

#: Per-step loss statistics reduced by max over micro-batches (and ranks); the others are sums
#: of token-means over the step, i.e. the step's token-mean.
MAX_STATS = ("rmax", "is_max")


@dataclass
class UpdateSample:
    """One record's tensors for the update.

    Attributes:
        prompt_ids: Prompt tokens.
        completion_ids: Sampled tokens.
        advantages: ``[len(completion_ids)]`` token advantages.
        old_logprobs: ``[len(completion_ids)]`` log π_old (behaviour policy), or None: the
            update's own forward pass, detached (only where the update is one optimizer step,
            so that the weights have not moved when it is read; :meth:`Learner.update` checks).
        ref_logprobs: ``[len(completion_ids)]`` log π_ref, needed only for a KL loss term.
        behaviour_logprobs: ``[len(completion_ids)]`` log μ of the policy that sampled the
            tokens (the engine's), when it may differ from ``old_logprobs`` (asynchronous
            training); needed only for an off-policy correction.
    """

    prompt_ids: list[int]
    completion_ids: list[int]
    advantages: Tensor
    old_logprobs: Tensor | None
    ref_logprobs: Tensor | None = None
    behaviour_logprobs: Tensor | None = None


def lr_lambda(step: int, train: TrainConfig, total_steps: int) -> float:
    """LR multiplier at iteration ``step`` (0-based) of a run of ``total_steps`` iterations.

    warm-up: ``(step + 1) / warmup_steps`` for ``step < warmup_steps``; then with
    ``p = (step − warmup) / max(1, total − warmup)`` clipped to [0, 1] and ``m = min_lr_ratio``:
    constant ``1``; linear ``1 − (1 − m)·p``; cosine ``m + (1 − m)·(1 + cos(π p))/2``.
    """
    if train.warmup_steps > 0 and step < train.warmup_steps:
        return (step + 1) / train.warmup_steps
    if train.schedule == "constant":
        return 1.0
    p = min(1.0, max(0.0, (step - train.warmup_steps) / max(1, total_steps - train.warmup_steps)))
    m = train.min_lr_ratio
    if train.schedule == "linear":
        return 1.0 - (1.0 - m) * p
    if train.schedule == "cosine":
        return m + (1.0 - m) * 0.5 * (1.0 + math.cos(math.pi * p))
    raise ValueError(f"unknown schedule {train.schedule!r}; choose constant, linear or cosine")


def shuffle_generator(seed: int, position: int) -> torch.Generator:
    """The shuffling generator of the policy at ``position`` in the run's policy order."""
    return torch.Generator().manual_seed(seed * 1_000_003 + position)


def _chunks(items: Sequence[Any], size: int | None) -> Iterator[Sequence[Any]]:
    size = len(items) if not size or size <= 0 else size
    for i in range(0, len(items), size):
        yield items[i : i + size]


def by_length(prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]]) -> list[int]:
    """Indices ordered by (prompt length, prompt, completion length, completion), for cutting
    micro-batches.

    A micro-batch is padded to its longest prompt plus its longest completion, so micro-batches of
    similar lengths compute far fewer pad positions (a turn-2 prompt several times a turn-1 one
    would otherwise pad every micro-batch it lands in), and the rows of one prompt (a tree group's
    candidates) sit together, so a micro-batch runs that prompt once (``train.share_prompts``).
    The order changes nothing else: a step's loss is a token sum over its mini-batch divided by
    the mini-batch's token count, whichever micro-batch each sample is in. Ordered by content to
    the last token, the same samples are cut into the same micro-batches in any order they come
    in, so a scoring pass and the update compute the same numbers."""
    return sorted(range(len(prompts)),
                  key=lambda i: (len(prompts[i]), tuple(prompts[i]), len(completions[i]), tuple(completions[i])))


class Learner:
    """Trains the policies of a :class:`PolicySet`.

    Every setting of the update is a field of :class:`~llm_trainers.config.TrainConfig` (the
    run's ``train`` section, read as it is, not copied): optimizer (``lr``, ``lr_per_policy``,
    ``betas``, ``weight_decay``, ``adam_eps``, ``max_grad_norm``), schedule (``schedule``,
    ``warmup_steps``, ``min_lr_ratio``), batching (``micro_batch_size``, ``mini_batch_size``,
    ``num_mini_batches``, ``epochs``) and loss terms (``clip_low``, ``clip_high``,
    ``dual_clip``, ``kl_loss_coef``, ``kl_estimator``, ``entropy_coef``).

    Args:
        policies: The policies.
        train: The update settings (default: ``TrainConfig()``).
        total_steps: Training iterations the LR schedule spans (the run's ``run.steps``).
        temperature: Sampling temperature (log-probabilities are of the scaled policy).
        bf16: Autocast the forward pass to bfloat16 (``train.bf16`` resolved: GPU; allowed on
            CPU for testing).
        seed: Seed of the learner's shuffling generators (one stream per policy).
        off_policy: The off-policy correction of stale samples, ``rollout.async``'s
            ``correction`` and ``is_cap`` (:mod:`llm_trainers.algorithms.off_policy`; default:
            none). Unless ``none``, every sample needs ``behaviour_logprobs``.
    """

    def __init__(
        self,
        policies: PolicySet,
        train: TrainConfig | None = None,
        *,
        total_steps: int = 1000,
        temperature: float = 1.0,
        bf16: bool = False,
        seed: int = 0,
        off_policy: AsyncConfig | None = None,
    ) -> None:
        self.policies = policies
        self.off_policy = off_policy if off_policy is not None else AsyncConfig()
        self.cfg = train if train is not None else TrainConfig()
        self.total_steps = total_steps
        self.temperature = temperature
        self.bf16 = bf16
        # One shuffling stream per policy: a policy's updates never depend on another's.
        self.generators = {name: shuffle_generator(seed, i) for i, name in enumerate(policies.names())}
        self.optimizers: dict[str, torch.optim.Optimizer] = {}
        self.schedulers: dict[str, torch.optim.lr_scheduler.LambdaLR] = {}
        self.trained_tokens = 0
        t = self.cfg
        for pol in policies:
            params = pol.trainable_parameters()
            if not params:
                raise ValueError(f"policy {pol.name!r} has no trainable parameters")
            lr = t.lr_per_policy.get(pol.name, t.lr)
            opt = torch.optim.AdamW(params, lr=lr, betas=tuple(t.betas), eps=t.adam_eps, weight_decay=t.weight_decay)
            self.optimizers[pol.name] = opt
            self.schedulers[pol.name] = torch.optim.lr_scheduler.LambdaLR(
                opt, lambda s, t=t, n=total_steps: lr_lambda(s, t, n)
            )

    @property
    def micro_batch_size(self) -> int:
        """Samples per forward/backward pass (``train.micro_batch_size``)."""
        return self.cfg.micro_batch_size

    @property
    def share_prompts(self) -> bool:
        """Whether a micro-batch runs each distinct prompt once (``train.share_prompts``)."""
        return self.cfg.share_prompts

    # ------------------------------------------------------------------ scoring
    def _autocast(self, device: torch.device) -> contextlib.AbstractContextManager:
        return bf16_autocast(device, self.bf16)

    @torch.no_grad()
    def logprobs(self, policy: str, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]],
                 reference: bool = False) -> list[Tensor]:
        """``log π(c_t)`` (or ``log π_ref``) of each completion token, one 1-D tensor per sample."""
        pol = self.policies[policy]
        pad = pol.tokenizer.pad_token_id
        ctx = pol.reference() if reference else pol.activated()
        out: list[Tensor | None] = [None] * len(prompts)
        with ctx as model:
            for idx in _chunks(by_length(prompts, completions), self.micro_batch_size):
                batch = pack_for_scoring(model, [prompts[i] for i in idx], [completions[i] for i in idx], pad,
                                         self.share_prompts).to(pol.device)
                with self._autocast(pol.device):
                    lp, _ = completion_logprobs(model, batch, self.temperature)
                lp = lp.float().cpu()
                for row, i in enumerate(idx):
                    out[i] = lp[row, : len(completions[i])].clone()
        return out  # type: ignore[return-value]

    # ------------------------------------------------------------------ update
    def update(self, policy: str, samples: Sequence[UpdateSample]) -> dict[str, float]:
        """Train ``policy`` on ``samples`` (all of them this policy's own); return metrics."""
        pol = self.policies[policy]
        opt = self.optimizers[policy]
        cfg = self.cfg
        metrics: dict[str, list[float]] = {k: [] for k in ("loss", "pg_loss", "kl", "entropy", "clip_frac", "grad_norm", "ratio_max")}
        correct = self.off_policy.correction != "none"
        if correct:
            metrics.update({"is_ratio_mean": [], "is_ratio_max": [], "is_clip_frac": []})
            if any(s.behaviour_logprobs is None for s in samples):
                raise ValueError(f"off-policy correction {self.off_policy.correction!r} needs behaviour_logprobs "
                                 "on every sample")
        if samples and self.has_zero_gradient(samples):
            return self._zero_gradient_update(policy, samples)
        if any(s.old_logprobs is None for s in samples):
            if cfg.epochs != 1 or len(self._mini_batches(samples)) > 1 or any(s.old_logprobs is not None for s in samples):
                raise ValueError("samples without old_logprobs take log π_old from the update's forward pass: that "
                                 "needs one optimizer step (epochs 1, one mini-batch) and no sample with them")
        if not samples:
            # The schedule counts training iterations, not this policy's non-empty updates.
            self._step_schedule(policy)
            return {}
        need_entropy = cfg.entropy_coef != 0.0
        need_kl = cfg.kl_loss_coef != 0.0
        if need_kl and any(s.ref_logprobs is None for s in samples):
            raise ValueError("kl_loss_coef > 0 needs ref_logprobs on every sample")
        params = pol.trainable_parameters()
        pad = pol.tokenizer.pad_token_id
        was_training = pol.model.training
        pol.model.train()  # dropout is disabled at load; train mode enables gradient checkpointing
        try:
            with pol.activated() as model:
                for _ in range(self.cfg.epochs):
                    order = torch.randperm(len(samples), generator=self.generators[policy]).tolist()
                    for mini in self._mini_batches([samples[i] for i in order]):
                        n_tokens = sum(len(s.completion_ids) for s in mini)
                        if n_tokens == 0:
                            continue
                        opt.zero_grad(set_to_none=True)
                        sums = {"loss": 0.0, "pg": 0.0, "kl": 0.0, "ent": 0.0, "clip": 0.0, "rmax": 0.0}
                        if correct:
                            sums.update({"is_mean": 0.0, "is_max": 0.0, "is_clip": 0.0})
                        for micro, grad_scale in self._micro_batches(policy, mini):
                            stats = self._micro_step(model, pol, micro, n_tokens, pad, need_entropy, need_kl, grad_scale)
                            for k, v in stats.items():
                                sums[k] = max(sums[k], v) if k in MAX_STATS else sums[k] + v
                        sums = self._reduce_stats(policy, sums)
                        grad_norm = self._clip(params)
                        opt.step()
                        self.trained_tokens += n_tokens
                        metrics["loss"].append(sums["loss"])
                        metrics["pg_loss"].append(sums["pg"])
                        metrics["kl"].append(sums["kl"])
                        metrics["entropy"].append(sums["ent"])
                        metrics["clip_frac"].append(sums["clip"])
                        metrics["grad_norm"].append(grad_norm)
                        metrics["ratio_max"].append(sums["rmax"])
                        if correct:
                            metrics["is_ratio_mean"].append(sums["is_mean"])
                            metrics["is_ratio_max"].append(sums["is_max"])
                            metrics["is_clip_frac"].append(sums["is_clip"])
        finally:
            pol.model.train(was_training)
        lr = opt.param_groups[0]["lr"]
        self._step_schedule(policy)
        out = {k: float(sum(v) / len(v)) for k, v in metrics.items() if v}
        out["lr"] = lr
        out["samples"] = float(len(samples))
        return out

    def has_zero_gradient(self, samples: Sequence[UpdateSample]) -> bool:
        """Whether an update on ``samples`` has an exactly zero gradient: every advantage is 0
        and the loss has no KL or entropy term (the policy-gradient term is advantage × ratio)."""
        return (
            self.cfg.kl_loss_coef == 0.0
            and self.cfg.entropy_coef == 0.0
            and not any(bool(s.advantages.ne(0).any()) for s in samples)
        )

    def _zero_gradient_update(self, policy: str, samples: Sequence[UpdateSample]) -> dict[str, float]:
        """The update :meth:`update` would make on ``samples`` whose gradient is zero
        (:meth:`has_zero_gradient`), without its forward and backward passes: the same
        optimizer steps (one per non-empty mini-batch of each epoch) on zero gradients, so
        AdamW's momentum and weight decay move the weights as the released code's step does,
        the shuffle generator advances as in a full update, and the schedule steps once. No
        ``log π_old``/``log π_ref`` are needed (the samples may carry None). ``weights_moved`` is
        0 where the steps cannot have moved a weight (no momentum yet and no weight decay, e.g. an
        adapter never trained): the trainer then pushes nothing to the engine."""
        pol = self.policies[policy]
        opt = self.optimizers[policy]
        params = pol.trainable_parameters()
        moved = any(group["lr"] != 0 and group.get("weight_decay", 0) != 0 for group in opt.param_groups) or any(
            bool(torch.count_nonzero(opt.state[p]["exp_avg"])) for p in params if "exp_avg" in opt.state.get(p, {})
        )
        steps = 0
        for _ in range(self.cfg.epochs):
            order = torch.randperm(len(samples), generator=self.generators[policy]).tolist()
            for mini in self._mini_batches([samples[i] for i in order]):
                if sum(len(s.completion_ids) for s in mini) == 0:
                    continue
                opt.zero_grad(set_to_none=True)
                for param in params:
                    param.grad = torch.zeros_like(param)
                self._clip(params)
                opt.step()
                steps += 1
        opt.zero_grad(set_to_none=True)
        lr = opt.param_groups[0]["lr"]
        self._step_schedule(policy)
        return {"lr": lr, "samples": float(len(samples)), "grad_norm": 0.0, "zero_gradient_steps": float(steps),
                "weights_moved": float(moved and steps > 0)}

    def update_all(self, samples: dict[str, Sequence[UpdateSample]]) -> dict[str, dict[str, float]]:
        """:meth:`update` every policy named in ``samples`` (in its order); metrics per policy.
        A learner whose policies live on separate devices may train them concurrently."""
        return {policy: self.update(policy, batch) for policy, batch in samples.items()}

    def _step_schedule(self, policy: str) -> None:
        """Advance ``policy``'s LR schedule by one training iteration (with or without an
        optimizer step in it: torch's warning about that order is expected here)."""
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler\.step\(\)`")
            self.schedulers[policy].step()

    def _mini_batches(self, items: Sequence[Any]) -> list[Sequence[Any]]:
        """``items`` cut into the mini-batches of one epoch (one optimizer step each):
        ``num_mini_batches`` of them (or one per item, if fewer) whose sizes differ by at most
        one, else chunks of ``mini_batch_size`` (all of them where it is null)."""
        wanted = self.cfg.num_mini_batches
        if not wanted:
            return list(_chunks(items, self.cfg.mini_batch_size))
        count = min(len(items), wanted)
        if count == 0:
            return []
        size, extra = divmod(len(items), count)
        cuts = [0]
        for i in range(count):
            cuts.append(cuts[-1] + size + (1 if i < extra else 0))
        return [items[a:b] for a, b in zip(cuts, cuts[1:])]

    def _micro_batches(self, policy: str, mini: Sequence[UpdateSample]) -> Iterator[tuple[Sequence[UpdateSample], float]]:
        """The micro-batches of one optimizer step, each with the factor its loss is multiplied by
        before ``backward`` (1 here; a data-parallel learner takes its share of ``mini``)."""
        order = by_length([s.prompt_ids for s in mini], [s.completion_ids for s in mini])
        for micro in _chunks([mini[i] for i in order], self.micro_batch_size):
            yield micro, 1.0

    def _reduce_stats(self, policy: str, sums: dict[str, float]) -> dict[str, float]:
        """An optimizer step's loss statistics over every process that computed a part of it."""
        return sums

    def _micro_step(self, model: torch.nn.Module, pol: Policy, micro: Sequence[UpdateSample], n_tokens: int,
                    pad: int, need_entropy: bool, need_kl: bool, grad_scale: float = 1.0) -> dict[str, float]:
        """Forward and backward of one micro-batch; ``grad_scale`` multiplies the loss for the
        backward pass only (0: a pass that keeps data-parallel ranks in step and adds nothing)."""
        cfg = self.cfg
        device = pol.device
        batch = pack_for_scoring(model, [s.prompt_ids for s in micro], [s.completion_ids for s in micro], pad,
                                 self.share_prompts).to(device)
        width = batch.completion_ids.shape[1]
        mask = batch.completion_mask
        adv = pad_right([s.advantages.tolist() for s in micro], width).to(device)
        with self._autocast(device):
            logp, entropy = completion_logprobs(model, batch, self.temperature, with_entropy=need_entropy)
        logp = logp.float()
        if micro[0].old_logprobs is None:  # one optimizer step: the weights are still π_old's
            old = logp.detach()
        else:
            old = pad_right([s.old_logprobs.tolist() for s in micro], width).to(device)
        off = None
        correction = self.off_policy.correction
        if correction == "none":
            pg_tok, st = clipped_surrogate_loss(logp, old, adv, cfg.clip_low, cfg.clip_high, cfg.dual_clip)
        else:  # old = π_prox (the learner before this update); the samples' own engine gave log μ
            behaviour = pad_right([s.behaviour_logprobs.tolist() for s in micro], width).to(device)
            pg_tok, st, off = corrected_surrogate_loss(logp, old, behaviour, adv, correction, self.off_policy.is_cap,
                                                       cfg.clip_low, cfg.clip_high, cfg.dual_clip)
        loss_tok = pg_tok
        kl_val = torch.zeros((), device=device)
        if need_kl:
            ref = pad_right([s.ref_logprobs.tolist() for s in micro], width).to(device)
            kl_tok = kl_estimate(logp, ref, cfg.kl_estimator)
            loss_tok = loss_tok + cfg.kl_loss_coef * kl_tok
            kl_val = token_mean(kl_tok.detach(), mask, n_tokens)
        ent_val = torch.zeros((), device=device)
        if need_entropy:
            loss_tok = loss_tok - cfg.entropy_coef * entropy.float()
            ent_val = token_mean(entropy.detach().float(), mask, n_tokens)
        loss = token_mean(loss_tok, mask, n_tokens)
        (loss * grad_scale).backward()
        keys = ("loss", "pg", "kl", "ent", "clip", "rmax") + (("is_mean", "is_max", "is_clip") if off is not None else ())
        if grad_scale == 0.0:
            return dict.fromkeys(keys, 0.0)
        extra = {}
        if off is not None:
            extra = {
                "is_mean": float(token_mean(off.ratio, mask, n_tokens)),
                "is_max": float((off.ratio * mask).max()) if mask.sum() > 0 else 1.0,
                "is_clip": float(token_mean(off.clipped, mask, n_tokens)),
            }
        return {**extra,
            "loss": float(loss.detach()),
            "pg": float(token_mean(pg_tok.detach(), mask, n_tokens)),
            "kl": float(kl_val),
            "ent": float(ent_val),
            "clip": float(token_mean(st.clipped, mask, n_tokens)),
            "rmax": float((st.ratio * mask).max()) if mask.sum() > 0 else 1.0,
        }

    def _clip(self, params: list[torch.nn.Parameter]) -> float:
        with_grad = [p for p in params if p.grad is not None]
        if not with_grad:
            return 0.0
        max_norm = self.cfg.max_grad_norm
        if max_norm:
            return float(torch.nn.utils.clip_grad_norm_(with_grad, max_norm))
        return float(torch.norm(torch.stack([p.grad.detach().norm() for p in with_grad])))

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "schedulers": {k: s.state_dict() for k, s in self.schedulers.items()},
            "generators": {k: g.get_state() for k, g in self.generators.items()},
            "trained_tokens": self.trained_tokens,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for k, o in self.optimizers.items():
            o.load_state_dict(state["optimizers"][k])
        for k, s in self.schedulers.items():
            s.load_state_dict(state["schedulers"][k])
        for k, g in self.generators.items():
            g.set_state(state["generators"][k])
        self.trained_tokens = int(state.get("trained_tokens", 0))

