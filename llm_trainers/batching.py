"""Packing (prompt, completion) token sequences and scoring the completion tokens.

The layout is the one generation produces: prompts **left**-padded to a common width ``P``,
completions right-padded to ``Tc``, so every completion starts at column ``P``::

    [pad pad p1 p2 p3 | c1 c2 c3 pad]
    [pad p1 p2 p3 p4  | c1 pad pad pad]

Position ids count real tokens only (``cumsum(attention_mask) − 1``), as in generation, so the
log-probabilities of the training pass agree with those of the sampling pass. Only the last
``Tc + 1`` positions' logits are materialised (``logits_to_keep``) when the model supports it —
with a 150k-token vocabulary the full ``[B, L, V]`` logits would dominate memory.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from llm_trainers.algorithms.losses import (
    entropy_from_logits,
    token_logprobs_from_logits,
)

__all__ = ["PackedBatch", "bf16_autocast", "completion_logits", "completion_logprobs", "pack_sequences", "pad_right"]


@dataclass
class PackedBatch:
    """Tensors of one micro-batch.

    Attributes:
        input_ids: ``[B, P + Tc]``.
        attention_mask: ``[B, P + Tc]``.
        position_ids: ``[B, P + Tc]``.
        completion_ids: ``[B, Tc]`` (pad where ``completion_mask`` is 0).
        completion_mask: ``[B, Tc]`` float, 1 on sampled tokens.
        prompt_width: ``P``.
    """

    input_ids: Tensor
    attention_mask: Tensor
    position_ids: Tensor
    completion_ids: Tensor
    completion_mask: Tensor
    prompt_width: int

    def to(self, device: torch.device) -> PackedBatch:
        return PackedBatch(
            self.input_ids.to(device),
            self.attention_mask.to(device),
            self.position_ids.to(device),
            self.completion_ids.to(device),
            self.completion_mask.to(device),
            self.prompt_width,
        )


def pad_right(rows: Sequence[Sequence[float]], width: int | None = None, value: float = 0.0,
              dtype: torch.dtype = torch.float32) -> Tensor:
    """Stack variable-length rows into ``[B, width]``, right-padded with ``value``."""
    width = max((len(r) for r in rows), default=0) if width is None else width
    out = torch.full((len(rows), width), value, dtype=dtype)
    for i, r in enumerate(rows):
        if len(r):
            out[i, : len(r)] = torch.as_tensor(list(r), dtype=dtype)
    return out


def pack_sequences(prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]], pad_id: int) -> PackedBatch:
    """Left-pad prompts and right-pad completions into one :class:`PackedBatch`."""
    if len(prompts) != len(completions):
        raise ValueError("prompts and completions differ in length")
    p_width = max(len(p) for p in prompts)
    c_width = max(1, max(len(c) for c in completions))
    b = len(prompts)
    input_ids = torch.full((b, p_width + c_width), pad_id, dtype=torch.long)
    attention = torch.zeros((b, p_width + c_width), dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompts, completions)):
        if len(p):
            input_ids[i, p_width - len(p) : p_width] = torch.as_tensor(list(p))
            attention[i, p_width - len(p) : p_width] = 1
        if len(c):
            input_ids[i, p_width : p_width + len(c)] = torch.as_tensor(list(c))
            attention[i, p_width : p_width + len(c)] = 1
    position_ids = (attention.cumsum(dim=1) - 1).clamp(min=0)
    completion_ids = input_ids[:, p_width:].clone()
    completion_mask = attention[:, p_width:].to(torch.float32)
    return PackedBatch(input_ids, attention, position_ids, completion_ids, completion_mask, p_width)


def bf16_autocast(device: torch.device, enabled: bool) -> contextlib.AbstractContextManager:
    """bfloat16 autocast of a forward pass on ``device`` when ``enabled`` (the run's ``train.bf16``,
    resolved), else nothing: the learner's and the warm start's passes use the same switch."""
    if not enabled:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def _accepts_logits_to_keep(model: nn.Module) -> bool:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    try:
        return "logits_to_keep" in inspect.signature(base.forward).parameters
    except (TypeError, ValueError):
        return False


def completion_logits(model: nn.Module, batch: PackedBatch) -> Tensor:
    """``[B, Tc, V]``: the logits ``z_t`` that predict each completion token ``c_t`` (those at the
    position before it). Only these ``Tc`` positions go through the output layer when the model
    supports ``logits_to_keep``: the prompt's positions never reach the vocabulary projection."""
    tc = batch.completion_ids.shape[1]
    kwargs = {
        "input_ids": batch.input_ids,
        "attention_mask": batch.attention_mask,
        "position_ids": batch.position_ids,
        "use_cache": False,
    }
    if _accepts_logits_to_keep(model):
        kwargs["logits_to_keep"] = tc + 1
        return model(**kwargs).logits[:, :-1, :]
    return model(**kwargs).logits[:, batch.prompt_width - 1 : -1, :]


def completion_logprobs(
    model: nn.Module,
    batch: PackedBatch,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """Log-probabilities (and optionally entropies) of the completion tokens.

    ``log π(c_t | prompt, c_<t) = log softmax(z_t / τ)[c_t]`` where ``z_t`` are the logits at the
    position before ``c_t`` (:func:`completion_logits`) and ``τ`` the sampling temperature (the
    policy that sampled is the temperature-scaled one; ``τ ≤ 0`` means greedy and uses ``τ = 1``).

    Returns:
        ``(logp [B, Tc], entropy [B, Tc] or None)``; values at masked positions are meaningless
        and must be masked by the caller.
    """
    logits = completion_logits(model, batch)
    if temperature and temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    logp = token_logprobs_from_logits(logits, batch.completion_ids)
    entropy = entropy_from_logits(logits) if with_entropy else None
    return logp, entropy
