"""Sampling parameters of the HF and vLLM engines, and the record of what a run sampled with.

Torch-free, so that ``llm_envs`` can compute a model agent's effective settings (its run
fingerprint) from a spec without loading a model (``llm_envs.agents.spec.spec_settings``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEFAULT_SAMPLING_SEED", "SamplingParams", "effective_sampling", "sampling_record"]

#: The seed of a stand-alone model agent's sampling generator when none is given.
DEFAULT_SAMPLING_SEED = 0


@dataclass
class SamplingParams:
    """Sampling parameters shared by the HF and vLLM engines.

    Attributes:
        temperature: Softmax temperature; ``0`` means greedy decoding (the default, 1.0, is the
            papers' and samples from the model's own distribution).
        top_p: Nucleus sampling mass (1.0 = off).
        top_k: Keep the ``k`` most likely tokens (0 = off).
        max_new_tokens: Completion length limit (≥ 1: a local engine has no server default).
        stop_token_ids: Extra token ids that end a completion (the tokenizer's EOS always does).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 256
    stop_token_ids: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0 (0 = off), got {self.top_k}")
        if self.max_new_tokens < 1:
            raise ValueError(
                f"max_new_tokens must be >= 1, got {self.max_new_tokens} (a local model has no server "
                "default to fall back on: give the completion limit)"
            )


def sampling_record(params: SamplingParams, seed: int) -> dict[str, Any]:
    """Every setting that shapes what is sampled, defaults included (for ``run.json``)."""
    record = dataclasses.asdict(params)
    record["seed"] = int(seed)
    return record


def effective_sampling(options: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`sampling_record` of the agent that a spec's options build (``max_tokens`` is
    ``max_new_tokens``; ``seed`` defaults to :data:`DEFAULT_SAMPLING_SEED`), without building it."""
    names = {f.name for f in dataclasses.fields(SamplingParams)}
    given = dict(options)
    if "max_tokens" in given and "max_new_tokens" not in given:
        given["max_new_tokens"] = given.pop("max_tokens")
    params = SamplingParams(**{k: v for k, v in given.items() if k in names})
    return sampling_record(params, given.get("seed", DEFAULT_SAMPLING_SEED))
