"""Packing (prompt, completion) token sequences and scoring the completion tokens.

The layout is the one generation produces: prompts **left**-padded to a common width ``P``,
completions right-padded to ``Tc``, so every completion starts at column ``P``::

    [pad pad p1 p2 p3 | c1 c2 c3 pad]
    [pad p1 p2 p3 p4  | c1 pad pad pad]

Position ids count real tokens only (``cumsum(attention_mask) − 1``), as in generation, so the
log-probabilities of the training pass agree with those of the sampling pass. Only the last
``Tc + 1`` positions' logits are materialised (``logits_to_keep``) when the model supports it —
with a 150k-token vocabulary the full ``[B, L, V]`` logits would dominate memory.

**Shared prompts** (:func:`pack_shared_prompts`). AT-GRPO samples K candidates from every state,
so a micro-batch holds groups of rows with the same prompt. Such a batch runs each distinct prompt
once (``[m, P]``, keeping its key/value cache) and then every completion on its prompt's cache
(``[B, Tc]``), gradients flowing through the cache into the prompt's pass: the same
log-probabilities and gradients as :func:`pack_sequences` gives (up to floating-point order),
for ``m·P + B·Tc`` token positions instead of ``B·(P + Tc)`` — about K times fewer when prompts are
much longer than completions, as they are on the seed tasks.
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

__all__ = [
    "PackedBatch",
    "SharedPromptBatch",
    "bf16_autocast",
    "completion_logits",
    "completion_logprobs",
    "pack_for_scoring",
    "pack_sequences",
    "pack_shared_prompts",
    "pad_right",
    "shares_prompts",
]


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


@dataclass
class SharedPromptBatch:
    """Tensors of one micro-batch whose rows share prompts: each distinct prompt once.

    Attributes:
        prompt_ids: ``[m, P]``, the ``m`` distinct prompts, left-padded.
        prompt_mask: ``[m, P]``.
        prompt_position_ids: ``[m, P]`` (``cumsum(mask) − 1``, as :func:`pack_sequences`).
        prompt_lengths: ``[m]`` real tokens of each distinct prompt.
        prompt_index: ``[B]`` the distinct prompt of each row.
        completion_ids: ``[B, Tc]`` (pad where ``completion_mask`` is 0).
        completion_mask: ``[B, Tc]`` float, 1 on sampled tokens.
    """

    prompt_ids: Tensor
    prompt_mask: Tensor
    prompt_position_ids: Tensor
    prompt_lengths: Tensor
    prompt_index: Tensor
    completion_ids: Tensor
    completion_mask: Tensor

    def to(self, device: torch.device) -> SharedPromptBatch:
        return SharedPromptBatch(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))

    def unshared(self) -> PackedBatch:
        """The same rows as one :class:`PackedBatch`, every prompt repeated (what
        :func:`pack_sequences` gives for these rows)."""
        prompt_mask = self.prompt_mask[self.prompt_index]
        attention = torch.cat([prompt_mask, self.completion_mask.to(prompt_mask.dtype)], dim=1)
        return PackedBatch(
            torch.cat([self.prompt_ids[self.prompt_index], self.completion_ids], dim=1), attention,
            (attention.cumsum(dim=1) - 1).clamp(min=0), self.completion_ids, self.completion_mask,
            self.prompt_ids.shape[1],
        )


def pack_shared_prompts(prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]],
                        pad_id: int) -> SharedPromptBatch:
    """Each distinct prompt once (in order of first appearance), left-padded; completions
    right-padded, one row per (prompt, completion) pair as :func:`pack_sequences`."""
    if len(prompts) != len(completions):
        raise ValueError("prompts and completions differ in length")
    distinct: dict[tuple[int, ...], int] = {}
    index = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]
    unique = list(distinct)
    p_width = max(1, max(len(p) for p in unique))
    c_width = max(1, max(len(c) for c in completions))
    prompt_ids = torch.full((len(unique), p_width), pad_id, dtype=torch.long)
    prompt_mask = torch.zeros((len(unique), p_width), dtype=torch.long)
    for i, p in enumerate(unique):
        if p:
            prompt_ids[i, p_width - len(p):] = torch.as_tensor(p)
            prompt_mask[i, p_width - len(p):] = 1
    completion_ids = torch.full((len(completions), c_width), pad_id, dtype=torch.long)
    completion_mask = torch.zeros((len(completions), c_width), dtype=torch.float32)
    for i, c in enumerate(completions):
        if len(c):
            completion_ids[i, : len(c)] = torch.as_tensor(list(c))
            completion_mask[i, : len(c)] = 1.0
    return SharedPromptBatch(
        prompt_ids, prompt_mask, (prompt_mask.cumsum(dim=1) - 1).clamp(min=0),
        torch.tensor([len(p) for p in unique], dtype=torch.long), torch.tensor(index, dtype=torch.long),
        completion_ids, completion_mask,
    )


def shares_prompts(model: nn.Module) -> bool:
    """Whether ``model`` can score completions on a shared prompt's key/value cache: a
    transformers model whose forward takes a cache (``cache`` or ``past_key_values``) and that
    runs without activation checkpointing (which turns the cache off in training mode)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if _cache_argument(model) is None:
        return False
    return not any(getattr(m, "gradient_checkpointing", False) for m in base.modules())


def _cache_argument(model: nn.Module) -> str | None:
    """The forward's key/value cache argument: ``cache`` (transformers ≥ 5.20) or
    ``past_key_values`` (earlier, e.g. the 5.19 that vLLM's CPU build pins); None without one."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    try:
        params = inspect.signature(base.forward).parameters
    except (TypeError, ValueError):
        return None
    return next((name for name in ("cache", "past_key_values") if name in params), None)


def pack_for_scoring(model: nn.Module, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]],
                     pad_id: int, share_prompts: bool = True) -> PackedBatch | SharedPromptBatch:
    """:func:`pack_shared_prompts` where ``share_prompts`` is on, some prompt repeats in the batch
    and ``model`` can take it (:func:`shares_prompts`); :func:`pack_sequences` otherwise."""
    if share_prompts and len({tuple(p) for p in prompts}) < len(prompts) and shares_prompts(model):
        return pack_shared_prompts(prompts, completions, pad_id)
    return pack_sequences(prompts, completions, pad_id)


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


def completion_logits(model: nn.Module, batch: PackedBatch | SharedPromptBatch) -> Tensor:
    """``[B, Tc, V]``: the logits ``z_t`` that predict each completion token ``c_t`` (those at the
    position before it). Only these ``Tc`` positions go through the output layer when the model
    supports ``logits_to_keep``: the prompt's positions never reach the vocabulary projection."""
    if isinstance(batch, SharedPromptBatch):
        return _shared_prompt_logits(model, batch)
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


def _shared_prompt_logits(model: nn.Module, batch: SharedPromptBatch) -> Tensor:
    """The distinct prompts' pass (keeping the cache and the last position's logits), then every
    completion on its prompt's cache, selected row by row (``prompt_index``). A model that returns
    no reorderable cache (a custom forward that ignores ``use_cache``) has every row run whole."""
    name = _cache_argument(model)
    keep = {"logits_to_keep": 1} if _accepts_logits_to_keep(model) else {}
    out = model(input_ids=batch.prompt_ids, attention_mask=batch.prompt_mask,
                position_ids=batch.prompt_position_ids, use_cache=True, **keep)
    cache = getattr(out, name, None) if name else None
    if cache is None or not hasattr(cache, "reorder_cache"):
        return completion_logits(model, batch.unshared())
    first = out.logits[:, -1:, :][batch.prompt_index]  # [B, 1, V]: predicts c_1
    tc = batch.completion_ids.shape[1]
    if tc == 1:
        return first
    cache.reorder_cache(batch.prompt_index)  # row b reads prompt_index[b]'s keys and values
    attention = torch.cat([batch.prompt_mask[batch.prompt_index], batch.completion_mask.to(batch.prompt_mask.dtype)], dim=1)
    steps = torch.arange(tc, device=batch.completion_ids.device)
    position_ids = batch.prompt_lengths[batch.prompt_index][:, None] + steps[None, :]
    keep = {"logits_to_keep": tc} if keep else {}
    rest = model(input_ids=batch.completion_ids, attention_mask=attention, position_ids=position_ids,
                 use_cache=True, **{name: cache}, **keep).logits[:, :-1, :]  # predicts c_2 .. c_Tc
    return torch.cat([first, rest], dim=1)


def completion_logprobs(
    model: nn.Module,
    batch: PackedBatch | SharedPromptBatch,
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
